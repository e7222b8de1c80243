"""The measurements of the Sparse VideoGen chapter, kept out of its cells.

* :class:`HeadRecorder`: dense sampling that records, at every (layer, step), each head's
  attention mass under the two masks (eq. (svg-mass)), the error of each mask on every row (the
  *oracle*) and the choice that profiling from ``t`` sampled rows makes (eq. (svg-profile));
* :func:`head_summary`: how cleanly heads split, how often profiling agrees with the oracle and
  its **regret**, the attention error its choice adds to the oracle's;
* :func:`compare_methods`: videos sampled with SVG and its baselines at equal density;
* :func:`kernel_errors`: the Triton kernel and the SVG pipeline against their references;
* :func:`amdahl`: the end-to-end bound of a faster attention (Amdahl's law, eq. (svg-amdahl)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F_

from companion.kernels.block_sparse_attention import block_sparse_attention, block_sparse_attention_reference

from companion.validation import as_float_array, as_instance, as_positive_int

from .layout import VideoLayout
from .masks import half_blocks_for_density, svg_masks
from .metrics import psnr, ssim
from .model import sample
from .profiling import attention_mass, oracle_head_types, profile_heads
from .sparse import SparseSampler, svg_attention

__all__ = ["HeadRecorder", "head_summary", "compare_methods", "kernel_errors", "amdahl", "measured_speedup"]


class HeadRecorder:
    """An ``attn_fn`` for :func:`~companion.svg.model.sample` that runs dense attention and records
    what profiling would decide, without changing the video.

    At every (layer, step): ``mass[l, s]`` [2, B, H] (attention mass under the spatial and the
    temporal mask, video queries) and ``oracle[l, s]`` [2, B, H] (each mask's error over every
    row; the condition rows add nothing to either, since both masks give them every key). At
    the sparse (layer, step) pairs, also ``sampled[l, s, t, r]`` [B, H]: the type chosen from
    ``t`` rows in draw ``r``, drawn from the video rows only (``video_rows_only``, as the official
    HunyuanVideo and Wan code does) or from all rows. ``kept[l]`` holds q, k, v of video 0 in
    layer ``l`` at step ``keep``.
    """

    def __init__(self, layout: VideoLayout, candidates: Sequence[torch.Tensor], rows_grid: Sequence[int],
                 draws: int, dense_steps: int, dense_layers=(0,), seed: int = 0, keep=None,
                 video_rows_only: bool = True):
        as_instance(layout, "layout", VideoLayout)
        if not candidates or not all(isinstance(m, torch.Tensor) and m.dtype == torch.bool for m in candidates):
            raise ValueError("candidates: expected a non-empty sequence of bool mask tensors")
        for r in rows_grid:
            as_positive_int(r, "rows_grid")
        as_positive_int(draws, "draws", minimum=0), as_positive_int(dense_steps, "dense_steps", minimum=0)
        self.layout, self.candidates = layout, list(candidates)
        self.row_range = (layout.c, layout.n) if video_rows_only else None
        self.rows_grid, self.draws, self.seed = tuple(rows_grid), int(draws), int(seed)
        self.dense_steps, self.dense_layers, self.keep = dense_steps, tuple(dense_layers), keep
        self.mass, self.oracle, self.sampled, self.kept = {}, {}, {}, {}

    def is_sparse(self, layer: int, step: int) -> bool:
        """Whether SVG runs sparse at (layer, step): past the dense warm-up, outside the dense layers."""
        return step >= self.dense_steps and layer not in self.dense_layers

    def __call__(self, q, k, v, layer: int, step: int):
        video_rows = torch.arange(self.layout.c, self.layout.n, device=q.device)
        self.mass[layer, step] = attention_mass(q, k, self.candidates, video_rows)
        self.oracle[layer, step] = oracle_head_types(q, k, v, self.candidates)[0]
        if step == self.keep:
            self.kept[layer] = tuple(x[:1].clone() for x in (q, k, v))
        if self.is_sparse(layer, step):
            for t in self.rows_grid:
                for r in range(self.draws):
                    g = torch.Generator().manual_seed(100_000 * self.seed + 1000 * r + t)
                    self.sampled[layer, step, t, r] = profile_heads(q, k, v, self.candidates, t, g,
                                                                    self.row_range)[1]
        return F_.scaled_dot_product_attention(q, k, v)

    @property
    def sparse_pairs(self) -> list[tuple[int, int]]:
        return [p for p in self.oracle if self.is_sparse(*p)]


def head_summary(rec: HeadRecorder, clear_ratio: float = 0.5, ambiguous_ratio: float = 0.8) -> dict:
    """How the heads split and how well profiling finds their type, over the sparse (layer, step) pairs.

    ``clear`` / ``ambiguous``: share of (head, step, video) decisions whose MSE ratio
    min/max is at most ``clear_ratio`` / above ``ambiguous_ratio``; ``temporal``: the oracle's
    temporal share; ``mass_best``: mean mass of the better mask; ``agreement[t]``: share of
    sampled choices equal to the oracle's; ``regret[t]``: the extra all-rows error of the sampled
    choices over the oracle's, relative to the oracle's error (mean over draws).
    """
    as_instance(rec, "rec", HeadRecorder)
    clear_ratio = float(as_float_array(clear_ratio, "clear_ratio", low=0, high=1, low_open=True))
    ambiguous_ratio = float(as_float_array(ambiguous_ratio, "ambiguous_ratio", low=clear_ratio, high=1))
    pairs = rec.sparse_pairs
    mse = torch.stack([rec.oracle[p] for p in pairs])  # [P, 2, B, H]
    mass = torch.stack([rec.mass[p] for p in pairs])
    best = mse.argmin(1)
    ratio = mse.min(1).values / mse.max(1).values.clamp_min(1e-30)
    out = {"decisions": int(best.numel()), "clear": float((ratio <= clear_ratio).float().mean()),
           "ambiguous": float((ratio > ambiguous_ratio).float().mean()), "temporal": float(best.float().mean()),
           "mass_best": float(mass.max(1).values.mean()), "agreement": {}, "regret": {}}
    oracle_err = mse.min(1).values.sum()
    for t in rec.rows_grid:
        agree, regret = [], []
        for r in range(rec.draws):
            choice = torch.stack([rec.sampled[l, s, t, r] for (l, s) in pairs])  # [P, B, H]
            chosen = mse.gather(1, choice[:, None]).squeeze(1)
            agree.append(float((choice == best).float().mean()))
            regret.append(float((chosen.sum() - oracle_err) / oracle_err))
        out["agreement"][t], out["regret"][t] = float(np.mean(agree)), float(np.mean(regret))
    return out


def compare_methods(net, labels, noise, steps: int, runs: Sequence[tuple[str, float]], *, block: int = 16,
                    num_rows: int = 16, dense_steps: int = 2, dense_layers=(0,), seed: int = 0,
                    reference=None) -> tuple[list[dict], dict]:
    """Sample the videos of ``labels`` from ``noise`` with each ``(mode, density)`` of ``runs``.

    Returns one row per run (method, realised density, the profiling ``seed``, PSNR (mean and per
    video) and SSIM against the dense video ``reference`` from the same noise, mean relative
    attention error over the sparse layers and steps) and the videos, keyed by ``(mode, density)``.
    """
    steps = as_positive_int(steps, "steps")
    num_rows = as_positive_int(num_rows, "num_rows")
    if not isinstance(noise, torch.Tensor) or noise.ndim != 5 or noise.shape[0] != len(labels):
        raise ValueError(f"noise: expected a tensor [B, F, C, H, W] with B = len(labels) = {len(labels)}, "
                         f"got {getattr(noise, 'shape', type(noise).__name__)}")
    if not bool(torch.isfinite(noise).all()):
        raise ValueError("noise: contains NaN or Inf")

    layout = net.layout
    reference = sample(net, labels, noise, steps) if reference is None else reference
    rows, videos = [], {}
    for mode, density in runs:
        half = half_blocks_for_density(layout, block, density)
        fn = SparseSampler(layout, mode, half, block, num_rows, dense_steps, dense_layers, seed=seed)
        out = sample(net, labels, noise, steps, attn_fn=fn)
        videos[mode, density] = out
        per_video = psnr(reference, out)
        rows.append(dict(method=mode, target=density, density=fn.masks["density"], seed=seed,
                         psnr=float(per_video.mean()), psnr_videos=[float(x) for x in per_video],
                         ssim=float(ssim(reference, out).mean()),
                         attn_error=float(np.mean([e["rel_error"] for e in fn.log.values()]))))
    return rows, videos


def kernel_errors(q, k, v, layout: VideoLayout, is_temporal: torch.Tensor, block: int, half_blocks: int,
                  backend: str = "auto", seed: int = 0) -> dict:
    """Largest absolute errors of the block-sparse kernel (through ``backend``).

    ``pipeline``: SVG attention (permute, kernel, permute back) on ``q, k, v`` against masked
    dense attention with each head's element mask; ``kernel``: the same call against the torch
    reference path; ``awkward``: random inputs whose length is not a multiple of the block, an
    empty mask row (output 0), a full mask (dense attention) and per-head masks.
    """
    as_instance(layout, "layout", VideoLayout)
    if not isinstance(is_temporal, torch.Tensor) or is_temporal.dtype != torch.bool:
        raise ValueError(f"is_temporal: expected a bool tensor of head types, got "
                         f"{getattr(is_temporal, 'dtype', type(is_temporal).__name__)}")
    as_positive_int(block, "block"), as_positive_int(half_blocks, "half_blocks", minimum=0)
    m = svg_masks(layout, block, half_blocks)
    out = svg_attention(q, k, v, layout, is_temporal, m["block"], block, backend=backend)
    ref = svg_attention(q, k, v, layout, is_temporal, m["block"], block, backend="torch")
    elem = torch.where(is_temporal.to(q.device)[..., None, None], m["temporal"].to(q.device),
                       m["spatial"].to(q.device))
    dense = F_.scaled_dot_product_attention(q, k, v, attn_mask=elem)
    g = torch.Generator().manual_seed(seed)
    awkward = []
    for B, H, n, D, blk in [(1, 2, 50, 16, 16), (2, 3, 100, 32, 32), (1, 2, 16, 16, 16)]:
        qa, ka, va = (torch.randn(B, H, n, D, generator=g).to(q.device) for _ in range(3))
        nb = -(-n // blk)
        mask = torch.rand(H, nb, nb, generator=g) < 0.5
        mask[0, 0] = False  # head 0, query block 0: an empty row
        if nb > 1:
            mask[-1] = True  # the last head: a full mask
        got = block_sparse_attention(qa, ka, va, mask.to(q.device), blk, backend=backend)
        awkward.append(float((got - block_sparse_attention_reference(qa, ka, va, mask, blk)).abs().max()))
        if nb > 1:
            full = F_.scaled_dot_product_attention(qa, ka, va)[:, -1]
            awkward.append(float((got[:, -1] - full).abs().max()))
    return {"kernel": float((out - ref).abs().max()), "pipeline": float((out - dense).abs().max()),
            "awkward": max(awkward)}


def amdahl(share: float, dense_frac: float, attn_speedup: float) -> float:
    """End-to-end speed-up when attention, a fraction ``share`` of the time, runs ``attn_speedup``
    times faster except during the dense warm-up, a fraction ``dense_frac`` of the steps (eq. (svg-amdahl))."""
    for name, x in (("share", share), ("dense_frac", dense_frac)):
        if not 0 <= x <= 1:
            raise ValueError(f"{name}: expected a fraction in [0, 1], got {x!r}")
    if not attn_speedup > 0:
        raise ValueError(f"attn_speedup: expected a positive speed-up, got {attn_speedup!r}")
    return 1 / ((1 - share) + share * (dense_frac + (1 - dense_frac) / attn_speedup))


def measured_speedup(records: Sequence[dict], density: float, shape: str = "hunyuanvideo-720p") -> dict | None:
    """The kernel's measured speed-up over dense SDPA nearest ``density``, from the GPU benchmark
    records (:func:`companion.kernels.load_benchmark`); ``None`` when no GPU record exists.

    Records of ``shape`` are preferred; CPU smoke runs are never a measurement.
    """
    density = float(as_float_array(density, "density", low=0, high=1, low_open=True))
    if not isinstance(records, (list, tuple)) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"records: expected a list of benchmark records (dicts), got {type(records).__name__}")
    usable = [r for r in records if not r.get("smoke") and (r.get("speedup") or {}).get("sdpa")]
    if not usable:
        return None
    same = [r for r in usable if r.get("shape") == shape] or usable
    best = min(same, key=lambda r: abs(r["density"] - density))
    return {"speedup": float(best["speedup"]["sdpa"]), "density": float(best["density"]),
            "device": str(best.get("device", "a GPU")), "shape": str(best.get("shape", "?"))}
