"""Meta-training the dynamic decision engine on the prior, and its shipped checkpoint.

The engine is task-agnostic: it is trained once on random regression tasks (eq. flair-meta)
and never sees a database. Entry point (writes ``companion/flair/checkpoints/dde.pt`` and
``dde.json``)::

    python -m companion.flair.train --scale quick|full [--out DIR] [--seed 0] [--steps N]

``quick`` is the recipe of the shipped checkpoint (its record gives the training time);
``full`` is a larger engine trained longer (for a GPU).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from companion.checkpoints import (load_checkpoint, provenance, recipe_from_args, save_checkpoint,
                                   train_from_recipe, training_parser)

from .model import DynamicDecisionEngine, meta_train, prior_nll, sample_prior_batch

__all__ = ["RECIPES", "CHECKPOINTS", "VALID", "load_dde", "load_or_train", "validation_tasks"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
VALID = dict(batch=64, n_ctx=80, n_qry=20, seed=12345)  # prior tasks of the log, never trained on
RECIPES = {
    "quick": dict(steps=1200, batch=32, lr=1e-3, seed=0, n_ctx=(10, 100), n_qry=20,
                  model=dict(d_x=16, d_model=64, n_layers=4, n_heads=4, ridge_skip=True,
                             ensemble=True)),
    "full": dict(steps=50000, batch=64, lr=5e-4, seed=0, n_ctx=(10, 160), n_qry=20,
                 model=dict(d_x=16, d_model=256, n_layers=6, n_heads=4, ridge_skip=True,
                            ensemble=True)),
}


def _build(config: dict) -> DynamicDecisionEngine:
    return DynamicDecisionEngine(**config)


def validation_tasks(d_x: int = 16):
    """The fixed prior tasks on which the training log measures the NLL."""
    return sample_prior_batch(VALID["batch"], VALID["n_ctx"], VALID["n_qry"], d_x,
                              np.random.default_rng(VALID["seed"]))


def _train(dde, *, steps, batch, lr, seed, n_ctx, n_qry, progress=None, device="cpu"):
    dde.to(device)
    valid = validation_tasks(dde.d_x)
    before = prior_nll(dde, valid)
    losses = meta_train(dde, steps, batch=batch, lr=lr, seed=seed, n_ctx=tuple(n_ctx), n_qry=n_qry,
                        progress=progress)
    dde.cpu()
    from .stream import in_context_errors

    return {"valid_nll_before": before, "valid_nll_after": prior_nll(dde, valid),
            "valid_nmse": in_context_errors(dde, *valid),
            "train_loss_every_100": [float(np.mean(losses[i: i + 100])) for i in range(0, steps, 100)],
            "device": device}


def load_dde(path: str | Path = CHECKPOINTS / "dde.pt") -> tuple[DynamicDecisionEngine, dict]:
    """The shipped engine (state_dict + provenance JSON beside it), in eval mode."""
    return load_checkpoint(path, lambda meta: _build(meta["model"]))


def load_or_train(scale: str = "quick", *, progress=None, device: str = "cpu"):
    """Quick scale: load the shipped engine if present, else meta-train it. Full: meta-train."""
    if scale == "quick" and (CHECKPOINTS / "dde.pt").exists():
        return load_dde()
    recipe = RECIPES[scale]
    dde, history, seconds = train_from_recipe(recipe, _build, _train, progress=progress, device=device)
    return dde.eval(), {"recipe": recipe, "model": recipe["model"], "final": history,
                        "training_seconds": round(seconds, 1), "source": "meta-trained in this run"}


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.flair.train", __doc__.split("\n\n")[0], RECIPES,
                             CHECKPOINTS)
    args = parser.parse_args(argv)
    recipe = recipe_from_args(RECIPES, args)
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dde, history, seconds = train_from_recipe(recipe, _build, _train, device=device)
    meta = provenance(
        command="python -m companion.flair.train " + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=seconds, device=device, model=recipe["model"],
        parameters=sum(p.numel() for p in dde.parameters()),
        data={"prior": "companion.flair.model.sample_prior_batch (Gaussian, mixture or "
                       "ReLU-feature inputs; MLP / random-Fourier GP / linear-plus-MLP / "
                       "noise-only tasks, d = 16)", "validation": VALID},
        final={k: history[k] for k in ("valid_nll_before", "valid_nll_after", "valid_nmse")},
        history=history["train_loss_every_100"],
    )
    save_checkpoint(dde, args.out / "dde.pt", meta)
    print(json.dumps({k: meta[k] for k in ("training_seconds", "final", "parameters")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
