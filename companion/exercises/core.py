"""Checkers for the exercises of the chapter *CoRE: cross-city latent space alignment*.

* :func:`check_manifold_align` -- exercise 1, the manifold alignment loss (label ``core-align``),
  2 points;
* :func:`check_coral` -- exercise 2, CORAL alignment of the target city (``core-coral``), 2 points.

Each compares the student's answer with :mod:`companion.core` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion import core
from companion.exercises import Report, eq

__all__ = ["check_manifold_align", "check_coral"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_manifold_align": ("companion.core.model.manifold_align_loss",),
              "check_coral": ("companion.core.align.coral",)}




def _align_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    Hs = torch.randn(12, 3, generator=gen, dtype=torch.float64)
    Ht = torch.randn(9, 3, generator=gen, dtype=torch.float64) @ torch.diag(torch.tensor([3.0, 1.0, 0.2],
                                                                                        dtype=torch.float64))
    Q = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    return [
        ("two cities of 12 and 9 regions", Hs, Ht, Q),
        ("the target is the source scaled by 5", Hs, 5 * Hs, Q),
        ("the target is the source with its regions shuffled", Hs, Hs[torch.randperm(12, generator=gen)], Q),
    ]


def _align_variants(Hs, Ht, Q) -> dict[str, float]:
    """Values of the usual mistakes, to recognise them."""
    raw = lambda H: Q @ H.T
    col = lambda H: torch.nn.functional.normalize(Q @ H.T, dim=0)
    row = lambda H: torch.nn.functional.normalize(Q @ H.T, dim=-1)
    diff = lambda f: (f(Hs) @ f(Hs).T) - (f(Ht) @ f(Ht).T)
    return {
        "raw": float((diff(raw) ** 2).sum(1).mean()),
        "columns": float((diff(col) ** 2).sum(1).mean()),
        "sum": float((diff(row) ** 2).sum()),
        "norm": float(torch.linalg.norm(diff(row), dim=1).mean()),
    }


def check_manifold_align(manifold_align: Callable) -> Report:
    """Check ``manifold_align(Hs, Ht, Q)``: eq. (core-align) for the probes ``Q`` (K, d)."""
    report = Report("Exercise 1 (manifold alignment)", points=2)
    for name, Hs, Ht, Q in _align_cases():
        got = report.call_number(manifold_align, Hs.clone(), Ht.clone(), Q.clone(), what=name)
        if got is None:
            continue
        want = float(core.manifold_align_loss(Hs, Ht, probes=Q))
        if report.check(np.isclose(got, want, rtol=1e-6, atol=1e-10), ""):
            continue
        report.problems.pop()
        wrong = _align_variants(Hs, Ht, Q)
        close = lambda key: np.isclose(got, wrong[key], rtol=1e-6, atol=1e-10)
        if close("raw"):
            why = (f"you compare raw probe scores Q H'. {eq('core-align')} normalises each probe's row of "
                   "scores to unit length first, which is what makes the loss blind to the scale of a city's "
                   "embedding (the second case: a city scaled by 5 must give the same loss as the source).")
        elif close("columns"):
            why = (f"you normalise the columns (one per region) of Q H'. {eq('core-align')} normalises each "
                   "*probe's* row, so that S S' compares probes, a K x K matrix that exists for any N.")
        elif close("sum"):
            why = f"you sum over the probes; {eq('core-align')} averages the squared row distances over the K probes."
        elif close("norm"):
            why = f"you average the distances; {eq('core-align')} averages their *squares*."
        else:
            why = f"got {got:.6g}, expected {want:.6g} ({eq('core-align')})."
        report.problems.append(f"{name}: {why}")
    return report


def _coral_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    Es = rng.normal(size=(40, 3)) @ np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.3], [0.0, 0.0, 0.4]]) + [1.0, -2.0, 0.5]
    Et = rng.normal(size=(30, 3)) @ np.array([[0.3, 0.0, 0.0], [1.0, 1.5, 0.0], [0.0, 0.7, 2.0]]) - 3.0
    return [("correlated source and target", Es, Et),
            ("a target that is already the source", Es, Es.copy())]


def check_coral(coral_align: Callable) -> Report:
    """Check ``coral_align(Es, Et, eps)``: eq. (core-coral), the target moved onto the source's
    mean and covariance."""
    report = Report("Exercise 2 (CORAL)", points=2)
    eps = 1e-3
    for name, Es, Et in _coral_cases():
        got = report.call(coral_align, Es.copy(), Et.copy(), eps, what=name)
        if got is None:
            continue
        got = np.asarray(got, dtype=float)
        if not report.check(got.shape == Et.shape, f"{name}: returned shape {got.shape}, expected {Et.shape}"):
            continue
        want = core.coral(Es, Et, eps)
        if report.check(np.allclose(got, want, atol=1e-6), ""):
            continue
        report.problems.pop()
        cov_ok = np.allclose(np.cov(got.T), np.cov(want.T), atol=1e-6)
        mean_ok = np.allclose(got.mean(0), Es.mean(0), atol=1e-6)
        diag_only = np.allclose(np.cov(got.T).diagonal(), np.cov(Es.T).diagonal(), rtol=1e-2)
        if not mean_ok and cov_ok:
            why = (f"the covariance is right but the mean is not: {eq('core-coral')} centres the target on its "
                   "own mean and adds the source's mean back.")
        elif diag_only and not cov_ok:
            why = (f"you match each column's variance but not the correlations: {eq('core-coral')} whitens with "
                   "the full matrix C_t^{-1/2} and re-colours with C_s^{1/2}, so the covariance of the result "
                   "is the source's, off-diagonal entries included.")
        elif cov_ok and mean_ok:
            why = (f"the moments match but the map differs: {eq('core-coral')} uses the symmetric square roots "
                   "(from an eigendecomposition), not a Cholesky factor or another root, which would add a rotation.")
        else:
            why = (f"the result has neither the source's mean nor its covariance ({eq('core-coral')}); "
                   "whiten with C_t^{-1/2}, then re-colour with C_s^{1/2}, both with eps on the diagonal.")
        report.problems.append(f"{name}: {why}")
    return report
