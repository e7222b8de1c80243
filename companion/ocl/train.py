"""Pre-training every method at equal FLOPs (and SimCLR and MAE at equal epochs), and the
shipped checkpoint of all the encoders.

The budget F is ``budget_epochs`` epochs of OCL over the pool. Every method trains for
floor(F / F_step) steps from the same initial encoder, with snapshots of the encoder at 1/8,
1/4, 1/2 and all of the budget; OCL is also trained at other mask ratios and at its official base
learning rate (whole budget), and at full scale SimCLR and MAE are also trained for as many
epochs as OCL (their own schedule). Every learning rate follows the official linear rule
``lr = base_lr * batch / 256``. The bank of encoders is one ``state_dict``::

    python -m companion.ocl.train --scale quick   # writes companion/ocl/checkpoints/quick.pt/.json

The record gives the command, the commit, the recipe, the training time and every run's
steps, FLOPs per step and loss curve.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from torch import nn

from companion.checkpoints import (
    load_checkpoint,
    provenance,
    recipe_from_args,
    save_checkpoint,
    training_parser,
)

from .budget import scaled_lr, steps_for_flops, train_for_flops
from .glyphs import TRAIN_FONTS, render_glyphs
from .methods import METHODS, OCL, build_method
from .vit import TinyViT

__all__ = ["RECIPES", "OFFICIAL", "official_base_lr", "CHECKPOINTS", "FRACTIONS", "key",
           "train_bank", "load_bank", "pool_of"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
FRACTIONS = (0.125, 0.25, 0.5, 1.0)  # snapshots, as fractions of the FLOP budget
OFFICIAL = dict(base_lr=5e-5, warmup=0.05, weight_decay=0.05, betas=(0.9, 0.95), mask_ratio=0.9,
                batch=7200, mae_base_lr=1.5e-4, mae_mask_ratio=0.75, mae_norm_pix=True)
"""The official recipe (AnonymGiant/OCL ``main_pretrain.py``: blr 5e-5, 10 warm-up epochs of 200,
weight decay 0.05, mask ratio 0.9, 1800 images on each of 4 GPUs; MAE's ``PRETRAIN.md``: blr
1.5e-4, 40 of 800 warm-up epochs, mask ratio 0.75, normalised pixel targets)."""
BASE_LR = 2e-3  # ours: lr = 2e-3 * 128 / 256 = 1e-3 at batch 128 (the official 5e-5 gives 2.5e-5)
RECIPES = {
    "quick": dict(seed=0, pool_variants=4, pool_seed=0, batch=128, base_lr=BASE_LR,
                  mask_ratio=0.75, budget_epochs=20, equal_epochs=(), sweep_ratios=(0.9,),
                  official_lr_runs=("OCL",), mae_norm_pix=True,
                  model=dict(img_size=32, patch=4, dim=48, depth=3, heads=3, mlp_ratio=2.0)),
    "full": dict(seed=0, pool_variants=40, pool_seed=0, batch=256, base_lr=BASE_LR,
                 mask_ratio=0.75, budget_epochs=100, equal_epochs=("SimCLR", "MAE"),
                 sweep_ratios=(0.5, 0.9), official_lr_runs=("OCL", "MAE"), mae_norm_pix=True,
                 model=dict(img_size=32, patch=4, dim=96, depth=6, heads=6, mlp_ratio=2.0)),
}


def official_base_lr(method: str) -> float:
    """The official base learning rate of ``method`` (OCL's for OCL and both SimCLRs, MAE's for
    MAE), before the rule ``lr = base_lr * batch / 256``."""
    return OFFICIAL["mae_base_lr"] if method == "MAE" else OFFICIAL["base_lr"]


def key(method: str, point: str) -> str:
    """The bank's name of an encoder: ``key("SimCLR, no aug.", "b1000")`` is
    ``"simclr_noaug_b1000"``; ``point`` is ``b`` + the budget in per mille, ``"epochs"`` (as
    many epochs as OCL) or ``r`` + a mask ratio in percent (OCL at another ratio, whole budget)."""
    slug = {"OCL": "ocl", "SimCLR": "simclr", "SimCLR, no aug.": "simclr_noaug", "MAE": "mae"}
    if method not in slug and method != "random":
        raise ValueError(f"method: expected one of {METHODS + ('random',)}, got {method!r}")
    return "random" if method == "random" else f"{slug[method]}_{point}"


def pool_of(recipe: dict, device=None) -> torch.Tensor:
    """The unlabeled pre-training pool of a recipe: every character in the training fonts."""
    x, _, _ = render_glyphs(fonts=TRAIN_FONTS, n_variants=recipe["pool_variants"],
                            seed=recipe["pool_seed"], size=recipe["model"]["img_size"])
    return x.to(device) if device is not None else x


def _names(recipe: dict) -> list[str]:
    points = [f"b{round(1000 * f)}" for f in FRACTIONS]
    names = ["random"] + [key(m, p) for m in METHODS for p in points]
    names += [key("OCL", f"r{round(100 * r)}") for r in recipe["sweep_ratios"]]
    names += [key(m, "official") for m in recipe["official_lr_runs"]]
    return names + [key(m, "epochs") for m in recipe["equal_epochs"]]


def _bank(recipe: dict) -> nn.ModuleDict:
    return nn.ModuleDict({name: TinyViT(**recipe["model"]) for name in _names(recipe)})


def train_bank(recipe: dict, pool: torch.Tensor, progress=None):
    """Train every run of ``recipe`` on ``pool``; return ``(bank, runs, seconds)``.

    ``bank``: an ``nn.ModuleDict`` of encoders named by :func:`key`; ``runs``: per run, its
    steps, FLOPs per step, seconds and loss curve.
    """
    torch.manual_seed(recipe["seed"])
    init = TinyViT(**recipe["model"]).to(pool.device)
    bank = _bank(recipe).to(pool.device)
    bank["random"].load_state_dict(init.state_dict())
    per_epoch = len(pool) // recipe["batch"]
    ocl_step = OCL(init, recipe["mask_ratio"]).flops_per_step(recipe["batch"])
    budget = recipe["budget_epochs"] * per_epoch * ocl_step
    runs, start = {}, time.perf_counter()
    jobs = [(m, recipe["mask_ratio"], "budget") for m in METHODS]
    jobs += [("OCL", r, f"r{round(100 * r)}") for r in recipe["sweep_ratios"]]
    jobs += [(m, recipe["mask_ratio"], "official") for m in recipe["official_lr_runs"]]
    jobs += [(m, recipe["mask_ratio"], "epochs") for m in recipe["equal_epochs"]]
    for method_name, ratio, kind in jobs:
        vit = TinyViT(**recipe["model"]).to(pool.device)
        vit.load_state_dict(init.state_dict())
        torch.manual_seed(recipe["seed"])  # the same heads and decoders for every run
        method = build_method(method_name, vit, ratio,
                              norm_pix=recipe["mae_norm_pix"]).to(pool.device)
        f_step = method.flops_per_step(recipe["batch"])
        if kind == "budget":
            steps = steps_for_flops(budget, f_step)
            marks = {max(1, round(f * steps)): f"b{round(1000 * f)}" for f in FRACTIONS}
        elif kind == "epochs":
            steps = recipe["budget_epochs"] * per_epoch
            marks = {steps: "epochs"}
        else:
            steps = steps_for_flops(budget, f_step)
            marks = {steps: kind}
        base_lr = official_base_lr(method_name) if kind == "official" else recipe["base_lr"]
        hist = train_for_flops(method, pool, steps, batch=recipe["batch"],
                               lr=scaled_lr(base_lr, recipe["batch"]),
                               seed=recipe["seed"], snapshot_steps=marks, progress=progress)
        for step, point in marks.items():
            bank[key(method_name, point)].load_state_dict(hist.snapshots[step * f_step])
        runs[key(method_name, kind if kind != "budget" else "b1000")] = dict(
            steps=steps, flops_per_step=f_step, seconds=round(hist.seconds, 1),
            lr=scaled_lr(base_lr, recipe["batch"]),
            snapshot_steps={p: s for s, p in marks.items()},
            loss_every_step=[round(v, 4) for v in hist.loss])
    return bank.cpu().eval(), dict(budget_flops=budget, per_epoch=per_epoch, runs=runs), \
        time.perf_counter() - start


def load_bank(scale: str = "quick", path: str | Path | None = None):
    """The shipped bank of encoders and its provenance record: ``(bank, meta)``."""
    if scale not in RECIPES:
        raise ValueError(f"scale: expected one of {sorted(RECIPES)}, got {scale!r}")
    path = Path(path) if path is not None else CHECKPOINTS / f"{scale}.pt"
    return load_checkpoint(path, lambda meta: _bank(meta["recipe"]))


def main(argv=None) -> None:
    parser = training_parser("python -m companion.ocl.train",
                             "Pre-train OCL, SimCLR and MAE at equal FLOPs on Glyphs-36.",
                             RECIPES, CHECKPOINTS)
    args = parser.parse_args(argv)
    recipe = recipe_from_args(RECIPES, args)
    recipe.pop("steps", None)
    torch.set_num_threads(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    pool = pool_of(recipe, device)
    bank, record, seconds = train_bank(recipe, pool)
    meta = provenance(command="python -m companion.ocl.train " + " ".join(sys.argv[1:] if argv
                      is None else argv), recipe=recipe, seconds=seconds, device=device,
                      data=dict(generator="companion.ocl.glyphs.render_glyphs",
                                fonts="TRAIN_FONTS", pool_size=len(pool)), **record)
    path = save_checkpoint(bank, Path(args.out) / f"{args.scale}.pt", meta)
    print(f"wrote {path} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
