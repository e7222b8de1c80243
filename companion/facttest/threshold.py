"""The FactTest threshold: an order statistic of the *incorrect* calibration answers' scores.

Equation labels are those of the chapter ``book/alignment/facttest.md``:

* eq. (facttest-errors)  -- Type I and Type II errors of the rule "answer iff score > tau";
* eq. (facttest-v)       -- v(k) = P(Bin(n0, 1 - alpha) >= k), the probability that the
  k-th smallest of n0 null scores leaves a Type I error above alpha;
* eq. (facttest-khat)    -- k_hat = min{k : v(k) <= delta}, tau_hat = T_(k_hat), +inf when
  k_hat = n0 + 1 (too few incorrect calibration answers: always abstain).

Scores are "larger = more certain"; the decision ``True`` means *answer*.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

from companion.validation import as_1d_float_array, as_generator, as_positive_int, as_probability, check_same_length

__all__ = [
    "violation_probability",
    "order_statistic_index",
    "min_null_samples",
    "facttest_threshold",
    "naive_index",
    "naive_threshold",
    "dkw_index",
    "as_correct",
    "FactTest",
]


def _as_n0(n0) -> int:
    return as_positive_int(n0, "n0", minimum=0)


def violation_probability(k, n0, alpha) -> float:
    """v(k) = P(Bin(n0, 1 - alpha) >= k), eq. (facttest-v); 0 for k = n0 + 1.

    For continuous null scores this is exactly P(Type I error of tau = T_(k) > alpha).
    Computed with ``scipy.stats.binom.sf`` (no cancellation for large n0).
    """
    n0 = _as_n0(n0)
    k = as_positive_int(k, "k", minimum=1)
    if k > n0 + 1:
        raise ValueError(f"k: expected an index in 1..n0+1 = 1..{n0 + 1}, got {k}")
    alpha = as_probability(alpha, "alpha")
    return float(stats.binom.sf(k - 1, n0, 1.0 - alpha))


def _index(n0: int, alpha: float, delta: float) -> int:
    """k_hat of eq. (facttest-khat), without argument checks."""
    k = np.arange(1, n0 + 2)
    v = stats.binom.sf(k - 1, n0, 1.0 - alpha)  # non-increasing in k, v(n0 + 1) = 0
    return int(k[np.argmax(v <= delta * (1 + 1e-12))])  # exact ties v(k) = delta count as <= delta


def order_statistic_index(n0, alpha, delta) -> int:
    """k_hat = min{k in 1..n0+1 : v(k) <= delta}, eq. (facttest-khat).

    k_hat = n0 + 1 means "no order statistic is safe": the threshold is +inf. That happens
    exactly when (1 - alpha)^n0 > delta, i.e. n0 < :func:`min_null_samples`.
    """
    return _index(_as_n0(n0), as_probability(alpha, "alpha"), as_probability(delta, "delta"))


def min_null_samples(alpha, delta) -> int:
    """The smallest n0 with a finite threshold: ceil(log delta / log(1 - alpha))."""
    alpha, delta = as_probability(alpha, "alpha"), as_probability(delta, "delta")
    n = math.ceil(math.log(delta) / math.log1p(-alpha))
    while (1 - alpha) ** n > delta:  # guard against rounding of the logarithms
        n += 1
    while n > 0 and (1 - alpha) ** (n - 1) <= delta:
        n -= 1
    return n


def _warn_never_answers(n0: int, alpha: float, delta: float, what: str, kept: str = "") -> None:
    """Say why the threshold is +inf: too few incorrect answers for (alpha, delta)."""
    warnings.warn(
        f"{what}: n0 = {n0} incorrect calibration answers{kept} are too few for alpha = {alpha:g}, "
        f"delta = {delta:g}, so the threshold is +inf and the model never answers; a finite "
        f"threshold needs n0 >= {min_null_samples(alpha, delta)} ((1 - alpha)^n0 <= delta)",
        UserWarning,
        stacklevel=3,
    )


def _threshold(t: np.ndarray, alpha: float, delta: float) -> tuple[int, float]:
    """(k_hat, tau_hat) of eq. (facttest-khat) for the null scores ``t``, without checks or warning."""
    k = _index(t.size, alpha, delta)
    return k, (math.inf if k == t.size + 1 else float(np.partition(t, k - 1)[k - 1]))


def facttest_threshold(null_scores, alpha, delta) -> float:
    """tau_hat = T_(k_hat), the k_hat-th smallest null score; +inf when k_hat = n0 + 1.

    ``null_scores`` are the certainty scores of the calibration questions the model got
    *wrong*. Too few of them (n0 < :func:`min_null_samples`, including n0 = 0) give +inf,
    never a crash, with a ``UserWarning`` that names n0, alpha, delta and the n0 needed.
    """
    t = as_1d_float_array(null_scores, "null_scores", allow_empty=True)
    alpha, delta = as_probability(alpha, "alpha"), as_probability(delta, "delta")
    _, tau = _threshold(t, alpha, delta)
    if tau == math.inf:
        _warn_never_answers(t.size, alpha, delta, "facttest_threshold")
    return tau


def naive_index(n0, alpha) -> int:
    """The empirical (1 - alpha)-quantile's index ceil(n0 (1 - alpha)): at most alpha n0 nulls above it."""
    n0, alpha = _as_n0(n0), as_probability(alpha, "alpha")
    return max(1, math.ceil(n0 * (1.0 - alpha) - 1e-9)) if n0 > 0 else 1


