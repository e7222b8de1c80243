"""Persistent homology of edge filtrations of graphs, by union-find, with gradients.

A graph has only vertices and edges, so its filtrations carry homology in dimensions 0 and 1
only, and both are exact after one pass of Kruskal's union-find over the edges sorted by their
filtration time (eq. ``toping-pairing``): an edge that joins two components *kills* one, a 0-dim
point (0, time); an edge whose ends are already connected *creates* a cycle, a 1-dim point
(time, cap) that never dies (a graph has no 2-cells). Components alive at the end are essential,
(0, cap). The pairing (which edge makes which point) is piecewise constant in the times and is
computed without gradient; the coordinates are then gathered from the differentiable ``times``
by edge index, so gradients reach exactly the paired edges (as in TOGL, GEFL, Hofer et al.).

Everything works on a *batch*: disjoint graphs are one graph to union-find, and each point
carries the index of the graph it belongs to (``segment``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion.validation import as_positive_int

__all__ = ["Diagram", "edge_persistence", "batch_edge_persistence", "cut_persistence",
           "batch_cut_persistence", "undirected"]


@dataclass
class Diagram:
    """The persistence diagrams of one filtration (or of a batch of graphs' filtrations).

    ``h0: [k0, 2]`` and ``h1: [k1, 2]`` are (birth, death) points, differentiable w.r.t. the
    filtration times; ``h0_edge``/``h1_edge`` the index of the edge that kills (H0) or creates
    (H1) each point, ``-1`` for an essential component; ``h0_seg``/``h1_seg`` the graph of each
    point.
    """

    h0: torch.Tensor
    h1: torch.Tensor
    h0_edge: torch.Tensor
    h1_edge: torch.Tensor
    h0_seg: torch.Tensor
    h1_seg: torch.Tensor

    def points(self, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(points, segment)`` of homology dimension ``dim`` (0 or 1)."""
        if dim not in (0, 1):
            raise ValueError(f"dim: expected 0 or 1, got {dim!r}")
        return (self.h0, self.h0_seg) if dim == 0 else (self.h1, self.h1_seg)


def _check_graph(num_nodes, edges, values, name: str) -> tuple[int, torch.Tensor, torch.Tensor]:
    num_nodes = as_positive_int(num_nodes, "num_nodes")
    edges = torch.as_tensor(edges)
    if edges.dtype.is_floating_point or edges.dtype == torch.bool:
        raise ValueError(f"edges: expected integer node ids, got dtype {edges.dtype}")
    edges = edges.reshape(-1, 2) if edges.numel() == 0 else edges
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"edges: expected shape [E, 2], got {tuple(edges.shape)}")
    if edges.numel() and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(f"edges: node ids must lie in [0, {num_nodes}), got "
                         f"[{int(edges.min())}, {int(edges.max())}]")
    if bool((edges[:, 0] == edges[:, 1]).any()):
        raise ValueError("edges: self-loops are not allowed")
    if not isinstance(values, torch.Tensor):
        values = torch.as_tensor(values, dtype=torch.float64)
    if values.shape != (edges.shape[0],):
        raise ValueError(f"{name}: expected shape [{edges.shape[0]}] (one value per edge), "
                         f"got {tuple(values.shape)}")
    if not bool(torch.isfinite(values).all()):
        raise ValueError(f"{name}: must be finite (no NaN or inf)")
    return num_nodes, edges.long(), values


def _pairing(num_nodes: int, edges: np.ndarray, order: np.ndarray) -> tuple[list[int], list[int]]:
    """Kruskal's pass over ``edges[order]``: the edges that kill a component, those that close a cycle."""
    parent = list(range(num_nodes))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]  # path halving
            a = parent[a]
        return a

    kills, cycles = [], []
    ends = edges.tolist()
    for e in order.tolist():
        u, v = ends[e]
        ru, rv = find(u), find(v)
        if ru == rv:
            cycles.append(e)
        else:
            parent[max(ru, rv)] = min(ru, rv)  # the older (smaller) root survives
            kills.append(e)
    return kills, cycles


