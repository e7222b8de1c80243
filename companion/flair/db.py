"""A real embedded database whose data drift, the range queries run against it, and the
database-side estimates (equi-depth histograms with attribute-value independence, EXPLAIN).

The table ``t(c0, c1, c2, c3)`` holds integers in ``[0, 999]`` drawn from a *concept*: a
three-component Gaussian mixture whose components have strong, rank-two correlations, so that
the product of per-column selectivities (what an optimiser assumes) is far from the truth.
Every true cardinality is a ``COUNT(*)`` executed by the database (DuckDB, or the standard
library's sqlite3 when DuckDB cannot be imported); a NumPy mirror of the table, re-read after
each drift event, serves only to draw anchor rows and to cross-check counts.
"""

from __future__ import annotations

import re
import sqlite3
import warnings
from dataclasses import dataclass

import numpy as np

from companion.validation import as_choice, as_float_array, as_generator, as_positive_int, as_probability

__all__ = ["N_COLS", "MAX_VALUE", "Connection", "connect", "sample_concept", "draw_rows",
           "DriftingTable", "RangeQuery", "to_sql", "sample_queries", "parse_explain",
           "ColumnHistograms", "avi_estimate"]

N_COLS, MAX_VALUE = 4, 999
DRIFTS = ("insert", "delete", "update")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EST = re.compile(r"~\s*([\d,]+)\s*rows|EC:\s*([\d,]+)", re.IGNORECASE)


class Connection:
    """A database connection and the name of its backend (``"duckdb"`` or ``"sqlite"``);
    ``fallback`` is True when DuckDB was asked for (``"auto"``) but could not be imported."""

    def __init__(self, raw, backend: str, fallback: bool = False):
        backend = as_choice(backend, "backend", ("duckdb", "sqlite"))
        self.raw, self.backend, self.fallback = raw, backend, bool(fallback)

    @property
    def banner(self) -> str:
        """One line for a page's first output: the backend, and loudly so when it fell back."""
        if self.fallback:
            return ("database backend: sqlite3 (FALLBACK: DuckDB could not be imported; counts "
                    "run in sqlite3 and DuckDB's EXPLAIN estimate is left out)")
        return f"database backend: {self.backend}"

    def execute(self, sql: str, params: list | tuple = ()) -> list[tuple]:
        """Run one statement with bound parameters and return its rows."""
        cur = self.raw.execute(sql, list(params))
        return cur.fetchall() if cur.description else []


def connect(backend: str = "auto") -> Connection:
    """An in-memory database: DuckDB, or sqlite3 when ``backend="sqlite"``.

    With ``"auto"``, a missing DuckDB falls back to sqlite3 *loudly*: a ``RuntimeWarning`` is
    issued and the connection's ``fallback`` flag and ``banner`` say so. ``"duckdb"`` raises
    ``ImportError`` instead of falling back (what CI asks for).
    """
    as_choice(backend, "backend", ("auto", "duckdb", "sqlite"))
    if backend != "sqlite":
        try:
            import duckdb
        except ImportError as err:
            if backend == "duckdb":
                raise ImportError("backend: 'duckdb' was asked for but duckdb cannot be imported "
                                  "(pip install duckdb)") from err
            warnings.warn("connect: DuckDB cannot be imported; falling back to sqlite3 (no "
                          "EXPLAIN estimates)", RuntimeWarning, stacklevel=2)
            return Connection(sqlite3.connect(":memory:"), "sqlite", fallback=True)
        raw = duckdb.connect(":memory:")
        raw.execute("SET threads = 1")  # a tiny table: one thread, no contention
        return Connection(raw, "duckdb")
    return Connection(sqlite3.connect(":memory:"), "sqlite")


# --- concepts: correlated Gaussian mixtures on [0, 999]^4 ------------------------------------

