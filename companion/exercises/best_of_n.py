"""Checkers for the exercises of the chapter *Best-of-n: what KL divergence does it really buy?*

* :func:`check_estimator` -- exercise 1, the KL estimator (label ``bon-estimator``), 2 points;
* :func:`check_pmf` -- exercise 2, the best-of-n pmf with random tie-breaking (``bon-pmf-ties``), 2 points;
* :func:`check_win_rate_budget` -- exercise 3, the smallest n reaching a target win rate, 1 point.

Each compares the student's answer with :mod:`companion.best_of_n` on cases built to expose
one mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from companion import best_of_n as bon
from companion.exercises import Report, eq

__all__ = ["check_estimator", "check_pmf", "check_win_rate_budget"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade);
# exercise 3 composes public pieces (the win rate, the exact KL), so nothing answers it whole.
REFERENCES = {"check_estimator": ("companion.best_of_n.kl_estimator", "companion.best_of_n.estimator._kl_hat"),
              "check_pmf": ("companion.best_of_n.best_of_n_pmf", "companion.best_of_n.core._max_level_law"),
              "check_win_rate_budget": ()}


def check_estimator(kl_hat: Callable) -> Report:
    """Check ``kl_hat(eps, n)``, eq. (bon-estimator), vectorised over ``eps``."""
    report = Report("Exercise 1 (the estimator)", points=2)
    eps = np.array([1e-3, 0.01, 0.1, 0.3, 0.5, 0.9, 0.999])
    for n in (2, 10, 1000):
        got = report.call_array(kl_hat, eps, n, what=f"eps an array of {eps.size}, n = {n}")
        if got is None:
            return report
        if not report.check(got.shape == eps.shape, f"returned shape {got.shape} for {eps.size} values of eps: "
                                                    "vectorise over eps with numpy"):
            return report
        want = bon.kl_estimator(eps, n)
        bad = ~np.isclose(got, want, rtol=1e-7, atol=1e-10)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            hint = ""
            if got[i] < 0:
                hint = " It is negative, and a KL divergence never is."
            elif got[i] > bon.kl_formula(n) + 1e-9:
                hint = " It exceeds log n - (n-1)/n, which the estimator never does: check the signs of the two terms."
            report.check(False, f"at eps = {eps[i]}, n = {n} you return {got[i]:.6g}, {eq('bon-estimator')} gives "
                                f"{want[i]:.6g}.{hint}")
            return report
        report.check(True, "")
    one = report.call_array(kl_hat, np.array([1.0]), 10, what="eps = 1")
    if one is not None:
        report.check(bool(np.isfinite(one).all() and abs(one[0]) < 1e-12),
                     f"at eps = 1 you return {one[0]}; it must be exactly 0 (the reference always gives that "
                     "answer, so best-of-n changes nothing). (1 - eps)^n = 0 multiplies log(1 - eps) = -inf: "
                     "treat eps = 1 separately.")
    tiny = report.call_array(kl_hat, np.array([1e-20]), 100, what="eps = 1e-20")
    if tiny is not None:
        report.check(bool(np.isfinite(tiny).all() and abs(tiny[0] - bon.kl_formula(100)) < 1e-9),
                     f"at eps = 1e-20, n = 100 you return {tiny[0]}; it must approach log n - (n-1)/n = "
                     f"{bon.kl_formula(100):.6f}. In floating point 1 - (1 - eps)^n rounds to 0 and 0 * log 0 is "
                     "nan: compute log (1 - eps)^n with log1p and 1 - (1 - eps)^n with expm1.")
    n1 = report.call_array(kl_hat, eps, 1, what="n = 1")
    if n1 is not None:
        report.check(bool(np.allclose(n1, 0.0, atol=1e-12)),
                     "with n = 1 best-of-n is the reference itself, so the estimator must be 0 for every eps; "
                     f"you return up to {np.nanmax(np.abs(n1)):.3g}.")
    return report


def _pmf_cases() -> list[tuple[str, np.ndarray, np.ndarray, int]]:
    rng = np.random.default_rng(0)
    big = rng.dirichlet(np.full(2000, 0.5))
    return [
        ("no ties, rewards sorted", np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 2.0]), 3),
        ("no ties, rewards not sorted", np.array([0.5, 0.2, 0.3]), np.array([2.0, 0.0, 1.0]), 3),
        ("n = 1", np.array([0.1, 0.6, 0.3]), np.array([3.0, 1.0, 2.0]), 1),
        ("tied top level", np.array([0.25, 0.25, 0.5]), np.array([1.0, 1.0, 0.0]), 2),
        ("tied level, unequal masses", np.array([0.1, 0.3, 0.2, 0.4]), np.array([2.0, 2.0, 0.0, 1.0]), 4),
        ("an answer of probability 0", np.array([0.5, 0.0, 0.5]), np.array([1.0, 1.0, 0.0]), 3),
        ("L = 2000, n = 100,000", big, rng.permutation(2000).astype(float), 100_000),
    ]


def _pmf_diagnosis(name: str, probs, rewards, got, want) -> str:
    total = float(np.sum(got))
    tied = np.unique(rewards).size < rewards.size
    if tied and abs(total - 1) > 1e-6:
        return (f"{name}: your pmf sums to {total:.4g}, not 1. With tied rewards the no-tie formula gives every "
                "answer of a tied level the whole level's probability; split P_n(level) among the level's answers "
                f"in proportion to pi ({eq('bon-pmf-ties')}).")
    if tied:
        return (f"{name}: the pmf sums to 1 but splits a tied level wrongly (got {np.round(got, 4)}, expected "
                f"{np.round(want, 4)}). With random tie-breaking the winner inside a level is distributed like pi "
                "restricted to that level, not given to one answer or split evenly.")
    if name.startswith("n = 1"):
        return f"{name}: best-of-1 is the reference, so the pmf must equal probs; you return {np.round(got, 4)}."
    if "not sorted" in name:
        return (f"{name}: wrong when the answers are not listed in reward order (got {np.round(got, 4)}, expected "
                f"{np.round(want, 4)}). F(y) sums pi over answers with reward <= r(y), not over earlier indices.")
    if abs(total - 1) > 1e-6:
        return f"{name}: the pmf sums to {total:.10g}; F^n - (F^-)^n loses digits for large n: work in log space."
    return f"{name}: got {np.round(got, 4)}, expected {np.round(want, 4)} ({eq('bon-pmf')})."


def check_pmf(pmf: Callable) -> Report:
    """Check ``pmf(probs, rewards, n)``: best-of-n with ties broken uniformly at random."""
    report = Report("Exercise 2 (ties)", points=2)
    for name, probs, rewards, n in _pmf_cases():
        before = probs.copy()
        got = report.call_array(pmf, probs, rewards, n, what=name)
        if got is None:
            continue
        if not report.check(np.array_equal(probs, before), f"{name}: your function changed its input probs."):
            continue
        if not report.check(got.shape == probs.shape, f"{name}: returned shape {got.shape}, expected {probs.shape}."):
            continue
        if not report.check(bool(np.isfinite(got).all()),
                            f"{name}: the pmf has nan or inf entries at {np.flatnonzero(~np.isfinite(got))[:5]}; "
                            "an answer of probability 0 must get probability 0 (avoid 0/0 in the tie split)."):
            continue
        want = bon.best_of_n_pmf(probs, rewards, n)
        if not np.allclose(got, want, rtol=1e-6, atol=1e-12):
            report.check(False, _pmf_diagnosis(name, probs, rewards, got, want))
        else:
            report.check(True, "")
    return report


def check_win_rate_budget(budget: Callable, *, L: int = 100, target: float = 0.99) -> Report:
    """Check exercise 3 for a uniform reference over ``L`` answers with distinct rewards.

    ``budget()`` returns a dict: ``n``, the smallest n whose win rate (ties count half) reaches
    ``target``; ``kl_true``, its exact KL; ``kl_formula``, what log n - (n-1)/n reports; and
    ``kl_rewind``, the KL of rewind-and-repeat at the same win rate in the continuous limit.
    """
    report = Report("Exercise 3 (a win-rate budget)", points=1)
    answer = report.call(budget, what="budget()")
    if answer is None:
        return report
    keys = {"n", "kl_true", "kl_formula", "kl_rewind"}
    if not report.check(isinstance(answer, dict) and keys <= set(answer),
                        f"budget() must return a dict with the keys {sorted(keys)}; got {answer!r:.80}"):
        return report
    try:
        n, kl_true, kl_formula, kl_rewind = (int(answer["n"]), float(answer["kl_true"]),
                                             float(answer["kl_formula"]), float(answer["kl_rewind"]))
    except (TypeError, ValueError) as err:
        report.check(False, f"the answers must be numbers ({err})")
        return report
    if not report.check(n >= 1, f"n must be a positive integer, got {n}"):
        return report
    probs, rewards = bon.uniform(L)
    best = 1
    while bon.win_rate(probs, rewards, best) < target:
        best += 1
    naive = int(np.ceil(target / (1 - target) - 1e-9))
    if n == naive and n != best:
        report.check(False, f"n = {n} solves n/(n+1) >= {target}, but n/(n+1) is the win rate of a reference "
                            f"without atoms. With {L} equally likely answers the best-of-n answer often ties with "
                            f"the reference's answer, and a tie counts half: W_{n} = "
                            f"{bon.win_rate(probs, rewards, n):.5f}. Compute the exact win rate ({eq('bon-winrate')}).")
    elif n < best:
        report.check(False, f"at n = {n} the win rate is {bon.win_rate(probs, rewards, n):.5f} < {target}.")
    elif n > best:
        report.check(False, f"n = {n} works but is not the smallest: n = {n - 1} already reaches "
                            f"{bon.win_rate(probs, rewards, n - 1):.5f}.")
    else:
        report.check(True, "")
    # The KL answers are judged at the student's own n, so one mistake is not counted twice.
    true_kl, formula_kl = bon.kl_best_of_n(probs, rewards, n), float(bon.kl_formula(n))
    if abs(kl_true - formula_kl) < 1e-6 and abs(kl_true - true_kl) > 1e-6:
        report.check(False, f"your 'true' KL is the formula's value; compute the exact KL of {eq('bon-kl')}.")
    else:
        report.check(abs(kl_true - true_kl) < 1e-4,
                     f"the exact KL at n = {n} is not {kl_true:.4f}; recompute it with {eq('bon-kl')} "
                     "(it must lie below the formula and below log L).")
    report.check(abs(kl_formula - formula_kl) < 1e-4,
                 f"log n - (n-1)/n at n = {n} is not {kl_formula:.4f}.")
    m = 1 / (2 * (1 - target))
    report.check(abs(kl_rewind - np.log(m)) < 1e-4,
                 f"rewind-and-repeat with threshold 1 - 1/m wins 1 - 1/(2m); solve for m and take log m "
                 f"(you gave {kl_rewind:.4f}).")
    return report
