"""CoRE: per-city GAT encoders of free region embeddings, trained with intra-city mobility
prediction and two cross-city alignment losses (manifold alignment and cycle reconstruction).

Equation labels are those of the chapter. Graphs come as dense (N, N) weight matrices; the
attention layers compute on their edge lists, with self-loops as PyTorch Geometric's GATConv adds
them (the official encoder).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from companion.validation import (
    as_choice,
    as_finite_tensor,
    as_instance,
    as_positive,
    as_positive_int,
)


def _matrix(x, name: str, cols: int | None = None) -> torch.Tensor:
    """A finite floating (N, cols) tensor with N >= 1 (any number of columns if ``cols`` is None)."""
    return as_finite_tensor(x, name, shape=(None, cols), floating=True)


SELF_LOOPS = ("mean", "identity")


def _square(adj, name: str) -> torch.Tensor:
    """A finite, non-negative, floating (N, N) tensor of edge weights."""
    as_finite_tensor(adj, name, ndim=2, floating=True)
    if adj.shape[0] != adj.shape[1]:
        raise ValueError(f"{name}: expected a square (N, N) tensor, got shape {tuple(adj.shape)}")
    if bool((adj < 0).any()):
        raise ValueError(f"{name}: expected non-negative edge weights, got {float(adj.min()):g}")
    return adj


def graph_edges(adj: torch.Tensor, self_loops: str = "mean") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The edge list ``(row, col, weight)`` of a dense weighted adjacency, as a GAT layer sees it.

    ``row`` is the receiving region i, ``col`` the sending region j (``adj[i, j] > 0``).
    ``self_loops="mean"`` does what PyTorch Geometric's ``GATConv`` does by default (the official
    encoder): the diagonal of ``adj`` is dropped and every region gets one self-loop whose edge
    weight is the mean weight of its incoming edges (0 for an isolated region).
    ``self_loops="identity"`` keeps the diagonal as given (it must be positive).
    """
    as_choice(self_loops, "self_loops", SELF_LOOPS)
    _square(adj, "adj")
    n = len(adj)
    eye = torch.eye(n, dtype=torch.bool, device=adj.device)
    if self_loops == "identity":
        if not bool((adj.diagonal() > 0).all()):
            raise ValueError("adj: self_loops='identity' needs a positive diagonal (one self-loop per region)")
        row, col = torch.nonzero(adj > 0, as_tuple=True)
        return row, col, adj[row, col]
    off = adj.masked_fill(eye, 0.0)
    row, col = torch.nonzero(off > 0, as_tuple=True)
    count = (off > 0).sum(1).clamp(min=1)
    loop_w = off.sum(1) / count
    idx = torch.arange(n, device=adj.device)
    return (torch.cat([row, idx]), torch.cat([col, idx]), torch.cat([off[row, col], loop_w]))


