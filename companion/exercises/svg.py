"""Checkers for the exercises of the chapter *Sparse VideoGen*.

* :func:`check_temporal_block_mask` -- exercise 1, the block mask of a temporal head after the
  layout transformation (``svg-perm``), 2 points;
* :func:`check_online_softmax` -- exercise 2, one step of the kernel's online softmax
  (``svg-online``), 2 points.

Each runs the student's function on cases built to expose one mistake each and names it: the
first against the package's own masks (:mod:`companion.svg.masks`), the second against a plain
softmax. No solution is exported here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from companion.exercises import Report, eq
from companion.svg.layout import VideoLayout
from companion.svg.masks import band_mask, to_blocks

__all__ = ["check_temporal_block_mask", "check_online_softmax"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_temporal_block_mask": ("companion.svg.masks.band_mask",),  # to_blocks pools: a tool
              "check_online_softmax": ()}


# --- exercise 1 ----------------------------------------------------------------------------------

def _want(layout: VideoLayout, width: int, block: int) -> torch.Tensor:
    """The package's answer: in token-major positions the temporal pattern is the band that
    :func:`~companion.svg.masks.band_mask` draws in frame-major order for a spatial head."""
    return to_blocks(band_mask(layout, width, "frame"), block)


def _variants(layout, width, block):
    n, c = layout.n, layout.c
    idx = torch.arange(n)
    d = (idx[:, None] - idx[None, :]).abs()
    no_cond = to_blocks(d < width, block)
    inclusive = d <= width
    inclusive[:c] = True
    inclusive[:, :c] = True
    return {
        "frame-major": to_blocks(band_mask(layout, width, "token"), block),
        "no condition": no_cond,
        "inclusive": to_blocks(inclusive, block),
    }


def check_temporal_block_mask(fn: Callable) -> Report:
    """Check ``fn(layout, width, block) -> bool [nb, nb]``, the block mask a temporal head runs with
    after its tokens are moved to token-major order (band ``|i - j| < width`` plus condition tokens)."""
    report = Report("Exercise 1 (the temporal block mask)", points=2)
    cases = [(VideoLayout(16, 8, 64), 64, 16), (VideoLayout(16, 4, 16), 8, 16), (VideoLayout(32, 8, 64), 64, 32),
             (VideoLayout(16, 5, 12), 17, 16)]  # the last: N = 76, not a multiple of 16
    for layout, width, block in cases:
        name = f"c = {layout.c}, F = {layout.frames}, S = {layout.frame_size}, width = {width}, block = {block}"
        want = _want(layout, width, block)
        got = report.call(fn, layout, width, block, what=name)
        if report.not_done:
            return report
        if got is None:
            continue
        if not report.check(isinstance(got, torch.Tensor) and got.dtype == torch.bool,
                            f"{name}: expected a bool tensor, got {getattr(got, 'dtype', type(got).__name__)}"):
            continue
        if not report.check(tuple(got.shape) == tuple(want.shape),
                            f"{name}: shape {tuple(got.shape)}, expected {tuple(want.shape)}: N = {layout.n} "
                            f"needs ceil(N / block) = {want.shape[0]} blocks per side (the last one short)"):
            continue
        if torch.equal(got, want):
            report.check(True, "")
            continue
        v = _variants(layout, width, block)
        if torch.equal(got, v["frame-major"]):
            msg = (f"{name}: this is the temporal mask taken to blocks in *frame-major* order (density "
                   f"{got.float().mean():.2f} instead of {want.float().mean():.2f}): the stripes of stride S touch "
                   f"almost every block. Build the band in token-major positions ({eq('svg-perm')}), where "
                   "it is a diagonal.")
        elif torch.equal(got, v["no condition"]):
            msg = (f"{name}: the condition (text) rows and columns are missing: every video query must see the "
                   "condition tokens and every condition query everything (the attention sink).")
        elif torch.equal(got, v["inclusive"]):
            msg = f"{name}: you kept |i - j| <= width; the band is |i - j| < width (one block too many here)."
        else:
            extra, missing = int((got & ~want).sum()), int((want & ~got).sum())
            msg = f"{name}: {extra} block(s) active that should not be, {missing} missing."
        report.check(False, msg)
        return report  # one mistake explained once: fix it, then the other cases are checked
    return report


# --- exercise 2 ----------------------------------------------------------------------------------

def _run(fn, s, v, block):
    R, D = s.shape[0], v.shape[1]
    m = torch.full((R,), float("-inf"), dtype=s.dtype)
    l = torch.zeros(R, dtype=s.dtype)
    acc = torch.zeros(R, D, dtype=s.dtype)
    for j in range(0, s.shape[1], block):
        m, l, acc = (torch.as_tensor(t) for t in fn(m, l, acc, s[:, j:j + block], v[j:j + block]))
    return m, l, acc


def check_online_softmax(fn: Callable) -> Report:
    """Check ``fn(m, l, acc, s, v) -> (m, l, acc)``: fold one key block (scores ``s`` [R, Bk], values
    ``v`` [Bk, D]) into the running max ``m`` [R], denominator ``l`` [R] and accumulator ``acc`` [R, D],
    starting from ``m = -inf, l = 0, acc = 0``; the output is ``acc / l``."""
    report = Report("Exercise 2 (the online softmax)", points=2)
    g = torch.Generator().manual_seed(0)
    R, D, block = 6, 4, 8
    base = torch.randn(R, 4 * block, generator=g, dtype=torch.float64)
    grow = base.clone()
    grow[:, block:] += torch.linspace(0, 6, 3 * block, dtype=torch.float64)  # the max grows block after block
    masked = base.clone()
    masked[:3, :block] = float("-inf")  # three rows see nothing in their first block
    cases = [("random scores", base, ""), ("the row maximum grows from block to block", grow, "grow"),
             ("scores around 1000", base * 50 + 1000, "large"),
             ("a first key block fully masked (-inf) for some rows", masked, "masked")]
    v = torch.randn(4 * block, D, generator=g, dtype=torch.float64)
    for name, s, kind in cases:
        want_p = torch.softmax(s, 1)
        result = report.call(functools.wraps(fn)(lambda: _run(fn, s, v, block)), what=name)
        if report.not_done:
            return report
        if result is None:
            continue
        m, l, acc = result
        out = acc / l[:, None]
        want = want_p @ v
        if not torch.isfinite(out).all():
            if kind == "large":
                hint = ("exp(1000) overflows: subtract the running maximum before exponentiating, "
                        "p = exp(s - m_new).")
            elif kind == "masked":
                hint = ("while m_old = m_new = -inf, exp(m_old - m_new) is exp(nan): use 0 in place of an infinite "
                        "m_new when rescaling (a row that has seen nothing has nothing to rescale).")
            else:
                hint = "check the exponentials and the division."
            report.check(False, f"{name}: the output acc / l is not finite. {hint}")
            continue
        if torch.allclose(out, want, rtol=1e-9, atol=1e-9):
            report.check(torch.allclose(m, s.max(1).values), f"{name}: acc / l is right but m is not the row maximum "
                                                             "of the scores seen so far.")
            continue
        true_l = torch.exp(s - m[:, None]).sum(1)
        if not torch.allclose(l, true_l, rtol=1e-9):
            msg = (f"{name}: the denominator l is wrong ({eq('svg-online')}). When the maximum grows from m_old "
                   "to m_new, the sum so far was taken under m_old: multiply it by exp(m_old - m_new) before "
                   "adding the new block.")
        else:
            msg = (f"{name}: l is right but acc is not: rescale the accumulator by exp(m_old - m_new) too, "
                   "and add p @ v with p = exp(s - m_new) (do not normalise inside the loop).")
        report.check(False, msg)
    return report
