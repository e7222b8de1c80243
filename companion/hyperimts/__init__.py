"""HyperIMTS (Li et al., ICML 2025): forecasting irregular multivariate time series with a hypergraph.

* :mod:`.model` -- the hypergraph, scatter softmax, the HyperIMTS model;
* :mod:`.baselines` -- last value, history mean, GRU-D (padded), mTAN-lite (padded);
* :mod:`.train` -- the shared training loop, metrics and the cost of a training step.

The data (generator, CSV loader, flat and padded batches) live in :mod:`companion.data.imts`.
"""

from companion.hyperimts.baselines import GRUD, MTANLite, history_mean, last_value
from companion.hyperimts.model import (
    HyperedgeAttention,
    Hypergraph,
    HyperIMTS,
    IrregularityAwareAttention,
    build_hypergraph,
    incidence_matrices,
    segment_softmax,
)
from companion.hyperimts.train import evaluate, fit, masked_mse, step_cost

__all__ = ["HyperIMTS", "Hypergraph", "HyperedgeAttention", "IrregularityAwareAttention", "build_hypergraph",
           "incidence_matrices", "segment_softmax", "GRUD", "MTANLite", "last_value", "history_mean", "fit",
           "evaluate", "masked_mse", "step_cost"]
