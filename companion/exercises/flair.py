"""Checkers for the exercises of the chapter *FLAIR: a cardinality estimator that adapts in context*.

* :func:`check_gmq` -- exercise 1, the geometric-mean q-error (label ``flair-qerror``), 2 points;
* :func:`check_stream` -- exercise 2, the online loop of in-context adaptation (labels
  ``flair-predict`` and ``flair-context``), 2 points;
* :func:`check_normalize` -- exercise 3, the engine's normalisation by the context's
  statistics (label ``flair-dde``), 2 points.

Each compares the student's answer with :mod:`companion.flair` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equations as the page numbers them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from companion import flair as fl
from companion.exercises import Report, eq

__all__ = ["check_gmq", "check_stream", "check_normalize"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade);
# the page's preprocess does more than exercise 3's standardisation, so it does not answer it.
REFERENCES = {"check_gmq": ("companion.flair.gmq",),
              "check_stream": (),
              "check_normalize": ()}


def _gmq_cases():
    return [
        ("three exact estimates and one 4x over", np.array([10.0, 20.0, 30.0, 400.0]),
         np.array([10.0, 20.0, 30.0, 100.0])),
        ("over- and under-estimates of the same factor", np.array([50.0, 2.0]),
         np.array([10.0, 10.0])),
        ("empty results and estimates of zero", np.array([0.0, 5.0, 0.0, 0.3]),
         np.array([0.0, 0.0, 8.0, 1.0])),
    ]


def check_gmq(gmq_of: Callable) -> Report:
    """Check ``gmq_of(pred_card, true_card)``: exp(mean ln q) of eq. (flair-qerror)."""
    report = Report("Exercise 1 (geometric-mean q-error)", points=2)
    for what, p, t in _gmq_cases():
        got = report.call_number(gmq_of, p.copy(), t.copy(), what=what)
        if got is None:
            return report
        qe = fl.q_error(p, t)
        want = fl.gmq(qe)
        if np.isfinite(got) and abs(got - want) <= 1e-9 * want:
            report.check(True, "")
            continue
        pc, tc = np.maximum(p, 1), np.maximum(t, 1)
        if not np.isfinite(got):
            msg = (f"{what}: got {got}. A true or estimated cardinality of 0 makes the ratio "
                   f"infinite; {eq('flair-qerror')} clips both at 1 first.")
        elif abs(got - float(qe.mean())) < 1e-9:
            msg = (f"{what}: you average the q-errors arithmetically ({got:.4g}); the GMQ of "
                   f"{eq('flair-qerror')} is exp(mean ln q) = {want:.4g}, which a single huge "
                   "error cannot dominate.")
        elif abs(got - float(np.exp(np.log(pc / tc).mean()))) < 1e-9:
            msg = (f"{what}: you average ln(p / t), so over- and under-estimates cancel "
                   f"({got:.4g}). The q-error of {eq('flair-qerror')} is max(p / t, t / p) >= 1.")
        elif abs(got - float(np.log(qe).mean())) < 1e-9:
            msg = f"{what}: you return mean ln q ({got:.4g}); take its exp ({eq('flair-qerror')})."
        else:
            msg = f"{what}: got {got:.6g}, expected {want:.6g} ({eq('flair-qerror')})."
        report.check(False, msg)
        return report
    return report


class _Recorder:
    """A stand-in decision engine that records the context it is shown."""

    def __init__(self):
        self.calls = []

    def __call__(self, ctx_x, ctx_y, x):
        cx, cy = np.asarray(ctx_x, dtype=float), np.asarray(ctx_y, dtype=float)
        self.calls.append((cx.copy(), cy.copy(), np.asarray(x, dtype=float).copy()))
        return float(cy.mean() + 0.001 * cx.sum())


def _stream_reference(xs, ys, capacity):
    """Which labels each query should see: ``None`` (cold start) or ys[t - m: t], oldest first."""
    return [None if t < capacity else ys[t - capacity: t] for t in range(len(xs))]


def check_stream(in_context_stream: Callable) -> Report:
    """Check ``in_context_stream(predict, cold, xs, ys, capacity)``: eqs. (flair-predict),
    (flair-context)."""
    report = Report("Exercise 2 (the online loop)", points=2)
    eqs = f"{eq('flair-predict')} and {eq('flair-context')}"
    for what, n, m in [("10 queries, capacity 3", 10, 3), ("9 queries, capacity 5", 9, 5)]:
        xs = np.arange(n, dtype=float)[:, None] * np.array([[1.0, -1.0]])
        ys = 100.0 + np.arange(n, dtype=float)
        engine = _Recorder()
        cold_calls = []

        def cold(x, _calls=cold_calls):
            _calls.append(float(np.asarray(x)[0]))
            return -1.0

        got = report.call_array(in_context_stream, engine, cold, xs.copy(), ys.copy(), m, what=what)
        if got is None:
            return report
        if not report.check(got.shape == (n,), f"{what}: expected {n} predictions, got shape {got.shape}"):
            return report
        want = _stream_reference(xs, ys, m)
        leaked = [int(x[0]) for cx, cy, x in engine.calls if ys[int(round(x[0]))] in cy]
        if not report.check(not leaked, f"{what}: the context for query {leaked[:1]} already holds "
                            "that query's own label. The executed result enters the memory only "
                            f"*after* the prediction ({eqs}); otherwise the errors look perfect."):
            return report
        sizes = sorted({len(cy) for _, cy, _ in engine.calls})
        if not report.check(sizes == [m], f"{what}: the engine saw contexts of sizes {sizes}; "
                            f"with capacity {m} it is called only on a full queue of {m} pairs "
                            f"({eqs}), and the head (`cold`) answers before that."):
            return report
        if not report.check(cold_calls == list(range(min(m, n))),
                            f"{what}: `cold` was called for queries {cold_calls}; it answers exactly "
                            f"the first {m} queries, while the queue is filling ({eqs})."):
            return report
        shown = [cy for _, cy, _ in engine.calls]
        expected = [w for w in want if w is not None]
        if shown and len(shown) == len(expected) and all(np.array_equal(a, b[::-1]) for a, b in zip(shown, expected)) \
                and m > 1:
            report.check(False, f"{what}: your context is newest first. The queue of {eqs} is FIFO, "
                         "oldest first (the engine is order-invariant, but the pairs must match: "
                         "ctx_x[i] with ctx_y[i]).")
            return report
        if not report.check(len(shown) == len(expected) and all(np.array_equal(a, b) for a, b in
                                                                zip(shown, expected)),
                            f"{what}: the engine saw the labels {[c.tolist() for c in shown[:2]]}... "
                            f"for the first full queues; expected {[c.tolist() for c in expected[:2]]}... "
                            f"(the {m} most recent executed queries, {eqs})."):
            return report
        ok_x = all(np.array_equal(cx, xs[t - m: t]) and np.array_equal(x, xs[t])
                   for (cx, _, x), t in zip(engine.calls, range(m, n)))
        if not report.check(ok_x, f"{what}: the context's features do not match its labels or the "
                            f"query passed is not x_t ({eqs})."):
            return report
        ref = [-1.0 if w is None else float(np.mean(w) + 0.001 * xs[t - m: t].sum())
               for t, w in enumerate(want)]
        report.check(np.allclose(got, ref), f"{what}: the predictions returned are not the values "
                     "`cold` and `predict` gave, in query order.")
    return report


def check_normalize(context_normalize: Callable) -> Report:
    """Check ``context_normalize(ctx_x, qry_x)``: the feature standardisation of eq. (flair-dde),
    by the context's mean and (population) standard deviation, + 1e-6."""
    report = Report("Exercise 3 (normalising by the context)", points=2)
    rng = np.random.default_rng(5)
    cases = [("a context of 6 pairs and 2 queries in 3-d", 3.0 + 2.0 * rng.standard_normal((6, 3)),
              rng.standard_normal((2, 3))),
             ("one query far outside the context (a drifted input)", rng.standard_normal((8, 2)),
              np.array([[40.0, -25.0]]))]
    for what, cx, qx in cases:
        got = report.call(context_normalize, cx.copy(), qx.copy(), what=what)
        if got is None:
            return report
        try:
            gc, gq = (np.asarray(a, dtype=float) for a in got)
        except (TypeError, ValueError):
            report.check(False, f"{what}: expected a pair (ctx_n, qry_n) of arrays")
            return report
        if not report.check(gc.shape == cx.shape and gq.shape == qx.shape,
                            f"{what}: expected shapes {cx.shape} and {qx.shape}, got {gc.shape} "
                            f"and {gq.shape}"):
            return report
        mean, std = cx.mean(0), cx.std(0) + 1e-6
        want_c, want_q = (cx - mean) / std, (qx - mean) / std
        if np.allclose(gc, want_c, atol=1e-6) and np.allclose(gq, want_q, atol=1e-6):
            report.check(True, "")
            continue
        both = np.vstack([cx, qx])
        mb, sb = both.mean(0), both.std(0) + 1e-6
        if np.allclose(gq, (qx - mb) / sb, atol=1e-6):
            msg = (f"{what}: your statistics include the queries. {eq('flair-dde')} uses the "
                   "context alone: a query must not move the scale it is read on (and queries "
                   "must not influence each other).")
        elif np.allclose(gq, (qx - qx.mean(0)) / (qx.std(0) + 1e-6), atol=1e-6):
            msg = (f"{what}: you normalise the queries by their own statistics; "
                   f"{eq('flair-dde')} reads them on the context's scale, so a drifted query "
                   "stays far from the context.")
        elif np.allclose(gc, (cx - mean) / (cx.std(0, ddof=1) + 1e-6), atol=1e-6):
            msg = (f"{what}: you use the sample standard deviation (ddof = 1); the engine uses "
                   f"the population one (ddof = 0), {eq('flair-dde')}.")
        elif np.allclose(gc, (cx - cx.mean(1, keepdims=True)) / (cx.std(1, keepdims=True) + 1e-6),
                         atol=1e-6):
            msg = (f"{what}: you normalise each pair across its features; {eq('flair-dde')} "
                   "standardises each feature across the context's pairs (axis 0).")
        else:
            msg = f"{what}: the normalised arrays differ from {eq('flair-dde')}."
        report.check(False, msg)
        return report
    return report

