"""The two losses: caption cross-entropy over the caption bank, and GMAIL's generated -> real
alignment (eq. ``gmail-align``, and its multi-positive form for repeated captions, ``gmail-multi``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checks import as_batch, as_ids, as_scalar, nonzero_rows, same_rows
from ..validation import as_positive

__all__ = ["caption_ce_loss", "gen_real_alignment_loss", "caption_logits"]


def _logits(z: torch.Tensor, text_bank: torch.Tensor, logit_scale) -> torch.Tensor:
    return torch.as_tensor(logit_scale).exp() * F.normalize(z, dim=-1) @ F.normalize(text_bank, dim=-1).T


def caption_logits(z: torch.Tensor, text_bank: torch.Tensor, logit_scale) -> torch.Tensor:
    """e^s cos(z_i, t_c) for every image i and caption c: (B, C)."""
    z = as_batch(z, "z")
    text_bank = as_batch(text_bank, "text_bank", dim=z.shape[1])
    return _logits(z, text_bank, as_scalar(logit_scale, "logit_scale"))


def _caption_ce(z, text_bank, ids, logit_scale) -> torch.Tensor:
    """:func:`caption_ce_loss` without the argument checks, for training loops."""
    return F.cross_entropy(_logits(z, text_bank, logit_scale), ids)


def caption_ce_loss(z: torch.Tensor, text_bank: torch.Tensor, ids: torch.Tensor, logit_scale) -> torch.Tensor:
    """Cross-entropy of the true caption among the bank (CLIP's image -> text loss, text locked)."""
    logits = caption_logits(z, text_bank, logit_scale)
    return F.cross_entropy(logits, as_ids(ids, "ids", len(z), n_captions=len(text_bank)))


def gen_real_alignment_loss(z_gen: torch.Tensor, z_real: torch.Tensor, caption_ids: torch.Tensor | None = None,
                            tau: float = 0.07) -> torch.Tensor:
    """Generated -> real InfoNCE with S_ij = cos(z_gen_i, z_real_j) / tau.

    ``caption_ids=None`` is eq. (gmail-align): the positive of row i is column i. With ids, every
    real item of the batch with row i's caption is a positive and the loss averages
    -log softmax(S_i)_j over them, eq. (gmail-multi); with unique ids the two coincide.
    Inputs are normalised here, so the loss does not depend on their scale.
    """
    z_gen, z_real = as_batch(z_gen, "z_gen"), as_batch(z_real, "z_real")
    same_rows(z_gen, z_real, "z_gen, z_real")
    nonzero_rows(z_gen, "z_gen")
    nonzero_rows(z_real, "z_real")
    ids = None if caption_ids is None else as_ids(caption_ids, "caption_ids", len(z_gen), n_captions=None)
    return _alignment(z_gen, z_real, ids, as_positive(tau, "tau"))


def _alignment(z_gen, z_real, ids, tau: float) -> torch.Tensor:
    """:func:`gen_real_alignment_loss` without the argument checks, for training loops."""
    S = F.normalize(z_gen, dim=-1) @ F.normalize(z_real, dim=-1).T / tau
    if ids is None:
        return F.cross_entropy(S, torch.arange(len(S), device=S.device))
    pos = (ids[:, None] == ids[None, :]).to(S.dtype)
    log_p = S.log_softmax(dim=1)
    return -((pos * log_p).sum(1) / pos.sum(1)).mean()
