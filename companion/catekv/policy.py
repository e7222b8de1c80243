"""What each head keeps: CateKV and the baselines, as per-head index sets over the prompt.

Every policy returns ``keep``: a list over KV heads of LongTensors [B, l_h] of prompt positions (the
decoded tokens are always kept on top). All policies see the same observation window (the last
``last_q`` prompt queries), and the baselines are sized to CateKV's bytes (:func:`equal_bytes_per_head`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from companion.validation import as_positive_int, as_probability

from .heads import middle_region

__all__ = ["CateKVConfig", "chunk_scores", "catekv_select", "streaming_select", "smooth_scores", "snapkv_select",
           "duo_select", "equal_bytes_per_head"]


@dataclass(frozen=True)
class CateKVConfig:
    """Hyper-parameters (paper's names): budget B, chunk c, sink I, recent R, window W (``last_q``), tail,
    adaptive ratio r, and the CV threshold (k = ``top_threshold``, f = ``top_fraction``)."""

    budget: int = 48
    chunk: int = 4
    init: int = 4
    recent: int = 16
    last_q: int = 16
    tail_reserve: int = 8
    adaptive_ratio: float = 0.25
    top_threshold: float = 0.5
    top_fraction: float = 1.0

    def __post_init__(self):
        for name in ("budget", "chunk", "last_q"):
            as_positive_int(getattr(self, name), name)
        for name in ("init", "recent", "tail_reserve"):
            as_positive_int(getattr(self, name), name, minimum=0)
        as_probability(self.adaptive_ratio, "adaptive_ratio", low_open=False, high_open=False)
        as_probability(self.top_threshold, "top_threshold", low_open=False, high_open=False)
        as_probability(self.top_fraction, "top_fraction", low_open=True, high_open=False)
        if self.budget < self.init + self.recent:
            raise ValueError(f"budget: must be >= init + recent = {self.init + self.recent}, got {self.budget}")
        if (self.budget - self.init - self.recent) % self.chunk:
            raise ValueError(f"budget: budget - init - recent ({self.budget - self.init - self.recent}) must be a "
                             f"multiple of chunk ({self.chunk})")

    @property
    def n_critical_chunks(self) -> int:
        return (self.budget - self.init - self.recent) // self.chunk

    def consistent_length(self, n: int) -> int:
        """Tokens a consistent head keeps of an ``n``-token prompt: B + (n - chunk_end)."""
        chunk_end = (n // self.chunk - self.tail_reserve // self.chunk) * self.chunk
        return self.budget + n - chunk_end


def chunk_scores(attn_mid: torch.Tensor, chunk: int) -> torch.Tensor:
    """Soft chunk score s_j = sum over window queries of the chunk's largest weight: [..., W, T] -> [..., M]."""
    as_positive_int(chunk, "chunk")
    if not isinstance(attn_mid, torch.Tensor) or attn_mid.ndim < 2 or attn_mid.shape[-1] % chunk:
        raise ValueError(f"chunk: must divide the middle length T of attn_mid [..., W, T], got chunk {chunk} "
                         f"for shape {tuple(getattr(attn_mid, 'shape', ()))}")
    *lead, W, T = attn_mid.shape
    return attn_mid.reshape(*lead, W, T // chunk, chunk).amax(-1).sum(-2)


def catekv_select(attn_mid: torch.Tensor, n: int, is_adaptive: torch.Tensor,
                  cfg: CateKVConfig, critical: bool = True) -> list[torch.Tensor]:
    """CateKV's kept positions per KV head, eq. (catekv-keep).

    ``attn_mid`` [B, Hkv, W, T_mid] (from :func:`~companion.catekv.heads.middle_attention`);
    ``is_adaptive`` [Hkv] bool. An adaptive head keeps all ``n`` positions. A consistent
    head keeps the sink, its top ``(B - I - R) / c`` chunks by soft score, and the recent
    window with the tail. ``critical=False`` is the ablation that spends the critical-token
    budget on a longer recent window.
    """
    n = as_positive_int(n, "n")
    if n <= cfg.consistent_length(n):
        raise ValueError(f"n: a prompt of {n} tokens is not longer than the budget "
                         f"({cfg.consistent_length(n)})")
    start, end, M = middle_region(n, cfg.chunk, cfg.init, cfg.recent, cfg.tail_reserve)
    if not torch.isfinite(attn_mid).all():
        raise ValueError("attn_mid: contains NaN or Inf")
    B, H, W, T = attn_mid.shape
    if T != end - start:
        raise ValueError(
            f"attn_mid: expected {end - start} middle tokens for n = {n}, got {T}")
    is_adaptive = torch.as_tensor(is_adaptive, dtype=torch.bool).cpu()
    if is_adaptive.shape != (H,):
        raise ValueError(
            f"is_adaptive: expected shape [{H}], got {tuple(is_adaptive.shape)}")
    dev = attn_mid.device
    sink = torch.arange(cfg.init, device=dev).expand(B, -1)
    keep = []
    for h in range(H):
        if is_adaptive[h]:
            keep.append(torch.arange(n, device=dev).expand(B, n))
        elif critical:
            scores = chunk_scores(attn_mid[:, h], cfg.chunk)
            top = scores.topk(cfg.n_critical_chunks, dim=-1).indices  # [B, k]
            offsets = torch.arange(cfg.chunk, device=dev)
            toks = (start + top[..., None] * cfg.chunk + offsets).flatten(1)
            recent = torch.arange(end, n, device=dev).expand(B, -1)
            keep.append(torch.cat([sink, toks, recent], 1))
        else:  # no critical tokens: their bytes go to a longer recent window
            window = cfg.consistent_length(n) - cfg.init
            recent = torch.arange(n - window, n, device=dev).expand(B, -1)
            keep.append(torch.cat([sink, recent], 1))
    return keep


def streaming_select(n: int, sink: int, window: int, n_heads: int, batch: int,
                     device: torch.device | str | None = None) -> list[torch.Tensor]:
    """StreamingLLM: every head keeps the first ``sink`` and the last ``window`` positions."""
    n, n_heads, batch = as_positive_int(n, "n"), as_positive_int(n_heads, "n_heads"), as_positive_int(batch, "batch")
    sink, window = as_positive_int(sink, "sink", minimum=0), as_positive_int(window, "window", minimum=0)
    if sink + window > n:
        raise ValueError(f"window: sink + window ({sink + window}) exceeds the prompt length {n}")
    idx = torch.cat([torch.arange(sink, device=device), torch.arange(n - window, n, device=device)])
    return [idx.expand(batch, -1)] * n_heads


def smooth_scores(score: torch.Tensor, pool: int) -> torch.Tensor:
    """Average of ``score`` [..., L] over a window of ``pool`` positions around each one (the window
    ``[i - (pool - 1) // 2, i + pool // 2]``, clipped to ``[0, L)``): exactly ``L`` outputs for odd and
    even ``pool`` alike, so no smoothed score falls outside the positions it scores."""
    pool = as_positive_int(pool, "pool")
    L = score.shape[-1]
    lo = (torch.arange(L, device=score.device) - (pool - 1) // 2).clamp(0, L)
    hi = (torch.arange(L, device=score.device) + pool // 2 + 1).clamp(0, L)
    csum = F.pad(score.cumsum(-1), (1, 0))
    return (csum[..., hi] - csum[..., lo]) / (hi - lo).to(score.dtype)


def snapkv_select(attn_all: torch.Tensor, budget: int, recent: int, pool: int = 3) -> list[torch.Tensor]:
    """SnapKV-like: per head, the recent window plus the ``budget - recent`` earlier positions with the most
    window attention (summed over the window queries, smoothed over ``pool`` positions, :func:`smooth_scores`).

    ``attn_all`` [B, Hkv, W, n]: the window's (causal) attention over the whole prompt. The earlier
    positions are chosen among ``[0, n - recent)``, so none is kept twice."""
    if not isinstance(attn_all, torch.Tensor) or attn_all.dim() != 4:
        raise ValueError(f"attn_all: expected a tensor [B, Hkv, W, n], got {getattr(attn_all, 'shape', attn_all)}")
    if not torch.isfinite(attn_all).all():
        raise ValueError("attn_all: contains NaN or Inf")
    B, H, W, n = attn_all.shape
    budget, recent = as_positive_int(budget, "budget"), as_positive_int(recent, "recent", minimum=0)
    if not recent <= budget <= n:
        raise ValueError(f"budget: expected recent ({recent}) <= budget <= n ({n}), got {budget}")
    score = smooth_scores(attn_all[..., : n - recent].sum(2), pool)  # [B, H, n - recent]
    top = score.topk(budget - recent, dim=-1).indices
    tail = torch.arange(n - recent, n, device=attn_all.device).expand(B, -1)
    return [torch.cat([top[:, h], tail], 1) for h in range(H)]


def duo_select(is_retrieval: torch.Tensor, n: int, sink: int, window: int, batch: int,
               device: torch.device | str | None = None) -> list[torch.Tensor]:
    """DuoAttention-like: a retrieval head keeps all ``n`` positions, a streaming head the first ``sink``
    and the last ``window`` (``is_retrieval`` [Hkv] bool, from :func:`companion.catekv.evaluate.retrieval_heads`)."""
    is_retrieval = torch.as_tensor(is_retrieval, dtype=torch.bool).cpu()
    if is_retrieval.dim() != 1:
        raise ValueError(f"is_retrieval: expected a bool tensor [Hkv], got shape {tuple(is_retrieval.shape)}")
    streaming = streaming_select(n, sink, window, len(is_retrieval), batch, device)
    full = torch.arange(n, device=device).expand(batch, n)
    return [full if r else s for r, s in zip(is_retrieval.tolist(), streaming)]


def equal_bytes_per_head(keep_per_layer: list[list[torch.Tensor]]) -> int:
    """The uniform per-head length that matches a policy's total kept tokens (rounded to the nearest)."""
    if not keep_per_layer or not all(keep_per_layer):
        raise ValueError("keep_per_layer: expected one non-empty list of kept indices per layer")
    total = sum(idx.shape[1] for layer in keep_per_layer for idx in layer)
    count = sum(len(layer) for layer in keep_per_layer)
    return int(math.floor(total / count + 0.5))
