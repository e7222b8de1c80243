"""Running a policy end to end (prefill, compress, decode token by token) and the chapter's measurements."""

from __future__ import annotations

import torch

from companion.validation import as_instance, as_positive_int, as_probability

from .cache import HybridKVCache
from .data import VOCAB, RecallBatch
from .heads import middle_attention, middle_region
from .model import causal_attention_probs
from .policy import CateKVConfig, catekv_select, duo_select, equal_bytes_per_head, snapkv_select, streaming_select

__all__ = ["Prefill", "policy_keep", "decode_accuracy", "accuracy", "captured_mass", "duo_gates", "retrieval_heads",
           "solo_compression", "concat", "amdahl", "measured_attention_speedup", "kernel_errors",
           "llama_kv_projection", "METHODS"]

METHODS = ("full", "catekv", "streaming", "snapkv", "duo", "random-heads", "no-critical", "random-chunks")


def _check_run(model, batch, pre) -> None:
    from .model import TinyDecoder

    as_instance(model, "model", TinyDecoder), as_instance(batch, "batch", RecallBatch)
    as_instance(pre, "pre", Prefill)
    if pre.n != batch.prompt.shape[1]:
        raise ValueError(f"pre: the prefill of a {pre.n}-token prompt, but batch's prompt has {batch.prompt.shape[1]}")


class Prefill:
    """The prefill of a batch of prompts: post-RoPE K/V per layer and the observation window's attention."""

    def __init__(self, model, prompt: torch.Tensor, cfg: CateKVConfig):
        from .model import TinyDecoder

        as_instance(model, "model", TinyDecoder), as_instance(cfg, "cfg", CateKVConfig)
        if not isinstance(prompt, torch.Tensor) or prompt.ndim != 2 or prompt.dtype.is_floating_point:
            raise ValueError(f"prompt: expected an [N, P] tensor of token ids, got "
                             f"{getattr(prompt, 'shape', type(prompt).__name__)}")
        self.n = prompt.shape[1]
        self.cfg = cfg
        with torch.no_grad():
            _, self.ks, self.vs, qs = model.prefill(prompt, last_q=cfg.last_q)
            start, end, _ = middle_region(self.n, cfg.chunk, cfg.init, cfg.recent, cfg.tail_reserve)
            G = model.q_heads // model.kv_heads
            self.attn_mid = [middle_attention(q, k, start, end) for q, k in zip(qs, self.ks)]
            self.attn_all = [causal_attention_probs(q, k.repeat_interleave(G, 1), self.n - cfg.last_q)
                             .view(k.shape[0], k.shape[1], G, cfg.last_q, self.n).mean(2) for q, k in zip(qs, self.ks)]


def policy_keep(method: str, pre: Prefill, head_mask: torch.Tensor, *, generator: torch.Generator | None = None,
                cfg: CateKVConfig | None = None, retrieval: torch.Tensor | None = None):
    """``keep[layer][head]`` for ``method`` (one of :data:`METHODS`), sized to CateKV's bytes where it applies.

    ``head_mask`` [L, Hkv] True = adaptive (CateKV's static mask). ``random-heads`` draws a mask with the
    same number of adaptive heads from ``generator``; ``random-chunks`` keeps CateKV's mask and bytes but
    draws the consistent heads' middle chunks at random (from ``generator``); ``duo`` keeps everything in the ``retrieval`` heads
    [L, Hkv] and a sink plus a recent window of CateKV's consistent-head length in the others
    (``no-critical`` is the same with CateKV's own mask; see :func:`duo_gates`). ``cfg`` overrides the budget of ``pre.cfg``
    (it must share its chunk, sink, recent window, observation window and tail).
    """
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    cfg, n = cfg or pre.cfg, pre.n
    if (cfg.chunk, cfg.init, cfg.recent, cfg.last_q, cfg.tail_reserve) != (
            pre.cfg.chunk, pre.cfg.init, pre.cfg.recent, pre.cfg.last_q, pre.cfg.tail_reserve):
        raise ValueError("cfg: must share chunk, init, recent, last_q and tail_reserve with the prefill's config")
    B, dev = pre.ks[0].shape[0], pre.ks[0].device
    L, H = head_mask.shape
    if method == "full":
        return [[torch.arange(n, device=dev).expand(B, n)] * H for _ in range(L)]
    if method == "duo":
        if retrieval is None or tuple(retrieval.shape) != (L, H):
            raise ValueError(f"retrieval: method 'duo' needs a bool mask [L={L}, Hkv={H}] of retrieval heads")
        window = cfg.consistent_length(n) - cfg.init
        return [duo_select(retrieval[l], n, cfg.init, window, B, dev) for l in range(L)]
    if method == "random-heads":
        perm = torch.randperm(L * H, generator=generator)[: int(head_mask.sum())]
        head_mask = torch.zeros(L * H, dtype=torch.bool)
        head_mask[perm] = True
        head_mask = head_mask.view(L, H)
    if method == "random-chunks":  # CateKV's mask and bytes, the middle chunks drawn at random
        return [catekv_select(torch.rand(pre.attn_mid[l].shape, generator=generator).to(dev), n, head_mask[l], cfg)
                for l in range(L)]
    if method in ("catekv", "random-heads", "no-critical"):
        return [catekv_select(pre.attn_mid[l], n, head_mask[l], cfg, critical=method != "no-critical")
                for l in range(L)]
    per_head = equal_bytes_per_head([catekv_select(pre.attn_mid[l], n, head_mask[l], cfg) for l in range(L)])
    if method == "streaming":
        return [streaming_select(n, cfg.init, per_head - cfg.init, H, B, dev) for _ in range(L)]
    return [snapkv_select(pre.attn_all[l], per_head, cfg.recent) for l in range(L)]  # snapkv


