"""DSDA: source-free class unlearning by energy-guided synthesis and multitask optimisation.

Wang et al. (ICML 2025) unlearn a class from a trained classifier without its training data, in
two stages. **AEGDS** synthesises stand-in data for every class from the model alone, by Langevin
dynamics on an energy read off the classifier -- JEM's joint energy, with the BatchNorm statistics
the model stored in training as the prior that keeps samples in the data's range -- accelerated
by Runge-Kutta drift and momentum (eqs. (dsda-energy), (dsda-bn), (dsda-objective),
(dsda-langevin), (dsda-rk2), (dsda-momentum)). **DAMO** then fine-tunes a copy
of the model on the synthetic data with three objectives -- keep the retain classes (dsda-kd),
move the forget class's mass where a model that never saw it would put it (dsda-forget), keep the
retain features discriminative (dsda-disc) -- and combines their gradients with PCGrad
(dsda-pcgrad) so that one objective's step does not undo another's.

No official code exists. The energy, the RK order, the momentum variant, the three losses and
PCGrad are the book's reconstruction from the paper's abstract; the baselines are
:func:`retrain` (the gold standard, uses the data), :func:`finetune` (uses the retain data),
:func:`emmn_unlearn` (source-free, error-minimising/maximising noise after Chundawat et al.) and
:func:`head_surgery` (masks the forget logit). Inputs are ``(N, d)`` float tensors in a box
``[low, high]``, labels ``int64 (N,)``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .validation import (as_finite_tensor, as_index_tensor, as_nonnegative, as_positive,
                         as_positive_int)

__all__ = [
    "MLP", "train_classifier", "class_energy", "bn_prior", "model_energy_grad", "SamplerConfig",
    "langevin", "synthesize", "noise_sets", "SyntheticSet", "retain_kd_loss", "forget_loss",
    "discrimination_loss", "pcgrad", "damo_unlearn", "retrain", "finetune", "emmn_unlearn",
    "head_surgery", "accuracy", "svc_mia", "mia_auroc", "logit_margin", "nfe_to_threshold",
    "level_between", "percentile_rank", "data_range_ranks", "feature_probe_auroc", "evaluate",
    "sampler_study",
]

GradFn = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


# ----------------------------------------------------------------------------- input checks
def _classes(classes, name: str, n_classes: int, *, proper: bool = False) -> list[int]:
    out = sorted({int(c) for c in classes})
    if not out:
        raise ValueError(f"{name}: expected at least one class")
    if out[0] < 0 or out[-1] >= n_classes:
        raise ValueError(f"{name}: classes must lie in 0..{n_classes - 1}, got {out}")
    if proper and len(out) == n_classes:
        raise ValueError(f"{name}: cannot forget all {n_classes} classes")
    return out


# ----------------------------------------------------------------------------- the classifier
class MLP(nn.Module):
    """``f = head(features(x))``: ReLU layers (each with BatchNorm when ``batchnorm``) to the
    penultimate features h, a linear head to K logits."""

    def __init__(self, d_in: int = 64, hidden: Sequence[int] = (128, 128), n_classes: int = 10,
                 batchnorm: bool = False):
        super().__init__()
        layers, last = [], as_positive_int(d_in, "d_in")
        for width in hidden:
            layers.append(nn.Linear(last, as_positive_int(width, "hidden")))
            if batchnorm:
                layers.append(nn.BatchNorm1d(int(width)))
            layers.append(nn.ReLU())
            last = int(width)
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(last, as_positive_int(n_classes, "n_classes", minimum=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def _fit(model: nn.Module, X: torch.Tensor, y: torch.Tensor, *, steps: int, batch: int, lr: float,
         seed: int, milestones: Sequence[float] = ()) -> nn.Module:
    """Mini-batch cross-entropy with Adam for a fixed number of steps; the learning rate is cut
    by 10 at each fraction of ``steps`` in ``milestones`` (a multi-step schedule)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    cuts = {int(round(m * steps)) for m in milestones}
    model.train()
    for step in range(steps):
        if step in cuts:
            for group in opt.param_groups:
                group["lr"] *= 0.1
        idx = torch.randint(len(X), (min(batch, len(X)),), generator=gen).to(X.device)
        opt.zero_grad()
        F.cross_entropy(model(X[idx]), y[idx]).backward()
        opt.step()
    return model.eval()


def train_classifier(X, y, *, n_classes: int = 10, hidden: Sequence[int] = (128, 128),
                     steps: int = 300, batch: int = 256, lr: float = 1e-2,
                     milestones: Sequence[float] = (0.5, 0.75), batchnorm: bool = True,
                     seed: int = 0) -> MLP:
    """An :class:`MLP` trained from scratch on ``(X, y)`` (the original model theta_o): Adam from
    lr 0.01 with a multi-step schedule, as the paper trains its original and retrained models."""
    X = as_finite_tensor(X, "X", ndim=2).float()
    y = as_index_tensor(y, "y", n=len(X), high=n_classes)
    if any(not 0 < float(m) < 1 for m in milestones):
        raise ValueError(f"milestones: expected fractions of the steps in (0, 1), got {milestones!r}")
    torch.manual_seed(seed)
    model = MLP(X.shape[1], hidden, n_classes, batchnorm=batchnorm).to(X.device)
    return _fit(model, X, y, steps=as_positive_int(steps, "steps"),
                batch=as_positive_int(batch, "batch"), lr=as_positive(lr, "lr"), seed=seed,
                milestones=milestones)


