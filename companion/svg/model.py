"""TinyVideoDiT: a small video diffusion transformer with joint (3D full) attention.

The sequence is ``[c condition tokens; F frames x S patches]`` in frame-major order
(:class:`~companion.svg.layout.VideoLayout`). Each block is pre-norm attention + MLP with
adaLN-zero conditioning on the flow time ``tau`` (DiT); positions enter through a 3D rotary
embedding (time, row, column) of the video tokens. ``attn_fn(q, k, v, layer)`` replaces the
attention of every block, which is how Sparse VideoGen and its baselines plug in.

Training is rectified flow: ``x_tau = (1 - tau) x0 + tau eps``, the model predicts
``v = eps - x0``; sampling integrates ``dx/dtau = v`` from ``tau = 1`` to ``0`` with Euler steps.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F_

from companion.validation import as_finite_tensor

from .layout import VideoLayout

__all__ = ["TinyVideoDiT", "sample", "dense_attention"]


def dense_attention(q, k, v, layer=None):
    """Full attention (the reference every sparse method is compared with)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        as_finite_tensor(x, name, ndim=4)
    if not (q.shape == k.shape == v.shape):
        raise ValueError(f"k, v: expected the shape of q {tuple(q.shape)}, got {tuple(k.shape)}, {tuple(v.shape)}")
    return F_.scaled_dot_product_attention(q, k, v)


def _rope_angles(positions: torch.Tensor, dim: int, base: float = 100.0) -> torch.Tensor:
    freqs = base ** (-torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    return positions[:, None].float() * freqs[None]  # [N, dim/2]


class TinyVideoDiT(nn.Module):
    def __init__(self, frames: int = 16, size: int = 16, channels: int = 1, patch: int = 4, dim: int = 64,
                 depth: int = 4, heads: int = 4, n_cond: int = 16, n_classes: int = 8):
        super().__init__()
        if dim % heads or (dim // heads) % 8:
            raise ValueError(f"dim: expected dim / heads to be a multiple of 8, got {dim} / {heads}")
        if size % patch:
            raise ValueError(f"patch: must divide size {size}, got {patch}")
        self.config = dict(frames=frames, size=size, channels=channels, patch=patch, dim=dim, depth=depth,
                           heads=heads, n_cond=n_cond, n_classes=n_classes)
        self.frames, self.size, self.channels, self.patch = frames, size, channels, patch
        self.heads, self.head_dim, self.depth = heads, dim // heads, depth
        side = size // patch
        self.layout = VideoLayout(n_cond, frames, side * side)
        self.embed = nn.Linear(channels * patch * patch, dim)
        self.registers = nn.Parameter(torch.randn(n_cond, dim) * 0.02)
        self.label = nn.Embedding(n_classes, dim)
        self.time = nn.Sequential(nn.Linear(64, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.norm1 = nn.ModuleList(nn.LayerNorm(dim, elementwise_affine=False) for _ in range(depth))
        self.norm2 = nn.ModuleList(nn.LayerNorm(dim, elementwise_affine=False) for _ in range(depth))
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * dim) for _ in range(depth))
        self.proj = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
                                 for _ in range(depth))
        self.ada = nn.ModuleList(nn.Linear(dim, 6 * dim) for _ in range(depth))
        self.final_norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.final_ada = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, channels * patch * patch)
        for lin in [*self.ada, self.final_ada, self.out]:  # adaLN-zero: every block starts as the identity
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)
        # 3D rotary embedding: head_dim split into (time, row, column) parts, condition tokens unrotated
        hd = self.head_dim
        t_dim = hd // 2 // 2 * 2  # half of the rotated pairs for time: frames outnumber rows
        y_dim = (hd - t_dim) // 2 // 2 * 2
        parts = (t_dim, y_dim, hd - t_dim - y_dim)  # 16 -> (8, 4, 4)
        f, r, c = torch.meshgrid(torch.arange(frames), torch.arange(side), torch.arange(side), indexing="ij")
        ang = torch.cat([_rope_angles(p.reshape(-1), d) for p, d in zip((f, r, c), parts)], dim=1)
        ang = torch.cat([torch.zeros(n_cond, hd // 2), ang])  # [N, hd/2]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def _rope(self, x):  # x [B, H, N, hd]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos], -1).flatten(-2)

    def patchify(self, x):
        B, F, C, H, W = x.shape
        p = self.patch
        x = x.reshape(B, F, C, H // p, p, W // p, p).permute(0, 1, 3, 5, 2, 4, 6)
        return x.reshape(B, F * (H // p) * (W // p), C * p * p)

    def unpatchify(self, t):
        B = t.shape[0]
        p, s = self.patch, self.size // self.patch
        x = t.reshape(B, self.frames, s, s, self.channels, p, p).permute(0, 1, 4, 2, 5, 3, 6)
        return x.reshape(B, self.frames, self.channels, self.size, self.size)

    def forward(self, x, tau, y, attn_fn: Callable | None = None):
        """Predicted velocity for videos ``x`` [B, F, C, H, W] at flow times ``tau`` [B], labels ``y`` [B]."""
        attn_fn = attn_fn or dense_attention
        B = x.shape[0]
        half = 32
        freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=x.device) / half)
        temb = self.time(torch.cat([torch.sin(1000 * tau[:, None] * freqs), torch.cos(1000 * tau[:, None] * freqs)], 1))
        cond = self.registers[None] + self.label(y)[:, None]
        h = torch.cat([cond, self.embed(self.patchify(x))], 1)
        ctx = F_.silu(temb)
        for i in range(self.depth):
            s1, g1, a1, s2, g2, a2 = self.ada[i](ctx)[:, None].chunk(6, -1)
            u = self.norm1[i](h) * (1 + g1) + s1
            q, k, v = self.qkv[i](u).view(B, -1, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
            o = attn_fn(self._rope(q), self._rope(k), v, i)
            h = h + a1 * self.proj[i](o.transpose(1, 2).reshape(B, -1, self.heads * self.head_dim))
            h = h + a2 * self.mlp[i](self.norm2[i](h) * (1 + g2) + s2)
        shift, scale = self.final_ada(ctx)[:, None].chunk(2, -1)
        t = self.out(self.final_norm(h) * (1 + scale) + shift)
        return self.unpatchify(t[:, self.layout.c:])


@torch.no_grad()
def sample(model: TinyVideoDiT, y: torch.Tensor, noise: torch.Tensor, steps: int = 20,
           attn_fn: Callable | None = None) -> torch.Tensor:
    """Euler integration of the flow from ``noise`` (tau = 1) to a video (tau = 0).

    ``attn_fn(q, k, v, layer, step)`` (optional) replaces attention; it is told the step index.
    """
    if steps < 1:
        raise ValueError(f"steps: expected an integer >= 1, got {steps}")
    x = noise.clone()
    taus = torch.linspace(1.0, 0.0, steps + 1)
    for s in range(steps):
        fn = None if attn_fn is None else (lambda q, k, v, layer, s=s: attn_fn(q, k, v, layer, s))
        tau = torch.full((x.shape[0],), float(taus[s]), device=x.device)
        x = x + (taus[s + 1] - taus[s]) * model(x, tau, y, fn)
    return x
