"""Covariate shift: density ratios and rejection sampling of the incorrect calibration answers.

Calibration questions come from a source law P, deployment questions from a target law Q;
correctness and the score depend on the question only, so only the question marginal moves.
With w = dQ/dP bounded by B, keeping each incorrect calibration answer with probability
w(q)/B turns the kept ones into an i.i.d. sample of the *target* null law, eq. (facttest-reject);
the threshold of :mod:`.threshold` is then computed on them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from companion.validation import as_1d_float_array, as_generator

__all__ = ["rejection_sample", "fit_density_ratio", "logistic_regression"]


def rejection_sample(weights, bound=None, rng=None) -> np.ndarray:
    """A bool mask keeping index i with probability weights[i] / bound, eq. (facttest-reject).

    ``bound`` (B) must be at least ``max(weights)``; by default it is ``max(weights)``.
    """
    w = as_1d_float_array(weights, "weights", allow_empty=True)
    if np.any(w < 0):
        raise ValueError(f"weights: density ratios must be >= 0, got {w[w < 0][0]}")
    rng = as_generator(rng)
    if bound is None:
        bound = float(w.max()) if w.size else 1.0
    bound = float(bound)
    if not np.isfinite(bound) or bound <= 0:
        raise ValueError(f"bound: expected a positive finite number, got {bound}")
    if w.size and w.max() > bound * (1 + 1e-12):
        raise ValueError(f"bound: must be >= max(weights) = {w.max():.6g}, got {bound:.6g}")
    return rng.random(w.size) <= w / bound


def _design(x: np.ndarray) -> np.ndarray:
    x = x[:, None] if x.ndim == 1 else x
    return np.hstack([np.ones((x.shape[0], 1)), x])


def logistic_regression(features, labels, *, l2: float = 1e-4, iters: int = 50) -> np.ndarray:
    """Coefficients (intercept first) of an L2-penalised logistic regression, by Newton's method (IRLS).

    ``features`` (m,) or (m, d), ``labels`` (m,) bool. The intercept is not penalised.
    """
    x = np.asarray(features, dtype=float)
    if x.ndim not in (1, 2) or x.shape[0] == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"features: expected a finite (m,) or (m, d) array, got shape {x.shape}")
    y = np.asarray(labels, dtype=float)
    if y.shape != (x.shape[0],):
        raise ValueError(f"labels: expected shape ({x.shape[0]},), got {y.shape}")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"labels: expected booleans or 0/1 values, got {np.unique(y)[:5]}")
    X = _design(x)
    penalty = np.full(X.shape[1], float(l2) * x.shape[0])
    penalty[0] = 0.0
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(X @ beta, -35, 35)))
        grad = X.T @ (p - y) + penalty * beta
        hess = (X * (p * (1 - p))[:, None]).T @ X + np.diag(penalty + 1e-10)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta


def fit_density_ratio(feat_source, feat_target, l2: float = 1e-4) -> Callable[[np.ndarray], np.ndarray]:
    """Estimate w = dQ/dP from unlabelled samples by a source-vs-target logistic classifier.

    With c(q) = P(target | q) fitted on n_S source and n_T target questions,
    w_hat(q) = (n_S / n_T) c(q) / (1 - c(q)) = (n_S / n_T) exp(logit c(q)).
    Returns ``w_hat(features) -> (m,)``.
    """
    fs = np.asarray(feat_source, dtype=float)
    ft = np.asarray(feat_target, dtype=float)
    for name, f in (("feat_source", fs), ("feat_target", ft)):
        if f.ndim not in (1, 2) or f.shape[0] < 2 or not np.all(np.isfinite(f)):
            raise ValueError(f"{name}: expected a finite (m,) or (m, d) array with m >= 2, got shape {f.shape}")
    if fs.shape[1:] != ft.shape[1:]:
        raise ValueError(f"feat_target: expected {fs.shape[1:]} features per row like feat_source, got {ft.shape[1:]}")
    beta = logistic_regression(np.concatenate([fs, ft]), np.r_[np.zeros(len(fs)), np.ones(len(ft))], l2=l2)
    log_ratio = np.log(len(fs) / len(ft))

    def w_hat(features) -> np.ndarray:
        f = np.asarray(features, dtype=float)
        return np.exp(np.clip(_design(f) @ beta + log_ratio, -50, 50))

    w_hat.coef_ = beta  # type: ignore[attr-defined]
    return w_hat