def batch_edge_persistence(num_nodes: int, edges, times: torch.Tensor, cap: float,
                           node_graph=None, keep=None, num_graphs: int | None = None) -> Diagram:
    """Diagrams of the edge filtrations of a batch of disjoint graphs (eq. ``toping-pairing``).

    ``edges: [E, 2]`` global node ids, ``times: [E]`` filtration times (vertices enter at 0),
    ``cap``: the time at which the filtration ends (essential classes and cycles die there),
    ``node_graph: [N]`` the graph of each node (default: one graph), ``keep: [E]`` bool, the
    edges that belong to the filtration (default all). Ties are broken by edge index.
    """
    num_nodes, edges, times = _check_graph(num_nodes, edges, times, "times")
    device = times.device
    node_graph = (torch.zeros(num_nodes, dtype=torch.long, device=device) if node_graph is None
                  else torch.as_tensor(node_graph, device=device).long())
    if node_graph.shape != (num_nodes,):
        raise ValueError(f"node_graph: expected shape [{num_nodes}], got {tuple(node_graph.shape)}")
    num_graphs = int(node_graph.max()) + 1 if num_graphs is None else num_graphs
    keep = (torch.ones(len(edges), dtype=torch.bool, device=device) if keep is None
            else torch.as_tensor(keep, device=device).bool())
    t = times.detach().cpu().numpy()
    idx = np.flatnonzero(keep.cpu().numpy())
    if len(idx) and (t[idx].min() < 0 or t[idx].max() > cap):
        raise ValueError(f"times: the kept edges' times must lie in [0, cap={cap}]")
    order = idx[np.argsort(t[idx], kind="stable")]
    kills, cycles = _pairing(num_nodes, edges.cpu().numpy(), order)
    kills = torch.tensor(kills, dtype=torch.long, device=device)
    cycles = torch.tensor(cycles, dtype=torch.long, device=device)
    edge_graph = node_graph[edges[:, 0]]
    alive = (torch.bincount(node_graph, minlength=num_graphs)
             - torch.bincount(edge_graph[kills], minlength=num_graphs))
    ess_seg = torch.repeat_interleave(torch.arange(num_graphs, device=device), alive)
    zeros = lambda n: torch.zeros(n, dtype=times.dtype, device=device)
    h0 = torch.cat([torch.stack([zeros(len(kills)), times[kills]], 1),
                    torch.stack([zeros(len(ess_seg)), zeros(len(ess_seg)) + cap], 1)])
    h1 = torch.stack([times[cycles], zeros(len(cycles)) + cap], 1)
    minus = torch.full((len(ess_seg),), -1, dtype=torch.long, device=device)
    return Diagram(h0=h0, h1=h1, h0_edge=torch.cat([kills, minus]), h1_edge=cycles,
                   h0_seg=torch.cat([edge_graph[kills], ess_seg]), h1_seg=edge_graph[cycles])


def edge_persistence(num_nodes: int, edges, times: torch.Tensor, cap: float) -> Diagram:
    """Diagram of one graph's edge filtration: vertices at 0, edge ``e`` at ``times[e]`` <= ``cap``."""
    return batch_edge_persistence(num_nodes, edges, times, cap)


def _check_cut(t) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < 1:
        raise ValueError(f"t: expected a cut in (0, 1), got {t!r}")
    return float(t)


def batch_cut_persistence(num_nodes: int, edges, f: torch.Tensor, t: float = 0.5,
                          node_graph=None, num_graphs: int | None = None) -> tuple[Diagram, Diagram]:
    """The two diagrams of the rationale filtration cut at ``t`` (eqs. ``toping-parts``).

    ``T_X``: edges with ``f > t`` enter in decreasing importance, at time ``1 - f`` (cap ``1 - t``);
    ``T_eps``: edges with ``f <= t`` enter at time ``f`` (cap ``t``). ``f: [E]`` in [0, 1].
    """
    t = _check_cut(t)
    num_nodes, edges, f = _check_graph(num_nodes, edges, f, "f")
    if f.numel() and (f.min() < 0 or f.max() > 1):
        raise ValueError("f: edge scores must lie in [0, 1]")
    top = f > t
    args = dict(node_graph=node_graph, num_graphs=num_graphs)
    return (batch_edge_persistence(num_nodes, edges, (1 - f) * top, 1 - t, keep=top, **args),
            batch_edge_persistence(num_nodes, edges, f * ~top, t, keep=~top, **args))


def cut_persistence(num_nodes: int, edges, f: torch.Tensor, t: float = 0.5) -> tuple[Diagram, Diagram]:
    """``(T_X, T_eps)`` of one graph: :func:`batch_cut_persistence` with a single graph."""
    return batch_cut_persistence(num_nodes, edges, f, t)


def undirected(edge_index, values=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(edges [E, 2] with u < v, values [E])`` from a both-directions ``edge_index: [2, 2E]``.

    The value of an undirected edge is the mean of its two directions' values. Raises if an edge
    is missing its reverse (PyG-style ``edge_index`` stores both directions).
    """
    ei = torch.as_tensor(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise ValueError(f"edge_index: expected shape [2, 2E], got {tuple(ei.shape)}")
    if bool((ei[0] == ei[1]).any()):
        raise ValueError("edge_index: self-loops are not allowed")
    lo, hi = torch.minimum(ei[0], ei[1]), torch.maximum(ei[0], ei[1])
    pairs, inverse, counts = torch.unique(torch.stack([lo, hi], 1), dim=0, return_inverse=True,
                                          return_counts=True)
    fwd = set(map(tuple, ei.T.tolist()))
    if bool((counts != 2).any()) or any((v, u) not in fwd for u, v in fwd):
        raise ValueError("edge_index: not symmetric; every edge (u, v) needs its reverse (v, u) once")
    if values is None:
        return pairs, None
    values = torch.as_tensor(values)
    if values.shape != (ei.shape[1],):
        raise ValueError(f"values: expected shape [{ei.shape[1]}], got {tuple(values.shape)}")
    out = torch.zeros(len(pairs), dtype=values.dtype, device=values.device)
    return pairs, out.index_add(0, inverse, values) / 2
