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
from companion.toping.persistence import FILTRATIONS, batch_cut_persistence, batch_node_cut_persistence
from companion.validation import as_choice, as_instance, as_nonnegative, as_positive, as_positive_int, as_probability

__all__ = ["EdgeWeightedGIN", "GINClassifier", "GSAT", "TopInG", "saliency_explain", "History", "fit",
           "predict"]


class _Dropout(nn.Module):
    """Dropout by a uniform mask: the same as ``nn.Dropout`` in distribution, and several times
    faster on a CPU than its Bernoulli sampler at these sizes."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return x * (torch.rand_like(x) >= self.p).to(x.dtype) / (1 - self.p)


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


def _extractor(i: int, hidden: int, dropout: float = 0.5) -> nn.Sequential:
    """GSAT's extractor MLP: widths ``[i, 2 i, hidden, 1]`` (``i`` = 2 hidden on edges, hidden on
    nodes, as in its ``ExtractorMLP``), ReLU and dropout 0.5 between layers."""
    return nn.Sequential(nn.Linear(i, 2 * i), nn.ReLU(), _Dropout(dropout), nn.Linear(2 * i, hidden),
                         nn.ReLU(), _Dropout(dropout), nn.Linear(hidden, 1))


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
        self.dropout = _Dropout(dropout)
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
        as_instance(gnn, "gnn", EdgeWeightedGIN)
        n_classes = as_positive_int(n_classes, "n_classes", minimum=2)
        self.gnn, self.head = gnn, _mlp(gnn.hidden, gnn.hidden, n_classes)

    def forward(self, batch: Batch, epoch: int = 0, edge_weight=None):
        logits = self.head(_pool(self.gnn(batch.x, batch.edges, edge_weight), batch))
        return logits, None, {}


class _Explainer(nn.Module):
    """Shared parts of GSAT and TopInG: extractor, Gumbel sampling, second weighted pass."""

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int, extra_features: int = 0, tau: float = 1.0,
                 on_nodes: bool = False):
        super().__init__()
        as_positive_int(n_classes, "n_classes", minimum=2)
        if not tau > 0:
            raise ValueError(f"tau: expected a temperature > 0, got {tau!r}")
        self.gnn, self.tau, self.on_nodes = gnn, tau, on_nodes
        self.extractor = _extractor(gnn.hidden if on_nodes else 2 * gnn.hidden, gnn.hidden)
        self.head = _mlp(gnn.hidden + extra_features, gnn.hidden, n_classes)

    def edge_logits(self, batch: Batch) -> torch.Tensor:
        """``l_e``, symmetric: the mean of the extractor on ``[h_u || h_v]`` and ``[h_v || h_u]``."""
        h = self.gnn(batch.x, batch.edges)
        hu, hv = h[batch.edges[:, 0]], h[batch.edges[:, 1]]
        return (self.extractor(torch.cat([hu, hv], 1)) + self.extractor(torch.cat([hv, hu], 1)))[:, 0] / 2

    def node_logits(self, batch: Batch) -> torch.Tensor:
        """``l_v``: the extractor on each node's embedding (the node filtration)."""
        return self.extractor(self.gnn(batch.x, batch.edges))[:, 0]

    def sample(self, logits: torch.Tensor) -> torch.Tensor:
        """Binary concrete in training (eq. ``toping-gumbel``), the score ``p_e`` in evaluation."""
        if not self.training:
            return torch.sigmoid(logits)
        u = torch.rand_like(logits).clamp(1e-10, 1 - 1e-10)
        return torch.sigmoid((logits + torch.log(u) - torch.log(1 - u)) / self.tau)

    def pooled(self, batch: Batch, alpha: torch.Tensor) -> torch.Tensor:
        return _pool(self.gnn(batch.x, batch.edges, alpha), batch)


