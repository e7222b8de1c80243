"""Checkers for the exercises of the chapter *FactTest: answer only when a test says the answer is likely true*.

* :func:`check_index` -- exercise 1, the order-statistic index k_hat, eq. (facttest-khat);
* :func:`check_decide` and :func:`check_tie_counterexample` -- exercise 2, ties: the strict rule
  and a discrete score law on which "answer iff score >= tau" breaks the guarantee;
* :func:`check_shifted_threshold` -- exercise 3, the threshold under covariate shift
  (rejection sampling, eq. (facttest-reject)).

Each runs the student's answer on cases built to expose one mistake each and names the mistake.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from companion import facttest as ft
from companion.exercises import Report

__all__ = ["check_index", "check_decide", "check_tie_counterexample", "check_shifted_threshold"]

_GRID = [(n0, a, d) for n0 in (0, 1, 10, 28, 29, 30, 44, 50, 59, 100, 200, 1000)
         for a, d in ((0.1, 0.05), (0.05, 0.05), (0.1, 0.01), (0.2, 0.1))]


def _first_k(n0: int, p: float, delta: float, shift: int = 0) -> int:
    """min{k in 1..n0+1 : P(Bin(n0, p) >= k + shift) <= delta}."""
    k = np.arange(1, n0 + 2)
    return int(k[np.argmax(stats.binom.sf(k - 1 + shift, n0, p) <= delta)])


def _mistakes(n0: int, alpha: float, delta: float) -> dict[str, int]:
    """What the classic wrong versions of k_hat return."""
    right = ft.order_statistic_index(n0, alpha, delta)
    return {
        "0-based": right - 1,
        "alpha-for-1-alpha": _first_k(n0, alpha, delta),
        "naive": ft.naive_index(n0, alpha),
        "n0-when-too-few": min(right, n0),
    }


_HINTS = {
    "n0-when-too-few": "when even k = n0 gives v(k) = (1 - alpha)^n0 > delta, no order statistic is safe: "
                       "return k = n0 + 1 (threshold +inf, always abstain), not n0 (and never crash).",
    "0-based": "you return k_hat - 1. Either a 0-based index (the answer is a 1-based rank in 1..n0+1, T_(1) the "
               "smallest score; convert only when you read the sorted array), or a tail that starts at j = k + 1: "
               "v(k) = P(Bin(n0, 1 - alpha) >= k) sums j = k..n0, because T_(k) falls below the "
               "(1 - alpha)-quantile exactly when at least k scores do.",
    "alpha-for-1-alpha": "you use Bin(n0, alpha); the count that matters is how many of the n0 null scores fall "
                         "*below* the (1 - alpha)-quantile, which is Bin(n0, 1 - alpha).",
    "naive": "you return ceil(n0 (1 - alpha)), the empirical quantile: it ignores delta, and its Type I error "
             "exceeds alpha in about half of the calibration draws.",
}


def check_index(index: Callable) -> Report:
    """Check ``index(n0, alpha, delta) -> k_hat`` (1-based, n0 + 1 meaning tau = +inf)."""
    report = Report("Exercise 1 (the order-statistic index)")
    got = {}
    for n0, alpha, delta in _GRID:
        try:
            k = index(n0, alpha, delta)
        except Exception as err:  # the student's code may raise anything
            too_few = ft.order_statistic_index(n0, alpha, delta) == n0 + 1
            detail = f": {err}" if str(err) else ""
            report.check(False, f"index({n0}, {alpha}, {delta}) raised {type(err).__name__}{detail}. "
                                + (_HINTS["n0-when-too-few"] if too_few else ""))
            return report
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            report.check(False, f"index({n0}, {alpha}, {delta}) returned {k!r}; return an int in 1..n0+1.")
            return report
        got[(n0, alpha, delta)] = int(k)
    wrong = [case for case, k in got.items() if k != ft.order_statistic_index(*case)]
    for case in got:
        report.check(case not in wrong, "")  # one check per grid point; the explanations follow
    report.problems.clear()
    if not wrong:
        return report
    # Name the mistake whose answers the student's reproduce on every wrong case.
    for name, hint in _HINTS.items():
        if all(got[case] == _mistakes(*case)[name] for case in wrong):
            report.problems.append(f"{len(wrong)} of {len(got)} cases wrong, e.g. index{wrong[-1]} = "
                                   f"{got[wrong[-1]]}, expected {ft.order_statistic_index(*wrong[-1])}: {hint}")
            return report
    for case in wrong[-3:]:
        want = ft.order_statistic_index(*case)
        report.problems.append(f"index{case} = {got[case]}, expected {want} "
                               f"(v({want}) = {ft.violation_probability(want, case[0], case[1]):.4f} <= {case[2]}, "
                               f"and v({want - 1}) > {case[2]}).")
    return report


def check_decide(decide: Callable) -> Report:
    """Check ``decide(scores, tau) -> bool array`` (True = answer): strict, and +inf abstains."""
    report = Report("Exercise 2a (the decision rule)")
    scores = np.array([-1.0, -0.5, -0.5, 0.0, 0.3])
    cases = [(-0.5, "a score equal to the threshold"), (math.inf, "tau = +inf"), (-2.0, "a low threshold")]
    for tau, what in cases:
        try:
            got = np.asarray(decide(scores.copy(), tau))
        except Exception as err:
            report.check(False, f"decide raised {type(err).__name__}: {err} ({what})")
            continue
        want = scores > tau
        if got.shape != want.shape or got.dtype != np.bool_:
            report.check(False, f"decide must return a bool array of shape {want.shape}, got {got.dtype} {got.shape}")
            continue
        if tau == -0.5 and np.array_equal(got, scores >= tau):
            report.check(False, "a score equal to tau must abstain: answer iff score > tau. With '>=' every tie "
                                "with the threshold is answered, and on discrete scores (few distinct values) "
                                "that can add an atom of probability larger than alpha to the Type I error.")
        else:
            report.check(np.array_equal(got, want), f"{what}: got {got.tolist()}, expected {want.tolist()}.")
    return report


def check_tie_counterexample(atoms, probs, n0: int, alpha: float, delta: float) -> Report:
    """Check a discrete null law (``atoms`` with ``probs``) on which '>=' breaks P(Type I > alpha) <= delta."""
    report = Report("Exercise 2b (a counterexample with ties)")
    atoms, probs = np.asarray(atoms, dtype=float), np.asarray(probs, dtype=float)
    if not report.check(atoms.ndim == 1 and atoms.shape == probs.shape and atoms.size >= 1,
                        "atoms and probs must be 1-D arrays of the same length."):
        return report
    if not report.check(bool(np.all(probs >= 0) and abs(probs.sum() - 1) < 1e-9),
                        f"probs must be non-negative and sum to 1 (they sum to {probs.sum():.6g})."):
        return report
    if not report.check(np.unique(atoms).size == atoms.size, "atoms must be distinct (merge repeated values)."):
        return report
    order = np.argsort(atoms)
    atoms, probs = atoms[order], probs[order]
    k = ft.order_statistic_index(n0, alpha, delta)
    if not report.check(k <= n0, f"with n0 = {n0} the threshold is +inf ((1 - alpha)^n0 > delta): both rules always "
                                 f"abstain and nothing can break. Use n0 >= {ft.min_null_samples(alpha, delta)}."):
        return report
    strict = ft.discrete_violation_probability(atoms, probs, k, n0, alpha, ">")
    ge = ft.discrete_violation_probability(atoms, probs, k, n0, alpha, ">=")
    report.check(strict <= delta + 1e-12, f"the strict rule violates with probability {strict:.4f} > delta: "
                                          "that would contradict the theorem; check your law.")
    report.check(ge > delta, f"with '>=' the probability of Type I > alpha is {ge:.4f} <= delta = {delta}: no "
                             "counterexample. You need an atom t with P(T > t) <= alpha < P(T >= t) on which "
                             "T_(k_hat) lands often, i.e. an atom carrying more than alpha - P(T > t) of mass "
                             "right at the (1 - alpha)-quantile.")
    return report


def _shift_case(rng: np.random.Generator, world: ft.ShiftWorld, n: int = 1000):
    x, correct, scores = world.sample(n, "source", rng)
    return scores, correct, world.ratio(x)


def check_shifted_threshold(threshold: Callable, *, reps: int = 200, seed: int = 0) -> Report:
    """Check ``threshold(scores, correct, weights, bound, alpha, delta, rng) -> tau`` under covariate shift.

    ``weights`` are the density ratios w = dQ/dP of the calibration questions and ``bound`` a
    number B >= max w. The checker uses
    :class:`companion.facttest.ShiftWorld`, whose exact target Type I error is known.
    """
    report = Report("Exercise 3 (covariate shift)")
    alpha, delta, world = 0.1, 0.05, ft.ShiftWorld()
    rng = np.random.default_rng(seed)

    def call(*args):
        try:
            return float(threshold(*args))
        except Exception as err:
            report.check(False, f"threshold raised {type(err).__name__}: {err}")
            return None

    # 1. No shift (all weights 1): rejection sampling keeps everything, so tau is the plain FactTest threshold.
    scores, correct, _ = _shift_case(rng, world)
    tau = call(scores, correct, np.ones_like(scores), 1.0, alpha, delta, np.random.default_rng(1))
    if tau is None:
        return report
    want = ft.facttest_threshold(scores[~correct], alpha, delta)
    if tau == ft.facttest_threshold(scores, alpha, delta) and tau != want:
        report.check(False, "with equal weights you return the threshold of *all* calibration scores: FactTest "
                            "calibrates on the scores of the incorrect answers only (the null hypothesis).")
    else:
        report.check(tau == want, f"with all weights equal to 1 nothing should be rejected and tau should be the plain "
                                  f"FactTest threshold {want:.4f}; you return {tau:.4f}.")
    # 2. Almost everything rejected: too few nulls must give +inf, not a crash.
    tiny = np.full(scores.size, 1e-3)
    tau = call(scores, correct, tiny, 1.0, alpha, delta, np.random.default_rng(2))
    if tau is not None:
        report.check(tau == math.inf, "when rejection sampling keeps fewer than "
                                      f"{ft.min_null_samples(alpha, delta)} incorrect answers the threshold must be "
                                      f"+inf (abstain); you return {tau}.")
    # 3. Monte Carlo on the shifted world: the exact target Type I exceeds alpha in at most ~delta of draws.
    r0 = []
    for _ in range(reps):
        scores, correct, w = _shift_case(rng, world)
        tau = call(scores, correct, w, world.bound, alpha, delta, rng)
        if tau is None:
            return report
        r0.append(float(world.type1(tau, "target")))
    freq = float(np.mean(np.array(r0) > alpha))
    limit = delta + 3 * math.sqrt(delta * (1 - delta) / reps)
    report.check(freq <= limit, f"on the target the Type I error exceeds alpha in {freq:.1%} of {reps} calibration "
                                f"draws (allowed: {limit:.1%}); mean {np.mean(r0):.3f}. The kept incorrect answers "
                                "must be a sample of the *target* law: keep answer i with probability w_i / B "
                                "(B >= max w), not 1/w_i, and compute the threshold on the kept ones only.")
    return report
