"""Checkers for the exercises of the chapter *CateKV: consistent heads, adaptive heads and a hybrid KV cache*.

* :func:`check_head_cv` -- exercise 1, the CV of each head from its window attention, eqs.
  (catekv-threshold), (catekv-hits) and (catekv-cv), 2 points;
* :func:`check_kv_bytes` -- exercise 2, the bytes a CateKV cache keeps, eq. (catekv-bytes), 2 points.

Each runs the student's function on cases built to expose one classic mistake and names it,
comparing with :mod:`companion.catekv` (the CV of :func:`~companion.catekv.heads.head_cv`, the byte
accounting of :func:`~companion.catekv.cache.kv_bytes`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from companion.catekv.cache import kv_bytes
from companion.catekv.heads import head_cv
from companion.exercises import Report, eq

__all__ = ["check_head_cv", "check_kv_bytes"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_head_cv": ("companion.catekv.heads.head_cv", "companion.catekv.heads.chunk_hits"),
              "check_kv_bytes": ("companion.catekv.cache.kv_bytes",)}


def _cases() -> dict[str, tuple[torch.Tensor, int, float]]:
    g = torch.Generator().manual_seed(0)
    W, M, c = 8, 12, 4
    noisy = torch.rand(3, W, M * c, generator=g) * 0.01
    noisy[0, :, 5] = 0.9  # head 0: every query on chunk 1 (consistent)
    for q in range(W):
        noisy[1, q, (q % M) * c + 2] = 0.8  # head 1: every query on a different chunk (adaptive)
    noisy[2] = noisy[2] * 0.001  # head 2: tiny weights everywhere (a threshold shared across heads misses it)
    noisy[2, :4, 9] = noisy[2, 4:, 30] = 0.002
    spread = torch.full((2, W, M * c), 1e-3)
    spread[:, :, 0::2 * c] = 0.05  # one strong token in every even chunk
    spread[0, :, 1] = 0.2  # head 0: chunk 0 stronger still
    for j in range(1, M, 2):  # head 1: odd chunks hold four tokens, each below the threshold, whose sum is above
        spread[1, :, j * c:(j + 1) * c] = 0.02
    hits_half = torch.full((1, W, M * c), 0.01)
    hits_half[0, :, torch.arange(M // 2) * c] = 0.5  # half the chunks hit by every query: closed form
    empty = torch.zeros(1, W, M * c)  # nothing stands out (constant map): the mean guard
    return {"planted": (noisy, c, 0.5), "sum-vs-max": (spread, c, 0.5), "closed-form": (hits_half, c, 0.5),
            "constant": (empty, c, 0.5)}


def check_head_cv(fn: Callable) -> Report:
    """Check ``fn(attn_mid [H, W, T], chunk, top_threshold) -> cv [H]`` (top_fraction = 1)."""
    report = Report("Exercise 1 (the CV of each head)", points=2)
    for name, (attn, c, k) in _cases().items():
        got = report.call(fn, attn.clone(), c, k, what=f"case {name!r}, attn_mid of shape {tuple(attn.shape)}")
        if got is None:
            return report
        try:
            got = torch.as_tensor(got, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError):
            report.check(False, f"case {name!r}: returned {type(got).__name__}, not a tensor of one CV per head")
            return report
        want = head_cv(attn, c, k, 1.0).double()
        if not report.check(got.shape == want.shape, f"case {name!r}: returned {got.numel()} values for "
                            f"{attn.shape[0]} heads; return one CV per head"):
            return report
        if not torch.isfinite(got).all():
            report.check(False, f"case {name!r}: returned {got.tolist()}; when no chunk is ever hit the mean is 0: "
                                "guard the division (the paper replaces a zero mean by 1e-10)")
            continue
        if torch.allclose(got, want, rtol=1e-6, atol=1e-9):
            report.check(True, "")
            continue
        hits_biased = want * math.sqrt((attn.shape[-1] // c - 1) / (attn.shape[-1] // c))
        if torch.allclose(got, hits_biased, rtol=1e-6, atol=1e-9):
            problem = "the population std (divides by M); the CV here uses the unbiased std (M - 1)"
        elif name == "planted" and got[2] < want[2] - 1e-6 and torch.allclose(got[:2], want[:2], rtol=1e-6):
            problem = (f"head 2 (tiny weights) is off: the threshold of {eq('catekv-threshold')} is computed per "
                       "head from that head's own values, not once for all heads")
        elif torch.allclose(got[want > 0], 1 / want[want > 0], rtol=1e-6):
            problem = f"you return mean/std: the CV of {eq('catekv-cv')} is std/mean (high = consistent)"
        elif name == "sum-vs-max":
            problem = (f"a chunk is hit when its *largest* weight exceeds the threshold, not its sum, and hits are "
                       f"counted per query ({eq('catekv-hits')})")
        else:
            problem = f"the values differ from {eq('catekv-cv')}"
        report.check(False, f"case {name!r}: you return {[round(x, 4) for x in got.tolist()]}, expected "
                            f"{[round(x, 4) for x in want.tolist()]}: {problem}.")
    return report


def _expected_bytes(n, layers, kv_heads, head_dim, adaptive_ratio, budget, tail, generated) -> int:
    """The package's byte accounting for the kept lengths of exercise 2: round(r Hkv) adaptive KV heads per
    layer keep n + g tokens, the others min(n, budget + tail) + g."""
    n_adapt = round(adaptive_ratio * kv_heads)
    per_layer = [n + generated] * n_adapt + [min(n, budget + tail) + generated] * (kv_heads - n_adapt)
    return kv_bytes([per_layer] * layers, head_dim)


def check_kv_bytes(fn: Callable) -> Report:
    """Check ``fn(n, layers, q_heads, kv_heads, head_dim, adaptive_ratio, budget, tail, generated) -> bytes`` (fp16)."""
    report = Report("Exercise 2 (KV byte accounting)", points=2)
    cases = [(131_072, 32, 32, 8, 128, 0.5, 2048, 32, 0), (131_072, 32, 32, 8, 128, 0.25, 2048, 32, 100),
             (256, 3, 4, 4, 16, 0.25, 48, 8, 23), (4096, 2, 8, 2, 64, 0.0, 512, 0, 7)]
    for args in cases:
        got = report.call(fn, *args, what=f"arguments {args}")
        if got is None:
            return report
        n, layers, hq, hkv, d, r, budget, tail, g = args
        want = _expected_bytes(n, layers, hkv, d, r, budget, tail, g)
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            report.check(False, f"for {args} you return {type(got).__name__}; return a number of bytes")
            continue
        if got == want:
            report.check(True, "")
            continue
        hints = {
            "you count K only: the cache holds K and V (factor 2)": want / 2,
            "you count 4 bytes per element (fp32): the accounting is fp16 (2 bytes)": want * 2,
            "you count query heads: the cache is per KV head (GQA shares K/V across a group)":
                _expected_bytes(n, layers, hq, d, r, budget, tail, g),
            "you forget the tail the consistent heads keep (n - chunk_end)":
                _expected_bytes(n, layers, hkv, d, r, budget, 0, g),
            "you forget the tokens generated after the prompt (they go to every head)":
                _expected_bytes(n, layers, hkv, d, r, budget, tail, 0),
            "you swapped the groups: the adaptive heads (a fraction r) keep everything":
                _expected_bytes(n, layers, hkv, d, 1 - r, budget, tail, g),
        }
        named = [h for h, v in hints.items() if got == v and v != want]
        report.check(False, f"for {args} you return {got}, {eq('catekv-bytes')} gives {want}"
                            + (f": {named[0]}." if named else "."))
    return report
