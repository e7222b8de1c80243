"""Post-hoc alignment baselines applied to independently trained embeddings."""

from __future__ import annotations

import numpy as np

from companion.validation import as_float_array, as_instance, as_positive, as_positive_int


def _emb(E, name: str, d: int | None = None) -> np.ndarray:
    """An (N, d) real-valued embedding with N >= 2 rows, as float64 (integers allowed)."""
    raw = np.asarray(E)
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iuf":  # as_float_array would parse strings
        raise ValueError(f"{name}: expected a real-valued (N, d) array, got dtype {raw.dtype}")
    E = as_float_array(raw, name) if raw.size else raw.astype(float)
    if E.ndim != 2 or len(E) < 2:
        raise ValueError(f"{name}: expected a 2-D array (N, d) with N >= 2, got shape {E.shape}")
    if d is not None and E.shape[1] != d:
        raise ValueError(f"{name}: expected {d} columns, got {E.shape[1]}")
    return E


def _sqrtm(C: np.ndarray, power: float) -> np.ndarray:
    w, V = np.linalg.eigh(C)
    return (V * np.clip(w, 1e-12, None) ** power) @ V.T


def coral(Es, Et, eps: float = 1e-3) -> np.ndarray:
    """Eq. (core-coral): E^t -> (E^t - m_t) C_t^{-1/2} C_s^{1/2} + m_s (centred covariances
    plus eps I): the target's first two moments become the source's."""
    Es = _emb(Es, "Es")
    Et = _emb(Et, "Et", Es.shape[1])
    eps = as_positive(eps, "eps")
    eye = np.eye(Es.shape[1])
    C_s, C_t = np.cov(Es.T) + eps * eye, np.cov(Et.T) + eps * eye
    return (Et - Et.mean(0)) @ _sqrtm(C_t, -0.5) @ _sqrtm(C_s, 0.5) + Es.mean(0)


def procrustes(As, At) -> np.ndarray:
    """Eq. (core-procrustes): the orthogonal R minimising ||(A_t - mean) R - (A_s - mean)||_F,
    R = U V' from the SVD U S V' of (A_t - mean)'(A_s - mean). Row i of A_t matches row i of A_s."""
    As = _emb(As, "As")
    At = _emb(At, "At", As.shape[1])
    if len(As) != len(At):
        raise ValueError(f"At: expected {len(As)} anchor rows like As, got {len(At)}")
    if len(As) <= As.shape[1]:
        raise ValueError(f"As: expected more than d = {As.shape[1]} anchor rows (centred anchors span at "
                         f"most n - 1 directions, so fewer leave the rotation undetermined), got {len(As)}")
    U, _, Vt = np.linalg.svd((At - At.mean(0)).T @ (As - As.mean(0)))
    return U @ Vt


def anchor_pairs(z_s, z_t, n: int | None = 20, mutual: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``n`` pairs (i, j) of regions close in the *true* latent space (ground truth: a privileged
    baseline), the closest first; ``n=None`` returns them all.

    ``mutual=True``: pairs of mutual nearest neighbours; ``mutual=False``: every target region j
    with its nearest source region i (as many pairs as target regions, so enough anchors for a
    Procrustes map in d dimensions when N_t > d).
    """
    z_s = _emb(z_s, "z_s")
    z_t = _emb(z_t, "z_t", z_s.shape[1])
    if n is not None:
        n = as_positive_int(n, "n")
    mutual = bool(as_instance(mutual, "mutual", (bool, np.bool_)))
    d = np.linalg.norm(z_s[:, None] - z_t[None], axis=-1)
    i_of_j, j_of_i = d.argmin(0), d.argmin(1)
    j = np.arange(len(z_t))
    if mutual:
        j = np.flatnonzero(j_of_i[i_of_j] == j)
    if n is not None and len(j) < n:
        kind = "mutual nearest neighbours" if mutual else "target regions"
        raise ValueError(f"n: only {len(j)} {kind} exist, asked for {n}")
    j = j[np.argsort(d[i_of_j[j], j], kind="stable")][:n]
    return i_of_j[j], j
