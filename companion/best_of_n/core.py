"""Exact best-of-n law, its KL divergence to the reference, and its win rate.

A reference is ``probs`` (pi, shape ``(L,)``) with ``rewards`` (r, shape ``(L,)``).
Every function goes through :func:`_levels`, which sorts the outcomes by reward and
groups them into reward levels; the law of the selected level is eq. (bon-pmf).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
from scipy.special import rel_entr

from companion.validation import (
    as_1d_float_array,
    as_choice,
    as_positive_int,
    as_positive_int_array,
    as_probability_vector,
    check_same_length,
)

TieBreak = Literal["random", "index"]
Ties = Literal["half", "lose"]
TIE_BREAKS = ("random", "index")


class _Levels(NamedTuple):
    level: np.ndarray  # (L,) level of each outcome; levels are numbered by increasing reward
    mass: np.ndarray  # (K,) pi(l), the reference mass of each level
    cdf: np.ndarray  # (K,) F(l) = pi{r <= r(l)}, clipped to [0, 1], exactly 1 at the top level
    cdf_minus: np.ndarray  # (K,) F^-(l) = pi{r < r(l)}
    log_cdf: np.ndarray  # (K,) log F(l), accurate near F = 1 (from the upper tail), exactly 0 at the top


def _reference(probs, rewards) -> tuple[np.ndarray, np.ndarray]:
    """Validate a reference; return pi renormalised to sum to 1 in float64, and r."""
    p = as_probability_vector(probs, "probs")
    r = as_1d_float_array(rewards, "rewards")
    check_same_length(p, r, "probs", "rewards")
    return p / p.sum(), r


def _levels(p: np.ndarray, r: np.ndarray, tie_break: str = "random") -> _Levels:
    """Group outcomes into levels sorted by increasing reward (stable sort).

    ``"random"``: one level per distinct reward.  ``"index"``: one level per outcome,
    tied outcomes ordered so that the *smallest index ranks highest* (it wins ties,
    as ``np.argmax`` picks the first maximum).
    """
    if tie_break == "index":
        order = (r.size - 1) - np.argsort(r[::-1], kind="stable")
        new = np.ones(r.size, dtype=bool)
    else:
        order = np.argsort(r, kind="stable")
        sorted_r = r[order]
        new = np.r_[True, sorted_r[1:] != sorted_r[:-1]]
    mass = np.minimum(np.add.reduceat(p[order], np.flatnonzero(new)), 1.0)
    below = np.cumsum(mass)  # F(l), accurate where small
    above = np.r_[np.cumsum(mass[::-1])[-2::-1], 0.0]  # 1 - F(l) = pi{r > r(l)}, accurate where small
    upper = below > 0.5
    with np.errstate(divide="ignore"):
        log_cdf = np.where(upper, np.log1p(-np.minimum(above, 1.0)), np.log(below))
    cdf = np.clip(np.where(upper, 1.0 - above, below), 0.0, 1.0)
    level = np.empty(r.size, dtype=np.intp)
    level[order] = np.cumsum(new) - 1
    return _Levels(level, mass, cdf, np.r_[0.0, cdf[:-1]], log_cdf)


def _max_level_law(lv: _Levels, n: int) -> np.ndarray:
    """P_n(l) = F(l)^n - F^-(l)^n, eq. (bon-pmf), as F^n * (-expm1(n log(F^-/F))).

    log F^-(l) is log F of the level below, so the P_n telescope to F(top)^n = 1.
    """
    log_fm = np.r_[-np.inf, lv.log_cdf[:-1]]
    with np.errstate(invalid="ignore"):
        law = np.exp(n * lv.log_cdf) * -np.expm1(n * (log_fm - lv.log_cdf))
    return np.where(lv.mass > 0, law, 0.0)  # levels of zero mass get exactly 0


def _prepare(probs, rewards, n, tie_break="random"):
    """Validate (probs, rewards, n, tie_break); return pi, its levels and P_n per level."""
    p, r = _reference(probs, rewards)
    n = as_positive_int(n, "n")
    lv = _levels(p, r, as_choice(tie_break, "tie_break", TIE_BREAKS))
    return p, lv, _max_level_law(lv, n)


def _sum_sq(probs) -> np.float64:
    p = as_probability_vector(probs, "probs")
    return np.dot(p, p)


def best_of_n_pmf(probs, rewards, n: int, *, tie_break: TieBreak = "random") -> np.ndarray:
    """pi^(n)(y), the law of the best of n i.i.d. draws from pi.

    No ties: pi^(n)(y) = F(y)^n - F^-(y)^n, eq. (bon-pmf).  With ties and
    ``tie_break="random"``: pi^(n)(y) = pi(y) / pi(l(y)) * P_n(l(y)), eq. (bon-pmf-ties).
    ``tie_break="index"``: ties go to the smallest outcome index (eq. (bon-pmf) with the
    lexicographic reward (r(y), -y)).  Returns float64 of shape (L,).
    """
    p, lv, law = _prepare(probs, rewards, n, tie_break)
    share = np.divide(p, lv.mass[lv.level], out=np.zeros_like(p), where=lv.mass[lv.level] > 0)
    return share * law[lv.level]


def level_pmf(probs, rewards, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(P_n(l), pi(l)) for the reward levels l sorted by increasing reward.

    P_n(l) = F(l)^n - F^-(l)^n, eq. (bon-pmf-ties), whatever the tie rule.
    """
    _, lv, law = _prepare(probs, rewards, n)
    return law, lv.mass


