"""Block-sparse attention forward: a Triton kernel, its launcher and its torch reference.

The sequence of length ``N`` is cut into blocks of ``block_size`` tokens (the last one may be
short). A boolean block mask ``M[h, i, j]`` says whether the queries of block ``i`` attend to the
keys of block ``j`` in head ``h``; inside an active block every pair is computed, outside nothing.
For query ``q`` of block ``i`` (eq. (svg-block-attn) of the Sparse VideoGen chapter)

    o = sum_{j : M[i, blk(j)]} softmax_j(q . k_j * scale) v_j .

The kernel walks, for each (batch, head, query block), a lookup table of its active key blocks
and keeps a FlashAttention-style online softmax (eq. (svg-online)): a running maximum ``m``,
a running denominator ``l`` and an unnormalised accumulator, rescaled by ``exp(m_old - m_new)``
whenever the maximum grows, so the N x N score matrix never exists.

**Empty rows.** A query block whose mask row has no active block attends to nothing; its
output is defined as **0** (and its log-sum-exp as ``-inf``), in the kernel and the reference
alike. (A softmax over an empty set has no value; 0 is what a merge by log-sum-exp expects.)

``block_sparse_attention(q, k, v, block_mask, block_size)`` picks Triton on CUDA tensors and
the reference on CPU tensors (``backend="auto"``); ``backend="triton"`` on CPU tensors needs
Triton's interpreter, i.e. ``TRITON_INTERPRET=1`` set before this module is imported.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

__all__ = ["block_sparse_attention", "block_sparse_attention_reference", "block_lut", "expand_block_mask",
           "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"  # read once: it decides how @triton.jit compiles
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_BLOCKS = (16, 32, 64, 128)


@triton.jit
def _block_sparse_fwd(Q, K, V, O, LSE, KV_IDX, KV_CNT, sm_scale,
                      stride_qz, stride_qh, stride_qn, stride_kz, stride_kh, stride_kn,
                      stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_on,
                      H, N, NBQ, MAX_NNZ,
                      BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)  # query block
    pid_bh = tl.program_id(1)  # batch * heads + head
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK + tl.arange(0, BLOCK)
    offs_n0 = tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = Q + b * stride_qz + h * stride_qh
    k_base = K + b * stride_kz + h * stride_kh
    v_base = V + b * stride_vz + h * stride_vh
    q = tl.load(q_base + offs_m[:, None] * stride_qn + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)

    m_i = tl.full([BLOCK], float("-inf"), dtype=tl.float32)  # running row maximum
    l_i = tl.zeros([BLOCK], dtype=tl.float32)  # running denominator
    acc = tl.zeros([BLOCK, HEAD_DIM], dtype=tl.float32)  # running numerator (unnormalised output)

    lut = KV_IDX + (pid_bh * NBQ + pid_m) * MAX_NNZ
    count = tl.load(KV_CNT + pid_bh * NBQ + pid_m)
    for t in range(0, count):
        kb = tl.load(lut + t)
        offs_n = kb * BLOCK + offs_n0
        in_range = offs_n < N  # the last block may be short
        k = tl.load(k_base + offs_n[None, :] * stride_kn + offs_d[:, None], mask=in_range[None, :], other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * sm_scale  # [BLOCK, BLOCK] scores
        s = tl.where(in_range[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))  # finite: every visited block has a key in range
        alpha = tl.exp(m_i - m_new)  # rescales what was summed under the old maximum
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :], mask=in_range[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new

    nonempty = l_i > 0
    out = acc / tl.where(nonempty, l_i, 1.0)[:, None]  # an empty row keeps acc = 0: output 0
    o_base = O + b * stride_oz + h * stride_oh
    tl.store(o_base + offs_m[:, None] * stride_on + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=offs_m[:, None] < N)
    lse = tl.where(nonempty, m_i + tl.log(tl.where(nonempty, l_i, 1.0)), float("-inf"))
    tl.store(LSE + pid_bh * N + offs_m, lse, mask=offs_m < N)


# --- checks --------------------------------------------------------------------------------------

def _check_qkv(q, k, v, check_finite: bool):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor [B, H, N, D], got {type(x).__name__}")
        if x.ndim != 4:
            raise ValueError(f"{name}: expected 4 dimensions [B, H, N, D], got shape {tuple(x.shape)}")
        if x.dtype not in _DTYPES:
            raise ValueError(f"{name}: expected float16, bfloat16 or float32, got {x.dtype}")
        if min(x.shape) == 0:
            raise ValueError(f"{name}: every dimension must be >= 1, got shape {tuple(x.shape)}")
    for name, x in (("k", k), ("v", v)):
        if x.shape != q.shape:
            raise ValueError(f"{name}: expected the shape of q {tuple(q.shape)}, got {tuple(x.shape)}")
        if x.dtype != q.dtype:
            raise ValueError(f"{name}: dtype {x.dtype} differs from q's {q.dtype}; cast them to one dtype")
        if x.device != q.device:
            raise ValueError(f"{name}: on {x.device} but q is on {q.device}; move them to one device")
    if check_finite:
        for name, x in (("q", q), ("k", k), ("v", v)):
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"{name}: contains NaN or Inf")


def _check_block_size(block_size) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size not in _BLOCKS:
        raise ValueError(f"block_size: expected one of {_BLOCKS}, got {block_size!r}")
    return block_size


def _broadcast_mask(block_mask, B: int, H: int, n: int, block_size: int, device) -> torch.Tensor:
    """``block_mask`` [nb, nb], [H, nb, nb] or [B, H, nb, nb] as a bool tensor [B, H, nb, nb]."""
    nb = -(-n // block_size)
    if not isinstance(block_mask, torch.Tensor) or block_mask.dtype != torch.bool:
        raise ValueError(f"block_mask: expected a bool tensor, got "
                         f"{getattr(block_mask, 'dtype', type(block_mask).__name__)}")
    if block_mask.ndim not in (2, 3, 4) or tuple(block_mask.shape[-2:]) != (nb, nb):
        raise ValueError(f"block_mask: expected shape [..., {nb}, {nb}] (ceil(N / block_size) = ceil({n} / "
                         f"{block_size}) blocks per side) with 2 to 4 dimensions, got {tuple(block_mask.shape)}")
    lead = tuple(block_mask.shape[:-2])
    if not ((len(lead) == 0) or (len(lead) == 1 and lead[0] in (1, H)) or
            (len(lead) == 2 and lead[0] in (1, B) and lead[1] in (1, H))):
        raise ValueError(f"block_mask: leading dimensions {lead} do not broadcast to (B, H) = ({B}, {H})")
    return block_mask.to(device).expand(B, H, nb, nb)


def block_lut(block_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's lookup table of a block mask [..., nbq, nbk]: ``kv_idx`` [..., nbq, max_nnz]
    (active key blocks first, in increasing order) and ``kv_cnt`` [..., nbq], both int32."""
    cnt = block_mask.sum(-1)
    max_nnz = max(int(cnt.max()), 1)
    order = torch.argsort((~block_mask).to(torch.int8), dim=-1, stable=True)[..., :max_nnz]
    return order.to(torch.int32).contiguous(), cnt.to(torch.int32).contiguous()


