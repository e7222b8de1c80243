"""OCL (Yang et al., ICML 2025): contrastive learning between two disjoint occluded views of one
image, against SimCLR and MAE at equal FLOPs, on glyphs rendered from matplotlib's fonts.

Modules: :mod:`.glyphs` (the data), :mod:`.vit` (the one encoder), :mod:`.losses`,
:mod:`.methods` (views, augmentations, the methods and their FLOP counts), :mod:`.budget`
(training at a FLOP budget), :mod:`.probe` (frozen-feature probes), :mod:`.train` (the shipped
bank of pre-trained encoders).
"""

from .budget import History, scaled_lr, steps_for_flops, time_steps, train_for_flops
from .glyphs import CHARS, TEST_FONTS, TRAIN_FONTS, list_bundled_fonts, render_glyphs
from .losses import mae_loss, nt_xent, ocl_loss, tsp_similarity
from .methods import (MAE, METHODS, OCL, SimCLR, augment, build_method, count_flops, keep_count,
                      occlusion_views, visible_count)
from .probe import extract, extract_pools, extract_views, few_shot_split, linear_probe
from .vit import TinyViT, sincos_pos_embed_2d

__all__ = ["History", "steps_for_flops", "train_for_flops", "scaled_lr", "time_steps", "CHARS",
           "TEST_FONTS", "TRAIN_FONTS", "list_bundled_fonts", "render_glyphs", "mae_loss",
           "nt_xent", "ocl_loss", "tsp_similarity", "MAE", "METHODS", "OCL", "SimCLR", "augment",
           "build_method", "count_flops", "keep_count", "occlusion_views", "visible_count",
           "extract", "extract_pools", "extract_views", "few_shot_split", "linear_probe",
           "TinyViT", "sincos_pos_embed_2d"]
