"""HyperIMTS (Li et al., ICML 2025): forecasting irregular multivariate time series with a hypergraph.

* :mod:`.model` -- the hypergraph, scatter softmax, the node attention, the HyperIMTS model;
* :mod:`.baselines` -- last value, history mean, GRU-D and mTAN-lite (padded), GraFITi (bipartite graph);
* :mod:`.train` -- the shared training loop and metrics, the chapter's models and checkpoints;
* :mod:`.cost` -- wall time and peak memory of a training step;
* :mod:`.clinical` -- the pbcseq clinic visits (real irregular lab series) and the models trained on them.

The data (generator, CSV loader, flat and padded batches) live in :mod:`companion.data.imts`.
"""

from companion.checkpoints import lazy_exports
from companion.hyperimts.baselines import GRUD, GraFITi, MTANLite, history_mean, last_value
from companion.hyperimts.cost import PeakMemory, step_cost
from companion.hyperimts.model import (
    HyperedgeAttention,
    Hypergraph,
    HyperIMTS,
    IrregularityAwareAttention,
    NodeAttention,
    build_hypergraph,
    incidence_matrices,
    GATES,
    masked_mse,
    segment_softmax,
)

__all__ = ["HyperIMTS", "Hypergraph", "HyperedgeAttention", "NodeAttention", "IrregularityAwareAttention",
           "build_hypergraph", "incidence_matrices", "segment_softmax", "GRUD", "MTANLite", "GraFITi",
           "last_value", "history_mean", "fit", "evaluate", "masked_mse", "step_cost", "PeakMemory", "MODELS",
           "RECIPES", "make_splits", "load_or_train", "trained", "model_key", "pooled_mse", "mean_ci",
           "evaluate_all", "model_seeds", "lr_factor", "data_seed", "GATES", "without_history_of", "build_models"]

# the training entry point is imported on first use (see companion.checkpoints.lazy_exports)
__getattr__ = lazy_exports(__name__, "train", ("MODELS", "RECIPES", "evaluate", "evaluate_all", "fit",
                                               "load_or_train", "make_splits", "mean_ci", "model_key",
                                               "pooled_mse", "trained", "model_seeds", "lr_factor", "data_seed",
                                               "without_history_of", "build_models"))
