"""Checkers for the exercises of the chapter *PieClam*.

* :func:`check_grad` -- exercise 1, the gradient of the Clam log-likelihood (label
  ``pieclam-grad``), 2 points;
* :func:`check_projection` -- exercise 2, the projection onto the pairwise cone (``pieclam-cone``),
  1 point;
* :func:`check_bigclam_barrier` -- exercise 3, a function returning a block model that BigClam
  cannot fit and IeClam can (``pieclam-psd``), 2 points.

Each calls the student's function through :meth:`Report.call` (a stub is reported as not done),
compares with :mod:`companion.pieclam` on cases built to expose one mistake each, and names the
mistake it finds, citing the equations as the page numbers them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion import pieclam as pc
from companion.exercises import Report, eq

__all__ = ["check_grad", "check_projection", "check_bigclam_barrier"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_grad": ("companion.pieclam.core.clam_grad",),
              "check_projection": ("companion.pieclam.core.project_cone",),
              "check_bigclam_barrier": ()}  # a construction: the package fits, it does not propose


def _grad_cases():
    """(name, F, edge_index, lorentz): small graphs, codes inside the cone, edge logits away from 0."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for name, lorentz, dim in (("BigClam, D = 3", False, 3), ("IeClam, D = 4", True, 4)):
        for gname in ("karate", "florentine"):
            ei, n, _ = pc.nx_graph(gname)
            F = pc.project_cone(0.3 + torch.rand(n, dim, dtype=torch.float64, generator=g), lorentz)
            if lorentz:  # keep every pair strictly inside the cone, so edge logits are positive
                t, s = F.chunk(2, dim=1)
                F = torch.cat([t + 0.3, 0.5 * s], dim=1)
            cases.append((f"{name}, {gname}", F, ei, lorentz))
    return cases


def _parts(F, ei, lorentz):
    L = pc.lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    x = pc.edge_logits(F, ei, lorentz)
    coef = 1 / -torch.expm1(-x)
    msg = torch.zeros_like(F).index_add_(0, ei[0], coef[:, None] * F[ei[1]])
    msg_wrong = torch.zeros_like(F).index_add_(0, ei[0], (1 / torch.expm1(x))[:, None] * F[ei[1]])
    return L, msg, msg_wrong, F.sum(0), F


def _diagnose(got, F, ei, lorentz) -> str:
    L, msg, msg_wrong, S, f = _parts(F, ei, lorentz)
    close = lambda a: torch.allclose(got, a, rtol=1e-6, atol=1e-8)  # noqa: E731
    if close(-(msg - S + f) * L):
        return "the sign is flipped: you return the gradient of the negative log-likelihood; we ascend."
    if close((msg - S) * L):
        return ("the self-term +f_n is missing. The sum over non-neighbours excludes n itself, so after "
                "replacing it by -sum_m f_m you must add f_n back.")
    if close((2 * msg - S + f) * L) or close((2 * msg - 2 * S + 2 * f) * L):
        return ("every edge is counted twice: edge_index lists each edge in both directions, and each "
                "direction carries half of the edge's log-likelihood.")
    if close((msg_wrong - S + f) * L) or close((msg_wrong + msg - S + f) * L):
        return ("the edge coefficient is wrong: d/dx log(1 - e^{-x}) = 1/(e^x - 1), but the O(|E|) form also moves "
                "x_nm out of the non-edge sum, so an edge carries 1/(e^x - 1) + 1 = 1/(1 - e^{-x}).")
    if lorentz and close(msg - S + f):
        return ("L is missing: with exclusive communities x = f_n^T L f_m, so the gradient is L times the "
                "BigClam-shaped bracket (the exclusive entries get the opposite sign).")
    if lorentz and close((msg * L) - S + f):
        return "L multiplies the edge messages but not -sum_m f_m + f_n: the whole bracket is multiplied by L."
    return (f"it does not match {eq('pieclam-grad')}; compare one node's gradient with autograd on a 3-node "
            "graph.")


