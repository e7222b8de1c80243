"""Checkers for the exercises of the chapter *Metta-Class: a zero class for the empty space*.

* :func:`check_purity` -- exercise 1, the purity factor of each class (label ``metta-purity``), 2 points;
* :func:`check_ascent` -- exercise 2, clamped gradient ascent from noise (``metta-ascent``), 2 points;
* :func:`check_union_margin` -- exercise 3, the margin of a union of classes (``metta-union``), 1 point.

Each compares the student's answer with :mod:`companion.metta_class` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from companion import metta_class as mc
from companion.exercises import Report, eq

__all__ = ["check_purity", "check_ascent", "check_union_margin"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_purity": ("companion.metta_class.metrics.purity_factors",),
              "check_ascent": ("companion.metta_class.generate.ascend",),
              "check_union_margin": ()}


def _array(report: Report, got, what: str) -> np.ndarray | None:
    if got is None:
        return None
    try:
        if isinstance(got, torch.Tensor):
            got = got.detach().cpu().numpy()
        return np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        report.check(False, f"returned {type(got).__name__}, not an array of numbers ({what})")
        return None


def _purity_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, int]]:
    gen = torch.Generator().manual_seed(0)
    y_big = torch.randint(0, 6, (400,), generator=gen)
    pred_big = torch.where(torch.rand(400, generator=gen) < 0.7, y_big, torch.randint(0, 6, (400,), generator=gen))
    return [
        ("a hand-made case (K = 3, Metta label 3)", torch.tensor([0, 0, 1, 1, 2, 3, 3, 3]),
         torch.tensor([0, 1, 1, 1, 2, 0, 2, 3]), 3),
        ("class 2 is never predicted", torch.tensor([0, 1, 2, 2, 3, 3]), torch.tensor([0, 1, 3, 1, 3, 0]), 3),
        ("a standard net, which never predicts Metta", torch.tensor([0, 1, 1, 2, 2, 2]),
         torch.tensor([0, 1, 0, 1, 1, 0]), 2),
        ("400 random points, K = 5", y_big, pred_big, 5),
    ]


def _purity_diagnosis(name: str, pred: torch.Tensor, y: torch.Tensor, K: int, got: np.ndarray,
                      want: np.ndarray) -> str:
    k = np.arange(K)
    yn, pn = y.numpy(), pred.numpy()
    with np.errstate(all="ignore"):
        recall = np.array([((pn == c) & (yn == c)).sum() / (yn == c).sum() for c in k])
        real = yn < K
        no_metta = np.array([((pn == c) & (yn == c) & real).sum() / ((pn == c) & real).sum() for c in k])
    close = lambda a: np.allclose(np.nan_to_num(got, nan=-1.0), np.nan_to_num(a, nan=-1.0), atol=1e-9)
    if close(recall):
        return (f"{name}: you divide by the number of points whose label is k (that is the recall). "
                f"Purity, {eq('metta-purity')}, is a precision: divide by the number of points *predicted* k.")
    if close(no_metta):
        return (f"{name}: you dropped the Metta test points. They are part of the pool of {eq('metta-purity')}: "
                "a Metta point predicted as class k counts against the purity of k, which is why a standard "
                "net's purity is low.")
    never = np.isnan(want)
    if never.any() and not np.isnan(got[never]).all():
        return (f"{name}: class {int(np.flatnonzero(never)[0])} is never predicted, so its purity is 0/0; return "
                f"NaN there (you return {got[never][0]:.3g}), not 0 or 1: nothing was claimed.")
    return f"{name}: got {np.round(got, 4)}, expected {np.round(want, 4)} ({eq('metta-purity')})."


def check_purity(purity: Callable) -> Report:
    """Check ``purity(pred, y, n_classes)``: the purity factor of each real class, eq. (metta-purity)."""
    report = Report("Exercise 1 (purity)", points=2)
    for name, y, pred, K in _purity_cases():
        got = _array(report, report.call(purity, pred.clone(), y.clone(), K, what=name), name)
        if got is None:
            continue
        if not report.check(got.shape == (K,), f"{name}: returned shape {got.shape}, expected ({K},): one "
                                               "purity per real class (the Metta class has none)."):
            continue
        want = mc.purity_factors(pred, y, K).numpy()
        ok = np.array_equal(np.isnan(got), np.isnan(want)) and np.allclose(got[~np.isnan(want)],
                                                                           want[~np.isnan(want)], atol=1e-9)
        if not report.check(bool(ok), _purity_diagnosis(name, pred, y, K, got, want)):
            return report  # one mistake, explained once
    return report


def _ascent_models() -> list[tuple[str, nn.Module]]:
    torch.manual_seed(0)
    linear = nn.Linear(6, 3)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.0, -1, 0, 2, 0, 0], [0, 0, 1, -1, 3, 0], [-2, 0, 0, 0, 1, 1]]))
        linear.bias.zero_()
    torch.manual_seed(1)
    return [("a linear model", linear), ("a small ReLU MLP", mc.mlp(6, (16,), 4))]


def check_ascent(ascend: Callable) -> Report:
    """Check ``ascend(model, x0, c, steps, step_size)``: ascent on logit c, clamped to [0, 1] after every
    step, eq. (metta-ascent)."""
    report = Report("Exercise 2 (generation by ascent)", points=2)
    x0 = torch.rand(5, 6, generator=torch.Generator().manual_seed(2))
    for name, model in _ascent_models():
        before = [p.detach().clone() for p in model.parameters()]
        for c, steps, eta in ((0, 40, 0.05), (2, 7, 0.3)):
            what = f"{name}, class {c}, {steps} steps of {eta}"
            x_in = x0.clone()
            got = _array(report, report.call(ascend, model, x_in, c, steps, eta, what=what), what)
            if got is None:
                return report
            if not report.check(got.shape == tuple(x0.shape), f"{what}: returned shape {got.shape}, "
                                                              f"expected {tuple(x0.shape)}."):
                return report
            if not report.check(torch.equal(x_in, x0), f"{what}: your function changed x0 in place; work on a "
                                                       "copy (x = x0.detach().clone())."):
                return report
            want = mc.ascend(model, x0, c, steps=steps, step_size=eta).numpy()
            free = mc.ascend(model, x0, c, steps=steps, step_size=eta, clamp=None).numpy()
            down = mc.ascend(_negated(model), x0, c, steps=steps, step_size=eta).numpy()
            if np.allclose(got, free, atol=1e-5) and not np.allclose(free, want, atol=1e-5):
                report.check(False, f"{what}: your images leave [0, 1] (range {got.min():.2f}..{got.max():.2f}). "
                                    "A logit is unbounded, so unclamped ascent runs off the universe U where "
                                    f"nothing was ever trained; clamp after every step as in {eq('metta-ascent')}.")
                return report
            if np.allclose(got, down, atol=1e-5):
                report.check(False, f"{what}: you step *down* the gradient, which makes the image less like class "
                                    f"{c}; {eq('metta-ascent')} adds +eta * grad.")
                return report
            if got.min() >= -1e-6 and got.max() <= 1 + 1e-6 and np.allclose(got, np.clip(free, 0, 1), atol=1e-5) \
                    and not np.allclose(got, want, atol=1e-5):
                report.check(False, f"{what}: you clamp only once, at the end. Clamp after every step, "
                                    f"{eq('metta-ascent')}: the gradient at a clamped point is not the gradient "
                                    "at the unclamped one.")
                return report
            report.check(bool(np.allclose(got, want, atol=1e-5)),
                         f"{what}: got images that differ from {eq('metta-ascent')} by up to "
                         f"{np.abs(got - want).max():.3g}.")
        report.check(all(torch.equal(p, q) for p, q in zip(before, model.parameters())),
                     f"{name}: your function changed the model's parameters; only x moves.")
    return report


def _negated(model: nn.Module) -> nn.Module:
    class Neg(nn.Module):
        def forward(self, x):
            return -model(x)
    return Neg()


def check_union_margin(union_margin: Callable) -> Report:
    """Check ``union_margin(s_a, s_b)``: the margin of A u B for unary nets sharing one Metta set,
    ``log(exp(s_a) + exp(s_b))``, eq. (metta-union), stable for large margins."""
    report = Report("Exercise 3 (the margin of a union)", points=1)
    s_a = np.array([0.0, 1.0, -3.0, 2.0, -20.0])
    s_b = np.array([0.0, -1.0, -3.0, 5.0, 4.0])
    got = _array(report, report.call(union_margin, s_a.copy(), s_b.copy(), what="five pairs of margins"), "")
    if got is None:
        return report
    if not report.check(got.shape == s_a.shape, f"returned shape {got.shape} for {s_a.size} pairs: "
                                                "vectorise with numpy"):
        return report
    want = np.logaddexp(s_a, s_b)
    if np.allclose(got, np.maximum(s_a, s_b)):
        report.check(False, "you return max(s_a, s_b): that decides membership (the sign), but it is not the "
                            "union's margin. Densities add, so e^{s} adds: with s_a = s_b = 0 the pooled net "
                            f"has twice the class mass and margin log 2 ({eq('metta-union')}).")
        return report
    if np.allclose(got, s_a + s_b):
        report.check(False, "you add the margins, which multiplies the density ratios; the union adds the ratios "
                            f"themselves: log(e^s_a + e^s_b) ({eq('metta-union')}).")
        return report
    if not report.check(bool(np.allclose(got, want, atol=1e-9)),
                        f"got {np.round(got, 4)}, expected {np.round(want, 4)} ({eq('metta-union')})."):
        return report
    big = _array(report, report.call(union_margin, np.array([1000.0, -1000.0]), np.array([999.0, -1001.0]),
                                     what="margins of +-1000"), "")
    if big is not None:
        report.check(bool(np.isfinite(big).all() and np.allclose(big, np.logaddexp([1000.0, -1000.0],
                                                                                [999.0, -1001.0]))),
                     f"with margins near +-1000 you return {big}: exp overflows or underflows. Factor out the "
                     "larger margin, m + log(1 + e^(-|s_a - s_b|)), or use np.logaddexp.")
    return report
