"""The Clam decoders and their log-likelihood, in O(|E|).

A graph is an ``edge_index``: a ``LongTensor`` of shape ``(2, 2E)`` that lists every undirected
edge in both directions (the PyG convention), without self-loops. Codes are ``F`` of shape
``(N, D)``. Two decoders share all the code:

* BigClam (``lorentz=False``): ``x_nm = f_n . f_m`` with ``F >= 0``;
* IeClam (``lorentz=True``): ``D = 2C``, codes laid out ``[t_1..t_C, s_1..s_C]`` and
  ``x_nm = f_n^T L f_m = t_n . t_m - s_n . s_m`` with ``L = diag(1_C, -1_C)``, on the pairwise
  cone ``|s_c| <= t_c`` (eq. (pieclam-cone)).

In both, ``P(n ~ m) = 1 - exp(-x_nm)`` (eq. (pieclam-decoder)). Equation labels are those of the
chapter *PieClam* of the book.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "X_MIN",
    "as_edge_index",
    "check_codes",
    "lorentz_diag",
    "project_cone",
    "edge_logits",
    "edge_probs",
    "clam_loglik",
    "clam_grad",
    "star_loglik",
    "dense_loglik",
]

X_MIN = 1e-3  # edges with x_nm below this are clamped: log(1 - e^{-x}) and 1/(1 - e^{-x}) blow up at 0


# --- checks -------------------------------------------------------------------------------


def as_edge_index(edge_index, num_nodes: int, *, name: str = "edge_index", allow_empty: bool = True) -> torch.Tensor:
    """Return ``edge_index`` as a ``(2, 2E)`` int64 tensor of an undirected simple graph, or raise.

    Refused, with a ``ValueError`` naming ``name``: a wrong shape, indices outside ``[0, num_nodes)``,
    self-loops, a directed graph (an edge without its reverse), repeated edges, and (unless
    ``allow_empty``) a graph without edges.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < 1:
        raise ValueError(f"num_nodes: expected an integer >= 1, got {num_nodes!r}")
    ei = torch.as_tensor(np.asarray(edge_index) if not torch.is_tensor(edge_index) else edge_index)
    if ei.dtype.is_floating_point or ei.dtype == torch.bool:
        raise ValueError(f"{name}: expected integer node indices, got dtype {ei.dtype}")
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"{name}: expected shape (2, 2E) (each edge in both directions), got {tuple(ei.shape)}")
    ei = ei.long()
    if ei.shape[1] == 0:
        if not allow_empty:
            raise ValueError(f"{name}: the graph has no edges; there is nothing to fit")
        return ei
    if int(ei.min()) < 0 or int(ei.max()) >= num_nodes:
        raise ValueError(f"{name}: node indices must lie in [0, {num_nodes}), got {int(ei.min())}..{int(ei.max())}")
    loops = ei[0] == ei[1]
    if bool(loops.any()):
        n = int(ei[0, loops][0])
        raise ValueError(f"{name}: self-loops are not allowed (node {n} is joined to itself); remove them")
    key = ei[0] * num_nodes + ei[1]
    if torch.unique(key).numel() != key.numel():
        raise ValueError(f"{name}: an edge is listed twice in the same direction; give each direction once")
    rev = ei[1] * num_nodes + ei[0]
    if not bool(torch.isin(rev, key).all()):
        i = int(torch.nonzero(~torch.isin(rev, key))[0])
        raise ValueError(f"{name}: the graph must be undirected, but edge ({int(ei[0, i])}, {int(ei[1, i])}) has "
                         "no reverse; list every edge in both directions")
    return ei


