"""Checkers for the exercises of the chapter *FactTest: answer only when a test says the answer is likely true*.

* :func:`check_index` -- exercise 1, the order-statistic index k_hat (label ``facttest-khat``), 2 points;
* :func:`check_ties` -- exercise 2, the strict decision rule and a discrete null law on which
  "answer iff score >= tau" breaks the guarantee (``facttest-v``), 2 points;
* :func:`check_shifted_threshold` -- exercise 3, the threshold under covariate shift by rejection
  sampling (``facttest-reject``), 2 points.

Each compares the student's function with :mod:`companion.facttest` on cases built to expose
one mistake each, and explains the mistake it finds, citing the equations as the page numbers them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

from companion import facttest as ft
from companion.exercises import Report, eq

__all__ = ["check_index", "check_ties", "check_shifted_threshold"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade);
# exercise 3 may use the threshold of exercise 1's rule, but must draw the rejection sample itself.
REFERENCES = {"check_index": ("companion.facttest.order_statistic_index", "companion.facttest.threshold._index"),
              "check_ties": (),
              "check_shifted_threshold": ("companion.facttest.rejection_sample",)}

_GRID = [(n0, a, d) for n0 in (0, 1, 10, 28, 29, 30, 44, 50, 59, 100, 200, 1000)
         for a, d in ((0.1, 0.05), (0.05, 0.05), (0.1, 0.01), (0.2, 0.1))]


def _first_k(n0: int, p: float, delta: float) -> int:
    """min{k in 1..n0+1 : P(Bin(n0, p) >= k) <= delta}: k_hat with another success probability."""
    k = np.arange(1, n0 + 2)
    return int(k[np.argmax(stats.binom.sf(k - 1, n0, p) <= delta)])


def _mistakes(n0: int, alpha: float, delta: float) -> dict[str, int]:
    """What the classic wrong versions of k_hat return on one case."""
    right = ft.order_statistic_index(n0, alpha, delta)
    return {
        "n0-when-too-few": min(right, n0),
        "0-based": right - 1,
        "alpha-for-1-alpha": _first_k(n0, alpha, delta),
        "naive": ft.naive_index(n0, alpha),
    }


def _index_hints() -> dict[str, str]:
    v, khat = eq("facttest-v"), eq("facttest-khat")
    return {
        "n0-when-too-few": f"when even k = n0 gives v(n0) = (1 - alpha)^n0 > delta, no order statistic is safe: "
                           f"{khat} then gives k = n0 + 1 (threshold +inf, always abstain), not n0, and never a crash.",
        "0-based": f"you return k_hat - 1. Either a 0-based index (the answer is a 1-based rank in 1..n0+1, T_(1) "
                   f"the smallest score; convert only when you read the sorted array), or a tail that starts at "
                   f"j = k + 1: v(k) of {v} sums j = k..n0, because T_(k) falls below the (1 - alpha)-quantile "
                   "exactly when at least k scores do.",
        "alpha-for-1-alpha": f"you use Bin(n0, alpha); the count in {v} is how many of the n0 null scores fall "
                             "*below* the (1 - alpha)-quantile, which is Bin(n0, 1 - alpha).",
        "naive": f"you return ceil(n0 (1 - alpha)), the empirical quantile: it ignores delta, and its Type I error "
                 f"exceeds alpha in about half of the calibration draws. {khat} asks for v(k) <= delta.",
    }


def check_index(index: Callable) -> Report:
    """Check ``index(n0, alpha, delta) -> k_hat``, eq. (facttest-khat) (1-based, n0 + 1 meaning tau = +inf)."""
    report = Report("Exercise 1 (the order-statistic index)", points=2)
    hints = _index_hints()
    got = {}
    for n0, alpha, delta in _GRID:
        too_few = ft.order_statistic_index(n0, alpha, delta) == n0 + 1
        what = f"index({n0}, {alpha}, {delta})" + (f"; {hints['n0-when-too-few']}" if too_few else "")
        k = report.call(index, n0, alpha, delta, what=what)
        if k is None:
            return report
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            report.check(False, f"index({n0}, {alpha}, {delta}) returned {k!r}; return an int in 1..n0+1.")
            return report
        got[(n0, alpha, delta)] = int(k)
    wrong = [case for case, k in got.items() if k != ft.order_statistic_index(*case)]
    for case in got:
        if case not in wrong:
            report.check(True, "")
    if not wrong:
        return report
    example = wrong[-1]
    want = ft.order_statistic_index(*example)
    for name, hint in hints.items():  # the mistake whose answers the student's reproduce on every wrong case
        if all(got[case] == _mistakes(*case)[name] for case in wrong):
            report.check(False, f"{len(wrong)} of {len(got)} cases wrong, e.g. index{example} = {got[example]}, "
                                f"expected {want}: {hint}")
            return report
    details = "; ".join(
        f"index{case} = {got[case]}, expected {ft.order_statistic_index(*case)}" for case in wrong[-3:])
    report.check(False, f"{len(wrong)} of {len(got)} cases wrong ({details}). {eq('facttest-khat')} takes the "
                        f"smallest k whose v(k) of {eq('facttest-v')} is at most delta; here "
                        f"v({want}) = {ft.violation_probability(want, example[0], example[1]):.4f} <= {example[2]}"
                        + (f" while v({want - 1}) > {example[2]}." if want > 1 else "."))
    return report


def _check_decide(report: Report, decide: Callable) -> None:
    scores = np.array([-1.0, -0.5, -0.5, 0.0, 0.3])
    for tau, what in [(-0.5, "a score equal to the threshold"), (math.inf, "tau = +inf"), (-2.0, "a low threshold")]:
        got = report.call(decide, scores.copy(), tau, what=f"decide(scores, tau = {tau}): {what}")
        if got is None:
            return
        got, want = np.asarray(got), scores > tau
        if not report.check(got.shape == want.shape and got.dtype == np.bool_,
                            f"decide must return a bool array of shape {want.shape}, got {got.dtype} {got.shape}."):
            return
        if tau == -0.5 and np.array_equal(got, scores >= tau):
            report.check(False, "a score equal to tau must abstain: answer iff score > tau. With '>=' every tie with "
                                "the threshold is answered, and on discrete scores (few distinct values) that adds "
                                "the whole atom at tau, which can carry more than alpha of the wrong answers' mass, "
                                f"to the Type I error R_0 of {eq('facttest-errors')}.")
            return
        if not report.check(np.array_equal(got, want), f"{what}: got {got.tolist()}, expected {want.tolist()}."):
            return


def _check_counterexample(report: Report, tie_counterexample: Callable, alpha: float, delta: float) -> None:
    law = report.call(tie_counterexample, what="tie_counterexample()")
    if law is None:
        return
    if not report.check(isinstance(law, dict) and {"atoms", "probs", "n0"} <= set(law),
                        f"tie_counterexample() must return a dict with keys 'atoms', 'probs' and 'n0'; "
                        f"got {law!r:.80}"):
        return
    try:
        atoms, probs = np.asarray(law["atoms"], dtype=float), np.asarray(law["probs"], dtype=float)
        n0 = law["n0"]
    except (TypeError, ValueError) as err:
        report.check(False, f"atoms and probs must be arrays of numbers ({err}).")
        return
    if not report.check(isinstance(n0, (int, np.integer)) and not isinstance(n0, (bool, np.bool_)) and n0 >= 1,
                        f"n0 must be a positive integer, got {n0!r}."):
        return
    if not report.check(atoms.ndim == 1 and atoms.shape == probs.shape and atoms.size >= 1
                        and np.all(np.isfinite(atoms)), "atoms and probs must be 1-D arrays of the same length, "
                                                        "with finite atoms."):
        return
    if not report.check(bool(np.all(probs >= 0) and abs(probs.sum() - 1) < 1e-9),
                        f"probs must be non-negative and sum to 1 (they sum to {probs.sum():.6g})."):
        return
    if not report.check(np.unique(atoms).size == atoms.size, "atoms must be distinct (merge repeated values)."):
        return
    order = np.argsort(atoms)
    atoms, probs, n0 = atoms[order], probs[order], int(n0)
    k = ft.order_statistic_index(n0, alpha, delta)
    if not report.check(k <= n0, f"with n0 = {n0} the threshold of {eq('facttest-khat')} is +inf "
                                 f"((1 - alpha)^n0 > delta): both rules always abstain and nothing can break. "
                                 f"Use n0 >= {ft.min_null_samples(alpha, delta)}."):
        return
    strict = ft.discrete_violation_probability(atoms, probs, k, n0, alpha, ">")
    ge = ft.discrete_violation_probability(atoms, probs, k, n0, alpha, ">=")
    report.check(strict <= delta + 1e-12, f"the strict rule violates with probability {strict:.4f} > delta: that "
                                          "would contradict the theorem; check your law.")
    report.check(ge > delta, f"with '>=' the probability that the Type I error exceeds alpha is {ge:.4f} <= delta "
                             f"= {delta}: no counterexample. You need an atom t with P(T > t) <= alpha < P(T >= t) "
                             "that T_(k_hat) lands on often: an atom carrying more than alpha - P(T > t) of mass "
                             f"right at the (1 - alpha)-quantile, and n0 large enough that v(k_hat) of "
                             f"{eq('facttest-v')}, computed with F(t), exceeds delta.")


def check_ties(decide: Callable, tie_counterexample: Callable, *, alpha: float = 0.1,
               delta: float = 0.05) -> Report:
    """Check exercise 2: ``decide(scores, tau) -> bool array`` (True = answer, strict and +inf abstains)
    and ``tie_counterexample() -> dict(atoms=, probs=, n0=)``, a discrete null law on which answering
    iff score >= tau makes P(Type I > alpha) exceed delta while the strict rule keeps it below."""
    report = Report("Exercise 2 (ties)", points=2)
    _check_decide(report, decide)
    if not report.not_done:  # a stub is named one at a time, in the order of the cell
        _check_counterexample(report, tie_counterexample, alpha, delta)
    return report


def _shift_case(rng: np.random.Generator, world: ft.ShiftWorld, n: int = 1000):
    x, correct, scores = world.sample(n, "source", rng)
    return scores, correct, world.ratio(x)


def check_shifted_threshold(threshold: Callable, *, reps: int = 200, seed: int = 0) -> Report:
    """Check ``threshold(scores, correct, weights, bound, alpha, delta, rng) -> tau`` under covariate shift.

    ``weights`` are the density ratios w = dQ/dP of the calibration questions and ``bound`` a
    number B >= max w. The checker uses :class:`companion.facttest.ShiftWorld`, whose exact
    target Type I error is known.
    """
    report = Report("Exercise 3 (covariate shift)", points=2)
    alpha, delta, world = 0.1, 0.05, ft.ShiftWorld()
    rng = np.random.default_rng(seed)

    def call(*args, what: str):
        tau = report.call(threshold, *args, what=what)
        if tau is None:
            return None
        try:
            return float(tau)
        except (TypeError, ValueError):
            report.check(False, f"returned {type(tau).__name__}, not a number ({what}).")
            return None

    # 1. No shift (all weights 1): rejection sampling keeps everything, so tau is the plain FactTest threshold.
    scores, correct, _ = _shift_case(rng, world)
    tau = call(scores, correct, np.ones_like(scores), 1.0, alpha, delta, np.random.default_rng(1),
               what="all weights 1, bound 1")
    if tau is None:
        return report
    want = ft.facttest_threshold(scores[~correct], alpha, delta)
    if tau == ft.facttest_threshold(scores, alpha, delta) and tau != want:
        report.check(False, "with equal weights you return the threshold of *all* calibration scores: FactTest "
                            "calibrates on the scores of the incorrect answers only (the null hypothesis), and "
                            f"{eq('facttest-reject')} thins those.")
    else:
        report.check(tau == want, f"with all weights equal to 1 nothing should be rejected and tau should be the "
                                  f"plain threshold of {eq('facttest-khat')}, {want:.4f}; you return {tau:.4f}.")
    # 2. Almost everything rejected: too few nulls must give +inf, not a crash.
    tau = call(scores, correct, np.full(scores.size, 1e-3), 1.0, alpha, delta, np.random.default_rng(2),
               what="weights 1e-3, bound 1: almost every answer rejected")
    if tau is None:
        return report
    report.check(tau == math.inf, f"when rejection sampling keeps fewer than {ft.min_null_samples(alpha, delta)} "
                                  f"incorrect answers the threshold of {eq('facttest-khat')} is +inf (abstain); "
                                  f"you return {tau}.")
    # 3. Monte Carlo on the shifted world: the exact target Type I exceeds alpha in at most ~delta of draws.
    r0 = []
    for i in range(reps):
        scores, correct, w = _shift_case(rng, world)
        tau = call(scores, correct, w, world.bound, alpha, delta, rng, what=f"shifted calibration draw {i + 1}")
        if tau is None:
            return report
        r0.append(float(world.type1(tau, "target")))
    freq = float(np.mean(np.array(r0) > alpha))
    limit = delta + 3 * math.sqrt(delta * (1 - delta) / reps)
    report.check(freq <= limit, f"on the target the Type I error exceeds alpha in {freq:.1%} of {reps} calibration "
                                f"draws (allowed: {limit:.1%}); mean {np.mean(r0):.3f}. The kept incorrect answers "
                                "must be a sample of the *target* law: keep answer i with probability w_i / B "
                                f"(B >= max w), not 1/w_i, as in {eq('facttest-reject')}, and compute the "
                                "threshold on the kept ones only.")
    return report
