"""Block-sparse attention forward: a Triton kernel, its launcher and its torch reference.

The sequence of length ``N`` is cut into blocks of ``block_size`` tokens (the last one may be
short). A boolean block mask ``M[h, i, j]`` says whether the queries of block ``i`` attend to the
keys of block ``j`` in head ``h``; inside an active block every pair is computed, outside nothing.
For query ``q`` of block ``i`` (eq. (svg-block-attn) of the Sparse VideoGen chapter)

    o = sum_{j : M[i, blk(j)]} softmax_j(q . k_j * scale) v_j .

The kernel walks, for each (batch, head, query tile), a lookup table of the active key blocks of
its mask row and keeps a FlashAttention-style online softmax (eq. (svg-online)): a running
maximum ``m``, a running denominator ``l`` and an unnormalised accumulator, rescaled by
``2^(m_old - m_new)`` whenever the maximum grows, so the N x N score matrix never exists. Scores
are kept in base 2: ``log2(e)`` is folded into the scale once, and ``exp2`` replaces ``exp``.

**Empty rows.** A query block whose mask row has no active block attends to nothing; its
output is defined as **0** (and its log-sum-exp as ``-inf``), in the kernel and the reference
alike. (A softmax over an empty set has no value; 0 is what a merge by log-sum-exp expects.)

**GPU tuning.** A mask block (``block_size``, the granularity of the mask) is computed in tiles
of ``BLOCK_M`` queries by ``BLOCK_N`` keys, each a power of two that divides the block; with
``num_warps`` and ``num_stages`` these are autotuned on CUDA over :data:`CONFIGS` (pruned to
the tiles that fit the block), or fixed by the ``block_m``, ``block_n``, ``num_warps`` and
``num_stages`` arguments. Offsets are 64-bit (:func:`companion.kernels.head_offset`).

:func:`prepare_block_sparse_attention` validates the inputs and builds the lookup table once
(host synchronisations included) and returns a :class:`BlockSparsePlan` whose ``run(q, k, v)``
only launches: what a benchmark times and a sampler loop calls.
:func:`block_sparse_attention` is ``prepare(...).run(q, k, v)``; ``backend="auto"`` picks Triton
on CUDA tensors and the reference on CPU tensors (:func:`companion.kernels.select_backend`).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from companion.validation import as_positive, as_positive_int

from . import (TunedPlan, INTERPRET, check_forward_only, check_interpretable, check_launch_options, check_tile,
               head_offset, needs_grad, row_offsets, select_backend)

__all__ = ["block_sparse_attention", "block_sparse_attention_reference", "prepare_block_sparse_attention",
           "BlockSparsePlan", "block_lut", "expand_block_mask", "CONFIGS", "INTERPRET"]

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_BLOCKS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))

# (BLOCK_M, BLOCK_N, num_warps, num_stages) tried by the autotuner on CUDA; (16, 16) fits every block
CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
           for m, n, w, s in ((128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3),
                              (64, 32, 4, 4), (32, 32, 4, 3), (16, 16, 4, 2))]


@triton.jit
def _block_sparse_fwd(Q, K, V, O, LSE, KV_IDX, KV_CNT, qk_scale,
                      stride_qz, stride_qh, stride_qn, stride_kz, stride_kh, stride_kn,
                      stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_on,
                      stride_idx_bh, stride_idx_m, stride_cnt_bh, stride_lse_bh, H, N,
                      MASK_BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, PRECISION: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)  # query tile
    pid_bh = tl.program_id(1)  # batch * heads + head
    b = pid_bh // H
    h = pid_bh % H
    row = pid_m * BLOCK_M // MASK_BLOCK  # the mask row (query block) this tile belongs to
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_base = Q + head_offset(b, h, stride_qz, stride_qh)  # 64-bit: b * stride_qz passes 2**31
    k_base = K + head_offset(b, h, stride_kz, stride_kh)
    v_base = V + head_offset(b, h, stride_vz, stride_vh)
    q = tl.load(q_base + row_offsets(offs_m, stride_qn)[:, None] + offs_d[None, :],
                mask=offs_m[:, None] < N, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)  # running row maximum (base 2)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running denominator
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # running numerator (unnormalised output)

    lut = KV_IDX + head_offset(pid_bh, row, stride_idx_bh, stride_idx_m)
    count = tl.load(KV_CNT + head_offset(pid_bh, row, stride_cnt_bh, 1))
    for t in range(0, count * (MASK_BLOCK // BLOCK_N)):  # every key tile of every active block
        kb = tl.load(lut + t // (MASK_BLOCK // BLOCK_N))
        offs_n = kb * MASK_BLOCK + (t % (MASK_BLOCK // BLOCK_N)) * BLOCK_N + offs_n0
        in_range = offs_n < N  # the last block may be short
        k = tl.load(k_base + row_offsets(offs_n, stride_kn)[None, :] + offs_d[:, None],
                    mask=in_range[None, :], other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N] scores, base 2
        s = tl.where(in_range[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # a tile wholly past N adds 0, not NaN
        alpha = tl.exp2(m_i - m_ref)  # rescales what was summed under the old maximum
        p = tl.exp2(s - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + row_offsets(offs_n, stride_vn)[:, None] + offs_d[None, :],
                    mask=in_range[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new

    nonempty = l_i > 0
    out = acc / tl.where(nonempty, l_i, 1.0)[:, None]  # an empty row keeps acc = 0: output 0
    o_base = O + head_offset(b, h, stride_oz, stride_oh)
    tl.store(o_base + row_offsets(offs_m, stride_on)[:, None] + offs_d[None, :], out.to(O.dtype.element_ty),
             mask=offs_m[:, None] < N)
    lse = tl.where(nonempty, (m_i + tl.log2(tl.where(nonempty, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    tl.store(LSE + pid_bh.to(tl.int64) * stride_lse_bh + offs_m, lse, mask=offs_m < N)


def _tiles_fit(configs, named_args, **kwargs):
    """The autotuner's configurations whose tiles divide the mask block; for exact float32 dots
    (``"ieee"``: FMAs, no tensor cores) only tiles up to 64 x 32, which compile in seconds."""
    most = 64 * 32 if kwargs.get("PRECISION") == "ieee" else 128 * 128
    return [c for c in configs if max(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) <= kwargs["MASK_BLOCK"]
            and c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] <= most]


_block_sparse_fwd_tuned = triton.autotune(CONFIGS, key=["N", "HEAD_DIM", "MASK_BLOCK"],
                                          prune_configs_by={"early_config_prune": _tiles_fit})(_block_sparse_fwd)


# --- checks --------------------------------------------------------------------------------------

def _check_qkv(q, k, v, check_finite: bool):
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor [B, H, N, D], got {type(x).__name__}")
        if x.ndim != 4:
            raise ValueError(f"{name}: expected 4 dimensions [B, H, N, D], got shape {tuple(x.shape)}")
        if x.dtype not in _DTYPES:
            raise ValueError(f"{name}: expected float16, bfloat16 or float32, got {x.dtype}")
        if x.shape[-1] == 0:
            raise ValueError(f"{name}: the head dimension D must be >= 1, got shape {tuple(x.shape)}")
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
    if as_positive_int(block_size, "block_size") not in _BLOCKS:
        raise ValueError(f"block_size: expected one of {_BLOCKS}, got {block_size!r}")
    return block_size


def _check_scale(sm_scale, D: int) -> float:
    if sm_scale is None:
        return 1 / math.sqrt(D)
    return as_positive(sm_scale, "sm_scale")  # or None, for 1 / sqrt(D)


def _broadcast_mask(block_mask, B: int, H: int, n: int, block_size: int, device) -> torch.Tensor:
    """``block_mask`` [nb, nb], [H, nb, nb] or [B, H, nb, nb] as a bool tensor [B, H, nb, nb]."""
    nb = -(-n // block_size)
    if not isinstance(block_mask, torch.Tensor) or block_mask.dtype != torch.bool:
        raise ValueError(f"block_mask: expected a bool tensor, got "
                         f"{getattr(block_mask, 'dtype', type(block_mask).__name__)}")
    if n == 0 and (block_mask.ndim not in (2, 3, 4) or tuple(block_mask.shape[-2:]) != (0, 0)):
        raise ValueError(f"q: has no positions (N = 0), so block_mask must have shape [..., 0, 0], got "
                         f"{tuple(block_mask.shape)}; empty inputs give empty outputs")
    if block_mask.ndim not in (2, 3, 4) or tuple(block_mask.shape[-2:]) != (nb, nb):
        raise ValueError(f"block_mask: expected shape [..., {nb}, {nb}] (ceil(N / block_size) = ceil({n} / "
                         f"{block_size}) blocks per side) with 2 to 4 dimensions, got {tuple(block_mask.shape)}")
    lead = tuple(block_mask.shape[:-2])
    if not ((len(lead) == 0) or (len(lead) == 1 and lead[0] in (1, H)) or
            (len(lead) == 2 and lead[0] in (1, B) and lead[1] in (1, H))):
        raise ValueError(f"block_mask: leading dimensions {lead} do not broadcast to (B, H) = ({B}, {H})")
    return block_mask.to(device).expand(B, H, nb, nb)


def block_lut(block_mask: torch.Tensor, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The lookup table of a block mask [..., nbq, nbk]: ``kv_idx`` [..., nbq, width] (active key
    blocks first, in increasing order) and ``kv_cnt`` [..., nbq], both int32.

    ``width``: the kernel's ``max_nnz`` (the most active blocks of a row; a host synchronisation)
    by default; FlexAttention's ``BlockMask.from_kv_blocks`` wants every block, ``width=nbk``.
    """
    if not isinstance(block_mask, torch.Tensor) or block_mask.dtype != torch.bool or block_mask.ndim < 2:
        raise ValueError(f"block_mask: expected a bool tensor [..., nbq, nbk], got "
                         f"{getattr(block_mask, 'dtype', type(block_mask).__name__)}")
    if width is not None:
        as_positive_int(width, "width")
    cnt = block_mask.sum(-1)
    width = max(int(cnt.max()) if cnt.numel() else 0, 1) if width is None else width
    order = torch.argsort((~block_mask).to(torch.int8), dim=-1, stable=True)[..., :width]
    return order.to(torch.int32).contiguous(), cnt.to(torch.int32).contiguous()


