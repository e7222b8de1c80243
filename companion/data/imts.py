"""Irregular multivariate time series (IMTS): a seeded generator, a CSV loader, two batch views.

An IMTS sample is a set of observations ``(time, variable, value)``; each variable has its own
irregular times, so the variables are not aligned. A forecasting sample splits into a *history*
(the observations up to ``history_end``) and *queries*: the observations at the first
``n_future_times`` timestamps after it (the PhysioNet'12 protocol), whose values are the targets.

:class:`IMTSBatch` holds a batch without padding: one row per observation or query, the samples
one after the other, ``offsets`` marking where each starts (like a CSR matrix). Inside a sample
the rows are sorted by (time, variable). :meth:`IMTSBatch.to_padded` gives the padded view the
baselines need, a ``(B, L, V)`` grid over the union of a sample's timestamps, mostly empty.

* :func:`make_imts` -- the synthetic generator, with a lead-lag structure that can be switched off;
* :func:`load_imts_csv` -- a real IMTS from a long-format CSV (sample, time, variable, value).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from companion.validation import as_choice, as_positive_int

__all__ = ["IMTSBatch", "PaddedBatch", "make_imts", "lead_lag_pairs", "load_imts_csv", "padding_stats"]


@dataclass(frozen=True)
class PaddedBatch:
    """The padded view of a batch: a ``(B, L, V)`` grid over the union of each sample's timestamps.

    ``L`` is the largest number of distinct timestamps of a sample in the batch; shorter samples
    are padded at the end (``time_valid`` False). ``values`` holds the history values (0 where
    nothing was observed and at query cells), ``obs_mask`` the history cells, ``query_mask`` the
    cells to forecast and ``target`` their values. ``node_cell`` maps each row of the flat batch
    to its flat cell index in ``B * L * V``.
    """

    times: torch.Tensor        # (B, L)
    time_valid: torch.Tensor   # (B, L) bool
    values: torch.Tensor       # (B, L, V)
    obs_mask: torch.Tensor     # (B, L, V) bool
    query_mask: torch.Tensor   # (B, L, V) bool
    target: torch.Tensor       # (B, L, V)
    node_cell: torch.Tensor    # (n,) long

    @property
    def n_cells(self) -> int:
        return int(self.values.numel())


class IMTSBatch:
    """A batch of IMTS samples without padding: ``(time, var, value, is_query)`` rows + ``offsets``.

    Rows of sample ``b`` are ``offsets[b]:offsets[b+1]``, sorted by time then variable. Query rows
    carry their target in ``value``; models must read it only through :attr:`inputs`. Times are
    kept in float64, the precision in which their order and distinctness were checked, so two
    readings that float32 would round to one instant stay two timestamps; models cast them to
    their own dtype only to embed them. :meth:`to` moves a batch to a device.
    """

    def __init__(self, time, var, value, is_query, offsets, n_vars: int):
        n_vars = as_positive_int(n_vars, "n_vars")
        time = torch.as_tensor(np.asarray(time, dtype=np.float64), dtype=torch.float64)
        value = torch.as_tensor(np.asarray(value, dtype=np.float64), dtype=torch.float64)
        var = torch.as_tensor(np.asarray(var))
        is_query = torch.as_tensor(np.asarray(is_query, dtype=bool))
        offsets = torch.as_tensor(np.asarray(offsets))
        n = time.shape[0]
        if time.ndim != 1:
            raise ValueError(f"time: expected a 1-D array, got shape {tuple(time.shape)}")
        for name, arr in (("var", var), ("value", value), ("is_query", is_query)):
            if arr.shape != (n,):
                raise ValueError(f"{name}: expected shape ({n},) like time, got {tuple(arr.shape)}")
        if var.dtype.is_floating_point or var.dtype == torch.bool:
            raise ValueError(f"var: expected integer variable ids, got dtype {var.dtype}")
        if offsets.ndim != 1 or offsets.numel() < 2 or offsets.dtype.is_floating_point:
            raise ValueError("offsets: expected integers [0, n_1, n_1 + n_2, ..., n] (one more than the samples)")
        offsets = offsets.long()
        if offsets[0] != 0 or offsets[-1] != n or bool((offsets[1:] <= offsets[:-1]).any()):
            raise ValueError(f"offsets: must start at 0, end at {n} and increase strictly (no empty sample)")
        if not bool(torch.isfinite(time).all()) or bool((time < 0).any()):
            bad = int(torch.nonzero(~torch.isfinite(time) | (time < 0))[0])
            raise ValueError(f"time: must be finite and >= 0, got {time[bad].item()} at row {bad}")
        if not bool(torch.isfinite(value).all()):
            bad = int(torch.nonzero(~torch.isfinite(value))[0])
            raise ValueError(f"value: must be finite (no NaN: leave unobserved cells out instead), "
                             f"got {value[bad].item()} at row {bad}")
        var = var.long()
        if bool(((var < 0) | (var >= n_vars)).any()):
            bad = int(torch.nonzero((var < 0) | (var >= n_vars))[0])
            raise ValueError(f"var: unknown variable id {var[bad].item()} at row {bad}; ids must be in 0..{n_vars - 1}")
        sample = torch.repeat_interleave(torch.arange(offsets.numel() - 1), offsets.diff())
        same = sample[1:] == sample[:-1]
        later = (time[1:] > time[:-1]) | ((time[1:] == time[:-1]) & (var[1:] > var[:-1]))
        if bool((same & ~later).any()):
            bad = int(torch.nonzero(same & ~later)[0]) + 1
            raise ValueError(f"time: rows of a sample must be sorted by (time, var) without duplicates; row {bad} "
                             f"(sample {sample[bad].item()}) breaks the order: sort with IMTSBatch.from_rows")
        q_count = torch.zeros(offsets.numel() - 1, dtype=torch.long).index_add_(0, sample, is_query.long())
        if bool((q_count == 0).any()):
            raise ValueError(f"is_query: sample {int(torch.nonzero(q_count == 0)[0])} has no query to forecast")
        self._set(time, var, value.float(), is_query, offsets, n_vars, sample)

    def _set(self, time, var, value, is_query, offsets, n_vars, sample) -> None:
        self.time, self.var, self.value, self.is_query = time, var, value, is_query
        self.offsets, self.n_vars, self.sample = offsets, n_vars, sample

    @classmethod
    def _trusted(cls, time, var, value, is_query, offsets, n_vars, sample) -> IMTSBatch:
        """A batch from tensors already known to be valid (a part or a copy of a checked batch)."""
        batch = cls.__new__(cls)
        batch._set(time, var, value, is_query, offsets, n_vars, sample)
        return batch

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_rows(cls, sample, time, var, value, is_query, n_vars: int) -> IMTSBatch:
        """Build a batch from rows in any order; ``sample`` are integer sample ids (renumbered 0..B-1)."""
        sample = np.asarray(sample)
        time, var = np.asarray(time, dtype=np.float64), np.asarray(var)
        value, is_query = np.asarray(value, dtype=np.float64), np.asarray(is_query, dtype=bool)
        if sample.shape != time.shape:
            raise ValueError(f"sample: expected shape {time.shape} like time, got {sample.shape}")
        _, sample = np.unique(sample, return_inverse=True)
        order = np.lexsort((var, time, sample))
        counts = np.bincount(sample)
        return cls(time[order], var[order], value[order], is_query[order], np.r_[0, np.cumsum(counts)], n_vars)

    def to(self, device) -> IMTSBatch:
        """The same batch on ``device`` (times stay float64)."""
        move = lambda x: x.to(device)  # noqa: E731
        return IMTSBatch._trusted(move(self.time), move(self.var), move(self.value), move(self.is_query),
                                  move(self.offsets), self.n_vars, move(self.sample))

    @property
    def device(self) -> torch.device:
        return self.time.device

    def select(self, samples) -> IMTSBatch:
        """The sub-batch of the given sample indices (in that order), on the batch's device."""
        samples = torch.as_tensor(np.asarray(samples), dtype=torch.long, device=self.device)
        lo, hi = self.offsets[samples], self.offsets[samples + 1]
        size = hi - lo
        first = torch.cumsum(size, 0) - size                                 # first row of each in the output
        rows = torch.arange(int(size.sum()), device=self.device) + torch.repeat_interleave(lo - first, size)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long, device=self.device), size.cumsum(0)])
        sample = torch.repeat_interleave(torch.arange(samples.numel(), device=self.device), size)
        return IMTSBatch._trusted(self.time[rows], self.var[rows], self.value[rows], self.is_query[rows],
                                  offsets, self.n_vars, sample)

    def batches(self, batch_size: int, rng: np.random.Generator | None = None) -> list[IMTSBatch]:
        """Split into batches of ``batch_size`` samples, shuffled when ``rng`` is given."""
        batch_size = as_positive_int(batch_size, "batch_size")
        order = np.arange(self.n_samples) if rng is None else rng.permutation(self.n_samples)
        return [self.select(order[i:i + batch_size]) for i in range(0, self.n_samples, batch_size)]

    def standardized(self, mean: torch.Tensor, std: torch.Tensor) -> IMTSBatch:
        """Values standardised per variable with given statistics (take them from the training split)."""
        mean, std = mean.to(self.device), std.to(self.device)
        value = (self.value - mean[self.var]) / std[self.var]
        return IMTSBatch._trusted(self.time, self.var, value.float(), self.is_query, self.offsets, self.n_vars,
                                  self.sample)

    def variable_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-variable mean and std of the *history* values (std 1 where a variable has < 2 values)."""
        h = ~self.is_query
        zeros = torch.zeros(self.n_vars, device=self.device)
        cnt = zeros.index_add(0, self.var[h], torch.ones(int(h.sum()), device=self.device))
        s1 = zeros.index_add(0, self.var[h], self.value[h])
        s2 = zeros.index_add(0, self.var[h], self.value[h] ** 2)
        mean = s1 / cnt.clamp(min=1)
        std = (s2 / cnt.clamp(min=1) - mean**2).clamp(min=0).sqrt()
        return mean, torch.where((cnt > 1) & (std > 0), std, torch.ones_like(std))

    # -- views ----------------------------------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return self.offsets.numel() - 1

    @property
    def n_nodes(self) -> int:
        return self.time.numel()

    @property
    def inputs(self) -> torch.Tensor:
        """Observed values with the query targets hidden (0 at query rows)."""
        return torch.where(self.is_query, torch.zeros_like(self.value), self.value)

    def sample_rows(self, b: int) -> dict[str, np.ndarray]:
        """The rows of sample ``b`` as numpy arrays (for plots)."""
        sl = slice(int(self.offsets[b]), int(self.offsets[b + 1]))
        return {k: getattr(self, k)[sl].cpu().numpy() for k in ("time", "var", "value", "is_query")}

    @functools.cached_property
    def timestamp_index(self) -> tuple[torch.Tensor, int]:
        """``(edge, n_edges)``: each row's distinct (sample, time) id, in the order of the rows.

        Rows are sorted by (sample, time), so a new id starts wherever either changes; times are
        compared exactly, in float64.
        """
        new = torch.ones(self.n_nodes, dtype=torch.bool, device=self.device)
        new[1:] = (self.sample[1:] != self.sample[:-1]) | (self.time[1:] != self.time[:-1])
        edge = torch.cumsum(new, 0) - 1
        return edge, int(edge[-1]) + 1

    @functools.cached_property
    def padded(self) -> PaddedBatch:
        return self.to_padded()

    def to_padded(self) -> PaddedBatch:
        """The padded ``(B, L, V)`` grid over the union of each sample's timestamps (history and queries)."""
        edge, n_edges = self.timestamp_index
        per_sample = torch.bincount(self.sample[torch.diff(edge, prepend=edge[:1] - 1) > 0],
                                    minlength=self.n_samples)          # distinct timestamps of each sample
        first = torch.cumsum(per_sample, 0) - per_sample
        slot = edge - first[self.sample]                     # the row's timestamp position in its sample
        B, L, V, dev = self.n_samples, int(per_sample.max()), self.n_vars, self.device
        times = torch.zeros(B, L, device=dev)
        times[self.sample, slot] = self.time.float()
        time_valid = torch.arange(L, device=dev)[None, :] < per_sample[:, None]
        cell = (self.sample * L + slot) * V + self.var

        def grid(x, dtype):
            return torch.zeros(B * L * V, dtype=dtype, device=dev).index_put_((cell,), x).view(B, L, V)

        return PaddedBatch(times, time_valid, grid(self.inputs, torch.float32), grid(~self.is_query, torch.bool),
                           grid(self.is_query, torch.bool), grid(self.value, torch.float32), cell)

    def __repr__(self) -> str:
        return (f"IMTSBatch({self.n_samples} samples, {self.n_nodes} rows of which {int(self.is_query.sum())} "
                f"queries, {self.n_vars} variables)")