def _frozen(model: nn.Module) -> nn.Module:
    model = copy.deepcopy(model).eval()
    model.requires_grad_(False)
    return model


# ----------------------------------------------------------------------------- AEGDS
def class_energy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, prior: float = 0.0,
                 center: float = 0.5) -> torch.Tensor:
    """E(x, y) = -LSE_k f(x)_k - log p(y | x) = -f(x)_y, the joint energy of JEM, plus an
    optional (lambda / 2) ||x - c||^2, eq. (dsda-energy); shape (N,)."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"x: expected a non-empty (N, d) tensor, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if not torch.isfinite(x).all():
        raise ValueError("x: contains NaN or infinite values")
    y = as_index_tensor(y, "y", n=len(x), high=model.head.out_features).to(x.device)
    prior = as_nonnegative(prior, "prior")
    logits = model(x)
    energy = -torch.logsumexp(logits, 1) - F.log_softmax(logits, 1).gather(1, y[:, None])[:, 0]
    return energy + 0.5 * prior * ((x - center) ** 2).sum(1) if prior else energy


def bn_prior(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """R(X): how far the batch statistics of every BatchNorm input of ``model`` on the batch ``x``
    are from the running statistics the layer stored in training, eq. (dsda-bn),

        R = sum_l mean_j [(mu_lj(X) - m_lj)^2 / v_lj + (s2_lj(X) / v_lj - 1)^2];

    a scalar, 0 for a model without BatchNorm. The model stays in eval mode (running statistics
    are read, never updated)."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"x: expected an (N, d) batch with N >= 2, got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    if not torch.isfinite(x).all():
        raise ValueError("x: contains NaN or infinite values")
    return _forward_with_prior(model, x)[1]


def _forward_with_prior(model: nn.Module,
                        x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits f(x) and R(X) of eq. (dsda-bn) from one forward pass (unchecked)."""
    layers = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d)]
    if not layers:
        return model(x), x.new_zeros(())
    seen: list[tuple[nn.BatchNorm1d, torch.Tensor]] = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: seen.append((mod, inp[0])))
             for m in layers]
    try:
        logits = model(x)
    finally:
        for h in hooks:
            h.remove()
    total = x.new_zeros(())
    for mod, a in seen:
        v = mod.running_var + mod.eps
        total = total + ((a.mean(0) - mod.running_mean) ** 2 / v).mean() \
            + ((a.var(0, unbiased=False) / v - 1) ** 2).mean()
    return logits, total


def model_energy_grad(model: nn.Module, y: torch.Tensor, *, prior: float = 0.0,
                      bn_weight: float = 0.0, center: float = 0.5) -> GradFn:
    """``X -> (U_i, dU/dx_i)`` for a frozen copy of ``model``: one call is one NFE.

    The sampler's objective is U(X) = mean_i E(x_i, y_i) + gamma R(X), eq. (dsda-objective), with
    gamma = ``bn_weight``; the call returns each sample's share E(x_i, y_i) + gamma R(X) (their
    mean is U) and the gradient of N U with respect to every x_i, which is -grad f(x_i)_y_i plus
    the BatchNorm prior's pull."""
    teacher = _frozen(model)
    prior = as_nonnegative(prior, "prior")
    gamma = as_nonnegative(bn_weight, "bn_weight")
    y = torch.as_tensor(y)

    def grad_fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not gamma:
            with torch.enable_grad():
                x = x.detach().requires_grad_(True)
                energy = class_energy(teacher, x, y, prior=prior, center=center)
                (grad,) = torch.autograd.grad(energy.sum(), x)
            return energy.detach(), grad
        x = as_finite_tensor(x, "x", ndim=2).float()
        labels = as_index_tensor(y, "y", n=len(x), high=teacher.head.out_features).to(x.device)
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            logits, reg = _forward_with_prior(teacher, x)  # one forward: E and R together
            energy = -logits.gather(1, labels[:, None])[:, 0]  # = -LSE - log p(y|x)
            if prior:
                energy = energy + 0.5 * prior * ((x - center) ** 2).sum(1)
            reg = gamma * reg
            (grad,) = torch.autograd.grad(energy.sum() + len(x) * reg, x)
        return (energy + reg).detach(), grad

    return grad_fn


@dataclass(frozen=True)
class SamplerConfig:
    """One sampler: step alpha, noise sigma, momentum beta, Runge-Kutta order (1 = Euler), box."""

    step: float
    noise: float = 5e-3
    momentum: float = 0.0
    rk_order: int = 1
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self):
        as_positive(self.step, "step")
        as_nonnegative(self.noise, "noise")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum: expected a number in [0, 1), got {self.momentum!r}")
        if self.rk_order not in (1, 2, 4):
            raise ValueError(f"rk_order: expected 1, 2 or 4, got {self.rk_order!r}")
        if not self.low < self.high:
            raise ValueError(f"low, high: expected low < high, got {self.low!r}, {self.high!r}")


