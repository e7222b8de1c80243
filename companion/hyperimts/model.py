"""HyperIMTS: an irregular multivariate time series as a hypergraph (Li et al., ICML 2025).

Every observation, and every forecast query, is a *node*. A node belongs to exactly two
hyperedges: the *temporal* hyperedge of its timestamp (all nodes of the sample observed at that
time) and the *variable* hyperedge of its variable. One layer of the model

1. updates each hyperedge from its member nodes by attention (node -> hyperedge, eq. hyperimts-n2e),
2. updates each node by an attention over all the nodes of its sample, whose keys carry each
   node's two hyperedges, then mixes the result with its own hyperedges (hyperedge -> node,
   eqs. hyperimts-e2n and hyperimts-node-update),
3. in the last layer, lets the variable hyperedges of a sample attend to each other, mixing a
   learned similarity with the similarity of co-observed nodes, weighted by how often the two
   variables are observed together (irregularity-aware, eq. hyperimts-v2v).

A linear decoder reads each query node (eq. hyperimts-dec). Step 2 is the only place where a
node reads another node directly: it is how a query at time t can look at another variable's
observation near t - lag. ``node_update="linear"`` replaces it by the update the authors' code
falls back to when the attention does not fit in memory (each node reads only its own two
hyperedges), the ablation of the chapter.

The hyperedge steps are gathers and scatters over the rows of a flat
:class:`~companion.data.imts.IMTSBatch` (no padding, no Python loop over observations); the node
attention lays each sample's nodes out in one row of a ``(B, N_max)`` block for that step only,
with a mask that keeps every node inside its own sample. Every tensor is created on the device
of the inputs, and the forecast of a node does not depend on the order of the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from companion.data.imts import IMTSBatch
from companion.validation import as_choice, as_finite_tensor, as_index_tensor, as_positive_int

__all__ = ["Hypergraph", "build_hypergraph", "pairs_within", "incidence_matrices", "segment_softmax",
           "HyperedgeAttention", "NodeAttention", "IrregularityAwareAttention", "HyperIMTS", "NODE_UPDATES",
           "init_time_embedding", "masked_mse", "GATES"]

NODE_UPDATES = ("attention", "linear")


@dataclass(frozen=True)
class Hypergraph:
    """The hypergraph of a batch: for each node its temporal and variable hyperedge and its slot.

    ``time_edge[n]`` indexes the distinct (sample, time) pairs, sorted by sample then time, with
    their times in ``edge_time`` (float64); ``var_edge[n] = sample * V + var``. ``pairs`` lists
    every ordered pair of nodes sharing a temporal hyperedge (a node with itself included): the
    co-observations the irregularity-aware attention counts. The node attention runs within
    ``group``s of nodes (a sample; a sample's variable in the channel-independent ablation):
    ``slot[n]`` is the node's position in its group, ``width`` the largest group's size.
    """

    time_edge: torch.Tensor   # (n,) long
    var_edge: torch.Tensor    # (n,) long
    edge_time: torch.Tensor   # (n_time_edges,) float64
    n_time_edges: int
    n_var_edges: int
    pairs: torch.Tensor       # (2, n_pairs) long
    sample: torch.Tensor      # (n,) long
    n_samples: int
    group: torch.Tensor       # (n,) long
    slot: torch.Tensor        # (n,) long
    n_groups: int
    width: int


def build_hypergraph(time: torch.Tensor, var: torch.Tensor, sample: torch.Tensor, n_samples: int, n_vars: int,
                     cross_variable: bool = True) -> Hypergraph:
    """Hyperedge membership of each node from its (sample, time, variable), in any row order.

    Timestamps are compared exactly, in float64. With ``cross_variable=False`` the temporal
    hyperedges are split by variable, so a node only ever meets nodes of its own variable: the
    channel-independent ablation.
    """
    n_samples, n_vars = as_positive_int(n_samples, "n_samples"), as_positive_int(n_vars, "n_vars")
    _check_rows(time, var, n_vars)
    as_index_tensor(sample, "sample", n=time.numel(), high=n_samples)
    time_edge, edge_time = _distinct(sample, time.double(), None if cross_variable else var)
    group, n_groups = (sample, n_samples) if cross_variable else (sample * n_vars + var, n_samples * n_vars)
    sizes = torch.bincount(group, minlength=n_groups)
    order = torch.argsort(group, stable=True)
    slot = torch.empty_like(group)
    slot[order] = torch.arange(group.numel(), device=group.device) - (sizes.cumsum(0) - sizes)[group[order]]
    n_edges = edge_time.numel()
    return Hypergraph(time_edge, sample * n_vars + var, edge_time, n_edges, n_samples * n_vars,
                      pairs_within(time_edge, n_edges), sample, n_samples, group, slot, n_groups, int(sizes.max()))


def _check_rows(time: torch.Tensor, var: torch.Tensor, n_vars: int) -> None:
    """Flat rows: finite timestamps, one integer variable id in ``0..n_vars-1`` per row."""
    as_finite_tensor(time, "time", ndim=1)
    as_index_tensor(var, "var", n=time.numel(), high=n_vars)


def _distinct(sample: torch.Tensor, time: torch.Tensor, var: torch.Tensor | None):
    """Ids of the distinct (sample, time[, var]) of the rows, numbered in sorted order, and their times.

    A lexicographic sort (stable argsorts, last key first), then a new id wherever a key changes:
    exact comparisons, no hashing of floats.
    """
    keys = [sample, time] + ([] if var is None else [var])
    order = torch.arange(sample.numel(), device=sample.device)
    for key in reversed(keys):
        order = order[torch.argsort(key[order], stable=True)]
    new = torch.zeros_like(sample, dtype=torch.bool)
    new[0] = True
    for key in keys:
        new[1:] |= key[order][1:] != key[order][:-1]
    ids = torch.cumsum(new, 0) - 1
    return torch.empty_like(ids).index_put_((order,), ids), time[order][new]


def pairs_within(group: torch.Tensor, n_groups: int, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Every ordered pair ``(i, j)`` of rows in the same group, for ``i`` in ``rows`` (default: all).

    Built with ``repeat_interleave`` and an argsort, without a Python loop; ``(2, n_pairs)``.
    """
    n_groups = as_positive_int(n_groups, "n_groups")
    if not isinstance(group, torch.Tensor):
        raise ValueError(f"group: expected a 1-D integer tensor of group ids in 0..{n_groups - 1}, got "
                         f"{type(group).__name__}")
    as_index_tensor(group, "group", high=n_groups, empty=True)
    dev = group.device
    rows = torch.arange(group.numel(), device=dev) if rows is None else rows
    sizes = torch.bincount(group, minlength=n_groups)
    order = torch.argsort(group, stable=True)
    start = sizes.cumsum(0) - sizes
    rep = sizes[group[rows]]
    first = torch.repeat_interleave(rows, rep)
    within = torch.arange(int(rep.sum()), device=dev) - torch.repeat_interleave(rep.cumsum(0) - rep, rep)
    return torch.stack([first, order[start[group[first]] + within]])


def incidence_matrices(time, var, n_vars: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Dense incidence of one sample: ``I_T`` (L x N), ``I_V`` (V x N) and the L distinct times.

    ``I_T[l, n] = 1`` when node ``n`` is observed at the l-th distinct time, ``I_V[v, n] = 1``
    when it belongs to variable ``v`` (eq. hyperimts-incidence). For pictures and exercises;
    the model itself never builds these matrices.
    """
    n_vars = as_positive_int(n_vars, "n_vars")
    time = torch.as_tensor(time, dtype=torch.float64)
    var = torch.as_tensor(var)
    _check_rows(time, var, n_vars)
    var = var.long()
    times, t_idx = torch.unique(time, return_inverse=True)
    n = time.numel()
    I_T = torch.zeros(times.numel(), n)
    I_T[t_idx, torch.arange(n)] = 1.0
    I_V = torch.zeros(n_vars, n)
    I_V[var, torch.arange(n)] = 1.0
    return I_T, I_V, times


def segment_softmax(scores: torch.Tensor, segment: torch.Tensor,
                    n_segments: int) -> torch.Tensor:
    """Softmax of ``scores`` (n, H) over the rows of each segment (a hyperedge's
    members). The largest score of each segment is subtracted first, so large scores
    do not overflow.
    """
    if not isinstance(scores, torch.Tensor) or scores.ndim != 2:
        raise ValueError(f"scores: expected a (n, H) tensor, got {tuple(getattr(scores, 'shape', ())) or scores!r}")
    if not isinstance(segment, torch.Tensor):
        raise ValueError(f"segment: expected integer segment ids of shape ({scores.shape[0]},), got "
                         f"{type(segment).__name__}")
    n_segments = as_positive_int(n_segments, "n_segments")
    as_index_tensor(segment, "segment", n=scores.shape[0], high=n_segments, empty=True)
    idx = segment[:, None].expand_as(scores)
    top = scores.new_full((n_segments, scores.shape[1]), -torch.inf)
    top = top.scatter_reduce(0, idx, scores.detach(), "amax")
    w = torch.exp(scores - top[segment])
    total = scores.new_zeros(n_segments, scores.shape[1]).index_add(0, segment, w)
    return w / total[segment]


def init_time_embedding(linear: nn.Linear) -> None:
    """Start ``sin(w tau + b)`` (eq. hyperimts-init) as sine/cosine pairs from 1 to 30 cycles per
    unit time, so that nearby timestamps differ and a shift in time is a rotation of each pair
    (the weights are learned afterwards)."""
    if not isinstance(linear, nn.Linear) or linear.out_features % 2:
        raise ValueError(f"linear: expected an nn.Linear with an even number of outputs (sine/cosine pairs), got "
                         f"{linear!r}")
    d = linear.out_features
    with torch.no_grad():
        freq = 2 * math.pi * torch.logspace(0, 1.5, d // 2).repeat_interleave(2)
        phase = torch.rand(d // 2).mul(2 * math.pi).repeat_interleave(2)
        linear.weight.copy_(freq[:, None])
        linear.bias.copy_(phase + torch.tensor([0.0, math.pi / 2]).repeat(d // 2))


class _AttentionBlock(nn.Module):
    """The multi-head attention block of GraFITi that HyperIMTS uses everywhere.

    Queries, keys and values are projected to ``d_model``; the softmax of the scores (scaled by
    sqrt(d_model), as in the authors' code, not by the head width) weighs the values; the
    projected query is added back, then a ReLU feed-forward residual: ``o = Q + A V``,
    ``o + relu(W_o o)``. Subclasses decide which keys each query sees.
    """

    def __init__(self, d_model: int, d_key: int, n_heads: int):
        super().__init__()
        d_model, d_key, n_heads = (as_positive_int(x, name) for x, name in
                                   ((d_model, "d_model"), (d_key, "d_key"), (n_heads, "n_heads")))
        if d_model % n_heads:
            raise ValueError(f"d_model: expected a multiple of n_heads = {n_heads}, got {d_model}")
        self.h, self.d = n_heads, d_model
        self.q, self.k, self.v = nn.Linear(d_model, d_model), nn.Linear(d_key, d_model), nn.Linear(d_key, d_model)
        self.out = nn.Linear(d_model, d_model)

    def finish(self, q: torch.Tensor, message: torch.Tensor) -> torch.Tensor:
        o = q + message
        return o + torch.relu(self.out(o))


class HyperedgeAttention(_AttentionBlock):
    """Node -> hyperedge attention, eq. (hyperimts-n2e): each hyperedge attends over its
    members. The hyperedge state is the query, the members' features the keys and
    values; the softmax runs over a hyperedge's members only (:func:`segment_softmax`),
    so no hyperedge is padded.
    """

    def forward(self, edges: torch.Tensor, members: torch.Tensor,
                edge_of: torch.Tensor) -> torch.Tensor:
        E, n, H, dh = edges.shape[0], members.shape[0], self.h, self.d // self.h
        q = self.q(edges)
        k, v = self.k(members).view(n, H, dh), self.v(members).view(n, H, dh)
        scores = (q.view(E, H, dh)[edge_of] * k).sum(-1) / math.sqrt(self.d)
        alpha = segment_softmax(scores, edge_of, E)                      # (n, H)
        message = q.new_zeros(E, H, dh).index_add(0, edge_of, alpha[..., None] * v)
        return self.finish(q, message.view(E, self.d))


class NodeAttention(_AttentionBlock):
    """Hyperedge -> node attention, eq. (hyperimts-e2n): every node attends over the
    nodes of its sample.

    The query is the node's state ``h_n``; the keys and values are the nodes' features
    ``[e^T; e^V; h]``, so a node can pick the observations of a given variable near a
    given time. The nodes of each group (a sample, or a sample's variable in the
    channel-independent ablation) fill one row of a ``(groups, N_max)`` block; a key
    mask admits only the group's real nodes, and the attention is torch's fused
    ``scaled_dot_product_attention``. With ``return_weights=True`` it is computed
    explicitly instead and the weights ``(groups, H, N_max, N_max)`` are returned too
    (for diagnostics; the result is the same).
    """

    def forward(self, h: torch.Tensor, keys: torch.Tensor, g: Hypergraph,
                return_weights: bool = False):
        n, H, dh, G, W = h.shape[0], self.h, self.d // self.h, g.n_groups, g.width
        q = self.q(h)

        def block(x):  # (n, d) rows -> (G, H, W, dh)
            rows = x.new_zeros(G, W, H, dh).index_put((g.group, g.slot),
                                                      x.view(n, H, dh))
            return rows.transpose(1, 2)

        real = torch.zeros(G, W, dtype=torch.bool, device=h.device).index_put(
            (g.group, g.slot), torch.ones_like(g.slot, dtype=torch.bool))
        allowed = real[:, None, None, :]                # (G, 1, 1, W): the group's keys
        Q, K, V = block(q), block(self.k(keys)), block(self.v(keys))
        scale = 1 / math.sqrt(self.d)
        if return_weights:
            scores = (Q @ K.transpose(-1, -2) * scale).masked_fill(~allowed, -torch.inf)
            alpha = torch.softmax(scores, -1)
            out = alpha @ V
        else:
            out = nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=allowed,
                                                             scale=scale)
        h_new = self.finish(q, out.transpose(1, 2)[g.group, g.slot].reshape(n, self.d))
        return (h_new, alpha) if return_weights else h_new


GATES = ("threshold", "always", "off")


class IrregularityAwareAttention(nn.Module):
    """Variable hyperedge -> variable hyperedge attention, eq. (hyperimts-v2v), as in the authors' code.

    Within a sample, the score of variables (u, v) starts as a learned similarity of their hyperedge
    states, ``s_uv = (W_q e_u)^T (W_k e_v) / sqrt(d)``. Where it exceeds the threshold ``theta`` (a
    parameter that starts at 0.5) and the two variables' *fine-grained* similarity ``a_uv`` is not 0,
    the score becomes ``(1 - c_uv) s_uv + c_uv a_uv``, with ``c_uv`` the share of u's timestamps at
    which v is observed too. ``a_uv`` sums, over the timestamps the two share, the product of the
    first ``d_fine`` channels of their node states, divided by ``sqrt(L d_fine)`` (``L`` the sample's
    number of distinct timestamps). The update is ``e_u + sum_v softmax_v(s_uv) W_v e_v``.

    ``gate`` (an attribute, so it can be switched on a trained model): ``"threshold"`` (the authors'
    rule), ``"always"`` (blend wherever ``a_uv`` is not 0) or ``"off"`` (the learned similarity alone).
    The comparison with ``theta`` is a step function, so ``theta`` receives no gradient: it keeps its
    initial value however long the model trains (a test checks it).
    """

    def __init__(self, d_model: int, d_fine: int = 1, gate: str = "threshold"):
        super().__init__()
        self.d, self.d_fine = d_model, as_positive_int(d_fine, "d_fine")
        self.q, self.k, self.v = (nn.Linear(d_model, d_model) for _ in range(3))
        self.threshold = nn.Parameter(torch.tensor(0.5))
        self.gate = as_choice(gate, "gate", GATES)

    def scores(self, e_var: torch.Tensor, h: torch.Tensor, graph: Hypergraph,
               var: torch.Tensor, n_vars: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The scores ``s`` (B, V, V) after the gate, the co-observation shares ``c`` and
        the mask of pairs where the gate blended the fine-grained similarity in."""
        B, V = graph.n_samples, n_vars
        E = e_var.view(B, V, self.d)
        static = self.q(E) @ self.k(E).transpose(1, 2) / math.sqrt(self.d)  # (B, V, V)
        i, j = graph.pairs
        cell = (graph.sample[i] * V + var[i]) * V + var[j]  # (b, u, v) of each pair
        z = h[:, : self.d_fine]
        cells = h.new_zeros(B * V * V)
        co = cells.index_add(0, cell, h.new_ones(cell.numel())).view(B, V, V)
        fine = cells.index_add(0, cell, (z[i] * z[j]).sum(-1)).view(B, V, V)
        first = _first_of(graph.time_edge, graph.n_time_edges)
        # L, the number of timestamps of each sample
        n_times = torch.bincount(graph.sample[first], minlength=B).to(h.dtype)
        fine = fine / torch.sqrt(n_times * self.d_fine)[:, None, None]
        seen = torch.diagonal(co, dim1=1, dim2=2)  # timestamps of u
        c = co / seen.clamp(min=1)[:, :, None]
        if self.gate == "off":
            blend = torch.zeros_like(static, dtype=torch.bool)
        else:
            blend = fine != 0
            if self.gate == "threshold":
                blend = blend & (static > self.threshold)
        return torch.where(blend, (1 - c) * static + c * fine, static), c, blend

    def forward(self, e_var: torch.Tensor, h: torch.Tensor, graph: Hypergraph, var: torch.Tensor,
                n_vars: int, return_weights: bool = False):
        B, V = graph.n_samples, n_vars
        E = e_var.view(B, V, self.d)
        s, c, blend = self.scores(e_var, h, graph, var, n_vars)
        w = torch.softmax(s, -1)
        out = (E + w @ self.v(E)).view(B * V, self.d)
        return (out, c, w, blend) if return_weights else (out, c)


def _first_of(group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """One row index per group (the first in row order): ``(n_groups,)``."""
    rows = torch.arange(group.numel(), device=group.device)
    return torch.full((n_groups,), group.numel(), device=group.device).scatter_reduce(0, group, rows, "amin")


class HyperIMTS(nn.Module):
    """The HyperIMTS forecaster on a flat :class:`IMTSBatch`; ``forward`` returns one value per row.

    ``node_update``: ``"attention"`` (the authors' default, eq. hyperimts-e2n) or ``"linear"``
    (the ablation: a node reads only its own two hyperedges). ``cross_variable=False`` cuts every
    path between variables (temporal hyperedges split by variable, node attention restricted to
    the node's variable, no variable-to-variable attention); ``use_var_attention=False`` drops
    only the irregularity-aware attention of eq. (hyperimts-v2v).
    """

    def __init__(self, n_vars: int, d_model: int = 32, n_layers: int = 2, n_heads: int = 4,
                 node_update: str = "attention", cross_variable: bool = True, use_var_attention: bool = True):
        super().__init__()
        if d_model % n_heads or d_model % 2:
            raise ValueError(f"d_model: must be even and a multiple of n_heads ({n_heads}), got {d_model}")
        self.n_vars, self.d, self.cross_variable = n_vars, d_model, cross_variable
        self.node_update = as_choice(node_update, "node_update", NODE_UPDATES)
        self.use_var_attention = use_var_attention and cross_variable
        self.node_in = nn.Linear(2, d_model)                          # eq. (hyperimts-init)
        self.time_in = nn.Linear(1, d_model)
        self.var_in = nn.Parameter(torch.randn(n_vars, d_model) * 0.5)
        self.to_time = nn.ModuleList(HyperedgeAttention(d_model, 2 * d_model, n_heads) for _ in range(n_layers))
        self.to_var = nn.ModuleList(HyperedgeAttention(d_model, 2 * d_model, n_heads) for _ in range(n_layers))
        if self.node_update == "attention":
            self.node_attention = nn.ModuleList(NodeAttention(d_model, 3 * d_model, n_heads) for _ in range(n_layers))
        self.to_node = nn.ModuleList(nn.Linear(3 * d_model, d_model) for _ in range(n_layers))
        self.var_attention = IrregularityAwareAttention(d_model)
        init_time_embedding(self.time_in)
        self.decoder = nn.Linear(3 * d_model, 1)

    def forward(self, batch: IMTSBatch) -> torch.Tensor:
        return self.forward_nodes(batch.time, batch.var, batch.inputs, batch.is_query, batch.sample,
                                  batch.n_samples)

    def forward_nodes(self, time, var, x, is_query, sample, n_samples: int,
                      attention: list | None = None,
                      v2v: list | None = None) -> torch.Tensor:
        """The forecast of every node from flat rows in any order (``x`` is 0 at queries).

        ``attention``: a list that receives, per layer, the node attention weights and
        the hypergraph; ``v2v``: a list that receives the variable-to-variable attention
        weights ``(B, V, V)`` and the mask of pairs the gate opened (for diagnostics).
        """
        g = build_hypergraph(time, var, sample, n_samples, self.n_vars,
                             self.cross_variable)
        q = is_query.to(x.dtype)
        h = torch.relu(self.node_in(torch.stack([x * (1 - q), q], -1)))
        e_time = torch.sin(self.time_in(g.edge_time.to(x.dtype)[:, None]))
        e_var = torch.relu(self.var_in).repeat(n_samples, 1)
        last = len(self.to_time) - 1
        for layer in range(last + 1):
            # eq. (hyperimts-n2e): both hyperedge sets from the same node states
            at_time, at_var = e_time[g.time_edge], e_var[g.var_edge]
            e_time = self.to_time[layer](e_time, torch.cat([at_var, h], -1),
                                         g.time_edge)
            e_var = self.to_var[layer](e_var, torch.cat([at_time, h], -1), g.var_edge)
            edges = torch.cat([e_time[g.time_edge], e_var[g.var_edge]], -1)
            if self.node_update == "attention":  # eq. (hyperimts-e2n)
                read = self.node_attention[layer](h, torch.cat([edges, h], -1), g,
                                                  attention is not None)
                if attention is not None:
                    read, alpha = read
                    attention.append((alpha, g))
            else:  # the ablation: a node reads only its own state and hyperedges
                read = h
            # eq. (hyperimts-node-update)
            h = torch.relu(h + self.to_node[layer](torch.cat([read, edges], -1)))
            if layer == last and self.use_var_attention:  # eq. (hyperimts-v2v)
                if v2v is None:
                    e_var, _ = self.var_attention(e_var, h, g, var, self.n_vars)
                else:
                    e_var, _, w, blend = self.var_attention(e_var, h, g, var,
                                                            self.n_vars, True)
                    v2v.append((w, blend))
        out = torch.cat([h, e_time[g.time_edge], e_var[g.var_edge]], -1)
        return self.decoder(out).squeeze(-1)

    def variable_to_variable(self, batch: IMTSBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The variable-to-variable attention of eq. (hyperimts-v2v) on ``batch``: its weights
        ``(V, V)`` (row = the variable updated, mean over the samples) and the share of pairs
        ``(u, v)`` at which the gate blended the fine-grained similarity in ``(V, V)``."""
        if not self.use_var_attention:
            raise ValueError("use_var_attention: this model has no variable-to-variable attention")
        record: list = []
        with torch.no_grad():
            self.forward_nodes(batch.time, batch.var, batch.inputs, batch.is_query, batch.sample,
                               batch.n_samples, v2v=record)
        w, blend = record[0]
        return w.mean(0), blend.to(w.dtype).mean(0)

    def variable_attention(self, batch: IMTSBatch, layer: int = -1) -> torch.Tensor:
        """Where the query nodes look, per variable: ``(V, V)``, row = the query's variable.

        Entry ``(f, u)`` is the attention mass that queries of variable ``f`` put on the history
        nodes of variable ``u`` in ``layer``'s node attention (mean over heads), divided by the
        share of the sample's history nodes that belong to ``u``: 1 is what a uniform look at the
        history would give. Averaged over the queries of ``batch``; a row of a variable without
        queries is 0.
        """
        if self.node_update != "attention" or not self.cross_variable:
            raise ValueError("node_update: only the cross-variable node attention has weights across variables")
        record: list = []
        with torch.no_grad():
            self.forward_nodes(batch.time, batch.var, batch.inputs, batch.is_query, batch.sample,
                               batch.n_samples, attention=record)
        alpha, g = record[layer]
        V, q = self.n_vars, batch.is_query
        key_var = torch.where(q, torch.full_like(batch.var, V), batch.var)   # queries: no variable
        slots = torch.full((g.n_groups, g.width), V, dtype=torch.long, device=batch.device)
        onehot = nn.functional.one_hot(slots.index_put((g.group, g.slot), key_var), V + 1)[..., :V]
        onehot = onehot.to(alpha.dtype)                                    # (B, W, V), history nodes only
        mass = (alpha.mean(1) @ onehot)[g.group, g.slot]                   # (n, V): mass on each history
        counts = onehot.sum(1)                                             # (B, V) history nodes
        share = counts / counts.sum(1, keepdim=True).clamp(min=1)
        has = (counts > 0).to(mass.dtype)[g.group]                         # (n, V): u has a history
        lift = mass / share[g.group].clamp(min=1e-12) * has
        total = mass.new_zeros(V, V).index_add(0, batch.var[q], lift[q])
        return total / mass.new_zeros(V, V).index_add(0, batch.var[q], has[q]).clamp(min=1)


def masked_mse(pred: torch.Tensor, batch: IMTSBatch, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error over the query rows of the batch (all queries of all samples pooled), eq. (hyperimts-dec)."""
    if not isinstance(batch, IMTSBatch):
        raise ValueError(f"batch: expected an IMTSBatch, got {type(batch).__name__}")
    if not isinstance(pred, torch.Tensor) or pred.shape != (batch.n_nodes,):
        raise ValueError(f"pred: expected one forecast per row, shape ({batch.n_nodes},), got "
                         f"{tuple(getattr(pred, 'shape', ())) or type(pred).__name__}")
    if rows is not None and (not isinstance(rows, torch.Tensor) or rows.shape != (batch.n_nodes,)
                             or rows.dtype != torch.bool):
        raise ValueError(f"rows: expected a boolean mask of shape ({batch.n_nodes},)")
    mask = batch.is_query if rows is None else batch.is_query & rows
    if not bool(mask.any()):
        raise ValueError("rows: no query row selected, the error of an empty set is undefined")
    return ((pred[mask] - batch.value[mask]) ** 2).mean()
