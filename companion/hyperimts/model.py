"""HyperIMTS: an irregular multivariate time series as a hypergraph (Li et al., ICML 2025).

Every observation, and every forecast query, is a *node*. A node belongs to exactly two
hyperedges: the *temporal* hyperedge of its timestamp (all nodes of the sample observed at that
time) and the *variable* hyperedge of its variable. One layer of the model

1. updates each hyperedge from its member nodes by attention (node -> hyperedge, eq. hyperimts-n2e),
2. in the last layer, lets the variable hyperedges of a sample attend to each other, mixing a
   learned similarity with the similarity of co-observed nodes, weighted by how often the two
   variables are observed together (irregularity-aware, eq. hyperimts-v2v),
3. updates each node from its two hyperedges (hyperedge -> node, eq. hyperimts-e2n).

A linear decoder reads each query node (eq. hyperimts-dec). Everything is a gather or a scatter
over the rows of a flat :class:`~companion.data.imts.IMTSBatch`: there is no padding and no
Python loop over observations, and the forecast of a node does not depend on the order of the
rows (tests/test_hyperimts.py checks it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from companion.data.imts import IMTSBatch

__all__ = ["Hypergraph", "build_hypergraph", "pairs_within", "incidence_matrices", "segment_softmax", "HyperedgeAttention",
           "IrregularityAwareAttention", "HyperIMTS"]


@dataclass(frozen=True)
class Hypergraph:
    """The hypergraph of a batch: for each node its temporal and variable hyperedge.

    ``time_edge[n]`` indexes the distinct (sample, time) pairs, sorted by sample then time, with
    their times in ``edge_time``; ``var_edge[n] = sample * V + var``. ``pairs`` lists every
    ordered pair of nodes sharing a temporal hyperedge (a node with itself included): the
    co-observations the irregularity-aware attention counts.
    """

    time_edge: torch.Tensor   # (n,) long
    var_edge: torch.Tensor    # (n,) long
    edge_time: torch.Tensor   # (n_time_edges,)
    n_time_edges: int
    n_var_edges: int
    pairs: torch.Tensor       # (2, n_pairs) long


def build_hypergraph(time: torch.Tensor, var: torch.Tensor, sample: torch.Tensor, n_samples: int, n_vars: int,
                     cross_variable: bool = True) -> Hypergraph:
    """Hyperedge membership of each node from its (sample, time, variable), in any row order.

    With ``cross_variable=False`` the temporal hyperedges are split by variable, so a node only
    ever meets nodes of its own variable: the channel-independent ablation.
    """
    key = sample.double() * (float(time.max()) + 1.0) + time.double()
    if not cross_variable:
        key = key * n_vars + var.double()
    uniq, time_edge = torch.unique(key, return_inverse=True)
    edge_time = torch.zeros(uniq.numel()).index_put_((time_edge,), time.float())
    return Hypergraph(time_edge, sample * n_vars + var, edge_time, uniq.numel(), n_samples * n_vars,
                      pairs_within(time_edge, uniq.numel()))


def pairs_within(group: torch.Tensor, n_groups: int, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Every ordered pair ``(i, j)`` of rows in the same group, for ``i`` in ``rows`` (default: all).

    Built with ``repeat_interleave`` and an argsort, without a Python loop; ``(2, n_pairs)``.
    """
    rows = torch.arange(group.numel()) if rows is None else rows
    sizes = torch.bincount(group, minlength=n_groups)
    order = torch.argsort(group, stable=True)
    start = sizes.cumsum(0) - sizes
    rep = sizes[group[rows]]
    first = torch.repeat_interleave(rows, rep)
    within = torch.arange(int(rep.sum())) - torch.repeat_interleave(rep.cumsum(0) - rep, rep)
    return torch.stack([first, order[start[group[first]] + within]])


