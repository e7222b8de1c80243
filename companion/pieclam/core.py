"""The Clam decoders and their log-likelihood, in O(|E|).

A graph is an ``edge_index``: a ``LongTensor`` of shape ``(2, 2E)`` that lists every undirected
edge in both directions (the PyG convention), without self-loops. An edge list that gives each
edge once (the networkx convention, ``list(G.edges())``) is refused with a ``ValueError`` that
says how to fix it, never silently read as half a graph. Codes are ``F`` of shape ``(N, D)``.
Two decoders share all the code:

* BigClam (``lorentz=False``): ``x_nm = f_n . f_m`` with ``F >= 0``;
* IeClam (``lorentz=True``): ``D = 2C``, codes laid out ``[t_1..t_C, s_1..s_C]`` and
  ``x_nm = f_n^T L f_m = t_n . t_m - s_n . s_m`` with ``L = diag(1_C, -1_C)``, on the pairwise
  cone ``|s_c| <= t_c`` (eq. (pieclam-cone)).

In both, ``P(n ~ m) = 1 - exp(-x_nm)`` (eq. (pieclam-decoder)). Several disjoint graphs can be
fitted at once: ``batch`` (length N) gives each node's graph, as in PyG, and the all-pairs term
then runs over the pairs of each graph only. Equation labels are those of the chapter *PieClam*.

The public functions check their arguments; the ``_``-prefixed kernels they call are the ones
the fitting loop of :mod:`.fit` runs at every step, on arguments it checked once.
"""

from __future__ import annotations


import torch

from ..validation import as_finite_tensor, as_index_tensor, as_positive, as_positive_int

__all__ = [
    "X_MIN",
    "as_edge_index",
    "as_omitted",
    "as_batch",
    "check_codes",
    "check_pairs",
    "lorentz_diag",
    "project_cone",
    "edge_logits",
    "edge_probs",
    "clam_loglik",
    "clam_grad",
    "star_loglik",
    "dense_loglik",
]

X_MIN = 1e-3  # edge logits below this are clamped: log(1 - e^{-x}) and 1/(1 - e^{-x}) blow up at 0


# --- checks -------------------------------------------------------------------------------


def as_edge_index(edge_index, num_nodes: int, *, name: str = "edge_index", allow_empty: bool = True) -> torch.Tensor:
    """Return ``edge_index`` as a ``(2, 2E)`` int64 tensor of an undirected simple graph, or raise.

    Refused, with a ``ValueError`` naming ``name``: a wrong shape, indices outside ``[0, num_nodes)``,
    self-loops, repeated edges, an edge list that gives each edge once (the networkx convention)
    or some edges without their reverse, and (unless ``allow_empty``) a graph without edges.
    """
    num_nodes = as_positive_int(num_nodes, "num_nodes")
    ei = as_index_tensor(edge_index, name, ndim=2, empty=True)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"{name}: expected shape (2, 2E) (each edge in both directions), got {tuple(ei.shape)}")
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
    has_rev = torch.isin(ei[1] * num_nodes + ei[0], key)
    if not bool(has_rev.any()):
        raise ValueError(f"{name}: each of the {ei.shape[1]} edges is listed once (the networkx convention), but "
                         "the Clam functions expect both directions, each counted one half; pass "
                         f"torch.cat([{name}, {name}.flip(0)], dim=1)")
    if not bool(has_rev.all()):
        i = int(torch.nonzero(~has_rev)[0])
        raise ValueError(f"{name}: the graph must be undirected, but edge ({int(ei[0, i])}, {int(ei[1, i])}) has "
                         "no reverse; list every edge in both directions")
    return ei


