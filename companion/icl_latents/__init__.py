"""ICL task latents: does inferring the right latent make in-context learning generalise?

Mittal, Elmoznino, Gagnon, Bhardwaj, Lajoie and Sridhar (ICML 2025) compare a standard
("implicit") transformer that reads a context of ``(x, y)`` pairs and answers queries
directly with an "explicit" model whose queries see the context only through one vector
``z`` (a bottleneck), followed by a learned or a known-form prediction function.

* :mod:`.tasks` -- task generators with a known latent and in/out-of-distribution queries;
* :mod:`.models` -- the implicit transformer, the context encoder, the predictors, the masks;
* :mod:`.train` -- the training loop on fresh tasks, the evaluation, the checkpoint entry point;
* :mod:`.probe` -- linear (ridge) probes of the latent, from ``z`` and from the raw context;
* :mod:`.reference` -- the Bayes-optimal predictor of linear-in-features regression.

Shapes are batch-first: ``x_c (B, n, dx)``, ``y_c (B, n, dy)``, ``x_q (B, m, dx)``,
predictions ``(B, m, dy)``, latents ``w (B, P)`` flattened.
"""

from companion.checkpoints import lazy_exports

from .models import (
    ContextEncoder,
    ExplicitModel,
    ImplicitTransformer,
    LinearReadoutPredictor,
    MLPPredictor,
    SinusoidReadoutPredictor,
    TransformerPredictor,
    context_mask,
    implicit_mask,
    predictor_mask,
)
from .probe import (collect_latents, linear_probe, linear_probe_r2, raw_context_probe,
                    raw_context_probe_r2)
from .reference import bayes_feature_predict, bayes_linreg_predict
from .tasks import QUERY_STYLES, LinearRegressionTask, SinusoidTask, TaskBatch

__all__ = [
    "TaskBatch", "LinearRegressionTask", "SinusoidTask", "QUERY_STYLES",
    "ImplicitTransformer", "ContextEncoder", "TransformerPredictor", "MLPPredictor",
    "LinearReadoutPredictor", "SinusoidReadoutPredictor", "ExplicitModel",
    "implicit_mask", "context_mask", "predictor_mask",
    "train_icl", "predict", "evaluate_mse",
    "collect_latents", "linear_probe", "linear_probe_r2", "raw_context_probe",
    "raw_context_probe_r2",
    "bayes_linreg_predict", "bayes_feature_predict",
]

# the training entry point is imported on first use (see companion.checkpoints.lazy_exports)
__getattr__ = lazy_exports(__name__, "train", ("train_icl", "predict", "evaluate_mse"))
