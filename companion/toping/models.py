"""The backbone, TopInG, its baselines (GSAT, GIN + saliency) and their training loop.

All three share one edge-weighted GIN (``EdgeWeightedGIN``). GSAT and TopInG add an edge
extractor on the same node embeddings and a second, weighted pass of the same GIN (the soft
subgraph); they differ in the regulariser and in TopInG's topological features and loss.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from companion.toping.data import Batch, Graph, collate
from companion.toping.losses import (RationalHat, bernoulli_info_loss, gaussian_mixture_prior,
                                     topo_discrepancy)
from companion.toping.persistence import batch_cut_persistence
from companion.validation import as_positive_int

__all__ = ["EdgeWeightedGIN", "GINClassifier", "GSAT", "TopInG", "saliency_explain", "History", "fit",
           "predict"]


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


class EdgeWeightedGIN(nn.Module):
    """GIN layers ``h_v <- MLP((1 + eps) h_v + sum_{u ~ v} w_uv h_u)`` (eq. ``toping-gin``)."""

    def __init__(self, in_dim: int, hidden: int = 64, layers: int = 2, dropout: float = 0.3):
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden", hidden), ("layers", layers)):
            as_positive_int(value, name)
        if not 0 <= dropout < 1:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        self.mlps = nn.ModuleList(_mlp(in_dim if i == 0 else hidden, hidden, hidden) for i in range(layers))
        self.eps = nn.Parameter(torch.zeros(layers))
        self.dropout = nn.Dropout(dropout)
        self.hidden = hidden

    def forward(self, x: torch.Tensor, edges: torch.Tensor, edge_weight: torch.Tensor | None = None):
        """Node embeddings ``[N, hidden]``; ``edges [E, 2]`` undirected, ``edge_weight [E]``
        scales the messages in both directions."""
        src = torch.cat([edges[:, 0], edges[:, 1]])
        dst = torch.cat([edges[:, 1], edges[:, 0]])
        w = None if edge_weight is None else torch.cat([edge_weight, edge_weight])[:, None]
        h = x
        for i, mlp in enumerate(self.mlps):
            msg = h[src] if w is None else h[src] * w
            agg = torch.zeros(h.shape[0], msg.shape[1], dtype=h.dtype, device=h.device).index_add(0, dst, msg)
            h = self.dropout(torch.relu(mlp((1 + self.eps[i]) * h + agg)))
        return h


def _pool(h: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Sum pooling per graph, ``[B, hidden]``."""
    out = torch.zeros(batch.num_graphs, h.shape[1], dtype=h.dtype, device=h.device)
    return out.index_add(0, batch.node_graph, h)


class GINClassifier(nn.Module):
    """The plain GIN (for the post-hoc saliency baseline)."""

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int = 2):
        super().__init__()
        self.gnn, self.head = gnn, _mlp(gnn.hidden, gnn.hidden, n_classes)

    def forward(self, batch: Batch, epoch: int = 0, edge_weight=None):
        logits = self.head(_pool(self.gnn(batch.x, batch.edges, edge_weight), batch))
        return logits, None, {}


class _Explainer(nn.Module):
    """Shared parts of GSAT and TopInG: extractor, Gumbel sampling, second weighted pass."""

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int, extra_features: int = 0, tau: float = 1.0):
        super().__init__()
        as_positive_int(n_classes, "n_classes", minimum=2)
        if not tau > 0:
            raise ValueError(f"tau: expected a temperature > 0, got {tau!r}")
        self.gnn, self.tau = gnn, tau
        self.extractor = _mlp(2 * gnn.hidden, gnn.hidden, 1)
        self.head = _mlp(gnn.hidden + extra_features, gnn.hidden, n_classes)

    def edge_logits(self, batch: Batch) -> torch.Tensor:
        """``l_e``, symmetric: the mean of the extractor on ``[h_u || h_v]`` and ``[h_v || h_u]``."""
        h = self.gnn(batch.x, batch.edges)
        hu, hv = h[batch.edges[:, 0]], h[batch.edges[:, 1]]
        return (self.extractor(torch.cat([hu, hv], 1)) + self.extractor(torch.cat([hv, hu], 1)))[:, 0] / 2

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """Binary concrete in training (eq. ``toping-gumbel``), the score ``p_e`` in evaluation."""
        if not self.training:
            return torch.sigmoid(logits)
        u = torch.rand_like(logits).clamp(1e-10, 1 - 1e-10)
        return torch.sigmoid((logits + torch.log(u) - torch.log(1 - u)) / self.tau)

    def pooled(self, batch: Batch, alpha: torch.Tensor) -> torch.Tensor:
        return _pool(self.gnn(batch.x, batch.edges, alpha), batch)


