"""Post-hoc alignment baselines applied to independently trained embeddings."""

from __future__ import annotations

import numpy as np


def _emb(E, name: str, d: int | None = None) -> np.ndarray:
    E = np.asarray(E, dtype=float)
    if E.ndim != 2 or len(E) < 2:
        raise ValueError(f"{name}: expected a 2-D array (N, d) with N >= 2, got shape {E.shape}")
    if d is not None and E.shape[1] != d:
        raise ValueError(f"{name}: expected {d} columns, got {E.shape[1]}")
    if not np.isfinite(E).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return E


def _sqrtm(C: np.ndarray, power: float) -> np.ndarray:
    w, V = np.linalg.eigh(C)
    return (V * np.clip(w, 1e-12, None) ** power) @ V.T


def coral(Es, Et, eps: float = 1e-3) -> np.ndarray:
    """Eq. (core-coral): E^t -> (E^t - m_t) C_t^{-1/2} C_s^{1/2} + m_s (centred covariances
    plus eps I): the target's first two moments become the source's."""
    Es = _emb(Es, "Es")
    Et = _emb(Et, "Et", Es.shape[1])
    if not eps > 0:
        raise ValueError(f"eps: expected a positive ridge, got {eps!r}")
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
    U, _, Vt = np.linalg.svd((At - At.mean(0)).T @ (As - As.mean(0)))
    return U @ Vt


def anchor_pairs(z_s, z_t, n: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """``n`` pairs (i, j) of mutual nearest neighbours in the *true* latent space (ground truth:
    a privileged baseline), the closest first."""
    z_s, z_t = _emb(z_s, "z_s"), _emb(z_t, "z_t", np.shape(z_s)[1])
    d = np.linalg.norm(z_s[:, None] - z_t[None], axis=-1)
    i_of_j, j_of_i = d.argmin(0), d.argmin(1)
    j = np.flatnonzero(j_of_i[i_of_j] == np.arange(len(z_t)))
    if len(j) < n:
        raise ValueError(f"n: only {len(j)} mutual nearest neighbours exist, asked for {n}")
    j = j[np.argsort(d[i_of_j[j], j])][:n]
    return i_of_j[j], j
