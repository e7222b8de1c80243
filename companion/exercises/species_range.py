"""Checkers for the exercises of the chapter *FS-SINR: a species range from a few sightings*.

* :func:`check_an_full` -- exercise 1, the assume-negative loss (label ``fssinr-loss``), 2 points;
* :func:`check_average_precision` -- exercise 2, average precision (``fssinr-ap``), 2 points.

Each compares the student's answer with :mod:`companion.species_range` on cases built to expose
one mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion import species_range as sr
from companion.exercises import Report, eq

__all__ = ["check_an_full", "check_average_precision"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_an_full": ("companion.species_range.an_full_loss",),
              "check_average_precision": ("companion.species_range.average_precision",)}




def _loss_cases():
    gen = torch.Generator().manual_seed(0)
    feats = [torch.randn(6, 4, generator=gen, dtype=torch.float64) for _ in range(3)]
    return [
        ("six distinct species", *feats, torch.arange(6), 2048.0),
        ("species 0 and 1 appear twice", *feats, torch.tensor([0, 0, 1, 1, 2, 3]), 2048.0),
        ("pos_weight 1, a repeated species", *feats, torch.tensor([5, 5, 5, 1, 2, 3]), 1.0),
    ]


def _loss_variants(F, R, W, species, lam) -> dict[str, float]:
    """Values of the usual mistakes, to recognise them."""
    P, Q = torch.sigmoid(F @ W.T), torch.sigmoid(R @ W.T)
    eye = torch.eye(len(species), dtype=torch.bool)
    other = species[:, None] != species[None, :]
    neg, pos, bg = -torch.log(1 - P + 1e-5), -lam * torch.log(P + 1e-5), -torch.log(1 - Q + 1e-5)
    full = torch.where(eye, pos, other * neg)
    return {
        "no_mask": float(torch.where(eye, pos, neg).mean() + bg.mean()),
        "masked_mean": float(full.sum() / (eye | other).sum() + bg.mean()),
        "no_weight": float(torch.where(eye, pos / lam, other * neg).mean() + bg.mean()),
        "no_bg": float(full.mean()),
    }


def check_an_full(an_full: Callable) -> Report:
    """Check ``an_full(loc_feat, bg_feat, w, species, pos_weight)``: eq. (fssinr-loss)."""
    report = Report("Exercise 1 (assume-negative loss)", points=2)
    for name, F, R, W, species, lam in _loss_cases():
        got = report.call_number(an_full, F.clone(), R.clone(), W.clone(), species.clone(), lam,
                                 what=name)
        if got is None:
            continue
        want = float(sr.an_full_loss(F, R, W, species, lam))
        if report.check(np.isclose(got, want, rtol=1e-6), ""):
            continue
        report.problems.pop()
        wrong = _loss_variants(F, R, W, species, lam)
        close = lambda key: np.isclose(got, wrong[key], rtol=1e-6)
        if close("no_mask"):
            why = (f"you treat another example of the *same* species as an absence. {eq('fssinr-loss')} "
                   "keeps the off-diagonal term only where c_a != c_b: a second sighting of species b is "
                   "evidence for it, and penalising it pushes the model against its own data.")
        elif close("masked_mean"):
            why = (f"you average over the unmasked pairs only; {eq('fssinr-loss')} divides by B^2, the masked "
                   "pairs counting as zeros, as the official code does.")
        elif close("no_weight"):
            why = (f"the positive term lacks its weight pos_weight; {eq('fssinr-loss')} multiplies "
                   "-log(P_aa) by lambda to balance the B^2 assumed absences per positive.")
        elif close("no_bg"):
            why = f"the background term is missing: {eq('fssinr-loss')} adds the mean of -log(1 - Q_ab)."
        else:
            why = f"got {got:.6g}, expected {want:.6g} ({eq('fssinr-loss')})."
        report.problems.append(f"{name}: {why}")
    return report


def _ap_cases():
    rng = np.random.default_rng(3)
    y = rng.random(40) < 0.3
    y[0] = True
    return [
        ("40 cells, distinct scores", y, rng.normal(size=40) + y),
        ("tied scores", np.array([1, 0, 1, 0, 0, 1], bool), np.array([3.0, 3.0, 2.0, 2.0, 1.0, 0.0])),
        ("a perfect ranking", np.array([1, 1, 0, 0, 0], bool), np.array([5.0, 4.0, 3.0, 2.0, 1.0])),
    ]


def check_average_precision(average_precision: Callable) -> Report:
    """Check ``average_precision(y_true, scores)``: eq. (fssinr-ap), ties as one threshold."""
    report = Report("Exercise 2 (average precision)", points=2)
    for name, y, s in _ap_cases():
        got = report.call_number(average_precision, y.copy(), s.copy(), what=name)
        if got is None:
            continue
        want = sr.average_precision(y, s)
        if report.check(np.isclose(got, want, atol=1e-9), ""):
            continue
        report.problems.pop()
        ranked = y[np.argsort(-s, kind="stable")]
        prec = np.cumsum(ranked) / np.arange(1, len(y) + 1)
        if np.isclose(got, prec.mean()):
            why = (f"you average the precision at every rank; {eq('fssinr-ap')} weights the precision by the "
                   "gain in recall, so only ranks where a positive is found count.")
        elif np.isclose(got, prec[ranked].mean()):
            why = (f"you break tied scores by their order; {eq('fssinr-ap')} takes one threshold per distinct "
                   "score, so cells with equal scores enter the ranking together.")
        else:
            why = f"got {got:.6g}, expected {want:.6g} ({eq('fssinr-ap')})."
        report.problems.append(f"{name}: {why}")
    return report