class GSAT(_Explainer):
    """GSAT: CE + lambda KL(Bern(alpha) || Bern(r)) (eq. ``toping-gsat``), with GSAT's schedule:
    ``r`` starts at ``r0`` and falls by ``decay_r`` every ``decay_every`` epochs down to
    ``r_final``, and a model is selected only once ``r`` has reached ``r_final`` and after epoch 10
    (``selection_start``), as in GSAT's ``run_gsat.py``."""

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int = 2, lam: float = 1.0, r0: float = 0.9,
                 r_final: float = 0.7, decay_every: int = 10, decay_r: float = 0.1, tau: float = 1.0):
        super().__init__(gnn, n_classes, tau=tau)
        if not 0 < r_final <= r0 < 1:
            raise ValueError(f"r0: expected 0 < r_final <= r0 < 1, got r0={r0!r}, r_final={r_final!r}")
        self.lam = as_nonnegative(lam, "lam")
        self.decay_r = as_nonnegative(decay_r, "decay_r")
        if self.decay_r == 0 and r_final < r0:
            raise ValueError("decay_r: expected > 0 when r_final < r0")
        as_positive_int(decay_every, "decay_every")
        self.r0, self.r_final, self.decay_every = r0, r_final, decay_every
        steps = 0 if r_final == r0 else int(np.ceil(round((r0 - r_final) / self.decay_r, 9)))
        self.selection_start = max(steps * decay_every, 11)

    def r(self, epoch: int) -> float:
        return max(self.r_final, round(self.r0 - self.decay_r * (epoch // self.decay_every), 9))

    def forward(self, batch: Batch, epoch: int = 0):
        logits = self.edge_logits(batch)
        alpha = self.sample(logits)  # as in GSAT's code, the KL acts on the sampled weights
        out = self.head(self.pooled(batch, alpha))
        return out, torch.sigmoid(logits), {"info": self.lam * bernoulli_info_loss(alpha, self.r(epoch))}


class TopInG(_Explainer):
    """TopInG with a GIN backbone (eq. ``toping-loss``): CE - alpha L_topo + beta L_prior.

    ``filtration="node"`` (the default, the paper's Remark 3.6): the extractor scores nodes, an
    edge's score is the smaller of its ends' (``min``), and the two diagrams are those of the node
    cut (eq. ``toping-node-parts``); ``"edge"``: the extractor scores edges and every vertex is in
    both parts at time 0 (the book's first pass, kept as an ablation). The prediction head reads
    ``[Pool(h on the weighted graph) || psi(T_X)]``, the rationale alone (``head_complement=True``
    adds ``psi(T_eps)``, as the first pass did); ``L_topo`` is the top-2 dual bound of the
    discrepancy between the rationale and complement diagrams, cut at ``cut``.
    """

    def __init__(self, gnn: EdgeWeightedGIN, n_classes: int = 2, n_hats: int = 8, alpha: float = 0.01,
                 beta: float = 1.0, gamma: float = 0.005, cut: float = 0.5, tau: float = 1.0, seed: int = 0,
                 filtration: str = "node", head_complement: bool = False):
        filtration = as_choice(filtration, "filtration", FILTRATIONS)
        if not isinstance(head_complement, bool):
            raise ValueError(f"head_complement: expected a bool, got {head_complement!r}")
        n_hats = as_positive_int(n_hats, "n_hats")
        super().__init__(gnn, n_classes, extra_features=(4 if head_complement else 2) * n_hats, tau=tau,
                         on_nodes=filtration == "node")
        as_probability(cut, "cut")
        self.alpha = as_nonnegative(alpha, "alpha")
        self.beta = as_nonnegative(beta, "beta")
        self.gamma = as_nonnegative(gamma, "gamma")
        self.hats = RationalHat(n_hats, seed=seed)
        self.rho = nn.Parameter(torch.full((2,), float(np.log(np.expm1(0.25 - 1e-3)))))  # r = 0.25
        self.cut, self.filtration, self.head_complement = cut, filtration, head_complement

    def topo_features(self, batch: Batch, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``psi(T_X), psi(T_eps)``: ``[B, 2 n_hats]`` each, from the cut diagrams of ``f`` (node
        scores for the node filtration, edge scores for the edge one)."""
        cut = batch_node_cut_persistence if self.filtration == "node" else batch_cut_persistence
        dx, de = cut(batch.x.shape[0], batch.edges, f, self.cut, node_graph=batch.node_graph,
                     num_graphs=batch.num_graphs)
        return self.hats(dx, batch.num_graphs), self.hats(de, batch.num_graphs)

    def forward(self, batch: Batch, epoch: int = 0):
        logits = self.node_logits(batch) if self.on_nodes else self.edge_logits(batch)
        p = torch.sigmoid(logits)
        alpha = self.sample(logits)
        vx, ve = self.topo_features(batch, alpha)
        u, v = batch.edges[:, 0], batch.edges[:, 1]
        # on nodes, an edge enters with its later end
        weight = torch.minimum(alpha[u], alpha[v]) if self.on_nodes else alpha
        feats = [self.pooled(batch, weight), vx]
        if self.head_complement:
            feats.append(ve)
        out = self.head(torch.cat(feats, 1))
        prior = gaussian_mixture_prior(p, self.rho, gamma=self.gamma)
        aux = {"topo": -self.alpha * topo_discrepancy(vx, ve),
               "prior": self.beta * prior}
        edge_p = torch.minimum(p[u], p[v]) if self.on_nodes else p
        return out, edge_p, aux


def saliency_explain(model: GINClassifier, batch: Batch) -> torch.Tensor:
    """``|d logit_y / d w_e|`` at ``w = 1`` for every undirected edge (eq. ``toping-saliency``)."""
    as_instance(model, "model", GINClassifier), as_instance(batch, "batch", Batch)
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
    snapshots: dict = field(default_factory=dict)  # epoch -> the selected weights after that epoch


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
        batch_size: int = 32, seed: int = 0, snapshots=()) -> History:
    """Adam for ``epochs`` epochs; keeps the weights of the epoch with the best validation accuracy
    (ties: lowest validation loss), as the paper selects models, among the epochs from the model's
    ``selection_start`` on (GSAT's rule; 0 otherwise). ``snapshots``: epochs (1-based) after which
    the weights selected so far are kept in ``History.snapshots`` (a budget sweep in one run)."""
    import time

    as_positive_int(epochs, "epochs")
    as_positive_int(batch_size, "batch_size")
    as_positive(lr, "lr")
    snapshots = [as_positive_int(e, "snapshots") for e in snapshots]
    start_at = min(int(getattr(model, "selection_start", 0)), epochs - 1)
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
        if epoch >= start_at and (acc, -vloss) > (best[0], -best[1]):
            best, hist.best_epoch, state = (acc, vloss), epoch, copy.deepcopy(model.state_dict())
        if epoch + 1 in snapshots and state is not None:
            hist.snapshots[epoch + 1] = copy.deepcopy(state)
    model.load_state_dict(state)
    model.eval()
    hist.seconds = time.perf_counter() - start
    return hist
