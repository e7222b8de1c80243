"""Seeded, offline graph datasets with ground-truth rationales: BA bases with house and grid
motifs, and Spurious-Motif (cycle, house or crane on a tree, ladder or wheel base).

Each graph is a :class:`Graph`: constant node features, its undirected edges once each
(``edges: [E, 2]``, ``u < v``), a label and ``edge_gt: [E]``, the edges with both ends inside a
motif (the ground-truth rationale; the edge that attaches a motif is not part of it). The
variform family BA-HouseOrGrid-nRnd draws, for a positive graph, ``i`` in 1..n and then ``i``
houses, ``i`` grids or both; a negative graph is a base alone.

Two shortcuts of the published generators are closed on request. ``match_sizes`` draws the size
of a negative graph's base from the same distribution as a positive graph's total size, so the
node count says nothing about the label. ``base_extra_edges`` adds random chords to every base:
a Barabasi-Albert base with ``m = 1`` is a tree, so without chords *every* cycle is a motif and
"this edge lies on a cycle" is a perfect explainer.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch

from companion.validation import as_choice, as_positive_int, as_real

__all__ = ["Graph", "Batch", "collate", "make_ba_house_grid", "make_spmotif", "MOTIFS"]

MOTIFS = {
    "house": nx.house_graph,  # 5 nodes, 6 edges
    "grid": lambda: nx.convert_node_labels_to_integers(nx.grid_2d_graph(3, 3)),  # 9 nodes, 12 edges
    "cycle": lambda: nx.cycle_graph(5),  # 5 nodes, 5 edges
    "crane": lambda: nx.complete_bipartite_graph(2, 3),  # 5 nodes, 6 edges
}
SPMOTIF_LABELS = ("cycle", "house", "crane")


@dataclass
class Graph:
    """One graph: ``x [N, F]``, ``edges [E, 2]`` (u < v), label ``y``, rationale ``edge_gt [E]``."""

    x: torch.Tensor
    edges: torch.Tensor
    y: int
    edge_gt: torch.Tensor
    motifs: tuple[str, ...] = ()
    base: int = -1  # Spurious-Motif only: the base type (0 tree, 1 ladder, 2 wheel)

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    def to_networkx(self) -> nx.Graph:
        g = nx.Graph()
        g.add_nodes_from(range(self.num_nodes))
        g.add_edges_from(self.edges.tolist())
        return g


@dataclass
class Batch:
    """Disjoint union of graphs: node ids offset, ``node_graph [N]`` and ``edge_graph [E]`` say whose."""

    x: torch.Tensor
    edges: torch.Tensor
    y: torch.Tensor
    edge_gt: torch.Tensor
    node_graph: torch.Tensor
    edge_graph: torch.Tensor
    num_graphs: int

    @property
    def edge_index(self) -> torch.Tensor:
        """``[2, 2E]``: each edge in both directions, the E forward ones first."""
        return torch.cat([self.edges.T, self.edges.T.flip(0)], 1)

    def to(self, device) -> "Batch":
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in vars(self).items()}
        return Batch(**moved)


def collate(graphs: list[Graph]) -> Batch:
    """One :class:`Batch` from a non-empty list of graphs."""
    if not graphs:
        raise ValueError("graphs: expected at least one graph, got an empty list")
    sizes = torch.tensor([g.num_nodes for g in graphs])
    offsets = torch.cumsum(sizes, 0) - sizes
    return Batch(
        x=torch.cat([g.x for g in graphs]),
        edges=torch.cat([g.edges + o for g, o in zip(graphs, offsets)]),
        y=torch.tensor([g.y for g in graphs]),
        edge_gt=torch.cat([g.edge_gt for g in graphs]),
        node_graph=torch.repeat_interleave(torch.arange(len(graphs)), sizes),
        edge_graph=torch.repeat_interleave(torch.arange(len(graphs)),
                                           torch.tensor([len(g.edges) for g in graphs])),
        num_graphs=len(graphs),
    )


def _base(n: int, extra: int, rng: np.random.Generator) -> nx.Graph:
    """BA(n, m=1), a tree, plus ``extra`` random chords between non-adjacent nodes."""
    g = nx.barabasi_albert_graph(n, 1, seed=int(rng.integers(2**31)))
    while extra > 0:
        u, v = (int(a) for a in rng.choice(n, 2, replace=False))
        if not g.has_edge(u, v):
            g.add_edge(u, v)
            extra -= 1
    return g


def _attach(base: nx.Graph, motifs: list[str], rng: np.random.Generator) -> tuple[nx.Graph, set]:
    """Attach each motif by one edge between a random base node and a random motif node."""
    g, gt, n_base = base.copy(), set(), base.number_of_nodes()
    for name in motifs:
        m = MOTIFS[name]()
        off = g.number_of_nodes()
        g.add_edges_from((u + off, v + off) for u, v in m.edges)
        gt |= {(min(u, v) + off, max(u, v) + off) for u, v in m.edges}
        g.add_edge(int(rng.integers(n_base)), off + int(rng.integers(m.number_of_nodes())))
    return g, gt


def _to_graph(g: nx.Graph, gt: set, y: int, motifs: tuple[str, ...], base: int = -1) -> Graph:
    edges = torch.tensor(sorted((min(u, v), max(u, v)) for u, v in g.edges), dtype=torch.long)
    return Graph(x=torch.ones(g.number_of_nodes(), 1), edges=edges, y=y,
                 edge_gt=torch.tensor([tuple(e) in gt for e in edges.tolist()]), motifs=motifs, base=base)


def _motif_draw(mode: str, n_max: int, rng: np.random.Generator) -> tuple[int, list[str]]:
    """(label, motifs) of one graph under ``mode``."""
    if mode == "housegrid":
        y = int(rng.integers(2))
        return y, ["grid" if y else "house"]
    if mode == "nrnd":
        if rng.random() < 0.5:
            return 0, []
        i = int(rng.integers(1, n_max + 1))
        return 1, [["house"] * i, ["grid"] * i, ["house", "grid"] * i][int(rng.integers(3))]
    has = [name for name in ("house", "grid") if rng.random() < 0.5]
    return int(bool(has) if mode == "or" else len(has) == 2), has


def make_ba_house_grid(n_graphs: int, mode: str = "nrnd", n_max: int = 2, base_nodes: int = 20,
                       base_extra_edges: int = 0, match_sizes: bool = True, seed: int = 0) -> list[Graph]:
    """BA-HouseGrid (``"housegrid"``), BA-HouseOrGrid / -AndGrid (``"or"``, ``"and"``, rebalanced
    to 50/50 by rejection) or the variform BA-HouseOrGrid-nRnd (``"nrnd"``, ``n_max = n``).

    With ``match_sizes`` a graph without motifs gets a base of ``base_nodes`` plus the motif
    nodes of a pattern drawn from the positive class's distribution.
    """
    n_graphs = as_positive_int(n_graphs, "n_graphs", minimum=2)
    mode = as_choice(mode, "mode", ("housegrid", "or", "and", "nrnd"))
    n_max = as_positive_int(n_max, "n_max")
    base_nodes = as_positive_int(base_nodes, "base_nodes", minimum=2)
    base_extra_edges = as_positive_int(base_extra_edges, "base_extra_edges", minimum=0)
    if base_extra_edges > base_nodes:
        raise ValueError(f"base_extra_edges: expected at most base_nodes={base_nodes}, got {base_extra_edges}")
    rng = np.random.default_rng(seed)
    quota = {0: n_graphs - n_graphs // 2, 1: n_graphs // 2}
    graphs: list[Graph] = []
    while len(graphs) < n_graphs:
        y, motifs = _motif_draw(mode, n_max, rng)
        if quota[y] == 0:
            continue  # rejection sampling to a balanced set
        quota[y] -= 1
        n_base = base_nodes
        if match_sizes and not motifs:
            pattern = []
            while not pattern:
                pattern = _motif_draw(mode, n_max, rng)[1]
            n_base += sum(MOTIFS[name]().number_of_nodes() for name in pattern)
        g, gt = _attach(_base(n_base, base_extra_edges, rng), motifs, rng)
        graphs.append(_to_graph(g, gt, y, tuple(motifs)))
    order = rng.permutation(n_graphs)
    return [graphs[i] for i in order]


def _spmotif_base(kind: int, rng: np.random.Generator) -> nx.Graph:
    """Base 0: a binary tree of depth 3; 1: a ladder of 8-11 rungs; 2: a wheel of 15-19 nodes."""
    if kind == 0:
        return nx.balanced_tree(2, 3)
    if kind == 1:
        return nx.ladder_graph(int(rng.integers(8, 12)))
    return nx.wheel_graph(int(rng.integers(15, 20)))


def make_spmotif(n_per_class: int, bias: float, split: str = "train", perturb: float = 0.05,
                 seed: int = 0) -> list[Graph]:
    """Spurious-Motif (DIR): the motif gives the label (0 cycle, 1 house, 2 crane); the base is
    the label's own base type with probability ``bias`` and another one otherwise, in the
    training and validation splits; the test split draws bases independently (bias 1/3). Then
    ``floor(perturb |E|)`` random edges are added (never rationale edges)."""
    n_per_class = as_positive_int(n_per_class, "n_per_class")
    split = as_choice(split, "split", ("train", "val", "test"))
    as_real(bias, "bias", low=0, high=1)
    as_real(perturb, "perturb", low=0, high=1, high_open=True)
    b = 1 / 3 if split == "test" else float(bias)
    rng = np.random.default_rng(seed)
    graphs = []
    for y in np.repeat(np.arange(3), n_per_class):
        others = [k for k in range(3) if k != y]
        kind = int(y) if rng.random() < b else others[int(rng.integers(2))]
        g, gt = _attach(_spmotif_base(kind, rng), [SPMOTIF_LABELS[y]], rng)
        n, extra = g.number_of_nodes(), int(perturb * g.number_of_edges())
        while extra > 0:
            u, v = (int(a) for a in rng.choice(n, 2, replace=False))
            if not g.has_edge(u, v):
                g.add_edge(u, v)
                extra -= 1
        graphs.append(_to_graph(g, gt, int(y), (SPMOTIF_LABELS[y],), base=kind))
    return [graphs[i] for i in rng.permutation(len(graphs))]
