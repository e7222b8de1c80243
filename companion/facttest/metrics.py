"""Empirical errors of an answer/abstain decision, eq. (facttest-errors), with binomial standard errors."""

from __future__ import annotations

import numpy as np

from companion.validation import check_same_length

from .threshold import as_correct

__all__ = ["error_rates"]


def _rate(hits: np.ndarray) -> tuple[float, float]:
    if hits.size == 0:
        return float("nan"), float("nan")
    p = float(hits.mean())
    return p, float(np.sqrt(p * (1 - p) / hits.size))


def error_rates(answer, correct) -> dict:
    """Type I (answered | wrong), Type II (abstained | right), precision (right | answered), ...

    Type I is conditional on the answer being wrong; it is *not* 1 - precision, which
    also depends on how often the model is right. Keys: ``type1``, ``type1_se``, ``type2``,
    ``type2_se``, ``precision``, ``precision_se``, ``answer_rate``, ``base_accuracy``,
    ``n`` (questions), ``n0`` (wrong answers). Undefined rates are nan.
    """
    answer = as_correct(answer, "answer")
    correct = as_correct(correct)
    check_same_length(answer, correct, "answer", "correct")
    if answer.size == 0:
        raise ValueError("answer: expected at least one decision, got an empty array")
    type1, type1_se = _rate(answer[~correct])
    type2, type2_se = _rate(~answer[correct])
    precision, precision_se = _rate(correct[answer])
    return dict(type1=type1, type1_se=type1_se, type2=type2, type2_se=type2_se,
                precision=precision, precision_se=precision_se, answer_rate=float(answer.mean()),
                base_accuracy=float(correct.mean()), n=int(answer.size), n0=int((~correct).sum()))
