"""Checkers for the exercises of the chapter *ORTE: explanations that keep what the model uses*.

* :func:`check_ste` -- exercise 1, the decoupled straight-through sample (label ``orte-ste``),
  2 points;
* :func:`check_contrast` -- exercise 2, the explanation/complement contrast (``orte-contrast``),
  2 points.

Each compares the student's answer with :mod:`companion.orte` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from companion import orte as ot
from companion.exercises import Report, eq

__all__ = ["check_ste", "check_contrast"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_ste": ("companion.orte.decoupled_ste",),
              "check_contrast": ("companion.orte.contrast_loss",)}


def _ste_cases():
    gen = torch.Generator().manual_seed(0)
    return [
        ("one entry, tau_f = 0.5, tau_b = 2", torch.tensor([[0.2, -0.4]]),
         torch.tensor([[0.1, 0.3]]), 0.5, 2.0),
        ("six entries, tau_f = 0.1, tau_b = 3", torch.randn(6, 2, generator=gen),
         -torch.log(-torch.log(torch.rand(6, 2, generator=gen))), 0.1, 3.0),
    ]


def check_ste(ste: Callable) -> Report:
    """Check ``ste(logits, gumbel, tau_f, tau_b)``: the sample of eq. (orte-ste), "on" column."""
    report = Report("Exercise 1 (decoupled straight-through sample)", points=2)
    for what, logits, gumbel, tau_f, tau_b in _ste_cases():
        lg = logits.double().clone().requires_grad_(True)
        got = report.call(ste, lg, gumbel.double(), tau_f, tau_b, what=what)
        if got is None:
            return report
        if not report.check(isinstance(got, torch.Tensor) and got.shape == logits.shape,
                            f"{what}: expected a tensor of shape {tuple(logits.shape)}"):
            return report
        ref = logits.double().clone().requires_grad_(True)
        want = ot.decoupled_ste(ref, tau_f, tau_b, gumbel.double())
        if not report.check(torch.equal(got.detach(), want.detach()),
                            f"{what}: the forward value should be the one-hot argmax of "
                            f"(logits + g) / tau_f, exactly 0 or 1 ({eq('orte-ste')}); got "
                            f"{got.detach().numpy().round(3).tolist()}"):
            return report
        if not report.check(got.requires_grad, f"{what}: no gradient reaches the logits; the "
                            f"straight-through trick of {eq('orte-ste')} adds soft - sg(soft)."):
            return report
        weight = torch.tensor([1.0, 0.0], dtype=torch.float64).expand_as(got)
        (g_got,) = torch.autograd.grad((got * weight).sum(), lg)
        (g_want,) = torch.autograd.grad((want * weight).sum(), ref)
        if torch.allclose(g_got, g_want, atol=1e-9):
            continue
        ratio = float((g_got.abs().sum() / g_want.abs().sum().clamp_min(1e-30)))
        if abs(ratio - tau_b / tau_f) < 1e-6:
            msg = (f"{what}: your gradient is {ratio:.3g} times too large: it is the gradient of "
                   f"the soft sample at tau_f. {eq('orte-ste')} rescales it by tau_f / tau_b, so "
                   "the logits see a gradient of size 1 / tau_b.")
        elif abs(ratio - tau_f / tau_b) < 1e-6:
            msg = (f"{what}: your gradient is rescaled twice (by (tau_f / tau_b) squared); "
                   f"{eq('orte-ste')} multiplies it by tau_f / tau_b once.")
        else:
            msg = (f"{what}: the gradient on the logits differs from {eq('orte-ste')} by up to "
                   f"{float((g_got - g_want).abs().max()):.3g} (a softmax at tau_b instead of "
                   "tau_f has a different Jacobian).")
        report.check(False, msg)
        return report
    return report


def check_contrast(contrast: Callable) -> Report:
    """Check ``contrast(x, x_pos, x_neg)``: the loss of eq. (orte-contrast), temperature 0.5."""
    report = Report("Exercise 2 (explanation against complement)", points=2)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 20, 2, generator=gen, dtype=torch.float64)
    noise = torch.randn(3, 20, 2, generator=gen, dtype=torch.float64)
    x_pos = x.clone()
    x_pos[:, :, 1] = noise[:, :, 1]  # channel 1 replaced: per channel the contrast differs
    x_neg = 0.5 * x + noise
    cases = [("a univariate batch", x[..., :1], x_pos[..., :1], x_neg[..., :1]),
             ("two channels, one of them kept only in the positive", x, x_pos, x_neg)]
    for what, a, b, c in cases:
        got = report.call_number(contrast, a.clone(), b.clone(), c.clone(), what=what)
        if got is None:
            return report
        want = float(ot.contrast_loss(a, b, c))
        if abs(got - want) < 1e-8:
            report.check(True, "")
            continue
        s_p = F.cosine_similarity(a.flatten(1), b.flatten(1), dim=1) / 0.5
        s_n = F.cosine_similarity(a.flatten(1), c.flatten(1), dim=1) / 0.5
        flat = float((torch.logaddexp(s_p, s_n) - s_p).mean())
        s_p1 = F.cosine_similarity(a, b, dim=1)
        s_n1 = F.cosine_similarity(a, c, dim=1)
        no_temp = float((torch.logaddexp(s_p1, s_n1) - s_p1).mean())
        if abs(got - flat) < 1e-8:
            msg = (f"{what}: you take one cosine over the flattened series. {eq('orte-contrast')} "
                   "takes it along the time axis for each channel, so a channel the explanation "
                   "drops cannot hide behind one it keeps.")
        elif abs(got - no_temp) < 1e-8:
            msg = f"{what}: the similarities are not divided by the temperature 0.5 ({eq('orte-contrast')})."
        elif abs(got + want) < 1e-8 or abs(got - float(torch.logaddexp(s_p1 / 0.5, s_n1 / 0.5).mean()
                                                        - (s_n1 / 0.5).mean())) < 1e-8:
            msg = (f"{what}: your loss prefers the complement. The positive of "
                   f"{eq('orte-contrast')} is the explanation x+.")
        else:
            msg = f"{what}: got {got:.6f}, expected {want:.6f} ({eq('orte-contrast')})."
        report.check(False, msg)
        return report
    return report