def sample_concept(rng: np.random.Generator, n_components: int = 3) -> dict:
    """A random concept: weights pi ~ Dir(2), means ~ U[-1.2, 1.2]^4, covariances D R D.

    R is the correlation matrix of A A^T + 0.05 I with A ~ N(0, 1)^{4x2} (two dominant
    directions, hence strong pairwise correlations), D = diag(U[0.25, 0.6]).
    """
    rng = as_generator(rng)
    as_positive_int(n_components, "n_components")
    covs = []
    for _ in range(n_components):
        a = rng.standard_normal((N_COLS, 2))
        s = a @ a.T + 0.05 * np.eye(N_COLS)
        r = s / np.sqrt(np.outer(np.diag(s), np.diag(s)))
        d = np.diag(rng.uniform(0.25, 0.6, N_COLS))
        covs.append(d @ r @ d)
    return dict(weights=rng.dirichlet(2.0 * np.ones(n_components)),
                means=rng.uniform(-1.2, 1.2, (n_components, N_COLS)), covs=np.stack(covs))


def draw_rows(concept: dict, n: int, rng: np.random.Generator, flip: bool = False) -> np.ndarray:
    """``n`` rows of a concept, ``c = clip(round(500 + 300 z), 0, 999)``; ``flip`` negates z_0
    (which flips the sign of every correlation of c0)."""
    rng = as_generator(rng)
    n = as_positive_int(n, "n")
    if not isinstance(concept, dict) or "weights" not in concept:
        raise ValueError(f"concept: expected a concept from sample_concept (a dict), got {type(concept).__name__}")
    comp = rng.choice(len(concept["weights"]), size=n, p=concept["weights"])
    z = np.empty((n, N_COLS))
    for g in range(len(concept["weights"])):
        idx = np.flatnonzero(comp == g)
        z[idx] = rng.multivariate_normal(concept["means"][g], concept["covs"][g], size=idx.size)
    if flip:
        z[:, 0] = -z[:, 0]
    return np.clip(np.round(500 + 300 * z), 0, MAX_VALUE).astype(np.int64)


# --- range queries ------------------------------------------------------------------------

