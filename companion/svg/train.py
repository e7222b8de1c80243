"""Training the toy video DiT with rectified flow on bouncing shapes, and its checkpoint.

Loss (eq. (svg-flow)): ``E || v_theta(x_tau, tau, y) - (eps - x0) ||^2`` with
``x_tau = (1 - tau) x0 + tau eps`` and ``tau`` logit-normal.

Entry point (writes ``companion/svg/checkpoints/tiny_dit.pt`` and ``tiny_dit.json``)::

    python -m companion.svg.train --scale quick|full [--out DIR] [--seed 0] [--steps K]

``quick`` is the recipe of the shipped checkpoint: 1,500 steps of 16 videos on one CPU thread
(10 to 20 minutes). ``full`` trains a wider, deeper model on larger frames, on a GPU when
there is one. Both stop after a fixed number of steps, never on a clock.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch

from companion.checkpoints import (
    load_checkpoint,
    provenance,
    recipe_from_args,
    save_checkpoint,
    train_from_recipe,
    training_parser,
)

from .data import bouncing_shapes
from .model import TinyVideoDiT

__all__ = ["RECIPES", "flow_loss", "train_dit", "load_dit", "load_or_train", "CHECKPOINTS"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
VALID = dict(n=64, seed=4321)  # validation videos of the training log (fixed noise and tau, seed 4321)
_DATA = dict(frames=16, size=16, channels=1, max_shapes=2, texture=0.15, flicker=0.1)
_MODEL = dict(frames=16, size=16, channels=1, patch=4, dim=64, depth=4, heads=4, n_cond=16)
RECIPES = {  # a fixed number of steps on a fixed number of threads: the same weights on any CPU
    "quick": dict(n_videos=4096, steps=1500, batch_size=16, lr=2e-3, seed=0, threads=1,
                  data=_DATA, model=_MODEL),
    "full": dict(n_videos=20000, steps=20000, batch_size=32, lr=1e-3, seed=0, threads=1,
                 data={**_DATA, "size": 32}, model={**_MODEL, "size": 32, "dim": 128, "depth": 6}),
}


def flow_loss(model: TinyVideoDiT, x0: torch.Tensor, y: torch.Tensor, generator: torch.Generator | None = None,
              tau: torch.Tensor | None = None, eps: torch.Tensor | None = None) -> torch.Tensor:
    """Rectified-flow loss on one batch; ``tau`` logit-normal unless given."""
    B = x0.shape[0]
    if tau is None:
        tau = torch.sigmoid(torch.randn(B, generator=generator)).to(x0.device)
    if eps is None:
        eps = torch.randn(x0.shape, generator=generator).to(x0.device)
    t = tau.view(B, 1, 1, 1, 1)
    return (model((1 - t) * x0 + t * eps, tau, y) - (eps - x0)).pow(2).mean()


@torch.no_grad()
def validation_loss(model: TinyVideoDiT, data=None, data_config: dict | None = None) -> float:
    """Flow loss on the fixed validation videos (their noise and tau fixed too)."""
    if data is None:
        data = _valid_set(data_config if data_config is not None else RECIPES["quick"]["data"])
    model.eval()
    loss = float(flow_loss(model, *data))
    model.train()
    return loss


def _valid_set(data: dict):
    x, y = bouncing_shapes(VALID["n"], **data, seed=VALID["seed"])
    g = torch.Generator().manual_seed(VALID["seed"])
    return x, y, g, torch.sigmoid(torch.randn(VALID["n"], generator=g)), torch.randn(x.shape, generator=g)


def train_dit(model: TinyVideoDiT, *, n_videos: int, steps: int, batch_size: int, lr: float, seed: int = 0,
              threads: int | None = None, data: dict | None = None, log_every: int = 100, progress=None,
              device: str | None = None) -> dict:
    """Train ``model`` in place for exactly ``steps`` steps on ``n_videos`` seeded videos.

    ``threads`` fixes torch's CPU thread count (the order of floating-point sums, hence the
    weights, depends on it). Returns the training history.
    """
    if steps < 1 or batch_size < 1 or n_videos < 1:
        raise ValueError(f"steps: expected steps, batch_size, n_videos >= 1, got {steps}, {batch_size}, {n_videos}")
    if threads is not None:
        torch.set_num_threads(threads)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    data = data or {}
    videos, labels = bouncing_shapes(n_videos, seed=seed, **data)
    x_val, y_val, _, tau_val, eps_val = _valid_set(data)
    valid = (x_val.to(device), y_val.to(device), None, tau_val.to(device), eps_val.to(device))
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warmup = min(100, steps)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * s / steps))))
    history = {"step": [], "train_loss": [], "valid_loss": [], "seconds": []}
    start, running = time.perf_counter(), None
    steps_iter = range(1, steps + 1)
    for step in (progress(steps_iter) if progress else steps_iter):
        idx = torch.randint(0, n_videos, (batch_size,), generator=gen)
        loss = flow_loss(model, videos[idx].to(device), labels[idx].to(device), gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % log_every == 0 or step == steps:
            history["step"].append(step)
            history["train_loss"].append(running)
            history["valid_loss"].append(validation_loss(model, valid))
            history["seconds"].append(round(time.perf_counter() - start, 1))
    model.cpu().eval()
    history["device"] = str(device)
    return history


def load_dit(path: str | Path | None = None) -> tuple[TinyVideoDiT, dict]:
    """The shipped model (state_dict + provenance JSON beside it), in eval mode."""
    path = path if path is not None else CHECKPOINTS / "tiny_dit.pt"
    return load_checkpoint(path, lambda meta: _build(meta["model"]))


def _build(config: dict) -> TinyVideoDiT:
    return TinyVideoDiT(**config)


def load_or_train(scale: str = "quick", *, progress=None) -> tuple[TinyVideoDiT, dict]:
    """Quick scale: load the shipped checkpoint if present, else train it. Full scale: train."""
    if scale not in RECIPES:
        raise ValueError(f"scale: expected one of {sorted(RECIPES)}, got {scale!r}")
    if scale == "quick" and (CHECKPOINTS / "tiny_dit.pt").exists():
        return load_dit()
    recipe = RECIPES[scale]
    model, history, seconds = train_from_recipe(recipe, _build, train_dit, progress=progress)
    return model, {"recipe": recipe, "history": history, "model": recipe["model"],
                   "training_seconds": round(seconds, 1), "source": "trained in this run"}


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.svg.train", __doc__.split("\n\n")[0], RECIPES, CHECKPOINTS)
    args = parser.parse_args(argv)
    recipe = recipe_from_args(RECIPES, args)
    model, history, seconds = train_from_recipe(recipe, _build, train_dit)
    meta = provenance(
        command="python -m companion.svg.train " + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=seconds, device=history["device"],
        model=recipe["model"],
        parameters=sum(p.numel() for p in model.parameters()),
        data={"train": f"bouncing_shapes(n={recipe['n_videos']}, seed={recipe['seed']}, **{recipe['data']})",
              "validation": f"bouncing_shapes(n={VALID['n']}, seed={VALID['seed']}), fixed tau and noise"},
        objective="rectified flow, v = eps - x0, tau ~ logit-normal(0, 1)",
        steps_done=history["step"][-1],
        final={"valid_loss": history["valid_loss"][-1], "train_loss_running": history["train_loss"][-1]},
        history=history,
    )
    save_checkpoint(model, args.out / "tiny_dit.pt", meta)
    print(json.dumps({k: meta[k] for k in ("training_seconds", "steps_done", "final", "parameters")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
