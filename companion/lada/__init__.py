"""Companion of the chapter ``lada`` (Luo et al., ICML 2025, "LADA: scalable label-specific CLIP
adapter for continual learning").

LADA keeps the image encoder frozen and appends, after it, a few *memory vectors per class*
(label-indexed, not task-indexed), so no parameter subset has to be selected at test time; the
memory of a finished task is frozen, and *distribution-preserved training* (DPT) draws
pseudo-features of the old classes from per-class Gaussian mixtures so that new parameters are
penalised where they fire on old classes, without replaying any image.

Layout (equation labels are those of the chapter):

* :mod:`.data`     -- glyphs rendered from matplotlib's fonts, scikit-learn's digits, the stream;
* :mod:`.encoder`  -- the frozen encoder E (pre-trained on held-out classes) and feature caching;
* :mod:`.lada`     -- :class:`LabelMemory` (eq. (lada-memory), (lada-sum)), :class:`CosineClassifier`
  and :class:`DPTBank` (eq. (lada-dpt); ``sample(pooled=True)`` is DPT's null, every pseudo-feature
  drawn from one Gaussian of all old features);
* :mod:`.learners` -- FT-seq, NCM, task adapters with a selector, and LADA with its ablations
  (eq. (lada-logits), (lada-loss)), at the official values by default (s = 100, lambda_1 = 16,
  lambda_2 = 4, eta = 64, alpha = beta = 1);
* :mod:`.metrics`  -- the accuracy matrix over the stream, Last, forgetting (eq. (lada-forgetting)),
  task recall and the new-task share.

Bad arguments raise ``ValueError`` naming the argument; predicting before learning raises
``RuntimeError``.
"""

from .data import (FONTS, TASK_CLASSES, TEST_FONTS, TRAIN_FONTS, Task, build_stream, class_names,
                   handwritten_digits, pretraining_set, render_glyphs)
from .encoder import GlyphCNN, cache_features, checksum, extract_features, pretrain_encoder
from .lada import CosineClassifier, DPTBank, LabelMemory
from .learners import NCM, FineTuneSeq, LADALearner, TaskAdapters, class_means, step_seconds, weighted_ce
from .metrics import (StreamResult, average_incremental, forgetting, last, new_task_share, run_stream, summary_table,
                      task_recall)

__all__ = [
    "FONTS", "TASK_CLASSES", "TEST_FONTS", "TRAIN_FONTS", "Task", "build_stream", "class_names",
    "handwritten_digits", "pretraining_set", "render_glyphs", "GlyphCNN", "checksum", "extract_features",
    "pretrain_encoder", "CosineClassifier", "DPTBank", "LabelMemory", "NCM", "FineTuneSeq", "LADALearner",
    "TaskAdapters", "class_means", "step_seconds", "weighted_ce", "StreamResult", "average_incremental", "forgetting", "last",
    "new_task_share", "run_stream", "summary_table", "task_recall", "cache_features",
]

