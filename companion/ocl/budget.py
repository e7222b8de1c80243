"""Training at a fixed FLOP budget: every method gets the same counted compute.

A method's step costs ``F_step = method.flops_per_step(batch)`` FLOPs (forward and backward);
at budget ``F`` it trains for ``floor(F / F_step)`` steps of ``batch`` images drawn without
replacement from the pool (a new permutation every epoch), with AdamW (betas 0.9, 0.95,
weight decay 0.05 on the matrices only) and a cosine learning rate after a 5% linear warm-up.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import torch

from companion.validation import as_positive, as_positive_int

from .methods import _Method

__all__ = ["History", "train_for_flops", "steps_for_flops", "scaled_lr", "time_steps"]


@dataclass
class History:
    """What a training run leaves: the loss per step, the seconds, and the snapshots.

    ``snapshots`` maps a cumulative FLOP count to the encoder's ``state_dict`` at that point.
    """

    method: str
    flops_per_step: int
    steps: int
    loss: list[float] = field(default_factory=list)
    seconds: float = 0.0
    snapshots: dict[int, dict] = field(default_factory=dict)


def steps_for_flops(flops_budget: int, flops_per_step: int) -> int:
    """floor(F / F_step), at least one step."""
    flops_budget = as_positive_int(int(flops_budget), "flops_budget")
    return max(1, flops_budget // as_positive_int(int(flops_per_step), "flops_per_step"))


def scaled_lr(base_lr: float, batch: int) -> float:
    """The linear scaling rule of the official code: ``lr = base_lr * batch / 256``."""
    batch = as_positive_int(batch, "batch")
    return as_positive(base_lr, "base_lr") * batch / 256


def time_steps(methods: dict, x: torch.Tensor, rounds: int = 20, warmup: int = 3) -> dict:
    """Seconds of one training step (forward and backward) of every method on the batch ``x``.

    The methods are timed in interleaved rounds (one step of each per round, in a fixed order),
    so that a change in the machine's load falls on all of them alike; the first ``warmup``
    rounds are discarded. Returns ``{name: [seconds per round]}``.
    """
    if not isinstance(methods, dict) or not methods:
        raise ValueError(f"methods: expected a non-empty dict name -> method, got {methods!r}")
    rounds, warmup = as_positive_int(rounds, "rounds"), as_positive_int(warmup, "warmup", minimum=0)
    out = {name: [] for name in methods}
    for r in range(warmup + rounds):
        for name, method in methods.items():
            start = time.perf_counter()
            method.loss(x, torch.Generator().manual_seed(r)).backward()
            if x.is_cuda:
                torch.cuda.synchronize()
            if r >= warmup:
                out[name].append(time.perf_counter() - start)
            method.zero_grad(set_to_none=True)
    return out


def _lr(step: int, steps: int, lr: float) -> float:
    warm = max(1, round(0.05 * steps))
    if step < warm:
        return lr * (step + 1) / warm
    return 0.5 * lr * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm)))


def train_for_flops(method: _Method, pool: torch.Tensor, steps: int, *, batch: int = 256,
                    lr: float = 1e-3, seed: int = 0, snapshot_steps=(), progress=None) -> History:
    """Train ``method`` in place for ``steps`` steps on the unlabeled ``pool`` ``[N, 1, H, W]``.

    ``snapshot_steps``: after which step counts to keep a copy of the encoder's weights (the
    last step is always kept). ``progress``: an optional wrapper of the step range.
    """
    steps, batch = as_positive_int(steps, "steps"), as_positive_int(batch, "batch", minimum=2)
    if len(pool) < batch:
        raise ValueError(f"pool: expected at least batch={batch} images, got {len(pool)}")
    decay = [p for p in method.parameters() if p.dim() >= 2]
    rest = [p for p in method.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(seed)
    hist = History(method.name, method.flops_per_step(batch), steps)
    keep = set(snapshot_steps) | {steps}
    per_epoch = len(pool) // batch
    order = torch.randperm(len(pool), generator=g)
    method.train()
    start = time.perf_counter()
    for step in (progress or (lambda r, **_: r))(range(steps), desc=method.name):
        if step % per_epoch == 0 and step:
            order = torch.randperm(len(pool), generator=g)
        idx = order[(step % per_epoch) * batch:(step % per_epoch + 1) * batch]
        for group in opt.param_groups:
            group["lr"] = _lr(step, steps, lr)
        loss = method.loss(pool[idx.to(pool.device)], g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        hist.loss.append(float(loss.detach()))
        if step + 1 in keep:
            hist.snapshots[(step + 1) * hist.flops_per_step] = copy.deepcopy(
                method.vit.state_dict())
    hist.seconds = time.perf_counter() - start
    return hist
