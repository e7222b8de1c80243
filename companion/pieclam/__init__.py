"""Companion of the chapter ``pieclam`` (Zilberg and Levie, ICML 2025).

Layout (equation labels are those of the chapter):

* :mod:`.core`      -- decoders (eq. (pieclam-decoder)), the cone and its projection
  (eq. (pieclam-cone)), the O(|E|) log-likelihood (eq. (pieclam-loglik-fast)), its gradient
  (eq. (pieclam-grad)) and the per-node share of it;
* :mod:`.prior`     -- the RealNVP prior (eq. (pieclam-flow));
* :mod:`.fit`       -- projected gradient ascent and the alternating schedule (:func:`fit_clam`);
* :mod:`.data`      -- block models, networkx graphs, planted anomalies, link splits;
* :mod:`.baselines` -- the graph autoencoder (GAE) and the degree;
* :mod:`.metrics`   -- AUC, anomaly scores, probability errors, spectra, sampling graphs.

Graphs are ``edge_index`` tensors (2 x 2E, both directions); codes are float64 tensors;
bad arguments raise ``ValueError`` naming the argument.
"""

from .baselines import GAE, degree_scores, fit_gae, gae_anomaly_scores, gae_probs
from .core import (
    X_MIN,
    as_edge_index,
    check_codes,
    clam_grad,
    clam_loglik,
    dense_loglik,
    edge_logits,
    edge_probs,
    lorentz_diag,
    project_cone,
    star_loglik,
)
from .data import (
    NAMED_SBMS,
    from_networkx,
    link_split,
    named_sbm,
    nx_graph,
    plant_contextual,
    plant_structural,
    sbm,
    sbm_probs,
    to_dense,
    undirected_pairs,
)
from .fit import ClamConfig, ClamResult, fit_clam
from .metrics import (
    anomaly_scores,
    edge_density,
    prob_error,
    prob_matrix,
    roc_auc,
    roc_curve,
    sample_graph,
    spectral_ratio,
)
from .prior import RealNVPPrior

__all__ = [
    "X_MIN", "as_edge_index", "check_codes", "clam_grad", "clam_loglik", "dense_loglik", "edge_logits",
    "edge_probs", "lorentz_diag", "project_cone", "star_loglik", "RealNVPPrior", "ClamConfig", "ClamResult",
    "fit_clam", "NAMED_SBMS", "from_networkx", "link_split", "named_sbm", "nx_graph", "plant_contextual",
    "plant_structural", "sbm", "sbm_probs", "to_dense", "undirected_pairs", "GAE", "fit_gae", "gae_probs",
    "gae_anomaly_scores", "degree_scores", "roc_auc", "roc_curve", "anomaly_scores", "prob_matrix", "prob_error",
    "spectral_ratio", "edge_density", "sample_graph",
]
