"""The two losses: caption cross-entropy over the caption bank, and GMAIL's generated -> real
alignment (eq. ``gmail-align``, and its multi-positive form for repeated captions, ``gmail-multi``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checks import as_batch, as_ids, as_positive, same_rows

__all__ = ["caption_ce_loss", "gen_real_alignment_loss", "caption_logits"]


def caption_logits(z: torch.Tensor, text_bank: torch.Tensor, logit_scale) -> torch.Tensor:
    """e^s cos(z_i, t_c) for every image i and caption c: (B, C)."""
    z = F.normalize(as_batch(z, "z"), dim=-1)
    text_bank = F.normalize(as_batch(text_bank, "text_bank", dim=z.shape[1]), dim=-1)
    return torch.as_tensor(logit_scale).exp() * z @ text_bank.T


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
    S = F.normalize(z_gen, dim=-1) @ F.normalize(z_real, dim=-1).T / as_positive(tau, "tau")
    if caption_ids is None:
        return F.cross_entropy(S, torch.arange(len(S), device=S.device))
    ids = as_ids(caption_ids, "caption_ids", len(S), n_captions=None)
    pos = (ids[:, None] == ids[None, :]).to(S.dtype)
    log_p = S.log_softmax(dim=1)
    return -((pos * log_p).sum(1) / pos.sum(1)).mean()