def incidence_matrices(time, var, n_vars: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dense incidence of one sample: ``I_T`` (L x N), ``I_V`` (V x N) and the L distinct times.

    ``I_T[l, n] = 1`` when node ``n`` is observed at the l-th distinct time, ``I_V[v, n] = 1``
    when it belongs to variable ``v`` (eq. hyperimts-incidence). For pictures and exercises;
    the model itself never builds these matrices.
    """
    time = torch.as_tensor(time, dtype=torch.float64)
    var = torch.as_tensor(var, dtype=torch.long)
    times, t_idx = torch.unique(time, return_inverse=True)
    n = time.numel()
    I_T = torch.zeros(times.numel(), n)
    I_T[t_idx, torch.arange(n)] = 1.0
    I_V = torch.zeros(n_vars, n)
    I_V[var, torch.arange(n)] = 1.0
    return I_T, I_V, times


def segment_softmax(scores: torch.Tensor, segment: torch.Tensor, n_segments: int) -> torch.Tensor:
    """Softmax of ``scores`` (n, H) over the rows of each segment (a hyperedge's members).

    The largest score of each segment is subtracted first, so large scores do not overflow.
    """
    idx = segment[:, None].expand_as(scores)
    top = torch.full((n_segments, scores.shape[1]), -torch.inf, dtype=scores.dtype)
    top = top.scatter_reduce(0, idx, scores.detach(), "amax")
    w = torch.exp(scores - top[segment])
    total = torch.zeros(n_segments, scores.shape[1], dtype=scores.dtype).index_add(0, segment, w)
    return w / total[segment]


class HyperedgeAttention(nn.Module):
    """Node -> hyperedge attention, eq. (hyperimts-n2e): each hyperedge attends over its members.

    A multi-head attention block in the style of GraFITi: the hyperedge state is the query, the
    members' features are keys and values, the projected query is added back, then a ReLU
    feed-forward residual. Scores are scaled by sqrt(d), as in the paper's code.
    """

    def __init__(self, d_model: int, d_key: int, n_heads: int):
        super().__init__()
        self.h, self.d = n_heads, d_model
        self.q, self.k, self.v = nn.Linear(d_model, d_model), nn.Linear(d_key, d_model), nn.Linear(d_key, d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, edges: torch.Tensor, members: torch.Tensor, edge_of: torch.Tensor) -> torch.Tensor:
        E, n, H, dh = edges.shape[0], members.shape[0], self.h, self.d // self.h
        q = self.q(edges)
        k, v = self.k(members).view(n, H, dh), self.v(members).view(n, H, dh)
        scores = (q.view(E, H, dh)[edge_of] * k).sum(-1) / math.sqrt(self.d)
        alpha = segment_softmax(scores, edge_of, E)                                # (n, H)
        message = torch.zeros(E, H, dh).index_add(0, edge_of, alpha[..., None] * v).view(E, self.d)
        o = q + message
        return o + torch.relu(self.out(o))


class IrregularityAwareAttention(nn.Module):
    """Variable hyperedge -> variable hyperedge attention, eq. (hyperimts-v2v).

    Within a sample, the score of variables (u, v) blends a learned similarity of their hyperedge
    states with the similarity of their nodes observed at the same times, weighted by the share
    ``c_uv`` of u's timestamps at which v is observed too. Variables never observed together
    fall back to the learned similarity.
    """

    def __init__(self, d_model: int, d_fine: int = 4):
        super().__init__()
        self.d, self.d_fine = d_model, d_fine
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.fine = nn.Linear(d_model, d_fine)

    def forward(self, e_var: torch.Tensor, h: torch.Tensor, graph: Hypergraph, var: torch.Tensor,
                sample: torch.Tensor, n_samples: int, n_vars: int):
        B, V = n_samples, n_vars
        E = e_var.view(B, V, self.d)
        static = self.q(E) @ self.k(E).transpose(1, 2) / math.sqrt(self.d)          # (B, V, V)
        i, j = graph.pairs
        cell = (sample[i] * V + var[i]) * V + var[j]                              # (b, u, v) of each pair
        z = self.fine(h)
        co = torch.zeros(B * V * V).index_add(0, cell, torch.ones(cell.numel())).view(B, V, V)
        fine = torch.zeros(B * V * V).index_add(0, cell, (z[i] * z[j]).sum(-1)).view(B, V, V)
        fine = fine / co.clamp(min=1) / math.sqrt(self.d_fine)                     # mean over shared times
        seen = torch.diagonal(co, dim1=1, dim2=2)                                 # timestamps of u
        c = co / seen.clamp(min=1)[:, :, None]
        scores = (1 - c) * static + c * fine
        self.last_weights = torch.softmax(scores, -1).detach()
        return (E + torch.softmax(scores, -1) @ self.v(E)).view(B * V, self.d), c


class HyperIMTS(nn.Module):
    """The HyperIMTS forecaster on a flat :class:`IMTSBatch`; ``forward`` returns one value per row.

    ``cross_variable=False`` cuts every path between variables (temporal hyperedges split by
    variable, no variable-to-variable attention); ``use_var_attention=False`` drops only the
    irregularity-aware attention of eq. (hyperimts-v2v).
    """

    def __init__(self, n_vars: int, d_model: int = 32, n_layers: int = 2, n_heads: int = 4,
                 cross_variable: bool = True, use_var_attention: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model: must be a multiple of n_heads ({n_heads}), got {d_model}")
        self.n_vars, self.d, self.cross_variable = n_vars, d_model, cross_variable
        self.use_var_attention = use_var_attention and cross_variable
        self.node_in = nn.Linear(2, d_model)                          # eq. (hyperimts-init)
        self.time_in = nn.Linear(1, d_model)
        self.var_in = nn.Parameter(torch.randn(n_vars, d_model) * 0.5)
        self.to_time = nn.ModuleList(HyperedgeAttention(d_model, 2 * d_model, n_heads) for _ in range(n_layers))
        self.to_var = nn.ModuleList(HyperedgeAttention(d_model, 2 * d_model, n_heads) for _ in range(n_layers))
        self.to_node = nn.ModuleList(nn.Linear(3 * d_model, d_model) for _ in range(n_layers))
        self.var_attention = IrregularityAwareAttention(d_model)
        with torch.no_grad():  # frequencies from 1 to 30 cycles per unit time, so that time tells nodes apart
            self.time_in.weight.copy_(2 * math.pi * torch.logspace(0, 1.5, d_model)[:, None])
            self.time_in.bias.uniform_(0, 2 * math.pi)
        self.decoder = nn.Linear(3 * d_model, 1)

    def forward(self, batch: IMTSBatch) -> torch.Tensor:
        return self.forward_nodes(batch.time, batch.var, batch.inputs, batch.is_query, batch.sample,
                                  batch.n_samples)

    def forward_nodes(self, time, var, x, is_query, sample, n_samples: int) -> torch.Tensor:
        """The forecast of every node from flat rows in any order (``x`` must be 0 at queries)."""
        g = build_hypergraph(time, var, sample, n_samples, self.n_vars, self.cross_variable)
        q = is_query.float()
        h = torch.relu(self.node_in(torch.stack([x * (1 - q), q], -1)))
        e_time = torch.sin(self.time_in(g.edge_time[:, None]))
        e_var = torch.relu(self.var_in).repeat(n_samples, 1)
        for layer in range(len(self.to_time)):
            # eq. (hyperimts-n2e): both hyperedge sets are updated from the same node states
            new_time = self.to_time[layer](e_time, torch.cat([e_var[g.var_edge], h], -1), g.time_edge)
            new_var = self.to_var[layer](e_var, torch.cat([e_time[g.time_edge], h], -1), g.var_edge)
            e_time, e_var = new_time, new_var
            if layer == len(self.to_time) - 1 and self.use_var_attention:   # eq. (hyperimts-v2v)
                e_var, self.co_observation = self.var_attention(e_var, h, g, var, sample, n_samples,
                                                                self.n_vars)
            # eq. (hyperimts-e2n): a node is updated from its two hyperedges
            h = torch.relu(h + self.to_node[layer](torch.cat([h, e_time[g.time_edge], e_var[g.var_edge]], -1)))
        return self.decoder(torch.cat([h, e_time[g.time_edge], e_var[g.var_edge]], -1)).squeeze(-1)

