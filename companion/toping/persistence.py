"""Persistent homology of edge filtrations of graphs, by union-find, with gradients.

A graph has only vertices and edges, so its filtrations carry homology in dimensions 0 and 1
only, and both are exact after one pass of Kruskal's union-find over the edges sorted by their
filtration time (eq. ``toping-pairing``): an edge that joins two components *kills* one, a 0-dim
point (0, time); an edge whose ends are already connected *creates* a cycle, a 1-dim point
(time, cap) that never dies (a graph has no 2-cells). Components alive at the end are essential,
(0, cap). The pairing (which edge makes which point) is piecewise constant in the times and is
computed without gradient; the coordinates are then gathered from the differentiable ``times``
by edge index, so gradients reach exactly the paired edges (as in TOGL, GEFL, Hofer et al.).

Vertices may also enter at times of their own (``vertex_times``): a component is then born at
its oldest vertex, and a merge kills the younger of the two (the elder rule), a 0-dim point
(birth of the younger, time of the edge); points of zero length are dropped. This is what the
paper's node filtration needs (its Remark 3.6, eq. ``toping-node-parts``): scores on nodes, an
edge entering with the later of its two ends, and each part holding only its own vertices.

Everything works on a *batch*: disjoint graphs are one graph to union-find, and each point
carries the index of the graph it belongs to (``segment``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from companion.validation import as_positive_int, as_probability

__all__ = ["Diagram", "edge_persistence", "batch_edge_persistence", "cut_persistence",
           "batch_cut_persistence", "node_cut_persistence", "batch_node_cut_persistence", "undirected",
           "FILTRATIONS"]

FILTRATIONS = ("node", "edge")  # the paper's (Remark 3.6), and every vertex at 0 in both parts


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
    if len(edges) > 1:
        en = edges.detach().cpu().numpy().astype(np.int64)
        key = np.minimum(en[:, 0], en[:, 1]) * num_nodes + np.maximum(en[:, 0], en[:, 1])
        if len(np.unique(key)) < len(key):
            raise ValueError("edges: each undirected edge must appear once; got a duplicate or a "
                             "reversed copy (u, v) and (v, u) (use undirected() on a PyG edge_index)")
    if not isinstance(values, torch.Tensor):
        values = torch.as_tensor(values, dtype=torch.float64)
    if values.shape != (edges.shape[0],):
        raise ValueError(f"{name}: expected shape [{edges.shape[0]}] (one value per edge), "
                         f"got {tuple(values.shape)}")
    if not bool(torch.isfinite(values).all()):
        raise ValueError(f"{name}: must be finite (no NaN or inf)")
    return num_nodes, edges.long(), values


def _pairing(num_nodes: int, edges: np.ndarray, order: np.ndarray,
             birth: np.ndarray | None = None) -> tuple[list[int], list[int], list[int]]:
    """Kruskal's pass over ``edges[order]``: the edges that kill a component, the vertex whose
    component each kills (the younger root, by ``birth`` then index: the elder rule), and the
    edges that close a cycle."""
    parent = list(range(num_nodes))
    if birth is None:
        rank = list(range(num_nodes))  # age order of the vertices: smaller is older
    else:
        order_v = np.lexsort((np.arange(num_nodes), birth))  # by birth, then index
        rank_v = np.empty(num_nodes, dtype=np.int64)
        rank_v[order_v] = np.arange(num_nodes)
        rank = rank_v.tolist()

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]  # path halving
            a = parent[a]
        return a

    kills, killed, cycles = [], [], []
    for e, (u, v) in zip(order.tolist(), edges[order].tolist()):
        ru, rv = find(u), find(v)
        if ru == rv:
            cycles.append(e)
        else:
            old, young = (ru, rv) if rank[ru] < rank[rv] else (rv, ru)
            parent[young] = old  # the older root survives
            kills.append(e)
            killed.append(young)
    return kills, killed, cycles


def batch_edge_persistence(num_nodes: int, edges, times: torch.Tensor, cap: float,
                           node_graph=None, keep=None, num_graphs: int | None = None,
                           vertex_times: torch.Tensor | None = None, keep_vertices=None) -> Diagram:
    """Diagrams of the edge filtrations of a batch of disjoint graphs (eq. ``toping-pairing``).

    ``edges: [E, 2]`` global node ids, ``times: [E]`` filtration times, ``cap``: the time at which
    the filtration ends (essential classes and cycles die there), ``node_graph: [N]`` the graph of
    each node (default: one graph), ``keep: [E]`` bool, the edges that belong to the filtration
    (default all). Vertices enter at 0 unless ``vertex_times: [N]`` is given, and all of them
    belong to it unless ``keep_vertices: [N]`` says which do; a kept edge needs both ends kept and
    may not enter before them. Ties are broken by edge (and vertex) index.
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
    kv = (torch.ones(num_nodes, dtype=torch.bool, device=device) if keep_vertices is None
          else torch.as_tensor(keep_vertices, device=device).bool())
    if kv.shape != (num_nodes,):
        raise ValueError(f"keep_vertices: expected shape [{num_nodes}], got {tuple(kv.shape)}")
    if keep.shape != (len(edges),):
        raise ValueError(f"keep: expected shape [{len(edges)}], got {tuple(keep.shape)}")
    own_births = vertex_times is not None
    if own_births:
        if not isinstance(vertex_times, torch.Tensor) or vertex_times.shape != (num_nodes,):
            raise ValueError(f"vertex_times: expected a tensor of shape [{num_nodes}], got "
                             f"{tuple(getattr(vertex_times, 'shape', ()))}")
        if not bool(torch.isfinite(vertex_times).all()):
            raise ValueError("vertex_times: must be finite (no NaN or inf)")
    vt = (vertex_times.detach().cpu().numpy() if own_births else np.zeros(num_nodes))
    t = times.detach().cpu().numpy()
    idx = np.flatnonzero(keep.cpu().numpy())
    kvn = kv.cpu().numpy()
    en = edges.cpu().numpy()
    if len(idx) and (t[idx].min() < 0 or t[idx].max() > cap):
        raise ValueError(f"times: the kept edges' times must lie in [0, cap={cap}]")
    vidx = np.flatnonzero(kvn)
    if own_births and len(vidx) and (vt[vidx].min() < 0 or vt[vidx].max() > cap):
        raise ValueError(f"vertex_times: the kept vertices' times must lie in [0, cap={cap}]")
    if len(idx):
        if not kvn[en[idx]].all():
            raise ValueError("keep: a kept edge has an end that is not a kept vertex")
        if (t[idx] < vt[en[idx]].max(1)).any():
            raise ValueError("times: an edge cannot enter before its two ends (vertex_times)")
    order = idx[np.argsort(t[idx], kind="stable")]
    kills, killed, cycles = _pairing(num_nodes, en, order, vt if own_births else None)
    kills = torch.tensor(kills, dtype=torch.long, device=device)
    killed = torch.tensor(killed, dtype=torch.long, device=device)
    cycles = torch.tensor(cycles, dtype=torch.long, device=device)
    edge_graph = node_graph[edges[:, 0]]
    # essential components: kept vertices that are still roots (never killed)
    alive = kv.clone()
    alive[killed] = False
    roots = torch.nonzero(alive).flatten()
    roots = roots[torch.argsort(node_graph[roots], stable=True)]
    zeros = lambda n: torch.zeros(n, dtype=times.dtype, device=device)
    births = vertex_times.to(times.dtype) if own_births else zeros(num_nodes)
    fin = torch.stack([births[killed], times[kills]], 1)
    fin_edge, fin_seg = kills, edge_graph[kills]
    if own_births:  # points of zero length sit on the diagonal: dropped
        long = fin[:, 1] > fin[:, 0]
        fin, fin_edge, fin_seg = fin[long], fin_edge[long], fin_seg[long]
    ess = torch.stack([births[roots], zeros(len(roots)) + cap], 1)
    h0 = torch.cat([fin, ess])
    h1 = torch.stack([times[cycles], zeros(len(cycles)) + cap], 1)
    minus = torch.full((len(roots),), -1, dtype=torch.long, device=device)
    return Diagram(h0=h0, h1=h1, h0_edge=torch.cat([fin_edge, minus]), h1_edge=cycles,
                   h0_seg=torch.cat([fin_seg, node_graph[roots]]), h1_seg=edge_graph[cycles])


