"""The online experiment: a stream of queries against a drifting table, every method predicting
each query before it runs, and the executed cardinality fed back afterwards.

Methods follow one small protocol (:class:`Method`): ``start_phase(table, hist)`` after each
drift event (the database has re-run ANALYZE), ``predict(x, q) -> ln(card + 1)``, and
``observe(x, y)``, the adaptation step, whose wall time is the method's adaptation cost.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import pandas as pd
import torch

from companion.validation import as_choice, as_float_array, as_instance, as_positive_int, as_probability

from .db import DRIFTS, ColumnHistograms, DriftingTable, RangeQuery, avi_estimate, sample_queries
from .model import FLAIR, ContextMemory, TaskFeaturizer, featurize, fit_tfm, label

__all__ = ["q_error", "gmq", "summarize", "decode", "Method", "AVI", "EngineEstimate", "Static",
           "FineTuned", "InContext", "KNNContext", "RidgeContext", "ridge_predict", "in_context_errors", "run_stream", "offline_workload",
           "audit"]


# --- metrics -----------------------------------------------------------------------------------

def q_error(pred_card, true_card) -> np.ndarray:
    """``max(p / t, t / p)`` with both cardinalities clipped at 1 (eq. flair-qerror)."""
    p = np.maximum(as_float_array(pred_card, "pred_card", low=0), 1.0)
    t = np.maximum(as_float_array(true_card, "true_card", low=0), 1.0)
    if p.shape != t.shape:
        raise ValueError(f"true_card: expected the shape of pred_card {p.shape}, got {t.shape}")
    return np.maximum(p / t, t / p)


def gmq(qe) -> float:
    """Geometric-mean q-error ``exp(mean ln q)``."""
    qe = as_float_array(qe, "qe", low=1)
    return float(np.exp(np.log(qe).mean()))


def summarize(qe) -> dict:
    """GMQ and the 50/75/90/95/99th percentiles and maximum of the q-errors."""
    qe = as_float_array(qe, "qe", low=1)
    out = {"GMQ": gmq(qe)}
    out.update({f"p{p}": float(np.percentile(qe, p)) for p in (50, 75, 90, 95, 99)})
    out["max"] = float(qe.max())
    return out


def decode(y_hat: float) -> float:
    """A predicted label back to a cardinality, ``exp(clip(y, 0, 25)) - 1``."""
    return float(np.expm1(np.clip(as_float_array(y_hat, "y_hat"), 0.0, 25.0)))


# --- methods -----------------------------------------------------------------------------------

class Method:
    """The protocol of the stream: override ``predict``; ``observe`` and ``start_phase`` are
    no-ops for a method that neither adapts nor reads the database.

    :meth:`run_phase` replays one phase in order, each query predicted before its own label
    is observed; a method may override it with an equivalent batched computation.
    """

    def start_phase(self, table: DriftingTable, hist: ColumnHistograms) -> None:
        pass

    def predict(self, x: np.ndarray, q: RangeQuery) -> float:
        raise NotImplementedError

    def observe(self, x: np.ndarray, y: float) -> None:
        pass

    def run_phase(self, X: np.ndarray, qs: list[RangeQuery], y: np.ndarray):
        """Predictions ``[n]`` and the seconds spent predicting and adapting, one query at a time."""
        preds, infer, adapt = np.empty(len(qs)), 0.0, 0.0
        for i, (x, q) in enumerate(zip(X, qs)):
            start = time.perf_counter()
            preds[i] = self.predict(x, q)
            mid = time.perf_counter()
            self.observe(x, float(y[i]))
            infer, adapt = infer + mid - start, adapt + time.perf_counter() - mid
        return preds, infer, adapt


class AVI(Method):
    """The optimiser's estimate: histograms and attribute-value independence (eq. flair-avi)."""

    def start_phase(self, table, hist):
        self.hist = hist

    def predict(self, x, q):
        return float(np.log1p(avi_estimate(q, self.hist)))


class EngineEstimate(Method):
    """The database's own estimate from EXPLAIN (DuckDB only)."""

    def start_phase(self, table, hist):
        self.table = table

    def predict(self, x, q):
        return float(np.log1p(self.table.engine_estimate(q)))


class Static(Method):
    """The TFM with its regression head, trained once on phase 0 and never updated."""

    def __init__(self, tfm: TaskFeaturizer):
        self.tfm = as_instance(tfm, "tfm", TaskFeaturizer).eval()

    @torch.no_grad()
    def predict(self, x, q):
        dev = next(self.tfm.parameters()).device
        return float(self.tfm(torch.as_tensor(x[None], dtype=torch.float32, device=dev))[1][0])


