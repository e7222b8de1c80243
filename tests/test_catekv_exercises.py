"""The CateKV exercise checkers: a right answer passes with its points, each classic mistake is named,
a stub is reported as not done, and no solution is exported."""

import torch

import companion.exercises.catekv as ex
from companion.catekv.cache import kv_bytes
from companion.catekv.heads import head_cv


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


def _kv(n, layers, hq, hkv, d, r, budget, tail, g, *, bpe=2, kv=2, heads=None, drop_tail=False, drop_g=False):
    heads = hkv if heads is None else heads
    na = round(r * heads)
    tail = 0 if drop_tail else tail
    g = 0 if drop_g else g
    toks = na * (n + g) + (heads - na) * (min(n, budget + tail) + g)
    return kv * bpe * d * layers * toks


def test_head_cv_checker_accepts_the_package_and_a_right_answer():
    for fn in (lambda a, c, k: head_cv(a, c, k, 1.0), _cv):
        report = ex.check_head_cv(fn)
        assert report.passed and repr(report) == "2" and "2 of 2 points" in str(report)


def test_head_cv_checker_names_mistakes():
    def problems(**kw):
        return " ".join(ex.check_head_cv(lambda a, c, k: _cv(a, c, k, **kw)).problems)

    assert "unbiased" in problems(unbiased=False)
    assert "per head" in problems(per_head=False) and "eq. (" in problems(per_head=False)
    assert "largest" in problems(reduce="sum")
    assert "guard" in problems(guard=False)
    assert "std/mean" in problems(flip=True)
    assert "raised ZeroDivisionError" in " ".join(ex.check_head_cv(lambda a, c, k: 1 / 0).problems)
    assert "one CV per head" in " ".join(ex.check_head_cv(lambda a, c, k: torch.zeros(7)).problems)
    assert not ex.check_head_cv(lambda a, c, k: _cv(a, c, k, per_head=False)).passed


def test_kv_bytes_checker_accepts_a_right_answer_and_names_mistakes():
    assert ex.check_kv_bytes(_kv).passed and repr(ex.check_kv_bytes(_kv)) == "2"

    def problems(**kw):
        return " ".join(ex.check_kv_bytes(lambda *a: _kv(*a, **kw)).problems)

    assert "K and V" in problems(kv=1)
    assert "fp16" in problems(bpe=4)
    assert "KV head" in ex.check_kv_bytes(lambda n, l, hq, *rest: _kv(n, l, hq, *rest, heads=hq)).problems[0]
    assert "tail" in problems(drop_tail=True)
    assert "generated" in problems(drop_g=True)
    assert "eq. (" in problems(kv=1) and "catekv-" not in problems(kv=1)
    assert "return a number" in " ".join(ex.check_kv_bytes(lambda *a: "many").problems)


def test_kv_bytes_checker_uses_the_package_accounting():
    # Llama-3-8B at 128K, every head full: 16 GiB, as kv_bytes counts it
    assert kv_bytes([[131_072] * 8] * 32, 128) == 16 * 2**30 == _kv(131_072, 32, 32, 8, 128, 1.0, 2048, 32, 0)
    assert not hasattr(ex, "kv_bytes_answer") and set(ex.__all__) == {"check_head_cv", "check_kv_bytes"}

