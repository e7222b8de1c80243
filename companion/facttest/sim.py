"""Simulated worlds in which every error rate is known exactly.

* :class:`GaussianScores` -- continuous scores, T | wrong ~ N(0, 1), T | right ~ N(mu, 1);
* :class:`DiscreteVEScores` -- the vanilla-entropy score of K sampled answers, whose law is a
  finite set of atoms computed exactly (ties between scores are the rule, not the exception);
* :class:`ShiftWorld` -- a question feature x whose law moves between calibration and
  deployment, with the density ratio known in closed form;
* :func:`simulate_violation` -- many calibration draws at once: thresholds, exact Type I of each.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats
from scipy.special import betaln, gammaln, xlogy

from companion.validation import (as_choice, as_float_array, as_generator, as_positive_int, as_probability,
                                  as_probability_vector)

from .threshold import _index, dkw_index, naive_index

__all__ = ["GaussianScores", "DiscreteVEScores", "ShiftWorld", "simulate_violation", "discrete_violation_probability"]


@dataclass(frozen=True)
class GaussianScores:
    """Scores of wrong answers ~ N(0, 1), of right answers ~ N(mu, 1); P(right) = p_correct."""

    mu: float = 2.0
    p_correct: float = 0.5

    def __post_init__(self):
        as_float_array(self.mu, "mu")
        as_probability(self.p_correct, "p_correct", low_open=False, high_open=False)

    def sample_null(self, size, rng) -> np.ndarray:
        return as_generator(rng).standard_normal(size)

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        rng = as_generator(rng)
        correct = rng.random(as_positive_int(n, "n")) < self.p_correct
        return rng.standard_normal(n) + self.mu * correct, correct

    def type1(self, tau) -> np.ndarray:
        """R0(tau) = P(T > tau | wrong) = 1 - Phi(tau)."""
        return stats.norm.sf(tau)

    type1_ge = type1  # continuous: no atoms, > and >= agree

    def type2(self, tau) -> np.ndarray:
        """R1(tau) = P(T <= tau | right) = Phi(tau - mu)."""
        return stats.norm.cdf(np.asarray(tau, dtype=float) - self.mu)

    def oracle_threshold(self, alpha) -> float:
        """The Neyman-Pearson threshold at level alpha (the score is monotone in P(right | T))."""
        return float(stats.norm.isf(as_probability(alpha, "alpha")))


def _compositions(K: int, parts: int) -> np.ndarray:
    """All (n_1, ..., n_parts) of non-negative integers summing to K."""
    out = []
    for bars in itertools.combinations(range(K + parts - 1), parts - 1):
        edges = (-1, *bars, K + parts - 1)
        out.append([edges[i + 1] - edges[i] - 1 for i in range(parts)])
    return np.array(out)


@dataclass(frozen=True)
class DiscreteVEScores:
    """Vanilla-entropy scores of K sampled answers, with an exact law.

    Per question a confidence c ~ Beta(a0, b0) if the model's answer is wrong, Beta(a1, b1)
    if right; the K samples are the main answer with probability c and each of ``n_other``
    alternatives with probability (1 - c)/n_other; the score is minus the entropy of the
    sample frequencies. Averaging the multinomial over c is a Beta integral, so the law of
    the score is a finite list of atoms (``atoms``, ``null_probs``, ``alt_probs``), exactly.
    """

    K: int = 15
    a0: float = 2.0
    b0: float = 3.0
    a1: float = 5.0
    b1: float = 1.5
    n_other: int = 4
    p_correct: float = 0.5
    atoms: np.ndarray = field(init=False, repr=False)
    null_probs: np.ndarray = field(init=False, repr=False)
    alt_probs: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        K = as_positive_int(self.K, "K", minimum=2)
        for name in ("a0", "b0", "a1", "b1"):
            as_float_array(getattr(self, name), name, low=0, low_open=True)
        as_positive_int(self.n_other, "n_other")
        as_probability(self.p_correct, "p_correct", low_open=False, high_open=False)
        comp = _compositions(K, 1 + self.n_other)
        n1 = comp[:, 0]
        log_coef = gammaln(K + 1) - gammaln(comp + 1).sum(axis=1) - (K - n1) * math.log(self.n_other)
        freq = comp / K
        score = np.round(xlogy(freq, freq).sum(axis=1), 12)
        atoms, where = np.unique(score, return_inverse=True)
        laws = []
        for a, b in ((self.a0, self.b0), (self.a1, self.b1)):
            p = np.exp(log_coef + betaln(a + n1, b + K - n1) - betaln(a, b))
            laws.append(np.bincount(where, weights=p, minlength=atoms.size))
        object.__setattr__(self, "atoms", atoms)
        object.__setattr__(self, "null_probs", laws[0] / laws[0].sum())
        object.__setattr__(self, "alt_probs", laws[1] / laws[1].sum())

    def sample_null(self, size, rng) -> np.ndarray:
        return as_generator(rng).choice(self.atoms, size=size, p=self.null_probs)

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        rng = as_generator(rng)
        correct = rng.random(as_positive_int(n, "n")) < self.p_correct
        scores = np.where(correct, rng.choice(self.atoms, size=n, p=self.alt_probs),
                          rng.choice(self.atoms, size=n, p=self.null_probs))
        return scores, correct

    def sample_answers(self, n: int, correct: bool, rng) -> np.ndarray:
        """The K sampled answer ids of n questions, drawn literally (for tests of the exact law)."""
        rng = as_generator(rng)
        a, b = (self.a1, self.b1) if correct else (self.a0, self.b0)
        c = rng.beta(a, b, size=n)
        p = np.column_stack([c] + [(1 - c) / self.n_other] * self.n_other)
        u = rng.random((n, self.K, 1))
        return (u > np.cumsum(p, axis=1)[:, None, :-1]).sum(axis=2)

    def _tail(self, tau, probs, strict: bool) -> np.ndarray:
        tau = np.asarray(tau, dtype=float)
        surv = np.r_[np.cumsum(probs[::-1])[::-1], 0.0]  # surv[j] = P(T >= atoms[j])
        side = "right" if strict else "left"
        return surv[np.searchsorted(self.atoms, tau, side=side)]

    def type1(self, tau) -> np.ndarray:
        """R0(tau) = P(T > tau | wrong), the Type I error of the strict rule."""
        return self._tail(tau, self.null_probs, strict=True)

    def type1_ge(self, tau) -> np.ndarray:
        """P(T >= tau | wrong), the Type I error of the rule 'answer iff T >= tau'."""
        return self._tail(tau, self.null_probs, strict=False)

    def type2(self, tau) -> np.ndarray:
        return 1.0 - self._tail(tau, self.alt_probs, strict=True)


def discrete_violation_probability(atoms, null_probs, k: int, n0: int, alpha: float, rule: str = ">") -> float:
    """P over calibration draws that tau = T_(k) gives Type I > alpha, for a discrete null law, exactly.

    With the strict rule the Type I error S(tau) = P(T > tau) exceeds alpha iff T_(k) <= t*, the
    largest atom with S(t*) > alpha, and T_(k) <= t* iff at least k of the n0 scores are <= t*:
    a Bin(n0, F(t*)) tail. For '>=' replace S(t) by P(T >= t). k = n0 + 1 (tau = +inf) gives 0.
    """
    rule = as_choice(rule, "rule", (">", ">="))
    atoms = as_float_array(atoms, "atoms")
    p = as_probability_vector(null_probs, "null_probs")
    if atoms.shape != p.shape or atoms.ndim != 1 or np.any(np.diff(atoms) <= 0):
        raise ValueError(f"atoms: expected increasing values, one per entry of null_probs {p.shape}, got {atoms}")
    n0 = as_positive_int(n0, "n0", minimum=1)
    k = as_positive_int(k, "k")
    if k > n0 + 1:
        raise ValueError(f"k: expected an index in 1..n0 + 1 = {n0 + 1}, got {k}")
    alpha = as_probability(alpha, "alpha")
    if k == n0 + 1:
        return 0.0
    ge = np.cumsum(p[::-1])[::-1]
    tail = ge - p if rule == ">" else ge
    bad = np.flatnonzero(tail > alpha)
    if bad.size == 0:
        return 0.0
    F = float(np.clip(np.cumsum(p)[bad[-1]], 0.0, 1.0))
    return float(stats.binom.sf(k - 1, n0, F))


_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(80)
_GAUSS_LEGENDRE = ((_NODES + 1) / 2, _WEIGHTS / 2)  # 80-point rule on (0, 1): exact for smooth integrands


@dataclass(frozen=True)
class ShiftWorld:
    """A question feature x in (0, 1) whose law shifts; correctness and score given x do not.

    Calibration (source) x ~ Beta(2, 2), deployment (target) x ~ Beta(4, 2), so the density
    ratio is w(x) = (10/3) x^2 <= B = 10/3. P(right | x) = x and the score is
    T = 3x + 2 y + N(0, 1): harder questions (small x) get lower scores, but the wrong answers
    of the target, which sit at larger x, score higher than those of the source.
    """

    source: tuple[float, float] = (2.0, 2.0)
    target: tuple[float, float] = (4.0, 2.0)
    slope: float = 3.0
    gap: float = 2.0

    def __post_init__(self):
        for name in ("source", "target"):
            ab = as_float_array(getattr(self, name), name, low=0, low_open=True)
            if ab.shape != (2,):
                raise ValueError(f"{name}: expected the two Beta parameters (a, b), got {getattr(self, name)!r}")
        as_float_array(self.slope, "slope")
        as_float_array(self.gap, "gap")

    @property
    def bound(self) -> float:
        return float(self.ratio(np.array([1.0]))[0])

    def ratio(self, x) -> np.ndarray:
        """w(x) = target density / source density (here (10/3) x^2)."""
        (as_, bs), (at, bt) = self.source, self.target
        x = np.asarray(x, dtype=float)
        return np.exp(xlogy(at - as_, x) + xlogy(bt - bs, 1 - x) + betaln(as_, bs) - betaln(at, bt))

    def sample(self, n: int, domain: str, rng):
        """(x, correct, score) of n questions from ``domain`` in {'source', 'target'}."""
        a, b = getattr(self, as_choice(domain, "domain", ("source", "target")))
        rng = as_generator(rng)
        x = rng.beta(a, b, size=as_positive_int(n, "n"))
        correct = rng.random(n) < x
        return x, correct, self.slope * x + self.gap * correct + rng.standard_normal(n)

    def sample_x(self, n: int, domain: str, rng) -> np.ndarray:
        a, b = getattr(self, as_choice(domain, "domain", ("source", "target")))
        return as_generator(rng).beta(a, b, size=as_positive_int(n, "n"))

    def _integrate(self, tau, a, b, f) -> np.ndarray:
        x, wts = _GAUSS_LEGENDRE
        tau = np.asarray(tau, dtype=float)
        vals = f(tau[..., None], x) * stats.beta.pdf(x, a, b) * wts
        return vals.sum(axis=-1)

    def type1(self, tau, domain: str = "target") -> np.ndarray:
        """Exact P(T > tau | wrong) under ``domain``: x | wrong ~ Beta(a, b + 1) since P(wrong | x) = 1 - x."""
        a, b = getattr(self, as_choice(domain, "domain", ("source", "target")))
        return self._integrate(tau, a, b + 1, lambda t, x: stats.norm.sf(t - self.slope * x))

    def type2(self, tau, domain: str = "target") -> np.ndarray:
        """Exact P(T <= tau | right) under ``domain``: x | right ~ Beta(a + 1, b)."""
        a, b = getattr(self, as_choice(domain, "domain", ("source", "target")))
        return self._integrate(tau, a + 1, b, lambda t, x: stats.norm.cdf(t - self.slope * x - self.gap))


_BLOCK = 1 << 23  # scores drawn at once by simulate_violation (64 MiB of float64)


def simulate_violation(model, n0: int, alpha: float, delta: float, reps: int, rng, rule: str = "facttest") -> dict:
    """Draw ``reps`` calibration sets of ``n0`` null scores and compute the exact Type I of each threshold.

    ``rule``: 'facttest' (k_hat, strict >), 'facttest>=' (k_hat, answer iff T >= tau), 'naive'
    (the empirical (1 - alpha)-quantile, strict >) or 'dkw' (the rank of :func:`dkw_index`, strict >). Returns the threshold index ``k``, the
    per-draw thresholds ``tau`` and Type I errors ``r0``, the violation ``frequency`` with its
    binomial standard error ``se``, and for the k_hat rules the exact ``v`` = v(k).
    """
    rule = as_choice(rule, "rule", ("facttest", "facttest>=", "naive", "dkw"))
    n0, reps = as_positive_int(n0, "n0"), as_positive_int(reps, "reps")
    alpha, delta = as_probability(alpha, "alpha"), as_probability(delta, "delta")
    if rule == "naive":
        k = naive_index(n0, alpha)
    elif rule == "dkw":
        k = dkw_index(n0, alpha, delta)
    else:
        k = _index(n0, alpha, delta)
    if k == n0 + 1:
        tau = np.full(reps, np.inf)
    else:  # blocks of calibration draws, so that reps x n0 scores never sit in memory at once
        block = max(1, _BLOCK // n0)
        tau = np.concatenate([
            np.partition(model.sample_null((min(block, reps - start), n0), rng), k - 1, axis=1)[:, k - 1]
            for start in range(0, reps, block)])
    r0 = np.asarray(model.type1_ge(tau) if rule == "facttest>=" else model.type1(tau), dtype=float)
    freq = float(np.mean(r0 > alpha))
    return dict(k=k, tau=tau, r0=r0, frequency=freq, se=math.sqrt(max(freq * (1 - freq), 1e-12) / reps),
                v=float(stats.binom.sf(k - 1, n0, 1 - alpha)))
