"""Training on fresh tasks every step, eq. (icl-loss), evaluation, and the shipped checkpoint.

Each step draws ``batch_size`` new tasks, one context size ``n ~ U{n_range}`` shared by the
batch, and ``m`` queries per task (``m=None``: ``m = n``, as the official data module does),
and takes one Adam step on the query MSE. The learning rate follows a cosine from ``lr`` to
``lr / 20`` and gradients are clipped at norm 1 (``schedule="constant"``, ``clip=None``: the
official constant rate without clipping).

The chapter compares five models (:data:`MODELS`), trained on the same stream of tasks for
each seed. Entry point (writes ``companion/icl_latents/checkpoints/quick.pt`` and
``quick.json``)::

    python -m companion.icl_latents.train --scale quick [--out DIR]

``--scale official-lr`` trains the ablation of the learning rate: the implicit and the
explicit transformer of the quick recipe at the official constant ``1e-4`` without clipping
(``official-lr.pt``).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
from torch import nn

from companion.checkpoints import load_checkpoint, provenance, save_checkpoint, training_parser
from companion.validation import as_positive_int

from .models import (ContextEncoder, ExplicitModel, ImplicitTransformer, LinearReadoutPredictor,
                     MLPPredictor, TransformerPredictor)
from .tasks import LinearRegressionTask, TaskBatch

__all__ = ["predict", "evaluate_mse", "train_icl", "MODELS", "RECIPES", "build_models",
           "train_suite", "load_suite", "load_or_train", "CHECKPOINTS"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
MODELS = ("implicit", "explicit-tsf", "explicit-mlp", "explicit-known", "known-latent")
VALID = dict(n_tasks=1000, n=16, m=16, seed=4321)  # the training log's validation tasks
RECIPES = {
    # one 1-D linear-regression family (noise 0.1); layers: implicit L, explicit L/2 + L/2
    "quick": dict(seeds=(1,), steps=2000, batch_size=32, n_range=(8, 24), m=None, lr=1e-3,
                  noise=0.1, model=dict(d_model=32, n_heads=4, d_ff=64, layers=4,
                                        mlp_hidden=128)),
    # the quick recipe at the official learning rate: constant 1e-4, no clipping (two models)
    "official-lr": dict(seeds=(1,), steps=2000, batch_size=32, n_range=(8, 24), m=None,
                        lr=1e-4, schedule="constant", clip=None, noise=0.1,
                        models=("implicit", "explicit-tsf"),
                        model=dict(d_model=32, n_heads=4, d_ff=64, layers=4, mlp_hidden=128)),
    # the official recipe (constant 1e-4, no clipping, 256 wide), for a GPU
    "full": dict(seeds=(0, 1, 2), steps=7000, batch_size=128, n_range=(16, 128), m=None,
                 lr=1e-4, schedule="constant", clip=None, noise=0.1, model=dict(d_model=256, n_heads=4, d_ff=512, layers=8,
                                                mlp_hidden=512)),
}


def predict(model: nn.Module, batch: TaskBatch) -> torch.Tensor:
    """``y_hat (B, m, dy)``; the true latent is handed only to a known-latent model."""
    if not isinstance(batch, TaskBatch):
        raise ValueError(f"batch: expected a TaskBatch, got {type(batch).__name__}")
    if isinstance(model, ExplicitModel) and model.context is None:
        return model(batch.x_c, batch.y_c, batch.x_q, w=batch.w)[0]
    return model(batch.x_c, batch.y_c, batch.x_q)[0]


@torch.no_grad()
def evaluate_mse(model: nn.Module, batch: TaskBatch, chunk: int = 500) -> torch.Tensor:
    """Per-task query MSE ``(B,)``, computed in chunks of ``chunk`` tasks."""
    chunk = as_positive_int(chunk, "chunk")
    if not isinstance(batch, TaskBatch):
        raise ValueError(f"batch: expected a TaskBatch, got {type(batch).__name__}")
    if batch.y_q.shape[:2] != batch.x_q.shape[:2]:
        raise ValueError(f"batch: y_q {tuple(batch.y_q.shape)} does not match x_q "
                         f"{tuple(batch.x_q.shape)}")
    model.eval()
    out = []
    for i in range(0, batch.x_c.shape[0], chunk):
        part = TaskBatch(*(t[i:i + chunk] for t in (batch.x_c, batch.y_c, batch.x_q,
                                                    batch.y_q, batch.w)))
        out.append(((predict(model, part) - part.y_q) ** 2).mean((1, 2)))
    return torch.cat(out)


def train_icl(model: nn.Module, task, *, steps: int, batch_size: int, n_range: tuple[int, int],
              m: int | None, lr: float, seed: int, log_every: int = 100, progress=None,
              device=None, schedule: str = "cosine", clip: float | None = 1.0) -> dict:
    """Train ``model`` in place on ``steps`` batches of fresh tasks; return the history.

    ``n_range = (lo, hi)``: context sizes drawn uniformly from ``lo..hi`` (inclusive), once per
    batch; ``m=None`` gives ``m = n`` queries per task. ``progress``: an optional wrapper of
    the step range (:func:`companion.book.progress`).
    """
    steps, batch_size = as_positive_int(steps, "steps"), as_positive_int(batch_size, "batch_size")
    m = None if m is None else as_positive_int(m, "m")
    lo, hi = n_range
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise ValueError(f"n_range: expected integers 1 <= lo <= hi, got {n_range!r}")
    if not lr > 0:
        raise ValueError(f"lr: expected a learning rate > 0, got {lr!r}")
    if schedule not in ("cosine", "constant"):
        raise ValueError(f"schedule: expected 'cosine' or 'constant', got {schedule!r}")
    if clip is not None and not (isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0):
        raise ValueError(f"clip: expected None or a finite norm > 0, got {clip!r}")
    device = torch.device(device or next(model.parameters()).device)
    model.to(device).train()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, (lambda s: 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * s / steps)))
        if schedule == "cosine" else (lambda s: 1.0))
    history: dict = {"step": [], "train_mse": [], "seconds": []}
    start, running = time.perf_counter(), None
    rng = range(1, steps + 1)
    for step in (progress(rng) if progress else rng):
        n = int(torch.randint(lo, hi + 1, (1,), generator=gen))
        batch = task.sample(batch_size, n, n if m is None else m, generator=gen, device=device)
        loss = ((predict(model, batch) - batch.y_q) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        value = loss.detach().item()
        running = value if running is None else 0.98 * running + 0.02 * value
        if step % log_every == 0 or step == steps:
            history["step"].append(step)
            history["train_mse"].append(running)
            history["seconds"].append(round(time.perf_counter() - start, 2))
    model.eval()
    return history


# ----------------------------------------------------------------------------- the suite
def build_models(config: dict, dx: int = 1, dy: int = 1, models=MODELS) -> nn.ModuleDict:
    """The five models of :data:`MODELS`, parameter-matched: the implicit transformer has
    ``layers`` layers, the explicit ones ``layers / 2`` in the context encoder and as many in
    the transformer predictor; the known-latent model reads the true ``w`` with the same
    transformer predictor (the official ``KnownLatent`` + ``TransformerPrediction``)."""
    d, half = dict(d_model=config["d_model"], n_heads=config["n_heads"],
                   d_ff=config["d_ff"]), config["layers"] // 2
    z_dim, P = config["d_model"], (dx + 1) * dy

    def context():
        return ContextEncoder(dx, dy, n_layers=half, **d)

    unknown = [k for k in models if k not in MODELS]
    if unknown:
        raise ValueError(f"models: expected names from {MODELS}, got {unknown}")
    build = {
        "implicit": lambda: ImplicitTransformer(dx, dy, n_layers=config["layers"], **d),
        "explicit-tsf": lambda: ExplicitModel(context(), TransformerPredictor(
            dx, dy, z_dim, n_layers=half, **d)),
        "explicit-mlp": lambda: ExplicitModel(context(), MLPPredictor(dx, dy, z_dim,
                                                                      config["mlp_hidden"])),
        "explicit-known": lambda: ExplicitModel(context(), LinearReadoutPredictor(dx, dy, z_dim)),
        "known-latent": lambda: ExplicitModel(None, TransformerPredictor(dx, dy, P,
                                                                         n_layers=half, **d)),
    }
    return nn.ModuleDict({name: build[name]() for name in MODELS if name in models})


def _task(recipe: dict) -> LinearRegressionTask:
    return LinearRegressionTask(dx=1, dy=1, noise=recipe["noise"])


def train_suite(recipe: dict, *, progress=None, device=None) -> tuple[nn.ModuleDict, dict]:
    """Train every model of :data:`MODELS` for every seed of ``recipe``.

    Returns ``suite[str(seed)][name]`` (on the CPU, eval mode) and the histories; the models of
    one seed share its initialisation seed and its stream of training tasks.
    """
    task, suite, histories = _task(recipe), nn.ModuleDict(), {}
    valid = task.sample(VALID["n_tasks"], VALID["n"], VALID["m"],
                        generator=torch.Generator().manual_seed(VALID["seed"]))
    keys = {k: recipe[k] for k in ("steps", "batch_size", "n_range", "m", "lr")}
    keys |= dict(schedule=recipe.get("schedule", "cosine"), clip=recipe.get("clip", 1.0))
    names = recipe.get("models", MODELS)
    jobs = [(seed, name) for seed in recipe["seeds"] for name in names]
    for seed, name in (progress(jobs) if progress else jobs):
        torch.manual_seed(seed)
        if str(seed) not in suite:
            suite[str(seed)] = build_models(recipe["model"], models=names)
        model = suite[str(seed)][name]
        hist = train_icl(model, task, seed=seed, device=device, **keys)
        model.cpu()
        hist["valid_mse"] = float(evaluate_mse(model, valid).mean())
        histories[f"{name}/seed{seed}"] = hist
    return suite.eval(), histories


def load_suite(path: str | Path = CHECKPOINTS / "quick.pt") -> tuple[nn.ModuleDict, dict]:
    """The shipped suite (state_dict + provenance record beside it), in eval mode."""
    return load_checkpoint(path, lambda meta: nn.ModuleDict(
        {str(s): build_models(meta["recipe"]["model"], models=meta["recipe"].get("models", MODELS))
         for s in meta["recipe"]["seeds"]}))


def load_or_train(scale: str = "quick", *, progress=None, device=None):
    """Quick scale (and its ``official-lr`` ablation): load the shipped checkpoint if present,
    else train. Full scale: train."""
    if scale not in RECIPES:
        raise ValueError(f"scale: expected one of {sorted(RECIPES)}, got {scale!r}")
    if scale != "full" and (CHECKPOINTS / f"{scale}.pt").exists():
        return load_suite(CHECKPOINTS / f"{scale}.pt")
    recipe = RECIPES[scale]
    start = time.perf_counter()
    suite, histories = train_suite(recipe, progress=progress, device=device)
    return suite, {"recipe": recipe, "histories": histories, "source": "trained in this run",
                   "training_seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.icl_latents.train", __doc__.split("\n\n")[0],
                             RECIPES, CHECKPOINTS)
    args = parser.parse_args(argv)
    recipe = dict(RECIPES[args.scale])
    if args.seed is not None:
        recipe["seeds"] = (args.seed,)
    if args.steps is not None:
        recipe["steps"] = args.steps
    torch.set_num_threads(1)
    start = time.perf_counter()

    def log(jobs):  # one line per trained model, for the training log
        for job in jobs:
            yield job
            print(f"seed {job[0]} {job[1]}: {time.perf_counter() - start:.0f} s", flush=True)

    suite, histories = train_suite(recipe, progress=log)
    meta = provenance(
        command="python -m companion.icl_latents.train "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=time.perf_counter() - start, device="cpu",
        parameters={name: sum(p.numel() for p in model.parameters())
                    for name, model in suite[str(recipe["seeds"][0])].items()},
        data={"task": f"1-D linear regression, W ~ N(0, I), noise {recipe['noise']}",
              "train": "fresh tasks every step from torch.Generator().manual_seed(seed)",
              "validation": VALID},
        final={k: h["valid_mse"] for k, h in histories.items()},
        histories=histories,
    )
    save_checkpoint(suite, args.out / f"{args.scale}.pt", meta)
    print(json.dumps(meta["final"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
