"""Cross-city transfer protocols, the within-city probe of the latent profiles and the
region-level alignment diagnostics."""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr

from companion.validation import (
    as_choice,
    as_float_array,
    as_index_tensor,
    as_instance,
    as_positive,
    as_positive_int,
)

from .align import _emb


def standardise(E) -> np.ndarray:
    """Each column to mean 0, standard deviation 1, with the city's own (unlabelled) statistics."""
    E = _emb(E, "E")
    return (E - E.mean(0)) / np.maximum(E.std(0), 1e-12)


def _ridge(X: np.ndarray, y: np.ndarray, alpha: float = 1.0) -> tuple[np.ndarray, float]:
    """Ridge with an unpenalised intercept, as scikit-learn's Ridge(alpha)."""
    mx, my = X.mean(0), y.mean(0)
    Xc = X - mx
    w = np.linalg.solve(Xc.T @ Xc + alpha * np.eye(X.shape[1]), Xc.T @ (y - my))
    return w, my - mx @ w


def _labels(y, name: str, n: int) -> np.ndarray:
    """Real-valued labels, one per region, not all equal."""
    arr = np.asarray(y)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":  # as_float_array parses strings
        raise ValueError(f"{name}: expected real-valued labels (integers or floats), got dtype "
                         f"{arr.dtype}")
    y = as_float_array(arr, name)
    if y.shape != (n,):
        raise ValueError(f"{name}: expected {n} labels, one per region, got shape {y.shape}")
    if np.ptp(y) == 0:
        raise ValueError(f"{name}: all {n} labels are equal ({y[0]:g}); a constant target has "
                         "nothing to fit or to explain")
    return y


def transfer_eval(Es, ys, Et, yt, protocol: str = "log", alpha: float = 1.0,
                  standardised: bool = False) -> dict[str, float]:
    """Fit a ridge (penalty ``alpha``) on source embeddings and labels, predict the target city.

    * "official": raw embeddings and raw labels, negative predictions clipped to 0; MAE, RMSE,
      MAPE on the target (the official evaluator);
    * "log": ridge on log y; R^2 and Spearman rho on the target's log labels (scale-free). The
      embeddings enter raw, as in the official evaluator, unless ``standardised=True`` (each city
      to mean 0 and unit variance with its own statistics).
    """
    protocol = as_choice(protocol, "protocol", ("official", "log"))
    alpha = as_positive(alpha, "alpha")
    as_instance(standardised, "standardised", (bool, np.bool_))
    Es = _emb(Es, "Es")
    Et = _emb(Et, "Et", Es.shape[1])
    ys, yt = _labels(ys, "ys", len(Es)), _labels(yt, "yt", len(Et))
    if protocol == "official":
        w, b = _ridge(Es, ys, alpha)
        pred = np.clip(Et @ w + b, 0.0, None)
        err = pred - yt
        return {"mae": float(np.abs(err).mean()), "rmse": float(np.sqrt((err ** 2).mean())),
                "mape": float(np.mean(np.abs(err) / np.maximum(np.abs(yt), 1e-12)))}
    for name, y in (("ys", ys), ("yt", yt)):
        if (y <= 0).any():
            raise ValueError(f"{name}: the 'log' protocol needs positive labels, got {y.min():g}")
    prep = standardise if standardised else (lambda E: E)
    w, b = _ridge(prep(Es), np.log(ys), alpha)
    pred, true = prep(Et) @ w + b, np.log(yt)
    r2 = 1.0 - ((pred - true) ** 2).sum() / ((true - true.mean()) ** 2).sum()
    return {"r2": float(r2), "spearman": float(spearmanr(pred, true).statistic), "pred": pred}


def _latent(z, name: str, n: int) -> np.ndarray:
    z = as_float_array(z, name)
    if z.ndim != 2 or len(z) != n:
        raise ValueError(f"{name}: expected an ({n}, k) array of latent profiles, got shape {z.shape}")
    if (np.ptp(z, axis=0) == 0).any():
        raise ValueError(f"{name}: a latent coordinate is constant across regions")
    return z


