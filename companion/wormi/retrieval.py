"""Prototype-based world-model retrieval from the agent's own trajectory (eq. (wormi-retrieve))."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import KMeans

from ..validation import as_float_array, as_positive_int
from .minihome import A, F, check_actions, check_states

P = F + A + F  # width of an abstract transition


def _check_finite(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` itself (its dtype kept) once :func:`~companion.validation.as_float_array` found it finite."""
    as_float_array(x, name)
    return x


def abstract_transition(s, a, s_next) -> np.ndarray:
    """``phi(s, a, s') = [s, onehot(a), s' - s]`` ``(B, 2F + A)``, eq. (wormi-phi)."""
    s, s_next = check_states(s), check_states(s_next)
    if s.shape != s_next.shape:
        raise ValueError(f"s_next: expected the shape of s {s.shape}, got {s_next.shape}")
    a = check_actions(a, len(s))
    onehot = np.eye(A, dtype=np.float32)[a]
    return np.concatenate([s, onehot, s_next.astype(np.float32) - s], 1).astype(np.float32)


class PrototypeIndex:
    """Prototypes ``P_j`` of every world model's data, and the trajectory score ``dist_j``.

    ``fit`` keeps each world's distinct abstract transitions, or ``k`` k-means centroids of them
    when there are more. ``distances(phi)`` gives, for transitions ``(B, P)``, the squared
    distance to each world's nearest prototype ``(B, N)``; a trajectory's score is their mean
    over its steps, and :meth:`topk` keeps the ``K`` worlds with the lowest scores.
    """

    def __init__(self, prototypes: list[np.ndarray]):
        prototypes = [np.asarray(p) for p in prototypes] if isinstance(prototypes, (list, tuple)) else prototypes
        if not isinstance(prototypes, list) or not prototypes or any(p.ndim != 2 or p.shape[1] != P or len(p) == 0 for p in prototypes):
            raise ValueError(f"prototypes: expected a non-empty list of (k_j, {P}) arrays")
        self.prototypes = [_check_finite(np.asarray(p, dtype=np.float32), f"prototypes[{j}]")
                           for j, p in enumerate(prototypes)]
        self._all = torch.from_numpy(np.concatenate(self.prototypes))
        self._sq = (self._all**2).sum(1)[None]
        self._starts = np.cumsum([0] + [len(p) for p in prototypes[:-1]])

    @classmethod
    def fit(cls, phis_per_model: list[np.ndarray], k: int = 256, seed: int = 0) -> "PrototypeIndex":
        as_positive_int(k, "k")
        protos = []
        for j, phi in enumerate(phis_per_model):
            phi = np.asarray(phi, dtype=np.float32)
            if phi.ndim != 2 or phi.shape[1] != P:
                raise ValueError(f"phis_per_model[{j}]: expected shape (n, {P}), got {phi.shape}")
            _check_finite(phi, f"phis_per_model[{j}]")
            unique = np.unique(phi, axis=0)
            if len(unique) > k:
                unique = KMeans(k, n_init=1, random_state=seed).fit(unique).cluster_centers_
            protos.append(unique)
        return cls(protos)

    def __len__(self) -> int:
        return len(self.prototypes)

    def distances(self, phi: np.ndarray) -> np.ndarray:
        """``min_p ||phi_i - p||^2`` for every transition and world ``(B, N)``."""
        phi = np.asarray(phi, dtype=np.float32)
        if phi.ndim != 2 or phi.shape[1] != P:
            raise ValueError(f"phi: expected shape (B, {P}), got {phi.shape}")
        _check_finite(phi, "phi")
        x = torch.from_numpy(phi)  # torch: one thread, as the chapter sets it (BLAS may use many)
        d2 = ((x**2).sum(1, keepdim=True) - 2 * x @ self._all.T + self._sq).clamp_min_(0).numpy()
        return np.minimum.reduceat(d2, self._starts, axis=1)

    def score(self, traj_phi: np.ndarray) -> np.ndarray:
        """``dist_j(tau)`` ``(N,)`` for one trajectory ``(t, P)`` (lower = better)."""
        traj_phi = np.asarray(traj_phi, dtype=np.float32)
        if traj_phi.ndim != 2 or traj_phi.shape[1] != P:
            raise ValueError(f"traj_phi: expected shape (t, {P}), got {traj_phi.shape}")
        if len(traj_phi) == 0:
            return np.zeros(len(self), dtype=np.float32)
        return self.distances(_check_finite(traj_phi, "traj_phi")).mean(0)

    def topk(self, traj_phi: np.ndarray, K: int, cover: bool = False) -> list[int]:
        """The ``K`` worlds that best explain one trajectory (:func:`retrieve`); ``[]`` before the
        first transition (nothing implanted)."""
        if len(traj_phi) == 0:
            return []
        return [int(j) for j in retrieve(self.distances(np.asarray(traj_phi))[None], K, cover=cover)[0]]


def retrieve(dist: np.ndarray, K: int, excluded: np.ndarray | None = None, cover: bool = False) -> np.ndarray:
    """The retrieved worlds ``J_t`` ``(B, K)`` from per-step distances ``dist`` ``(B, t, N)``.

    By default the ``K`` worlds with the lowest ``dist_j`` of eq. (wormi-retrieve). With ``cover``
    the first is the same and each next world minimises the score of the *set* chosen so far,
    ``mean_i min_{j in J} d_ij``: the world that best explains the steps the others do not (an
    ablation of the chapter). ``excluded`` ``(B, N)`` worlds are never picked.
    """
    dist = np.asarray(dist)
    if dist.ndim != 3:
        raise ValueError(f"dist: expected shape (B, t, N), got {dist.shape}")
    _check_finite(dist, "dist")
    B, t, N = dist.shape
    if not 1 <= as_positive_int(K, "K") <= N:
        raise ValueError(f"K: expected 1 <= K <= {N} (the library's size), got {K}")
    blocked = np.zeros((B, N), dtype=bool) if excluded is None else excluded.copy()
    if not cover:
        score = np.where(blocked, np.inf, dist.mean(1))
        return np.argsort(score, axis=1, kind="stable")[:, :K]
    best, chosen = np.full((B, t), np.inf), []
    for _ in range(K):
        score = np.where(blocked, np.inf, np.minimum(best[..., None], dist).mean(1))  # (B, N)
        j = np.argmin(score, axis=1)
        chosen.append(j)
        blocked[np.arange(B), j] = True
        best = np.minimum(best, dist[np.arange(B), :, j])
    return np.stack(chosen, 1)