def dkw_index(n0, alpha, delta) -> int:
    """The rank of a threshold made valid by the Dvoretzky-Kiefer-Wolfowitz inequality instead of
    the exact binomial tail: ceil(n0 (1 - alpha + eps)) with eps = sqrt(log(1/delta) / (2 n0)),
    n0 + 1 (never answer) when that exceeds n0.

    Massart's one-sided bound P(sup (F_n - F) > eps) <= exp(-2 n0 eps^2) = delta makes it valid
    with probability 1 - delta, like k_hat of eq. (facttest-khat), but it spends more of the
    Type I budget: the distribution-free baseline that the exact order statistic improves on.
    """
    n0 = _as_n0(n0)
    alpha, delta = as_probability(alpha, "alpha"), as_probability(delta, "delta")
    if n0 == 0:
        return 1
    eps = math.sqrt(math.log(1.0 / delta) / (2.0 * n0))
    return min(n0 + 1, max(1, math.ceil(n0 * (1.0 - alpha + eps) - 1e-9)))


def naive_threshold(null_scores, alpha) -> float:
    """The threshold without delta: the empirical (1 - alpha)-quantile of the null scores."""
    t = as_1d_float_array(null_scores, "null_scores", allow_empty=True)
    if t.size == 0:
        return math.inf
    k = naive_index(t.size, alpha)
    return float(np.partition(t, k - 1)[k - 1])


def as_correct(correct, name: str = "correct") -> np.ndarray:
    """Return correctness labels as a bool array; accepts bools or 0/1 numbers."""
    arr = np.asarray(correct)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of booleans, got shape {arr.shape}")
    if arr.dtype == np.bool_:
        return arr
    if arr.size and np.issubdtype(arr.dtype, np.number) and np.all(np.isin(arr, (0, 1))):
        return arr.astype(bool)
    if arr.size == 0:
        return arr.astype(bool)
    raise ValueError(f"{name}: expected booleans or 0/1 values (True = the answer is correct), got {arr[:5]!r}")


class FactTest:
    """Answer a question iff its certainty score is *strictly* above the calibrated threshold.

    ``fit(scores, correct)`` keeps the scores of the incorrect calibration answers and sets
    ``threshold_`` by eq. (facttest-khat). With ``weights`` (density ratios target/source of
    the calibration questions) the incorrect answers are first thinned by rejection sampling
    (eq. (facttest-reject)), so the kept ones are a sample from the *target* null law.

    Fitted attributes: ``threshold_``, ``k_``, ``n0_`` (incorrect calibration answers),
    ``n0_used_`` (those kept after rejection sampling), ``violation_prob_`` (= v(k_)).
    When too few are kept for (alpha, delta) the threshold is +inf (never answer) and ``fit``
    warns (``UserWarning``), naming the smallest n0 that works.
    """

    def __init__(self, alpha: float = 0.05, delta: float = 0.05):
        self.alpha = as_probability(alpha, "alpha")
        self.delta = as_probability(delta, "delta")

    def fit(self, scores, correct, *, weights=None, bound=None, rng=None) -> "FactTest":
        scores = as_1d_float_array(scores, "scores")
        correct = as_correct(correct)
        check_same_length(scores, correct, "scores", "correct")
        null = scores[~correct]
        self.n0_ = int(null.size)
        if weights is not None:
            from .shift import rejection_sample  # local import: shift imports this module

            weights = as_1d_float_array(weights, "weights")
            check_same_length(scores, weights, "scores", "weights")
            rng = as_generator(rng)
            null = null[rejection_sample(weights[~correct], bound=bound, rng=rng)]
        self.n0_used_ = int(null.size)
        self.k_, self.threshold_ = _threshold(null, self.alpha, self.delta)
        if self.threshold_ == math.inf:
            kept = f" (kept by rejection sampling out of {self.n0_})" if weights is not None else ""
            _warn_never_answers(self.n0_used_, self.alpha, self.delta, "FactTest.fit", kept)
        self.violation_prob_ = float(stats.binom.sf(self.k_ - 1, null.size, 1 - self.alpha))
        return self

    def decide(self, scores) -> np.ndarray:
        """``True`` = answer: score > threshold_ (strict, so ties with the threshold abstain)."""
        if not hasattr(self, "threshold_"):
            raise ValueError("self: call fit(scores, correct) before decide(scores)")
        return as_1d_float_array(scores, "scores", allow_empty=True) > self.threshold_

    def __repr__(self) -> str:
        fitted = (f", threshold_={self.threshold_:.4g}, k_={self.k_}, n0_used_={self.n0_used_}"
                  if hasattr(self, "threshold_") else "")
        return f"FactTest(alpha={self.alpha}, delta={self.delta}{fitted})"
