"""Metrics: explanation ROC-AUC, Ashman's D of a two-means split, the "edge on a cycle"
explainer, and the per-graph topological gap used to test Theorem 3.4."""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from companion.toping.data import Graph, collate
from companion.toping.losses import diagram_w1
from companion.toping.persistence import (FILTRATIONS, batch_cut_persistence, batch_node_cut_persistence,
                                          cut_persistence, node_cut_persistence)
from companion.validation import as_1d_float_array, as_choice, as_instance, as_positive_int, as_probability

__all__ = ["explanation_auc", "two_means_1d", "ashman_d", "cycle_edge_scores", "degree_edge_scores",
           "node_truth", "topo_gaps", "topo_gap", "perturbed_scores", "total_persistence",
           "persistence_self_check", "cut_share", "distribution_gap"]


def explanation_auc(scores, edge_gt) -> float:
    """Edge-level ROC-AUC of ``scores`` against the rationale mask ``edge_gt`` (pooled edges)."""
    s = as_1d_float_array(scores, "scores")
    y = np.asarray(edge_gt, dtype=bool)
    if y.shape != s.shape:
        raise ValueError(f"edge_gt: expected shape {s.shape} like scores, got {y.shape}")
    if y.all() or not y.any():
        raise ValueError("edge_gt: needs both rationale and non-rationale edges for an AUC, got one class only")
    return float(roc_auc_score(y, s))


def two_means_1d(scores) -> tuple[np.ndarray, np.ndarray]:
    """The exact 2-means split of 1-D scores: the threshold between sorted values with the least
    within-cluster sum of squares. Returns (low cluster, high cluster)."""
    s = np.sort(as_1d_float_array(scores, "scores"))
    if len(s) < 2:
        raise ValueError(f"scores: expected at least 2 values, got {len(s)}")
    n = np.arange(1, len(s))
    c1, c2 = np.cumsum(s)[:-1], np.cumsum(s ** 2)[:-1]
    left = c2 - c1 ** 2 / n
    tot1, tot2 = s.sum() - c1, (s ** 2).sum() - c2
    right = tot2 - tot1 ** 2 / (len(s) - n)
    k = int(np.argmin(left + right)) + 1
    return s[:k], s[k:]


def ashman_d(scores) -> float:
    """Ashman's D of the 2-means clusters: sqrt(2)|mu_a - mu_b| /
    sqrt(s_a^2 + s_b^2); above 2 the two modes are clearly separated."""
    a, b = two_means_1d(scores)
    spread = np.sqrt(a.var() + b.var())
    return float(np.sqrt(2) * abs(b.mean() - a.mean()) / max(spread, 1e-12))


def cycle_edge_scores(graph: Graph) -> np.ndarray:
    """1 for every edge that lies on a cycle (is not a bridge), else 0: the trivial explainer."""
    as_instance(graph, "graph", Graph)
    bridges = {tuple(sorted(e)) for e in nx.bridges(graph.to_networkx())}
    return np.array([tuple(e) not in bridges for e in graph.edges.tolist()], dtype=float)


def degree_edge_scores(graph: Graph) -> np.ndarray:
    """The degree shortcut: each edge scored by the sum of its two ends' degrees (motif nodes of
    a grid or a house have more neighbours than the tree-like base's)."""
    as_instance(graph, "graph", Graph)
    deg = torch.bincount(graph.edges.flatten(), minlength=graph.num_nodes).double()
    return (deg[graph.edges[:, 0]] + deg[graph.edges[:, 1]]).numpy()


def node_truth(graph: Graph) -> np.ndarray:
    """``[N]`` bool: the nodes of the rationale (the ends of its edges)."""
    as_instance(graph, "graph", Graph)
    out = np.zeros(graph.num_nodes, dtype=bool)
    out[graph.edges[graph.edge_gt].flatten().numpy()] = True
    return out


def _check_fs(graphs, fs, filtration: str) -> list[np.ndarray]:
    if not isinstance(graphs, (list, tuple)) or not graphs:
        raise ValueError(f"graphs: expected a non-empty list of graphs, got {type(graphs).__name__}")
    if not isinstance(fs, (list, tuple)) or len(graphs) != len(fs):
        raise ValueError(f"fs: expected one score vector per graph ({len(graphs)}), got "
                         f"{len(fs) if isinstance(fs, (list, tuple)) else type(fs).__name__}")
    out = []
    for i, (g, v) in enumerate(zip(graphs, fs)):
        v = np.asarray(v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v, dtype=float)
        want = g.num_nodes if filtration == "node" else len(g.edges)
        what = "node" if filtration == "node" else "edge"
        if v.shape != (want,):
            raise ValueError(f"fs[{i}]: expected shape [{want}] (one score per {what} of graphs[{i}]), "
                             f"got {v.shape}")
        if not np.isfinite(v).all():
            raise ValueError(f"fs[{i}]: must be finite (no NaN or inf)")
        if (v < 0).any() or (v > 1).any():
            raise ValueError(f"fs[{i}]: scores must lie in [0, 1]")
        out.append(v)
    return out


