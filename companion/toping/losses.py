"""TopInG's losses: rational-hat vectorisation, topological discrepancy, the two-Gaussian prior,
GSAT's Bernoulli information loss, and the exact 1-Wasserstein distance of our line diagrams."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from companion.toping.persistence import Diagram

__all__ = ["RationalHat", "topo_discrepancy", "gaussian_mixture_prior", "bernoulli_info_loss",
           "diagram_w1_line", "diagram_w1_lines"]


class RationalHat(nn.Module):
    """Learnable rational-hat structure elements (Hofer et al.), eq. ``toping-hat``.

    ``n_elements`` elements per homology dimension, each a centre ``c`` in R^2 and a radius ``r``;
    a diagram of a batch becomes ``[n_segments, 2 * n_elements]`` (H0 elements, then H1).
    """

    def __init__(self, n_elements: int = 8, init_range: tuple[float, float] = (0.0, 0.5),
                 lipschitz: float = 2.0, seed: int = 0):
        super().__init__()
        if n_elements < 1:
            raise ValueError(f"n_elements: expected an integer >= 1, got {n_elements!r}")
        gen = torch.Generator().manual_seed(seed)
        lo, hi = init_range
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
    if p.ndim != 1 or p.numel() == 0:
        raise ValueError(f"p: expected a non-empty 1-D tensor of scores, got shape {tuple(p.shape)}")
    if not 0 < weight < 1:
        raise ValueError(f"weight: expected a number in (0, 1), got {weight!r}")
    if gamma < 0:
        raise ValueError(f"gamma: expected a number >= 0, got {gamma!r}")
    r = nn.functional.softplus(rho) + 1e-3
    mu = torch.as_tensor(mus, dtype=p.dtype, device=p.device)
    logw = torch.log(torch.tensor([weight, 1 - weight], dtype=p.dtype, device=p.device))
    logpdf = -0.5 * ((p[:, None] - mu) / r) ** 2 - torch.log(r) - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(logw + logpdf, 1).mean() + gamma * (r ** -2).sum()


def bernoulli_info_loss(p: torch.Tensor, r: float) -> torch.Tensor:
    """GSAT's information loss, eq. ``toping-gsat``: mean KL(Bern(p_e) || Bern(r))."""
    if not 0 < r < 1:
        raise ValueError(f"r: expected a number in (0, 1), got {r!r}")
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
    n = max([len(x) for x in a] + [1])
    m = max([len(x) for x in b] + [1])

    def pad(values, keys, width):
        pos, cost = np.full((G, width), np.inf), np.zeros((G, width))
        for g, (v, c) in enumerate(zip(values, keys)):
            o = np.argsort(v, kind="stable")
            pos[g, :len(v)], cost[g, :len(v)] = np.asarray(v)[o], np.asarray(c)[o]
        return pos, cost

    A, DA = pad(a, diag_a, n)
    B, DB = pad(b, diag_b, m)
    cum_b = np.concatenate([np.zeros((G, 1)), np.cumsum(DB, 1)], 1)
    row = cum_b.copy()  # D[0, j]: every point of b to the diagonal
    for i in range(n):
        with np.errstate(invalid="ignore"):  # inf - inf: a padded point
            match = np.abs(A[:, i:i + 1] - B)
        match[np.isnan(match)] = np.inf  # padded points can only go to the diagonal
        best = np.empty_like(row)
        best[:, 0] = row[:, 0] + DA[:, i]
        best[:, 1:] = np.minimum(row[:, 1:] + DA[:, i:i + 1], row[:, :-1] + match)
        row = np.minimum.accumulate(best - cum_b, axis=1) + cum_b  # min_k<=j best[k] + sum db[k+1..j]
    return row[:, -1]


def diagram_w1_line(a, b, diag_a, diag_b) -> float:
    """:func:`diagram_w1_lines` of one pair of line diagrams."""
    return float(diagram_w1_lines([np.asarray(a, float)], [np.asarray(b, float)],
                                  [np.asarray(diag_a, float)], [np.asarray(diag_b, float)])[0])