@dataclass(frozen=True)
class RangeQuery:
    """A conjunction of range predicates ``lo[j] <= c_{cols[j]} <= hi[j]``."""

    cols: tuple[int, ...]
    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self):
        if not isinstance(self.cols, (tuple, list, np.ndarray)):
            raise ValueError(f"cols: expected a tuple of column indices, got {type(self.cols).__name__}")
        cols = tuple(as_positive_int(c, "cols", minimum=0) for c in self.cols)  # 0.5 is not column 0
        if not cols or len(set(cols)) != len(cols) or min(cols) < 0 or max(cols) >= N_COLS:
            raise ValueError(f"cols: expected distinct column indices in [0, {N_COLS - 1}], got {self.cols}")
        lo, hi = _bound(self.lo, "lo"), _bound(self.hi, "hi")
        if lo.shape != (len(cols),) or hi.shape != (len(cols),):
            raise ValueError(f"lo: expected lo and hi of shape ({len(cols)},), got {lo.shape}, {hi.shape}")
        if np.any(lo > hi):
            raise ValueError(f"lo: expected lo <= hi for every predicate, got lo {lo}, hi {hi}")
        object.__setattr__(self, "cols", cols)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def bounds(self) -> np.ndarray:
        """``[N_COLS, 2]`` bounds, an unconstrained column spanning ``[0, 999]``."""
        b = np.tile([0, MAX_VALUE], (N_COLS, 1))
        b[list(self.cols), 0], b[list(self.cols), 1] = self.lo, self.hi
        return b

    def mask(self, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` ``[N, 4]`` satisfy the query (the NumPy oracle of ``COUNT(*)``)."""
        keep = np.ones(len(rows), dtype=bool)
        for c, lo, hi in zip(self.cols, self.lo, self.hi):
            keep &= (rows[:, c] >= lo) & (rows[:, c] <= hi)
        return keep


def _bound(x, name: str) -> np.ndarray:
    """Range bounds as int64, refusing NaN, inf and fractional values (which int64 would wrap or
    truncate: NaN becomes INT64_MIN, 2.7 becomes 2)."""
    arr = np.asarray(x)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ValueError(f"{name}: expected integer bounds, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        as_float_array(arr, name)  # NaN or inf bounds
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name}: bounds must be integers (the columns hold integers), got {arr}")
    return arr.astype(np.int64)


def _table_name(table: str) -> str:
    if not isinstance(table, str) or not _IDENT.match(table):
        raise ValueError(f"table: expected an SQL identifier such as 't', got {table!r}")
    return table


def to_sql(q: RangeQuery, table: str = "t", select: str = "COUNT(*)") -> tuple[str, list[int]]:
    """The query as SQL with bound parameters: ``SELECT COUNT(*) FROM t WHERE c0 BETWEEN ? AND ?``."""
    if not isinstance(q, RangeQuery):
        raise ValueError(f"q: expected a RangeQuery, got {type(q).__name__}")
    where = " AND ".join(f"c{c} BETWEEN ? AND ?" for c in q.cols)
    params = [int(v) for pair in zip(q.lo, q.hi) for v in pair]
    return f"SELECT {select} FROM {_table_name(table)} WHERE {where}", params


def sample_queries(snapshot: np.ndarray, n: int, rng: np.random.Generator) -> list[RangeQuery]:
    """``n`` range queries around anchor rows of the current table.

    k ~ {1, 2, 3, 4} with probabilities (0.1, 0.3, 0.3, 0.3) columns without replacement;
    width w = round(1000 LogUniform(0.02, 0.6)); lo = clip(r_c - U w, 0, 999), hi = min(999, lo + w).
    """
    snapshot = _rows(snapshot, "snapshot")
    n, rng = as_positive_int(n, "n"), as_generator(rng)
    out = []
    for _ in range(n):
        k = rng.choice([1, 2, 3, 4], p=[0.1, 0.3, 0.3, 0.3])
        cols = tuple(sorted(rng.choice(N_COLS, size=k, replace=False)))
        anchor = snapshot[rng.integers(len(snapshot))]
        w = np.round(1000 * np.exp(rng.uniform(np.log(0.02), np.log(0.6), k)))
        lo = np.clip(np.round(anchor[list(cols)] - rng.uniform(0, 1, k) * w), 0, MAX_VALUE)
        out.append(RangeQuery(cols, lo, np.minimum(MAX_VALUE, lo + w)))
    return out


def _rows(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 2 or arr.shape[1] != N_COLS or len(arr) == 0:
        raise ValueError(f"{name}: expected a non-empty [N, {N_COLS}] array, got shape {arr.shape}")
    return arr


def parse_explain(text: str) -> float | None:
    """The first row estimate in an EXPLAIN plan (``~1,234 rows``, ``~1234 Rows``, ``EC: 1234``)."""
    if not isinstance(text, str):
        raise ValueError(f"text: expected the plan as a string, got {type(text).__name__}")
    m = _EST.search(text)
    return None if m is None else float((m.group(1) or m.group(2)).replace(",", ""))


# --- the drifting table -------------------------------------------------------------------

class DriftingTable:
    """Table ``name(c0..c3)`` in ``con``, filled with ``n_rows`` rows of a random concept.

    Two tables with the same ``seed`` hold the same rows; ``drift_seed`` varies the drift events.

    :meth:`apply_drift` changes the data as a workload of inserts, deletes or updates would;
    :meth:`count` runs the real ``COUNT(*)``; :meth:`analyze` plays the database's ANALYZE.
    """

    def __init__(self, con: Connection, n_rows: int, seed: int, name: str = "t",
                 drift_seed: int | None = None):
        if not isinstance(con, Connection):
            raise ValueError(f"con: expected a Connection from connect(), got {type(con).__name__}")
        self.con, self.name = con, _table_name(name)
        self.rng = np.random.default_rng(seed)
        # the initial data depend on ``seed`` only; the drift events on (seed, drift_seed)
        self.drift_rng = self.rng if drift_seed is None else np.random.default_rng([seed, drift_seed])
        cols = ", ".join(f"c{c} INTEGER" for c in range(N_COLS))
        con.execute(f"CREATE TABLE {self.name} ({cols})")
        self._insert(draw_rows(sample_concept(self.rng), as_positive_int(n_rows, "n_rows"), self.rng))
        if con.backend == "sqlite":  # without indexes sqlite scans the table for every query
            for c in range(N_COLS):
                con.execute(f"CREATE INDEX {self.name}_c{c} ON {self.name}(c{c})")
        self.refresh()

    def _insert(self, rows: np.ndarray) -> None:
        if self.con.backend == "duckdb":
            import pandas as pd

            frame = pd.DataFrame(rows.astype(np.int32), columns=[f"c{c}" for c in range(N_COLS)])
            self.con.raw.register("new_rows", frame)
            self.con.execute(f"INSERT INTO {self.name} SELECT * FROM new_rows")
            self.con.raw.unregister("new_rows")
        else:
            self.con.raw.executemany(f"INSERT INTO {self.name} VALUES (?, ?, ?, ?)",
                                     rows.tolist())

    def refresh(self) -> np.ndarray:
        """Re-read the NumPy mirror of the table (``SELECT *``)."""
        cols = ", ".join(f"c{c}" for c in range(N_COLS))
        self.mirror = np.asarray(self.con.execute(f"SELECT {cols} FROM {self.name}"),
                                 dtype=np.int64).reshape(-1, N_COLS)
        return self.mirror

    def snapshot(self) -> np.ndarray:
        """The table's rows ``[N, 4]`` as of the last drift event."""
        return self.mirror

    @property
    def n_rows(self) -> int:
        return int(self.con.execute(f"SELECT COUNT(*) FROM {self.name}")[0][0])

    def apply_drift(self, kind: str, severity: float) -> int:
        """One drift event touching about ``severity`` x N rows; returns the rows touched.

        ``insert``: rows of a fresh concept with the sign of c0's correlations flipped;
        ``delete``: a band of one column's values holding that share of rows;
        ``update``: for a random pair of columns (a, b), ``c_b = (c_b + 350) % 1000`` where
        ``c_a`` is below its ``severity`` quantile (which rewires how c_b depends on c_a).
        """
        as_choice(kind, "kind", DRIFTS)
        severity = as_probability(severity, "severity", high_open=False)
        n = len(self.mirror)
        k = max(1, int(round(severity * n)))
        if kind == "delete" and k >= n:
            raise ValueError(f"severity: a delete of {k} of the {n} rows would empty the table; "
                             f"expected severity < {(n - 0.5) / n:.4g} for kind='delete', got {severity}")
        if kind == "insert":
            self._insert(draw_rows(sample_concept(self.drift_rng), k, self.drift_rng, flip=True))
            touched = k
        elif kind == "delete":
            c = int(self.drift_rng.integers(N_COLS))
            values = np.sort(self.mirror[:, c])
            start = int(self.drift_rng.integers(0, n - k + 1))
            lo, hi = int(values[start]), int(values[start + k - 1])
            before = n
            self.con.execute(f"DELETE FROM {self.name} WHERE c{c} BETWEEN ? AND ?", [lo, hi])
            touched = before - self.n_rows
        else:
            a, b = (int(v) for v in self.drift_rng.choice(N_COLS, size=2, replace=False))
            theta = int(np.quantile(self.mirror[:, a], severity))
            touched = int(self.con.execute(f"SELECT COUNT(*) FROM {self.name} WHERE c{a} < ?",
                                           [theta])[0][0])
            self.con.execute(f"UPDATE {self.name} SET c{b} = (c{b} + 350) % 1000 WHERE c{a} < ?",
                             [theta])
            self.last_update = dict(a=a, b=b, theta=theta)  # what the event did (for tests)
        self.refresh()
        return touched

    def count(self, q: RangeQuery) -> int:
        """The true cardinality: ``COUNT(*)`` executed by the database."""
        sql, params = to_sql(q, self.name)
        return int(self.con.execute(sql, params)[0][0])

    def count_many(self, qs: list[RangeQuery]) -> np.ndarray:
        """The true cardinalities of many queries, executed by the database.

        DuckDB runs them as one statement: the queries' bounds are a table and
        ``SELECT q.id, COUNT(t.c0) FROM bounds q LEFT JOIN t ON t.c0 BETWEEN q.lo0 AND q.hi0
        AND ... GROUP BY q.id`` counts the rows of every query at once (an unconstrained
        column spans [0, 999], which holds every value). sqlite3 runs one ``COUNT(*)`` each.
        """
        if not isinstance(qs, (list, tuple)) or not all(isinstance(q, RangeQuery) for q in qs):
            raise ValueError("qs: expected a list of RangeQuery")
        if not qs:
            return np.zeros(0, dtype=np.int64)
        if self.con.backend != "duckdb":
            return np.array([self.count(q) for q in qs], dtype=np.int64)
        import pandas as pd

        b = np.stack([q.bounds() for q in qs])
        frame = pd.DataFrame({"qid": np.arange(len(qs))})
        for c in range(N_COLS):
            frame[f"lo{c}"], frame[f"hi{c}"] = b[:, c, 0], b[:, c, 1]
        on = " AND ".join(f"t.c{c} BETWEEN q.lo{c} AND q.hi{c}" for c in range(N_COLS))
        self.con.raw.register("query_bounds", frame)
        try:
            rows = self.con.execute(f"SELECT q.qid, COUNT(t.c0) FROM query_bounds q LEFT JOIN "
                                    f"{self.name} t ON {on} GROUP BY q.qid ORDER BY q.qid")
        finally:
            self.con.raw.unregister("query_bounds")
        return np.array([r[1] for r in rows], dtype=np.int64)

    def engine_estimate(self, q: RangeQuery) -> float | None:
        """The database's own row estimate from ``EXPLAIN SELECT *`` (DuckDB), ``None`` in sqlite,
        whose Python API exposes no per-query estimate."""
        if self.con.backend != "duckdb":
            return None
        sql, params = to_sql(q, self.name, select="*")
        rows = self.con.execute("EXPLAIN " + sql, params)
        return parse_explain("\n".join(str(r[-1]) for r in rows))

    def analyze(self, bins: int = 64) -> "ColumnHistograms":
        """Per-column equi-depth histograms of the current table (the database's ANALYZE)."""
        return ColumnHistograms.fit(self.mirror, bins=bins)


# --- the optimiser's estimate: histograms and attribute-value independence -----------------

@dataclass(frozen=True)
class ColumnHistograms:
    """Equi-depth histograms: ``edges[c]`` are the ``bins + 1`` quantiles of column c."""

    edges: np.ndarray
    n_rows: int

    @classmethod
    def fit(cls, data: np.ndarray, bins: int = 64) -> "ColumnHistograms":
        data = _rows(data, "data")
        if not np.issubdtype(data.dtype, np.number) or data.dtype == np.bool_:
            raise ValueError(f"data: expected numeric rows, got dtype {data.dtype}")
        as_float_array(data, "data")  # NaN or inf rows
        bins = as_positive_int(bins, "bins")
        levels = np.linspace(0, 1, bins + 1)
        return cls(np.stack([np.quantile(data[:, c], levels) for c in range(N_COLS)]), len(data))

    def cdf(self, c: int, v) -> np.ndarray:
        """Share of column c's values below ``v``, linear within buckets; the outer edges are
        widened by half a unit because the values are integers (P(X <= v) is cdf(v + 0.5))."""
        xs = self.edges[c].astype(float).copy()
        xs[0], xs[-1] = xs[0] - 0.5, xs[-1] + 0.5
        return np.interp(v, xs, np.linspace(0, 1, len(xs)))

    def selectivity(self, q: RangeQuery) -> np.ndarray:
        """Per-column selectivities ``[4]`` of the query (1 for an unconstrained column)."""
        b = q.bounds()
        return np.array([self.cdf(c, b[c, 1] + 0.5) - self.cdf(c, b[c, 0] - 0.5)
                         for c in range(N_COLS)]).clip(0, 1)


def avi_estimate(q: RangeQuery, hist: ColumnHistograms, n_rows: int | None = None) -> float:
    """Attribute-value independence: ``N x prod_c sel_c(q)`` (eq. flair-avi)."""
    n = hist.n_rows if n_rows is None else as_positive_int(n_rows, "n_rows", minimum=0)
    return float(n * np.prod(hist.selectivity(q)))
