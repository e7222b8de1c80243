"""One small Vision Transformer for every method of the chapter: pre-LN blocks, fixed 2-D
sine-cosine positions, a CLS token, and an encoder that takes any subset of patch tokens."""

from __future__ import annotations

import math

import torch
from torch import nn

from companion.validation import as_positive, as_positive_int

__all__ = ["TinyViT", "Block", "sincos_pos_embed_2d", "check_images"]


def check_images(x, name: str = "x", patch: int | None = None) -> torch.Tensor:
    """``x`` as a finite float tensor ``[B, 1, H, W]`` of pixels in [0, 1] (H, W divisible by
    ``patch``), or raise."""
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] != 1:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected [B,1,H,W] images, got {shape}")
    if x.shape[0] == 0:
        raise ValueError(f"{name}: expected at least one image, got an empty batch")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: images must be finite, got NaN or inf")
    low, high = float(x.min()), float(x.max())
    if low < 0 or high > 1:
        raise ValueError(f"{name}: expected pixels in [0, 1], got values in [{low:.3g}, {high:.3g}]")
    if patch is not None and (x.shape[2] % patch or x.shape[3] % patch):
        raise ValueError(f"{name}: H and W must be divisible by the patch size {patch}, "
                         f"got {tuple(x.shape[2:])}")
    return x.float()


def sincos_pos_embed_2d(dim: int, grid: int) -> torch.Tensor:
    """Fixed 2-D sine-cosine positions ``[grid*grid, dim]``, row-major over the patch grid.

    Half of the channels encode the row, half the column; each half is
    ``[sin(p w_k), cos(p w_k)]`` with ``w_k = 10000^(-k/(dim/4))`` (the MAE convention).
    """
    dim, grid = as_positive_int(dim, "dim"), as_positive_int(grid, "grid")
    if dim % 4:
        raise ValueError(f"dim: expected a multiple of 4, got {dim}")
    omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float64) / (dim / 4))
    rows, cols = torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij")

    def encode(pos):
        angle = pos.reshape(-1, 1).double() * omega
        return torch.cat([angle.sin(), angle.cos()], dim=1)

    return torch.cat([encode(cols), encode(rows)], dim=1).float()


class Block(nn.Module):
    """Pre-LN transformer block: ``x + MHSA(LN(x))``, then ``x + MLP(LN(x))`` (GELU)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float):
        super().__init__()
        dim, heads = as_positive_int(dim, "dim"), as_positive_int(heads, "heads")
        as_positive(mlp_ratio, "mlp_ratio")
        if dim % heads:
            raise ValueError(f"heads: expected a divisor of dim={dim}, got {heads}")
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        B, n, D = x.shape
        q, k, v = self.qkv(x).reshape(B, n, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1) / math.sqrt(D // self.heads)).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, n, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """ViT on ``img_size`` x ``img_size`` grey images cut into ``patch`` x ``patch`` patches.

    ``tokens(x)`` embeds the patches and adds their positions (before any masking, so a token
    keeps its location wherever it is gathered to); ``encode(t)`` prepends the CLS token (at
    position slot 0) to a token subset ``[B', n, D]`` of any length and returns ``[B', n+1, D]``
    after the blocks and the final LayerNorm; ``features(x, pool)`` is the frozen feature a
    probe reads (the CLS output, or the mean of the patch outputs), on the full image.
    """

    def __init__(self, img_size: int = 16, patch: int = 2, dim: int = 48, depth: int = 3,
                 heads: int = 3, mlp_ratio: float = 2.0):
        super().__init__()
        img_size, patch = as_positive_int(img_size, "img_size"), as_positive_int(patch, "patch")
        if img_size % patch:
            raise ValueError(f"patch: expected a divisor of img_size={img_size}, got {patch}")
        self.img_size, self.patch, self.dim = img_size, patch, dim
        self.grid = img_size // patch
        self.patch_embed = nn.Conv2d(1, dim, patch, stride=patch)
        self.register_buffer("pos", sincos_pos_embed_2d(dim, self.grid), persistent=False)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self._init_weights()

    @property
    def num_patches(self) -> int:
        return self.grid * self.grid

    def _init_weights(self) -> None:
        w = self.patch_embed.weight.data
        nn.init.xavier_uniform_(w.view(w.shape[0], -1))
        nn.init.normal_(self.cls, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Patch tokens with positions, ``[B, L, D]`` (L = (img_size / patch)^2)."""
        x = check_images(x, "x", self.patch)
        if x.shape[2] != self.img_size or x.shape[3] != self.img_size:
            raise ValueError(f"x: expected {self.img_size}x{self.img_size} images, "
                             f"got {tuple(x.shape[2:])}")
        return self.patch_embed(x).flatten(2).transpose(1, 2) + self.pos

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        """CLS + ``tokens`` ``[B', n, D]`` through the blocks: ``[B', n+1, D]``."""
        if tokens.dim() != 3 or tokens.shape[-1] != self.dim or tokens.shape[1] == 0:
            raise ValueError(f"tokens: expected [B', n>=1, {self.dim}], got {tuple(tokens.shape)}")
        if not bool(torch.isfinite(tokens).all()):
            raise ValueError("tokens: must be finite, got NaN or inf")
        cls = self.cls.expand(tokens.shape[0], -1, -1)  # position slot 0 of the sin-cos table is 0
        h = torch.cat([cls, tokens], dim=1)
        for block in self.blocks:
            h = block(h)
        return self.norm(h)

    def features(self, x: torch.Tensor, pool: str = "cls") -> torch.Tensor:
        """Frozen features ``[B, D]`` of full images: the CLS output or the patch mean."""
        if pool not in ("cls", "mean"):
            raise ValueError(f"pool: expected 'cls' or 'mean', got {pool!r}")
        h = self.encode(self.tokens(x))
        return h[:, 0] if pool == "cls" else h[:, 1:].mean(1)
