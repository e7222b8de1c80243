"""Checkers for the exercises of the chapter *OCL: contrast two occluded halves of one image*.

* :func:`check_split` -- exercise 1, ``n`` disjoint views' token indices (label ``ocl-views``
  generalised from two views), 2 points;
* :func:`check_loss` -- exercise 2, the tSP similarity inside a 2B-way loss with every other view
  as a negative (``ocl-tsp``, ``ocl-loss``), 2 points;
* :func:`check_flops` -- exercise 3, the encoder's FLOPs on n tokens (``ocl-flops``), 2 points.

Each compares the student's answer with :mod:`companion.ocl` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import torch
import torch.nn.functional as F

from companion.exercises import Report, eq
from companion.ocl import TinyViT, count_flops, ocl_loss

__all__ = ["check_split", "check_loss", "check_flops"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_split": (),  # n views: the package splits into two
              "check_loss": (),  # the 2B-way loss: the package's is the B-way one of the page
              "check_flops": ("companion.ocl.methods.count_flops",)}


def _reference_views(noise: torch.Tensor, mask_ratio: float, n_views: int):
    L = noise.shape[1]
    K = math.floor(L * (1 - Fraction(repr(float(mask_ratio))))) // n_views * n_views
    keep = noise.argsort(1)[:, :K]
    return K, [keep[:, j * K // n_views:(j + 1) * K // n_views] for j in range(n_views)]


def check_split(split_views_n: Callable) -> Report:
    """Check ``split_views_n(noise, mask_ratio, n_views)`` -> ``n_views`` index tensors: the
    survivors of one permutation, rounded down to a multiple of ``n_views`` and cut into
    ``n_views`` disjoint consecutive parts (eq. ocl-views generalised from two views)."""
    report = Report("Exercise 1 (n occluded views)", points=2)
    gen = torch.Generator().manual_seed(0)
    cases = [("64 tokens, r = 0.75, 2 views (the page's sampler)",
              torch.rand(4, 64, generator=gen), 0.75, 2),
             ("36 tokens, r = 0.75, 3 views (9 survivors, an odd count)",
              torch.rand(3, 36, generator=gen), 0.75, 3),
             ("196 tokens, r = 0.9, 4 views (19 survivors)",
              torch.rand(2, 196, generator=gen), 0.9, 4),
             ("100 tokens, r = 0.9, 5 views (exactly 10 survivors)",
              torch.rand(2, 100, generator=gen), 0.9, 5)]
    for what, noise, r, n in cases:
        got = report.call(split_views_n, noise.clone(), r, n, what=what)
        if got is None:
            return report
        if not (isinstance(got, (tuple, list)) and len(got) == n
                and all(isinstance(t, torch.Tensor) for t in got)):
            report.check(False, f"{what}: expected a tuple of {n} index tensors, got "
                                f"{type(got).__name__} of length "
                                f"{len(got) if hasattr(got, '__len__') else '?'}")
            return report
        views = [t.long() for t in got]
        B, L = noise.shape
        K, want = _reference_views(noise, r, n)
        shapes = {tuple(v.shape) for v in views}
        if shapes != {(B, K // n)}:
            sizes = sorted({v.shape[-1] if v.dim() == 2 else -1 for v in views})
            survivors = int(L * (1 - r))
            if sizes == [survivors // n] and survivors != K and survivors // n * n != K:
                hint = (f" int(L * (1 - r)) = {survivors} in floating point, but L (1 - r) is "
                        f"exactly {math.floor(L * (1 - Fraction(repr(float(r)))))}: take the "
                        "floor in exact arithmetic (fractions.Fraction).")
            elif sizes == [(math.floor(L * (1 - Fraction(repr(float(r))))) // 2 * 2) // n]:
                hint = (" You rounded the survivors down to an even count, as for two views; "
                        f"with {n} views round down to a multiple of {n}.")
            else:
                hint = ""
            report.check(False, f"{what}: the views have shapes {sorted(shapes)}; each should "
                                f"be [B, K/n] = [{B}, {K // n}] with K = n floor(floor(L (1 - r)) "
                                f"/ n) = {K} ({eq('ocl-views')}, with n views)." + hint)
            return report
        overlap = any(len(set(torch.cat([v[b] for v in views]).tolist())) < K for b in range(B))
        if overlap:
            report.check(False, f"{what}: two views share a token. Cut the survivors of one "
                                f"permutation per image into disjoint parts ({eq('ocl-views')}); "
                                "independent masks overlap.")
            return report
        if all(torch.equal(v, w) for v, w in zip(views, want[::-1])) and n > 1:
            report.check(False, f"{what}: your views come in reverse order: view 1 is the first "
                                "K/n survivors, view 2 the next K/n, and so on.")
            return report
        largest = _reference_views(-noise, r, n)[1]
        if all(torch.equal(v, w) for v, w in zip(views, largest)):
            report.check(False, f"{what}: you keep the tokens with the largest noise; the "
                                "survivors are the K smallest (argsort ascending).")
            return report
        report.check(all(torch.equal(v, w) for v, w in zip(views, want)),
                     f"{what}: the indices are not the first K entries of argsort(noise) cut "
                     f"into {n} consecutive parts ({eq('ocl-views')}); keep their order.")
        if report.problems:
            return report
    return report


def _tsp_nt_xent(a: torch.Tensor, b: torch.Tensor, kappa: float, tau: float,
                 normalise: bool = True, transform: bool = True, mask_self: bool = True):
    z = torch.cat([a, b])
    if normalise:
        z = F.normalize(z, dim=1)
    s = z @ z.T
    logits = (0.5 * (1 + s) / (1 + kappa * (1 - s)) if transform else s) / tau
    if mask_self:
        logits = logits.masked_fill(torch.eye(len(z), dtype=torch.bool), -math.inf)
    B = len(a)
    labels = torch.cat([torch.arange(B, 2 * B), torch.arange(B)])
    return float(F.cross_entropy(logits, labels))


def check_loss(tsp_nt_xent: Callable) -> Report:
    """Check ``tsp_nt_xent(z_a, z_b, kappa, tau)``: the tSP similarity of eq. (ocl-tsp) inside
    SimCLR's 2B-way loss, where every view is contrasted with the other 2B - 1 views of the batch
    (its partner is the positive), not only with the B views of the other side (eq. ocl-loss)."""
    report = Report("Exercise 2 (tSP similarity with 2B - 2 negatives)", points=2)
    gen = torch.Generator().manual_seed(1)
    za, zb = torch.randn(16, 8, generator=gen).double(), torch.randn(16, 8, generator=gen).double()
    zb[:4] = za[:4] + 0.1 * zb[:4]  # a few easy positives
    cases = [("kappa = 1/64, tau = 0.07", za, zb, 1 / 64, 0.07),
             ("kappa = 0, tau = 0.5", za, zb, 0.0, 0.5),
             ("kappa = 1, tau = 0.2, unnormalised inputs (x 5)", 5 * za, zb, 1.0, 0.2)]
    for what, a, b, kappa, tau in cases:
        got = report.call_number(tsp_nt_xent, a.clone(), b.clone(), kappa, tau, what=what)
        if got is None:
            return report
        want = _tsp_nt_xent(a, b, kappa, tau)
        if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-8):
            report.check(True, "")
            continue
        if math.isclose(got, float(ocl_loss(a, b, kappa, tau)), rel_tol=1e-6):
            msg = (f"{what}: this is the page's loss {eq('ocl-loss')}, whose negatives are the B "
                   "views of the other side only. Put all 2B views in one matrix, so that the "
                   "other views of the same side are negatives too.")
        elif math.isclose(got, _tsp_nt_xent(a, b, kappa, tau, mask_self=False), rel_tol=1e-6):
            msg = (f"{what}: each view is compared with itself, a similarity of 1 that is "
                   "neither its positive nor a negative: mask the diagonal with -inf.")
        elif math.isclose(got, _tsp_nt_xent(a, b, kappa, tau, normalise=False), rel_tol=1e-6):
            msg = (f"{what}: normalise the vectors to unit length first; psi of "
                   f"{eq('ocl-tsp')} takes a cosine in [-1, 1].")
        elif math.isclose(got, _tsp_nt_xent(a, b, kappa, tau, transform=False), rel_tol=1e-6):
            msg = (f"{what}: this is SimCLR's NT-Xent on the cosine. Apply psi of "
                   f"{eq('ocl-tsp')} to the cosines before dividing by tau.")
        else:
            msg = f"{what}: got {got:.6f}, expected {want:.6f}."
        report.check(False, msg)
        return report
    return report


def check_flops(encoder_flops: Callable) -> Report:
    """Check ``encoder_flops(n, dim, depth, mlp_ratio)``: the FLOPs torch counts for one
    sequence of ``n`` patch tokens through :meth:`TinyViT.encode` (eq. ocl-flops)."""
    report = Report("Exercise 3 (encoder FLOPs per sequence)", points=2)
    for n, dim, depth, ratio in [(8, 48, 3, 2.0), (64, 48, 3, 2.0), (20, 32, 2, 4.0)]:
        what = f"n = {n}, dim = {dim}, depth = {depth}, mlp_ratio = {ratio}"
        got = report.call_number(encoder_flops, n, dim, depth, ratio, what=what)
        if got is None:
            return report
        vit = TinyViT(dim=dim, depth=depth, heads=4 if dim % 4 == 0 else 1, mlp_ratio=ratio)
        want = count_flops(vit.encode, torch.zeros(1, n, dim))
        if abs(got - want) <= 0.01 * want:
            report.check(True, "")
            continue
        h = int(dim * ratio)
        linear = depth * 2 * (n + 1) * (4 * dim * dim + 2 * dim * h)
        attn = depth * 4 * (n + 1) ** 2 * dim
        if math.isclose(got, want / 2, rel_tol=0.01):
            msg = (f"{what}: you count multiply-adds; a multiply-add is 2 FLOPs "
                   f"({eq('ocl-flops')}).")
        elif math.isclose(got, linear, rel_tol=0.01):
            msg = (f"{what}: you left out attention itself: QK^T and the weighted sum of V cost "
                   f"2 (n+1)^2 D FLOPs each per block, the quadratic term of {eq('ocl-flops')}.")
        else:
            n_cls = depth * (2 * n * (4 * dim * dim + 2 * dim * h) + 4 * n * n * dim)
            if math.isclose(got, n_cls, rel_tol=0.01):
                msg = (f"{what}: the encoder prepends a CLS token, so a sequence of n patch "
                       f"tokens is n + 1 tokens long ({eq('ocl-flops')}).")
            else:
                msg = (f"{what}: got {got:.4g}, torch counts {want:.4g} (linear layers "
                       f"{linear:.4g}, attention {attn:.4g}; {eq('ocl-flops')}).")
        report.check(False, msg)
        return report
    return report
