"""Cross-city transfer protocols and region-level alignment diagnostics."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from .align import _emb


def standardise(E) -> np.ndarray:
    """Each column to mean 0, standard deviation 1, with the city's own (unlabelled) statistics."""
    E = _emb(E, "E")
    return (E - E.mean(0)) / np.maximum(E.std(0), 1e-12)


def _ridge(X: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> tuple[np.ndarray, float]:
    """Ridge with an unpenalised intercept, as scikit-learn's Ridge(alpha)."""
    mx, my = X.mean(0), y.mean()
    Xc = X - mx
    w = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ (y - my))
    return w, my - mx @ w


def _labels(y, name: str, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    if y.shape != (n,):
        raise ValueError(f"{name}: expected {n} labels, one per region, got shape {y.shape}")
    if not np.isfinite(y).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return y


def transfer_eval(Es, ys, Et, yt, protocol: str = "log", alpha: float = 1.0,
                  standardised: bool = True) -> dict[str, float]:
    """Fit a ridge (alpha) on source embeddings and labels, predict the target city.

    * "official": raw embeddings and raw labels, negative predictions clipped to 0; MAE, RMSE,
      MAPE on the target (the paper's evaluator);
    * "log": embeddings standardised per city (unless ``standardised=False``), ridge on log y;
      R^2 and Spearman rho on the target's log labels (scale-free).
    """
    Es = _emb(Es, "Es")
    Et = _emb(Et, "Et", Es.shape[1])
    ys, yt = _labels(ys, "ys", len(Es)), _labels(yt, "yt", len(Et))
    if protocol == "official":
        w, b = _ridge(Es, ys, alpha)
        pred = np.clip(Et @ w + b, 0.0, None)
        err = pred - yt
        return {"mae": float(np.abs(err).mean()), "rmse": float(np.sqrt((err ** 2).mean())),
                "mape": float(np.mean(np.abs(err) / np.maximum(np.abs(yt), 1e-12)))}
    if protocol != "log":
        raise ValueError(f"protocol: expected 'official' or 'log', got {protocol!r}")
    if (ys <= 0).any() or (yt <= 0).any():
        raise ValueError("ys: the 'log' protocol needs positive labels in both cities")
    prep = standardise if standardised else (lambda E: E)
    w, b = _ridge(prep(Es), np.log(ys), alpha)
    pred, true = prep(Et) @ w + b, np.log(yt)
    r2 = 1.0 - ((pred - true) ** 2).sum() / ((true - true.mean()) ** 2).sum()
    return {"r2": float(r2), "spearman": float(spearmanr(pred, true).statistic), "pred": pred}


def _nearest_source(Es, Et) -> np.ndarray:
    S = standardise(Es)
    T = standardise(_emb(Et, "Et", S.shape[1]))
    S /= np.maximum(np.linalg.norm(S, axis=1, keepdims=True), 1e-12)
    T /= np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-12)
    return (T @ S.T).argmax(1)


def type_agreement(Es, types_s, Et, types_t) -> float:
    """Share of target regions whose cosine nearest source region (per-city standardised
    embeddings) has the same functional type."""
    nn = _nearest_source(Es, Et)
    types_s, types_t = np.asarray(types_s), np.asarray(types_t)
    if types_s.shape != (len(np.asarray(Es)),) or types_t.shape != (len(nn),):
        raise ValueError("types_s: expected one type per region of each city")
    return float((types_s[nn] == types_t).mean())


def chance_type_agreement(Es, types_s, Et, types_t, n_perm: int = 200, seed: int = 0) -> float:
    """The same agreement with the source types permuted (mean over ``n_perm`` permutations):
    what a nearest-neighbour map that ignores types would score."""
    if not isinstance(n_perm, int) or n_perm < 1:
        raise ValueError(f"n_perm: expected a positive integer, got {n_perm!r}")
    nn = _nearest_source(Es, Et)
    rng = np.random.default_rng(seed)
    types_s, types_t = np.asarray(types_s), np.asarray(types_t)
    return float(np.mean([(rng.permutation(types_s)[nn] == types_t).mean() for _ in range(n_perm)]))
