"""CoRE: per-city GAT encoders of free region embeddings, trained with intra-city mobility
prediction and two cross-city alignment losses (manifold alignment and cycle reconstruction).

Equation labels are those of the chapter. Graph layers are dense (an (N, N) weight matrix with
self-loops, zero where there is no edge), which is exact and fast at a few hundred regions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _matrix(x, name: str, cols: int | None = None) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] < 1:
        shape = getattr(x, "shape", type(x).__name__)
        raise ValueError(f"{name}: expected a 2-D tensor (N, d) with N >= 1, got {shape}")
    if cols is not None and x.shape[1] != cols:
        raise ValueError(f"{name}: expected {cols} columns, got {x.shape[1]}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or infinite values")


class DenseGAT(nn.Module):
    """One graph-attention layer on a dense weighted adjacency, heads averaged.

    For head r: e_ij = LeakyReLU(a_r'[W_r x_i ; W_r x_j] + c_r A_ij) on edges (A_ij > 0),
    alpha_ij = softmax_j(e_ij), out_i = mean_r sum_j alpha_ij W_r x_j + b.
    The edge weight enters the logit as a one-dimensional edge feature, as in the paper's code.
    """

    def __init__(self, d_in: int, d_out: int, heads: int = 4):
        super().__init__()
        self.heads, self.d_out = heads, d_out
        self.lin = nn.Linear(d_in, heads * d_out, bias=False)
        self.att_src = nn.Parameter(torch.empty(heads, d_out))
        self.att_dst = nn.Parameter(torch.empty(heads, d_out))
        self.att_edge = nn.Parameter(torch.zeros(heads))
        self.bias = nn.Parameter(torch.zeros(d_out))
        nn.init.xavier_uniform_(self.att_src)
        nn.init.xavier_uniform_(self.att_dst)

    def attention(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """The attention weights (heads, N, N); each row sums to one over the edges."""
        h = self.lin(x).view(len(x), self.heads, self.d_out)
        src = torch.einsum("nrd,rd->rn", h, self.att_src)
        dst = torch.einsum("nrd,rd->rn", h, self.att_dst)
        logits = F.leaky_relu(src[:, :, None] + dst[:, None, :] + self.att_edge[:, None, None] * adj, 0.2)
        return torch.softmax(logits.masked_fill(adj <= 0, float("-inf")), dim=-1)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        if adj.shape != (len(x), len(x)) or not bool((adj.diagonal() > 0).all()):
            raise ValueError(f"adj: expected an ({len(x)}, {len(x)}) matrix with self-loops, "
                             f"got shape {tuple(adj.shape)}")
        h = self.lin(x).view(len(x), self.heads, self.d_out)
        out = torch.einsum("rij,jrd->ird", self.attention(x, adj), h)
        return out.mean(1) + self.bias


def mobility_loss(H: torch.Tensor, od: torch.Tensor) -> torch.Tensor:
    """Eq. (core-mob): -sum_ij F~_ij log softmax_k(h_i'h_k)_j, with F~ = F / sum F."""
    _matrix(H, "H")
    if od.shape != (len(H), len(H)) or bool((od < 0).any()) or not bool(torch.isfinite(od).all()):
        raise ValueError(f"od: expected a non-negative ({len(H)}, {len(H)}) matrix, got {tuple(od.shape)}")
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
        if not isinstance(n_probes, int) or n_probes < 1:
            raise ValueError(f"n_probes: expected a positive integer, got {n_probes!r}")
        probes = torch.randn(n_probes, Hs.shape[1], generator=generator, device="cpu").to(Hs)
    S_s = F.normalize(probes @ Hs.T, dim=-1)
    S_t = F.normalize(probes @ Ht.T, dim=-1)
    D_s, D_t = 1 - S_s @ S_s.T, 1 - S_t @ S_t.T
    return ((D_s - D_t) ** 2).sum(1).mean()


def cycle_recon_loss(Hs: torch.Tensor, Ht: torch.Tensor, q: nn.Linear, k: nn.Linear) -> torch.Tensor:
    """Eq. (core-rec): A^{ab} = q(H^a) k(H^b)' / sqrt(d) (no softmax); the cycle s -> t -> s
    should give A^{ss}, and t -> s -> t should give A^{tt} (mean squared row error)."""
    _matrix(Hs, "Hs")
    _matrix(Ht, "Ht", Hs.shape[1])
    scale = math.sqrt(Hs.shape[1])
    qs, ks, qt, kt = q(Hs), k(Hs), q(Ht), k(Ht)
    A_ss, A_tt = qs @ ks.T / scale, qt @ kt.T / scale
    A_st, A_ts = qs @ kt.T / scale, qt @ ks.T / scale
    return ((A_st @ A_ts - A_ss) ** 2).sum(1).mean() + ((A_ts @ A_st - A_tt) ** 2).sum(1).mean()


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

    def __init__(self, adj_s: torch.Tensor, adj_t: torch.Tensor, d: int = 32, heads: int = 4,
                 cross: str = "core", use_align: bool = True, use_rec: bool = True):
        super().__init__()
        if cross not in CROSS:
            raise ValueError(f"cross: expected one of {CROSS}, got {cross!r}")
        if not isinstance(d, int) or d < 1:
            raise ValueError(f"d: expected a positive integer, got {d!r}")
        for name, adj in [("adj_s", adj_s), ("adj_t", adj_t)]:
            if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
                raise ValueError(f"{name}: expected a square (N, N) matrix, got {tuple(adj.shape)}")
        self.cross, self.use_align, self.use_rec = cross, use_align, use_rec
        self.register_buffer("adj_s", adj_s)
        self.register_buffer("adj_t", adj_t)
        self.X_s = nn.Embedding(len(adj_s), d)
        self.X_t = nn.Embedding(len(adj_t), d)
        self.gat_s = nn.ModuleList([DenseGAT(d, d, heads) for _ in range(2)])
        self.gat_t = nn.ModuleList([DenseGAT(d, d, heads) for _ in range(2)])
        self.act = nn.PReLU()
        self.q, self.k = nn.Linear(d, d), nn.Linear(d, d)

    def _encode(self, X: torch.Tensor, gat: nn.ModuleList, adj: torch.Tensor) -> torch.Tensor:
        return gat[1](self.act(gat[0](X, adj)), adj)

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(H^s, H^t): the two cities' region embeddings, eq. (core-encoder)."""
        return (self._encode(self.X_s.weight, self.gat_s, self.adj_s),
                self._encode(self.X_t.weight, self.gat_t, self.adj_t))

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
               lr: float = 1e-3, n_probes: int = 256, seed: int = 0) -> dict[str, list[float]]:
    """Full-batch Adam on eq. (core-objective) for a fixed number of epochs (no model selection);
    probes redrawn every epoch from a seeded generator. Returns the history of every term and of
    the relative moment gap (eq. (core-objective) terms, "total" and "gap")."""
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs: expected a positive integer, got {epochs!r}")
    if not lr > 0:
        raise ValueError(f"lr: expected a positive learning rate, got {lr!r}")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history: dict[str, list[float]] = {}
    for _ in range(epochs):
        terms = model.loss(od_s, od_t, n_probes, gen)
        opt.zero_grad()
        terms["total"].backward()
        opt.step()
        for name, value in terms.items():
            history.setdefault(name, []).append(float(value.detach()))
    return history


def fit_pair(city_s, city_t, cross: str = "core", seed: int = 0, d: int = 32, heads: int = 2,
             epochs: int = 200, lr: float = 1e-2, n_probes: int = 256, **switches):
    """Train one model on a :class:`~companion.core.synthetic.CityData` pair from seed ``seed``.

    Returns (H^s, H^t) as numpy arrays, the training history and the trained model.
    """
    f32 = lambda a: torch.tensor(a, dtype=torch.float32)
    torch.manual_seed(seed)
    model = CoRE(f32(city_s.adj), f32(city_t.adj), d=d, heads=heads, cross=cross, **switches)
    history = train_core(model, f32(city_s.od), f32(city_t.od), epochs, lr, n_probes, seed)
    with torch.no_grad():
        Hs, Ht = model.embeddings()
    return Hs.numpy(), Ht.numpy(), history, model


@torch.no_grad()
def attention_scale(model: CoRE) -> float:
    """Root mean square of the within-city scores A^{ss} and A^{tt} of eq. (core-rec): how far
    the cycle term is from its trivial minimum, where every score is zero."""
    Hs, Ht = model.embeddings()
    scale = math.sqrt(Hs.shape[1])
    A = [model.q(H) @ model.k(H).T / scale for H in (Hs, Ht)]
    return float(torch.cat([a.flatten() for a in A]).pow(2).mean().sqrt())
