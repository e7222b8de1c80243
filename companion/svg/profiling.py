"""Online profiling (Algorithm 1 of Sparse VideoGen): classify each head from a few query rows.

For ``t`` sampled query rows ``I`` and each candidate mask ``M_m`` (spatial, temporal), compare the
masked output with full attention on those rows only (eq. (svg-profile)):

    MSE_m(b, h) = 1 / (t D) * sum_{i in I} || o_i^full - o_i^(M_m) ||^2 ,   type(b, h) = argmin_m MSE_m.

It costs ``O(t N D)`` per head instead of ``O(N^2 D)``. Rows are drawn without replacement (the
paper's code draws with replacement, so duplicates can happen there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from companion.validation import as_positive_int

__all__ = ["rows_attention", "attention_mass", "profile_heads", "oracle_head_types"]


def rows_attention(q, k, v, rows: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention outputs of the query ``rows`` only, [B, H, t, D], in float32 (``mask`` [N, N] or None)."""
    if not isinstance(q, torch.Tensor) or q.ndim != 4:
        raise ValueError(f"q: expected a [B, H, N, D] tensor, got {getattr(q, 'shape', type(q).__name__)}")
    n = q.shape[2]
    if not isinstance(rows, torch.Tensor) or rows.ndim != 1 or rows.dtype.is_floating_point or \
            (rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= n)):
        raise ValueError(f"rows: expected a 1-D integer tensor of query rows in 0..{n - 1}")
    qs = q[:, :, rows].float()
    s = qs @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask[rows].to(s.device), float("-inf"))
    return torch.softmax(s, -1) @ v.float()


def attention_mass(q, k, masks: Sequence[torch.Tensor], rows: torch.Tensor | None = None) -> torch.Tensor:
    """Share of each head's dense attention that falls inside each mask, ``[M, B, H]`` (eq. (svg-mass)).

    ``mass_m(b, h) = mean_i sum_j A_ij [M_m]_ij`` over the query ``rows`` (default: every row),
    with ``A = softmax(Q K^T / sqrt(D))``. A head that follows mask ``m`` has ``mass_m`` near 1;
    a head that attends uniformly has ``mass_m`` equal to the mask's density.
    """
    _check(q, k, k, masks)
    rows = torch.arange(q.shape[2], device=q.device) if rows is None else rows
    s = q[:, :, rows].float() @ k.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    a = torch.softmax(s, -1)
    return torch.stack([(a * m[rows].to(a.device)).sum(-1).mean(-1) for m in masks])


def _check(q, k, v, masks):
    if not isinstance(q, torch.Tensor) or q.ndim != 4:
        raise ValueError(f"q: expected a tensor [B, H, N, D], got {getattr(q, 'shape', type(q))}")
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor) or x.shape != q.shape:
            raise ValueError(f"{name}: expected the shape of q {tuple(q.shape)}, got {getattr(x, 'shape', type(x))}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: contains NaN or Inf")
    if not isinstance(masks, Sequence) or len(masks) == 0:
        raise ValueError("masks: expected a non-empty sequence of [N, N] bool masks (e.g. spatial, temporal)")
    n = q.shape[2]
    for i, m in enumerate(masks):
        if not isinstance(m, torch.Tensor) or m.dtype != torch.bool or tuple(m.shape) != (n, n):
            raise ValueError(f"masks: mask {i} must be a bool tensor of shape ({n}, {n}), got "
                             f"{getattr(m, 'dtype', type(m))} {tuple(getattr(m, 'shape', ()))}")
        if not bool(m.any(1).all()):
            raise ValueError(f"masks: mask {i} has a query row with no key; keep at least the diagonal")


def profile_heads(q, k, v, masks: Sequence[torch.Tensor], num_rows: int,
                  generator: torch.Generator | None = None,
                  row_range: tuple[int, int] | None = None):
    """``(mse [M, B, H], best [B, H])`` from ``num_rows`` query rows drawn without
    replacement.

    ``row_range=(lo, hi)`` draws the rows from ``[lo, hi)`` only (the paper's HunyuanVideo
    code samples the first 10,000 rows).
    """
    _check(q, k, v, masks)
    n = q.shape[2]
    lo, hi = (0, n) if row_range is None else row_range
    if not (0 <= lo < hi <= n):
        raise ValueError(
            f"row_range: expected 0 <= lo < hi <= N = {n}, got {row_range}")
    num_rows = as_positive_int(num_rows, "num_rows")
    if num_rows > hi - lo:
        raise ValueError(f"num_rows: at most {hi - lo} rows can be drawn without "
                         f"replacement, got {num_rows}")
    rows = lo + torch.randperm(hi - lo, generator=generator)[:num_rows]
    full = rows_attention(q, k, v, rows)
    errors = [(rows_attention(q, k, v, rows, m) - full).pow(2).mean((-1, -2))
              for m in masks]
    mse = torch.stack(errors)
    return mse, mse.argmin(0)


def oracle_head_types(q, k, v, masks: Sequence[torch.Tensor]):
    """The same classification from every query row (the reference profiling is compared with)."""
    _check(q, k, v, masks)
    n = q.shape[2]
    rows = torch.arange(n)
    full = rows_attention(q, k, v, rows)
    mse = torch.stack([(rows_attention(q, k, v, rows, m) - full).pow(2).mean((-1, -2)) for m in masks])
    return mse, mse.argmin(0)