def _drift(grad_fn: GradFn, x: torch.Tensor, cfg: SamplerConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The RK step Delta of the gradient flow dx/dt = -grad E, eq. (dsda-rk2); (Delta, E(x))."""
    a, box = cfg.step, (cfg.low, cfg.high)
    energy, g1 = grad_fn(x)
    k1 = -g1
    if cfg.rk_order == 1:
        return a * k1, energy
    if cfg.rk_order == 2:
        k2 = -grad_fn((x + a * k1).clamp(*box))[1]
        return 0.5 * a * (k1 + k2), energy
    k2 = -grad_fn((x + 0.5 * a * k1).clamp(*box))[1]
    k3 = -grad_fn((x + 0.5 * a * k2).clamp(*box))[1]
    k4 = -grad_fn((x + a * k3).clamp(*box))[1]
    return a / 6 * (k1 + 2 * k2 + 2 * k3 + k4), energy


def langevin(grad_fn: GradFn, x0: torch.Tensor, cfg: SamplerConfig, *, nfe_budget: int,
             record_every: int = 5, generator: torch.Generator | None = None
             ) -> tuple[torch.Tensor, dict]:
    """Run the sampler of eqs. (dsda-langevin)-(dsda-momentum) for at most ``nfe_budget`` NFE.

    Returns the final points and a trace ``{"nfe": [...], "energy": [(N,) ...]}``: the energy of
    the current points every ``record_every`` NFE (read from the first stage of a step, so the
    trace costs nothing) and once more at the end (a monitoring call, not counted).
    """
    x = as_finite_tensor(x0, "x0", ndim=2).float().clone()
    nfe_budget = as_positive_int(nfe_budget, "nfe_budget")
    record_every = as_positive_int(record_every, "record_every")
    if nfe_budget < cfg.rk_order:
        raise ValueError(f"nfe_budget: {nfe_budget} NFE cannot pay for one RK{cfg.rk_order} step "
                         f"({cfg.rk_order} NFE)")
    v = torch.zeros_like(x)
    trace: dict = {"nfe": [], "energy": []}
    nfe, next_record = 0, 0
    for _ in range(nfe_budget // cfg.rk_order):
        delta, energy = _drift(grad_fn, x, cfg)
        if nfe >= next_record:
            trace["nfe"].append(nfe)
            trace["energy"].append(energy)
            next_record += record_every
        nfe += cfg.rk_order
        v = cfg.momentum * v + delta
        noise = torch.randn(x.shape, generator=generator).to(x) if cfg.noise else 0.0
        raw = x + v + cfg.noise * noise
        v = torch.where((raw < cfg.low) | (raw > cfg.high), 0.0, v)  # reflected momentum
        x = raw.clamp(cfg.low, cfg.high)
    trace["nfe"].append(nfe)
    trace["energy"].append(grad_fn(x)[0])
    return x, trace


@dataclass
class SyntheticSet:
    """Synthetic inputs ``x``, the class each was drawn for ``y``, and the teacher's logits."""

    x: torch.Tensor
    y: torch.Tensor
    logits: torch.Tensor

    def __post_init__(self):
        n = len(self.x) if isinstance(self.x, torch.Tensor) and self.x.ndim == 2 else None
        if n is None:
            raise ValueError(f"x: expected an (N, d) tensor, got {getattr(self.x, 'shape', type(self.x).__name__)}")
        for name, t in (("y", self.y), ("logits", self.logits)):
            if not isinstance(t, torch.Tensor) or len(t) != n:
                raise ValueError(f"{name}: expected {n} rows, one per input, got "
                                 f"{getattr(t, 'shape', type(t).__name__)}")

    def subset(self, classes: Sequence[int]) -> "SyntheticSet":
        keep = torch.isin(self.y, torch.as_tensor(list(classes), device=self.y.device))
        return SyntheticSet(self.x[keep], self.y[keep], self.logits[keep])


def synthesize(model: nn.Module, classes: Sequence[int], n_per_class: int, cfg: SamplerConfig, *,
               nfe_budget: int, conf_threshold: float = 0.9, prior: float = 0.0,
               bn_weight: float = 10.0, seed: int = 0) -> tuple[SyntheticSet, dict]:
    """AEGDS: ``n_per_class`` uniform starts per class, one :func:`langevin` chain over all of
    them on the objective (dsda-objective) (``bn_weight`` gamma), then keep the samples the teacher
    gives their class with probability >= ``conf_threshold`` (a class where none pass keeps its 8
    most confident). Returns the set and ``{"hit_rate": ..., "trace": ...}``."""
    n_classes = model.head.out_features
    classes = _classes(classes, "classes", n_classes)
    n = as_positive_int(n_per_class, "n_per_class")
    if not 0 <= conf_threshold < 1:
        raise ValueError(f"conf_threshold: expected a number in [0, 1), got {conf_threshold!r}")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    y = torch.tensor(classes, device=device).repeat_interleave(n)
    x0 = cfg.low + (cfg.high - cfg.low) * torch.rand(len(y), model_in(model), generator=gen)
    grad_fn = model_energy_grad(model, y, prior=prior, bn_weight=bn_weight,
                                center=(cfg.low + cfg.high) / 2)
    x, trace = langevin(grad_fn, x0.to(device), cfg, nfe_budget=nfe_budget, generator=gen)
    with torch.no_grad():
        logits = _frozen(model)(x)
    conf = logits.softmax(1).gather(1, y[:, None])[:, 0]
    keep = conf >= conf_threshold
    hit_rate = float(keep.float().mean())
    for c in classes:
        own = y == c
        if not keep[own].any():
            keep[own.nonzero().flatten()[conf[own].topk(min(8, int(own.sum()))).indices]] = True
    return SyntheticSet(x[keep], y[keep], logits[keep]), {"hit_rate": hit_rate, "trace": trace}


def noise_sets(model: nn.Module, classes: Sequence[int], n_per_class: int, *, seed: int = 0
               ) -> SyntheticSet:
    """The "no synthesis" ablation: uniform noise in [0, 1]^d, ``n_per_class`` per class label,
    with the teacher's logits (zero Langevin steps, no filter)."""
    classes = _classes(classes, "classes", model.head.out_features)
    n = as_positive_int(n_per_class, "n_per_class")
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n * len(classes), model_in(model), generator=gen).to(device)
    with torch.no_grad():
        logits = _frozen(model)(x)
    return SyntheticSet(x, torch.tensor(classes, device=device).repeat_interleave(n), logits)


