"""Metrics: explanation ROC-AUC, Ashman's D of a two-means split, the "edge on a cycle"
explainer, and the per-graph topological gap used to test Theorem 3.4."""

from __future__ import annotations

import networkx as nx
import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from companion.toping.data import Graph, collate
from companion.toping.losses import diagram_w1_lines
from companion.toping.persistence import batch_cut_persistence, cut_persistence
from companion.validation import as_1d_float_array

__all__ = ["explanation_auc", "two_means_1d", "ashman_d", "cycle_edge_scores", "topo_gaps", "topo_gap",
           "perturbed_scores", "total_persistence", "persistence_self_check"]


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
    bridges = {tuple(sorted(e)) for e in nx.bridges(graph.to_networkx())}
    return np.array([tuple(e) not in bridges for e in graph.edges.tolist()], dtype=float)


def topo_gaps(graphs: list[Graph], fs: list, t: float = 0.5) -> np.ndarray:
    """Per graph, W1 between its rationale and complement diagrams cut at ``t`` (eq.
    ``toping-w1``), for edge scores ``fs[i]`` of ``graphs[i]``; one union-find pass for all."""
    if len(graphs) != len(fs) or not graphs:
        raise ValueError(f"fs: expected one score vector per graph ({len(graphs)}), got {len(fs)}")
    batch = collate(graphs)
    f = torch.as_tensor(np.concatenate([np.asarray(v, dtype=float) for v in fs]), dtype=torch.float64)
    parts = batch_cut_persistence(batch.x.shape[0], batch.edges, f, t, node_graph=batch.node_graph,
                                  num_graphs=batch.num_graphs)
    gaps = np.zeros(len(graphs))
    for dim, coord in ((0, 1), (1, 0)):
        split = []
        for d in parts:
            pts, seg = (a.detach().cpu().numpy() for a in d.points(dim))
            order = np.argsort(seg, kind="stable")
            split.append(np.split(pts[order], np.cumsum(np.bincount(seg, minlength=len(graphs)))[:-1]))
        pos = [[p[:, coord] for p in s] for s in split]
        diag = [[(p[:, 1] - p[:, 0]) / 2 for p in s] for s in split]
        gaps += diagram_w1_lines(pos[0], pos[1], diag[0], diag[1])
    return gaps


def topo_gap(graph: Graph, f, t: float = 0.5) -> float:
    """:func:`topo_gaps` of one graph."""
    return float(topo_gaps([graph], [f], t)[0])


def perturbed_scores(graph: Graph, how: str, k: int, rng: np.random.Generator) -> np.ndarray:
    """Edge scores near the oracle ``0.05 + 0.9 1[e in G*] + N(0, 0.01^2)`` (clipped to [0, 1]):
    ``"add"`` raises ``k`` complement edges to the rationale's level, ``"drop"`` lowers ``k``
    rationale edges, ``"random"`` is uniform, ``"all"`` puts every edge in G_X, ``"constant"``
    gives every edge 0.7 (a collapsed explainer); ``k`` is ignored by the last three."""
    gt = graph.edge_gt.numpy().astype(bool)
    high = gt.copy()
    if how in ("add", "drop"):
        pool = np.flatnonzero(~gt if how == "add" else gt)
        if k > len(pool):
            raise ValueError(f"k: at most {len(pool)} edges to {how}, got {k}")
        high[rng.choice(pool, k, replace=False)] = how == "add"
    elif how == "random":
        return rng.random(len(gt))
    elif how in ("all", "constant"):
        level = 0.95 if how == "all" else 0.7
        return np.clip(level + rng.normal(0, 0.01, len(gt)), 0, 1)
    else:
        raise ValueError(f"how: expected 'add', 'drop', 'random', 'all' or 'constant', got {how!r}")
    return np.clip(0.05 + 0.9 * high + rng.normal(0, 0.01, len(gt)), 0, 1)


def total_persistence(num_nodes: int, edges, f: torch.Tensor, t: float = 0.5) -> torch.Tensor:
    """Sum of (death - birth) over both diagrams of the cut, differentiable in ``f``."""
    return sum((d.h0[:, 1] - d.h0[:, 0]).sum() + (d.h1[:, 1] - d.h1[:, 0]).sum()
               for d in cut_persistence(num_nodes, edges, f, t))


def persistence_self_check(n_graphs: int = 50, n_grad: int = 5, nodes: int = 14, p: float = 0.25,
                           seed: int = 0) -> tuple[bool, float]:
    """Brute-force checks of :func:`cut_persistence` on random G(n, p) graphs cut at random scores.

    Returns ``(counts_ok, grad_err)``: whether, for both parts of every graph, the essential H0
    points number the connected components ``c`` (networkx) and the H1 points ``|E_part| - |V| + c``;
    and the largest gap between autograd and central finite differences of
    :func:`total_persistence` over the first ``n_grad`` graphs.
    """
    rng = np.random.default_rng(seed)
    ok, err = True, 0.0
    for i in range(n_graphs):
        G = nx.gnp_random_graph(nodes, p, seed=int(rng.integers(2**31)))
        edges = torch.tensor(list(G.edges), dtype=torch.long).reshape(-1, 2)
        f = torch.tensor(rng.random(len(edges)), requires_grad=True)
        for d, mask in zip(cut_persistence(nodes, edges, f), (f > 0.5, f <= 0.5)):
            sub = nx.Graph(edges[mask].tolist())
            sub.add_nodes_from(range(nodes))
            c = nx.number_connected_components(sub)
            ok &= int((d.h0_edge == -1).sum()) == c and len(d.h1) == int(mask.sum()) - nodes + c
        if i < n_grad and len(edges):
            (grad,) = torch.autograd.grad(total_persistence(nodes, edges, f), f)
            x = f.detach()
            fd = torch.stack([(total_persistence(nodes, edges, x + h) - total_persistence(nodes, edges, x - h)) / 2e-6
                              for h in 1e-6 * torch.eye(len(x), dtype=x.dtype)])
            err = max(err, float((grad - fd).abs().max()))
    return bool(ok), err
