"""Checkers for the exercises of the chapter *DSDA: unlearning a class without the training data*.

* :func:`check_pcgrad` -- exercise 1, PCGrad for two tasks (label ``dsda-pcgrad``), 2 points;
* :func:`check_heun` -- exercise 2, Heun's drift of the accelerated sampler (``dsda-rk2``), 2 points;
* :func:`check_auroc` -- exercise 3, the membership attack's AUROC (``dsda-mia``), 2 points.

Each compares the student's answer with :mod:`companion.dsda` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion import dsda as ds
from companion.exercises import Report, eq

__all__ = ["check_pcgrad", "check_heun", "check_auroc"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_pcgrad": ("companion.dsda.pcgrad", "companion.dsda._pcgrad"),
              "check_heun": ("companion.dsda._drift",),
              "check_auroc": ()}  # the package computes AUROCs only through a model, not from scores


def _tensor(report: Report, got, shape: tuple, what: str) -> torch.Tensor | None:
    if got is None:
        return None
    if not isinstance(got, torch.Tensor):
        report.check(False, f"{what}: returned {type(got).__name__}, expected a tensor")
        return None
    if not report.check(tuple(got.shape) == shape,
                        f"{what}: returned shape {tuple(got.shape)}, expected {shape}"):
        return None
    return got.detach().double()


def _pcgrad_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    return [
        ("two gradients at 45 degrees (no conflict)", torch.tensor([1.0, 0.0]),
         torch.tensor([1.0, 1.0])),
        ("two conflicting gradients", torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])),
        ("conflicting gradients of different norms", torch.tensor([3.0, 1.0, 0.0]),
         torch.tensor([-1.0, 0.5, 2.0])),
        ("random 50-d gradients", torch.randn(50, generator=gen), torch.randn(50, generator=gen)),
    ]


def check_pcgrad(pcgrad_two: Callable) -> Report:
    """Check ``pcgrad_two(g1, g2)``: PCGrad's update for two flat gradients, eq. (dsda-pcgrad)."""
    report = Report("Exercise 1 (PCGrad for two tasks)", points=2)
    for what, g1, g2 in _pcgrad_cases():
        g1, g2 = g1.double(), g2.double()
        a, b = g1.clone(), g2.clone()
        got = _tensor(report, report.call(pcgrad_two, a, b, what=what), tuple(g1.shape), what)
        if got is None:
            return report
        if not report.check(torch.equal(a, g1) and torch.equal(b, g2),
                            f"{what}: your function changed its inputs in place; work on copies."):
            return report
        want = ds.pcgrad([g1, g2])
        always = (g1 - (g1 @ g2) / (g2 @ g2) * g2) + (g2 - (g1 @ g2) / (g1 @ g1) * g1)
        p1 = g1 - min(0.0, float(g1 @ g2)) / (g2 @ g2) * g2
        sequential = p1 + g2 - min(0.0, float(g2 @ p1)) / (p1 @ p1) * p1
        if torch.allclose(got, want, atol=1e-8):
            report.check(True, "")
            continue
        if torch.allclose(got, always, atol=1e-8):
            msg = (f"{what}: you project even when the gradients agree (<g1, g2> = "
                   f"{float(g1 @ g2):.3g} >= 0). {eq('dsda-pcgrad')} removes only the "
                   "conflicting component: min(0, <g_i, g_j>), so agreeing gradients are "
                   "summed unchanged.")
        elif torch.allclose(got, sequential, atol=1e-8):
            msg = (f"{what}: you project g2 off the already projected g1. Each gradient is "
                   f"projected off the other task's *original* gradient, {eq('dsda-pcgrad')}.")
        elif torch.allclose(got, p1, atol=1e-8):
            msg = (f"{what}: you return only the projected g1. The update of "
                   f"{eq('dsda-pcgrad')} is the sum of both projected gradients.")
        else:
            msg = (f"{what}: got {got.numpy().round(4)[:4]}..., expected "
                   f"{want.numpy().round(4)[:4]}... ({eq('dsda-pcgrad')}).")
        report.check(False, msg)
        return report
    return report


def _quadratic(a: torch.Tensor, scales: torch.Tensor) -> Callable:
    """grad of E(x) = 1/2 sum_j s_j (x_j - a_j)^2."""
    return lambda x: scales * (x - a)