def as_omitted(omitted, num_nodes: int, edge_index: torch.Tensor | None = None) -> torch.Tensor | None:
    """Return held-out dyads as a ``(2, Q)`` int64 tensor, each dyad once, or raise naming ``omitted``.

    Refused: a wrong shape, indices outside ``[0, num_nodes)``, a pair ``(n, n)``, a dyad listed
    twice (in the same or the opposite direction: it would be added back twice), and a dyad that
    is also an edge of ``edge_index`` (remove held-out edges from the graph first).
    """
    if omitted is None:
        return None
    num_nodes = as_positive_int(num_nodes, "num_nodes")
    om = as_index_tensor(omitted, "omitted", ndim=2, empty=True)
    if om.ndim != 2 or om.shape[0] != 2:
        raise ValueError(f"omitted: expected held-out dyads of shape (2, Q), each dyad once, got {tuple(om.shape)}")
    if om.shape[1] == 0:
        return om
    if int(om.min()) < 0 or int(om.max()) >= num_nodes:
        raise ValueError(f"omitted: node indices must lie in [0, {num_nodes}), got {int(om.min())}..{int(om.max())}")
    if bool((om[0] == om[1]).any()):
        raise ValueError("omitted: a dyad (n, n) joins a node to itself; the model has no self-dyads")
    lo, hi = torch.minimum(om[0], om[1]), torch.maximum(om[0], om[1])
    key = lo * num_nodes + hi
    uniq, counts = torch.unique(key, return_counts=True)
    if bool((counts > 1).any()):
        k = int(uniq[counts > 1][0])
        raise ValueError(f"omitted: dyad ({k // num_nodes}, {k % num_nodes}) is listed more than once (perhaps as "
                         "(n, m) and (m, n)); list each held-out dyad once, in one direction")
    if edge_index is not None and edge_index.shape[1]:
        clash = torch.isin(om[0] * num_nodes + om[1], edge_index[0] * num_nodes + edge_index[1])
        if bool(clash.any()):
            i = int(torch.nonzero(clash)[0])
            raise ValueError(f"omitted: held-out dyad ({int(om[0, i])}, {int(om[1, i])}) is also in edge_index; "
                             "remove held-out edges from the graph")
    return om


def as_batch(batch, num_nodes: int, *pairs: tuple[str, torch.Tensor | None]) -> torch.Tensor | None:
    """Return ``batch`` (the graph of each node, ``0..G-1``, every graph non-empty) as int64, or raise.

    ``pairs``: ``(name, (2, P) tensor)`` whose columns must join nodes of the same graph.
    """
    if batch is None:
        return None
    b = as_index_tensor(batch, "batch", ndim=1, empty=True)
    if b.shape != (num_nodes,):
        raise ValueError(f"batch: expected one graph index per node, shape ({num_nodes},), got {tuple(b.shape)}")
    if int(b.min()) < 0 or torch.unique(b).numel() != int(b.max()) + 1:
        raise ValueError("batch: graph indices must be 0..G-1 with every graph holding at least one node")
    for name, p in pairs:
        if p is not None and p.shape[1] and bool((b[p[0]] != b[p[1]]).any()):
            i = int(torch.nonzero(b[p[0]] != b[p[1]])[0])
            raise ValueError(f"{name}: pair ({int(p[0, i])}, {int(p[1, i])}) joins two different graphs of the batch")
    return b


def lorentz_diag(dim: int, lorentz: bool, *, dtype=torch.float64, device=None) -> torch.Tensor:
    """The diagonal of L: all ones (BigClam) or ``(1_C, -1_C)`` with ``dim = 2C`` (IeClam)."""
    dim = as_positive_int(dim, "dim")
    if not lorentz:
        return torch.ones(dim, dtype=dtype, device=device)
    if dim % 2:
        raise ValueError(f"dim: IeClam codes hold C inclusive and C exclusive entries, so dim must be even, got {dim}")
    c = dim // 2
    return torch.cat([torch.ones(c, dtype=dtype, device=device), -torch.ones(c, dtype=dtype, device=device)])


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
        t, s = F.detach().chunk(2, dim=1)
        gap = (s.abs() - t).max()
        if float(gap) > tol:
            raise ValueError(f"{name}: IeClam codes must satisfy |s_c| <= t_c (the pairwise cone), violated by "
                             f"{float(gap):.3g}; project with project_cone(F, lorentz=True)")
    return F


def _checked(F, edge_index, lorentz, omitted=None, batch=None, x_min=X_MIN):
    F = check_codes(F, lorentz)
    ei = as_edge_index(edge_index, F.shape[0])
    om = as_omitted(omitted, F.shape[0], ei)
    b = as_batch(batch, F.shape[0], ("edge_index", ei), ("omitted", om))
    dev = F.device
    return F, ei.to(dev), om if om is None else om.to(dev), b if b is None else b.to(dev), as_positive(x_min, "x_min")


# --- the feasible cone ---------------------------------------------------------------------


