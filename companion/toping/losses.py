"""TopInG's losses: rational-hat vectorisation, topological discrepancy, the two-Gaussian prior,
GSAT's Bernoulli information loss, and the exact 1-Wasserstein distance of our line diagrams."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from companion.toping.persistence import Diagram
from companion.validation import as_finite_tensor, as_nonnegative, as_positive, as_positive_int, as_probability

__all__ = ["RationalHat", "topo_discrepancy", "gaussian_mixture_prior", "bernoulli_info_loss",
           "diagram_w1_line", "diagram_w1_lines", "diagram_w1"]


def _check_scores(p: torch.Tensor, name: str = "p") -> torch.Tensor:
    if not isinstance(p, torch.Tensor):
        p = torch.as_tensor(p, dtype=torch.float64)
    as_finite_tensor(p, name, ndim=1)
    if bool((p < 0).any() or (p > 1).any()):
        raise ValueError(f"{name}: scores must lie in [0, 1], got [{float(p.min()):.4g}, {float(p.max()):.4g}]")
    return p


class RationalHat(nn.Module):
    """Learnable rational-hat structure elements (Hofer et al.), eq. ``toping-hat``.

    ``n_elements`` elements per homology dimension, each a centre ``c`` in R^2 and a radius ``r``;
    a diagram of a batch becomes ``[n_segments, 2 * n_elements]`` (H0 elements, then H1).
    """

    def __init__(self, n_elements: int = 8, init_range: tuple[float, float] = (0.0, 0.5),
                 lipschitz: float = 2.0, seed: int = 0):
        super().__init__()
        as_positive_int(n_elements, "n_elements")
        as_positive(lipschitz, "lipschitz")
        lo, hi = (float(v) for v in init_range)
        if not 0 <= lo <= hi < float("inf"):
            raise ValueError(f"init_range: expected 0 <= low <= high, finite, got {init_range!r}")
        gen = torch.Generator().manual_seed(seed)
        self.centres = nn.Parameter(lo + (hi - lo) * torch.rand(2, n_elements, 2, generator=gen))
        self.radii = nn.Parameter(torch.full((2, n_elements), 0.1))
        self.lipschitz = lipschitz

    def phi(self, points: torch.Tensor, dim: int) -> torch.Tensor:
        """``[P, k]``: each point's contribution to each element of dimension ``dim``."""
        dist = torch.linalg.norm(points[:, None, :] - self.centres[dim][None], dim=-1)
        return 1 / (1 + dist) - 1 / (1 + (self.radii[dim].abs() - dist).abs())

    def forward(self, diagram: Diagram, n_segments: int) -> torch.Tensor:
        out = []
        for dim in (0, 1):
            points, seg = diagram.points(dim)
            k = self.centres.shape[1]
            total = torch.zeros(n_segments, k, dtype=self.centres.dtype, device=self.centres.device)
            out.append(total.index_add(0, seg, self.phi(points.to(total.dtype), dim)))
        return torch.cat(out, 1) / self.lipschitz


def topo_discrepancy(vx: torch.Tensor, veps: torch.Tensor, top: int = 2) -> torch.Tensor:
    """The dual lower bound of d_topo, eq. ``toping-dual``: the ``top`` largest
    ``|mean_batch psi_j(T_X) - mean_batch psi_j(T_eps)|`` summed, for ``vx, veps: [B, k]``."""
    if vx.ndim != 2 or vx.shape != veps.shape:
        raise ValueError(f"veps: expected the shape of vx {tuple(vx.shape)} ([B, k]), got {tuple(veps.shape)}")
    if not 1 <= top <= vx.shape[1]:
        raise ValueError(f"top: expected an integer in [1, {vx.shape[1]}], got {top!r}")
    gap = (vx.mean(0) - veps.mean(0)).abs()
    return torch.topk(gap, top).values.sum()


