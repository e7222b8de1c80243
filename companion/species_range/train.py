"""Training SINR and FS-SINR on the synthetic globe for a fixed number of steps, and the checkpoint.

Both models use the official optimiser (Adam at 5e-4, a decay of 0.98 per official epoch) with
a linear warm-up; the number of steps is fixed (never a clock) and larger than the official
number of epochs gives on a world this small, so that the loss curve flattens. The record keeps
the loss of every 50 steps of both runs, and FS-SINR's weights at the ``snapshots`` steps (one of
them the official 20 epochs) for the chapter's budget sweep. Where the recipe has
``sinr_ablation`` (keyword overrides of SINR's recipe, e.g. SINR's official dropout of 0.5), a
second SINR is trained with them and shipped beside the first, for the chapter's ablation of
the baseline and of the training gate's comparator.

Entry point (writes ``companion/species_range/checkpoints/fssinr-quick.pt`` and ``.json``)::

    python -m companion.species_range.train --scale quick [--out DIR] [--seed 0] [--steps N]

``--steps`` overrides FS-SINR's number of steps; ``--ablation sinr-dropout`` trains only the
SINR of that ablation (``checkpoints/sinr-dropout-quick.pt``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from companion.checkpoints import load_checkpoint, provenance, recipe_from_args, save_checkpoint, training_parser

from . import FSSINR, SINR, LocationEncoder, make_globe, train_fssinr, train_sinr

__all__ = ["RECIPES", "ABLATIONS", "CHECKPOINTS", "Bundle", "train_bundle", "load_or_train",
           "load_ablation"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
_GLOBE = dict(n_cells=4000, n_train=300, n_test=60, seed=0)
_SINR = dict(width=64, depth=2, steps=5000, batch=256, lr=5e-4, decay=0.98, decay_epochs=10, warmup=100)
_FS = dict(batch=64, max_ctx=20, fixed_ctx=True, lr=5e-4, decay=0.98, decay_epochs=20, warmup=200)
_ARCH = dict(n_layers=2, n_heads=2, ffn=128)
RECIPES = {
    # steps: FS-SINR's; snapshots: FS-SINR steps whose weights are kept (2380 steps of 64 = 20 passes
    # over the 7,562 training observations: the official 20 epochs)
    # (the second pass doubles FS-SINR's steps, 4,800 -> 9,600, and keeps 4,800 as a snapshot)
    "quick": dict(seed=0, steps=9600, snapshots=[1190, 2380, 4800], globe=_GLOBE, sinr=_SINR, fs=_FS,
                  arch=_ARCH),
    # what a page trains when the quick checkpoint is missing (a fork, a clean clone without
    # package data): the same recipe, shorter, so that the page stays within its 90 s
    "page": dict(seed=0, steps=1000, snapshots=[250, 500], globe=_GLOBE, sinr={**_SINR, "steps": 1500},
                 fs=_FS, arch=_ARCH),
    "full": dict(seed=0, steps=20000, snapshots=[2380, 10000], globe=_GLOBE, sinr={**_SINR, "steps": 10000},
                 fs=_FS, arch=_ARCH, sinr_ablation={"dropout": 0.5}),
}


# SINR retrained with one setting at its official value, shipped apart from the bundle
# (``--ablation NAME`` writes ``checkpoints/<NAME>-quick.pt``): the same world and recipe as the
# quick bundle's SINR, SINR's own dropout of 0.5 (sinr models.py) instead of FS-SINR's 0.1
ABLATIONS = {"sinr-dropout": dict(seed=0, globe=_GLOBE, sinr={**_SINR, "dropout": 0.5})}


class Bundle(nn.Module):
    """SINR, the trained FS-SINR, FS-SINR at each snapshot step (``snaps[<step>]``) and, with
    ``ablation``, the SINR of the ablated recipe (``sinr_ablation``)."""

    def __init__(self, n_species: int, sinr: dict, arch: dict, snapshots=(), ablation: bool = False):
        super().__init__()
        self.sinr = SINR(LocationEncoder(sinr["width"], sinr["depth"]), n_species)
        if ablation:
            self.sinr_ablation = SINR(LocationEncoder(sinr["width"], sinr["depth"]), n_species)
        self.fs = FSSINR(LocationEncoder(sinr["width"], sinr["depth"]), **arch)
        self.snaps = nn.ModuleDict({str(s): FSSINR(LocationEncoder(sinr["width"], sinr["depth"]), **arch)
                                    for s in snapshots})


def _build(meta: dict) -> Bundle:
    r = meta["recipe"]
    return Bundle(r["globe"]["n_train"], r["sinr"], r["arch"], r["snapshots"], "sinr_ablation" in r)


def train_bundle(recipe: dict, log_every: int = 0) -> tuple[Bundle, dict, float]:
    """Build the globe, train SINR, then FS-SINR from it (printing its progress every
    ``log_every`` steps when positive); ``(bundle, history, seconds)``."""
    torch.manual_seed(recipe["seed"])
    globe = make_globe(**recipe["globe"])
    start = time.perf_counter()
    sinr = train_sinr(globe, **recipe["sinr"], seed=recipe["seed"])
    t_sinr = time.perf_counter() - start
    if log_every:
        print(f"SINR trained in {t_sinr:.0f} s", file=sys.stderr, flush=True)
    fs = train_fssinr(globe, sinr, steps=recipe["steps"], **recipe["fs"], seed=recipe["seed"],
                      snapshots=set(recipe["snapshots"]), log_every=log_every, **recipe["arch"])
    ablated = None
    if "sinr_ablation" in recipe:
        ablated = train_sinr(globe, **{**recipe["sinr"], **recipe["sinr_ablation"]}, seed=recipe["seed"])
    seconds = time.perf_counter() - start
    bundle = Bundle(len(globe.train), recipe["sinr"], recipe["arch"], recipe["snapshots"], ablated is not None)
    bundle.sinr.load_state_dict(sinr.state_dict())
    if ablated is not None:
        bundle.sinr_ablation.load_state_dict(ablated.state_dict())
    bundle.fs.load_state_dict(fs.state_dict())
    for step, state in fs.history["snapshots"].items():
        bundle.snaps[str(step)].load_state_dict(state)

    def every50(loss):
        loss = np.asarray(loss)
        return [round(float(x.mean()), 4) for x in np.array_split(loss, max(1, len(loss) // 50))]

    history = {"sinr_loss_per_50": every50(sinr.history["loss"]), "fs_loss_per_50": every50(fs.history["loss"]),
               "sinr_seconds": round(t_sinr, 1), "train_observations": int(sum(len(globe.obs[s]) for s in globe.train))}
    if ablated is not None:
        history["sinr_ablation_loss_per_50"] = every50(ablated.history["loss"])
    return bundle.eval(), history, seconds


def _build_sinr(meta: dict) -> SINR:
    r = meta["recipe"]
    return SINR(LocationEncoder(r["sinr"]["width"], r["sinr"]["depth"]), r["globe"]["n_train"])


def load_ablation(name: str) -> tuple[SINR | None, dict | None]:
    """The shipped SINR of ablation ``name`` (a key of :data:`ABLATIONS`) and its record, or
    ``(None, None)`` when it is not shipped."""
    if name not in ABLATIONS:
        raise ValueError(f"name: expected one of {sorted(ABLATIONS)}, got {name!r}")
    path = CHECKPOINTS / f"{name}-quick.pt"
    if not path.exists():
        return None, None
    return load_checkpoint(path, _build_sinr)


def load_or_train(scale: str = "quick") -> tuple[Bundle, dict]:
    """Quick scale: the shipped checkpoint if present, else the shorter ``page`` recipe trained
    here; full scale: train."""
    if scale not in ("quick", "full"):
        raise ValueError(f"scale: expected 'quick' or 'full', got {scale!r}")
    path = CHECKPOINTS / f"fssinr-{scale}.pt"
    if scale == "quick" and path.exists():
        return load_checkpoint(path, _build)
    recipe = RECIPES["page" if scale == "quick" else scale]
    bundle, history, seconds = train_bundle(recipe)
    return bundle, {"recipe": recipe, "history": history, "training_seconds": round(seconds, 1),
                    "source": "trained in this run"}


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.species_range.train", __doc__.split("\n\n")[0], RECIPES,
                             CHECKPOINTS)
    parser.add_argument("--ablation", choices=sorted(ABLATIONS), default=None,
                        help="train only the SINR of this ablation (quick scale)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # a fixed order of floating-point sums: the same weights on any CPU
    command = "python -m companion.species_range.train " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.ablation:
        recipe = dict(ABLATIONS[args.ablation])
        globe = make_globe(**recipe["globe"])
        start = time.perf_counter()
        sinr = train_sinr(globe, **recipe["sinr"], seed=recipe["seed"])
        seconds = time.perf_counter() - start
        loss = np.asarray(sinr.history["loss"])
        per50 = [round(float(x.mean()), 4) for x in np.array_split(loss, max(1, len(loss) // 50))]
        meta = provenance(command=command, recipe=recipe, seconds=seconds, device="cpu",
                          parameters={"sinr": sum(p.numel() for p in sinr.parameters())},
                          data={"globe": recipe["globe"],
                                "generator": "companion.species_range.make_globe (real land mask)"},
                          final={"sinr_loss_last_50": per50[-1]}, history={"sinr_loss_per_50": per50})
        save_checkpoint(sinr, args.out / f"{args.ablation}-quick.pt", meta)
        print(json.dumps({k: meta[k] for k in ("training_seconds", "final", "parameters")}))
        return 0
    recipe = recipe_from_args(RECIPES, args)
    bundle, history, seconds = train_bundle(recipe, log_every=200)
    meta = provenance(
        command=command, recipe=recipe, seconds=seconds, device="cpu",
        parameters={"sinr": sum(p.numel() for p in bundle.sinr.parameters()),
                    "fs": sum(p.numel() for p in bundle.fs.parameters())},
        data={"globe": recipe["globe"], "generator": "companion.species_range.make_globe (real land mask)"},
        final={"sinr_loss_last_50": history["sinr_loss_per_50"][-1], "fs_loss_last_50": history["fs_loss_per_50"][-1]},
        history=history,
    )
    save_checkpoint(bundle, args.out / f"fssinr-{args.scale}.pt", meta)
    print(json.dumps({k: meta[k] for k in ("training_seconds", "final", "parameters")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
