"""Which heads are sequentially consistent? The coefficient of variation of chunk hits (CateKV, sec. 3).

For a prompt of ``n`` tokens, with chunk size ``c``, ``init`` sink tokens, ``recent`` recent tokens and a
tail of ``tail_reserve`` tokens, the *middle* of the prompt is split into ``M`` chunks of ``c`` tokens
(:func:`middle_region`). The last ``W`` prompt queries (the observation window) attend to the middle
only, eq. :math:numref:`catekv-attn`; a query *hits* a chunk when one of its tokens gets more than the
head's threshold, eq. :math:numref:`catekv-threshold`; the hits of the W queries are counted per
chunk, and the CV of the counts over chunks, eq. :math:numref:`catekv-cv`, is high when every query
hits the same few chunks (a consistent head) and low when the hits wander (an adaptive head).
"""

from __future__ import annotations

import math

import torch

from companion.validation import as_choice, as_positive_int, as_probability

__all__ = ["middle_region", "middle_attention", "chunk_hits", "head_cv", "collect_cv", "cv_from_window", "head_votes",
           "static_head_mask"]


def middle_region(n: int, chunk: int, init: int, recent: int, tail_reserve: int = 8) -> tuple[int, int, int]:
    """``(start, end, n_chunks)`` of the middle of a prompt of length ``n``.

    ``chunk_end = (n // chunk - tail_reserve // chunk) * chunk``; the middle is ``[init, chunk_end - recent)``.
    """
    n, chunk = as_positive_int(n, "n"), as_positive_int(chunk, "chunk")
    init = as_positive_int(init, "init", minimum=0)
    recent = as_positive_int(recent, "recent", minimum=0)
    tail_reserve = as_positive_int(tail_reserve, "tail_reserve", minimum=0)
    chunk_end = (n // chunk - tail_reserve // chunk) * chunk
    start, end = init, chunk_end - recent
    if end - start < chunk:
        raise ValueError(f"chunk: the middle region [{start}, {end}) of a prompt of {n} tokens holds no chunk of {chunk}")
    if (end - start) % chunk:
        raise ValueError(f"init: the middle region [{start}, {end}) must be a whole number of chunks of {chunk}; "
                         "make init and recent multiples of chunk")
    return start, end, (end - start) // chunk


def middle_attention(q_win: torch.Tensor, k: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Attention of the window queries ``q_win`` [B, Hq, W, D] over the middle keys ``k[:, :, start:end]``
    only (renormalised there), averaged over the query heads of each KV head: [B, Hkv, W, end - start]."""
    if not isinstance(k, torch.Tensor) or k.ndim != 4:
        raise ValueError(f"k: expected a [B, Hkv, P, D] tensor, got {getattr(k, 'shape', type(k).__name__)}")
    start = as_positive_int(start, "start", minimum=0)
    if not start < as_positive_int(end, "end", minimum=0) <= k.shape[2]:
        raise ValueError(f"end: expected start < end <= P = {k.shape[2]}, got start {start}, end {end!r}")
    B, Hq, W, D = q_win.shape
    Hkv = k.shape[1]
    if Hq % Hkv:
        raise ValueError(f"q_win: query heads ({Hq}) must be a multiple of KV heads ({Hkv})")
    G = Hq // Hkv
    km = k[:, :, start:end].repeat_interleave(G, 1)
    a = (q_win @ km.transpose(-1, -2) / math.sqrt(D)).softmax(-1)
    return a.view(B, Hkv, G, W, end - start).mean(2)


def _check_attn(attn_mid: torch.Tensor, chunk: int) -> None:
    if not isinstance(attn_mid, torch.Tensor) or attn_mid.dim() < 2:
        raise ValueError("attn_mid: expected a tensor [..., W, T_mid]")
    if not torch.isfinite(attn_mid).all():
        raise ValueError("attn_mid: contains NaN or Inf")
    if attn_mid.shape[-1] % chunk or attn_mid.shape[-1] < chunk:
        raise ValueError(f"chunk: the middle length {attn_mid.shape[-1]} is not a positive multiple of chunk {chunk}")


def chunk_hits(attn_mid: torch.Tensor, chunk: int, top_threshold: float = 0.5, top_fraction: float = 1.0) -> torch.Tensor:
    """Hit counts n_j, eqs. (catekv-threshold) and (catekv-hits): ``attn_mid`` [..., W, T_mid] -> [..., M].

    The threshold of each head is relative to that head's own attention values,
    ``tau = Q(1 - f) + k (Q(f) - Q(1 - f))`` with the quantiles taken over all its (query, token) entries.
    """
    chunk = as_positive_int(chunk, "chunk")
    k = as_probability(top_threshold, "top_threshold", low_open=False, high_open=False)
    _check_attn(attn_mid, chunk)
    lo, hi = _quantiles(attn_mid, top_fraction)  # Q(1 - f), Q(f) per head
    tau = (lo + k * (hi - lo))[..., None, None]
    W, T = attn_mid.shape[-2:]
    chunk_max = attn_mid.reshape(*attn_mid.shape[:-1], T // chunk, chunk).amax(-1)  # [..., W, M]
    return (chunk_max > tau).sum(-2).float() if k < 1 else (chunk_max >= tau).sum(-2).float()


def _quantiles(attn_mid: torch.Tensor, top_fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    f = as_probability(top_fraction, "top_fraction", low_open=True, high_open=False)
    if f < 0.5:
        raise ValueError(f"top_fraction: expected a value in [0.5, 1], got {f}")
    flat = attn_mid.flatten(-2).float()
    if f == 1.0:  # the 0- and 1-quantiles are the extremes: no sort needed
        return flat.amin(-1), flat.amax(-1)
    return torch.quantile(flat, 1 - f, dim=-1), torch.quantile(flat, f, dim=-1)


def head_cv(attn_mid: torch.Tensor, chunk: int, top_threshold: float = 0.5, top_fraction: float = 1.0) -> torch.Tensor:
    """CV of the chunk hits over chunks, eq. (catekv-cv): unbiased std over mean (mean 0 -> 1e-10)."""
    hits = chunk_hits(attn_mid, chunk, top_threshold, top_fraction)
    mean = hits.mean(-1)
    return hits.std(-1) / torch.where(mean == 0, torch.full_like(mean, 1e-10), mean)


def collect_cv(model, prompts: torch.Tensor, cfg) -> torch.Tensor:
    """CV of every KV head of every layer on each reference prompt: [N, L, Hkv]."""
    if not isinstance(prompts, torch.Tensor) or prompts.dim() != 2 or prompts.shape[0] == 0:
        raise ValueError("prompts: expected a non-empty LongTensor [N, P]")
    n = prompts.shape[1]
    start, end, _ = middle_region(n, cfg.chunk, cfg.init, cfg.recent, cfg.tail_reserve)
    _, ks, _, qs = model.prefill(prompts, last_q=cfg.last_q)
    cvs = [head_cv(middle_attention(q, k, start, end), cfg.chunk, cfg.top_threshold, cfg.top_fraction)
           for q, k in zip(qs, ks)]
    return torch.stack(cvs, 1)


def cv_from_window(attn_mid: list[torch.Tensor], chunk: int, top_threshold=0.5,
                   top_fraction: float = 1.0) -> torch.Tensor:
    """The CVs of :func:`collect_cv` from a prefill's window attention over the middle (``attn_mid``, one
    [N, Hkv, W, T_mid] tensor per layer, as :class:`companion.catekv.evaluate.Prefill` keeps it), so that
    several thresholds can be tried on one prefill: [N, L, Hkv]. A sequence of levels ``top_threshold``
    gives [K, N, L, Hkv], one per level, with the quantiles of ``top_fraction`` taken once per layer."""
    if not isinstance(attn_mid, (list, tuple)) or not attn_mid:
        raise ValueError("attn_mid: expected a non-empty list of [N, Hkv, W, T_mid] tensors, one per layer")
    if any(not isinstance(a, torch.Tensor) or a.dim() != 4 for a in attn_mid):
        raise ValueError("attn_mid: every layer's entry must be a tensor [N, Hkv, W, T_mid]")
    many = isinstance(top_threshold, (list, tuple))
    levels = [as_probability(k, "top_threshold", low_open=False, high_open=False)
              for k in (top_threshold if many else (top_threshold,))]
    if not levels:
        raise ValueError("top_threshold: expected a level k or a non-empty sequence of levels")
    chunk = as_positive_int(chunk, "chunk")
    per_level = [[] for _ in levels]
    for a in attn_mid:
        _check_attn(a, chunk)
        lo, hi = _quantiles(a, top_fraction)
        T = a.shape[-1]
        chunk_max = a.reshape(*a.shape[:-1], T // chunk, chunk).amax(-1)
        for i, k in enumerate(levels):  # eqs. (catekv-threshold)-(catekv-cv), as in head_cv
            tau = (lo + k * (hi - lo))[..., None, None]
            hits = (chunk_max > tau).sum(-2).float() if k < 1 else (chunk_max >= tau).sum(-2).float()
            mean = hits.mean(-1)
            per_level[i].append(hits.std(-1) / torch.where(mean == 0, torch.full_like(mean, 1e-10), mean))
    cvs = torch.stack([torch.stack(layers, 1) for layers in per_level]).cpu()
    return cvs if many else cvs[0]


def head_votes(cv: torch.Tensor, adaptive_ratio: float) -> torch.Tensor:
    """Votes of the static head mask: in how many samples each head's CV is at or below that sample's
    ``adaptive_ratio``-quantile (``cv`` [N, L, Hkv] -> [L, Hkv])."""
    r = as_probability(adaptive_ratio, "adaptive_ratio", low_open=False, high_open=False)
    if not isinstance(cv, torch.Tensor) or cv.dim() != 3 or cv.shape[0] == 0:
        raise ValueError(f"cv: expected a tensor [N, L, Hkv] with N >= 1, got {getattr(cv, 'shape', type(cv))}")
    if not torch.isfinite(cv).all():
        raise ValueError("cv: contains NaN or Inf")
    N, L, H = cv.shape
    flat = cv.reshape(N, L * H).double()
    return (flat <= torch.quantile(flat, r, dim=1, keepdim=True)).sum(0).view(L, H)


def static_head_mask(cv: torch.Tensor, adaptive_ratio: float, ranking: str = "vote",
                     ties: str = "keep") -> torch.Tensor:
    """The static head mask (True = adaptive) from per-sample CVs ``cv`` [N, L, Hkv].

    ``ranking="vote"`` (the official ``static.py``): the heads with at least as many
    :func:`head_votes` as the ``ceil(r L Hkv)``-th most voted head are adaptive. With
    ``ties="keep"`` (the official rule) every head tied with that one is adaptive too, so
    the mask can hold more than ``ceil(r L Hkv)`` heads; ``ties="mean-cv"`` (an ablation)
    keeps exactly ``ceil(r L Hkv)``, breaking ties by the lower mean CV.
    ``ranking="mean"``: the ``ceil(r L Hkv)`` heads with the lowest CV averaged over the
    samples (``ties`` does not apply).
    """
    ranking = as_choice(ranking, "ranking", ("vote", "mean"))
    ties = as_choice(ties, "ties", ("keep", "mean-cv"))
    votes = head_votes(cv, adaptive_ratio).flatten().double()
    N, L, H = cv.shape
    n_adaptive = math.ceil(round(adaptive_ratio * L * H, 9))
    mask = torch.zeros(L * H, dtype=torch.bool)
    if n_adaptive == 0:
        return mask.view(L, H)
    mean = cv.reshape(N, L * H).double().mean(0)
    if ranking == "vote" and ties == "keep":
        threshold = votes.sort(descending=True).values[n_adaptive - 1]
        mask = votes >= threshold
        return mask.view(L, H)
    if ranking == "vote":
        order = sorted(range(L * H),
                       key=lambda i: (-votes[i].item(), mean[i].item()))
    else:
        order = mean.argsort().tolist()
    mask[order[:n_adaptive]] = True
    return mask.view(L, H)