def gaussian_mixture_prior(p: torch.Tensor, rho: torch.Tensor, mus=(0.25, 0.75), weight: float = 0.5,
                           gamma: float = 0.005) -> torch.Tensor:
    """Eq. ``toping-prior``: the mean negative log-density of the edge scores ``p: [E]`` under
    ``w N(mu_1, r_1^2) + (1 - w) N(mu_2, r_2^2)``, ``r = softplus(rho) + 1e-3``, plus
    ``gamma (r_1^-2 + r_2^-2)`` against a collapse of the variances."""
    p = _check_scores(p)
    as_probability(weight, "weight")
    as_nonnegative(gamma, "gamma")
    r = nn.functional.softplus(rho) + 1e-3
    mu = torch.as_tensor(mus, dtype=p.dtype, device=p.device)
    logw = torch.log(torch.tensor([weight, 1 - weight], dtype=p.dtype, device=p.device))
    logpdf = -0.5 * ((p[:, None] - mu) / r) ** 2 - torch.log(r) - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(logw + logpdf, 1).mean() + gamma * (r ** -2).sum()


def bernoulli_info_loss(p: torch.Tensor, r: float) -> torch.Tensor:
    """GSAT's information loss, eq. ``toping-gsat``: mean KL(Bern(p_e) || Bern(r))."""
    as_probability(r, "r")
    p = _check_scores(p)
    eps = 1e-6
    return (p * torch.log(p / r + eps) + (1 - p) * torch.log((1 - p) / (1 - r) + eps)).mean()


def diagram_w1_lines(a: list[np.ndarray], b: list[np.ndarray], diag_a: list[np.ndarray],
                     diag_b: list[np.ndarray]) -> np.ndarray:
    """Exact W1 between pairs of diagrams whose points lie on one line (eq. ``toping-w1``).

    For pair ``g``: ``a[g], b[g]`` are the points' positions along the line (``L_inf`` distance
    ``|a_i - b_j|``), ``diag_a[g], diag_b[g]`` each point's ``L_inf`` distance to the diagonal.
    On a line an optimal partial matching never crosses, so a dynamic program over the sorted
    points is exact:
    ``D[i, j] = min(D[i-1, j] + diag_a[i], D[i, j-1] + diag_b[j], D[i-1, j-1] + |a_i - b_j|)``.
    Each row is solved at once with a running minimum, and all pairs at once (padded).
    """
    G = len(a)
    if not (G == len(b) == len(diag_a) == len(diag_b)):
        raise ValueError("b: expected as many diagrams as a, diag_a and diag_b")
    clean = {}
    for name, group in (("a", a), ("b", b), ("diag_a", diag_a), ("diag_b", diag_b)):
        clean[name] = []
        for g, v in enumerate(group):
            v = np.asarray(v, dtype=float)
            if v.ndim != 1:
                raise ValueError(f"{name}[{g}]: expected a 1-D array, got shape {v.shape}")
            if not np.isfinite(v).all():
                raise ValueError(f"{name}[{g}]: must be finite (no NaN or inf)")
            if name.startswith("diag") and (v < 0).any():
                raise ValueError(f"{name}[{g}]: a distance to the diagonal cannot be negative, got {v.min():.4g}")
            clean[name].append(v)
    for g in range(G):
        if len(clean["a"][g]) != len(clean["diag_a"][g]):
            raise ValueError(f"diag_a[{g}]: expected {len(clean['a'][g])} values like a[{g}], "
                             f"got {len(clean['diag_a'][g])}")
        if len(clean["b"][g]) != len(clean["diag_b"][g]):
            raise ValueError(f"diag_b[{g}]: expected {len(clean['b'][g])} values like b[{g}], "
                             f"got {len(clean['diag_b'][g])}")
    a, b, diag_a, diag_b = clean["a"], clean["b"], clean["diag_a"], clean["diag_b"]
    n = max([len(x) for x in a] + [1])
    m = max([len(x) for x in b] + [1])

    def pad(values, keys, width):
        pos, cost, real = np.zeros((G, width)), np.zeros((G, width)), np.zeros((G, width), bool)
        for g, (v, c) in enumerate(zip(values, keys)):
            o = np.argsort(v, kind="stable")
            pos[g, :len(v)], cost[g, :len(v)], real[g, :len(v)] = v[o], c[o], True
        return pos, cost, real

    A, DA, RA = pad(a, diag_a, n)
    B, DB, RB = pad(b, diag_b, m)
    cum_b = np.concatenate([np.zeros((G, 1)), np.cumsum(DB, 1)], 1)
    row = cum_b.copy()  # D[0, j]: every point of b to the diagonal
    for i in range(n):
        match = np.abs(A[:, i:i + 1] - B)
        match[~(RA[:, i:i + 1] & RB)] = np.inf  # a padding slot (cost 0) can only go to the diagonal
        best = np.empty_like(row)
        best[:, 0] = row[:, 0] + DA[:, i]
        best[:, 1:] = np.minimum(row[:, 1:] + DA[:, i:i + 1], row[:, :-1] + match)
        row = np.minimum.accumulate(best - cum_b, axis=1) + cum_b  # min_k<=j best[k] + sum db[k+1..j]
    return row[:, -1]