def edge_persistence(num_nodes: int, edges, times: torch.Tensor, cap: float) -> Diagram:
    """Diagram of one graph's edge filtration: vertices at 0, edge ``e`` at ``times[e]`` <= ``cap``."""
    return batch_edge_persistence(num_nodes, edges, times, cap)


def _check_cut(t) -> float:
    return as_probability(t, "t")  # a cut strictly between 0 and 1


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


def batch_node_cut_persistence(num_nodes: int, edges, f: torch.Tensor, t: float = 0.5,
                               node_graph=None, num_graphs: int | None = None
                               ) -> tuple[Diagram, Diagram]:
    """The two diagrams of the paper's node filtration cut at ``t``
    (eq. ``toping-node-parts``).

    ``f: [N]`` node scores in [0, 1]. ``T_X`` holds the nodes with ``f > t``, each entering
    at ``1 - f(v)``, and the edges between two of them, each entering with its later end,
    at ``1 - min(f(u), f(v))`` (cap ``1 - t``); ``T_eps`` holds the nodes with ``f <= t``
    at ``f(v)`` and the edges between two of them at ``max(f(u), f(v))`` (cap ``t``). An
    edge with one end on each side belongs to neither part, and neither part holds the
    other's vertices.
    """
    t = _check_cut(t)
    num_nodes = as_positive_int(num_nodes, "num_nodes")
    if not isinstance(f, torch.Tensor):
        f = torch.as_tensor(f, dtype=torch.float64)
    if f.shape != (num_nodes,):
        raise ValueError(f"f: expected shape [{num_nodes}] (one score per node), "
                         f"got {tuple(f.shape)}")
    if not bool(torch.isfinite(f).all()):
        raise ValueError("f: must be finite (no NaN or inf)")
    if f.numel() and (f.min() < 0 or f.max() > 1):
        raise ValueError("f: node scores must lie in [0, 1]")
    n_edges = len(torch.as_tensor(edges).reshape(-1, 2))
    num_nodes, edges, _ = _check_graph(num_nodes, edges,
                                       torch.zeros(n_edges, dtype=f.dtype), "edges")
    top = f > t
    u, v = edges[:, 0], edges[:, 1]
    args = dict(node_graph=node_graph, num_graphs=num_graphs)
    x_keep = top[u] & top[v]
    e_keep = ~top[u] & ~top[v]
    tx = 1 - torch.minimum(f[u], f[v])
    te = torch.maximum(f[u], f[v])
    zero_e, zero_v = torch.zeros_like(tx), torch.zeros_like(f)
    T_X = batch_edge_persistence(
        num_nodes, edges, torch.where(x_keep, tx, zero_e), 1 - t, keep=x_keep,
        vertex_times=torch.where(top, 1 - f, zero_v), keep_vertices=top, **args)
    T_eps = batch_edge_persistence(
        num_nodes, edges, torch.where(e_keep, te, zero_e), t, keep=e_keep,
        vertex_times=torch.where(~top, f, zero_v), keep_vertices=~top, **args)
    return T_X, T_eps


def node_cut_persistence(num_nodes: int, edges, f: torch.Tensor, t: float = 0.5) -> tuple[Diagram, Diagram]:
    """``(T_X, T_eps)`` of one graph under the node filtration: :func:`batch_node_cut_persistence`."""
    return batch_node_cut_persistence(num_nodes, edges, f, t)


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
