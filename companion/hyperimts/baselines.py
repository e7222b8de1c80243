"""Baselines of the HyperIMTS chapter: two naive forecasts and two padded neural models.

* :func:`last_value`, :func:`history_mean` -- per (sample, variable), on the flat batch;
* :class:`GRUD` -- a GRU-D-style recurrent model (Che et al., 2018) stepping over the padded grid;
* :class:`MTANLite` -- a small mTAN-style model (Shukla and Marlin, 2021): time attention onto
  fixed reference points, a GRU over them, time attention back to the query times;
* :class:`GraFITi` -- a bipartite graph (Yalavarthi et al., 2024): time nodes and variable nodes,
  each observation an edge between them; what HyperIMTS's abstract argues against.

Every model maps an :class:`~companion.data.imts.IMTSBatch` to one forecast per row, so they
share the training loop and the metrics of :mod:`companion.hyperimts.train`; every tensor is
created on the batch's device.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from companion.data.imts import IMTSBatch
from companion.hyperimts.model import HyperedgeAttention, build_hypergraph, init_time_embedding
from companion.validation import as_positive_int

__all__ = ["last_value", "history_mean", "GRUD", "MTANLite", "GraFITi"]


def _history_key(batch: IMTSBatch) -> tuple[torch.Tensor, torch.Tensor]:
    return batch.sample * batch.n_vars + batch.var, ~batch.is_query


def last_value(batch: IMTSBatch) -> torch.Tensor:
    """The variable's last history value in the sample (0, the training mean, if it has none)."""
    if not isinstance(batch, IMTSBatch):
        raise ValueError(f"batch: expected an IMTSBatch, got {type(batch).__name__}")
    key, hist = _history_key(batch)
    K = batch.n_samples * batch.n_vars
    rank = torch.arange(batch.n_nodes, device=batch.device)  # rows are sorted by time within a sample
    last = torch.full((K,), -1, dtype=torch.long, device=batch.device).scatter_reduce(0, key[hist], rank[hist],
                                                                                      "amax")
    got = last[key]
    return torch.where(got >= 0, batch.value[got.clamp(min=0)], torch.zeros_like(batch.value))


def history_mean(batch: IMTSBatch) -> torch.Tensor:
    """The mean of the variable's history values in the sample (0 if it has none)."""
    if not isinstance(batch, IMTSBatch):
        raise ValueError(f"batch: expected an IMTSBatch, got {type(batch).__name__}")
    key, hist = _history_key(batch)
    K = batch.n_samples * batch.n_vars
    zeros = batch.value.new_zeros(K)
    total = zeros.index_add(0, key[hist], batch.value[hist])
    count = zeros.index_add(0, key[hist], hist[hist].to(zeros.dtype))
    return (total / count.clamp(min=1))[key]


def _decay_inputs(p) -> tuple[torch.Tensor, torch.Tensor]:
    """Per cell: time since the variable was last observed (delta) and that last value (x_last)."""
    B, L, V = p.values.shape
    step = torch.arange(L, device=p.values.device)[None, :, None].expand(B, L, V)
    seen = torch.where(p.obs_mask, step, torch.full_like(step, -1)).cummax(1).values
    before = torch.cat([torch.full_like(seen[:, :1], -1), seen[:, :-1]], 1)  # last observation strictly before
    t = p.times[:, :, None].expand(B, L, V)
    t_before = torch.gather(p.times, 1, before.clamp(min=0).view(B, L * V)).view(B, L, V)
    delta = torch.where(before >= 0, t - t_before, t - p.times[:, :1, None])
    column = torch.arange(V, device=p.values.device)
    x_last = torch.gather(p.values.view(B, L * V), 1, (before.clamp(min=0) * V + column).view(B, L * V))
    return delta, torch.where(before >= 0, x_last.view(B, L, V), torch.zeros_like(p.values))


class GRUD(nn.Module):
    """GRU-D on the padded grid: decay the inputs towards the mean and the state towards zero.

    At each of the ``L`` grid steps, a missing input is replaced by
    ``gamma_x x_last + (1 - gamma_x) x_mean`` with ``gamma_x = exp(-relu(w_x delta + b_x))``
    (x_mean = 0 after standardisation), the state is multiplied by
    ``gamma_h = exp(-relu(W_h delta + b_h))``, and a GRU cell reads ``[x_hat, mask]``. A linear
    head reads the state at every step; query cells are missing inputs, so nothing leaks.
    """

    def __init__(self, n_vars: int, hidden: int = 64):
        super().__init__()
        self.w_x, self.b_x = nn.Parameter(torch.zeros(n_vars)), nn.Parameter(torch.zeros(n_vars))
        self.decay_h = nn.Linear(n_vars, hidden)
        self.cell = nn.GRUCell(2 * n_vars, hidden)
        self.head = nn.Linear(hidden, n_vars)
        self.hidden = hidden

    def forward(self, batch: IMTSBatch) -> torch.Tensor:
        p = batch.padded
        delta, x_last = _decay_inputs(p)
        m = p.obs_mask.float()
        gamma_x = torch.exp(-torch.relu(self.w_x * delta + self.b_x))
        x_hat = m * p.values + (1 - m) * gamma_x * x_last
        gamma_h = torch.exp(-torch.relu(self.decay_h(delta)))               # (B, L, hidden)
        inputs = torch.cat([x_hat, m], -1)
        B, L, V = p.values.shape
        h = p.values.new_zeros(B, self.hidden)
        out = []
        for step in range(L):                                              # sequential over the grid
            h = self.cell(inputs[:, step], gamma_h[:, step] * h)
            out.append(self.head(h))
        return torch.stack(out, 1).reshape(-1)[p.node_cell]


