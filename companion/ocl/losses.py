"""The losses of the chapter: OCL's tSP-InfoNCE, SimCLR's NT-Xent and MAE's masked MSE."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from companion.validation import as_finite_tensor, as_nonnegative, as_positive

__all__ = ["tsp_similarity", "ocl_loss", "nt_xent", "mae_loss"]


def _pair(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str]) -> None:
    for t, name in zip((a, b), names):
        as_finite_tensor(t, name, ndim=2)
    if a.shape != b.shape:
        raise ValueError(f"{names[1]}: expected the shape of {names[0]} {tuple(a.shape)}, "
                         f"got {tuple(b.shape)}")
    if a.shape[0] < 2:
        raise ValueError(f"{names[0]}: expected a batch of >= 2 (the other images are the "
                         f"negatives), got {a.shape[0]}")


def tsp_similarity(s: torch.Tensor, kappa: float = 1 / 64) -> torch.Tensor:
    """psi(s) = (1 + s) / (2 (1 + kappa (1 - s))), eq. (ocl-tsp): [-1, 1] -> [0, 1], increasing."""
    as_nonnegative(kappa, "kappa")
    return 0.5 * (1 + s) / (1 + kappa * (1 - s))


def ocl_loss(z_a: torch.Tensor, z_b: torch.Tensor, kappa: float = 1 / 64,
             tau: float = 0.07) -> torch.Tensor:
    """Symmetric InfoNCE on the tSP similarity of the two views' CLS outputs, eq. (ocl-loss).

    ``z_a, z_b`` ``[B, D]``: row i of each is one image; the other B - 1 rows are its negatives.
    No projection head: the CLS outputs are normalised and compared directly.
    """
    _pair(z_a, z_b, ("z_a", "z_b"))
    tau = as_positive(tau, "tau")
    s = F.normalize(z_a, dim=1) @ F.normalize(z_b, dim=1).T
    logits = tsp_similarity(s, kappa) / tau
    labels = torch.arange(len(s), device=s.device)
    return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))


def nt_xent(p1: torch.Tensor, p2: torch.Tensor, tau: float = 0.2) -> torch.Tensor:
    """SimCLR's NT-Xent: each of the 2B projections against the other 2B - 1, cosine / tau."""
    _pair(p1, p2, ("p1", "p2"))
    tau = as_positive(tau, "tau")
    z = F.normalize(torch.cat([p1, p2]), dim=1)
    logits = z @ z.T / tau
    logits = logits.masked_fill(torch.eye(len(z), dtype=torch.bool, device=z.device), -math.inf)
    B = len(p1)
    labels = torch.cat([torch.arange(B, 2 * B), torch.arange(B)]).to(z.device)
    return F.cross_entropy(logits, labels)


def mae_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
             norm_pix: bool = False) -> torch.Tensor:
    """Mean squared error over the masked patches only (``mask`` 1 = hidden, ``[B, L]``).

    ``pred, target`` ``[B, L, P]`` (P pixels per patch); ``norm_pix`` standardises each target
    patch first (MAE's option).
    """
    if pred.dim() != 3 or pred.shape != target.shape:
        raise ValueError(f"target: expected the shape of pred [B, L, P] {tuple(pred.shape)}, "
                         f"got {tuple(target.shape)}")
    if mask.shape != pred.shape[:2]:
        raise ValueError(f"mask: expected [B, L] = {tuple(pred.shape[:2])}, got {tuple(mask.shape)}")
    for t, name in ((pred, "pred"), (target, "target")):
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name}: must be finite, got NaN or inf")
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("mask: expected 0/1 entries (1 = hidden)")
    if not mask.any():
        raise ValueError("mask: expected at least one masked patch, got none")
    if norm_pix:
        target = (target - target.mean(-1, keepdim=True)) / (target.var(-1, keepdim=True) + 1e-6).sqrt()
    per_patch = ((pred - target) ** 2).mean(-1)
    return (per_patch * mask).sum() / mask.sum()
