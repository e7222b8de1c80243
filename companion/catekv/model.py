"""A tiny decoder-only transformer with a real KV cache: prefill the prompt, then decode token by token.

Pre-norm RMSNorm, rotary position embeddings (RoPE), SwiGLU MLP, tied embeddings, and grouped-query
attention (``q_heads`` a multiple of ``kv_heads``). The input of position t is the embedding of its token
plus a second embedding of the token before it (a "token shift", as in RWKV, or the smeared keys of
induction-head studies): a record ``v k`` then carries its value at the key's position, and a single
attention head can retrieve it, which makes the model learn the task in minutes on a CPU. Keys are
cached *after* RoPE, so a cache may hold any subset of positions in any order
(eq. :math:numref:`catekv-decode`): that is what lets CateKV gather the critical chunks of a
consistent head. Every tensor is created on the device of the model's inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from companion.kernels.sparse_decode_attention import sparse_decode_attention
from companion.validation import as_choice, as_finite_tensor, as_positive_int

__all__ = ["TinyDecoder", "decode_backend", "causal_attention_probs"]


def rope_tables(positions: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device) / head_dim)
    ang = positions.float()[:, None] * inv[None]
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[2i], x[2i+1]) of the last dimension; ``cos``/``sin`` broadcast over [..., T, D/2]."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    return out.flatten(-2)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, dim: int, q_heads: int, kv_heads: int, mlp_mult: int):
        super().__init__()
        self.hq, self.hkv, self.hd = q_heads, kv_heads, dim // q_heads
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.wq = nn.Linear(dim, q_heads * self.hd, bias=False)
        self.wkv = nn.Linear(dim, 2 * kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(q_heads * self.hd, dim, bias=False)
        self.w_gate_up = nn.Linear(dim, 2 * mlp_mult * dim, bias=False)
        self.w_down = nn.Linear(mlp_mult * dim, dim, bias=False)

    def qkv(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.norm1(x)
        q = self.wq(h).view(B, T, self.hq, self.hd).transpose(1, 2)
        k, v = self.wkv(h).view(B, T, 2, self.hkv, self.hd).permute(2, 0, 3, 1, 4)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def mlp(self, x):
        gate, up = self.w_gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.w_down(F.silu(gate) * up)


class TinyDecoder(nn.Module):
    """``TinyDecoder(vocab, dim, layers, q_heads, kv_heads)``: the chapter's long-context model."""

    def __init__(self, vocab: int, dim: int = 64, layers: int = 3, q_heads: int = 4, kv_heads: int = 4,
                 mlp_mult: int = 4, rope_base: float = 10_000.0):
        super().__init__()
        vocab, dim = as_positive_int(vocab, "vocab"), as_positive_int(dim, "dim")
        q_heads, kv_heads = as_positive_int(q_heads, "q_heads"), as_positive_int(kv_heads, "kv_heads")
        if dim % q_heads or (dim // q_heads) % 2:
            raise ValueError(f"q_heads: dim ({dim}) must split into q_heads ({q_heads}) heads of even size")
        if q_heads % kv_heads:
            raise ValueError(f"kv_heads: q_heads ({q_heads}) must be a multiple of kv_heads ({kv_heads})")
        self.config = dict(vocab=vocab, dim=dim, layers=layers, q_heads=q_heads, kv_heads=kv_heads,
                           mlp_mult=mlp_mult, rope_base=rope_base)
        self.head_dim, self.q_heads, self.kv_heads, self.rope_base = dim // q_heads, q_heads, kv_heads, rope_base
        self.embed = nn.Embedding(vocab, dim)
        self.prev_embed = nn.Embedding(vocab, dim)  # the token shift
        self.blocks = nn.ModuleList(Block(dim, q_heads, kv_heads, mlp_mult) for _ in range(layers))
        self.norm = RMSNorm(dim)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.prev_embed.weight, std=0.02)

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    def _logits(self, x):
        return self.norm(x) @ self.embed.weight.T

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Full causal attention over ``tokens`` [B, T] (training); logits [B, T, V]."""
        return self.prefill(tokens)[0]

    def hidden(self, tokens: torch.Tensor, last_q: int = 0):
        """The residual stream after the last block, [B, P, dim], with the per-layer caches
        ``(x, ks, vs, qs)`` as :meth:`prefill` returns them."""
        B, P = tokens.shape
        cos, sin = rope_tables(torch.arange(P, device=tokens.device), self.head_dim, self.rope_base)
        x = self.embed(tokens)
        x = x + F.pad(self.prev_embed(tokens[:, :-1]), (0, 0, 1, 0))  # position 0 has no previous token
        ks, vs, qs = [], [], []
        G = self.q_heads // self.kv_heads
        for blk in self.blocks:
            q, k, v = blk.qkv(x, cos, sin)
            att = F.scaled_dot_product_attention(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1),
                                                 is_causal=True)
            x = x + blk.wo(att.transpose(1, 2).reshape(B, P, -1))
            x = blk.mlp(x)
            ks.append(k)
            vs.append(v)
            qs.append(q[:, :, P - last_q:] if last_q else None)
        return x, ks, vs, (qs if last_q else None)

    def prefill(self, tokens: torch.Tensor, last_q: int = 0):
        """Process the prompt with full causal attention.

        Returns ``(logits [B,P,V], ks, vs, qs)``: per layer the post-RoPE keys and values
        [B, Hkv, P, D] (what a cache stores) and, when ``last_q`` > 0, the post-RoPE queries of the
        last ``last_q`` positions [B, Hq, W, D] (the observation window), else ``None``.
        """
        x, ks, vs, qs = self.hidden(tokens, last_q)
        return self._logits(x), ks, vs, qs

    def decode_step(self, token: torch.Tensor, prev_token: torch.Tensor, cache, pos: int, backend: str = "auto",
                    return_attn: bool = False):
        """One new token per sequence (``token`` [B], after ``prev_token`` [B]) at position ``pos``: append its
        K/V to every head of ``cache`` (a :class:`~companion.catekv.cache.HybridKVCache`), attend over what
        each head keeps, eq. :math:numref:`catekv-decode`, return logits [B, V] (and, with ``return_attn``,
        the per-KV-head attention of each layer, torch path only).

        ``backend``: ``"auto"`` (the Triton kernel over the packed cache on CUDA tensors, per-group torch
        attention elsewhere), ``"triton"`` or ``"torch"``.
        """
        backend = as_choice(backend, "backend", ("auto", "torch", "triton"))
        use_kernel = decode_backend(token, backend) == "triton"
        if use_kernel and backend == "auto" and torch.is_grad_enabled() and \
                any(p.requires_grad for p in self.parameters()):
            use_kernel = False  # the kernel has no backward: "auto" keeps the step differentiable
        if use_kernel and return_attn:
            raise ValueError("return_attn: the attention weights are only available on the torch path")
        B = token.shape[0]
        cos, sin = rope_tables(torch.tensor([pos], device=token.device), self.head_dim, self.rope_base)
        x = (self.embed(token) + self.prev_embed(prev_token))[:, None]
        attns = []
        for layer, blk in enumerate(self.blocks):
            q, k, v = blk.qkv(x, cos, sin)  # [B, H, 1, D]
            cache.append(layer, k[:, :, 0], v[:, :, 0])
            if use_kernel:
                kp, vp, offsets, lengths = cache.packed(layer)
                out = sparse_decode_attention(q[:, :, 0], kp, vp, offsets, lengths, backend="triton")
            else:
                out, probs = cache.attend(layer, q[:, :, 0], return_probs=return_attn)
                if return_attn:
                    attns.append(probs)
            x = x + blk.wo(out.reshape(B, 1, -1))
            x = blk.mlp(x)
        logits = self._logits(x)[:, 0]
        return (logits, attns) if return_attn else logits


def decode_backend(x: torch.Tensor, backend: str) -> str:
    """``"triton"`` or ``"torch"`` for a decode step on ``x``'s device, as the kernels choose it:
    ``"auto"`` takes Triton where it runs (CUDA), never on CPU tensors outside the interpreter."""
    try:
        from companion.kernels import select_backend
    except ImportError:  # the kernels package before it exported select_backend
        select_backend = None
    if select_backend is not None:
        return select_backend(x, backend)
    if backend == "auto":
        return "triton" if x.device.type == "cuda" else "torch"
    return backend


def causal_attention_probs(q: torch.Tensor, k: torch.Tensor, q_start: int) -> torch.Tensor:
    """Softmax attention of queries ``q`` [B,H,W,D] (positions q_start..) over keys ``k`` [B,H,P,D], causal."""
    for name, x in (("q", q), ("k", k)):
        as_finite_tensor(x, name, ndim=4)
    as_positive_int(q_start, "q_start", minimum=0)
    W, P = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.arange(P, device=q.device)[None] > (q_start + torch.arange(W, device=q.device))[:, None]
    return s.masked_fill(mask, float("-inf")).softmax(-1)