class MTANLite(nn.Module):
    """A small mTAN: learned time embeddings, attention from reference points to the observations.

    Encoder: for each of ``n_ref`` reference times r and each variable, a softmax over that
    variable's observed times with scores ``<phi(r) W_q, phi(t) W_k>`` interpolates a value; a
    GRU runs over the reference points. Decoder: each grid time attends over the reference
    states, and a small MLP outputs all variables.
    """

    def __init__(self, n_vars: int, d_model: int = 32, n_ref: int = 16, d_time: int = 16):
        super().__init__()
        for name, value in (("n_vars", n_vars), ("d_model", d_model), ("n_ref", n_ref), ("d_time", d_time)):
            as_positive_int(value, name)
        self.register_buffer("ref", torch.linspace(0, 1, n_ref))
        self.linear_t, self.periodic_t = nn.Linear(1, 1), nn.Linear(1, d_time - 1)
        self.enc_q, self.enc_k = nn.Linear(d_time, d_time), nn.Linear(d_time, d_time)
        self.gru = nn.GRU(2 * n_vars, d_model, batch_first=True)
        self.dec_q, self.dec_k = nn.Linear(d_time, d_time), nn.Linear(d_time, d_time)
        self.out = nn.Sequential(nn.Linear(d_model + d_time, d_model), nn.ReLU(), nn.Linear(d_model, n_vars))
        self.d_time = d_time
        with torch.no_grad():  # periodic frequencies from 1 to 30 cycles per unit time (as in HyperIMTS)
            self.periodic_t.weight.copy_(2 * math.pi * torch.logspace(0, 1.5, d_time - 1)[:, None])
            self.periodic_t.bias.uniform_(0, 2 * math.pi)

    def embed(self, t: torch.Tensor) -> torch.Tensor:
        t = t[..., None]
        return torch.cat([self.linear_t(t), torch.sin(self.periodic_t(t))], -1)

    def forward(self, batch: IMTSBatch) -> torch.Tensor:
        p = batch.padded
        phi_t, phi_r = self.embed(p.times), self.embed(self.ref)                  # (B, L, dt), (R, dt)
        scores = self.enc_q(phi_r) @ self.enc_k(phi_t).transpose(1, 2) / math.sqrt(self.d_time)  # (B, R, L)
        m = p.obs_mask[:, None, :, :]                                            # (B, 1, L, V)
        scores = scores[..., None].masked_fill(~m, -1e9)
        alpha = torch.softmax(scores, 2) * m.any(2, keepdim=True)                # 0 if never observed
        interp = (alpha * p.values[:, None]).sum(2)                              # (B, R, V)
        observed = m.any(2).float().expand_as(interp)
        states, _ = self.gru(torch.cat([interp, observed], -1))                  # (B, R, d)
        att = torch.softmax(self.dec_q(phi_t) @ self.dec_k(phi_r).T / math.sqrt(self.d_time), -1)  # (B, L, R)
        context = att @ states
        return self.out(torch.cat([context, phi_t], -1)).reshape(-1)[p.node_cell]


class GraFITi(nn.Module):
    """GraFITi's bipartite graph: time nodes and variable nodes, an observation is an edge between them.

    Each layer updates every variable node from its edges and the edges' time nodes, and every
    time node from its edges and their variable nodes (the attention blocks of HyperIMTS's
    eq. (hyperimts-n2e): the two models share them), then each edge from its own state and its
    two end nodes, ``u <- relu(u + W [u; t; c])``, with the node states from before this layer's
    update, as in the authors' code. An edge never reads another edge: a variable's forecast
    meets another variable only through a timestamp they share.
    """

    def __init__(self, n_vars: int, d_model: int = 32, n_layers: int = 2, n_heads: int = 4):
        super().__init__()
        if d_model % n_heads or d_model % 2:
            raise ValueError(f"d_model: must be even and a multiple of n_heads ({n_heads}), got {d_model}")
        self.n_vars, self.d = n_vars, d_model
        self.edge_in = nn.Linear(2, d_model)
        self.time_in = nn.Linear(1, d_model)
        init_time_embedding(self.time_in)  # as HyperIMTS's, so that only the graph differs
        self.var_in = nn.Parameter(torch.randn(n_vars, d_model) * 0.5)
        self.to_var = nn.ModuleList(HyperedgeAttention(d_model, 2 * d_model, n_heads) for _ in range(n_layers))
        self.to_time = nn.ModuleList(HyperedgeAttention(d_model, 2 * d_model, n_heads) for _ in range(n_layers))
        self.to_edge = nn.ModuleList(nn.Linear(3 * d_model, d_model) for _ in range(n_layers))
        self.decoder = nn.Linear(3 * d_model, 1)

    def forward(self, batch: IMTSBatch) -> torch.Tensor:
        g = build_hypergraph(batch.time, batch.var, batch.sample, batch.n_samples, self.n_vars)
        x, q = batch.inputs, batch.is_query.to(batch.value.dtype)
        u = torch.relu(self.edge_in(torch.stack([x, q], -1)))
        t_node = torch.sin(self.time_in(g.edge_time.to(x.dtype)[:, None]))
        c_node = torch.relu(self.var_in).repeat(batch.n_samples, 1)
        for layer in range(len(self.to_edge)):
            t_at, c_at = t_node[g.time_edge], c_node[g.var_edge]
            c_node = self.to_var[layer](c_node, torch.cat([t_at, u], -1), g.var_edge)
            t_node = self.to_time[layer](t_node, torch.cat([c_at, u], -1), g.time_edge)
            u = torch.relu(u + self.to_edge[layer](torch.cat([u, t_at, c_at], -1)))
        return self.decoder(torch.cat([u, t_node[g.time_edge], c_node[g.var_edge]], -1)).squeeze(-1)