@torch.no_grad()
def decode_accuracy(model, batch: RecallBatch, pre: Prefill, keep, backend: str = "auto") -> dict:
    """Build the hybrid cache from ``keep``, feed the stream token by token, score the answers.

    Returns ``acc`` (fraction of right answers: argmax over the value tokens), ``correct`` [N, T] and
    ``kv_bytes`` (fp16 bytes of the cache at the end of the prefill) and ``full_bytes``.
    """
    _check_run(model, batch, pre)
    cache = HybridKVCache.from_prefill(pre.ks, pre.vs, keep)
    kv = cache.nbytes()
    full = 2 * 2 * model.head_dim * model.kv_heads * model.n_layers * pre.n * batch.prompt.shape[0]
    stream, P = batch.stream, pre.n
    values = slice(VOCAB.value0, VOCAB.value0 + VOCAB.n_values)
    preds = torch.empty_like(batch.answers)
    answer_steps = {int(s): j for j, s in enumerate(batch.answer_pos[0].tolist())}
    for t in range(stream.shape[1] - 1):
        prev = batch.prompt[:, -1] if t == 0 else stream[:, t - 1]
        logits = model.decode_step(stream[:, t], prev, cache, P + t, backend=backend)
        if t in answer_steps:
            preds[:, answer_steps[t]] = VOCAB.value0 + logits[:, values].argmax(-1)
    correct = preds == batch.answers
    return {"acc": float(correct.float().mean()), "correct": correct, "kv_bytes": kv, "full_bytes": full}


def accuracy(model, tests: list[RecallBatch], pres: list[Prefill], method: str, head_mask: torch.Tensor,
             cfg: CateKVConfig | None = None, *, draws: int = 1, seed: int = 0,
             retrieval: torch.Tensor | None = None) -> dict:
    """Stream accuracy of ``method`` over the test seeds: ``acc`` (mean over prompts), ``ci`` (95%
    half-width over prompts) and ``ratio`` (full / kept bytes). ``random-heads`` and ``random-chunks``
    average ``draws`` seeded draws per test seed."""
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    draws = as_positive_int(draws, "draws")
    if not tests or len(tests) != len(pres):
        raise ValueError(f"tests: expected a non-empty list with one Prefill per batch, got {len(tests)} and {len(pres)}")
    accs, ratios = [], []
    for s, (batch, pre) in enumerate(zip(tests, pres)):
        for d in range(draws if method == "random-heads" else 1):
            gen = torch.Generator().manual_seed(1_000 * seed + 10 * s + d)
            keep = policy_keep(method, pre, head_mask, generator=gen, cfg=cfg, retrieval=retrieval)
            out = decode_accuracy(model, batch, pre, keep)
            accs.append(out["correct"].float().mean(1).cpu())
            ratios.append(out["full_bytes"] / out["kv_bytes"])
    acc = torch.cat(accs)
    return {"acc": float(acc.mean()), "ci": float(1.96 * acc.std() / len(acc) ** 0.5),
            "ratio": sum(ratios) / len(ratios)}


