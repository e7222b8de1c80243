"""Companion of the chapter ``gmail`` (Mo and Yun, ICML 2025, "Generative modality alignment for
generated image learning").

GMAIL treats generated images as a modality of their own: a frozen real encoder f_r, a LoRA copy
f_g with its own projection aligned to it by a generated -> real contrastive loss, and a downstream
model trained on f_r(real) and f_g(generated) together. Layout (equation labels of the chapter):

* :mod:`.data`       -- scikit-learn's digits, P/G/D/T splits, detailed captions (30 ids);
* :mod:`.generator`  -- the PCA-Gaussian generator and its per-digit fingerprint (``gmail-generator``);
* :mod:`.models`     -- f_r, LoRA (``gmail-lora``), the dual encoder, the caption head;
* :mod:`.losses`     -- caption cross-entropy, the alignment loss (``gmail-align``, ``gmail-multi``);
* :mod:`.train`      -- pre-training f_r, naive fine-tuning, GMAIL's alignment stage, the head;
* :mod:`.metrics`    -- paired cosine, domain-classifier accuracy, caption accuracy;
* :mod:`.experiment` -- one seed of the chapter's comparison.

Conventions: images are float32 ``(N, 64)`` in [0, 1] (8x8 flattened), caption ids int64 in
``[0, 30)``, embeddings float32 ``(N, D)``. Bad arguments raise ``ValueError`` naming the argument.
"""

from .data import (DIGIT_NAMES, THICKNESS, Split, Splits, caption_ids, caption_strings, load_digits_splits,
                   thickness, thickness_terciles)
from .experiment import Budget, Experiment
from .generator import FINGERPRINT_SCALE, PCAGaussGenerator, fingerprint
from .losses import caption_ce_loss, caption_logits, gen_real_alignment_loss
from .metrics import caption_accuracy, caption_retrieval, concentration, domain_classifier_accuracy, paired_cosine
from .models import CaptionHead, DualEncoder, ImageEncoder, LoRALinear, add_lora, checksum
from .train import (ALIGN_MODES, METHODS, finetune_naive, pair_partners, pretrain_real_encoder, train_gmail,
                    train_head)

__all__ = [
    "DIGIT_NAMES", "THICKNESS", "Split", "Splits", "caption_ids", "caption_strings", "load_digits_splits",
    "thickness", "thickness_terciles", "Budget", "Experiment", "FINGERPRINT_SCALE", "PCAGaussGenerator",
    "fingerprint", "caption_ce_loss", "caption_logits", "gen_real_alignment_loss", "caption_accuracy",
    "caption_retrieval", "concentration", "domain_classifier_accuracy", "paired_cosine", "CaptionHead", "DualEncoder", "ImageEncoder",
    "LoRALinear", "add_lora", "checksum", "ALIGN_MODES", "METHODS", "finetune_naive", "pair_partners",
    "pretrain_real_encoder", "train_gmail", "train_head",
]