class GSAT(_Explainer):
    """GSAT: CE + lambda KL(Bern(alpha) || Bern(r)), r decayed from ``r0`` to ``r_final`` by 0.1 every
    ``decay_every`` epochs (eq. ``toping-gsat``)."""

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int = 2, lam: float = 1.0, r0: float = 0.9,
                 r_final: float = 0.7, decay_every: int = 10, tau: float = 1.0):
        super().__init__(gnn, n_classes, tau=tau)
        if not 0 < r_final <= r0 < 1:
            raise ValueError(f"r0: expected 0 < r_final <= r0 < 1, got r0={r0!r}, r_final={r_final!r}")
        as_positive_int(decay_every, "decay_every")
        self.lam, self.r0, self.r_final, self.decay_every = lam, r0, r_final, decay_every

    def r(self, epoch: int) -> float:
        return max(self.r_final, self.r0 - 0.1 * (epoch // self.decay_every))

    def forward(self, batch: Batch, epoch: int = 0):
        logits = self.edge_logits(batch)
        alpha = self.sample(logits)  # as in GSAT's code, the KL acts on the sampled weights
        out = self.head(self.pooled(batch, alpha))
        return out, torch.sigmoid(logits), {"info": self.lam * bernoulli_info_loss(alpha, self.r(epoch))}


class TopInG(_Explainer):
    """TopInG with a GIN backbone (eq. ``toping-loss``): CE - alpha L_topo + beta L_prior.

    The prediction head reads ``[Pool(h) || psi(T_X) || psi(T_eps)]``; ``L_topo`` is the top-2
    dual bound of the discrepancy between the rationale and complement diagrams, cut at ``cut``.
    """

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int = 2, n_hats: int = 8, alpha: float = 0.01,
                 beta: float = 1.0, gamma: float = 0.005, cut: float = 0.5, tau: float = 1.0, seed: int = 0):
        super().__init__(gnn, n_classes, extra_features=4 * n_hats, tau=tau)
        if not 0 < cut < 1:
            raise ValueError(f"cut: expected a number in (0, 1), got {cut!r}")
        if alpha < 0 or beta < 0:
            raise ValueError(f"alpha: the weights alpha and beta must be >= 0, got {alpha!r}, {beta!r}")
        self.hats = RationalHat(n_hats, seed=seed)
        self.rho = nn.Parameter(torch.full((2,), float(np.log(np.expm1(0.25 - 1e-3)))))  # r = 0.25
        self.alpha, self.beta, self.gamma, self.cut = alpha, beta, gamma, cut

    def topo_features(self, batch: Batch, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``psi(T_X), psi(T_eps)``: ``[B, 2 n_hats]`` each, from the cut diagrams of ``f``."""
        dx, de = batch_cut_persistence(batch.x.shape[0], batch.edges, f, self.cut,
                                       node_graph=batch.node_graph, num_graphs=batch.num_graphs)
        return self.hats(dx, batch.num_graphs), self.hats(de, batch.num_graphs)

    def forward(self, batch: Batch, epoch: int = 0):
        logits = self.edge_logits(batch)
        p = torch.sigmoid(logits)
        alpha = self.sample(logits)
        vx, ve = self.topo_features(batch, alpha)
        out = self.head(torch.cat([self.pooled(batch, alpha), vx, ve], 1))
        aux = {"topo": -self.alpha * topo_discrepancy(vx, ve),
               "prior": self.beta * gaussian_mixture_prior(p, self.rho, gamma=self.gamma)}
        return out, p, aux


def saliency_explain(model: GINClassifier, batch: Batch) -> torch.Tensor:
    """``|d logit_y / d w_e|`` at ``w = 1`` for every undirected edge (eq. ``toping-saliency``)."""
    model.eval()
    w = torch.ones(len(batch.edges), device=batch.x.device, requires_grad=True)
    logits = model(batch, edge_weight=w)[0]
    picked = logits.gather(1, batch.y[:, None]).sum()
    (grad,) = torch.autograd.grad(picked, w)
    return grad.abs()


@dataclass
class History:
    """Per-epoch training loss and validation accuracy; ``best_epoch`` is the selected epoch."""

    loss: list[float] = field(default_factory=list)
    val_acc: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    best_epoch: int = -1
    seconds: float = 0.0


@torch.no_grad()
def predict(model: nn.Module, graphs: list[Graph], batch_size: int = 256):
    """``(logits [G, K], scores [E] or None)`` of a model in evaluation mode (``p_e`` for explainers)."""
    model.eval()
    logits, scores = [], []
    for i in range(0, len(graphs), batch_size):
        out, p, _ = model(collate(graphs[i:i + batch_size]))
        logits.append(out)
        scores.append(p)
    return torch.cat(logits), (None if scores[0] is None else torch.cat(scores))


def fit(model: nn.Module, train: list[Graph], val: list[Graph], epochs: int, lr: float = 1e-3,
        batch_size: int = 32, seed: int = 0) -> History:
    """Adam for ``epochs`` epochs; keeps the weights of the epoch with the best validation accuracy
    (ties: lowest validation loss), as the paper selects models."""
    import time

    as_positive_int(epochs, "epochs")
    if not train or not val:
        raise ValueError(f"train: expected non-empty training and validation sets, got {len(train)} and {len(val)}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hist, best, start = History(), (-1.0, np.inf), time.perf_counter()
    val_y = torch.tensor([g.y for g in val])
    state = None
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for idx in np.array_split(rng.permutation(len(train)), max(1, len(train) // batch_size)):
            batch = collate([train[i] for i in idx])
            out, _, aux = model(batch, epoch)
            loss = nn.functional.cross_entropy(out, batch.y) + sum(aux.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        logits, _ = predict(model, val)
        acc = float((logits.argmax(1) == val_y).float().mean())
        vloss = float(nn.functional.cross_entropy(logits, val_y))
        hist.loss.append(total / len(train))
        hist.val_acc.append(acc)
        hist.val_loss.append(vloss)
        if (acc, -vloss) > (best[0], -best[1]):
            best, hist.best_epoch, state = (acc, vloss), epoch, copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    model.eval()
    hist.seconds = time.perf_counter() - start
    return hist