def project_cone(F: torch.Tensor, lorentz: bool) -> torch.Tensor:
    """Euclidean projection onto the feasible cone (eq. (pieclam-cone)).

    BigClam: ReLU. IeClam: for each pair ``(t_c, s_c)`` rotate by 45 degrees to ``u = t - s``,
    ``v = t + s``, clip both at 0, rotate back. The cone ``|s| <= t`` is the quarter-plane
    ``u, v >= 0``, and the rotation is an isometry up to a common factor, so this is the nearest point.
    """
    as_finite_tensor(F, "F", ndim=2, empty=True)
    if not lorentz:
        return F.clamp_min(0)
    lorentz_diag(F.shape[1], True)
    t, s = F.chunk(2, dim=1)
    u, v = (t - s).clamp_min(0), (t + s).clamp_min(0)
    return torch.cat([(u + v) / 2, (v - u) / 2], dim=1)


# --- the decoder ------------------------------------------------------------------------------


def check_pairs(pairs, num_nodes: int, name: str = "pairs") -> torch.Tensor:
    """Return ``pairs`` if it is a ``(2, P)`` integer tensor of node indices in ``[0, num_nodes)``."""
    if not torch.is_tensor(pairs):
        raise ValueError(f"{name}: expected a (2, P) integer tensor of node pairs, got {type(pairs).__name__}")
    as_index_tensor(pairs, name, ndim=2, empty=True)
    if pairs.shape[0] != 2:
        raise ValueError(f"{name}: expected a (2, P) integer tensor of node pairs, got shape {tuple(pairs.shape)}")
    if pairs.numel() and (int(pairs.min()) < 0 or int(pairs.max()) >= num_nodes):
        raise ValueError(f"{name}: node indices must lie in [0, {num_nodes}), got {int(pairs.min())}..{int(pairs.max())}")
    return pairs


def edge_logits(F: torch.Tensor, pairs: torch.Tensor, lorentz: bool) -> torch.Tensor:
    """``x_nm = f_n^T L f_m`` for each column ``(n, m)`` of ``pairs`` (shape ``(2, P)``)."""
    as_finite_tensor(F, "F", ndim=2, empty=True)
    check_pairs(pairs, F.shape[0])
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype, device=F.device)
    return (F.index_select(0, pairs[0]) * F.index_select(0, pairs[1])) @ L


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


def _totals(F: torch.Tensor, batch: torch.Tensor | None) -> torch.Tensor:
    """``S = sum_m f_m`` over each node's own graph: shape ``(D,)``, or ``(N, D)`` with a batch."""
    if batch is None:
        return F.sum(0)
    S = torch.zeros(int(batch.max()) + 1, F.shape[1], dtype=F.dtype, device=F.device).index_add_(0, batch, F)
    return S[batch]


def _edge_terms(F, edge_index, lorentz, x_min):
    """Per directed edge, ``log(1 - e^{-max(x, x_min)}) + x``: the edge's log-probability
    plus the non-edge penalty ``x`` that the all-pairs term charges it
    (eq. (pieclam-loglik-fast)).

    Only the log-probability is clamped; the penalty added back is the unclamped ``x``
    that the all-pairs term subtracts, so the two cancel exactly and the O(|E|) form
    equals the dense definition with the same clamp (:func:`dense_loglik`).
    """
    x = edge_logits(F, edge_index, lorentz)
    return torch.log(-torch.expm1(-_clamped(x, x_min))) + x


def _loglik(F, edge_index, lorentz, omitted=None, x_min=X_MIN, batch=None):
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype, device=F.device)
    S = _totals(F, batch)
    ll = 0.5 * (_edge_terms(F, edge_index, lorentz, x_min).sum() - (F * L * S).sum() + (F * L * F).sum())
    if omitted is not None and omitted.shape[1]:
        ll = ll + edge_logits(F, omitted, lorentz).sum()
    return ll


def _grad(F, edge_index, lorentz, omitted=None, x_min=X_MIN, batch=None):
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype, device=F.device)
    src, dst = edge_index
    F_dst = F.index_select(0, dst)  # gathered once: the logits and the messages share it
    x = ((F.index_select(0, src) * F_dst) @ L).clamp_min(x_min)
    coef = 1.0 / -torch.expm1(-x)  # d/dx [log(1 - e^{-x}) + x]
    msg = torch.zeros_like(F).index_add_(0, src, coef[:, None] * F_dst)
    if omitted is not None and omitted.shape[1]:
        msg = msg.index_add_(0, omitted[0], F[omitted[1]]).index_add_(0, omitted[1], F[omitted[0]])
    return (msg - _totals(F, batch) + F) * L


