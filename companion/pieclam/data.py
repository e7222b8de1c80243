"""Graphs of the chapter: seeded block models, the small graphs that ship with networkx,
planted anomalies, link-prediction splits, disjoint unions (to fit many graphs at once), and a
known prior over IeClam codes (to sample a graph from, then recover it). Every graph is an
``edge_index`` (2 x 2E, both directions, no self-loops) with its number of nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import networkx as nx
import numpy as np
import torch

from companion.validation import as_choice, as_float_array, as_positive_int, as_probability

from .core import as_edge_index, project_cone

__all__ = ["NAMED_SBMS", "sbm", "sbm_probs", "named_sbm", "from_networkx", "nx_graph", "to_dense",
           "plant_structural", "plant_contextual", "link_split", "undirected_pairs", "disjoint_union",
           "RingMixture"]

# name -> (block sizes, block probability matrix)
NAMED_SBMS = {
    "bipartite": ((100, 100), [[0.1, 0.9], [0.9, 0.1]]),
    "offdiag3": ((70, 70, 70), [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]]),
    "assort3": ((70, 70, 70), [[0.5, 0.05, 0.05], [0.05, 0.5, 0.05], [0.05, 0.05, 0.5]]),
}


def _edges_from_upper(rows, cols) -> torch.Tensor:
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    return torch.from_numpy(np.stack([np.r_[rows, cols], np.r_[cols, rows]]))


def undirected_pairs(edge_index: torch.Tensor) -> torch.Tensor:
    """Each undirected edge once, as ``(2, E)`` with the smaller index first."""
    keep = edge_index[0] < edge_index[1]
    return edge_index[:, keep]


def to_dense(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The dense 0/1 adjacency (for plots, tests and the GAE baseline; never for the Clam likelihood)."""
    edge_index = as_edge_index(edge_index, num_nodes)
    A = torch.zeros(num_nodes, num_nodes, dtype=torch.float64)
    A[edge_index[0], edge_index[1]] = 1.0
    return A


def sbm_probs(sizes, P) -> np.ndarray:
    """The N x N matrix of edge probabilities of a block model (zero diagonal)."""
    sizes = np.asarray(sizes)
    if sizes.ndim != 1 or sizes.size == 0 or not np.issubdtype(sizes.dtype, np.integer) or np.any(sizes < 1):
        raise ValueError(f"sizes: expected positive integer block sizes, got {sizes!r}")
    P = as_float_array(P, "P", low=0, high=1)
    if P.shape != (sizes.size, sizes.size):
        raise ValueError(f"P: expected a {sizes.size} x {sizes.size} matrix, one row per block, got {P.shape}")
    block = np.repeat(np.arange(len(sizes)), sizes)
    Pn = np.asarray(P, dtype=float)[block][:, block]
    np.fill_diagonal(Pn, 0.0)
    return Pn


