"""Checkers for the exercises of the chapter *OCL: contrast two occluded halves of one image*.

* :func:`check_split` -- exercise 1, the two views' token indices (label ``ocl-views``), 2 points;
* :func:`check_loss` -- exercise 2, the tSP-InfoNCE loss (``ocl-tsp``, ``ocl-loss``), 2 points;
* :func:`check_flops` -- exercise 3, the encoder's FLOPs on n tokens (``ocl-flops``), 2 points.

Each compares the student's answer with :mod:`companion.ocl` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from companion.exercises import Report, eq
from companion.ocl import TinyViT, count_flops, keep_count, ocl_loss

__all__ = ["check_split", "check_loss", "check_flops"]


def _index_pair(report: Report, got, what: str):
    if got is None:
        return None
    if not (isinstance(got, tuple) and len(got) == 2
            and all(isinstance(t, torch.Tensor) for t in got)):
        report.check(False, f"{what}: expected a pair of index tensors (idx_a, idx_b), got "
                            f"{type(got).__name__}")
        return None
    return got[0].long(), got[1].long()


def check_split(split_views: Callable) -> Report:
    """Check ``split_views(noise, mask_ratio)`` -> ``(idx_a, idx_b)``, eq. (ocl-views)."""
    report = Report("Exercise 1 (two occluded views)", points=2)
    gen = torch.Generator().manual_seed(0)
    cases = [("64 tokens, r = 0.75", torch.rand(4, 64, generator=gen), 0.75),
             ("10 tokens, r = 0.5 (floor(5) = 5 survivors is odd)",
              torch.rand(3, 10, generator=gen), 0.5),
             ("196 tokens, r = 0.9 (the paper's ViT/16)", torch.rand(2, 196, generator=gen), 0.9)]
    for what, noise, r in cases:
        got = _index_pair(report, report.call(split_views, noise.clone(), r, what=what), what)
        if got is None:
            return report
        ia, ib = got
        B, L = noise.shape
        K = keep_count(L, r)
        keep = noise.argsort(1)[:, :K]
        if ia.dim() != 2 or ia.shape != ib.shape or ia.shape != (B, K // 2):
            survivors = int(L * (1 - r))
            if ia.shape[-1] + ib.shape[-1] == survivors and survivors % 2:
                hint = (f" {survivors} tokens survive the mask, an odd count: round it down to "
                        "an even K before halving it.")
            elif ia.shape[-1] == int(L * r) // 2:
                hint = " You kept the masked share r of the tokens instead of 1 - r."
            else:
                hint = ""
            report.check(False, f"{what}: idx_a has shape {tuple(ia.shape)} and idx_b "
                                f"{tuple(ib.shape)}; both should be [B, K/2] = [{B}, {K // 2}] "
                                f"with K = 2 floor(floor(L (1 - r)) / 2) = {K}, "
                                f"{eq('ocl-views')}." + hint)
            return report
        overlap = any(len(set(ia[b].tolist()) & set(ib[b].tolist())) for b in range(B))
        if overlap:
            report.check(False, f"{what}: the two views share tokens. Draw one permutation "
                                "per image and split its survivors in two, so that the views are "
                                f"disjoint ({eq('ocl-views')}); two independent masks overlap.")
            return report
        if torch.equal(ia, keep[:, K // 2:]) and torch.equal(ib, keep[:, :K // 2]):
            report.check(False, f"{what}: your views are swapped: view A is the first half of "
                                f"the survivors, view B the second ({eq('ocl-views')}).")
            return report
        if torch.equal(ia, noise.argsort(1, descending=True)[:, :K // 2]):
            report.check(False, f"{what}: you keep the tokens with the largest noise; the "
                                "survivors are the K smallest (argsort ascending).")
            return report
        report.check(torch.equal(ia, keep[:, :K // 2]) and torch.equal(ib, keep[:, K // 2:]),
                     f"{what}: the indices are not the first K entries of argsort(noise) "
                     f"split in two halves ({eq('ocl-views')}); keep their order.")
        if report.problems:
            return report
    return report


def check_loss(tsp_info_nce: Callable) -> Report:
    """Check ``tsp_info_nce(z_a, z_b, kappa, tau)`` against eqs. (ocl-tsp) and (ocl-loss)."""
    report = Report("Exercise 2 (the tSP-InfoNCE loss)", points=2)
    gen = torch.Generator().manual_seed(1)
    za, zb = torch.randn(16, 8, generator=gen).double(), torch.randn(16, 8, generator=gen).double()
    zb[:4] = za[:4] + 0.1 * zb[:4]  # a few easy positives, so the two directions differ
    cases = [("kappa = 1/64, tau = 0.07", za, zb, 1 / 64, 0.07),
             ("kappa = 0, tau = 0.1", za, zb, 0.0, 0.1),
             ("kappa = 1, tau = 0.2, unnormalised inputs (x 5)", 5 * za, zb, 1.0, 0.2)]
    for what, a, b, kappa, tau in cases:
        got = report.call_number(tsp_info_nce, a.clone(), b.clone(), kappa, tau, what=what)
        if got is None:
            return report
        want = float(ocl_loss(a, b, kappa, tau))
        if math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-8):
            report.check(True, "")
            continue
        s = F.normalize(a, dim=1) @ F.normalize(b, dim=1).T
        psi = 0.5 * (1 + s) / (1 + kappa * (1 - s))
        labels = torch.arange(len(s))
        one_way = float(F.cross_entropy(psi / tau, labels))
        raw = a @ b.T
        raw_psi = 0.5 * (1 + raw) / (1 + kappa * (1 - raw))
        unnormed = 0.5 * float(F.cross_entropy(raw_psi / tau, labels)
                               + F.cross_entropy(raw_psi.T / tau, labels))
        plain = 0.5 * float(F.cross_entropy(s / tau, labels) + F.cross_entropy(s.T / tau, labels))
        no_half = 0.5 * float(F.cross_entropy(2 * psi / tau, labels)
                              + F.cross_entropy(2 * psi.T / tau, labels))
        if math.isclose(got, one_way, rel_tol=1e-6):
            msg = (f"{what}: you average only the rows (view A against every view B). The loss "
                   f"of {eq('ocl-loss')} is symmetric: add the cross-entropy of the transposed "
                   "logits (view B against every view A) and halve the sum.")
        elif math.isclose(got, unnormed, rel_tol=1e-6):
            msg = (f"{what}: normalise z_a and z_b to unit length first; s in {eq('ocl-tsp')} "
                   "is a cosine in [-1, 1], and psi is only defined there.")
        elif math.isclose(got, plain, rel_tol=1e-6):
            msg = (f"{what}: this is plain InfoNCE on the cosine at temperature tau. Apply the "
                   f"similarity transform psi of {eq('ocl-tsp')} before dividing by tau.")
        elif math.isclose(got, no_half, rel_tol=1e-6):
            msg = (f"{what}: psi has a factor 1/2: psi(1) = 1 and psi(-1) = 0, "
                   f"{eq('ocl-tsp')}. Without it the temperature is halved.")
        else:
            msg = f"{what}: got {got:.6f}, expected {want:.6f} ({eq('ocl-loss')})."
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