def check_heun(heun_drift: Callable) -> Report:
    """Check ``heun_drift(grad_E, x, step, low, high)``: the drift of eq. (dsda-rk2)."""
    report = Report("Exercise 2 (Heun's drift)", points=2)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(4, 3, generator=gen, dtype=torch.float64)
    torch.manual_seed(0)
    net = ds.MLP(3, (8,), 3).double()
    y = torch.tensor([0, 1, 2, 0])
    net_grad = ds.model_energy_grad(net, y)
    cases = [
        ("a quadratic energy, wide box", _quadratic(torch.full((3,), 0.5, dtype=torch.float64),
                                                    torch.tensor([1.0, 2.0, 4.0],
                                                                 dtype=torch.float64)),
         0.1, -10.0, 10.0),
        ("a quadratic whose Euler step leaves the box [0, 1]",
         _quadratic(torch.full((3,), 3.0, dtype=torch.float64),
                    torch.ones(3, dtype=torch.float64)), 0.8, 0.0, 1.0),
        ("the energy of a small MLP", lambda z: net_grad(z)[1], 0.05, 0.0, 1.0),
    ]
    for what, grad_E, step, low, high in cases:
        x_in = x.clone()
        got = _tensor(report, report.call(heun_drift, grad_E, x_in, step, low, high, what=what),
                      tuple(x.shape), what)
        if got is None:
            return report
        if not report.check(torch.equal(x_in, x), f"{what}: your function changed x in place."):
            return report
        cfg = ds.SamplerConfig(step, rk_order=2, low=low, high=high)
        want = ds._drift(lambda z: (torch.zeros(len(z)), grad_E(z)), x, cfg)[0].double()
        k1 = -grad_E(x)
        k2_free = -grad_E(x + step * k1)
        k2 = -grad_E((x + step * k1).clamp(low, high))
        if torch.allclose(got, want, atol=1e-8):
            report.check(True, "")
            continue
        if torch.allclose(got, step * k1, atol=1e-8):
            msg = (f"{what}: this is the Euler drift -alpha grad E(x). Heun's step, "
                   f"{eq('dsda-rk2')}, also evaluates the gradient at the Euler point and "
                   "averages the two slopes.")
        elif torch.allclose(got, -step * k1, atol=1e-8) or torch.allclose(got, -want, atol=1e-8):
            msg = (f"{what}: your drift climbs the energy. The slopes are k = -grad E: the "
                   f"sampler descends, {eq('dsda-rk2')}.")
        elif torch.allclose(got, step * (k1 + k2), atol=1e-8):
            msg = (f"{what}: you sum the two slopes without the factor 1/2; "
                   f"{eq('dsda-rk2')} averages them.")
        elif torch.allclose(got, 0.5 * step * (k1 + k2_free), atol=1e-8):
            msg = (f"{what}: the intermediate point x + alpha k1 is not clamped to the box. "
                   f"{eq('dsda-rk2')} evaluates k2 at Pi_U(x + alpha k1): outside U the model "
                   "was never trained, and its gradient there means nothing.")
        else:
            msg = (f"{what}: got a drift that differs from {eq('dsda-rk2')} by up to "
                   f"{float((got - want).abs().max()):.3g}.")
        report.check(False, msg)
        return report
    return report


def _auroc_cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        ("members all above non-members", np.array([3.0, 4.0, 5.0]), np.array([0.0, 1.0, 2.0])),
        ("members all below non-members", np.array([0.0, 1.0]), np.array([2.0, 3.0, 4.0])),
        ("scores with ties across the two sets", np.array([1.0, 1.0, 2.0]), np.array([1.0, 0.0])),
        ("every score equal (an attack that sees nothing)", np.zeros(4), np.zeros(5)),
        ("200 members and 150 non-members, rounded (many ties)",
         np.round(rng.normal(0.3, 1.0, 200), 1), np.round(rng.normal(0.0, 1.0, 150), 1)),
    ]


def _pairs(s_in: np.ndarray, s_out: np.ndarray) -> tuple[float, float]:
    """P(s_in > s_out) and P(s_in = s_out) over all member/non-member pairs."""
    diff = s_in[:, None] - s_out[None, :]
    return float((diff > 0).mean()), float((diff == 0).mean())


def check_auroc(membership_auroc: Callable) -> Report:
    """Check ``membership_auroc(s_in, s_out)``: the AUROC of eq. (dsda-mia) from the members'
    and non-members' scores, ties counting one half."""
    report = Report("Exercise 3 (the membership AUROC)", points=2)
    for what, s_in, s_out in _auroc_cases():
        a, b = s_in.copy(), s_out.copy()
        got = report.call_number(membership_auroc, a, b, what=what)
        if got is None:
            return report
        if not report.check(np.array_equal(a, s_in) and np.array_equal(b, s_out),
                            f"{what}: your function changed its inputs in place."):
            return report
        above, tie = _pairs(s_in, s_out)
        want = above + 0.5 * tie
        if abs(got - want) <= 1e-9:
            report.check(True, "")
            continue
        if abs(got - above) <= 1e-9:
            msg = (f"{what}: you count only strict wins, so a tied pair counts 0. In "
                   f"{eq('dsda-mia')} a tie counts one half: an attack that cannot tell two "
                   "images apart is guessing, and guessing is right half the time.")
        elif abs(got - (above + tie)) <= 1e-9:
            msg = (f"{what}: you count a tied pair as a win (>=). {eq('dsda-mia')} counts it "
                   "one half, so that equal scores give chance, 0.5.")
        elif abs(got - (1 - want)) <= 1e-9:
            msg = (f"{what}: you swapped members and non-members. {eq('dsda-mia')} asks how "
                   "often a member scores *above* a non-member.")
        else:
            msg = f"{what}: got {got:.4g}, expected {want:.4g} ({eq('dsda-mia')})."
        report.check(False, msg)
        return report
    return report
