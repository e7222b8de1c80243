"""The encoders: a small image encoder f_r (MLP backbone + projection into caption space), LoRA,
the dual encoder of GMAIL (frozen f_r, and f_g = LoRA copy of the backbone + its own projection),
and the ClipCap-lite caption head."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import as_batch
from ..validation import as_positive, as_positive_int

__all__ = ["ImageEncoder", "LoRALinear", "add_lora", "DualEncoder", "CaptionHead", "checksum"]


class ImageEncoder(nn.Module):
    """z = normalize(P(E(x))): an MLP backbone E (64-128-128-64, GELU) and a projection P into the
    caption space (``dim``, 384 for MiniLM)."""

    def __init__(self, dim: int = 384, hidden: int = 128, feat: int = 64):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                      nn.Linear(hidden, feat), nn.GELU())
        self.proj = nn.Linear(feat, as_positive_int(dim, "dim"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.proj(self.backbone(x)), dim=-1)


class LoRALinear(nn.Module):
    """W x + b + (alpha / r) B A x with the base layer frozen, A ~ N(0, 1/r) and B = 0: at
    initialisation the layer equals its base exactly (eq. ``gmail-lora``)."""

    def __init__(self, base: nn.Linear, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ValueError(f"base: expected an nn.Linear, got {type(base).__name__}")
        self.rank = as_positive_int(rank, "rank")
        self.scale = as_positive(alpha, "alpha") / self.rank
        self.base = base.requires_grad_(False)
        w = base.weight
        self.A = nn.Parameter(torch.randn(self.rank, base.in_features, device=w.device) / math.sqrt(self.rank))
        self.B = nn.Parameter(torch.zeros(base.out_features, self.rank, device=w.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T


def add_lora(module: nn.Module, rank: int = 4, alpha: float = 8.0) -> nn.Module:
    """Replace every ``nn.Linear`` inside ``module`` (in place) by a :class:`LoRALinear` around it."""
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, LoRALinear(child, rank, alpha))
        else:
            add_lora(child, rank, alpha)
    return module


class DualEncoder(nn.Module):
    """GMAIL's two image encoders: ``f_r`` (frozen, the "projection for real") and ``f_g``,
    a copy of f_r's backbone with LoRA on every linear layer and its own "projection for
    generated", initialised as a copy of the real one, so that f_g = f_r at step 0. Only
    the LoRA factors and the generated projection are trainable."""

    def __init__(self, f_r: ImageEncoder, rank: int = 4, alpha: float = 8.0):
        super().__init__()
        if not isinstance(f_r, ImageEncoder):
            raise ValueError(f"f_r: expected an ImageEncoder, got {type(f_r).__name__}")
        self.f_r = f_r.requires_grad_(False).eval()
        self.backbone_g = add_lora(copy.deepcopy(f_r.backbone), rank, alpha)
        self.proj_g = copy.deepcopy(f_r.proj).requires_grad_(True)

    def embed_real(self, x: torch.Tensor) -> torch.Tensor:
        """f_r(x), without gradient: the fixed target of the alignment."""
        with torch.no_grad():
            return self.f_r(as_batch(x, "x", dim=64))

    def embed_gen(self, x: torch.Tensor) -> torch.Tensor:
        """f_g(x) = normalize(P_g(E + LoRA)(x))."""
        return self._gen(as_batch(x, "x", dim=64))

    def _gen(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.proj_g(self.backbone_g(x)), dim=-1)

    def trainable(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]


class CaptionHead(nn.Module):
    """The downstream "ClipCap-lite" model: an MLP (dim-hidden-dim) from an image embedding to the
    caption space, with a learnable logit scale initialised at 1/0.07; its caption is the nearest
    of the caption bank."""

    def __init__(self, dim: int = 384, hidden: int = 128):
        super().__init__()
        dim, hidden = as_positive_int(dim, "dim"), as_positive_int(hidden, "hidden")
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))
        self.log_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.net(z), dim=-1)


def checksum(module: nn.Module) -> str:
    """SHA-256 of every parameter and buffer of ``module`` (bytes, in order): equal iff bit-identical."""
    import hashlib

    if not isinstance(module, nn.Module):
        raise ValueError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    h = hashlib.sha256()
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()
