"""Companion of the chapter ``best-of-n`` (Beirami et al., ICML 2025, "BoN-KL").

Layout (equation labels are those of the chapter):

* :mod:`.core`      -- exact best-of-n pmf (eq. (bon-pmf), (bon-pmf-ties)), its KL
  (eq. (bon-kl)), the formula A_n (eq. (bon-formula)), the gap bound (eq. (bon-gap))
  and the win rate (eq. (bon-winrate));
* :mod:`.estimator` -- the paper's KL estimator (eq. (bon-estimator)) and its exact expectation;
* :mod:`.sampling`  -- a literal best-of-n sampler, Monte-Carlo KL and a chi-square check;
* :mod:`.tradeoff`  -- win rate vs KL curves and the tilted optimum (eq. (bon-tilt));
* :mod:`.exact`     -- Fraction versions and brute-force enumeration (tests, exercises);
* :mod:`.families`  -- the reference distributions of the chapter.

A reference is ``probs`` (pi, shape ``(L,)``) with ``rewards`` (r, shape ``(L,)``);
outputs are float64; randomness comes only from an explicit ``rng`` argument; bad
arguments raise ``ValueError`` naming the argument.
"""

from .core import (
    TieBreak,
    Ties,
    best_of_n_pmf,
    kl_best_of_n,
    kl_formula,
    kl_gap_bound,
    level_pmf,
    renyi2_entropy,
    win_rate,
    win_rate_bound,
    win_rate_gap_bound,
)
from .estimator import estimate_kl, expected_estimator, kl_estimator
from .exact import best_of_n_pmf_exact, brute_force_pmf, win_rate_exact
from .families import MarkovLM, Reference, cherry_picked, markov_lm, random_reference, rounded_rewards, uniform
from .sampling import chi2_check, mc_kl, sample_best_of_n
from .tradeoff import (
    bon_continuous,
    optimal_win_rate_at_kl,
    rewind_repeat_continuous,
    tilt_continuous,
    tilted_policy,
)

__all__ = [
    "TieBreak",
    "Ties",
    "best_of_n_pmf",
    "level_pmf",
    "kl_best_of_n",
    "kl_formula",
    "renyi2_entropy",
    "kl_gap_bound",
    "win_rate",
    "win_rate_bound",
    "win_rate_gap_bound",
    "kl_estimator",
    "estimate_kl",
    "expected_estimator",
    "sample_best_of_n",
    "mc_kl",
    "chi2_check",
    "bon_continuous",
    "rewind_repeat_continuous",
    "tilt_continuous",
    "tilted_policy",
    "optimal_win_rate_at_kl",
    "best_of_n_pmf_exact",
    "brute_force_pmf",
    "win_rate_exact",
    "Reference",
    "MarkovLM",
    "uniform",
    "cherry_picked",
    "random_reference",
    "rounded_rewards",
    "markov_lm",
]