def check_grad(grad_fn: Callable) -> Report:
    """Check ``grad_fn(F, edge_index, lorentz)``, the gradient of eq. (pieclam-loglik-fast) w.r.t. ``F``."""
    report = Report("Exercise 1 (the gradient)", points=2)
    for name, F, ei, lorentz in _grad_cases():
        got = _tensor(report, report.call(grad_fn, F.clone(), ei.clone(), lorentz, what=name), name)
        if report.not_done:
            return report
        if got is None:
            continue
        if not report.check(tuple(got.shape) == tuple(F.shape),
                            f"{name}: returned shape {tuple(got.shape)}, expected {tuple(F.shape)} (one row per node)"):
            continue
        want = pc.clam_grad(F, ei, lorentz)
        if torch.allclose(got, want, rtol=1e-6, atol=1e-8):
            report.check(True, "")
        else:
            report.check(False, f"{name}: {_diagnose(got, F, ei, lorentz)}")
    # an edge whose logit is 0: the coefficient 1/(1 - e^{-x}) must be clamped, not infinite
    F = torch.tensor([[1.0, 1.0], [1.0, 1.0], [2.0, 0.5]], dtype=torch.float64)  # x_01 = 1 - 1 = 0
    ei = torch.tensor([[0, 1, 0, 2], [1, 0, 2, 0]])
    got = _tensor(report, report.call(grad_fn, F.clone(), ei, True, what="x_nm = 0 on an edge"), "x_nm = 0")
    if got is not None:
        report.check(bool(torch.isfinite(got).all()),
                     "an edge whose two ends sit on the same edge of the cone, s = t, has x_nm = t^2 - s^2 = 0, "
                     "and 1/(1 - e^{-x}) is infinite there: clamp x at a small x_min (the book uses 1e-3) "
                     "before the coefficient.")
    return report


def _tensor(report: Report, got, name: str):
    """The student's answer as a float64 tensor, or ``None`` (the report says why)."""
    if got is None:
        return None
    try:
        return torch.as_tensor(got).double()
    except (TypeError, ValueError, RuntimeError):
        report.check(False, f"{name}: returned {type(got).__name__}, not a tensor of numbers")
        return None


def check_projection(project: Callable) -> Report:
    """Check ``project(F)``, the Euclidean projection of IeClam codes ``[t | s]`` onto ``|s_c| <= t_c``."""
    report = Report("Exercise 2 (the cone projection)", points=1)
    g = torch.Generator().manual_seed(1)
    cases = {
        "points inside the cone": pc.project_cone(torch.rand(50, 4, dtype=torch.float64, generator=g), True),
        "|s| > t with t > 0": torch.tensor([[1.0, 3.0], [2.0, -5.0], [0.5, 0.6]], dtype=torch.float64),
        "t < 0": torch.tensor([[-1.0, 0.5], [-2.0, -0.5], [-1.0, 3.0], [-1.0, 0.0]], dtype=torch.float64),
        "random": 2 * torch.randn(200, 6, dtype=torch.float64, generator=g),
    }
    for name, F in cases.items():
        got = _tensor(report, report.call(project, F.clone(), what=name), name)
        if report.not_done:
            return report
        if got is None:
            continue
        if not report.check(tuple(got.shape) == tuple(F.shape), f"{name}: shape {tuple(got.shape)}, expected "
                                                                 f"{tuple(F.shape)}"):
            continue
        want = pc.project_cone(F, True)
        if torch.allclose(got, want, atol=1e-9):
            report.check(True, "")
            continue
        t, s = got.chunk(2, dim=1)
        if torch.allclose(got, F.clamp_min(0), atol=1e-9):
            report.check(False, f"{name}: a ReLU on every entry is BigClam's projection; here s may be negative and "
                                f"the cone of {eq('pieclam-cone')} is |s_c| <= t_c.")
        elif (s.abs() - t).max() > 1e-9:
            report.check(False, f"{name}: your output leaves the cone (|s_c| > t_c by {float((s.abs() - t).max()):.3g}).")
        elif name == "points inside the cone":
            report.check(False, f"{name}: points already in the cone must not move (the projection is the identity there).")
        else:
            t0, s0 = F.chunk(2, dim=1)
            tc = t0.clamp_min(0)
            clip = torch.cat([tc, torch.maximum(torch.minimum(s0, tc), -tc)], dim=1)
            if torch.allclose(got, clip, atol=1e-9):
                report.check(False, f"{name}: clipping s into [-t, t] lands in the cone, but not at the nearest "
                                    "point: the cone's edges are the diagonals s = +-t, so the nearest point moves "
                                    "t as well. Rotate by 45 degrees (u = t - s, v = t + s), clip u and v at 0, "
                                    "and rotate back.")
            else:
                dist_got, dist_want = (got - F).norm(dim=1), (want - F).norm(dim=1)
                i = int(torch.argmax(dist_got - dist_want))
                report.check(False, f"{name}: row {i} lands at {got[i].tolist()}, not the nearest point of the cone "
                                    f"{want[i].tolist()} (distance {float(dist_got[i]):.3f} vs {float(dist_want[i]):.3f}).")
    return report