class FineTuned(Static):
    """A copy of the static model fine-tuned every ``every`` queries for ``epochs`` epochs on the
    ``window`` most recent executed queries (all weights, Adam)."""

    def __init__(self, tfm: TaskFeaturizer, every: int = 50, window: int = 200, epochs: int = 10,
                 lr: float = 1e-3, seed: int = 0):
        super().__init__(copy.deepcopy(as_instance(tfm, "tfm", TaskFeaturizer)))
        self.every, self.window = as_positive_int(every, "every"), as_positive_int(window, "window")
        self.epochs, self.lr, self.seed = as_positive_int(epochs, "epochs"), lr, seed
        self.xs, self.ys, self.rounds = [], [], 0

    def observe(self, x, y):
        self.xs.append(x)
        self.ys.append(y)
        if len(self.ys) % self.every == 0:
            self.rounds += 1
            fit_tfm(self.tfm, np.stack(self.xs[-self.window:]), np.asarray(self.ys[-self.window:]),
                    epochs=self.epochs, batch=64, lr=self.lr, seed=self.seed + self.rounds,
                    standardize=False)


class InContext(Method):
    """FLAIR as a stream method; ``freeze_after``: stop pushing after that many queries.

    :meth:`run_phase` evaluates a phase in one batched call of the engine, with for query t
    exactly the memory :class:`FLAIR` would hold online (the ``m`` pairs before t, oldest
    first); ``tests/test_flair.py`` checks it against the one-query-at-a-time loop.
    """

    def __init__(self, flair: FLAIR, freeze_after: int | None = None,
                 shuffle_seed: int | None = None):
        as_instance(flair, "flair", FLAIR)
        if freeze_after is not None:
            as_positive_int(freeze_after, "freeze_after", minimum=0)
        self.flair, self.freeze_after, self.seen = flair, freeze_after, 0
        # the null of the context claim: the labels pushed are permuted within each phase, so
        # the queue holds the phase's labels but not which query each belongs to
        self.shuffle = None if shuffle_seed is None else np.random.default_rng(shuffle_seed)

    def predict(self, x, q):
        return self.flair.predict(x)

    def observe(self, x, y):
        if self.shuffle is not None:
            raise ValueError("shuffle_seed: a shuffled context is built per phase, in run_phase")
        self.seen += 1
        if self.freeze_after is not None and self.seen > self.freeze_after:
            self.flair.freeze_memory()
        self.flair.observe(x, y)

    @torch.no_grad()
    def run_phase(self, X, qs, y):
        fl, n = self.flair, len(X)
        if self.shuffle is not None:
            y = np.asarray(y)[self.shuffle.permutation(n)]
        start = time.perf_counter()
        dev = next(fl.tfm.parameters()).device
        z, head = fl.tfm(torch.as_tensor(X, dtype=torch.float32, device=dev))
        Zm, Ym = (torch.as_tensor(a, device=dev) for a in fl.memory.arrays())
        yt = torch.as_tensor(y, dtype=torch.float32, device=dev)
        m, k = fl.memory.capacity, len(Ym)
        # the online memory before each query: pushes stop once the method is frozen
        pushes = n if self.freeze_after is None else max(0, min(n, self.freeze_after - self.seen))
        pushes = 0 if fl.frozen else pushes
        Z_all, Y_all = torch.cat([Zm, z[:pushes]]), torch.cat([Ym, yt[:pushes]])
        ends = k + np.minimum(np.arange(n), pushes)  # pairs in the queue before query t
        preds = head.clone()
        full = ends >= m
        if pushes == 0 and k == m:  # a frozen queue: one context, all queries at once
            preds = fl.engine(Zm[None], Ym[None], z[None])[0]
        elif full.any():
            idx = torch.as_tensor(ends[full][:, None] - m + np.arange(m), device=dev)
            mean = fl.engine(Z_all[idx], Y_all[idx], z[torch.as_tensor(full, device=dev)][:, None])
            preds[torch.as_tensor(full, device=dev)] = mean[:, 0]
        infer = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(pushes):
            fl.memory.push(z[i].cpu().numpy(), float(y[i]))
        self.seen += n
        if self.freeze_after is not None and self.seen >= self.freeze_after:
            fl.freeze_memory()
        return preds.cpu().numpy().astype(float), infer, time.perf_counter() - start