def expand_block_mask(block_mask: torch.Tensor, block_size: int, n: int) -> torch.Tensor:
    """The element mask [..., n, n] of a block mask [..., nb, nb] (every pair of an active block)."""
    if not isinstance(block_mask, torch.Tensor) or block_mask.dtype != torch.bool or block_mask.ndim < 2:
        raise ValueError(f"block_mask: expected a bool tensor [..., nb, nb], got "
                         f"{getattr(block_mask, 'dtype', type(block_mask).__name__)}")
    as_positive_int(block_size, "block_size")
    nb = block_mask.shape[-1]
    if -(-as_positive_int(n, "n") // block_size) != nb:
        raise ValueError(f"n: expected a length with ceil(n / {block_size}) = {nb} blocks, got {n!r}")
    m = block_mask.repeat_interleave(block_size, -1).repeat_interleave(block_size, -2)
    return m[..., :n, :n]


# --- reference ------------------------------------------------------------------------------------

def block_sparse_attention_reference(q, k, v, block_mask, block_size: int, sm_scale: float | None = None,
                                     return_lse: bool = False, *, query_chunk: int | None = None):
    """Masked dense attention in float32 with the element mask of ``block_mask``; empty rows give 0.

    ``query_chunk``: compute ``query_chunk`` queries at a time (a multiple of ``block_size``), so a
    long sequence needs ``query_chunk x N`` scores in memory instead of ``N x N``.
    """
    B, H, n, D = q.shape
    scale = _check_scale(sm_scale, D)
    mask4 = _broadcast_mask(block_mask, B, H, n, block_size, q.device)
    chunk = max(n, 1) if query_chunk is None else check_tile(query_chunk, "query_chunk", block_size, 2**31)
    kf, vf = k.float(), v.float()
    out = torch.empty(B, H, n, D, dtype=torch.float32, device=q.device)
    lse = torch.empty(B, H, n, dtype=torch.float32, device=q.device)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        rows = mask4[:, :, start // block_size:-(-stop // block_size)]
        mask = expand_block_mask(rows, block_size, n)[..., :stop - start, :]
        s = (q[:, :, start:stop].float() @ kf.transpose(-1, -2)) * scale
        s = s.masked_fill(~mask, float("-inf"))
        lse[:, :, start:stop] = torch.logsumexp(s, -1)  # -inf on empty rows
        p = torch.exp(s - torch.where(torch.isfinite(lse[:, :, start:stop]), lse[:, :, start:stop], 0.0)[..., None])
        out[:, :, start:stop] = p @ vf
    out = out.to(q.dtype)
    return (out, lse) if return_lse else out


# --- the prepared launch ---------------------------------------------------------------------------

class BlockSparsePlan(TunedPlan):
    """What :func:`prepare_block_sparse_attention` decided and built, for one shape, dtype and mask.

    ``run(q, k, v)`` attends (tensors of the prepared shape, dtype and device; their values are
    not re-checked) and does no host synchronisation: it allocates the output and launches.
    ``backend``: ``"triton"`` or ``"torch"``; ``config``: the tiles and launch options (on an
    autotuned launch, those the autotuner chose, known after the first ``run``).
    """

    def __init__(self, backend: str, signature: tuple, mask4: torch.Tensor, block_size: int, scale: float,
                 return_lse: bool, config: dict | None):
        self.backend, self.block_size, self.scale, self.return_lse = backend, block_size, scale, return_lse
        self._signature, self._mask4 = signature, mask4
        self._config = config if backend == "triton" else None
        self._tuned = None  # the autotuner's choice for this plan, after its first run
        if backend == "triton":
            B, H, nb = mask4.shape[:3]
            self.kv_idx, self.kv_cnt = block_lut(mask4.reshape(B * H, nb, nb))

    def _check_like(self, q, k, v):
        for name, x in (("q", q), ("k", k), ("v", v)):
            got = (x.shape, x.dtype, x.device) if isinstance(x, torch.Tensor) else type(x).__name__
            if got != self._signature:
                raise ValueError(f"{name}: the plan was prepared for (shape, dtype, device) = {self._signature}, "
                                 f"got {got}; prepare a new plan")

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self._check_like(q, k, v)
        if self.backend == "torch":
            out, lse = block_sparse_attention_reference(q, k, v, self._mask4, self.block_size, self.scale,
                                                        return_lse=True)
        else:
            check_forward_only(q=q, k=k, v=v)
            out, lse = self._launch(q, k, v)
        return (out, lse) if self.return_lse else out

    def _launch(self, q, k, v):
        q, k, v = (x.contiguous() for x in (q, k, v))
        B, H, n, D = q.shape
        o = torch.empty_like(q)
        lse = torch.empty((B, H, n), device=q.device, dtype=torch.float32)
        if o.numel() == 0:
            return o, lse
        kernel, options = (_block_sparse_fwd_tuned, {}) if self._config is None else (_block_sparse_fwd, self._config)
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]), B * H)  # noqa: E731
        kernel[grid](
            q, k, v, o, lse, self.kv_idx, self.kv_cnt, self.scale * LOG2E,
            q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
            self.kv_idx.stride(0), self.kv_idx.stride(1), self.kv_cnt.stride(0), n, H, n,
            MASK_BLOCK=self.block_size, HEAD_DIM=D,
            PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # float32 stays exact (no TF32 rounding)
            **options)
        if self._config is None:
            self._tuned = _block_sparse_fwd_tuned.best_config
        return o, lse


