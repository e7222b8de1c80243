"""The pre-training methods on one :class:`TinyViT`: OCL, SimCLR (with and without augmentation)
and MAE. Each has ``loss(x, generator)`` (one training step's objective on a batch of images)
and ``flops_per_step(batch)`` (forward and backward, counted by torch's FLOP counter)."""

from __future__ import annotations

import math
from fractions import Fraction

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from companion.validation import as_positive_int, as_real

from .losses import mae_loss, nt_xent, ocl_loss
from .vit import Block, TinyViT, check_images, sincos_pos_embed_2d

__all__ = ["occlusion_views", "keep_count", "visible_count", "augment", "count_flops", "OCL", "SimCLR", "MAE",
           "build_method", "METHODS"]


def _check_ratio(mask_ratio) -> Fraction:
    return Fraction(repr(as_real(mask_ratio, "mask_ratio", low=0, high=1, high_open=True)))


def visible_count(L: int, mask_ratio: float) -> int:
    """floor(L (1 - r)) in exact arithmetic: the tokens MAE's encoder sees (at least one)."""
    L = as_positive_int(L, "L")
    n = math.floor(L * (1 - _check_ratio(mask_ratio)))
    if n < 1:
        raise ValueError(f"mask_ratio: {mask_ratio} leaves no visible token of {L}")
    return n


def keep_count(L: int, mask_ratio: float) -> int:
    """K = 2 floor(floor(L (1 - r)) / 2): the surviving tokens, rounded down to an even count.

    The floor is taken in exact arithmetic on the ratio as written (``0.9`` is nine tenths), not
    on the binary float ``L * (1 - r)``, which can fall just below an integer (at L = 100,
    r = 0.9 it is 9.999..., and a float floor would keep 8 tokens instead of 10)."""
    L = as_positive_int(L, "L")
    K = math.floor(L * (1 - _check_ratio(mask_ratio))) // 2 * 2
    if K < 2:
        raise ValueError(f"mask_ratio: {mask_ratio} keeps {K} of {L} tokens; two views need >= 2")
    return K


def occlusion_views(tokens: torch.Tensor, mask_ratio: float,
                    generator: torch.Generator | None = None):
    """Two disjoint occluded views of each image, eq. (ocl-views).

    Per sample, a uniform random permutation of the L tokens; its first K entries
    survive the mask and are split in half: view A gets the first K/2, view B the next
    K/2. Returns ``(view_a, view_b, idx_a, idx_b)`` with views ``[B, K/2, D]`` and indices
    ``[B, K/2]``.
    """
    is_tensor = isinstance(tokens, torch.Tensor)
    if not is_tensor or tokens.dim() != 3 or tokens.shape[0] == 0:
        raise ValueError(f"tokens: expected [B>=1, L, D], got "
                         f"{tuple(tokens.shape) if is_tensor else tokens!r}")
    if not bool(torch.isfinite(tokens).all()):
        raise ValueError("tokens: must be finite, got NaN or inf")
    B, L, D = tokens.shape
    K = keep_count(L, mask_ratio)
    device = generator.device if generator else "cpu"
    noise = torch.rand(B, L, generator=generator, device=device)
    keep = noise.to(tokens.device).argsort(dim=1)[:, :K]
    idx_a, idx_b = keep[:, : K // 2], keep[:, K // 2:]

    def gather(idx):
        return tokens.gather(1, idx.unsqueeze(-1).expand(-1, -1, D))

    return gather(idx_a), gather(idx_b), idx_a, idx_b


def augment(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """SimCLR's views of glyphs: shift +-2 px, rotate +-15 deg, scale 0.85-1.15, contrast
    0.7-1.3, noise sigma 0.05 and, with probability 0.5, a 4x4 cutout. No flips (glyphs are
    chiral: a flipped 'b' is a 'd')."""
    x = check_images(x)
    B, _, H, W = x.shape

    def u(lo, hi):
        r = torch.rand(B, generator=generator, device=generator.device if generator else "cpu")
        return (lo + (hi - lo) * r).to(x.device)

    angle, scale = u(-15, 15) * math.pi / 180, u(0.85, 1.15)
    cos, sin = angle.cos() / scale, angle.sin() / scale
    theta = torch.stack([torch.stack([cos, -sin, u(-2, 2) * 2 / W], 1),
                         torch.stack([sin, cos, u(-2, 2) * 2 / H], 1)], 1)
    out = F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False),
                        align_corners=False, padding_mode="zeros")
    out = (out - 0.5) * u(0.7, 1.3).view(B, 1, 1, 1) + 0.5
    noise = torch.randn(x.shape, generator=generator,
                        device=generator.device if generator else "cpu").to(x.device)
    out = out + 0.05 * noise
    rows, cols = u(0, H - 4).long(), u(0, W - 4).long()
    grid_r = torch.arange(H, device=x.device).view(1, H, 1)
    grid_c = torch.arange(W, device=x.device).view(1, 1, W)
    box = ((grid_r - rows.view(B, 1, 1)).clamp(min=0) < 4) & (grid_r >= rows.view(B, 1, 1)) \
        & ((grid_c - cols.view(B, 1, 1)).clamp(min=0) < 4) & (grid_c >= cols.view(B, 1, 1))
    cut = (u(0, 1) < 0.5).view(B, 1, 1) & box
    return out.masked_fill(cut.unsqueeze(1), 0.0).clamp(0, 1)


