"""Scores and measurements: ROC-AUC, the anomaly scores, dense edge probabilities for plots,
the error of fitted edge probabilities, spectra, and sampling a graph from a fitted prior."""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from scipy.stats import rankdata

from companion.validation import as_1d_float_array, as_choice

from .core import lorentz_diag, project_cone, star_loglik
from .data import _edges_from_upper, to_dense

__all__ = ["roc_auc", "roc_curve", "anomaly_scores", "prob_matrix", "prob_error", "spectral_ratio",
           "edge_density", "sample_graph"]


def roc_auc(pos_scores, neg_scores) -> float:
    """P(score of a positive > score of a negative), ties counted half (the rank form of the ROC-AUC)."""
    pos = as_1d_float_array(pos_scores, "pos_scores", allow_empty=True)
    neg = as_1d_float_array(neg_scores, "neg_scores", allow_empty=True)
    if pos.size == 0:
        raise ValueError("pos_scores: the AUC needs at least one positive")
    if neg.size == 0:
        raise ValueError("neg_scores: the AUC needs at least one negative")
    ranks = rankdata(np.r_[pos, neg])
    return float((ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def roc_curve(pos_scores, neg_scores) -> tuple[np.ndarray, np.ndarray]:
    """False- and true-positive rates over all thresholds (for plots)."""
    pos, neg = np.asarray(pos_scores, float), np.asarray(neg_scores, float)
    thr = np.r_[np.inf, np.unique(np.r_[pos, neg])[::-1]]
    return np.array([(neg >= t).mean() for t in thr]), np.array([(pos >= t).mean() for t in thr])


def anomaly_scores(result, kind: Literal["S", "P", "PS"] = "S") -> np.ndarray:
    """Normality scores of each node (low = anomalous): (S) the node's share of the log-likelihood,
    (P) the log-prior of its code (and attributes), (PS) their sum."""
    as_choice(kind, "kind", ("S", "P", "PS"))
    with torch.no_grad():
        s = star_loglik(result.F, result.edge_index, result.cfg.lorentz).numpy()
        if kind == "S":
            return s
        if result.prior is None:
            raise ValueError(f"kind: score {kind!r} needs a model with a prior (PClam or PieClam)")
        p = result.prior.log_prob(result.prior_input()).numpy()
    return p if kind == "P" else p + s


def prob_matrix(F: torch.Tensor, lorentz: bool) -> np.ndarray:
    """The dense N x N matrix of decoded edge probabilities (zero diagonal), for plots and errors."""
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    P = -torch.expm1(-((F * L) @ F.T)).numpy()
    np.fill_diagonal(P, 0.0)
    return P


def prob_error(P_hat: np.ndarray, P_true: np.ndarray) -> float:
    """Mean |P_hat - P_true| over the dyads n < m."""
    r, c = np.triu_indices(P_true.shape[0], k=1)
    return float(np.abs(P_hat[r, c] - P_true[r, c]).mean())


def spectral_ratio(edge_index, num_nodes: int) -> float:
    """lambda_min / lambda_max of the adjacency: -1 for a bipartite graph, near 0 for assortative ones."""
    ev = np.linalg.eigvalsh(to_dense(edge_index, num_nodes).numpy())
    return float(ev[0] / ev[-1])


def edge_density(edge_index, num_nodes: int) -> float:
    return float(edge_index.shape[1] / (num_nodes * (num_nodes - 1)))


def sample_graph(result, num_nodes: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A new graph from a fitted PClam/PieClam: codes from the prior (projected onto the cone),
    then independent edges with the decoded probabilities. Returns ``(edge_index, codes)``."""
    if result.prior is None:
        raise ValueError("result: sampling a new graph needs a fitted prior (PClam or PieClam)")
    gen = torch.Generator().manual_seed(seed)
    x = result.prior.sample(num_nodes, generator=gen)
    F = project_cone(x[:, : result.cfg.dim], result.cfg.lorentz)
    P = prob_matrix(F, result.cfg.lorentz)
    rng = np.random.default_rng(seed)
    r, c = np.triu_indices(num_nodes, k=1)
    hit = rng.random(r.size) < P[r, c]
    return _edges_from_upper(r[hit], c[hit]), F
