"""Companion of the chapter ``facttest`` (Nie et al., ICML 2025, "FactTest").

Layout (equation labels are those of the chapter):

* :mod:`.threshold` -- v(k) (eq. (facttest-v)), the order-statistic index and threshold
  (eq. (facttest-khat)), the naive quantile, and :class:`FactTest` (strict ``>`` rule);
* :mod:`.shift`     -- rejection sampling (eq. (facttest-reject)) and a density-ratio estimator;
* :mod:`.metrics`   -- Type I / Type II / precision of a decision (eq. (facttest-errors));
* :mod:`.scores`    -- certainty scores (vanilla entropy of sampled answers, predictive entropy);
* :mod:`.sim`       -- simulated score laws with exact error rates, and a shifted world;
* :mod:`.qa`        -- the synthetic knowledge-QA task and the small torch model.

Scores are "larger = more certain", decisions ``True`` = answer; randomness comes only from an
explicit ``rng``; bad arguments raise ``ValueError`` naming the argument.
"""

from .metrics import error_rates
from .qa import FactMLP, KnowledgeWorld, answer_questions, learned_abstention, train_fact_model
from .scores import max_prob_score, predictive_entropy_score, vanilla_entropy_score
from .shift import fit_density_ratio, logistic_regression, rejection_sample
from .sim import DiscreteVEScores, GaussianScores, ShiftWorld, discrete_violation_probability, simulate_violation
from .threshold import (
    FactTest,
    as_correct,
    dkw_index,
    facttest_threshold,
    min_null_samples,
    naive_index,
    naive_threshold,
    order_statistic_index,
    violation_probability,
)

__all__ = [
    "violation_probability", "order_statistic_index", "min_null_samples", "facttest_threshold",
    "naive_index", "naive_threshold", "dkw_index", "as_correct", "FactTest",
    "rejection_sample", "fit_density_ratio", "logistic_regression",
    "error_rates",
    "vanilla_entropy_score", "predictive_entropy_score", "max_prob_score",
    "GaussianScores", "DiscreteVEScores", "ShiftWorld", "simulate_violation", "discrete_violation_probability",
    "KnowledgeWorld", "FactMLP", "train_fact_model", "answer_questions", "learned_abstention",
]