def dense_graph(adj: torch.Tensor, self_loops: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """The edges of :func:`graph_edges` as a dense boolean mask and a dense weight matrix."""
    row, col, w = graph_edges(adj, self_loops)
    mask = torch.zeros(adj.shape, dtype=torch.bool, device=adj.device)
    mask[row, col] = True
    weight = torch.zeros_like(adj)
    weight[row, col] = w
    return mask, weight


class DenseGAT(nn.Module):
    """One graph-attention layer (PyTorch Geometric's ``GATConv`` with ``concat=False`` and a
    one-dimensional edge feature, as in the official encoder), given a dense weighted adjacency.

    For head r and an edge j -> i of weight w_ij: e_ij = LeakyReLU_0.2(a_r'W_r x_j + b_r'W_r x_i
    + c_r w_ij), with c_r = sum_c (W^e_r)_c (a^e_r)_c as GATConv's edge projection gives;
    alpha_ij = softmax over the edges into i; out_i = mean_r sum_j alpha_ij W_r x_j + bias.
    Self-loops follow :func:`graph_edges`; the softmax runs on a dense (heads, N, N) mask.
    """

    def __init__(self, d_in: int, d_out: int, heads: int = 8, self_loops: str = "mean"):
        super().__init__()
        d_in, d_out = as_positive_int(d_in, "d_in"), as_positive_int(d_out, "d_out")
        heads = as_positive_int(heads, "heads")
        as_choice(self_loops, "self_loops", SELF_LOOPS)
        self.heads, self.d_out, self.self_loops = heads, d_out, self_loops
        self.lin = nn.Linear(d_in, heads * d_out, bias=False)
        self.lin_edge = nn.Linear(1, heads * d_out, bias=False)
        self.att_src = nn.Parameter(torch.empty(heads, d_out))
        self.att_dst = nn.Parameter(torch.empty(heads, d_out))
        self.att_edge = nn.Parameter(torch.empty(heads, d_out))
        self.bias = nn.Parameter(torch.zeros(d_out))
        for p in (self.lin.weight, self.lin_edge.weight, self.att_src, self.att_dst, self.att_edge):
            nn.init.xavier_uniform_(p)  # glorot, as GATConv initialises every weight

    def _attention(self, x: torch.Tensor, graph) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(graph, torch.Tensor):
            _matrix(x, "x", self.lin.in_features)
            if graph.shape != (len(x), len(x)):
                raise ValueError(f"adj: expected an ({len(x)}, {len(x)}) matrix, got shape {tuple(graph.shape)}")
            graph = dense_graph(graph, self.self_loops)
        mask, weight = graph
        h = self.lin(x).view(len(x), self.heads, self.d_out)
        c = (self.lin_edge.weight.view(self.heads, self.d_out) * self.att_edge).sum(-1)
        a_src, a_dst = (h * self.att_src).sum(-1).T, (h * self.att_dst).sum(-1).T  # (heads, N)
        logits = F.leaky_relu(a_dst[:, :, None] + a_src[:, None, :] + c[:, None, None] * weight, 0.2)
        return torch.softmax(logits.masked_fill(~mask, -math.inf), dim=-1), h

    def attention(self, x: torch.Tensor, adj) -> torch.Tensor:
        """The attention weights (heads, N, N): row i over the regions j that send to i."""
        return self._attention(x, adj)[0]

    def forward(self, x: torch.Tensor, adj) -> torch.Tensor:
        """``adj``: the dense (N, N) adjacency, or its ``dense_graph`` (computed once by CoRE)."""
        att, h = self._attention(x, adj)
        return torch.bmm(att, h.transpose(0, 1)).mean(0) + self.bias


def mobility_loss(H: torch.Tensor, od: torch.Tensor) -> torch.Tensor:
    """Eq. (core-mob): -sum_ij F~_ij log softmax_k(h_i'h_k)_j, with F~ = F / sum F."""
    _matrix(H, "H")
    as_finite_tensor(od, "od", shape=(len(H), len(H)))
    if bool((od < 0).any()):
        raise ValueError(
            f"od: expected non-negative trip counts, got {float(od.min()):g}")
    total = od.sum()
    if total <= 0:
        raise ValueError("od: has no trips (all zeros); the mobility loss is undefined")
    return -(od / total * torch.log_softmax(H @ H.T, dim=-1)).sum()


def manifold_align_loss(Hs: torch.Tensor, Ht: torch.Tensor, n_probes: int = 256,
                        generator: torch.Generator | None = None, probes: torch.Tensor | None = None
                        ) -> torch.Tensor:
    """Eq. (core-align): K Gaussian probes q_k; S^c = rownorm(Q H^c'), D^c = 1 - S^c S^c';
    the loss is the mean over probes of ||D^s_k - D^t_k||^2."""
    _matrix(Hs, "Hs")
    _matrix(Ht, "Ht", Hs.shape[1])
    if probes is None:
        n_probes = as_positive_int(n_probes, "n_probes")
        probes = torch.randn(n_probes, Hs.shape[1], generator=generator, device="cpu").to(Hs)
    else:
        _matrix(probes, "probes", Hs.shape[1])
    S_s = F.normalize(probes @ Hs.T, dim=-1)
    S_t = F.normalize(probes @ Ht.T, dim=-1)
    D_s, D_t = 1 - S_s @ S_s.T, 1 - S_t @ S_t.T
    return ((D_s - D_t) ** 2).sum(1).mean()


def cycle_recon_loss(Hs: torch.Tensor, Ht: torch.Tensor, q: nn.Linear,
                     k: nn.Linear) -> torch.Tensor:
    """Eq. (core-rec): A^{ab} = q(H^a) k(H^b)' / sqrt(d) (no softmax); the cycle s -> t -> s
    should give A^{ss}, and t -> s -> t should give A^{tt} (mean squared row error)."""
    _matrix(Hs, "Hs")
    _matrix(Ht, "Ht", Hs.shape[1])
    scale = math.sqrt(Hs.shape[1])
    qs, ks, qt, kt = q(Hs), k(Hs), q(Ht), k(Ht)
    A_ss, A_tt = qs @ ks.T / scale, qt @ kt.T / scale
    A_st, A_ts = qs @ kt.T / scale, qt @ ks.T / scale
    cycle_s = ((A_st @ A_ts - A_ss) ** 2).sum(1).mean()
    cycle_t = ((A_ts @ A_st - A_tt) ** 2).sum(1).mean()
    return cycle_s + cycle_t


def moment_match_loss(Hs: torch.Tensor, Ht: torch.Tensor) -> torch.Tensor:
    """Eq. (core-moment): ||m_s - m_t||^2 + ||C_s/N_s - C_t/N_t||_F^2 / ||C_s/N_s||_F^2, with
    m the mean and C = H'H the uncentred second-moment matrix of each city."""
    _matrix(Hs, "Hs")
    _matrix(Ht, "Ht", Hs.shape[1])
    C_s, C_t = Hs.T @ Hs / len(Hs), Ht.T @ Ht / len(Ht)
    return ((Hs.mean(0) - Ht.mean(0)) ** 2).sum() + ((C_s - C_t) ** 2).sum() / (C_s ** 2).sum()


def moment_gap(Hs, Ht) -> torch.Tensor:
    """The relative second-moment gap ||C_s/N_s - C_t/N_t||_F / ||C_s/N_s||_F (a diagnostic)."""
    Hs, Ht = torch.as_tensor(Hs), torch.as_tensor(Ht)
    _matrix(Hs, "Hs")
    _matrix(Ht, "Ht", Hs.shape[1])
    C_s, C_t = Hs.T @ Hs / len(Hs), Ht.T @ Ht / len(Ht)
    return torch.linalg.norm(C_s - C_t) / torch.linalg.norm(C_s)


CROSS = ("core", "moment", "none")


class CoRE(nn.Module):
    """Free region embeddings X^c (N_c, d) and a two-layer GAT per city (eq. (core-encoder));
    shared query/key maps for the cycle reconstruction.

    ``cross`` chooses the cross-city losses: "core" (manifold alignment + cycle reconstruction,
    each switchable), "moment" (explicit moment matching) or "none" (independent cities).
    """

    def __init__(self, adj_s: torch.Tensor, adj_t: torch.Tensor, d: int = 128, heads: int = 8,
                 cross: str = "core", use_align: bool = True, use_rec: bool = True,
                 self_loops: str = "mean"):
        super().__init__()
        as_choice(cross, "cross", CROSS)
        d = as_positive_int(d, "d")
        as_choice(self_loops, "self_loops", SELF_LOOPS)
        for name, flag in [("use_align", use_align), ("use_rec", use_rec)]:
            as_instance(flag, name, bool)
        for name, adj in [("adj_s", adj_s), ("adj_t", adj_t)]:
            _square(adj, name)
            if self_loops == "identity" and not bool((adj.diagonal() > 0).all()):
                raise ValueError(f"{name}: self_loops='identity' needs a positive diagonal "
                                 "(one self-loop per region)")
        if cross == "core" and not (use_align or use_rec):
            raise ValueError("use_align: cross='core' needs at least one of use_align and use_rec "
                             "(use cross='none' for independent cities)")
        self.cross, self.use_align, self.use_rec = cross, use_align, use_rec
        self.register_buffer("adj_s", adj_s)
        self.register_buffer("adj_t", adj_t)
        for city, adj in (("s", adj_s), ("t", adj_t)):  # the GAT's edges, computed once
            mask, weight = dense_graph(adj, self_loops)
            self.register_buffer(f"mask_{city}", mask)
            self.register_buffer(f"weight_{city}", weight)
        self.X_s = nn.Embedding(len(adj_s), d)
        self.X_t = nn.Embedding(len(adj_t), d)
        self.gat_s = nn.ModuleList([DenseGAT(d, d, heads, self_loops) for _ in range(2)])
        self.gat_t = nn.ModuleList([DenseGAT(d, d, heads, self_loops) for _ in range(2)])
        self.act = nn.PReLU()
        self.q, self.k = nn.Linear(d, d), nn.Linear(d, d)

    def _encode(self, X: torch.Tensor, gat: nn.ModuleList, adj: torch.Tensor) -> torch.Tensor:
        return gat[1](self.act(gat[0](X, adj)), adj)

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(H^s, H^t): the two cities' region embeddings, eq. (core-encoder)."""
        return (self._encode(self.X_s.weight, self.gat_s, (self.mask_s, self.weight_s)),
                self._encode(self.X_t.weight, self.gat_t, (self.mask_t, self.weight_t)))

    def loss(self, od_s: torch.Tensor, od_t: torch.Tensor, n_probes: int = 256,
             generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The terms of eq. (core-objective) and their sum under key "total"."""
        Hs, Ht = self.embeddings()
        terms = {"mob": mobility_loss(Hs, od_s) + mobility_loss(Ht, od_t)}
        if self.cross == "core" and self.use_align:
            terms["align"] = manifold_align_loss(Hs, Ht, n_probes, generator)
        if self.cross == "core" and self.use_rec:
            terms["rec"] = cycle_recon_loss(Hs, Ht, self.q, self.k)
        if self.cross == "moment":
            terms["moment"] = moment_match_loss(Hs, Ht)
        terms["total"] = sum(terms.values())
        terms["gap"] = moment_gap(Hs.detach(), Ht.detach())  # a diagnostic, not in the total
        return terms


def train_core(model: CoRE, od_s: torch.Tensor, od_t: torch.Tensor, epochs: int = 300,
               lr: float = 1e-3, n_probes: int = 256, seed: int = 0,
               callback=None) -> dict[str, list[float]]:
    """Full-batch Adam on eq. (core-objective) for a fixed number of epochs (no model selection);
    probes redrawn every epoch from a seeded generator. Returns the history of every term and of
    the relative moment gap (eq. (core-objective) terms, "total" and "gap").

    ``callback(epoch, model)``, if given, is called after every step (epoch counts from 1), e.g.
    to keep the embeddings of a budget sweep from one run; it must not change the model."""
    epochs = as_positive_int(epochs, "epochs")
    lr = as_positive(lr, "lr")
    n_probes = as_positive_int(n_probes, "n_probes")
    as_instance(model, "model", CoRE)
    if callback is not None and not callable(callback):
        raise ValueError(f"callback: expected a callable (epoch, model), got {callback!r}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history: dict[str, list[float]] = {}
    for epoch in range(epochs):
        terms = model.loss(od_s, od_t, n_probes, gen)
        opt.zero_grad()
        terms["total"].backward()
        opt.step()
        for name, value in terms.items():
            history.setdefault(name, []).append(float(value.detach()))
        if callback is not None:
            callback(epoch + 1, model)
    return history


def fit_pair(city_s, city_t, cross: str = "core", seed: int = 0, d: int = 128, heads: int = 8,
             epochs: int = 600, lr: float = 1e-3, n_probes: int = 1000, callback=None,
             **switches):
    """Train one model on a :class:`~companion.core.synthetic.CityData` pair from seed ``seed``.

    The defaults are the official recipe (``train.py`` and ``Model/CoRE.py`` of AIMUrban/CoRE:
    d = 128, 8 heads, 600 epochs of Adam at 1e-3, 1000 probes); the chapter scales them.

    ``callback`` goes to :func:`train_core`. Returns (H^s, H^t) as numpy arrays, the training
    history and the trained model.
    """
    from companion.core.synthetic import CityData

    as_choice(cross, "cross", CROSS)
    as_instance(city_s, "city_s", CityData), as_instance(city_t, "city_t", CityData)
    f32 = lambda a: torch.tensor(a, dtype=torch.float32)
    torch.manual_seed(seed)
    model = CoRE(f32(city_s.adj), f32(city_t.adj), d=d, heads=heads, cross=cross, **switches)
    history = train_core(model, f32(city_s.od), f32(city_t.od), epochs, lr, n_probes, seed,
                         callback)
    with torch.no_grad():
        Hs, Ht = model.embeddings()
    return Hs.numpy(), Ht.numpy(), history, model


@torch.no_grad()
def untrained_pair(city_s, city_t, seed: int = 0, d: int = 128, heads: int = 8, **switches):
    """(H^s, H^t) of the model :func:`fit_pair` would train from seed ``seed``, before any step:
    the null of the transfer claims (the same architecture and initialisation, no training)."""
    from companion.core.synthetic import CityData

    as_instance(city_s, "city_s", CityData), as_instance(city_t, "city_t", CityData)
    f32 = lambda a: torch.tensor(a, dtype=torch.float32)
    torch.manual_seed(seed)
    model = CoRE(f32(city_s.adj), f32(city_t.adj), d=d, heads=heads, **switches)
    Hs, Ht = model.embeddings()
    return Hs.numpy(), Ht.numpy()


@torch.no_grad()
def attention_scale(model: CoRE) -> float:
    """Root mean square of the within-city scores A^{ss} and A^{tt} of eq. (core-rec): how far
    the cycle term is from its trivial minimum, where every score is zero."""
    Hs, Ht = as_instance(model, "model", CoRE).embeddings()
    scale = math.sqrt(Hs.shape[1])
    A = [model.q(H) @ model.k(H).T / scale for H in (Hs, Ht)]
    return float(torch.cat([a.flatten() for a in A]).pow(2).mean().sqrt())
