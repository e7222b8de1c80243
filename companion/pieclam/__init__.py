"""Companion of the chapter ``pieclam`` (Zilberg and Levie, ICML 2025).

Layout (equation labels are those of the chapter):

* :mod:`.core`      -- decoders (eq. (pieclam-decoder)), the cone and its projection
  (eq. (pieclam-cone)), the O(|E|) log-likelihood (eq. (pieclam-loglik-fast)), its gradient
  (eq. (pieclam-grad)) and the per-node share of it;
* :mod:`.prior`     -- the RealNVP prior (eq. (pieclam-flow)) and a kernel density baseline;
* :mod:`.fit`       -- projected gradient ascent and the alternating schedule (:func:`fit_clam`);
* :mod:`.data`      -- block models, networkx graphs, planted anomalies, link splits, disjoint
  unions, a known prior over codes;
* :mod:`.baselines` -- the graph autoencoder (GAE) and the degree;
* :mod:`.metrics`   -- AUC, anomaly scores, probability errors, spectra, sampling graphs, the
  "bridge" between two sides, Lorentz boosts.

Graphs are ``edge_index`` tensors (2 x 2E, both directions); codes are float64 tensors;
bad arguments raise ``ValueError`` naming the argument.
"""

from .baselines import GAE, degree_scores, fit_gae, gae_anomaly_scores, gae_probs
from .core import (
    X_MIN,
    as_batch,
    as_edge_index,
    as_omitted,
    check_codes,
    check_pairs,
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
    RingMixture,
    disjoint_union,
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
from .fit import ClamConfig, ClamResult, fit_clam, fit_flow
from .metrics import (
    LorentzMap,
    anomaly_scores,
    bridge_mass,
    edge_density,
    lorentz_boost,
    prob_error,
    prob_matrix,
    rapidity,
    roc_auc,
    roc_curve,
    sample_edges,
    sample_graph,
    side_contrast,
    mean_interval,
    spectral_ratio,
)
from .prior import FittedGaussian, GaussianKDE, RealNVPPrior, clam_split

__all__ = [
    "X_MIN", "as_batch", "as_edge_index", "as_omitted", "check_codes", "check_pairs", "clam_grad", "clam_loglik", "dense_loglik", "edge_logits",
    "edge_probs", "lorentz_diag", "project_cone", "star_loglik", "RealNVPPrior", "GaussianKDE", "FittedGaussian", "mean_interval", "clam_split", "ClamConfig", "ClamResult",
    "fit_clam", "fit_flow", "NAMED_SBMS", "RingMixture", "disjoint_union", "from_networkx", "link_split", "named_sbm", "nx_graph", "plant_contextual",
    "plant_structural", "sbm", "sbm_probs", "to_dense", "undirected_pairs", "GAE", "fit_gae", "gae_probs",
    "gae_anomaly_scores", "degree_scores", "roc_auc", "roc_curve", "anomaly_scores", "prob_matrix", "prob_error",
    "spectral_ratio", "edge_density", "sample_edges", "sample_graph", "side_contrast", "bridge_mass",
    "lorentz_boost", "rapidity", "LorentzMap",
]