def count_flops(fn, *args) -> int:
    """FLOPs of ``fn(*args)`` as torch's :class:`FlopCounterMode` counts them (matmuls, convs)."""
    if not callable(fn):
        raise ValueError(f"fn: expected a callable, got {type(fn).__name__}")
    with FlopCounterMode(display=False) as counter:
        fn(*args)
    return int(counter.get_total_flops())


class _Method(nn.Module):
    name = "method"

    def __init__(self, vit: TinyViT):
        super().__init__()
        if not isinstance(vit, TinyViT):
            raise ValueError(f"vit: expected a TinyViT, got {type(vit).__name__}")
        self.vit = vit

    def loss(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        raise NotImplementedError

    def flops_per_step(self, batch: int = 256) -> int:
        """Counted FLOPs of one training step (forward + backward) on ``batch`` images."""
        batch = as_positive_int(batch, "batch", minimum=2)
        x = torch.rand(batch, 1, self.vit.img_size, self.vit.img_size,
                       generator=torch.Generator().manual_seed(0)).to(self.vit.cls.device)
        return count_flops(lambda: self.loss(x, torch.Generator().manual_seed(0)).backward())


class OCL(_Method):
    """Occlusion contrastive learning: two disjoint random views of one image, no augmentation,
    no decoder, no projector; tSP-InfoNCE on the views' CLS outputs (eqs. ocl-views, ocl-loss)."""

    name = "OCL"

    def __init__(self, vit: TinyViT, mask_ratio: float = 0.75, kappa: float = 1 / 64,
                 tau: float = 0.07):
        super().__init__(vit)
        keep_count(vit.num_patches, mask_ratio)
        self.mask_ratio, self.kappa, self.tau = mask_ratio, kappa, tau

    def loss(self, x, generator=None):
        view_a, view_b, _, _ = occlusion_views(self.vit.tokens(x), self.mask_ratio, generator)
        B = len(view_a)
        z = self.vit.encode(torch.cat([view_a, view_b]))[:, 0]  # one pass for both views
        return ocl_loss(z[:B], z[B:], self.kappa, self.tau)


class SimCLR(_Method):
    """Two augmented full views (or two identical ones, ``aug=False``), a 2-layer projector on
    the CLS output, NT-Xent at tau = 0.2."""

    def __init__(self, vit: TinyViT, aug: bool = True, proj_dim: int = 32, tau: float = 0.2):
        super().__init__(vit)
        self.aug, self.tau = bool(aug), tau
        self.name = "SimCLR" if aug else "SimCLR, no aug."
        self.proj = nn.Sequential(nn.Linear(vit.dim, 2 * vit.dim), nn.ReLU(),
                                  nn.Linear(2 * vit.dim, proj_dim))

    def loss(self, x, generator=None):
        x = check_images(x)
        x1, x2 = (augment(x, generator), augment(x, generator)) if self.aug else (x, x)
        B = len(x)
        z = self.vit.encode(self.vit.tokens(torch.cat([x1, x2])))[:, 0]
        p = self.proj(z)
        return nt_xent(p[:B], p[B:], self.tau)


class MAE(_Method):
    """Masked autoencoder: the encoder sees the visible tokens (ratio ``mask_ratio`` hidden), a
    narrow decoder over all positions (mask tokens where hidden) predicts the hidden patches'
    pixels; MSE on the hidden patches."""

    name = "MAE"

    def __init__(self, vit: TinyViT, mask_ratio: float = 0.75, dec_dim: int = 32,
                 dec_depth: int = 2, dec_heads: int = 4, norm_pix: bool = False):
        super().__init__(vit)
        self.mask_ratio, self.norm_pix = mask_ratio, norm_pix
        self.n_visible = visible_count(vit.num_patches, mask_ratio)
        self.embed = nn.Linear(vit.dim, dec_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dec_dim))
        self.register_buffer("dec_pos", sincos_pos_embed_2d(dec_dim, vit.grid), persistent=False)
        self.blocks = nn.ModuleList(Block(dec_dim, dec_heads, 2.0) for _ in range(dec_depth))
        self.norm = nn.LayerNorm(dec_dim, eps=1e-6)
        self.head = nn.Linear(dec_dim, vit.patch ** 2)
        nn.init.normal_(self.mask_token, std=0.02)

    def patchify(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, 1, H, W]`` -> ``[B, L, p*p]``, patches in the row-major order of the tokens."""
        p = self.vit.patch
        B, _, H, W = x.shape
        return x.reshape(B, H // p, p, W // p, p).permute(0, 1, 3, 2, 4).reshape(B, -1, p * p)

    def loss(self, x, generator=None):
        tokens = self.vit.tokens(x)
        B, L, D = tokens.shape
        noise = torch.rand(B, L, generator=generator,
                           device=generator.device if generator else "cpu").to(x.device)
        keep = noise.argsort(1)[:, : self.n_visible]
        h = self.vit.encode(tokens.gather(1, keep.unsqueeze(-1).expand(-1, -1, D)))
        visible = self.embed(h[:, 1:])
        full = self.mask_token.expand(B, L, -1).clone()
        full = full.scatter(1, keep.unsqueeze(-1).expand(-1, -1, full.shape[-1]), visible)
        d = torch.cat([self.embed(h[:, :1]), full + self.dec_pos], dim=1)
        for block in self.blocks:
            d = block(d)
        pred = self.head(self.norm(d))[:, 1:]
        mask = torch.ones(B, L, device=x.device).scatter(1, keep, 0.0)
        return mae_loss(pred, self.patchify(check_images(x)), mask, self.norm_pix)


METHODS = ("OCL", "SimCLR", "SimCLR, no aug.", "MAE")


def build_method(name: str, vit: TinyViT, mask_ratio: float = 0.75,
                 norm_pix: bool = True) -> _Method:
    """The method ``name`` (one of :data:`METHODS`) on ``vit``, with the chapter's defaults
    (``norm_pix``: MAE's per-patch normalised targets, the official setting)."""
    if name == "OCL":
        return OCL(vit, mask_ratio)
    if name in ("SimCLR", "SimCLR, no aug."):
        return SimCLR(vit, aug=name == "SimCLR")
    if name == "MAE":
        return MAE(vit, mask_ratio, norm_pix=bool(norm_pix))
    raise ValueError(f"name: expected one of {METHODS}, got {name!r}")