def _launch_config(block_size: int, block_m, block_n, num_warps, num_stages) -> dict | None:
    """The fixed tiles and launch options, or None: autotune (on CUDA, when nothing is fixed)."""
    num_warps, num_stages = check_launch_options(num_warps, num_stages)
    tiles = {}
    for name, value in (("block_m", block_m), ("block_n", block_n)):
        if value is not None:
            tiles[name] = check_tile(value, name, 16, block_size)
    if not INTERPRET and not tiles and num_warps is None and num_stages is None:
        return None
    default = min(block_size, 64)
    return {"BLOCK_M": tiles.get("block_m", default), "BLOCK_N": tiles.get("block_n", default),
            "num_warps": num_warps or 4, "num_stages": num_stages or 2}


def prepare_block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: torch.Tensor,
                                   block_size: int = 16, sm_scale: float | None = None, backend: str = "auto",
                                   return_lse: bool = False, check_finite: bool = True, *,
                                   block_m: int | None = None, block_n: int | None = None,
                                   num_warps: int | None = None, num_stages: int | None = None) -> BlockSparsePlan:
    """Validate the inputs, pick the backend and build the lookup table once; return the plan.

    Arguments as in :func:`block_sparse_attention`. Here, and only here, the host waits for the
    device (the finiteness check and the lookup table's width).
    """
    requested, backend = backend, select_backend(q, backend, "q")
    _check_qkv(q, k, v, check_finite)
    if backend == "triton" and requested == "auto" and needs_grad(q, k, v):
        backend = "torch"  # the kernel has no backward; the reference is differentiable
    block_size = _check_block_size(block_size)
    B, H, n, D = q.shape
    scale = _check_scale(sm_scale, D)
    mask4 = _broadcast_mask(block_mask, B, H, n, block_size, q.device)
    config = _launch_config(block_size, block_m, block_n, num_warps, num_stages)  # checked on every backend
    if backend == "triton":
        if D < 16 or D > 256 or D & (D - 1):
            raise ValueError(f"q: head dimension D = {D}; the Triton kernel needs a power of two in [16, 256]")
        check_interpretable(q, "q")
    return BlockSparsePlan(backend, (q.shape, q.dtype, q.device), mask4, block_size, scale, return_lse, config)


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: torch.Tensor,
                           block_size: int = 16, sm_scale: float | None = None, backend: str = "auto",
                           return_lse: bool = False, check_finite: bool = True, *,
                           block_m: int | None = None, block_n: int | None = None,
                           num_warps: int | None = None, num_stages: int | None = None):
    """Attention of ``q, k, v`` [B, H, N, D] restricted to the active blocks of ``block_mask``.

    ``block_mask``: bool [nb, nb], [H, nb, nb] or [B, H, nb, nb] with ``nb = ceil(N / block_size)``.
    ``backend``: ``"auto"`` (Triton on CUDA tensors, the torch reference otherwise), ``"triton"``
    or ``"torch"``. ``block_m``, ``block_n`` (query and key tiles, powers of two in
    [16, block_size]), ``num_warps``, ``num_stages``: fix the launch (default: autotuned on CUDA).
    Returns the output [B, H, N, D] in q's dtype (and the float32 log-sum-exp [B, H, N] if
    ``return_lse``). Rows whose mask row is empty give 0 (log-sum-exp ``-inf``). bfloat16 is
    refused under Triton's interpreter.
    """
    plan = prepare_block_sparse_attention(q, k, v, block_mask, block_size, sm_scale, backend, return_lse,
                                          check_finite, block_m=block_m, block_n=block_n, num_warps=num_warps,
                                          num_stages=num_stages)
    return plan.run(q, k, v)