@torch.no_grad()
def captured_mass(model, batch: RecallBatch, pre: Prefill, keep=None) -> torch.Tensor:
    """For every (layer, KV head): the decode-time attention mass (full cache) that falls on the prompt
    positions of ``keep`` (default: what the *consistent-head* policy keeps, sink + critical chunks +
    recent + tail) and on the decoded tokens, averaged over the decode steps: [B, L, Hkv] per prompt."""
    _check_run(model, batch, pre)
    L, H = model.n_layers, model.kv_heads
    B, dev = batch.prompt.shape[0], batch.prompt.device
    if keep is None:
        keep = [catekv_select(pre.attn_mid[l], pre.n, torch.zeros(H, dtype=torch.bool), pre.cfg) for l in range(L)]
    inside = []  # [L][B, H, n] masks of kept prompt positions
    for l in range(L):
        m = torch.zeros(B, H, pre.n, dtype=torch.bool, device=dev)
        for h in range(H):
            m[:, h].scatter_(1, keep[l][h], True)
        inside.append(m)
    cache = HybridKVCache.full(pre.ks, pre.vs)
    total = torch.zeros(B, L, H, device=dev)
    steps = batch.stream.shape[1] - 1
    for t in range(steps):
        prev = batch.prompt[:, -1] if t == 0 else batch.stream[:, t - 1]
        _, attns = model.decode_step(batch.stream[:, t], prev, cache, pre.n + t, backend="torch",
                                     return_attn=True)
        for l in range(L):
            p = attns[l]  # [B, H, n + t + 1]
            total[:, l] += (p[..., : pre.n] * inside[l]).sum(-1) + p[..., pre.n:].sum(-1)
    return (total / steps).cpu()


def duo_gates(model, batch: RecallBatch, pre: Prefill) -> torch.Tensor:
    """DuoAttention-lite's profiled gates on reference prompts and their decode streams: a head's gate is
    the decode-time attention mass it would lose as a streaming head (sink plus a recent window of
    CateKV's consistent-head length), averaged over the prompts: [L, Hkv]."""
    _check_run(model, batch, pre)
    everyone = torch.ones(model.n_layers, model.kv_heads, dtype=torch.bool)
    streaming = policy_keep("duo", pre, everyone, retrieval=~everyone)
    return 1 - captured_mass(model, batch, pre, streaming).mean(0)


def retrieval_heads(gate: torch.Tensor, n_retrieval: int) -> torch.Tensor:
    """The ``n_retrieval`` heads with the largest gates: the retrieval heads, [L, Hkv] bool."""
    if not isinstance(gate, torch.Tensor) or gate.dim() != 2 or not torch.isfinite(gate).all():
        raise ValueError(f"gate: expected a finite tensor [L, Hkv], got {getattr(gate, 'shape', type(gate).__name__)}")
    n_retrieval = as_positive_int(n_retrieval, "n_retrieval", minimum=0)
    if n_retrieval > gate.numel():
        raise ValueError(f"n_retrieval: expected at most {gate.numel()} heads, got {n_retrieval}")
    mask = torch.zeros(gate.numel(), dtype=torch.bool)
    mask[gate.flatten().argsort(descending=True)[:n_retrieval]] = True
    return mask.view(gate.shape)


def solo_compression(model, batch: RecallBatch, pre: Prefill) -> list[dict]:
    """Compress one head at a time (every other head whole): the accuracy with the consistent-head
    selection (sink, critical chunks, recent) and with a streaming head (sink, recent) of equal bytes."""
    _check_run(model, batch, pre)
    L, H = model.n_layers, model.kv_heads
    rows = []
    for l in range(L):
        for h in range(H):
            only = torch.ones(L, H, dtype=torch.bool)
            only[l, h] = False
            rows.append(dict(layer=l, head=h,
                             critical=decode_accuracy(model, batch, pre, policy_keep("catekv", pre, only))["acc"],
                             streaming=decode_accuracy(model, batch, pre, policy_keep("no-critical", pre, only))["acc"]))
    return rows


def concat(batches: list[RecallBatch]) -> RecallBatch:
    """Several batches (e.g. one per test seed) as one, so every method decodes them in one pass."""
    if not batches or not all(isinstance(b, RecallBatch) for b in batches):
        raise ValueError("batches: expected a non-empty list of RecallBatch")
    fields = ("prompt", "stream", "answer_pos", "answers", "passkey_pos", "demo_pos")
    return RecallBatch(*(torch.cat([getattr(b, f) for b in batches]) for f in fields))


