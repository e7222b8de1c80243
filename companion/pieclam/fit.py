"""Fitting BigClam, IeClam, PClam and PieClam: projected gradient ascent, alternated with the prior.

One entry point, :func:`fit_clam`, with a :class:`ClamConfig`:

* ``lorentz=False, use_prior=False``: BigClam;  ``lorentz=True, use_prior=False``: IeClam;
* ``lorentz=False, use_prior=True``: PClam;     ``lorentz=True, use_prior=True``: PieClam.

The codes move by projected gradient ascent, ``F <- Proj(F + eta grad)`` (eq. (pieclam-step)),
with ``eta = lr_feat_n / N`` because the gradient holds ``-sum_m f_m``, which grows with N.
With a prior: ``warmup_steps`` prior-free code steps, then ``rounds`` rounds of
``prior_steps`` Adam steps on the flow (codes frozen, noise added) followed by ``feat_steps``
code steps (prior frozen), halving the code step, the noise and the prior's learning rate after
each round (unless ``halve_each_round=False``: the official settings of the known-prior experiment
step their scheduler every 100 rounds, so never within 5); a last ``prior_steps`` on the flow fit it to the final codes.

Several disjoint graphs can be fitted at once, without a prior, by giving ``batch`` (the graph
of each node): each graph gets its own all-pairs term and its own step ``lr_feat_n / N_g``, so
the result is that of separate fits, at the cost of one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .core import _grad, _loglik, as_batch, as_edge_index, as_omitted, check_codes, project_cone
from .prior import RealNVPPrior, clam_split
from ..validation import as_nonnegative, as_positive, as_positive_int

__all__ = ["ClamConfig", "ClamResult", "fit_clam", "fit_flow"]


@dataclass(frozen=True)
class ClamConfig:
    """Settings of one fit (defaults: the book's quick scale)."""

    dim: int = 4  # D: C communities for BigClam/PClam, C inclusive + C exclusive (D = 2C) for IeClam/PieClam
    lorentz: bool = True
    use_prior: bool = False
    lr_feat_n: float = 0.02  # eta * N: the code step is lr_feat_n / N
    feat_steps: int = 2000  # prior-free: all steps; with a prior: steps per round
    warmup_steps: int = 0  # with a prior: prior-free code steps before the first round
    prior_steps: int = 300
    rounds: int = 3
    lr_prior: float = 3e-3
    weight_decay: float = 0.1
    noise: float = 0.05  # std of the noise added to the codes while the prior trains
    l1: float = 0.0  # lambda_1: an L1 pull on the codes
    s_reg: float = 0.0  # lambda_s: an L2 pull on the exclusive entries
    n_blocks: int = 8
    hidden: int = 32
    flow_activation: str = "relu"  # the official normflows MLP; "leaky_relu": the book's earlier flow
    flow_scale_bound: float | None = None  # official: unbounded log-scales; 2.0: tanh-bounded
    flow_limit_radius: float | None = 10.0  # official: far points stop moving in the inverse pass
    halve_each_round: bool = True  # halve code step, noise and prior lr after each round (StepLR)
    seed: int = 0
    log_every: int = 50

    def __post_init__(self):
        for name in ("dim", "feat_steps", "rounds", "n_blocks", "hidden", "log_every"):
            v = getattr(self, name)
            as_positive_int(v, name)
        for name in ("warmup_steps", "prior_steps", "seed"):
            v = getattr(self, name)
            as_positive_int(v, name, minimum=0)
        for name in ("lr_feat_n", "lr_prior"):
            v = getattr(self, name)
            as_positive(v, name)
        for name in ("weight_decay", "noise", "l1", "s_reg"):
            v = getattr(self, name)
            as_nonnegative(v, name)
        if not isinstance(self.halve_each_round, bool):
            raise ValueError(f"halve_each_round: expected a bool, got {self.halve_each_round!r}")
        if self.flow_activation not in ("leaky_relu", "relu"):
            raise ValueError(f"flow_activation: expected 'leaky_relu' or 'relu', got {self.flow_activation!r}")
        for name in ("flow_scale_bound", "flow_limit_radius"):
            v = getattr(self, name)
            if v is not None:
                as_positive(v, name)
        if self.lorentz and self.dim % 2:
            raise ValueError(f"dim: IeClam/PieClam codes are C inclusive + C exclusive entries; dim must be even, "
                             f"got {self.dim}")

    def flow_kwargs(self) -> dict:
        """The settings of the RealNVP prior this configuration builds."""
        return dict(n_blocks=self.n_blocks, hidden=self.hidden, noise_std=self.noise,
                    activation=self.flow_activation, scale_bound=self.flow_scale_bound,
                    limit_radius=self.flow_limit_radius)

    @property
    def name(self) -> str:
        return {(False, False): "BigClam", (True, False): "IeClam", (False, True): "PClam",
                (True, True): "PieClam"}[(self.lorentz, self.use_prior)]


@dataclass
class ClamResult:
    """A fitted model: codes ``F`` (N x D), the ``prior`` (or None), ``attrs`` and a ``history``."""

    F: torch.Tensor
    cfg: ClamConfig
    edge_index: torch.Tensor
    prior: RealNVPPrior | None = None
    attrs: torch.Tensor | None = None
    history: dict[str, list] = field(default_factory=lambda: {"step": [], "loglik": []})

    def prior_input(self) -> torch.Tensor:
        """What the prior models: the codes, with the node attributes appended if there are any."""
        return self.F if self.attrs is None else torch.cat([self.F, self.attrs], dim=1)


def _check_attrs(attrs, num_nodes: int) -> torch.Tensor | None:
    if attrs is None:
        return None
    a = torch.as_tensor(np.asarray(attrs, dtype=np.float64) if not torch.is_tensor(attrs) else attrs).double()
    if a.ndim != 2 or a.shape[0] != num_nodes:
        raise ValueError(f"attrs: expected shape ({num_nodes}, A), one row per node, got {tuple(a.shape)}")
    if not bool(torch.isfinite(a).all()):
        raise ValueError("attrs: must be finite (nan or inf found)")
    return a


def _code_step(F, ei, cfg, eta, omitted, prior, attrs, batch=None):
    g = _grad(F, ei, cfg.lorentz, omitted, batch=batch)
    if prior is not None:
        Fg = F.detach().requires_grad_(True)
        x = Fg if attrs is None else torch.cat([Fg, attrs], dim=1)
        (gp,) = torch.autograd.grad(prior.log_prob(x).sum(), Fg)
        g = g + gp
    if cfg.l1:
        g = g - cfg.l1 * torch.sign(F)
    if cfg.s_reg and cfg.lorentz:
        c = F.shape[1] // 2
        g = g - cfg.s_reg * torch.cat([torch.zeros_like(F[:, :c]), F[:, c:]], dim=1)
    return project_cone(F + eta * g, cfg.lorentz)


def _fit_prior(prior, opt, x, steps, gen):
    """``steps`` Adam steps of maximum likelihood on ``x`` blurred by ``prior.noise_std`` (codes frozen).

    The loss is the negative log-likelihood *summed* over the nodes, as in the official code, so
    the weight decay weighs against the whole graph's likelihood, not against one node's.
    Returns the last loss per node.
    """
    prior.train()
    for _ in range(steps):
        opt.zero_grad()
        noisy = x + prior.noise_std * torch.randn(x.shape, dtype=x.dtype, generator=gen).to(x.device)
        loss = -prior.log_prob(noisy).sum()
        loss.backward()
        opt.step()
    prior.eval()
    return float(loss.detach()) / x.shape[0] if steps else float("nan")


def fit_clam(edge_index, num_nodes: int, cfg: ClamConfig = ClamConfig(), attrs=None, omitted=None,
             F0=None, batch=None) -> ClamResult:
    """Fit a Clam model to an undirected simple graph (see the module docstring).

    ``attrs`` (N x A, optional): node attributes that the prior models beside the codes (PieClam
    and PClam only). ``omitted`` (2 x Q, each dyad once): held-out dyads that count neither as
    edges nor as non-edges. ``F0`` (optional): starting codes (else uniform on [0, 1)^D,
    projected). ``batch`` (N, optional, prior-free models only): the graph of each node.
    """
    if not isinstance(cfg, ClamConfig):
        raise ValueError(f"cfg: expected a ClamConfig, got {type(cfg).__name__}")
    ei = as_edge_index(edge_index, num_nodes, allow_empty=False)
    attrs = _check_attrs(attrs, num_nodes)
    if attrs is not None and not cfg.use_prior:
        raise ValueError("attrs: only a model with a prior (use_prior=True) can use node attributes")
    omitted = as_omitted(omitted, num_nodes, ei)
    batch = as_batch(batch, num_nodes, ("edge_index", ei), ("omitted", omitted))
    if batch is not None and cfg.use_prior:
        raise ValueError("batch: a batch of graphs is fitted without a prior (each graph would need its own)")
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    if F0 is None:
        F = project_cone(torch.rand(num_nodes, cfg.dim, dtype=torch.float64, generator=gen), cfg.lorentz)
    else:
        F = check_codes(torch.as_tensor(F0).double().clone(), cfg.lorentz, name="F0")
        if F.shape != (num_nodes, cfg.dim):
            raise ValueError(f"F0: expected shape ({num_nodes}, {cfg.dim}), got {tuple(F.shape)}")
    result = ClamResult(F=F, cfg=cfg, edge_index=ei, attrs=attrs)
    if batch is None:
        eta = cfg.lr_feat_n / num_nodes
    else:  # each graph's own step, eta = lr_feat_n / N_g
        eta = (cfg.lr_feat_n / torch.bincount(batch).double())[batch][:, None]
    step = 0

    def log(F):
        result.history["step"].append(step)
        result.history["loglik"].append(float(_loglik(F, ei, cfg.lorentz, omitted, batch=batch)))

    def code_steps(F, n, prior):
        nonlocal step
        for _ in range(n):
            if step % cfg.log_every == 0:
                log(F)
            F = _code_step(F, ei, cfg, eta, omitted, prior, attrs, batch)
            step += 1
        return F

    with torch.no_grad():
        if not cfg.use_prior:
            F = code_steps(F, cfg.feat_steps, None)
            log(F)
            result.F = F
            return result
        F = code_steps(F, cfg.warmup_steps, None)
    n_attrs = 0 if attrs is None else attrs.shape[1]
    prior = RealNVPPrior(cfg.dim + n_attrs, first=clam_split(cfg.dim, cfg.lorentz, n_attrs), **cfg.flow_kwargs())
    opt = torch.optim.Adam(prior.parameters(), lr=cfg.lr_prior, weight_decay=cfg.weight_decay, fused=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    result.history["prior_nll"] = []
    for _ in range(cfg.rounds):
        x = F if attrs is None else torch.cat([F, attrs], dim=1)
        result.history["prior_nll"].append(_fit_prior(prior, opt, x, cfg.prior_steps, gen))  # p-step
        prior.requires_grad_(False)  # F-step: prior frozen
        F = code_steps(F, cfg.feat_steps, prior)
        prior.requires_grad_(True)
        if cfg.halve_each_round:
            eta, prior.noise_std = max(eta / 2, 1e-8), max(prior.noise_std / 2, 1e-4)
            sched.step()
    x = F if attrs is None else torch.cat([F, attrs], dim=1)
    result.history["prior_nll"].append(_fit_prior(prior, opt, x, cfg.prior_steps, gen))  # the prior of the final codes
    log(F)
    result.F, result.prior = F, prior
    return result


def fit_flow(x: torch.Tensor, cfg: ClamConfig, first: torch.Tensor | None = None) -> RealNVPPrior:
    """The prior of :func:`fit_clam` fitted to fixed points ``x`` (N x d), with no graph: the same
    flow, noise, learning rates and number of p-steps (``(rounds + 1) * prior_steps``, noise and
    learning rate halved after each round). A reference for what the flow can do with exact codes."""
    if not isinstance(cfg, ClamConfig):
        raise ValueError(f"cfg: expected a ClamConfig, got {type(cfg).__name__}")
    x = torch.as_tensor(x).double()
    if x.ndim != 2 or x.shape[0] < 2 or not bool(torch.isfinite(x).all()):
        raise ValueError(f"x: expected finite points of shape (N, d), N >= 2, got {tuple(x.shape)}")
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    prior = RealNVPPrior(x.shape[1], first=first, **cfg.flow_kwargs())
    opt = torch.optim.Adam(prior.parameters(), lr=cfg.lr_prior, weight_decay=cfg.weight_decay, fused=True)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(cfg.rounds):
        _fit_prior(prior, opt, x, cfg.prior_steps, gen)
        if cfg.halve_each_round:
            prior.noise_std = max(prior.noise_std / 2, 1e-4)
            sched.step()
    _fit_prior(prior, opt, x, cfg.prior_steps, gen)
    return prior