def kl_best_of_n(probs, rewards, n: int, *, tie_break: TieBreak = "random") -> float:
    """KL_n(pi) = sum_y pi^(n)(y) log(pi^(n)(y) / pi(y)), eq. (bon-kl).

    Computed per level (= KL(P_n || pi_levels) for random tie-breaking); outcomes with
    pi(y) = 0 carry no best-of-n mass and drop out.
    """
    _, lv, law = _prepare(probs, rewards, n, tie_break)
    return max(0.0, float(rel_entr(law, lv.mass).sum()))  # rounding can leave -1e-16 at n = 1


def kl_formula(n) -> np.ndarray:
    """A_n = log n - (n - 1) / n, eq. (bon-formula); vectorised in n."""
    n = as_positive_int_array(n, "n").astype(np.float64)
    return (np.log(n) - (n - 1) / n)[()]


def renyi2_entropy(probs) -> float:
    """H_2(pi) = -log sum_y pi(y)^2."""
    return float(-np.log(_sum_sq(probs)))


def kl_gap_bound(probs, n) -> np.ndarray:
    """A_n - KL_n(pi) <= 2 n (n - 1) e^{-H_2(pi)}, eq. (bon-gap); vectorised in n."""
    n = as_positive_int_array(n, "n").astype(np.float64)
    return (2 * n * (n - 1) * _sum_sq(probs))[()]


def win_rate(probs, rewards, n: int, *, ties: Ties = "half") -> float:
    """W_n(pi) = sum_l P_n(l) [F^-(l) + pi(l) / 2], eq. (bon-winrate).

    ``ties="half"``: a tie with the reference counts 1/2; ``"lose"``: it counts 0.
    """
    ties = as_choice(ties, "ties", ("half", "lose"))
    _, lv, law = _prepare(probs, rewards, n)
    credit = 0.5 * (lv.cdf + lv.cdf_minus) if ties == "half" else lv.cdf_minus
    return float(np.dot(law, credit))


def win_rate_bound(n) -> np.ndarray:
    """W_n <= n / (n + 1), the atomless value of eq. (bon-winrate); vectorised in n."""
    n = as_positive_int_array(n, "n").astype(np.float64)
    return (n / (n + 1))[()]


def win_rate_gap_bound(probs, n) -> np.ndarray:
    """n / (n + 1) - W_n <= (n - 1) / 2 * e^{-H_2(pi)}; vectorised in n."""
    n = as_positive_int_array(n, "n").astype(np.float64)
    return ((n - 1) / 2 * _sum_sq(probs))[()]
