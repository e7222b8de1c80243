"""Decode attention over a packed, variable-length KV cache (one new query token per sequence).

Layout (what CateKV's hybrid cache stores, eq. :math:numref:`catekv-decode` of the chapter):

* ``k``, ``v`` -- [T, D]: every kept key/value row of every (sequence, KV head), packed back to back;
* ``offsets``, ``lengths`` -- [B, Hkv] integers: KV head ``h`` of sequence ``b`` keeps the rows
  ``offsets[b, h] : offsets[b, h] + lengths[b, h]``; lengths may differ from head to head
  (a consistent head keeps a few tokens, an adaptive head keeps the whole prompt);
* ``q`` -- [B, Hq, D] with grouped-query attention: query head ``j`` reads KV head ``j // (Hq // Hkv)``.

The output is ``softmax(q K^T * sm_scale) V`` per query head, [B, Hq, D], in ``q``'s dtype.
**A head with 0 kept tokens returns zeros** (the empty sum of an attention with no keys; its
log-sum-exp, with ``return_lse=True``, is ``-inf``), so such a head contributes nothing and never
produces NaN. The public op :func:`sparse_decode_attention` runs the Triton kernel on CUDA tensors
and the torch reference :func:`sparse_decode_attention_reference` on CPU tensors unless
``backend="triton"`` (on CPU this needs ``TRITON_INTERPRET=1`` set before this module is imported).

The kernel is flash-decoding: the grid is (B, Hkv, num_splits); each program loads the G query
heads of its KV head as one tile (padded to 16 rows for ``tl.dot``), runs the online softmax over its
share of that head's rows in blocks of ``BLOCK_N``, and writes a partial (acc, max, sum); the
partials are merged with a log-sum-exp in fp32.
"""

from __future__ import annotations

import math
import os

import torch

try:  # Triton is optional for the reference path
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["sparse_decode_attention", "sparse_decode_attention_triton", "sparse_decode_attention_reference",
           "pack_varlen", "check_inputs"]

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# --------------------------------------------------------------------------------------------- kernel
if triton is not None:

    @triton.jit
    def _sparse_decode_kernel(
        Q, K, V, Offsets, Lengths, Acc, M, L,
        sm_scale, n_kv_heads, num_splits,
        stride_qb, stride_qh, stride_kt, stride_vt,
        stride_ab, stride_ah, stride_as,
        G: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
        IEEE: tl.constexpr,
    ):
        b = tl.program_id(0)
        h = tl.program_id(1)
        s = tl.program_id(2)
        start_row = tl.load(Offsets + b * n_kv_heads + h).to(tl.int64)
        length = tl.load(Lengths + b * n_kv_heads + h)
        # this split's share of the head's rows, a whole number of blocks
        per_split = tl.cdiv(tl.cdiv(length, num_splits), BLOCK_N) * BLOCK_N
        lo = s * per_split
        hi = tl.minimum(lo + per_split, length)

        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, BLOCK_D)
        g_ok = g < G
        q = tl.load(Q + b * stride_qb + (h * G + g)[:, None] * stride_qh + d[None, :], mask=g_ok[:, None], other=0.0)

        m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
        for block_start in range(lo, hi, BLOCK_N):
            n = block_start + tl.arange(0, BLOCK_N)
            n_ok = n < hi
            rows = start_row + n
            k = tl.load(K + rows[:, None] * stride_kt + d[None, :], mask=n_ok[:, None], other=0.0)
            if IEEE:
                scores = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                scores = tl.dot(q, tl.trans(k))
            scores = tl.where(n_ok[None, :], scores * sm_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(scores, 1))  # finite: every block holds >= 1 valid row
            alpha = tl.exp(m_i - m_new)
            p = tl.exp(scores - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + rows[:, None] * stride_vt + d[None, :], mask=n_ok[:, None], other=0.0)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new

        qh = h * G + g
        tl.store(Acc + b * stride_ab + qh[:, None] * stride_ah + s * stride_as + d[None, :], acc, mask=g_ok[:, None])
        ml_off = (b * n_kv_heads * G + qh) * num_splits + s
        tl.store(M + ml_off, m_i, mask=g_ok)
        tl.store(L + ml_off, l_i, mask=g_ok)


# ------------------------------------------------------------------------------------------ checks
def _is_pow2(x: int) -> bool:
    return x >= 1 and (x & (x - 1)) == 0