class KNNContext(Method):
    """Mean label of the ``k`` nearest pairs (Euclidean in z) of a FIFO memory, head until full."""

    def __init__(self, tfm: TaskFeaturizer, capacity: int = 80, k: int = 5):
        self.tfm, self.k = as_instance(tfm, "tfm", TaskFeaturizer).eval(), as_positive_int(k, "k")
        self.memory = ContextMemory(capacity, tfm.d_z)

    @torch.no_grad()
    def _z(self, x):
        if getattr(self, "_last", (None,))[0] is x:  # observe() after predict() of the same x
            return self._last[1]
        dev = next(self.tfm.parameters()).device
        z, y = self.tfm(torch.as_tensor(x[None], dtype=torch.float32, device=dev))
        self._last = (x, (z[0].cpu().numpy(), float(y[0])))
        return self._last[1]

    def predict(self, x, q):
        z, y_head = self._z(x)
        if not self.memory.full:
            return y_head
        Z, Y = self.memory.arrays()
        nearest = np.argsort(((Z - z) ** 2).sum(1))[: self.k]
        return float(Y[nearest].mean())

    def observe(self, x, y):
        self.memory.push(self._z(x)[0], y)


def ridge_predict(ctx_x, ctx_y, qry_x, alpha: float = 1.0) -> np.ndarray:
    """Ridge regression fitted to each context, ``[B, m, d], [B, m], [B, n, d] -> [B, n]``.

    Features standardised with the context's statistics, penalty ``alpha`` on the weights,
    none on the intercept: the closed form ``(A^T A + alpha I')^{-1} A^T y`` per task.
    """
    cx, cy, qx = (np.asarray(a, dtype=float) for a in (ctx_x, ctx_y, qry_x))
    if cx.ndim != 3 or cy.shape != cx.shape[:2] or qx.ndim != 3 or qx.shape[2] != cx.shape[2]:
        raise ValueError(f"ctx_x: expected [B, m, d], [B, m], [B, n, d], got {cx.shape}, "
                         f"{cy.shape}, {qx.shape}")
    mu, sd = cx.mean(1, keepdims=True), cx.std(1, keepdims=True) + 1e-6
    ones = lambda a: np.ones(a.shape[:2] + (1,))  # noqa: E731
    A, Q = np.concatenate([(cx - mu) / sd, ones(cx)], 2), np.concatenate([(qx - mu) / sd, ones(qx)], 2)
    penalty = alpha * np.diag(np.r_[np.ones(cx.shape[2]), 0.0])
    w = np.linalg.solve(A.transpose(0, 2, 1) @ A + penalty, (A.transpose(0, 2, 1) @ cy[..., None]))
    return (Q @ w)[..., 0]


class RidgeContext(KNNContext):
    """Ridge regression of y on z over the same FIFO memory, refitted for every query
    (:func:`ridge_predict`): a simple in-context regressor, the yardstick of what the
    queue's pairs can teach about the current concept."""

    def __init__(self, tfm: TaskFeaturizer, capacity: int = 80, alpha: float = 1.0):
        super().__init__(tfm, capacity)
        self.alpha = float(alpha)

    def predict(self, x, q):
        z, y_head = self._z(x)
        if not self.memory.full:
            return y_head
        Z, Y = self.memory.arrays()
        return float(ridge_predict(Z[None], Y[None], z[None, None], self.alpha)[0, 0])


def in_context_errors(dde, ctx_x, ctx_y, qry_x, qry_y) -> dict:
    """Mean squared error of the engine, of ridge on the context and of the context's mean
    label on tasks ``[B, m, d], [B, m], [B, n, d], [B, n]``, each divided by the variance of
    the task's context labels (so 1 is the error of predicting the context mean)."""
    from .model import DynamicDecisionEngine

    as_instance(dde, "dde", DynamicDecisionEngine)
    t = [torch.as_tensor(np.asarray(a), dtype=torch.float32) for a in (ctx_x, ctx_y, qry_x, qry_y)]
    for name, x, dims in zip(("ctx_x", "ctx_y", "qry_x", "qry_y"), t, (3, 2, 3, 2)):
        if x.ndim != dims or not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: expected a finite {dims}-D array of tasks, got shape {tuple(x.shape)}")
    dev = next(dde.parameters()).device
    with torch.no_grad():
        engine = dde(*(a.to(dev) for a in t[:3]))[0].cpu().numpy()
    cx, cy, qx, qy = (a.numpy() for a in t)
    scale = cy.var(1, keepdims=True) + 1e-12
    nmse = lambda pred: float((((pred - qy) ** 2) / scale).mean())  # noqa: E731
    return {"engine": nmse(engine), "ridge": nmse(ridge_predict(cx, cy, qx)),
            "context mean": nmse(np.broadcast_to(cy.mean(1, keepdims=True), qy.shape))}


# --- the experiment -------------------------------------------------------------------------------

def offline_workload(table: DriftingTable, n: int, seed: int):
    """``n`` queries on the current table, executed: features ``[n, 13]``, labels, queries."""
    as_instance(table, "table", DriftingTable)
    qs = sample_queries(table.snapshot(), as_positive_int(n, "n"), np.random.default_rng(seed))
    hist = table.analyze()
    y = label(table.count_many(qs))
    return featurize(qs, hist, table.n_rows), y, qs


