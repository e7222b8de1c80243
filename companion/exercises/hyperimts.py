"""Checkers for the exercises of the chapter *HyperIMTS: forecasting irregular time series with a hypergraph*.

* :func:`check_incidence` -- exercise 1, the incidence matrices of one sample's hypergraph
  (label ``hyperimts-incidence``), 2 points;
* :func:`check_padding_cost` -- exercise 2, padded cells per real node of a batch, 1 point;
* :func:`check_segment_softmax` -- exercise 3, the softmax over each hyperedge's members
  (``hyperimts-n2e``), 2 points.

Each runs the student's function through :meth:`Report.call` on cases built to expose one
mistake each, names the mistake, and cites the equations as the page numbers them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion.data.imts import IMTSBatch, make_imts, padding_stats
from companion.exercises import Report, eq
from companion.hyperimts.model import incidence_matrices, segment_softmax

__all__ = ["check_incidence", "check_padding_cost", "check_segment_softmax"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_incidence": ("companion.hyperimts.model.incidence_matrices",),
              "check_padding_cost": ("companion.data.imts.padding_stats",),
              "check_segment_softmax": ("companion.hyperimts.model.segment_softmax",)}


def _array(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=float)


def _incidence_cases():
    return [
        ("three variables, no shared time", [0.1, 0.2, 0.4], [0, 2, 1], 3),
        ("two variables observed at the same time", [0.1, 0.3, 0.3, 0.5], [0, 0, 1, 1], 2),
        ("rows not in time order", [0.5, 0.1, 0.3, 0.1], [1, 0, 1, 2], 3),
        ("a variable never observed", [0.2, 0.6, 0.6], [0, 0, 2], 4),
    ]


def check_incidence(incidence: Callable) -> Report:
    """Check ``incidence(time, var, n_vars) -> (I_T, I_V)``, eq. (hyperimts-incidence).

    ``I_T`` is L x N (one row per distinct time, in increasing order), ``I_V`` is V x N.
    """
    report = Report("Exercise 1 (the incidence of a hypergraph)", points=2)
    for name, time, var, V in _incidence_cases():
        out = report.call(incidence, np.array(time), np.array(var), V, what=name)
        if report.not_done:
            return report
        if out is None:
            continue
        try:
            got_t, got_v = (_array(m) for m in out)
        except (TypeError, ValueError):
            report.check(False, f"{name}: return a pair (I_T, I_V) of matrices")
            continue
        want_t, want_v = (m.numpy() for m in incidence_matrices(time, var, V)[:2])
        n = len(time)
        if got_t.shape == want_t.shape[::-1] and got_t.shape != want_t.shape:
            report.check(False, f"{name}: I_T has shape {got_t.shape}, the transpose of L x N = {want_t.shape}: "
                                "rows are hyperedges, columns nodes")
            continue
        if got_t.shape == (n, n) and want_t.shape != (n, n):
            report.check(False, f"{name}: I_T is N x N ({n} temporal hyperedges); two nodes observed at the same "
                                f"time share one temporal hyperedge, so {eq('hyperimts-incidence')} has one row "
                                "per distinct time")
            continue
        if not report.check(got_t.shape == want_t.shape, f"{name}: I_T has shape {got_t.shape}, expected "
                                                         f"{want_t.shape} (distinct times x nodes)"):
            continue
        if not np.array_equal(got_t, want_t):
            if sorted(map(tuple, got_t)) == sorted(map(tuple, want_t)):
                report.check(False, f"{name}: the rows of I_T are the right hyperedges in the wrong order; sort the "
                                    "distinct times increasingly (row l is the l-th smallest time)")
            else:
                report.check(False, f"{name}: I_T = {got_t.astype(int).tolist()}, expected "
                                    f"{want_t.astype(int).tolist()}")
            continue
        if got_v.shape == (want_v.shape[0] - 1, n) or (got_v.shape[0] < V and got_v.shape[1:] == (n,)):
            report.check(False, f"{name}: I_V has {got_v.shape[0]} rows but the sample has {V} variables; a variable "
                                "without observations keeps its (empty) hyperedge, so I_V is V x N")
            continue
        if not report.check(got_v.shape == want_v.shape, f"{name}: I_V has shape {got_v.shape}, expected "
                                                         f"{want_v.shape} (variables x nodes)"):
            continue
        report.check(bool(np.array_equal(got_v, want_v)), f"{name}: I_V = {got_v.astype(int).tolist()}, expected "
                                                           f"{want_v.astype(int).tolist()}")
    return report


def check_padding_cost(cells_per_node: Callable) -> Report:
    """Check ``cells_per_node(batch) -> float``: cells of the padded (B, L_max, V) tensor per hypergraph node."""
    report = Report("Exercise 2 (what padding costs)", points=1)
    for seed in (0, 1):
        batch = make_imts(16, seed=seed)
        got = report.call_number(cells_per_node, batch, what=f"a batch of 16 samples (seed {seed})")
        if got is None:
            return report
        stats = padding_stats(batch)
        want = stats["cells_per_node"]
        if abs(got - want) <= 1e-6 * want:
            report.check(True, "")
            continue
        hist = ~batch.is_query
        h = padding_stats(IMTSBatch.from_rows(batch.sample[hist].numpy(), batch.time[hist].numpy(),
                                              batch.var[hist].numpy(), batch.value[hist].numpy(),
                                              np.ones(int(hist.sum()), dtype=bool), batch.n_vars))
        if abs(got - stats["cells_per_sample"] / stats["nodes"]) < 1e-6 * want:
            report.check(False, f"you return {got:.4f}: each sample padded to its own length. A batch tensor is "
                                f"B x L_max x V, so every sample pays for the longest one ({want:.4f}).")
        elif abs(got - h["cells"] / h["nodes"]) < 1e-6 * want:
            report.check(False, f"you return {got:.4f}, counting only the history: the padded grid also needs the "
                                f"query timestamps (a model must be evaluated there), and queries are nodes ({want:.4f}).")
        elif abs(got - stats["cells"] / int(hist.sum())) < 1e-6 * want:
            report.check(False, f"you return {got:.4f}, dividing by the history observations only; the queries are "
                                f"nodes of the hypergraph too ({want:.4f}).")
        elif abs(got - 1 / want) < 1e-6:
            report.check(False, f"you return the density {got:.4f} (nodes per cell); the exercise asks for its "
                                f"inverse, {want:.4f} cells per node.")
        else:
            report.check(False, f"you return {got:.4f}, expected {want:.4f} = B * L_max * V / nodes, with L_max the "
                                "largest number of distinct timestamps (history and queries) of a sample.")
        return report
    return report


def check_segment_softmax(softmax: Callable) -> Report:
    """Check ``softmax(scores, segment, n_segments)``: a softmax over the rows of each segment, per column."""
    report = Report("Exercise 3 (softmax over a hyperedge)", points=2)
    g = torch.Generator().manual_seed(0)
    segment = torch.tensor([2, 0, 2, 1, 0, 2, 4])         # segment 3 is empty, rows not grouped
    cases = [
        ("small scores, 2 heads", torch.randn(7, 2, generator=g)),
        ("large scores (up to 1000), 2 heads", 1000 * torch.randn(7, 2, generator=g)),
        ("one head", torch.randn(7, 1, generator=g)),
    ]
    for name, scores in cases:
        got = report.call(softmax, scores.clone(), segment.clone(), 5, what=name)
        if report.not_done:
            return report
        if got is None:
            continue
        try:
            got = torch.as_tensor(_array(got), dtype=torch.float32)
        except (TypeError, ValueError):
            report.check(False, f"{name}: return a tensor of weights, not {type(got).__name__}")
            continue
        want = segment_softmax(scores, segment, 5)
        if not report.check(got.shape == want.shape, f"{name}: returned shape {tuple(got.shape)}, expected "
                                                     f"{tuple(want.shape)} (one weight per row and head)"):
            continue
        if not torch.isfinite(got).all():
            report.check(False, f"{name}: the weights contain nan or inf; exp(1000) overflows. Subtract each "
                                "segment's largest score before exponentiating (scatter_reduce with 'amax').")
            continue
        if torch.allclose(got, torch.softmax(scores, 0), atol=1e-5):
            report.check(False, f"{name}: this is a softmax over all rows; in {eq('hyperimts-n2e')} each hyperedge "
                                "normalises over its own members only, so the weights of every segment sum to 1.")
            continue
        sums = torch.zeros(5, scores.shape[1]).index_add(0, segment, got)
        if not torch.allclose(sums[[0, 1, 2, 4]], torch.ones(4, scores.shape[1]), atol=1e-4):
            report.check(False, f"{name}: the weights of a segment sum to {sums[:, 0].tolist()} (segments 0..4), "
                                "not 1 (segment 3 is empty and has no rows).")
            continue
        report.check(bool(torch.allclose(got, want, atol=1e-5)),
                     f"{name}: the weights sum to 1 per segment but differ from the softmax of the scores "
                     f"(got {got[:, 0].tolist()}, expected {want[:, 0].tolist()}).")
    return report
