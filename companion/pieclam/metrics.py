"""Scores and measurements: ROC-AUC, the anomaly scores, dense edge probabilities for plots,
the error of fitted edge probabilities, spectra, sampling graphs from codes or from a fitted
prior, where sampled codes fall between the two sides of a bipartite graph (the "bridge"), and
the Lorentz boosts that relate two sets of IeClam codes decoding the same graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.stats import rankdata

from companion.validation import as_1d_float_array, as_choice, as_float_array, as_instance, as_positive_int

from .core import _star, as_edge_index, check_codes, lorentz_diag, project_cone
from .data import _edges_from_upper, to_dense
from .prior import GaussianKDE

__all__ = ["mean_interval", "roc_auc", "roc_curve", "anomaly_scores", "prob_matrix", "prob_error", "spectral_ratio",
           "edge_density", "sample_edges", "sample_graph", "side_contrast", "bridge_mass", "lorentz_boost",
           "rapidity", "LorentzMap"]


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
    pos, neg = as_1d_float_array(pos_scores, "pos_scores"), as_1d_float_array(neg_scores, "neg_scores")
    thr = np.r_[np.inf, np.unique(np.r_[pos, neg])[::-1]]
    return np.array([(neg >= t).mean() for t in thr]), np.array([(pos >= t).mean() for t in thr])


def anomaly_scores(result, kind: Literal["S", "P", "PS"] = "S", density: Literal["flow", "kde"] = "flow"
                   ) -> np.ndarray:
    """Normality scores of each node (low = anomalous): (S) the node's share of the log-likelihood,
    (P) the log-density of its code (and attributes), (PS) their sum.

    ``density="flow"``: the fitted prior; ``"kde"``: a Gaussian KDE of the same codes (and
    attributes), each node scored without its own kernel, the non-flow baseline.
    """
    as_choice(kind, "kind", ("S", "P", "PS"))
    as_choice(density, "density", ("flow", "kde"))
    with torch.no_grad():
        s = _star(result.F, result.edge_index, result.cfg.lorentz).cpu().numpy()
        if kind == "S":
            return s
        if density == "kde":
            p = GaussianKDE(result.prior_input()).loo_log_prob().cpu().numpy()
        elif result.prior is None:
            raise ValueError(f"kind: score {kind!r} from the flow needs a model with a prior (PClam or PieClam)")
        else:
            p = result.prior.log_prob(result.prior_input()).cpu().numpy()
    return p if kind == "P" else p + s


def prob_matrix(F: torch.Tensor, lorentz: bool) -> np.ndarray:
    """The dense N x N matrix of decoded edge probabilities (zero diagonal), for plots and errors.

    The Lorentz form is the inclusive part's Gram matrix minus the exclusive part's, two
    products subtracted, not one matrix product with signed weights: a BLAS that fuses
    multiply and add would otherwise leave the rounding error of ``a * a`` where two equal
    terms cancel, and a bipartite pair would decode to a probability of 5e-17 instead of 0.
    """
    F = check_codes(F, lorentz, tol=np.inf)
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    inc, exc = F[:, L > 0], F[:, L < 0]
    form = inc @ inc.T - exc @ exc.T  # BigClam: no exclusive part, an N x N block of zeros
    P = -torch.expm1(-form).numpy()
    np.fill_diagonal(P, 0.0)
    return P


def prob_error(P_hat: np.ndarray, P_true: np.ndarray) -> float:
    """Mean |P_hat - P_true| over the dyads n < m."""
    P_true = as_float_array(P_true, "P_true", low=0, high=1)
    P_hat = as_float_array(P_hat, "P_hat", low=0, high=1)
    if P_true.ndim != 2 or P_true.shape[0] != P_true.shape[1] or P_true.shape[0] < 2:
        raise ValueError(f"P_true: expected a square N x N matrix (N >= 2), got {P_true.shape}")
    if P_hat.shape != P_true.shape:
        raise ValueError(f"P_hat: expected the shape of P_true {P_true.shape}, got {P_hat.shape}")
    r, c = np.triu_indices(P_true.shape[0], k=1)
    return float(np.abs(P_hat[r, c] - P_true[r, c]).mean())


def spectral_ratio(edge_index, num_nodes: int) -> float:
    """lambda_min / lambda_max of the adjacency: -1 for a bipartite graph, near 0 for assortative ones."""
    edge_index = as_edge_index(edge_index, num_nodes, allow_empty=False)
    ev = np.linalg.eigvalsh(to_dense(edge_index, num_nodes).numpy())
    return float(ev[0] / ev[-1])


def edge_density(edge_index, num_nodes: int) -> float:
    """Edges over possible (directed) pairs: |E| / (N (N - 1)), each edge counted in both directions."""
    as_positive_int(num_nodes, "num_nodes", minimum=2)
    edge_index = as_edge_index(edge_index, num_nodes)
    return float(edge_index.shape[1] / (num_nodes * (num_nodes - 1)))


def sample_edges(F: torch.Tensor, lorentz: bool, seed: int = 0) -> torch.Tensor:
    """A graph drawn from codes ``F``: each dyad n < m is an edge with its decoded probability."""
    F = check_codes(F, lorentz)
    P = prob_matrix(F, lorentz)
    rng = np.random.default_rng(seed)
    r, c = np.triu_indices(F.shape[0], k=1)
    hit = rng.random(r.size) < P[r, c]
    return _edges_from_upper(r[hit], c[hit])


def sample_graph(result, num_nodes: int, seed: int = 0, density=None) -> tuple[torch.Tensor, torch.Tensor]:
    """A new graph from a fitted PClam/PieClam: ``num_nodes`` codes drawn from its prior (or from
    ``density``, anything with ``sample(n, generator)``, e.g. a :class:`GaussianKDE` of the codes),
    projected onto the cone, then independent edges. Returns ``(edge_index, codes)``."""
    as_positive_int(num_nodes, "num_nodes")
    from .fit import ClamResult

    as_instance(result, "result", ClamResult)
    density = result.prior if density is None else density
    if density is None:
        raise ValueError("result: sampling a new graph needs a fitted prior (PClam or PieClam) or a density")
    x = density.sample(num_nodes, generator=torch.Generator().manual_seed(seed))
    F = project_cone(x[:, : result.cfg.dim].cpu(), result.cfg.lorentz)
    return sample_edges(F, result.cfg.lorentz, seed), F


def side_contrast(codes: torch.Tensor, ref: torch.Tensor, side, lorentz: bool) -> np.ndarray:
    """For each code, ``|p_0 - p_1| / (p_0 + p_1)``, where ``p_k`` is its mean decoded edge
    probability to the reference codes of side ``k`` (a two-sided graph, ``side`` in {0, 1}).

    1 for a code that connects to one side only, 0 for one that connects to both alike.
    """
    codes, ref = check_codes(codes, lorentz, name="codes", tol=np.inf), check_codes(ref, lorentz, name="ref", tol=np.inf)
    side = np.asarray(side)
    if side.shape != (ref.shape[0],) or not set(np.unique(side)) <= {0, 1}:
        raise ValueError(f"side: expected a 0/1 label per reference code ({ref.shape[0]}), got shape {side.shape}")
    L = lorentz_diag(ref.shape[1], lorentz, dtype=ref.dtype)
    P = -torch.expm1(-((codes.to(ref.dtype) * L) @ ref.T)).numpy()
    p0, p1 = P[:, side == 0].mean(1), P[:, side == 1].mean(1)
    return np.abs(p0 - p1) / np.maximum(p0 + p1, 1e-12)


def bridge_mass(codes: torch.Tensor, ref: torch.Tensor, side, lorentz: bool, threshold: float) -> float:
    """The fraction of ``codes`` on the bridge between the two sides: side contrast below ``threshold``."""
    return float(np.mean(side_contrast(codes, ref, side, lorentz) < threshold))


def lorentz_boost(F: torch.Tensor, a, flip=False) -> torch.Tensor:
    """Boost every pair ``c`` of IeClam codes by rapidity ``a[c]``, after reflecting ``s_c -> -s_c``
    where ``flip[c]``: ``(t, s) -> (t cosh a + s sinh a, t sinh a + s cosh a)``.

    The boosts and reflections keep every logit ``t.t' - s.s'`` (so every edge probability) and
    map the cone onto itself; they have ``|det| = 1``, so a density moved by one keeps its values.
    """
    t, s = check_codes(F, True, tol=np.inf).chunk(2, dim=1)
    C = t.shape[1]
    as_float_array(a, "a")
    a = torch.as_tensor(np.broadcast_to(np.asarray(a, dtype=float), (C,)).copy(), dtype=F.dtype)
    sign = torch.as_tensor(np.where(np.broadcast_to(flip, (C,)), -1.0, 1.0), dtype=F.dtype)
    s = s * sign
    return torch.cat([t * torch.cosh(a) + s * torch.sinh(a), t * torch.sinh(a) + s * torch.cosh(a)], dim=1)


def rapidity(F: torch.Tensor) -> torch.Tensor:
    """``atanh(s_c / t_c)`` of every pair: a boost by ``a`` adds ``a``, a reflection flips the sign.

    Pairs on the cone's edge (``|s| = t``) or at 0 give +-inf or nan; :class:`LorentzMap` skips them.
    """
    t, s = check_codes(F, True, tol=np.inf).chunk(2, dim=1)
    return torch.atanh(s / t)


@dataclass(frozen=True)
class LorentzMap:
    """A reflection and boost per pair (:func:`lorentz_boost`); :meth:`fit` finds the one that
    carries ``src`` onto ``dst`` node by node, e.g. true codes onto fitted ones.

    A boost shifts every rapidity by the same ``a``, so ``a`` is the median shift of the nodes'
    rapidities (robust to badly fitted nodes), and the reflection is the one under which the
    shifts agree best (smaller median absolute deviation).
    """

    a: tuple[float, ...]
    flip: tuple[bool, ...]

    def __post_init__(self):
        a = as_float_array(self.a, "a")
        if a.ndim != 1 or np.shape(self.flip) != a.shape:
            raise ValueError(f"flip: expected one reflection per pair, {a.size}, got {self.flip!r}")

    def __call__(self, F: torch.Tensor) -> torch.Tensor:
        return lorentz_boost(F, self.a, self.flip)

    def inverse(self) -> LorentzMap:
        """The map back: undoing "reflect, then boost by a" is "boost by -a, then reflect", which
        is "reflect, then boost by a" again where the pair was reflected (R B_a R = B_{-a})."""
        return LorentzMap(tuple(a if f else -a for a, f in zip(self.a, self.flip)), self.flip)

    @classmethod
    def fit(cls, src: torch.Tensor, dst: torch.Tensor) -> LorentzMap:
        if src.shape != dst.shape:
            raise ValueError(f"dst: expected the shape of src {tuple(src.shape)}, got {tuple(dst.shape)}")
        check_codes(src, True, name="src", tol=np.inf)
        check_codes(dst, True, name="dst", tol=np.inf)
        r_src, r_dst = rapidity(src.detach()), rapidity(dst.detach())
        a, flip = [], []
        for c in range(r_src.shape[1]):
            ok = torch.isfinite(r_src[:, c]) & torch.isfinite(r_dst[:, c])
            if int(ok.sum()) == 0:
                raise ValueError(f"src: pair {c} has no code strictly inside the cone in both src and dst")
            fits = []
            for f in (False, True):
                shift = r_dst[ok, c] - (-1 if f else 1) * r_src[ok, c]
                centre = shift.median()
                fits.append((float((shift - centre).abs().median()), f, float(centre)))
            _, f, centre = min(fits)
            a.append(centre)
            flip.append(f)
        return cls(tuple(a), tuple(flip))


def mean_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of ``values`` (one number per split, at least 2) and its
    two-sided Student-t interval at ``level``. Paired comparisons pass the per-split differences."""
    from scipy import stats

    from companion.validation import as_1d_float_array, as_probability

    x = as_1d_float_array(values, "values")
    if x.size < 2:
        raise ValueError(f"values: an interval needs at least 2 values (one per split), got {x.size}")
    level = as_probability(level, "level")
    mean, se = float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size))
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1)) * se
    return mean, mean - half, mean + half