def check_inputs(q, k, v, offsets, lengths) -> tuple[int, int, int, int]:
    """Validate the packed layout; return ``(B, Hq, Hkv, D)``. Raises ValueError naming the argument."""
    for name, t in (("q", q), ("k", k), ("v", v), ("offsets", offsets), ("lengths", lengths)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if q.dim() != 3:
        raise ValueError(f"q: expected shape [B, Hq, D], got {tuple(q.shape)}")
    if k.dim() != 2 or v.dim() != 2:
        bad = "k" if k.dim() != 2 else "v"
        raise ValueError(f"{bad}: expected a packed [T, D] tensor, got {tuple((k if bad == 'k' else v).shape)}")
    if k.shape != v.shape:
        raise ValueError(f"v: expected the shape of k {tuple(k.shape)}, got {tuple(v.shape)}")
    B, Hq, D = q.shape
    if k.shape[1] != D:
        raise ValueError(f"k: head dim {k.shape[1]} differs from q's {D}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: expected float16, bfloat16 or float32, got {t.dtype}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"k: dtypes must match (q {q.dtype}, k {k.dtype}, v {v.dtype})")
    if not (q.device == k.device == v.device == offsets.device == lengths.device):
        raise ValueError(f"k: all tensors must be on one device (q on {q.device}, k on {k.device}, "
                         f"v on {v.device}, offsets on {offsets.device}, lengths on {lengths.device})")
    for name, t in (("offsets", offsets), ("lengths", lengths)):
        if t.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"{name}: expected int32 or int64, got {t.dtype}")
        if t.dim() != 2 or t.shape[0] != B:
            raise ValueError(f"{name}: expected shape [B={B}, Hkv], got {tuple(t.shape)}")
    if offsets.shape != lengths.shape:
        raise ValueError(f"lengths: expected the shape of offsets {tuple(offsets.shape)}, got {tuple(lengths.shape)}")
    Hkv = offsets.shape[1]
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"q: the number of query heads ({Hq}) must be a multiple of the number of KV heads ({Hkv})")
    if offsets.numel():
        if int(lengths.min()) < 0:
            raise ValueError(f"lengths: must be >= 0, got {int(lengths.min())}")
        if int(offsets.min()) < 0:
            raise ValueError(f"offsets: must be >= 0, got {int(offsets.min())}")
        end = int((offsets.long() + lengths.long()).max())
        if end > k.shape[0]:
            raise ValueError(f"offsets: offsets + lengths reach row {end}, beyond the {k.shape[0]} rows of k")
    return B, Hq, Hkv, D


def _scale(sm_scale, D: int) -> float:
    if sm_scale is None:
        return 1.0 / math.sqrt(D)
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, (int, float)) or not (math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"sm_scale: expected a positive finite number, got {sm_scale!r}")
    return float(sm_scale)


# --------------------------------------------------------------------------------------- reference
def sparse_decode_attention_reference(q, k, v, offsets, lengths, *, sm_scale=None, return_lse: bool = False):
    """Pure-torch reference: loop over (sequence, KV head), slice its rows, softmax in fp32.

    A head with 0 rows gives zeros (and log-sum-exp ``-inf``).
    """
    B, Hq, Hkv, D = check_inputs(q, k, v, offsets, lengths)
    scale = _scale(sm_scale, D)
    G = Hq // Hkv
    out = torch.zeros(B, Hq, D, dtype=torch.float32, device=q.device)
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float32, device=q.device)
    off, lens = offsets.tolist(), lengths.tolist()
    for b in range(B):
        for h in range(Hkv):
            n = lens[b][h]
            if n == 0:
                continue
            rows = slice(off[b][h], off[b][h] + n)
            qg = q[b, h * G:(h + 1) * G].float()  # [G, D]
            s = qg @ k[rows].float().T * scale  # [G, n]
            lse[b, h * G:(h + 1) * G] = torch.logsumexp(s, -1)
            out[b, h * G:(h + 1) * G] = s.softmax(-1) @ v[rows].float()
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