def lorentz_diag(dim: int, lorentz: bool, *, dtype=torch.float64) -> torch.Tensor:
    """The diagonal of L: all ones (BigClam) or ``(1_C, -1_C)`` with ``dim = 2C`` (IeClam)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim: expected an integer >= 1, got {dim!r}")
    if not lorentz:
        return torch.ones(dim, dtype=dtype)
    if dim % 2:
        raise ValueError(f"dim: IeClam codes hold C inclusive and C exclusive entries, so dim must be even, got {dim}")
    c = dim // 2
    return torch.cat([torch.ones(c, dtype=dtype), -torch.ones(c, dtype=dtype)])


def check_codes(F, lorentz: bool, *, name: str = "F", tol: float = 1e-9) -> torch.Tensor:
    """Return ``F`` as a float tensor of shape ``(N, D)`` that lies in the feasible cone, or raise."""
    F = torch.as_tensor(F)
    if not F.dtype.is_floating_point:
        F = F.double()
    if F.ndim != 2 or F.shape[0] < 1 or F.shape[1] < 1:
        raise ValueError(f"{name}: expected codes of shape (N, D), got {tuple(F.shape)}")
    if not bool(torch.isfinite(F).all()):
        raise ValueError(f"{name}: codes must be finite (nan or inf found)")
    lorentz_diag(F.shape[1], lorentz)  # odd D with lorentz=True
    if not lorentz:
        if bool((F < -tol).any()):
            raise ValueError(f"{name}: BigClam codes must be non-negative, got {float(F.min()):.3g}; "
                             "project with project_cone(F, lorentz=False)")
    else:
        t, s = F.chunk(2, dim=1)
        gap = (s.abs() - t).max()
        if float(gap) > tol:
            raise ValueError(f"{name}: IeClam codes must satisfy |s_c| <= t_c (the pairwise cone), violated by "
                             f"{float(gap):.3g}; project with project_cone(F, lorentz=True)")
    return F


# --- the feasible cone ---------------------------------------------------------------------


def project_cone(F: torch.Tensor, lorentz: bool) -> torch.Tensor:
    """Euclidean projection onto the feasible cone (eq. (pieclam-cone)).

    BigClam: ReLU. IeClam: for each pair ``(t_c, s_c)`` rotate by 45 degrees to ``u = t - s``,
    ``v = t + s``, clip both at 0, rotate back. The cone ``|s| <= t`` is the quarter-plane
    ``u, v >= 0``, and the rotation is an isometry up to a common factor, so this is the nearest point.
    """
    if not torch.is_tensor(F) or F.ndim != 2:
        raise ValueError(f"F: expected a tensor of shape (N, D), got {type(F).__name__}")
    if not lorentz:
        return F.clamp_min(0)
    lorentz_diag(F.shape[1], True)
    t, s = F.chunk(2, dim=1)
    u, v = (t - s).clamp_min(0), (t + s).clamp_min(0)
    return torch.cat([(u + v) / 2, (v - u) / 2], dim=1)


# --- the decoder ------------------------------------------------------------------------------


def edge_logits(F: torch.Tensor, pairs: torch.Tensor, lorentz: bool) -> torch.Tensor:
    """``x_nm = f_n^T L f_m`` for each column ``(n, m)`` of ``pairs`` (shape ``(2, P)``)."""
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    return (F[pairs[0]] * L * F[pairs[1]]).sum(-1)


def edge_probs(F: torch.Tensor, pairs: torch.Tensor, lorentz: bool) -> torch.Tensor:
    """``P(n ~ m) = 1 - exp(-x_nm)`` (eq. (pieclam-decoder)) for each column of ``pairs``."""
    return -torch.expm1(-edge_logits(F, pairs, lorentz))


def _clamped(x: torch.Tensor, x_min: float) -> torch.Tensor:
    """``max(x, x_min)`` in value, with the derivative of ``x`` (a straight-through clamp).

    A plain ``clamp`` would zero the gradient of an edge whose logit fell below ``x_min``, and
    nothing would pull its two ends back together; here the edge keeps pulling with the
    (finite) coefficient ``1 / (1 - e^{-x_min})``.
    """
    return x + (x.clamp_min(x_min) - x).detach()


def clam_loglik(F: torch.Tensor, edge_index: torch.Tensor, lorentz: bool, omitted: torch.Tensor | None = None,
                x_min: float = X_MIN) -> torch.Tensor:
    """The Clam log-likelihood of a graph, eq. (pieclam-loglik-fast), in O(|E| D + N D).

    ``edge_index`` lists each edge in both directions (each counted one half). ``omitted``
    (shape ``(2, Q)``, each dyad once) are dyads held out for link prediction: they count neither
    as edges nor as non-edges, so their non-edge penalty ``x_nm``, which the ``-S^T L S`` term
    charges to every pair, is added back (eq. (pieclam-omitted)). Edge logits are clamped at ``x_min``.
    """
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    x = _clamped(edge_logits(F, edge_index, lorentz), x_min)
    edge_term = (x + torch.log(-torch.expm1(-x))).sum()  # log(e^x - 1), stable for large and small x
    S = F.sum(0)
    ll = 0.5 * (edge_term - (S * L * S).sum() + (F * L * F).sum())
    if omitted is not None and omitted.shape[1]:
        ll = ll + edge_logits(F, omitted, lorentz).sum()
    return ll


def clam_grad(F: torch.Tensor, edge_index: torch.Tensor, lorentz: bool, omitted: torch.Tensor | None = None,
              x_min: float = X_MIN) -> torch.Tensor:
    """The analytic gradient of :func:`clam_loglik`, eq. (pieclam-grad): one message per edge.

    ``grad_n = L ( sum_{m ~ n} f_m / (1 - exp(-x_nm)) - sum_m f_m + f_n )`` (plus ``L f_m`` for
    each omitted dyad ``(n, m)``).
    """
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    src, dst = edge_index
    x = edge_logits(F, edge_index, lorentz).clamp_min(x_min)
    coef = 1.0 / -torch.expm1(-x)  # d/dx log(e^x - 1)
    msg = torch.zeros_like(F).index_add_(0, src, coef[:, None] * F[dst])
    if omitted is not None and omitted.shape[1]:
        msg = msg.index_add_(0, omitted[0], F[omitted[1]]).index_add_(0, omitted[1], F[omitted[0]])
    return (msg - F.sum(0) + F) * L


def star_loglik(F: torch.Tensor, edge_index: torch.Tensor, lorentz: bool, x_min: float = X_MIN) -> torch.Tensor:
    """Each node's share of eq. (pieclam-loglik-fast): its edges and its non-edges, halved.

    ``star_n = 1/2 ( sum_{m ~ n} log(e^{x_nm} - 1) - f_n^T L S + f_n^T L f_n )``; the shares add up to
    the log-likelihood. Low values flag nodes the model explains badly (the (S) anomaly score).
    """
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    x = edge_logits(F, edge_index, lorentz).clamp_min(x_min)
    per_edge = x + torch.log(-torch.expm1(-x))
    edges = torch.zeros(F.shape[0], dtype=F.dtype).index_add_(0, edge_index[0], per_edge)
    return 0.5 * (edges - (F * L * F.sum(0)).sum(1) + (F * L * F).sum(1))


def dense_loglik(F: torch.Tensor, A: torch.Tensor, lorentz: bool, known: torch.Tensor | None = None) -> torch.Tensor:
    """The definition, eq. (pieclam-loglik), over all pairs n < m: O(N^2), for tests only.

    ``A`` is the dense 0/1 adjacency; ``known`` (optional, boolean N x N) masks out omitted dyads.
    """
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    X = (F * L) @ F.T
    upper = torch.triu(torch.ones_like(A, dtype=torch.bool), diagonal=1)
    if known is not None:
        upper = upper & known
    ll = torch.where(A > 0, torch.log(-torch.expm1(-X.clamp_min(1e-300))), -X)
    return ll[upper].sum()