def run_stream(table: DriftingTable, methods: dict[str, Method], phases: int = 6, per_phase: int = 200,
               drift: tuple[str, ...] = DRIFTS, severity: float = 0.4, seed: int = 0,
               refresh_stats: bool = True, progress=None, first_phase: int | None = None) -> pd.DataFrame:
    """Run the online experiment and return one row per (query, method).

    Phase 0 runs on the table as trained on; before each later phase one drift event of
    ``drift`` (cycled) touches ``severity`` x N rows. Each query is featurised with the
    current statistics, every method predicts it, the database executes it, and only then
    does every method observe its label. ``refresh_stats=False`` keeps the phase-0 histograms
    (stale statistics); ``first_phase`` sets the number of queries of phase 0 (default
    ``per_phase``). Columns: t, phase, drift, method, true_card, pred_card, qerr, and
    infer_s, adapt_s (each method's seconds per query in that phase).
    """
    if not isinstance(methods, dict) or not methods:
        raise ValueError("methods: expected a non-empty dict {name: Method}")
    phases, per_phase = as_positive_int(phases, "phases"), as_positive_int(per_phase, "per_phase")
    first = per_phase if first_phase is None else as_positive_int(first_phase, "first_phase")
    for kind in drift:  # a table may define its own events (FlightsTable: "month")
        as_choice(kind, "drift", tuple(getattr(table, "EVENTS", DRIFTS)))
    severity = as_probability(severity, "severity", high_open=False)
    rng = np.random.default_rng(seed)
    rows, t = [], 0
    hist = table.analyze()
    it = range(phases)
    for phase in (progress(it) if progress else it):
        event = "none"
        if phase > 0:
            event = drift[(phase - 1) % len(drift)]
            table.apply_drift(event, severity)
            if refresh_stats:
                hist = table.analyze()
        n_rows = table.n_rows
        for m in methods.values():
            m.start_phase(table, hist)
        qs = sample_queries(table.snapshot(), first if phase == 0 else per_phase, rng)
        X = featurize(qs, hist, n_rows)
        # the data do not change within a phase, so the counts can run first; every method
        # still predicts query i before it observes the label of query i
        true = table.count_many(qs)
        y = label(true)
        for name, m in methods.items():
            preds, infer, adapt = m.run_phase(X, qs, y)
            card = np.expm1(np.clip(preds, 0.0, 25.0))
            qe = q_error(card, true)
            for i in range(len(qs)):
                rows.append((t + i, phase, event, name, int(true[i]), float(card[i]), float(qe[i]),
                             infer / len(qs), adapt / len(qs)))
        t += len(qs)
    return pd.DataFrame(rows, columns=["t", "phase", "drift", "method", "true_card", "pred_card",
                                       "qerr", "infer_s", "adapt_s"])


def audit(table: DriftingTable, n: int = 200, seed: int = 0) -> dict:
    """``n`` fresh queries on the current table: do the database's counts (one ``COUNT(*)``
    per query, and the batched :meth:`~DriftingTable.count_many` of the streams) equal the NumPy
    mirror's, and how far are its EXPLAIN estimate (DuckDB) and the AVI estimate from them?

    Returns ``exact`` (bool), ``gmq_avi`` and, with DuckDB, ``gmq_explain``,
    ``explain_distinct`` (how many distinct estimates EXPLAIN gave), ``explain_mode`` (the most
    common one), ``explain_mode_share`` (the share of queries that got it) and
    ``explain_mode_of_rows`` (it divided by the table's rows).
    """
    as_instance(table, "table", DriftingTable)
    qs = sample_queries(table.snapshot(), as_positive_int(n, "n"), np.random.default_rng(seed))
    counts = np.array([table.count(q) for q in qs])  # one COUNT(*) per query
    mirror = [q.mask(table.snapshot()).sum() for q in qs]
    # the batched path of the streams must agree with both
    out = {"exact": bool(np.array_equal(counts, mirror)
                         and np.array_equal(table.count_many(qs), counts))}
    hist = table.analyze()
    out["gmq_avi"] = gmq(q_error([avi_estimate(q, hist) for q in qs], counts))
    if table.con.backend == "duckdb":
        explain = np.array([table.engine_estimate(q) for q in qs])
        out["gmq_explain"] = gmq(q_error(explain, counts))
        values, freq = np.unique(explain, return_counts=True)
        out["explain_distinct"] = int(len(values))
        out["explain_mode"] = float(values[freq.argmax()])
        out["explain_mode_share"] = float(freq.max() / len(explain))
        out["explain_mode_of_rows"] = float(values[freq.argmax()] / table.n_rows)
    return out