def model_in(model: nn.Module) -> int:
    """The input dimension d of an :class:`MLP`."""
    return next(m for m in model.modules() if isinstance(m, nn.Linear)).in_features


# ----------------------------------------------------------------------------- DAMO
def retain_kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                   T: float = 2.0) -> torch.Tensor:
    """L_R = T^2 KL(softmax(t / T) || softmax(s / T)), batch mean, eq. (dsda-kd)."""
    T = as_positive(T, "T")
    log_p = F.log_softmax(student_logits / T, 1)
    log_q = F.log_softmax(teacher_logits / T, 1)
    return T * T * (log_q.exp() * (log_q - log_p)).sum(1).mean()


def forget_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor,
                forget_classes: Sequence[int]) -> torch.Tensor:
    """L_F = KL(softmax(t + m) || softmax(s)), m = -inf on the forget classes, eq. (dsda-forget)."""
    K = teacher_logits.shape[1]
    mask = torch.zeros(K, dtype=torch.bool, device=teacher_logits.device)
    mask[_classes(forget_classes, "forget_classes", K, proper=True)] = True
    log_q = F.log_softmax(teacher_logits.masked_fill(mask, -torch.inf), 1)
    q = log_q.exp()
    log_p = F.log_softmax(student_logits, 1)
    return torch.where(q > 0, q * (log_q - log_p), 0.0).sum(1).mean()


def discrimination_loss(features: torch.Tensor, labels: torch.Tensor, prototypes: torch.Tensor,
                        proto_classes: torch.Tensor, tau: float) -> torch.Tensor:
    """L_D: cross-entropy of -||h - mu_k||^2 / tau over the retain prototypes, eq. (dsda-disc).

    ``features`` (N, p), ``labels`` (N,), ``prototypes`` (P, p) and ``proto_classes`` (P,), the
    class of each prototype; a label without a prototype is refused."""
    tau = as_positive(tau, "tau")
    if not isinstance(features, torch.Tensor) or features.ndim != 2 or features.shape[0] == 0:
        raise ValueError(f"features: expected a non-empty (N, p) tensor, got "
                         f"{getattr(features, 'shape', type(features).__name__)}")
    if not torch.isfinite(features).all():
        raise ValueError("features: contains NaN or infinite values")
    if (not isinstance(prototypes, torch.Tensor) or prototypes.ndim != 2
            or prototypes.shape[0] == 0 or prototypes.shape[1] != features.shape[1]):
        raise ValueError(f"prototypes: expected a non-empty (P, {features.shape[1]}) tensor, got "
                         f"{getattr(prototypes, 'shape', type(prototypes).__name__)}")
    proto_classes = torch.as_tensor(proto_classes, device=prototypes.device)
    if proto_classes.shape != (prototypes.shape[0],) or proto_classes.dtype.is_floating_point:
        raise ValueError(f"proto_classes: expected {prototypes.shape[0]} integer class ids, got "
                         f"shape {tuple(proto_classes.shape)}, {proto_classes.dtype}")
    labels = torch.as_tensor(labels, device=features.device)
    if labels.shape != (features.shape[0],) or labels.dtype.is_floating_point:
        raise ValueError(f"labels: expected {features.shape[0]} integer labels, got shape "
                         f"{tuple(labels.shape)}, {labels.dtype}")
    match = labels[:, None] == proto_classes[None, :]
    if not match.any(1).all():
        missing = sorted(set(labels[~match.any(1)].tolist()))
        raise ValueError(f"labels: classes {missing} have no prototype (prototypes exist for "
                         f"{proto_classes.tolist()})")
    return _disc(features, match.float().argmax(1), prototypes, tau)


def _disc(features: torch.Tensor, target: torch.Tensor, prototypes: torch.Tensor,
          tau: float) -> torch.Tensor:
    """L_D given each row's prototype index ``target`` (unchecked: the DAMO loop's inner call)."""
    return F.cross_entropy(-torch.cdist(features, prototypes) ** 2 / tau, target)


