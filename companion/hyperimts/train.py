"""Training, evaluation and cost measurement shared by HyperIMTS and its baselines."""

from __future__ import annotations

import copy
import statistics
import time

import numpy as np
import torch

from companion.book import progress
from companion.data.imts import IMTSBatch

__all__ = ["masked_mse", "fit", "evaluate", "step_cost"]


def masked_mse(pred: torch.Tensor, batch: IMTSBatch, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared error over the query rows of the batch (all queries of all samples pooled)."""
    mask = batch.is_query if rows is None else batch.is_query & rows
    if not bool(mask.any()):
        raise ValueError("rows: no query row selected, the error of an empty set is undefined")
    return ((pred[mask] - batch.value[mask]) ** 2).mean()


def evaluate(model, batches: list[IMTSBatch], variables=None) -> dict[str, float]:
    """Test MSE and MAE over every query row (or only those of ``variables``), pooled over batches."""
    se = ae = count = 0.0
    with torch.no_grad():
        for batch in batches:
            pred = model(batch)
            mask = batch.is_query
            if variables is not None:
                mask = mask & torch.isin(batch.var, torch.as_tensor(list(variables)))
            err = pred[mask] - batch.value[mask]
            se, ae, count = se + float((err**2).sum()), ae + float(err.abs().sum()), count + int(mask.sum())
    if count == 0:
        raise ValueError("variables: no query row of these variables in the batches")
    return {"mse": se / count, "mae": ae / count, "queries": int(count)}


def fit(model: torch.nn.Module, train: IMTSBatch, val: list[IMTSBatch], *, epochs: int, batch_size: int = 64,
        lr: float = 1e-3, seed: int = 0, desc: str = "training") -> dict[str, list[float]]:
    """Adam on the query MSE; keeps the weights of the epoch with the lowest validation MSE.

    Returns the per-epoch training loss, validation MSE and wall time of the epoch.
    """
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    history = {"train": [], "val": [], "seconds": []}
    best, best_state = float("inf"), None
    for _ in progress(range(epochs), desc=desc):
        start, losses = time.perf_counter(), []
        model.train()
        for batch in train.batches(batch_size, rng):
            loss = masked_mse(model(batch), batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        model.eval()
        val_mse = evaluate(model, val)["mse"]
        history["train"].append(float(np.mean(losses)))
        history["val"].append(val_mse)
        history["seconds"].append(time.perf_counter() - start)
        if val_mse < best:
            best, best_state = val_mse, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    return history


def step_cost(model: torch.nn.Module, batch: IMTSBatch, *, warmup: int = 3, repeats: int = 10) -> dict[str, float]:
    """Cost of one training step (forward, backward, Adam) on ``batch``, on the CPU.

    ``seconds``: median wall time over ``repeats`` steps after ``warmup``. ``activation_bytes``:
    the bytes of the tensors autograd keeps for the backward pass (each storage counted once),
    the part of the peak memory that grows with the input; ``parameter_bytes`` for reference.
    """
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch.padded  # build the cached views outside the timed region, for every model alike

    def step():
        loss = masked_mse(model(batch), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    seen: dict[tuple[int, int], int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen[(st.data_ptr(), st.nbytes())] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = masked_mse(model(batch), batch)
    loss.backward()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"seconds": statistics.median(times), "activation_bytes": float(sum(seen.values())),
            "parameter_bytes": float(params)}