def padding_stats(batch: IMTSBatch) -> dict[str, float]:
    """What padding costs on ``batch``: cells of the padded ``(B, L, V)`` tensor per real row.

    ``cells``: B * L_max * V; ``cells_per_sample``: sum over samples of L_b * V (each sample
    padded only to its own length); ``nodes``: observations + queries (the hypergraph's nodes).
    """
    time_valid = batch.padded.time_valid
    per_sample = time_valid.sum(1)
    cells = batch.padded.n_cells
    own = int(per_sample.sum()) * batch.n_vars
    return {"nodes": batch.n_nodes, "cells": cells, "cells_per_sample": own,
            "cells_per_node": cells / batch.n_nodes, "density": batch.n_nodes / cells}


def lead_lag_pairs(n_vars: int) -> list[tuple[int, int]]:
    """``(leader, follower)`` pairs of :func:`make_imts`: variable ``V//2 + j`` follows variable ``j``."""
    half = as_positive_int(n_vars, "n_vars", minimum=2) // 2
    return [(j, half + j) for j in range(half)]


def make_imts(n_samples: int, n_vars: int = 8, *, lead_lag: bool = True, lag: float = 0.1,
              history_end: float = 0.75, n_future_times: int = 3, rate_range: tuple[float, float] = (4.0, 24.0),
              n_panels: float = 6.0, panel_prob: float = 0.5, noise: float = 0.1, grid: int = 480,
              seed: int = 0) -> IMTSBatch:
    """A seeded synthetic IMTS forecasting set on the time axis [0, 1].

    Each variable ``v`` of each sample has its own smooth signal ``s_v(t)``, a sum of three
    sinusoids with random amplitudes, frequencies (0.5 to 3 cycles) and phases. Variables
    ``0..V//2-1`` are *leaders*, ``x_v = s_v``. With ``lead_lag`` the others are *followers*,
    ``x_{V//2+j}(t) = beta_j s_j(t - lag) + 0.3 s_{V//2+j}(t)`` (normalised), so a follower's
    future is written in its leader's recent past; without it, ``x_v = s_v`` for every variable
    and the variables are independent. Observation noise is N(0, noise^2).

    Times: variable ``v`` is observed at Poisson(rate_v) uniform times (leaders take the higher
    half of the log-spaced rates in ``rate_range``, followers the lower half), plus at shared
    "panel" times (Poisson(``n_panels``) per sample, each variable present with probability
    ``panel_prob``), all rounded to a grid of ``1/grid``. History: times <= ``history_end``;
    queries: every observation at the first ``n_future_times`` distinct later timestamps.
    """
    n_samples = as_positive_int(n_samples, "n_samples")
    n_vars = as_positive_int(n_vars, "n_vars", minimum=2)
    n_future_times = as_positive_int(n_future_times, "n_future_times")
    grid = as_positive_int(grid, "grid")
    if not 0 < history_end < 1:
        raise ValueError(f"history_end: expected a number in (0, 1), got {history_end}")
    if not (0 < rate_range[0] <= rate_range[1]):
        raise ValueError(f"rate_range: expected 0 < low <= high, got {rate_range}")
    rng = np.random.default_rng(seed)
    V, half = n_vars, n_vars // 2
    rates = np.sort(np.exp(np.linspace(np.log(rate_range[1]), np.log(rate_range[0]), V)))[::-1].copy()
    rng.shuffle(rates[:half])  # leaders: the higher rates, followers: the lower ones, in random order
    rng.shuffle(rates[half:])
    beta = rng.uniform(0.8, 1.2, size=V - half)
    leader = np.arange(V)
    leader[half:half + (V - half)] = np.arange(V - half) % half
    rows = {k: [] for k in ("sample", "time", "var", "value", "is_query")}
    b = 0
    while b < n_samples:
        amp = rng.uniform(0.3, 1.0, size=(V, 3))
        amp /= np.sqrt((amp**2).sum(1, keepdims=True) / 2)        # unit variance over a long window
        freq, phase = rng.uniform(0.5, 3.0, size=(V, 3)), rng.uniform(0, 2 * np.pi, size=(V, 3))

        def signal(v, t):
            return (amp[v] * np.sin(2 * np.pi * freq[v] * t[:, None] + phase[v])).sum(1)

        counts = rng.poisson(rates)
        var = np.repeat(np.arange(V), counts)
        t = rng.uniform(0, 1, size=var.size)
        n_p = rng.poisson(n_panels)
        present = rng.random((n_p, V)) < panel_prob
        var = np.r_[var, np.nonzero(present)[1]]
        t = np.r_[t, rng.uniform(0, 1, size=n_p)[np.nonzero(present)[0]]]
        tick = np.unique(var * (grid + 1) + np.round(t * grid).astype(int))
        var, tick = tick // (grid + 1), tick % (grid + 1)
        t = tick / grid
        future = np.unique(t[t > history_end])
        if future.size == 0 or not np.any(t <= history_end):
            continue  # resample: a forecasting sample needs a history and a query
        keep = (t <= history_end) | (t <= future[min(n_future_times, future.size) - 1])
        var, t = var[keep], t[keep]
        x = signal(var, t)
        if lead_lag:
            f = var >= half
            lead = signal(leader[var[f]], t[f] - lag)
            x[f] = (beta[var[f] - half] * lead + 0.3 * x[f]) / np.sqrt(beta[var[f] - half] ** 2 + 0.09)
        x = x + noise * rng.standard_normal(x.size)
        for k, val in (("sample", np.full(t.size, b)), ("time", t), ("var", var), ("value", x),
                       ("is_query", t > history_end)):
            rows[k].append(val)
        b += 1
    cat = {k: np.concatenate(v) for k, v in rows.items()}
    return IMTSBatch.from_rows(cat["sample"], cat["time"], cat["var"], cat["value"], cat["is_query"], V)