def latent_probe(E, z, folds: int = 5, alpha: float = 1.0, seed: int = 0) -> float:
    """Within one city: the cross-validated R^2 of a ridge from the embedding ``E`` (N, d) to the
    true latent profiles ``z`` (N, k), averaged over the k coordinates. It asks whether the
    embedding encodes the city at all, before anything is transferred."""
    E = _emb(E, "E")
    z = _latent(z, "z", len(E))
    folds = as_positive_int(folds, "folds", minimum=2)
    if folds > len(E):
        raise ValueError(f"folds: expected at most {len(E)} folds (one region each), got {folds}")
    alpha = as_positive(alpha, "alpha")
    order = np.random.default_rng(seed).permutation(len(E))
    pred = np.empty_like(z)
    for part in np.array_split(order, folds):
        train = np.setdiff1d(order, part)
        w, b = _ridge(E[train], z[train], alpha)
        pred[part] = E[part] @ w + b
    r2 = 1.0 - ((pred - z) ** 2).sum(0) / ((z - z.mean(0)) ** 2).sum(0)
    return float(r2.mean())


def probe_direction_cosine(Es, z_s, Et, z_t, alpha: float = 1.0) -> np.ndarray:
    """For each latent coordinate l, the cosine between the embedding direction that predicts
    z_l in the source city and the one that predicts it in the target city (ridge weights on the
    raw embeddings). Near 1 when the two spaces share axes, near 0 when they are unrelated, near
    -1 when the target is a mirror image of the source along that coordinate."""
    Es = _emb(Es, "Es")
    Et = _emb(Et, "Et", Es.shape[1])
    z_s = _latent(z_s, "z_s", len(Es))
    z_t = _latent(z_t, "z_t", len(Et))
    if z_t.shape[1] != z_s.shape[1]:
        raise ValueError(f"z_t: expected {z_s.shape[1]} latent coordinates like z_s, got {z_t.shape[1]}")
    alpha = as_positive(alpha, "alpha")
    Ws, Wt = _ridge(Es, z_s, alpha)[0], _ridge(Et, z_t, alpha)[0]
    norm = np.maximum(np.linalg.norm(Ws, axis=0) * np.linalg.norm(Wt, axis=0), 1e-300)
    return (Ws * Wt).sum(0) / norm


def _types(types, name: str, n: int) -> np.ndarray:
    """Integer type labels >= 0, one per region."""
    return as_index_tensor(types, name, n=n).numpy()


def _nearest_source(Es, Et, standardised: bool = False) -> np.ndarray:
    """Each target region's nearest source region: Euclidean on the raw embeddings, or cosine
    on per-city standardised ones."""
    S = _emb(Es, "Es")
    T = _emb(Et, "Et", S.shape[1])
    if not standardised:
        d2 = (T ** 2).sum(1)[:, None] - 2 * T @ S.T + (S ** 2).sum(1)[None]
        return d2.argmin(1)
    S, T = standardise(S), standardise(T)
    S /= np.maximum(np.linalg.norm(S, axis=1, keepdims=True), 1e-12)
    T /= np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-12)
    return (T @ S.T).argmax(1)


def type_agreement(Es, types_s, Et, types_t, standardised: bool = False) -> float:
    """Share of target regions whose nearest source region has the same functional type
    (Euclidean on the raw embeddings; cosine on per-city standardised ones if ``standardised``)."""
    nn = _nearest_source(Es, Et, standardised)
    types_s = _types(types_s, "types_s", len(np.asarray(Es)))
    types_t = _types(types_t, "types_t", len(nn))
    return float((types_s[nn] == types_t).mean())


def chance_type_agreement(Es, types_s, Et, types_t, n_perm: int = 200, seed: int = 0,
                          standardised: bool = False) -> float:
    """The same agreement with the source types permuted (mean over ``n_perm`` permutations):
    what a nearest-neighbour map that ignores types would score."""
    n_perm = as_positive_int(n_perm, "n_perm")
    nn = _nearest_source(Es, Et, standardised)
    types_s = _types(types_s, "types_s", len(np.asarray(Es)))
    types_t = _types(types_t, "types_t", len(nn))
    rng = np.random.default_rng(seed)
    return float(np.mean([(rng.permutation(types_s)[nn] == types_t).mean() for _ in range(n_perm)]))
