"""Checkers for the exercises of the chapter *LADA: label-specific memory for continual learning*.

* :func:`check_memory_logits` -- exercise 1, the memory's logits (label ``lada-memory``), 2 points;
* :func:`check_forgetting` -- exercise 2, forgetting of an accuracy matrix (``lada-forgetting``), 2 points;
* :func:`check_sample_prototypes` -- exercise 3, DPT's pseudo-features (``lada-dpt``), 2 points.

Each compares the student's answer with :mod:`companion.lada` on cases built to expose one mistake
each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion import lada
from companion.exercises import Report, eq

__all__ = ["check_memory_logits", "check_forgetting", "check_sample_prototypes"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_memory_logits": ("companion.lada.LabelMemory.forward", "companion.lada.LabelMemory.blockwise"),
              "check_forgetting": ("companion.lada.forgetting",),
              "check_sample_prototypes": ("companion.lada.DPTBank.sample",)}


def _tensor_answer(report: Report, got, what: str) -> np.ndarray | None:
    if got is None:
        return None
    if isinstance(got, torch.Tensor):
        got = got.detach().cpu().numpy()
    try:
        return np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        report.check(False, f"returned {type(got).__name__}, not an array of numbers ({what})")
        return None


# --- exercise 1: memory logits ---------------------------------------------------------------------

def _memory_reference(v, W, class_of, n_classes, beta) -> np.ndarray:
    memory = lada.LabelMemory(W.shape[1], beta=beta)
    memory.frozen, memory.class_of, memory.n_classes = [W], class_of, n_classes
    return memory.logits(v).numpy()


def _memory_cases():
    gen = torch.Generator().manual_seed(0)
    unit = lambda x: torch.nn.functional.normalize(x, dim=1)
    v_small = unit(torch.tensor([[1.0, 0.0], [0.6, 0.8]]))
    W_small = torch.tensor([[1.0, 0.0], [0.0, 0.5], [0.3, 1.2]])
    v = unit(torch.randn(6, 8, generator=gen))
    W = unit(torch.randn(11, 8, generator=gen)) * torch.linspace(0.4, 1.6, 11)[:, None]
    class_of = torch.tensor([0, 0, 0, 1, 2, 2, 2, 2, 3, 3, 1])
    return [("a hand-made case (d = 2, 3 vectors, 2 classes)", v_small, W_small, torch.tensor([0, 0, 1]), 2, 1.0),
            ("6 inputs, 11 vectors of varied norm, 4 classes, beta = 2.5", v, W, class_of, 4, 2.5)]


def _memory_diagnosis(name, v, W, class_of, C, beta, got) -> str:
    J = torch.nn.functional.one_hot(class_of, C).double()
    sim = v.double() @ W.double().T
    alt = {
        "max": None,
        "no_one_minus": torch.exp(beta * sim) @ J,
        "normalised": torch.exp(-beta * (1 - v.double() @ torch.nn.functional.normalize(W.double(), dim=1).T)) @ J,
        "beta_one": torch.exp(-(1 - sim)) @ J,
        "mean": (torch.exp(-beta * (1 - sim)) @ J) / J.sum(0),
        "plus": torch.exp(-beta * (1 + sim)) @ J,
    }
    aff = torch.exp(-beta * (1 - sim))
    alt["max"] = torch.stack([aff[:, class_of == c].amax(1) for c in range(C)], 1)
    close = lambda key: np.allclose(got, alt[key].numpy(), atol=1e-6)
    where = eq("lada-memory")
    if close("max"):
        return (f"{name}: you keep each class's best memory vector (a max). {where} *sums* the affinities of all "
                "lambda_1 vectors of the class, so a class whose data have several modes gets evidence from each.")
    if close("mean"):
        return (f"{name}: you average the affinities of a class's vectors; {where} sums them (a class with more "
                "vectors may collect more evidence, and J in the matrix form is a plain 0/1 map).")
    if close("no_one_minus"):
        return (f"{name}: you compute exp(beta * v.w). {where} has exp(-beta (1 - v.w)), which is yours times "
                "exp(-beta): the same ranking within the memory term but a different scale against the class "
                "vectors' logits it is added to.")
    if close("plus"):
        return f"{name}: the sign inside is wrong: {where} is exp(-beta (1 - v.w)), largest when v and w align."
    if close("normalised"):
        return (f"{name}: you normalise the memory vectors. They are free parameters, initialised at k-means "
                f"centres (inside the unit ball) and never re-normalised: their norm is part of {where}.")
    if beta != 1.0 and close("beta_one"):
        return f"{name}: your answer ignores beta (it equals beta = 1); use it as in {where}."
    want = _memory_reference(v, W, class_of, C, beta)
    return f"{name}: got {np.round(got, 4).tolist()}, expected {np.round(want, 4).tolist()} ({where})."


def check_memory_logits(memory_logits: Callable) -> Report:
    """Check ``memory_logits(v_norm, W, class_of, n_classes, beta)``, eq. (lada-memory)."""
    report = Report("Exercise 1 (memory logits)", points=2)
    for name, v, W, class_of, C, beta in _memory_cases():
        args = (v.clone(), W.clone(), class_of.clone(), C, beta)
        got = _tensor_answer(report, report.call(memory_logits, *args, what=name), name)
        if got is None:
            return report
        if not report.check(got.shape == (len(v), C), f"{name}: returned shape {got.shape}, expected "
                                                      f"({len(v)}, {C}): one logit per input and class."):
            return report
        ok = bool(np.allclose(got, _memory_reference(v, W, class_of, C, beta), atol=1e-5))
        if not report.check(ok, "" if ok else _memory_diagnosis(name, v, W, class_of, C, beta, got)):
            return report
    return report


# --- exercise 2: forgetting --------------------------------------------------------------------------

def _forgetting_cases():
    nan = np.nan
    rng = np.random.default_rng(3)
    A6 = np.tril(rng.uniform(0.2, 0.95, (6, 6)))
    A6[np.triu_indices(6, 1)] = nan
    return [
        ("two tasks", np.array([[0.9, nan], [0.6, 0.85]])),
        ("three tasks, task 1 improves after task 2", np.array([[0.9, nan, nan], [0.95, 0.8, nan],
                                                                [0.5, 0.7, 0.9]])),
        ("three tasks, task 1 ends above its past (backward transfer)",
         np.array([[0.6, nan, nan], [0.5, 0.9, nan], [0.7, 0.6, 0.8]])),
        ("six random tasks", A6),
    ]


def _forgetting_diagnosis(name: str, A: np.ndarray, got: float, want: float) -> str:
    K = len(A)
    where = eq("lada-forgetting")
    diag = np.mean([A[k, k] - A[K - 1, k] for k in range(K - 1)])
    with_last = np.mean([np.max(A[k:, k]) - A[K - 1, k] for k in range(K - 1)])
    over_all = np.sum([np.max(A[k:, k]) - A[K - 1, k] for k in range(K)]) / K
    if np.isnan(got):
        return (f"{name}: you return NaN. The entries above the diagonal are NaN (tasks not learned yet); take "
                f"the max over rows j = k..K-1 only, A[k:K-1, k], as in {where}.")
    if np.isclose(got, 100 * want):
        return f"{name}: you return a percentage ({got:.1f}); return a fraction, as the accuracies are."
    if np.isclose(got, diag) and not np.isclose(diag, want):
        return (f"{name}: you compare each task's final accuracy with its accuracy right after it was learned, "
                f"A[k, k]. {where} takes the best accuracy the task ever had before the end, max over "
                "k <= j < K, so a task that improved and then fell counts its whole fall.")
    if np.isclose(got, with_last) and not np.isclose(with_last, want):
        return (f"{name}: your max runs over the last row too, so forgetting can never be negative. {where} "
                "stops at j < K: a task that ends above its past (backward transfer) has negative forgetting.")
    if np.isclose(got, over_all) and not np.isclose(over_all, want):
        return (f"{name}: you average over all K tasks. The last task cannot have been forgotten yet; {where} "
                "averages over the K-1 earlier ones.")
    return f"{name}: got {got:.4f}, expected {want:.4f} ({where})."


def check_forgetting(forgetting: Callable) -> Report:
    """Check ``forgetting(A)`` on accuracy matrices with NaN above the diagonal, eq. (lada-forgetting)."""
    report = Report("Exercise 2 (forgetting)", points=2)
    for name, A in _forgetting_cases():
        got = report.call(forgetting, A.copy(), what=name)
        if got is None:
            return report
        try:
            got = float(np.asarray(got, dtype=float))
        except (TypeError, ValueError):
            report.check(False, f"{name}: returned {type(got).__name__}; return one number.")
            return report
        want = lada.forgetting(A)
        ok = bool(np.isclose(got, want, atol=1e-9))
        if not report.check(ok, "" if ok else _forgetting_diagnosis(name, A, got, want)):
            return report
    return report


# --- exercise 3: DPT's pseudo-features ----------------------------------------------------------------

def _bank(means, variances, weights, eta) -> lada.DPTBank:
    bank = lada.DPTBank(n_components=1, eta=eta)
    bank.means, bank.sigmas, bank.pis = means, variances.sqrt(), weights
    bank.labels = torch.zeros(len(means), dtype=torch.int64)
    return bank


def check_sample_prototypes(sample_prototypes: Callable) -> Report:
    """Check ``sample_prototypes(means, variances, weights, eta, generator)``, eq. (lada-dpt)."""
    report = Report("Exercise 3 (DPT's pseudo-features)", points=2)
    where = eq("lada-dpt")
    means = torch.tensor([[2.0, -1.0, 0.0, 3.0], [0.0, 0.0, 5.0, 1.0], [-2.0, 1.0, 1.0, 1.0]])
    variances = torch.tensor([4.0, 0.25, 1.0])
    weights = torch.tensor([0.5, 0.3, 0.2])
    eta = 8.0
    what = "3 components in d = 4, variances 4, 0.25 and 1, eta = 8"
    got = report.call(sample_prototypes, means.clone(), variances.clone(), weights.clone(), eta,
                      torch.Generator().manual_seed(7), what=what)
    if got is None:
        return report
    if not report.check(isinstance(got, (tuple, list)) and len(got) == 2,
                        f"{what}: return a pair (features, sample_weights), got {type(got).__name__}."):
        return report
    feats, w = (_tensor_answer(report, g, what) for g in got)
    if feats is None or w is None:
        return report
    if not report.check(feats.shape == (3, 4) and w.shape == (3,),
                        f"{what}: got shapes {feats.shape} and {w.shape}, expected (3, 4) and (3,): one "
                        "pseudo-feature and one weight per stored component."):
        return report
    want_w = (weights * eta).numpy()
    if not np.allclose(w, want_w):
        if np.allclose(w, weights.numpy()):
            problem = f"your weights are the mixture weights pi_l alone; {where} multiplies them by eta."
        elif np.allclose(w, np.full(3, eta)):
            problem = f"your weights ignore pi_l: {where} weighs each component by pi_l * eta."
        else:
            problem = f"weights {np.round(w, 4).tolist()}, expected pi_l * eta = {want_w.tolist()} ({where})."
        report.check(False, f"{what}: {problem}")
        return report
    report.check(True, "")
    bank = _bank(means, variances, weights, eta)
    want, _, _ = bank.sample(torch.Generator().manual_seed(7))
    eps = (want - means) / variances.sqrt()[:, None]
    if np.allclose(feats, (means + variances[:, None] * eps).numpy(), atol=1e-5):
        report.check(False, f"{what}: you scale the noise by the variance sigma_l^2; {where} scales it by the "
                            "standard deviation sigma_l (the square root), so the component with variance 4 "
                            "is twice, not four times, as wide as one of variance 1.")
        return report
    if np.allclose(feats, means.numpy()):
        report.check(False, f"{what}: you return the means without noise. DPT needs the spread: fresh noise "
                            "around each mean penalises new parameters over the old class's whole region.")
        return report
    if np.allclose(feats, torch.nn.functional.normalize(want, dim=1).numpy(), atol=1e-5):
        report.check(False, f"{what}: you normalise the pseudo-features. The mixture lives on the raw features, "
                            f"so {where} returns raw ones; the loss normalises them afterwards.")
        return report
    if not report.check(bool(np.allclose(feats, want.numpy(), atol=1e-5)),
                        f"{what}: your features differ from {where} with eps = torch.randn(means.shape, "
                        "generator=generator) (one draw of the whole (P, d) block). Draw the noise from the "
                        "generator you are given, in that shape, so that a run can be reproduced."):
        return report
    gen = torch.Generator().manual_seed(11)
    first = report.call(sample_prototypes, means, variances, weights, eta, gen, what="a first call")
    second = report.call(sample_prototypes, means, variances, weights, eta, gen, what="a second call")
    if first is not None and second is not None:
        report.check(not np.allclose(_tensor_answer(report, first[0], ""), _tensor_answer(report, second[0], "")),
                     "two calls with the same generator returned the same features: each training step must "
                     "draw fresh pseudo-features (do not re-seed inside the function).")
    return report
