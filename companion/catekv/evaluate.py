"""Running a policy end to end (prefill, compress, decode token by token) and the chapter's measurements."""

from __future__ import annotations

import torch

from .cache import HybridKVCache
from .data import VOCAB, RecallBatch
from .heads import middle_attention, middle_region
from .model import causal_attention_probs
from .policy import CateKVConfig, catekv_select, equal_bytes_per_head, snapkv_select, streaming_select

__all__ = ["Prefill", "run_prefill", "policy_keep", "decode_accuracy", "captured_mass", "llama_kv_projection",
           "METHODS"]

METHODS = ("full", "catekv", "streaming", "snapkv", "random-heads", "no-critical")


class Prefill:
    """The prefill of a batch of prompts: post-RoPE K/V per layer and the observation window's attention."""

    def __init__(self, model, prompt: torch.Tensor, cfg: CateKVConfig):
        self.n = prompt.shape[1]
        self.cfg = cfg
        with torch.no_grad():
            _, self.ks, self.vs, qs = model.prefill(prompt, last_q=cfg.last_q)
            start, end, _ = middle_region(self.n, cfg.chunk, cfg.init, cfg.recent, cfg.tail_reserve)
            G = model.q_heads // model.kv_heads
            self.attn_mid = [middle_attention(q, k, start, end) for q, k in zip(qs, self.ks)]
            self.attn_all = [causal_attention_probs(q, k.repeat_interleave(G, 1), self.n - cfg.last_q)
                             .view(k.shape[0], k.shape[1], G, cfg.last_q, self.n).mean(2) for q, k in zip(qs, self.ks)]


def run_prefill(model, prompt, cfg) -> Prefill:
    return Prefill(model, prompt, cfg)


def policy_keep(method: str, pre: Prefill, head_mask: torch.Tensor, *, generator: torch.Generator | None = None,
                cfg: CateKVConfig | None = None):
    """``keep[layer][head]`` for ``method`` (one of :data:`METHODS`), sized to CateKV's bytes where it applies.

    ``head_mask`` [L, Hkv] True = adaptive (CateKV's static mask). ``random-heads`` draws a mask with the
    same number of adaptive heads from ``generator``. ``cfg`` overrides the budget of ``pre.cfg`` (it must
    share its chunk, sink, recent window, observation window and tail).
    """
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    cfg, n = cfg or pre.cfg, pre.n
    if (cfg.chunk, cfg.init, cfg.recent, cfg.last_q, cfg.tail_reserve) != (
            pre.cfg.chunk, pre.cfg.init, pre.cfg.recent, pre.cfg.last_q, pre.cfg.tail_reserve):
        raise ValueError("cfg: must share chunk, init, recent, last_q and tail_reserve with the prefill's config")
    B = pre.ks[0].shape[0]
    L, H = head_mask.shape
    if method == "full":
        return [[torch.arange(n).expand(B, n)] * H for _ in range(L)]
    if method == "random-heads":
        perm = torch.randperm(L * H, generator=generator)[: int(head_mask.sum())]
        head_mask = torch.zeros(L * H, dtype=torch.bool)
        head_mask[perm] = True
        head_mask = head_mask.view(L, H)
    if method in ("catekv", "random-heads", "no-critical"):
        return [catekv_select(pre.attn_mid[l], n, head_mask[l], cfg, critical=method != "no-critical")
                for l in range(L)]
    per_head = equal_bytes_per_head([catekv_select(pre.attn_mid[l], n, head_mask[l], cfg) for l in range(L)])
    if method == "streaming":
        return [streaming_select(n, cfg.init, per_head - cfg.init, H, B) for _ in range(L)]
    return [snapkv_select(pre.attn_all[l], per_head, cfg.recent) for l in range(L)]  # snapkv


@torch.no_grad()
def decode_accuracy(model, batch: RecallBatch, pre: Prefill, keep, backend: str = "torch") -> dict:
    """Build the hybrid cache from ``keep``, feed the stream token by token, score the answers.

    Returns ``acc`` (fraction of right answers: argmax over the value tokens), ``correct`` [N, T] and
    ``kv_bytes`` (fp16 bytes of the cache at the end of the prefill) and ``full_bytes``.
    """
    cache = HybridKVCache.from_prefill(pre.ks, pre.vs, keep)
    kv = cache.nbytes()
    full = 2 * 2 * model.head_dim * model.kv_heads * model.n_layers * pre.n * batch.prompt.shape[0]
    stream, P = batch.stream, pre.n
    values = slice(VOCAB.value0, VOCAB.value0 + VOCAB.n_values)
    preds = torch.empty_like(batch.answers)
    answer_steps = {int(s): j for j, s in enumerate(batch.answer_pos[0])}
    for t in range(stream.shape[1] - 1):
        prev = batch.prompt[:, -1] if t == 0 else stream[:, t - 1]
        logits = model.decode_step(stream[:, t], prev, cache, P + t, backend=backend)
        if t in answer_steps:
            preds[:, answer_steps[t]] = VOCAB.value0 + logits[:, values].argmax(-1)
    correct = preds == batch.answers
    return {"acc": float(correct.float().mean()), "correct": correct, "kv_bytes": kv, "full_bytes": full}


@torch.no_grad()
def captured_mass(model, batch: RecallBatch, pre: Prefill, head_mask_all_consistent=None) -> torch.Tensor:
    """For every (layer, KV head): the decode-time attention mass (full cache) that falls on the tokens the
    *consistent-head* policy would keep for that head (sink + critical chunks + recent + tail + decoded
    tokens), averaged over the decode steps and the batch: [L, Hkv]."""
    L, H = model.n_layers, model.kv_heads
    keep = [catekv_select(pre.attn_mid[l], pre.n, torch.zeros(H, dtype=torch.bool), pre.cfg) for l in range(L)]
    B = batch.prompt.shape[0]
    inside = []  # [L][B, H, n] masks of kept prompt positions
    for l in range(L):
        m = torch.zeros(B, H, pre.n, dtype=torch.bool)
        for h in range(H):
            m[:, h].scatter_(1, keep[l][h], True)
        inside.append(m)
    cache = HybridKVCache.full(pre.ks, pre.vs)
    total = torch.zeros(L, H)
    steps = batch.stream.shape[1] - 1
    for t in range(steps):
        prev = batch.prompt[:, -1] if t == 0 else batch.stream[:, t - 1]
        _, attns = model.decode_step(batch.stream[:, t], prev, cache, pre.n + t, return_attn=True)
        for l in range(L):
            p = attns[l]  # [B, H, n + t + 1]
            total[l] += (p[..., : pre.n] * inside[l]).sum(-1).mean(0) + p[..., pre.n:].sum(-1).mean(0)
    return total / steps


def llama_kv_projection(n: int = 131_072, adaptive_ratio: float = 0.4, budget: int = 2048, tail: int = 32,
                        layers: int = 32, kv_heads: int = 8, head_dim: int = 128, bytes_per_element: int = 2) -> dict:
    """KV bytes of a Llama-3-8B-shaped model at context ``n``: full vs CateKV (per layer: the adaptive heads
    keep n tokens, the consistent ones ``budget + tail``), eq. (catekv-bytes)."""
    per_token_head = 2 * bytes_per_element * head_dim
    full = per_token_head * layers * kv_heads * n
    n_adapt = adaptive_ratio * kv_heads
    cate = per_token_head * layers * (n_adapt * n + (kv_heads - n_adapt) * min(n, budget + tail))
    return {"full_bytes": full, "catekv_bytes": cate, "ratio": full / cate,
            "full_gib": full / 2**30, "catekv_gib": cate / 2**30}