def diagram_w1_line(a, b, diag_a, diag_b) -> float:
    """:func:`diagram_w1_lines` of one pair of line diagrams."""
    return float(diagram_w1_lines([np.asarray(a, float)], [np.asarray(b, float)],
                                  [np.asarray(diag_a, float)], [np.asarray(diag_b, float)])[0])


def _as_points(P, name: str) -> np.ndarray:
    P = np.asarray(P.detach().cpu().numpy() if isinstance(P, torch.Tensor) else P, dtype=float)
    P = P.reshape(0, 2) if P.size == 0 else P
    if P.ndim != 2 or P.shape[1] != 2:
        raise ValueError(f"{name}: expected points of shape [k, 2] (birth, death), got {P.shape}")
    if not np.isfinite(P).all():
        raise ValueError(f"{name}: must be finite (no NaN or inf)")
    if (P[:, 1] < P[:, 0]).any():
        raise ValueError(f"{name}: a point dies before it is born (death < birth)")
    return P


def diagram_w1(P, Q) -> float:
    """Exact 1-Wasserstein distance between two persistence diagrams ``P: [n, 2]``, ``Q: [m, 2]``
    with the ``L_inf`` ground metric and the diagonal (eq. ``toping-w1``).

    A partial matching: a point is matched to a point of the other diagram at their ``L_inf``
    distance, or to the diagonal at ``(death - birth) / 2``. Solved as an assignment problem on
    the usual ``(n + m) x (n + m)`` matrix, so it holds for points anywhere (not only on a line).
    """
    from scipy.optimize import linear_sum_assignment

    P, Q = _as_points(P, "P"), _as_points(Q, "Q")
    P = P[P[:, 1] > P[:, 0]]  # points on the diagonal cost nothing either way
    Q = Q[Q[:, 1] > Q[:, 0]]
    n, m = len(P), len(Q)
    dp, dq = (P[:, 1] - P[:, 0]) / 2, (Q[:, 1] - Q[:, 0]) / 2
    if n == 0 or m == 0:
        return float(dp.sum() + dq.sum())
    big = 1e6 + 10 * (dp.sum() + dq.sum() + np.abs(P).max() + np.abs(Q).max())
    C = np.zeros((n + m, n + m))
    C[:n, :m] = np.abs(P[:, None, :] - Q[None, :, :]).max(-1)
    C[:n, m:] = np.where(np.eye(n, dtype=bool), dp[:, None], big)
    C[n:, :m] = np.where(np.eye(m, dtype=bool), dq[None, :], big)
    r, c = linear_sum_assignment(C)
    return float(C[r, c].sum())
