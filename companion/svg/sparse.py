"""Sparse VideoGen attention and its baselines, as ``attn_fn`` hooks of :func:`companion.svg.model.sample`.

:func:`svg_attention` is the execution path of eq. (svg-exec): permute the temporal heads'
``q, k, v`` to token-major order, run *one* block mask (the band) for every head with the
block-sparse kernel, permute the temporal heads' output back. :class:`SparseSampler` decides per
(layer, step) which heads are spatial and which temporal:

* ``"svg"``: profile every sparse (layer, step) online from ``num_rows`` query rows;
* ``"static"``: profile once, at the first sparse step, and keep the types;
* ``"spatial"`` / ``"temporal"``: one fixed pattern for every head;
* ``"oracle"``: classify from all rows (what profiling estimates);
* ``"random"``: each head's type drawn at random at every sparse (layer, step), the null of the
  per-head choice.

Profiling draws its rows from the video rows only (``video_rows_only=True``), as the official
HunyuanVideo and Wan code does: the condition rows see every key under both masks, so they carry
no signal about a head's type.

The first ``dense_steps`` steps and the ``dense_layers`` run full attention, as in the paper.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F_

from companion.kernels.block_sparse_attention import block_sparse_attention, expand_block_mask
from companion.validation import as_choice

from .layout import VideoLayout, to_frame_major, to_token_major
from .masks import svg_masks
from .profiling import oracle_head_types, profile_heads

__all__ = ["svg_attention", "SparseSampler", "MODES"]

MODES = ("dense", "svg", "static", "spatial", "temporal", "oracle", "random")


def svg_attention(q, k, v, layout: VideoLayout, is_temporal: torch.Tensor,
                  block_mask: torch.Tensor, block: int = 16,
                  backend: str = "auto") -> torch.Tensor:
    """Per-head spatial/temporal attention with one shared block mask: permute, kernel,
    permute back.

    ``backend``: ``"triton"`` or ``"torch"`` run
    :func:`~companion.kernels.block_sparse_attention.block_sparse_attention` with that
    backend; ``"auto"`` runs the Triton kernel on CUDA tensors and, on a CPU, torch's fused
    attention with the element mask of the blocks: the same computation (the band never
    leaves a row empty), an order of magnitude faster there than the kernel's float32
    reference.
    """
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(
            f"backend: expected 'auto', 'triton' or 'torch', got {backend!r}")
    layout.check_length(q.shape[2], "q")
    qt, kt, vt = (to_token_major(x, layout, is_temporal) for x in (q, k, v))
    if backend == "auto" and not q.is_cuda:
        mask = expand_block_mask(block_mask.to(q.device), block, q.shape[2])
        out = F_.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask)
    else:
        out = block_sparse_attention(qt, kt, vt, block_mask, block, backend=backend,
                                     check_finite=False)
    return to_frame_major(out, layout, is_temporal)


class SparseSampler:
    """An ``attn_fn(q, k, v, layer, step)`` that runs one sparse method and logs what it did.

    ``backend`` is that of :func:`svg_attention`.
    ``log`` maps ``(layer, step)`` to a dict with the head types (1 = temporal) and, when
    ``track_error``, the relative error of the attention output against dense attention.
    """

    def __init__(self, layout: VideoLayout, mode: str, half_blocks: int, block: int = 16, num_rows: int = 16,
                 dense_steps: int = 4, dense_layers=(0,), seed: int = 0, track_error: bool = True,
                 backend: str = "auto", video_rows_only: bool = True):
        self.mode = as_choice(mode, "mode", MODES)
        self.row_range = (layout.c, layout.n) if video_rows_only else None
        self.layout, self.block, self.num_rows, self.backend = layout, block, num_rows, backend
        self.dense_steps, self.dense_layers = dense_steps, tuple(dense_layers)
        self.masks = svg_masks(layout, block, half_blocks)
        self.generator = torch.Generator().manual_seed(seed)
        self.track_error = track_error
        self.static_types: dict[int, torch.Tensor] = {}
        self.log: dict[tuple[int, int], dict] = {}

    def is_dense(self, layer: int, step: int) -> bool:
        return self.mode == "dense" or step < self.dense_steps or layer in self.dense_layers

    def head_types(self, q, k, v, layer: int) -> torch.Tensor:
        B, H = q.shape[:2]
        cand = [self.masks["spatial"], self.masks["temporal"]]
        if self.mode in ("spatial", "temporal"):
            return torch.full((B, H), self.mode == "temporal", dtype=torch.bool, device=q.device)
        if self.mode == "oracle":
            return oracle_head_types(q, k, v, cand)[1].bool()
        if self.mode == "random":
            return (torch.rand(B, H, generator=self.generator) < 0.5).to(q.device)
        if self.mode == "static" and layer in self.static_types:
            return self.static_types[layer]
        types = profile_heads(q, k, v, cand, self.num_rows, self.generator, self.row_range)[1].bool()
        if self.mode == "static":
            self.static_types[layer] = types
        return types

    def __call__(self, q, k, v, layer: int, step: int):
        if self.is_dense(layer, step):
            return F_.scaled_dot_product_attention(q, k, v)
        types = self.head_types(q, k, v, layer)
        out = svg_attention(q, k, v, self.layout, types, self.masks["block"], self.block, self.backend)
        entry = {"temporal": types}
        if self.track_error:
            dense = F_.scaled_dot_product_attention(q, k, v)
            entry["rel_error"] = float((out - dense).norm() / dense.norm())
        self.log[(layer, step)] = entry
        return out