def topo_gaps(graphs: list[Graph], fs: list, t: float = 0.5, filtration: str = "node") -> np.ndarray:
    """Per graph, the exact W1 between its rationale and complement diagrams cut at ``t`` (eq.
    ``toping-w1``, dimensions 0 and 1 added), for scores ``fs[i]`` of ``graphs[i]``: node scores
    under the paper's node filtration (``"node"``), edge scores with every vertex at 0 in both
    parts (``"edge"``). One union-find pass for all graphs, then one assignment per graph and
    dimension, so the gap is exact at any cut ``t`` (the two parts' cycles die at ``1 - t`` and
    ``t``, which differ unless ``t = 1/2``)."""
    filtration = as_choice(filtration, "filtration", FILTRATIONS)
    fs = _check_fs(graphs, fs, filtration)
    batch = collate(list(graphs))
    f = torch.as_tensor(np.concatenate(fs), dtype=torch.float64)
    cut = batch_node_cut_persistence if filtration == "node" else batch_cut_persistence
    parts = cut(batch.x.shape[0], batch.edges, f, t, node_graph=batch.node_graph, num_graphs=batch.num_graphs)
    gaps = np.zeros(len(graphs))
    for dim in (0, 1):
        split = []
        for d in parts:
            pts, seg = (a.detach().cpu().numpy() for a in d.points(dim))
            order = np.argsort(seg, kind="stable")
            split.append(np.split(pts[order], np.cumsum(np.bincount(seg, minlength=len(graphs)))[:-1]))
        gaps += [diagram_w1(p, q) for p, q in zip(*split)]
    return gaps


def _part_diagrams(graphs, fs, t, filtration):
    batch = collate(list(graphs))
    f = torch.as_tensor(np.concatenate(fs), dtype=torch.float64)
    cut = batch_node_cut_persistence if filtration == "node" else batch_cut_persistence
    parts = cut(batch.x.shape[0], batch.edges, f, t, node_graph=batch.node_graph, num_graphs=batch.num_graphs)
    out = []  # out[part][dim][graph] -> points
    for d in parts:
        dims = []
        for dim in (0, 1):
            pts, seg = (a.detach().cpu().numpy() for a in d.points(dim))
            order = np.argsort(seg, kind="stable")
            dims.append(np.split(pts[order], np.cumsum(np.bincount(seg, minlength=len(graphs)))[:-1]))
        out.append(dims)
    return out


def distribution_gap(graphs: list[Graph], fs: list, t: float = 0.5, filtration: str = "node") -> float:
    """The discrepancy of the paper's Def. 3.2 between the *distributions* of ``T_X`` and
    ``T_eps`` over ``graphs``: the optimal coupling of the two empirical measures (an assignment
    of graphs' rationale diagrams to graphs' complement diagrams), with the per-pair W1 of eq.
    ``toping-w1`` (dimensions 0 and 1 added) as ground cost in place of the bottleneck distance."""
    from scipy.optimize import linear_sum_assignment

    filtration = as_choice(filtration, "filtration", FILTRATIONS)
    fs = _check_fs(graphs, fs, filtration)
    (x0, x1), (e0, e1) = _part_diagrams(graphs, fs, t, filtration)
    n = len(graphs)
    cost = np.array([[diagram_w1(x0[i], e0[j]) + diagram_w1(x1[i], e1[j]) for j in range(n)]
                     for i in range(n)])
    r, c = linear_sum_assignment(cost)
    return float(cost[r, c].mean())


def topo_gap(graph: Graph, f, t: float = 0.5, filtration: str = "node") -> float:
    """:func:`topo_gaps` of one graph."""
    return float(topo_gaps([graph], [f], t, filtration)[0])


def cut_share(edge_scores, t: float = 0.5) -> float:
    """The share of edges whose score is above the cut ``t``: the size of G_X."""
    s = as_1d_float_array(edge_scores, "edge_scores")
    t = as_probability(t, "t")  # a cut strictly between 0 and 1
    return float((s > t).mean())