# ---------------------------------------------------------------------------------------- launcher
def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def sparse_decode_attention_triton(q, k, v, offsets, lengths, *, sm_scale=None, block_n: int = 32,
                                   num_splits: int | None = None, return_lse: bool = False):
    """The Triton kernel (see the module docstring). ``num_splits`` None: enough programs to fill the GPU."""
    if triton is None:  # pragma: no cover
        raise ValueError("backend: triton is not installed; use backend='torch'")
    B, Hq, Hkv, D = check_inputs(q, k, v, offsets, lengths)
    scale = _scale(sm_scale, D)
    if q.device.type != "cuda" and not (_interpreting() and q.device.type == "cpu"):
        raise ValueError(f"q: the Triton kernel needs CUDA tensors (or CPU tensors with TRITON_INTERPRET=1 set "
                         f"before import), got device {q.device}")
    if not _is_pow2(D) or D < 16:
        raise ValueError(f"q: the Triton kernel needs a head dim that is a power of two >= 16, got {D}")
    if isinstance(block_n, bool) or not isinstance(block_n, int) or not _is_pow2(block_n) or block_n < 16:
        raise ValueError(f"block_n: expected a power of two >= 16, got {block_n!r}")
    G = Hq // Hkv
    max_len = int(lengths.max()) if lengths.numel() else 0
    if num_splits is None:
        if q.device.type == "cuda":
            sms = torch.cuda.get_device_properties(q.device).multi_processor_count
            num_splits = max(1, min(triton.cdiv(2 * sms, B * Hkv), triton.cdiv(max(max_len, 1), 4 * block_n)))
        else:
            num_splits = 1
    if isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1:
        raise ValueError(f"num_splits: expected an integer >= 1, got {num_splits!r}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    offsets, lengths = offsets.to(torch.int32).contiguous(), lengths.to(torch.int32).contiguous()
    acc = torch.empty(B, Hq, num_splits, D, dtype=torch.float32, device=q.device)
    m = torch.empty(B, Hq, num_splits, dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    grid = (B, Hkv, num_splits)
    _sparse_decode_kernel[grid](
        q, k, v, offsets, lengths, acc, m, l,
        scale, Hkv, num_splits,
        q.stride(0), q.stride(1), k.stride(0), v.stride(0),
        acc.stride(0), acc.stride(1), acc.stride(2),
        G=G, BLOCK_G=max(16, triton.next_power_of_2(G)), BLOCK_D=D, BLOCK_N=block_n,
        IEEE=q.dtype == torch.float32,
    )
    # merge the splits with a log-sum-exp (fp32); an empty head has m = -inf everywhere and gives 0
    m_max = m.max(-1, keepdim=True).values
    m_safe = torch.where(torch.isinf(m_max), torch.zeros_like(m_max), m_max)
    w = torch.exp(m - m_safe)  # 0 for empty splits
    denom = (w * l).sum(-1)
    num = (w[..., None] * acc).sum(-2)
    out = torch.where(denom[..., None] > 0, num / denom.clamp_min(1e-30)[..., None], torch.zeros_like(num)).to(q.dtype)
    if return_lse:
        lse = torch.where(denom > 0, m_safe[..., 0] + torch.log(denom.clamp_min(1e-30)), torch.full_like(denom, float("-inf")))
        return out, lse
    return out


def sparse_decode_attention(q, k, v, offsets, lengths, *, sm_scale=None, backend: str = "auto", block_n: int = 32,
                            num_splits: int | None = None, return_lse: bool = False):
    """Decode attention over the packed cache. ``backend``: ``"auto"`` (Triton on CUDA, torch on CPU),
    ``"triton"`` or ``"torch"``. Returns [B, Hq, D] (and the log-sum-exp [B, Hq] with ``return_lse``)."""
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(f"backend: expected 'auto', 'triton' or 'torch', got {backend!r}")
    if backend == "auto":
        backend = "triton" if isinstance(q, torch.Tensor) and q.device.type == "cuda" and triton is not None else "torch"
    if backend == "torch":
        return sparse_decode_attention_reference(q, k, v, offsets, lengths, sm_scale=sm_scale, return_lse=return_lse)
    return sparse_decode_attention_triton(q, k, v, offsets, lengths, sm_scale=sm_scale, block_n=block_n,
                                          num_splits=num_splits, return_lse=return_lse)


def pack_varlen(k_heads, v_heads, *, index_dtype=torch.int32):
    """Pack nested lists ``k_heads[b][h]`` of [l_bh, D] tensors (and the same for V) into the layout
    above: ``(k [T, D], v [T, D], offsets [B, Hkv], lengths [B, Hkv])``."""
    if not k_heads or not k_heads[0]:
        raise ValueError("k_heads: expected a non-empty nested list [B][Hkv] of [length, D] tensors")
    B, Hkv = len(k_heads), len(k_heads[0])
    if len(v_heads) != B or any(len(r) != Hkv for r in v_heads) or any(len(r) != Hkv for r in k_heads):
        raise ValueError("v_heads: expected the same [B][Hkv] nesting as k_heads")
    flat_k = [k_heads[b][h] for b in range(B) for h in range(Hkv)]
    flat_v = [v_heads[b][h] for b in range(B) for h in range(Hkv)]
    lens = torch.tensor([t.shape[0] for t in flat_k], dtype=torch.int64)
    if any(a.shape != c.shape for a, c in zip(flat_k, flat_v)):
        raise ValueError("v_heads: every V block must have the shape of its K block")
    offs = torch.cumsum(lens, 0) - lens
    dev = flat_k[0].device
    return (torch.cat(flat_k), torch.cat(flat_v), offs.view(B, Hkv).to(dev, index_dtype), lens.view(B, Hkv).to(dev, index_dtype))