def sbm(sizes, P, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    """A stochastic block model: ``(edge_index, block)``; each dyad n < m is an edge with prob. P[b_n, b_m]."""
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes: expected positive block sizes, got {sizes}")
    P = np.asarray(P, dtype=float)
    if P.shape != (len(sizes), len(sizes)) or not np.allclose(P, P.T) or P.min() < 0 or P.max() > 1:
        raise ValueError(f"P: expected a symmetric {len(sizes)} x {len(sizes)} matrix of probabilities, got {P.tolist()}")
    rng = np.random.default_rng(seed)
    Pn = sbm_probs(sizes, P)
    r, c = np.triu_indices(Pn.shape[0], k=1)
    hit = rng.random(r.size) < Pn[r, c]
    return _edges_from_upper(r[hit], c[hit]), np.repeat(np.arange(len(sizes)), sizes)


def named_sbm(name: Literal["bipartite", "offdiag3", "assort3"], seed: int = 0):
    """One of :data:`NAMED_SBMS`: ``(edge_index, block, P_true)`` with P_true the N x N probabilities."""
    as_choice(name, "name", tuple(NAMED_SBMS))
    sizes, P = NAMED_SBMS[name]
    ei, block = sbm(sizes, P, seed)
    return ei, block, sbm_probs(sizes, P)


def from_networkx(graph) -> tuple[torch.Tensor, int]:
    """An undirected networkx graph as ``(edge_index, N)``, nodes numbered in ``graph``'s order.

    Directed graphs and self-loops are refused (``ValueError`` naming ``graph``); edge weights are dropped.
    """
    if not isinstance(graph, nx.Graph):
        raise ValueError(f"graph: expected a networkx Graph, got {type(graph).__name__}")
    if graph.is_directed():
        raise ValueError("graph: the Clam models are for undirected graphs; got a directed one "
                         "(use graph.to_undirected() if the direction does not matter)")
    if nx.number_of_selfloops(graph):
        raise ValueError(f"graph: {nx.number_of_selfloops(graph)} self-loop(s); the models have no self-edges, "
                         "remove them with graph.remove_edges_from(nx.selfloop_edges(graph))")
    if graph.number_of_nodes() == 0:
        raise ValueError("graph: the graph has no nodes")
    index = {v: i for i, v in enumerate(graph.nodes())}
    pairs = np.array([(index[a], index[b]) for a, b in graph.edges()], dtype=np.int64).reshape(-1, 2)
    ei = _edges_from_upper(pairs[:, 0], pairs[:, 1])
    return as_edge_index(ei, graph.number_of_nodes(), name="graph"), graph.number_of_nodes()


def nx_graph(name: Literal["davis", "karate", "lesmis", "florentine"]):
    """A small graph that ships with networkx: ``(edge_index, N, side)``.

    ``side`` is the bipartite side (Davis: 0 = women, 1 = events) or the known faction (karate),
    else None. Les Miserables is taken unweighted.
    """
    as_choice(name, "name", ("davis", "karate", "lesmis", "florentine"))
    side = None
    if name == "davis":
        g = nx.davis_southern_women_graph()
        side = np.array([g.nodes[v]["bipartite"] for v in g.nodes()])
    elif name == "karate":
        g = nx.karate_club_graph()
        side = np.array([g.nodes[v]["club"] != "Mr. Hi" for v in g.nodes()], dtype=int)
    elif name == "lesmis":
        g = nx.Graph(nx.les_miserables_graph().edges())
    else:
        g = nx.florentine_families_graph()
    ei, n = from_networkx(g)
    return ei, n, side


def plant_structural(edge_index, num_nodes: int, frac: float = 0.05, seed: int = 0):
    """Rewire a random ``frac`` of the nodes: drop all their edges, then join each to as many
    uniformly random normal nodes as it had. The anomalies keep their degrees (and the graph its
    number of edges), so the degree cannot find them.

    Returns ``(edge_index, is_anomaly)`` (a boolean array of length N).
    """
    ei = as_edge_index(edge_index, num_nodes, allow_empty=False)
    frac = as_probability(frac, "frac")
    rng = np.random.default_rng(seed)
    k = max(1, int(round(frac * num_nodes)))
    anom = np.zeros(num_nodes, dtype=bool)
    anom[rng.choice(num_nodes, size=k, replace=False)] = True
    A = to_dense(ei, num_nodes).numpy().astype(bool)
    deg = A.sum(1)
    for v in np.flatnonzero(anom):
        A[v, :] = A[:, v] = False
    for v in np.flatnonzero(anom):
        free = np.flatnonzero(~A[v] & ~anom)
        new = rng.choice(free, size=min(int(deg[v]), free.size), replace=False)
        A[v, new] = A[new, v] = True
    r, c = np.nonzero(np.triu(A, 1))
    return _edges_from_upper(r, c), anom


def plant_contextual(num_nodes: int, block, frac: float = 0.05, seed: int = 0, spread: float = 0.3):
    """Two-dimensional attributes ``x_n ~ N(+-(1, 1), spread^2 I)`` by block (block 0: +, other: -);
    a random ``frac`` of the nodes get a draw from the other block's law. The graph is untouched.

    Returns ``(attrs, is_anomaly)``.
    """
    block = np.asarray(block)
    if block.shape != (num_nodes,):
        raise ValueError(f"block: expected one block label per node ({num_nodes}), got shape {block.shape}")
    frac = as_probability(frac, "frac")
    rng = np.random.default_rng(seed)
    sign = np.where(block == 0, 1.0, -1.0)
    k = max(1, int(round(frac * num_nodes)))
    anom = np.zeros(num_nodes, dtype=bool)
    anom[rng.choice(num_nodes, size=k, replace=False)] = True
    sign = np.where(anom, -sign, sign)
    attrs = sign[:, None] * np.ones((1, 2)) + spread * rng.standard_normal((num_nodes, 2))
    return attrs, anom


def link_split(edge_index, num_nodes: int, test_frac: float = 0.1, neg_ratio: int = 5, seed: int = 0):
    """Hold out ``test_frac`` of the edges and ``neg_ratio`` non-edges per held-out edge.

    Returns ``(train_edge_index, test_pos (2, T), test_neg (2, neg_ratio T))``. Train the model
    with ``omitted = cat(test_pos, test_neg)``, so that the held-out dyads count neither way.
    """
    ei = as_edge_index(edge_index, num_nodes)
    pairs = undirected_pairs(ei).numpy()
    if pairs.shape[1] < 10:
        raise ValueError(f"edge_index: link prediction needs at least 10 edges, got {pairs.shape[1]}")
    test_frac = as_probability(test_frac, "test_frac")
    as_positive_int(neg_ratio, "neg_ratio")
    rng = np.random.default_rng(seed)
    E = pairs.shape[1]
    t = max(1, int(round(test_frac * E)))
    perm = rng.permutation(E)
    test_pos, train = pairs[:, perm[:t]], pairs[:, perm[t:]]
    A = np.zeros((num_nodes, num_nodes), dtype=bool)
    A[pairs[0], pairs[1]] = A[pairs[1], pairs[0]] = True
    r, c = np.triu_indices(num_nodes, k=1)
    non = np.flatnonzero(~A[r, c])
    if non.size < neg_ratio * t:
        raise ValueError(f"neg_ratio: the graph has {non.size} non-edges, fewer than {neg_ratio} x {t} needed")
    pick = rng.choice(non, size=neg_ratio * t, replace=False)
    test_neg = np.stack([r[pick], c[pick]])
    return (_edges_from_upper(train[0], train[1]), torch.from_numpy(test_pos).long(),
            torch.from_numpy(test_neg).long())


def disjoint_union(graphs) -> tuple[torch.Tensor, int, torch.Tensor, list[int]]:
    """Graphs ``[(edge_index, N), ...]`` side by side: ``(edge_index, N_total, batch, offsets)``.

    Node ``n`` of graph ``g`` becomes ``offsets[g] + n``; ``batch`` holds each node's graph, for
    :func:`companion.pieclam.fit_clam` to fit them all at once.
    """
    graphs = list(graphs)
    if not graphs:
        raise ValueError("graphs: expected at least one (edge_index, num_nodes) pair")
    parts, batch, offsets, total = [], [], [], 0
    for g, (ei, n) in enumerate(graphs):
        parts.append(as_edge_index(ei, n, name=f"graphs[{g}]") + total)
        batch.append(torch.full((n,), g, dtype=torch.long))
        offsets.append(total)
        total += n
    return torch.cat(parts, dim=1), total, torch.cat(batch), offsets


@dataclass(frozen=True)
class RingMixture:
    """A known prior over IeClam codes ``(t, s)`` (C = 1): ``n_modes`` equal Gaussians of standard
    deviation ``std`` on a circle of ``radius`` around ``center``, inside the cone ``|s| <= t``.

    With the defaults the nearest mode lies four standard deviations from the cone's edge, so the
    projection onto the cone after sampling moves a negligible mass and :meth:`log_prob` is the
    density of the codes.
    """

    n_modes: int = 8
    center: tuple[float, float] = (1.5, 0.0)
    radius: float = 0.7
    std: float = 0.09

    def __post_init__(self):
        as_positive_int(self.n_modes, "n_modes")
        as_float_array(self.center, "center")
        as_float_array(self.radius, "radius", low=0)
        as_float_array(self.std, "std", low=0, low_open=True)

    def means(self) -> torch.Tensor:
        angle = 2 * math.pi * torch.arange(self.n_modes, dtype=torch.float64) / self.n_modes
        return torch.stack([self.center[0] + self.radius * torch.cos(angle),
                            self.center[1] + self.radius * torch.sin(angle)], dim=1)

    def sample(self, n: int, seed: int = 0) -> torch.Tensor:
        as_positive_int(n, "n")
        gen = torch.Generator().manual_seed(seed)
        mode = torch.randint(self.n_modes, (n,), generator=gen)
        x = self.means()[mode] + self.std * torch.randn(n, 2, dtype=torch.float64, generator=gen)
        return project_cone(x, lorentz=True)  # a no-op but for ~1e-5 of the mass

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=torch.float64)
        if x.ndim != 2 or x.shape[1] != 2:
            raise ValueError(f"x: expected codes of shape (N, 2), got {tuple(x.shape)}")
        d2 = ((x[:, None, :] - self.means()[None]) ** 2).sum(-1)
        return (torch.logsumexp(-d2 / (2 * self.std**2), dim=1) - math.log(self.n_modes)
                - math.log(2 * math.pi * self.std**2))
