"""Certainty scores (larger = more certain): the score is any function of the question; only the threshold is FactTest's."""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

__all__ = ["vanilla_entropy_score", "predictive_entropy_score", "max_prob_score"]


def vanilla_entropy_score(samples) -> np.ndarray:
    """Minus the entropy of the empirical frequencies of K sampled answers, per question.

    ``samples`` (m, K) integer answer ids -> (m,) in [-log K, 0]; 0 = all K samples agree.
    It takes few distinct values, so ties between calibration and test scores are common.
    """
    s = np.asarray(samples)
    if s.ndim != 2 or s.shape[1] < 1 or not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"samples: expected an (m, K) integer array of answer ids, got {s.dtype} {s.shape}")
    K = s.shape[1]
    _, ids = np.unique(s, return_inverse=True)  # relabel answers 0..U-1
    ids = ids.reshape(s.shape)
    U = int(ids.max()) + 1
    rows = np.repeat(np.arange(s.shape[0]), K)
    counts = np.bincount(rows * U + ids.ravel(), minlength=s.shape[0] * U).reshape(s.shape[0], U)
    freq = counts / K
    return np.sum(xlogy(freq, freq), axis=1)


def predictive_entropy_score(probs) -> np.ndarray:
    """Minus the entropy of the model's answer distribution, (m, V) -> (m,)."""
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"probs: expected an (m, V) array of probabilities, got shape {p.shape}")
    return np.sum(xlogy(p, p), axis=1)


def max_prob_score(probs) -> np.ndarray:
    """The probability of the model's top answer, (m, V) -> (m,)."""
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2 or not np.all(np.isfinite(p)):
        raise ValueError(f"probs: expected an (m, V) array of probabilities, got shape {p.shape}")
    if np.any(p < 0) or not np.allclose(p.sum(axis=1), 1.0, atol=1e-6):
        raise ValueError("probs: every row must be a probability vector (non-negative, summing to 1)")
    return p.max(axis=1)
