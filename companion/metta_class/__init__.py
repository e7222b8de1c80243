"""Companion of the chapter ``metta-class`` (Metta and Babu, ICML 2025, "Discovering a zero").

A *Metta-Class* (the zero vector of the paper's vector space of classes) is an extra label given
to points drawn uniformly from the input universe U. A network trained with it learns where the
real classes live instead of partitioning all of U among them.

Layout (equation labels are those of the chapter):

* :mod:`.data`     -- the scaled 8x8 digits, the 2-D blobs (and overlapping ones), and inputs the nets
  never see: glyphs of other fonts, letters, strokes, interpolations, turned digits;
* :mod:`.sampler`  -- :class:`MettaSampler`, uniform samples of U (eq. (metta-data));
* :mod:`.train`    -- MLPs, the Metta net, the standard net and unary nets (eq. (metta-loss)),
  unary margins (eq. (metta-margin)); the official-recipe checkpoint (``python -m
  companion.metta_class.train``);
* :mod:`.metrics`  -- occupancy (eq. (metta-occupancy)), purity (eq. (metta-purity)), AUROC, the
  max-softmax and Gaussian-density baselines;
* :mod:`.setops`   -- membership, union (eq. (metta-union)), complement, agreement, overlap;
* :mod:`.generate` -- clamped gradient ascent from noise (eq. (metta-ascent)).

Conventions: inputs are float tensors ``(N, d)`` already scaled into U; real labels are
``0..K-1`` and the Metta label is always ``K`` (a unary net has K = 1: class 0, Metta 1).
Bad arguments raise ``ValueError`` naming the argument.
"""

from .data import (
    FONTS,
    Dataset,
    blobs,
    digits,
    interpolate_classes,
    overlapping_blobs,
    quarter_turn,
    random_strokes,
    render_glyphs,
    shuffle_pixels,
)
from .generate import ascend
from .metrics import (
    GaussianDensity,
    auroc,
    max_softmax,
    metta_probability,
    occupancy_factor,
    predict,
    purity_factors,
)
from .sampler import MettaSampler
from .setops import agreement, complement, membership, overlap_rate, union
from companion.checkpoints import lazy_exports

# .train is also the entry point ``python -m companion.metta_class.train``: imported on first use
_TRAIN = ["MLPEnsemble", "mlp", "train_ensemble", "train_metta_nets", "train_standard_nets", "train_unary_nets",
          "unary_margin", "steps_per_epoch", "train_official", "load_official_nets", "official_nets", "RECIPES",
          "CHECKPOINTS"]
__getattr__ = lazy_exports(__name__, "train", _TRAIN)

__all__ = [
    "FONTS", "Dataset", "blobs", "digits", "overlapping_blobs", "shuffle_pixels", "render_glyphs", "random_strokes",
    "interpolate_classes", "quarter_turn", "ascend", "GaussianDensity", "auroc", "max_softmax",
    "metta_probability", "occupancy_factor", "predict", "purity_factors", "MettaSampler", "agreement",
    "complement", "membership", "overlap_rate", "union", *_TRAIN,
]