def pcgrad(grads: Sequence[torch.Tensor],
           generator: torch.Generator | None = None) -> torch.Tensor:
    """PCGrad, eq. (dsda-pcgrad): project each g_i (random order of the others) off every g_j it
    conflicts with, then sum the projected gradients."""
    if len(grads) == 0:
        raise ValueError("grads: expected at least one gradient")
    if any(g.ndim != 1 or g.shape != grads[0].shape for g in grads):
        raise ValueError("grads: expected flat gradients of one length, got shapes "
                         f"{[tuple(g.shape) for g in grads]}")
    if not all(torch.isfinite(g).all() for g in grads):
        raise ValueError("grads: contains NaN or infinite values")
    return _pcgrad(grads, generator)


def _pcgrad(grads: Sequence[torch.Tensor],
            generator: torch.Generator | None) -> torch.Tensor:
    """:func:`pcgrad` without its input checks (DAMO checks its gradients itself)."""
    out = []
    for i, g in enumerate(grads):
        g = g.clone()
        others = [j for j in range(len(grads)) if j != i]
        for k in torch.randperm(len(others), generator=generator).tolist():
            gj = grads[others[k]]
            dot = g @ gj
            if dot < 0:
                g = g - dot / (gj @ gj).clamp_min(1e-20) * gj
        out.append(g)
    return torch.stack(out).sum(0)


def _flat_grad(loss: torch.Tensor, params: list[nn.Parameter]) -> torch.Tensor:
    """dL/dtheta flattened over all parameters (zeros where L does not depend on one, as L_D on
    the head)."""
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).flatten()
                      for g, p in zip(grads, params)])


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a @ b / (a.norm() * b.norm()).clamp_min(1e-20))


def damo_unlearn(teacher: nn.Module, S_R: SyntheticSet, S_F: SyntheticSet,
                 forget_classes: Sequence[int], *, steps: int = 200, lr: float = 1e-3,
                 combine: str = "pcgrad", use_disc: bool = True, forget_weight: float = 1.0,
                 batch_r: int = 64, batch_f: int = 32, self_conflict: bool = False,
                 seed: int = 0) -> tuple[MLP, dict]:
    """DAMO: a copy of ``teacher`` trained on the synthetic sets with L_R, w_F L_F and L_D
    (eqs. (dsda-kd)-(dsda-disc)), gradients combined by ``"pcgrad"`` or a naive ``"sum"``.

    Returns the student and a history per step of the cosines between the task gradients
    (``cos_RF``, ``cos_RD``, ``cos_FD``), between the update d and each task gradient
    (``cos_dR``, ...) and of the three losses (``loss_R``, ``loss_F``, ``loss_D``). With
    ``self_conflict`` it also records ``cos_RR``, the cosine between L_R's gradients on the two
    halves of the retain batch (how often one objective "conflicts" with itself by batch noise).
    The student's BatchNorm layers stay in eval mode: their statistics are the original's."""
    if combine not in ("pcgrad", "sum"):
        raise ValueError(f"combine: expected 'pcgrad' or 'sum', got {combine!r}")
    if len(S_R.x) == 0 or len(S_F.x) == 0:
        raise ValueError("S_R, S_F: both synthetic sets must be non-empty")
    steps, w_F = as_positive_int(steps, "steps"), as_positive(forget_weight, "forget_weight")
    forget = _classes(forget_classes, "forget_classes", teacher.head.out_features, proper=True)
    student = copy.deepcopy(teacher).eval()  # BatchNorm keeps the original's running statistics
    student.requires_grad_(True)
    params = list(student.parameters())
    opt = torch.optim.Adam(params, lr=lr, foreach=True)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # prototypes mu_k and temperature tau_d, frozen at the start
        classes = torch.unique(S_R.y)
        h0 = teacher.features(S_R.x)
        protos = torch.stack([h0[S_R.y == k].mean(0) for k in classes])
        own = (S_R.y[:, None] == classes[None, :]).float().argmax(1)  # every label has one
        tau = float(((h0 - protos[own]) ** 2).sum(1).median().clamp_min(1e-6))
    hist = {k: [] for k in ("cos_RF", "cos_RD", "cos_FD", "cos_dR", "cos_dF", "cos_dD",
                            "loss_R", "loss_F", "loss_D", "cos_RR")}
    for _ in range(steps):
        ir = torch.randint(len(S_R.x), (min(batch_r, len(S_R.x)),), generator=gen)
        jf = torch.randint(len(S_F.x), (min(batch_f, len(S_F.x)),), generator=gen)
        h_r = student.features(S_R.x[ir])
        losses = [retain_kd_loss(student.head(h_r), S_R.logits[ir]),
                  w_F * forget_loss(student(S_F.x[jf]), S_F.logits[jf], forget)]
        if use_disc:
            losses.append(_disc(h_r, own[ir], protos, tau))
        grads = [_flat_grad(loss, params) for loss in losses]
        if not all(torch.isfinite(g).all() for g in grads):
            raise ValueError("S_R, S_F: the task gradients became NaN or infinite")
        if self_conflict:
            half = len(ir) // 2
            logits_r = student.head(h_r)
            g_a = _flat_grad(retain_kd_loss(logits_r[:half], S_R.logits[ir[:half]]), params)
            g_b = _flat_grad(retain_kd_loss(logits_r[half:], S_R.logits[ir[half:]]), params)
            hist["cos_RR"].append(_cos(g_a, g_b))
        d = _pcgrad(grads, gen) if combine == "pcgrad" else torch.stack(grads).sum(0)
        names, n = "RFD", len(grads)
        G = torch.stack([*grads, d])  # all cosines from one Gram matrix
        norms = G.norm(dim=1).clamp_min(1e-10)
        cos = ((G @ G.T) / (norms[:, None] * norms[None, :])).tolist()
        for a in range(n):
            hist[f"loss_{names[a]}"].append(float(losses[a].detach()))
            hist[f"cos_d{names[a]}"].append(cos[n][a])
            for b in range(a + 1, n):
                hist[f"cos_{names[a]}{names[b]}"].append(cos[a][b])
        for p, g in zip(params, torch.split(d, [p.numel() for p in params])):
            p.grad = g.view_as(p).clone()
        opt.step()
    return student.eval(), {k: np.array(v) for k, v in hist.items() if v}