def _star(F, edge_index, lorentz, x_min=X_MIN, batch=None):
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype, device=F.device)
    per_edge = _edge_terms(F, edge_index, lorentz, x_min)
    edges = torch.zeros(F.shape[0], dtype=F.dtype, device=F.device).index_add_(0, edge_index[0], per_edge)
    return 0.5 * (edges - (F * L * _totals(F, batch)).sum(1) + (F * L * F).sum(1))


def clam_loglik(F: torch.Tensor, edge_index: torch.Tensor, lorentz: bool, omitted: torch.Tensor | None = None,
                x_min: float = X_MIN, *, batch: torch.Tensor | None = None) -> torch.Tensor:
    """The Clam log-likelihood of a graph, eq. (pieclam-loglik-fast), in O(|E| D + N D).

    ``edge_index`` lists each edge in both directions (each counted one half). ``omitted``
    (shape ``(2, Q)``, each dyad once) are dyads held out for link prediction: they count neither
    as edges nor as non-edges, so their non-edge penalty ``x_nm``, which the ``-S^T L S`` term
    charges to every pair, is added back (eq. (pieclam-omitted)). Edge probabilities are floored
    at ``1 - e^{-x_min}``, exactly as in :func:`dense_loglik`. ``batch``: see the module docstring.
    Bad arguments (codes outside the cone, a one-direction edge list, a dyad omitted twice)
    raise ``ValueError`` naming the argument.
    """
    F, ei, om, b, x_min = _checked(F, edge_index, lorentz, omitted, batch, x_min)
    return _loglik(F, ei, lorentz, om, x_min, b)


def clam_grad(F: torch.Tensor, edge_index: torch.Tensor, lorentz: bool, omitted: torch.Tensor | None = None,
              x_min: float = X_MIN, *, batch: torch.Tensor | None = None) -> torch.Tensor:
    """The analytic gradient of :func:`clam_loglik`, eq. (pieclam-grad): one message per edge.

    ``grad_n = L ( sum_{m ~ n} f_m / (1 - exp(-x_nm)) - sum_m f_m + f_n )`` (plus ``L f_m`` for
    each omitted dyad ``(n, m)``), with ``x_nm`` clamped at ``x_min`` in the coefficient.
    """
    F, ei, om, b, x_min = _checked(F, edge_index, lorentz, omitted, batch, x_min)
    return _grad(F, ei, lorentz, om, x_min, b)


def star_loglik(F: torch.Tensor, edge_index: torch.Tensor, lorentz: bool, x_min: float = X_MIN, *,
                batch: torch.Tensor | None = None) -> torch.Tensor:
    """Each node's share of eq. (pieclam-loglik-fast): its edges and its non-edges, halved.

    ``star_n = 1/2 ( sum_{m ~ n} [log(1 - e^{-x_nm}) + x_nm] - f_n^T L S + f_n^T L f_n )``; the shares
    add up to :func:`clam_loglik`. Low values flag nodes the model explains badly (the (S) score).
    """
    F, ei, _, b, x_min = _checked(F, edge_index, lorentz, None, batch, x_min)
    return _star(F, ei, lorentz, x_min, b)


def dense_loglik(F: torch.Tensor, A: torch.Tensor, lorentz: bool, known: torch.Tensor | None = None,
                 x_min: float = X_MIN) -> torch.Tensor:
    """The definition, eq. (pieclam-loglik), over all pairs n < m: O(N^2), for tests only.

    ``A`` is the dense 0/1 adjacency; ``known`` (optional, boolean N x N) masks out omitted dyads.
    Edge logits are clamped at ``x_min`` in the edge term, as in :func:`clam_loglik`.
    """
    x_min = as_positive(x_min, "x_min")
    F = check_codes(F, lorentz)
    if not torch.is_tensor(A) or A.shape != (F.shape[0], F.shape[0]):
        raise ValueError(f"A: expected the dense ({F.shape[0]}, {F.shape[0]}) adjacency of the codes' nodes, got "
                         f"{getattr(A, 'shape', type(A).__name__)}")
    if known is not None and (not torch.is_tensor(known) or known.shape != A.shape or known.dtype != torch.bool):
        raise ValueError(f"known: expected a bool ({F.shape[0]}, {F.shape[0]}) mask or None")
    L = lorentz_diag(F.shape[1], lorentz, dtype=F.dtype, device=F.device)
    X = (F * L) @ F.T
    upper = torch.triu(torch.ones_like(A, dtype=torch.bool), diagonal=1)
    if known is not None:
        upper = upper & known
    ll = torch.where(A > 0, torch.log(-torch.expm1(-X.clamp_min(x_min))), -X)
    return ll[upper].sum()