def check_bigclam_barrier(propose: Callable, *, dim: int = 4, steps: int = 500, seed: int = 0) -> Report:
    """Check ``propose()``, which returns ``(sizes, P)``: a block model that BigClam cannot fit but IeClam can.

    The checker samples the graph (seed ``seed``), fits BigClam and IeClam with ``dim`` entries
    each, and asks for a BigClam error (mean |P_hat - P| over dyads) of at least 0.15 and an
    IeClam error below 0.08 and below half of BigClam's. ``report.errors`` keeps both errors.
    """
    report = Report("Exercise 3 (a graph BigClam cannot fit)", points=2)
    answer = report.call(propose, what="propose()")
    if answer is None:
        return report
    try:
        sizes, P = answer
        sizes = [int(s) for s in sizes]
        P = np.asarray(P, dtype=float)
    except (TypeError, ValueError) as err:
        report.check(False, f"propose() must return (sizes, P): a list of block sizes and a matrix of numbers ({err}).")
        return report
    k = len(sizes)
    if not report.check(P.shape == (k, k), f"P has shape {P.shape}; with {k} blocks it must be {k} x {k}."):
        return report
    if not report.check(bool(np.allclose(P, P.T)), "P is not symmetric: an undirected graph has P[a, b] = P[b, a]."):
        return report
    if not report.check(bool(P.min() >= 0 and P.max() <= 1), "P must hold probabilities in [0, 1]."):
        return report
    if not report.check(min(sizes) >= 20 and sum(sizes) <= 400,
                        "use blocks of at least 20 nodes (and at most 400 in all): with tiny blocks a model with "
                        "many communities per node can fit anything, and the question is about dense structure."):
        return report
    ei, _ = pc.sbm(sizes, P, seed=seed)
    if not report.check(ei.shape[1] > 0, "the sampled graph has no edges."):
        return report
    Pt = pc.sbm_probs(sizes, P)
    n = Pt.shape[0]
    err = {}
    for lorentz in (False, True):
        r = pc.fit_clam(ei, n, pc.ClamConfig(dim=dim, lorentz=lorentz, feat_steps=steps, seed=seed))
        err[lorentz] = pc.prob_error(pc.prob_matrix(r.F, lorentz), Pt)
    diag_heavy = all(P[a, a] >= P[a, b] for a in range(k) for b in range(k))
    if err[False] < 0.15:
        hint = (" Every block is at least as dense inside as towards the others: that is assortative structure, "
                "exactly what inclusive communities express.") if diag_heavy else ""
        report.check(False, f"BigClam fits this model well (error {err[False]:.3f} < 0.15).{hint} BigClam's logits "
                            f"f_n . f_m form a positive semi-definite matrix ({eq('pieclam-psd')}): look for a P "
                            "whose logit matrix -log(1 - P) is far from one.")
    else:
        report.check(True, "")
    report.check(err[True] < min(0.08, err[False] / 2),
                 f"IeClam with {dim // 2} inclusive + {dim // 2} exclusive communities does not fit it either (error "
                 f"{err[True]:.3f}); the point is a graph that exclusive communities fix. Use fewer blocks, or "
                 "probabilities of the form 1 - exp(-(t.t' - s.s')).")
    report.errors = err  # for display: {False: BigClam error, True: IeClam error}
    return report