def load_imts_csv(path: str | Path, *, history_end: float, n_future_times: int = 3,
                  time_unit: float | None = None, variables: list[str] | None = None,
                  on_unknown: str = "raise") -> tuple[IMTSBatch, list[str]]:
    """Read a long-format CSV (columns ``sample, time, variable, value``) into a forecasting batch.

    Rows with ``time <= history_end`` are history; the observations at the first
    ``n_future_times`` later timestamps of each sample are queries; later rows are dropped, as
    are samples without a history or a query. Times are divided by ``time_unit`` (default: the
    largest time in the file) so that they lie in [0, 1]. ``variables`` fixes the variable ids
    (names in this order); a name not in it raises, or is dropped with ``on_unknown="drop"``.
    Returns the batch and the variable names. Nothing is downloaded.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: no such file {path}")
    on_unknown = as_choice(on_unknown, "on_unknown", ("raise", "drop"))
    n_future_times = as_positive_int(n_future_times, "n_future_times")
    df = pd.read_csv(path)
    missing = {"sample", "time", "variable", "value"} - set(df.columns)
    if missing:
        raise ValueError(f"path: {path.name} lacks the column(s) {sorted(missing)} (long format: sample, time, "
                         "variable, value)")
    if df["value"].isna().any():
        raise ValueError(f"value: {int(df['value'].isna().sum())} missing value(s) in {path.name} (first at line "
                         f"{int(df.index[df['value'].isna()][0]) + 2}); leave unobserved cells out of a long file")
    df["variable"] = df["variable"].astype(str)
    names = sorted(df["variable"].unique()) if variables is None else list(variables)
    known = df["variable"].isin(names)
    if not known.all():
        if on_unknown == "raise":
            raise ValueError(f"variables: {sorted(df.loc[~known, 'variable'].unique())[:5]} not among the given "
                             f"variables; pass on_unknown='drop' to ignore them")
        df = df[known]
    unit = float(df["time"].max()) if time_unit is None else float(time_unit)
    if not np.isfinite(unit) or unit <= 0:
        raise ValueError(f"time_unit: expected a positive number, got {unit}")
    df = df.assign(var=df["variable"].map({n: i for i, n in enumerate(names)}))
    df = df.groupby(["sample", "time", "var"], as_index=False)["value"].mean()  # repeated readings: average
    keep = []
    for _, g in df.groupby("sample", sort=True):
        future = np.unique(g["time"][g["time"] > history_end])
        if future.size == 0 or not (g["time"] <= history_end).any():
            continue
        keep.append(g[g["time"] <= future[min(n_future_times, future.size) - 1]])
    if not keep:
        raise ValueError(f"history_end: no sample of {path.name} has both a history (time <= {history_end}) and "
                         "a later observation to forecast")
    df = pd.concat(keep)
    batch = IMTSBatch.from_rows(df["sample"].to_numpy(), df["time"].to_numpy() / unit, df["var"].to_numpy(),
                                df["value"].to_numpy(), (df["time"] > history_end).to_numpy(), len(names))
    return batch, names
