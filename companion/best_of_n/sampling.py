"""Monte-Carlo best-of-n: a literal sampler and the checks built on it."""

from __future__ import annotations

import numpy as np
from scipy import stats

from companion.validation import as_float_array, as_generator, as_positive_int

from .core import _levels, _reference, best_of_n_pmf

_CHUNK = 1 << 20  # draws held in memory at once


def sample_best_of_n(probs, rewards, n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` best-of-n outputs (outcome indices, int64): draw n i.i.d. y ~ pi, keep
    the highest reward; ties broken uniformly at random among the tied draws."""
    p, r = _reference(probs, rewards)
    n, size = as_positive_int(n, "n"), as_positive_int(size, "size")
    rng = as_generator(rng)
    rank = _levels(p, r).level
    out = np.empty(size, dtype=np.int64)
    rows = max(1, _CHUNK // n)
    for start in range(0, size, rows):
        m = min(rows, size - start)
        draws = rng.choice(p.size, size=(m, n), p=p)
        top = rank[draws]
        jitter = np.where(top == top.max(axis=1, keepdims=True), rng.random((m, n)), -1.0)
        out[start : start + m] = draws[np.arange(m), jitter.argmax(axis=1)]
    return out


def mc_kl(probs, rewards, n: int, size: int, rng: np.random.Generator) -> tuple[float, float]:
    """Monte-Carlo KL_n: mean and standard error of log(pi^(n)(y_m) / pi(y_m)), y_m ~ pi^(n).

    Uses the exact pmf eq. (bon-pmf-ties) at the sampled points (unbiased for eq. (bon-kl)).
    """
    as_positive_int(size, "size", minimum=2)
    draws = sample_best_of_n(probs, rewards, n, size, rng)
    p, _ = _reference(probs, rewards)
    log_ratio = np.log(best_of_n_pmf(probs, rewards, n)[draws]) - np.log(p[draws])
    return float(log_ratio.mean()), float(log_ratio.std(ddof=1) / np.sqrt(size))


def chi2_check(probs, rewards, n: int, size: int, rng: np.random.Generator, min_expected: float = 5.0) -> float:
    """Chi-square goodness-of-fit p-value of ``size`` sampled outputs against eq. (bon-pmf-ties).

    Cells with expected count < ``min_expected`` are pooled (smallest first) into one
    cell that itself reaches ``min_expected``.  Returns 0.0 if an outcome of zero
    best-of-n probability was drawn, 1.0 if a single cell remains.
    """
    min_expected = float(as_float_array(min_expected, "min_expected", low=0.0, low_open=True))
    draws = sample_best_of_n(probs, rewards, n, size, rng)
    expected = size * best_of_n_pmf(probs, rewards, n)
    observed = np.bincount(draws, minlength=expected.size).astype(np.float64)
    if np.any(observed[expected == 0] > 0):
        return 0.0
    order = np.argsort(expected, kind="stable")
    expected, observed = expected[order], observed[order]
    pooled = int(np.searchsorted(expected, min_expected))
    if pooled:
        pooled = max(pooled, int(np.searchsorted(np.cumsum(expected), min_expected)) + 1)
        expected = np.r_[expected[:pooled].sum(), expected[pooled:]]
        observed = np.r_[observed[:pooled].sum(), observed[pooled:]]
    if expected.size < 2:
        return 1.0
    return float(stats.chisquare(observed, expected * (size / expected.sum())).pvalue)