# ----------------------------------------------------------------------------- baselines
def retrain(X_r, y_r, **train_kw) -> MLP:
    """The gold standard: the same recipe from scratch on the retain-class data only."""
    return train_classifier(X_r, y_r, **train_kw)


def finetune(model: nn.Module, X_r, y_r, *, steps: int = 100, lr: float = 1e-3, batch: int = 64,
             seed: int = 0) -> nn.Module:
    """Keep training a copy of ``model`` on the retain data (forgetting by neglect)."""
    student = copy.deepcopy(model)
    student.requires_grad_(True)
    X_r = as_finite_tensor(X_r, "X_r", ndim=2).float()
    y_r = as_index_tensor(y_r, "y_r", n=len(X_r), high=student.head.out_features)
    return _fit(student, X_r, y_r, steps=as_positive_int(steps, "steps"),
                batch=as_positive_int(batch, "batch"), lr=as_positive(lr, "lr"), seed=seed)


def _optimise_noise(model: nn.Module, y: torch.Tensor, sign: float, *, steps: int, penalty: float,
                    gen: torch.Generator) -> torch.Tensor:
    """Inputs in [0, 1]^d that minimise (sign=+1) or maximise (sign=-1) CE(f(x), y) + penalty."""
    x = torch.rand(len(y), model_in(model), generator=gen).to(y.device).requires_grad_(True)
    opt = torch.optim.Adam([x], lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        loss = sign * F.cross_entropy(model(x), y) + penalty * (x ** 2).sum(1).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(0.0, 1.0)
    return x.detach()


def emmn_unlearn(model: nn.Module, forget_classes: Sequence[int], *, n_retain: int = 32,
                 n_forget: int = 64, noise_steps: int = 50, impair_steps: int = 50,
                 repair_steps: int = 50, impair_lr: float = 1e-2, repair_lr: float = 1e-3,
                 penalty: float = 1e-2, seed: int = 0) -> nn.Module:
    """Error-minimising / -maximising noise unlearning (after Chundawat et al., 2023), source-free:
    impair on both noise sets with their labels, then repair on the retain noise only."""
    K = model.head.out_features
    forget = _classes(forget_classes, "forget_classes", K, proper=True)
    impair_lr, repair_lr = as_positive(impair_lr, "impair_lr"), as_positive(repair_lr, "repair_lr")
    penalty = as_nonnegative(penalty, "penalty")
    teacher = _frozen(model)
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    retain = torch.tensor([k for k in range(K) if k not in forget], device=device)
    y_r = retain.repeat_interleave(as_positive_int(n_retain, "n_retain"))
    y_f = torch.tensor(forget, device=device).repeat(as_positive_int(n_forget, "n_forget"))
    x_r = _optimise_noise(teacher, y_r, +1.0, steps=noise_steps, penalty=penalty, gen=gen)
    x_f = _optimise_noise(teacher, y_f, -1.0, steps=noise_steps, penalty=penalty, gen=gen)
    student = copy.deepcopy(model)
    student.requires_grad_(True)
    student = _fit(student, torch.cat([x_r, x_f]), torch.cat([y_r, y_f]), steps=impair_steps,
                   batch=64, lr=impair_lr, seed=seed)
    return _fit(student.train(), x_r, y_r, steps=repair_steps, batch=64, lr=repair_lr, seed=seed)


def head_surgery(model: nn.Module, forget_classes: Sequence[int]) -> nn.Module:
    """Set the forget classes' head biases to -1e4: they can never be predicted; features untouched."""
    out = _frozen(model)
    forget = _classes(forget_classes, "forget_classes", out.head.out_features, proper=True)
    with torch.no_grad():
        out.head.bias[forget] = -1e4
    return out


# ----------------------------------------------------------------------------- metrics
@torch.no_grad()
def accuracy(model: nn.Module, X, y) -> float:
    """Share of rows of ``X`` whose argmax logit is ``y``."""
    X = as_finite_tensor(X, "X", ndim=2).float()
    y = as_index_tensor(y, "y", n=len(X), high=model.head.out_features)
    return float((model(X).argmax(1) == y).float().mean())


@torch.no_grad()
def _true_confidence(model: nn.Module, X, y) -> np.ndarray:
    X = as_finite_tensor(X, "X", ndim=2).float()
    y = as_index_tensor(y, "y", n=len(X), high=model.head.out_features)
    return model(X).softmax(1).gather(1, y[:, None]).cpu().numpy()


def svc_mia(model: nn.Module, X_member, y_member, X_nonmember, y_nonmember, X_target,
            y_target) -> float:
    """Confidence-based membership inference: an RBF SVC on p(y | x) learns members (retain train)
    from non-members (retain test); returns the share of targets it calls members."""
    from sklearn.svm import SVC

    feats = [_true_confidence(model, X, y) for X, y in
             ((X_member, y_member), (X_nonmember, y_nonmember), (X_target, y_target))]
    label = np.r_[np.ones(len(feats[0])), np.zeros(len(feats[1]))]
    svc = SVC(C=3, gamma="auto", kernel="rbf").fit(np.vstack(feats[:2]), label)
    return float(svc.predict(feats[2]).mean())


def nfe_to_threshold(trace: dict, threshold: float, stat: str = "median") -> float:
    """The first recorded NFE at which the ``stat`` (``"median"`` or ``"mean"``) of the recorded
    energies is at most ``threshold`` (inf if never)."""
    if not trace.get("nfe") or len(trace["nfe"]) != len(trace.get("energy", [])):
        raise ValueError("trace: expected matching, non-empty 'nfe' and 'energy' lists")
    if stat not in ("median", "mean"):
        raise ValueError(f"stat: expected 'median' or 'mean', got {stat!r}")
    threshold = float(threshold)
    if math.isnan(threshold):
        raise ValueError("threshold: expected a number, got NaN")
    for nfe, energy in zip(trace["nfe"], trace["energy"]):
        if float(energy.median() if stat == "median" else energy.mean()) <= threshold:
            return float(nfe)
    return math.inf


def level_between(start: float, target: float, fraction: float = 0.9) -> float:
    """The quality level ``start + fraction (target - start)``: a fixed share of the way from the
    noise's objective to the real data's, which no sampler reaches before it has moved."""
    start, target = float(start), float(target)
    if not (math.isfinite(start) and math.isfinite(target)) or not start > target:
        raise ValueError(f"start, target: expected finite numbers with start > target, got "
                         f"{start!r}, {target!r}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction: expected a number in (0, 1), got {fraction!r}")
    return start + fraction * (target - start)


@torch.no_grad()
def logit_margin(model: nn.Module, X, y) -> np.ndarray:
    """The membership score of each row: f(x)_y - logsumexp_{k != y} f(x)_k, in float64, the
    log-odds of the true label (unchanged in order by a constant shift of one logit)."""
    X = as_finite_tensor(X, "X", ndim=2).float()
    y = as_index_tensor(y, "y", n=len(X), high=model.head.out_features).to(X.device)
    logits = model(X).double()
    own = logits.gather(1, y[:, None])[:, 0]
    rest = logits.scatter(1, y[:, None], -torch.inf).logsumexp(1)
    return (own - rest).cpu().numpy()


def mia_auroc(model: nn.Module, X_member, y_member, X_nonmember, y_nonmember) -> float:
    """Membership inference as the AUROC of :func:`logit_margin` between members (training images
    of the original) and non-members (held-out images of the same classes): 0.5 is chance, which
    a model that saw neither set must score; the best threshold attack's power over all
    thresholds, so it needs no threshold calibrated elsewhere."""
    from sklearn.metrics import roc_auc_score

    s_in = logit_margin(model, X_member, y_member)
    s_out = logit_margin(model, X_nonmember, y_nonmember)
    return float(roc_auc_score(np.r_[np.ones(len(s_in)), np.zeros(len(s_out))], np.r_[s_in, s_out]))


def percentile_rank(values, reference) -> float:
    """The share of ``reference`` below the median of ``values`` (ties count half): where the
    typical value sits in the reference distribution, 0.5 at its median."""
    v = np.asarray(values, dtype=float).ravel()
    ref = np.asarray(reference, dtype=float).ravel()
    for name, a in (("values", v), ("reference", ref)):
        if a.size == 0 or not np.isfinite(a).all():
            raise ValueError(f"{name}: expected a non-empty array of finite numbers")
    m = np.median(v)
    return float(((ref < m).sum() + 0.5 * (ref == m).sum()) / ref.size)


@torch.no_grad()
def data_range_ranks(model: nn.Module, x, y, X_ref, y_ref, X_train) -> dict[str, float]:
    """Where synthetic images ``(x, y)`` sit among held-out real images ``(X_ref, y_ref)``: the
    :func:`percentile_rank` of their class energy (dsda-energy) (within each class, averaged over
    classes), of their mean pixel, of their pixel standard deviation, and of their distance to
    the nearest training image ``X_train`` (the real reference: each held-out image's own
    distance to the training set). 0.5 is the real median; near 0 or 1, outside the data."""
    x, X_ref, X_train = (as_finite_tensor(t, name, ndim=2).float()
                         for t, name in ((x, "x"), (X_ref, "X_ref"), (X_train, "X_train")))
    K = model.head.out_features
    y = as_index_tensor(y, "y", n=len(x), high=K).to(x.device)
    y_ref = as_index_tensor(y_ref, "y_ref", n=len(X_ref), high=K)
    teacher = _frozen(model)
    e, e_ref = class_energy(teacher, x, y), class_energy(teacher, X_ref, y_ref.to(X_ref.device))
    per_class = [percentile_rank(e[y == k].cpu(), e_ref[y_ref == k].cpu())
                 for k in torch.unique(y).tolist() if (y_ref == k).any()]
    return {
        "energy": float(np.mean(per_class)),
        "mean pixel": percentile_rank(x.mean(1).cpu(), X_ref.mean(1).cpu()),
        "pixel std": percentile_rank(x.std(1).cpu(), X_ref.std(1).cpu()),
        "nearest real": percentile_rank(torch.cdist(x, X_train).min(1).values.cpu(),
                                        torch.cdist(X_ref, X_train).min(1).values.cpu()),
    }


@torch.no_grad()
def feature_probe_auroc(model: nn.Module, X_fit, is_forget_fit, X_eval, is_forget_eval) -> float:
    """AUROC of a logistic-regression probe of forget-vs-rest on the penultimate features h(x),
    fitted on ``X_fit`` and scored on ``X_eval``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    X_fit = as_finite_tensor(X_fit, "X_fit", ndim=2).float()
    X_eval = as_finite_tensor(X_eval, "X_eval", ndim=2).float()
    for name, flags, X in (("is_forget_fit", is_forget_fit, X_fit), ("is_forget_eval", is_forget_eval, X_eval)):
        flags = np.asarray(flags)
        if flags.shape != (len(X),) or not np.isin(flags, (0, 1)).all() or len(np.unique(flags)) < 2:
            raise ValueError(f"{name}: expected {len(X)} flags of 0/1 (True/False) holding both values, got "
                             f"shape {flags.shape} with values {np.unique(flags)[:5]}")
    h_fit = model.features(X_fit).cpu().numpy()
    h_eval = model.features(X_eval).cpu().numpy()
    probe = LogisticRegression(max_iter=2000).fit(h_fit, np.asarray(is_forget_fit))
    return float(roc_auc_score(np.asarray(is_forget_eval), probe.decision_function(h_eval)))


def evaluate(model: nn.Module, data, forget_classes: Sequence[int], *,
             probe: bool = True) -> dict[str, float]:
    """The scoreboard of one model on a train/test split ``data`` (``X_train, y_train, X_test,
    y_test``): forget and retain test accuracy, forget train accuracy, the mean p(y | x) of the
    forget train images, the membership AUROC (:func:`mia_auroc`, forget train against forget
    test) and, with ``probe``, the feature-probe AUROC of forget-vs-rest."""
    forget = torch.as_tensor(_classes(forget_classes, "forget_classes", model.head.out_features),
                             device=data.y_train.device)
    f_tr, f_te = torch.isin(data.y_train, forget), torch.isin(data.y_test, forget)
    out = {
        "forget acc (test)": accuracy(model, data.X_test[f_te], data.y_test[f_te]),
        "forget acc (train)": accuracy(model, data.X_train[f_tr], data.y_train[f_tr]),
        "retain acc (test)": accuracy(model, data.X_test[~f_te], data.y_test[~f_te]),
        "forget conf (train)": float(_true_confidence(model, data.X_train[f_tr],
                                                     data.y_train[f_tr]).mean()),
        "MIA AUROC": mia_auroc(model, data.X_train[f_tr], data.y_train[f_tr], data.X_test[f_te],
                               data.y_test[f_te]),
    }
    if probe:
        out["probe AUROC"] = feature_probe_auroc(model, data.X_train, f_tr.cpu().numpy(),
                                                 data.X_test, f_te.cpu().numpy())
    return out


def sampler_study(model: nn.Module, samplers: dict[str, tuple[int, float]], steps: Sequence[float],
                  *, n_per_class: int, nfe_budget: int, bn_weight: float = 10.0,
                  seed: int = 0) -> dict[str, dict[float, dict]]:
    """Every sampler ``name -> (rk_order, momentum)`` at every step size in ``steps``, from the same
    uniform starts (``n_per_class`` per class, all classes), with the same noise stream, at the
    same NFE budget, on the objective (dsda-objective). Returns ``{name: {step: {"trace", "x",
    "y", "x0", "final"}}}``, ``final`` the mean objective at the end; choosing a step is the caller's."""
    if not samplers:
        raise ValueError("samplers: expected at least one sampler")
    steps = [as_positive(a, "steps") for a in steps]
    if not steps:
        raise ValueError("steps: expected at least one step size")
    K, d = model.head.out_features, model_in(model)
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(K).repeat_interleave(as_positive_int(n_per_class, "n_per_class"))
    x0 = torch.rand(len(y), d, generator=gen)
    device = next(model.parameters()).device
    y, x0 = y.to(device), x0.to(device)
    grad_fn = model_energy_grad(model, y, bn_weight=bn_weight)
    runs: dict[str, dict[float, dict]] = {}
    for name, (rk, beta) in samplers.items():
        runs[name] = {}
        for a in steps:
            cfg = SamplerConfig(a, momentum=beta, rk_order=rk)
            x, trace = langevin(grad_fn, x0, cfg, nfe_budget=nfe_budget, record_every=1,
                                generator=torch.Generator().manual_seed(seed + 1))
            runs[name][a] = {"trace": trace, "x": x, "y": y, "x0": x0,
                             "final": float(trace["energy"][-1].mean())}
    return runs