def amdahl(fraction: float, speedup: float) -> float:
    """End-to-end speed-up when a ``fraction`` of the time is sped up by ``speedup`` (Amdahl's law)."""
    if not 0 <= fraction <= 1 or not speedup > 0:
        raise ValueError(f"fraction: expected a fraction in [0, 1] and a positive speed-up, got {fraction}, {speedup}")
    return 1 / ((1 - fraction) + fraction / speedup)


def measured_attention_speedup(records: list[dict]) -> dict | None:
    """The GPU benchmark's decode-attention speed-up of the CateKV cache over full-cache SDPA (else over
    our kernel on the full cache), at the longest context measured with batch 1, from the records of
    :func:`companion.kernels.load_benchmark` (smoke runs on a CPU are not measurements):
    ``{"speedup", "device", "context"}``, or None when there is none."""
    if not isinstance(records, (list, tuple)) or not all(isinstance(r, dict) for r in records):
        raise ValueError(f"records: expected a list of benchmark records (dicts), got {type(records).__name__}")
    rows = []
    for rec in records:
        speedup = rec.get("speedup") or {}
        side = next((s for s in ("sdpa_full", "kernel_full") if speedup.get(s)), None)
        if side and not rec.get("smoke", False) and rec.get("batch") == 1:
            rows.append({"speedup": float(speedup[side]), "context": int(rec["context"]),
                         "device": str(rec.get("device", "a GPU"))})
    return max(rows, key=lambda r: r["context"]) if rows else None


def llama_kv_projection(n: int = 131_072, adaptive_ratio: float = 0.4, budget: int = 2048, tail: int = 32,
                        layers: int = 32, kv_heads: int = 8, head_dim: int = 128, bytes_per_element: int = 2) -> dict:
    """KV bytes of a Llama-3-8B-shaped model at context ``n``: full vs CateKV (per layer: the adaptive heads
    keep n tokens, the consistent ones ``budget + tail``), eq. (catekv-bytes)."""
    n = as_positive_int(n, "n")
    for name, value in (("budget", budget), ("layers", layers), ("kv_heads", kv_heads), ("head_dim", head_dim),
                        ("bytes_per_element", bytes_per_element)):
        as_positive_int(value, name)
    as_positive_int(tail, "tail", minimum=0)
    as_probability(adaptive_ratio, "adaptive_ratio", low_open=False, high_open=False)
    per_token_head = 2 * bytes_per_element * head_dim
    full = per_token_head * layers * kv_heads * n
    n_adapt = adaptive_ratio * kv_heads
    cate = per_token_head * layers * (n_adapt * n + (kv_heads - n_adapt) * min(n, budget + tail))
    return {"full_bytes": full, "catekv_bytes": cate, "ratio": full / cate,
            "full_gib": full / 2**30, "catekv_gib": cate / 2**30}


def kernel_errors(cache: HybridKVCache, layer: int, q_heads: int, backend: str, generator: torch.Generator) -> dict:
    """Largest |kernel - reference| of the packed decode attention (``backend`` against the torch
    reference), on ``layer`` of a real cache and on a ragged GQA case with empty heads (fp32)."""
    as_instance(cache, "cache", HybridKVCache)
    as_positive_int(layer, "layer", minimum=0), as_positive_int(q_heads, "q_heads")
    as_instance(generator, "generator", torch.Generator)
    from companion.kernels.sparse_decode_attention import pack_varlen, sparse_decode_attention

    k_p, v_p, off, lens = cache.packed(layer)
    dev = k_p.device
    D = k_p.shape[1]
    cases = {"model cache": (torch.randn(off.shape[0], q_heads, D, generator=generator).to(dev), k_p, v_p, off, lens)}
    lengths = [[0, 1, 37, 16], [5, 64, 0, 100]]
    k_h = [[torch.randn(n, 16, generator=generator).to(dev) for n in row] for row in lengths]
    v_h = [[torch.randn(n, 16, generator=generator).to(dev) for n in row] for row in lengths]
    cases["ragged GQA"] = (torch.randn(2, 16, 16, generator=generator).to(dev), *pack_varlen(k_h, v_h))
    errors = {}
    for name, (q, k, v, o, n) in cases.items():
        ref = sparse_decode_attention(q, k, v, o, n, backend="torch")
        out = sparse_decode_attention(q, k, v, o, n, backend=backend, block_n=16, num_splits=2)
        errors[name] = float((out.float() - ref.float()).abs().max())
    return errors