def perturbed_scores(graph: Graph, how: str, k: int, rng: np.random.Generator, on: str = "node",
                     truth=None) -> np.ndarray:
    """Scores near the oracle ``0.05 + 0.9 1[in G*] + N(0, 0.01^2)`` (clipped to [0, 1]), on the
    graph's nodes (``on="node"``, the paper's filtration) or edges (``on="edge"``): ``"add"``
    raises ``k`` elements outside the truth to its level, ``"drop"`` lowers ``k`` of the truth's,
    ``"random"`` is uniform, ``"all"`` puts every element in G_X, ``"constant"`` gives every
    element 0.7 (a collapsed explainer); ``k`` is ignored by the last three. ``truth`` (a bool
    mask) replaces the rationale, e.g. by a decoy of the same size."""
    on = as_choice(on, "on", FILTRATIONS)
    gt = (node_truth(graph) if on == "node" else graph.edge_gt.numpy().astype(bool)) if truth is None \
        else np.asarray(truth, dtype=bool)
    n = graph.num_nodes if on == "node" else len(graph.edges)
    if gt.shape != (n,):
        raise ValueError(f"truth: expected a bool mask of shape [{n}], got {gt.shape}")
    as_positive_int(k, "k", minimum=0)
    high = gt.copy()
    if how in ("add", "drop"):
        pool = np.flatnonzero(~gt if how == "add" else gt)
        if k > len(pool):
            raise ValueError(f"k: at most {len(pool)} elements to {how}, got {k}")
        high[rng.choice(pool, k, replace=False)] = how == "add"
    elif how == "random":
        return rng.random(n)
    elif how in ("all", "constant"):
        level = 0.95 if how == "all" else 0.7
        return np.clip(level + rng.normal(0, 0.01, n), 0, 1)
    else:
        raise ValueError(f"how: expected 'add', 'drop', 'random', 'all' or 'constant', got {how!r}")
    return np.clip(0.05 + 0.9 * high + rng.normal(0, 0.01, n), 0, 1)


def total_persistence(num_nodes: int, edges, f: torch.Tensor, t: float = 0.5,
                      filtration: str = "edge") -> torch.Tensor:
    """Sum of (death - birth) over both diagrams of the cut, differentiable in ``f`` (edge scores
    for ``"edge"``, node scores for ``"node"``)."""
    cut = node_cut_persistence if as_choice(filtration, "filtration", FILTRATIONS) == "node" else cut_persistence
    return sum((d.h0[:, 1] - d.h0[:, 0]).sum() + (d.h1[:, 1] - d.h1[:, 0]).sum()
               for d in cut(num_nodes, edges, f, t))


def persistence_self_check(n_graphs: int = 50, n_grad: int = 5, nodes: int = 14, p: float = 0.25,
                           seed: int = 0) -> tuple[bool, float]:
    """Brute-force checks of :func:`cut_persistence` and :func:`node_cut_persistence` on random
    G(n, p) graphs cut at random scores.

    Returns ``(counts_ok, grad_err)``: whether, for both parts of every graph under both
    filtrations, the essential H0 points number the connected components ``c`` of the part
    (networkx; under the node filtration a part holds only its own vertices) and the H1 points
    ``|E_part| - |V_part| + c``; and the largest gap between autograd and central finite
    differences of :func:`total_persistence` over the first ``n_grad`` graphs, both filtrations.
    """
    n_graphs = as_positive_int(n_graphs, "n_graphs")
    n_grad = as_positive_int(n_grad, "n_grad", minimum=0)
    nodes = as_positive_int(nodes, "nodes", minimum=2)
    if not 0 < p <= 1:
        raise ValueError(f"p: expected an edge probability in (0, 1], got {p!r}")
    rng = np.random.default_rng(seed)
    ok, err = True, 0.0
    for i in range(n_graphs):
        G = nx.gnp_random_graph(nodes, p, seed=int(rng.integers(2**31)))
        edges = torch.tensor(list(G.edges), dtype=torch.long).reshape(-1, 2)
        fe = torch.tensor(rng.random(len(edges)), requires_grad=True)
        fv = torch.tensor(rng.random(nodes), requires_grad=True)
        for d, mask in zip(cut_persistence(nodes, edges, fe), (fe > 0.5, fe <= 0.5)):
            sub = nx.Graph(edges[mask].tolist())
            sub.add_nodes_from(range(nodes))
            c = nx.number_connected_components(sub)
            ok &= int((d.h0_edge == -1).sum()) == c and len(d.h1) == int(mask.sum()) - nodes + c
        for d, side in zip(node_cut_persistence(nodes, edges, fv), (fv > 0.5, fv <= 0.5)):
            keep = set(np.flatnonzero(side.numpy()).tolist())
            sub = G.subgraph(keep)
            c = nx.number_connected_components(sub) if keep else 0
            ok &= int((d.h0_edge == -1).sum()) == c and len(d.h1) == sub.number_of_edges() - len(keep) + c
        if i < n_grad and len(edges):
            for filtration, f in (("edge", fe), ("node", fv)):
                (grad,) = torch.autograd.grad(total_persistence(nodes, edges, f, filtration=filtration), f)
                x = f.detach()
                fd = torch.stack([(total_persistence(nodes, edges, x + h, filtration=filtration)
                                   - total_persistence(nodes, edges, x - h, filtration=filtration)) / 2e-6
                                  for h in 1e-6 * torch.eye(len(x), dtype=x.dtype)])
                err = max(err, float((grad - fd).abs().max()))
    return bool(ok), err