def expand_block_mask(block_mask: torch.Tensor, block_size: int, n: int) -> torch.Tensor:
    """The element mask [..., n, n] of a block mask [..., nb, nb] (every pair of an active block)."""
    m = block_mask.repeat_interleave(block_size, -1).repeat_interleave(block_size, -2)
    return m[..., :n, :n]


# --- reference and launcher ----------------------------------------------------------------------

def block_sparse_attention_reference(q, k, v, block_mask, block_size: int, sm_scale: float | None = None,
                                     return_lse: bool = False):
    """Masked dense attention in float32 with the element mask of ``block_mask``; empty rows give 0."""
    B, H, n, D = q.shape
    scale = 1 / math.sqrt(D) if sm_scale is None else sm_scale
    mask = expand_block_mask(_broadcast_mask(block_mask, B, H, n, block_size, q.device), block_size, n)
    s = torch.einsum("bhid,bhjd->bhij", q.float(), k.float()) * scale
    s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)  # -inf on empty rows
    p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0)[..., None])
    out = torch.einsum("bhij,bhjd->bhid", p, v.float()).to(q.dtype)
    return (out, lse) if return_lse else out


def _launch(q, k, v, mask4, block_size: int, scale: float):
    B, H, n, D = q.shape
    if D < 16 or D > 256 or D & (D - 1):
        raise ValueError(f"q: head dimension D = {D}; the Triton kernel needs a power of two in [16, 256]")
    q, k, v = (x.contiguous() for x in (q, k, v))
    kv_idx, kv_cnt = block_lut(mask4.reshape(B * H, *mask4.shape[-2:]))
    nbq, max_nnz = kv_idx.shape[1], kv_idx.shape[2]
    o = torch.empty_like(q)
    lse = torch.empty((B * H, n), device=q.device, dtype=torch.float32)
    precision = "ieee" if q.dtype == torch.float32 else "tf32"  # float32 stays exact (no TF32 rounding)
    num_warps = 4 if block_size * D <= 64 * 64 else 8
    _block_sparse_fwd[(nbq, B * H)](
        q, k, v, o, lse, kv_idx, kv_cnt, scale,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
        H, n, nbq, max_nnz, BLOCK=block_size, HEAD_DIM=D, PRECISION=precision, num_warps=num_warps)
    return o, lse.view(B, H, n)


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: torch.Tensor,
                           block_size: int = 16, sm_scale: float | None = None, backend: str = "auto",
                           return_lse: bool = False, check_finite: bool = True):
    """Attention of ``q, k, v`` [B, H, N, D] restricted to the active blocks of ``block_mask``.

    ``block_mask``: bool [nb, nb], [H, nb, nb] or [B, H, nb, nb] with ``nb = ceil(N / block_size)``.
    ``backend``: ``"auto"`` (Triton on CUDA tensors, the torch reference otherwise), ``"triton"``
    or ``"torch"``. Returns the output [B, H, N, D] in q's dtype (and the float32 log-sum-exp
    [B, H, N] if ``return_lse``). Rows whose mask row is empty give 0 (log-sum-exp ``-inf``).
    """
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(f"backend: expected 'auto', 'triton' or 'torch', got {backend!r}")
    _check_qkv(q, k, v, check_finite)
    block_size = _check_block_size(block_size)
    if sm_scale is not None and not (isinstance(sm_scale, (int, float)) and math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"sm_scale: expected a positive finite number or None, got {sm_scale!r}")
    B, H, n, D = q.shape
    mask4 = _broadcast_mask(block_mask, B, H, n, block_size, q.device)
    scale = 1 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    use_triton = backend == "triton" or (backend == "auto" and q.is_cuda)
    if not use_triton:
        return block_sparse_attention_reference(q, k, v, mask4, block_size, scale, return_lse)
    if not q.is_cuda and not INTERPRET:
        raise ValueError("backend: 'triton' needs CUDA tensors, or TRITON_INTERPRET=1 set before importing "
                         "companion.kernels.block_sparse_attention to run the kernel on the CPU")
    out, lse = _launch(q, k, v, mask4, block_size, scale)
    return (out, lse) if return_lse else out
