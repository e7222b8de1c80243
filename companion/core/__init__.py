"""Companion of the chapter ``core`` (CoRE, ICML 2025: cross-city latent space alignment).

CoRE learns region embeddings of two cities, one encoder per city, and aligns the two latent
spaces with two unsupervised losses, so that a regressor fitted on one city's embeddings can
predict socio-economic labels of the other city's regions.

Layout (equation labels are those of the chapter):

* :mod:`.synthetic` -- :func:`make_city_pair`, two synthetic cities sharing one latent world;
* :mod:`.model`     -- the GAT encoder (PyTorch Geometric's GATConv, self-loops included), the losses (eqs. (core-mob), (core-align),
  (core-rec), (core-moment)), the :class:`CoRE` model and :func:`train_core`;
* :mod:`.align`     -- post-hoc baselines: CORAL (eq. (core-coral)) and anchor Procrustes
  (eq. (core-procrustes));
* :mod:`.evaluate`  -- the transfer protocols, the within-city probe of the latent profiles and
  the region-level diagnostics (type agreement, the sign of the aligned axes).

Bad arguments raise ``ValueError`` naming the argument.
"""

from .align import anchor_pairs, coral, procrustes
from .evaluate import (
    chance_type_agreement,
    latent_probe,
    probe_direction_cosine,
    standardise,
    transfer_eval,
    type_agreement,
)
from .model import (
    CoRE,
    attention_scale,
    DenseGAT,
    graph_edges,
    cycle_recon_loss,
    manifold_align_loss,
    mobility_loss,
    moment_gap,
    moment_match_loss,
    fit_pair,
    train_core,
    untrained_pair,
)
from .synthetic import INDICATORS, CityData, make_city_pair

__all__ = [
    "INDICATORS", "CityData", "make_city_pair", "DenseGAT", "graph_edges", "CoRE", "train_core", "fit_pair", "untrained_pair",
    "attention_scale",
    "mobility_loss", "manifold_align_loss", "cycle_recon_loss", "moment_match_loss",
    "coral", "procrustes", "anchor_pairs", "transfer_eval", "type_agreement",
    "chance_type_agreement", "standardise", "moment_gap", "latent_probe", "probe_direction_cosine",
]
