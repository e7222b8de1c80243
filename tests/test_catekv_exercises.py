"""The CateKV exercise checkers: a right answer passes, and each classic mistake is named."""

import math

import torch

from companion.catekv.heads import head_cv
from companion.exercises import catekv as ex


def test_head_cv_checker_accepts_the_package():
    assert ex.check_head_cv(lambda a, c, k: head_cv(a, c, k, 1.0)).passed


def _cv(attn, c, k, *, unbiased=True, per_head=True, reduce="max", guard=True, flip=False):
    H, W, T = attn.shape
    if per_head:
        lo, hi = attn.flatten(1).min(1).values, attn.flatten(1).max(1).values
    else:
        lo, hi = attn.min().expand(H), attn.max().expand(H)
    tau = (lo + k * (hi - lo))[:, None, None]
    chunks = attn.view(H, W, T // c, c)
    per_chunk = chunks.amax(-1) if reduce == "max" else chunks.sum(-1)
    hits = (per_chunk > tau).sum(1).float()
    std, mean = hits.std(-1, unbiased=unbiased), hits.mean(-1)
    if guard:
        mean = torch.where(mean == 0, torch.full_like(mean, 1e-10), mean)
    return mean / std if flip else std / mean


def test_head_cv_checker_names_mistakes():
    assert ex.check_head_cv(_cv).passed  # a from-scratch right answer
    assert any("unbiased" in p for p in ex.check_head_cv(lambda a, c, k: _cv(a, c, k, unbiased=False)).problems)
    assert any("per head" in p for p in ex.check_head_cv(lambda a, c, k: _cv(a, c, k, per_head=False)).problems)
    assert any("largest" in p for p in ex.check_head_cv(lambda a, c, k: _cv(a, c, k, reduce="sum")).problems)
    assert any("guard" in p for p in ex.check_head_cv(lambda a, c, k: _cv(a, c, k, guard=False)).problems)
    assert any("std/mean" in p for p in ex.check_head_cv(lambda a, c, k: _cv(a, c, k, flip=True)).problems)
    assert any("raised" in p for p in ex.check_head_cv(lambda a, c, k: 1 / 0).problems)


def test_kv_bytes_checker():
    assert ex.check_kv_bytes(ex.kv_bytes_answer).passed

    def variant(**change):
        def fn(n, layers, hq, hkv, d, r, budget, tail, g):
            a = dict(n=n, layers=layers, hq=hq, hkv=hkv, d=d, r=r, budget=budget, tail=tail, g=g, bpe=2, kv=2)
            a.update(change)
            heads = a["hq"] if change.get("hq") == "q" else a["hkv"]
            if heads == "q":
                heads = hq
            na = round(a["r"] * heads)
            toks = na * (n + a["g"]) + (heads - na) * (min(n, budget + a["tail"]) + a["g"])
            return a["kv"] * a["bpe"] * d * layers * toks
        return fn

    assert any("K and V" in p for p in ex.check_kv_bytes(variant(kv=1)).problems)
    assert any("fp16" in p for p in ex.check_kv_bytes(variant(bpe=4)).problems)
    assert any("KV head" in p for p in ex.check_kv_bytes(variant(hq="q")).problems)
    assert any("tail" in p for p in ex.check_kv_bytes(variant(tail=0)).problems)
    assert any("generated" in p for p in ex.check_kv_bytes(variant(g=0)).problems)
    assert math.isclose(ex.kv_bytes_answer(131072, 32, 32, 8, 128, 1.0, 2048, 32, 0), 16 * 2**30)
