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
``backend="triton"`` (on CPU this needs ``TRITON_INTERPRET=1`` set before the package is imported;
bfloat16 is refused there).

The kernel is flash-decoding: the grid is (B, Hkv, num_splits); each program loads the G query
heads of its KV head as one tile (``BLOCK_G`` rows, padded to 16 for ``tl.dot``: the query tile),
runs the online softmax over its share of that head's rows in key tiles of ``BLOCK_N`` (scores in
base 2: ``log2(e)`` folded into the scale, ``exp2``), and writes a partial (acc, max, sum); one
small kernel, :func:`_merge_splits`, merges the partials with a log-sum-exp in fp32. On CUDA
``BLOCK_N``, ``num_warps`` and ``num_stages`` are autotuned over :data:`CONFIGS` unless fixed by
``block_n``, ``num_warps``, ``num_stages``. Row offsets are 64-bit
(:func:`companion.kernels.row_offsets`): a packed cache passes ``2**31`` elements at 128K tokens.

:func:`prepare_sparse_decode_attention` validates the layout and reads the lengths once (host
synchronisations included) and returns a :class:`SparseDecodePlan` whose ``run(q, k, v)`` only
launches the two kernels.
"""

from __future__ import annotations

import math

import torch

from . import (TunedPlan, HAS_TRITON, INTERPRET, check_forward_only, check_interpretable, check_launch_options,
               check_tile, needs_grad, select_backend)
from companion.validation import as_positive, as_positive_int

if HAS_TRITON:
    import triton
    import triton.language as tl

    from . import head_offset, row_offsets

__all__ = ["sparse_decode_attention", "sparse_decode_attention_triton", "sparse_decode_attention_reference",
           "prepare_sparse_decode_attention", "SparseDecodePlan", "pack_varlen", "check_inputs", "CONFIGS"]

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))


# --------------------------------------------------------------------------------------------- kernel
if HAS_TRITON:

    @triton.jit
    def _sparse_decode_kernel(
        Q, K, V, Offsets, Lengths, Acc, M, L,
        qk_scale, n_kv_heads, num_splits, len_bucket,
        stride_qb, stride_qh, stride_kt, stride_vt,
        stride_ab, stride_ah, stride_as, stride_mb, stride_mh,
        G: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr,
        BLOCK_N: tl.constexpr, IEEE: tl.constexpr,
    ):
        b = tl.program_id(0)
        h = tl.program_id(1)
        s = tl.program_id(2)
        start_row = tl.load(Offsets + b * n_kv_heads + h).to(tl.int64)
        length = tl.load(Lengths + b * n_kv_heads + h)
        # this split's share of the head's rows, a whole number of key tiles
        per_split = tl.cdiv(tl.cdiv(length, num_splits), BLOCK_N) * BLOCK_N
        lo = s * per_split
        hi = tl.minimum(lo + per_split, length)

        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, BLOCK_D)
        g_ok = g < G
        qh = h * G + g  # the query heads that read KV head h
        q_rows = head_offset(b, qh, stride_qb, stride_qh)
        q = tl.load(Q + q_rows[:, None] + d[None, :], mask=g_ok[:, None], other=0.0)

        # running maximum (base 2)
        m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)
        for block_start in range(lo, hi, BLOCK_N):
            n = block_start + tl.arange(0, BLOCK_N)
            n_ok = n < hi
            # 64-bit offsets: T * D passes 2**31 on long caches
            rows = row_offsets(start_row + n, stride_kt)
            k = tl.load(K + rows[:, None] + d[None, :], mask=n_ok[:, None], other=0.0)
            if IEEE:
                scores = tl.dot(q, tl.trans(k), input_precision="ieee")
            else:
                scores = tl.dot(q, tl.trans(k))
            scores = tl.where(n_ok[None, :], scores * qk_scale, float("-inf"))
            # finite: every tile holds at least one valid row
            m_new = tl.maximum(m_i, tl.max(scores, 1))
            alpha = tl.exp2(m_i - m_new)
            p = tl.exp2(scores - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v_rows = row_offsets(start_row + n, stride_vt)
            v = tl.load(V + v_rows[:, None] + d[None, :], mask=n_ok[:, None], other=0.0)
            if IEEE:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v,
                                                    input_precision="ieee")
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new

        a_off = head_offset(b, qh, stride_ab, stride_ah) + s.to(tl.int64) * stride_as
        tl.store(Acc + a_off[:, None] + d[None, :], acc, mask=g_ok[:, None])
        ml_off = head_offset(b, qh, stride_mb, stride_mh) + s
        tl.store(M + ml_off, m_i, mask=g_ok)
        tl.store(L + ml_off, l_i, mask=g_ok)

    @triton.jit
    def _merge_splits(Acc, M, L, Out, Lse, n_q_heads, num_splits,
                      stride_ab, stride_ah, stride_as, stride_mb, stride_mh, stride_ob, stride_oh,
                      BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
        """One program per (sequence, query head): the log-sum-exp merge of its splits' partials."""
        pid = tl.program_id(0)
        b = pid // n_q_heads
        j = pid % n_q_heads
        sp = tl.arange(0, BLOCK_S)
        d = tl.arange(0, BLOCK_D)
        ok = sp < num_splits
        ml_off = head_offset(b, j, stride_mb, stride_mh) + sp
        m = tl.load(M + ml_off, mask=ok, other=float("-inf"))
        l = tl.load(L + ml_off, mask=ok, other=0.0)
        a_off = head_offset(b, j, stride_ab, stride_ah) + row_offsets(sp, stride_as)
        acc = tl.load(Acc + a_off[:, None] + d[None, :], mask=ok[:, None], other=0.0)
        m_max = tl.max(m, 0)
        m_ref = tl.where(m_max == float("-inf"), 0.0, m_max)  # an empty head: every split is empty
        w = tl.exp2(m - m_ref)  # 0 for an empty split
        denom = tl.sum(w * l, 0)
        num = tl.sum(w[:, None] * acc, 0)  # 0 where denom is 0: the empty head's output is 0
        safe = tl.where(denom > 0, denom, 1.0)
        tl.store(Out + head_offset(b, j, stride_ob, stride_oh) + d, (num / safe).to(Out.dtype.element_ty))
        lse = tl.where(denom > 0, (m_ref + tl.log2(safe)) * 0.6931471805599453, float("-inf"))
        tl.store(Lse + pid.to(tl.int64), lse)

    # (BLOCK_N, num_warps, num_stages) tried by the autotuner on CUDA
    CONFIGS = [triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=s)
               for n, w, s in ((32, 4, 2), (64, 4, 2), (64, 4, 3), (128, 4, 3), (128, 8, 3))]
    def _tiles_fit(configs, named_args, **kwargs):
        """For exact float32 dots (FMAs, no tensor cores) only key tiles up to 64 rows."""
        return [c for c in configs if not kwargs["IEEE"] or c.kwargs["BLOCK_N"] <= 64]

    _sparse_decode_kernel_tuned = triton.autotune(
        CONFIGS, key=["n_kv_heads", "num_splits", "len_bucket", "G", "BLOCK_D"],
        prune_configs_by={"early_config_prune": _tiles_fit})(_sparse_decode_kernel)
else:  # pragma: no cover
    CONFIGS = []


# ------------------------------------------------------------------------------------------ checks
def check_inputs(q, k, v, offsets, lengths) -> tuple[int, int, int, int]:
    """Validate the packed layout (and that ``q`` is finite); return ``(B, Hq, Hkv, D)``. Raises
    ValueError naming the argument."""
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
    if D == 0:
        raise ValueError("q: the head dimension D must be >= 1")
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
    if q.numel() and not bool(torch.isfinite(q).all()):  # the cache is not rescanned at every step
        raise ValueError("q: contains NaN or inf")
    return B, Hq, Hkv, D


def _scale(sm_scale, D: int) -> float:
    if sm_scale is None:
        return 1.0 / math.sqrt(D)
    return as_positive(sm_scale, "sm_scale")


# --------------------------------------------------------------------------------------- reference
def _attend(q, k, v, off: list, lens: list, scale: float, G: int):
    """Per (sequence, KV head): slice its rows, softmax in fp32; 0 rows give zeros and lse -inf."""
    B, Hq, D = q.shape
    out = torch.zeros(B, Hq, D, dtype=torch.float32, device=q.device)
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float32, device=q.device)
    for b in range(B):
        for h, n in enumerate(lens[b]):
            if n == 0:
                continue
            rows = slice(off[b][h], off[b][h] + n)
            qg = q[b, h * G:(h + 1) * G].float()  # [G, D]
            s = qg @ k[rows].float().T * scale  # [G, n]
            lse[b, h * G:(h + 1) * G] = torch.logsumexp(s, -1)
            out[b, h * G:(h + 1) * G] = s.softmax(-1) @ v[rows].float()
    return out.to(q.dtype), lse


def sparse_decode_attention_reference(q, k, v, offsets, lengths, *, sm_scale=None, return_lse: bool = False):
    """Pure-torch reference: loop over (sequence, KV head), slice its rows, softmax in fp32.

    A head with 0 rows gives zeros (and log-sum-exp ``-inf``).
    """
    B, Hq, Hkv, D = check_inputs(q, k, v, offsets, lengths)
    out, lse = _attend(q, k, v, offsets.tolist(), lengths.tolist(), _scale(sm_scale, D), Hq // Hkv)
    return (out, lse) if return_lse else out


# ---------------------------------------------------------------------------------------- launcher
class SparseDecodePlan(TunedPlan):
    """What :func:`prepare_sparse_decode_attention` decided and built, for one layout.

    ``run(q, k, v)`` attends (tensors of the prepared shapes, dtype and device over the prepared
    offsets and lengths; values not re-checked) with no host synchronisation. ``backend``:
    ``"triton"`` or ``"torch"``; ``num_splits``: the split of each head's rows; ``config``: the
    key tile and launch options (autotuned ones known after the first ``run``).
    """

    def __init__(self, backend, signature, offsets, lengths, scale, G, num_splits, config, return_lse):
        self.backend, self.scale, self.G, self.num_splits = backend, scale, G, num_splits
        self.return_lse, self._signature = return_lse, signature
        self._config = config if backend == "triton" else None
        self._tuned = None  # the autotuner's choice for this plan, after its first run
        if backend == "torch":
            self._lists = offsets.tolist(), lengths.tolist()
        else:
            self.offsets = offsets.to(torch.int64).contiguous()
            self.lengths = lengths.to(torch.int32).contiguous()
            self.len_bucket = triton.next_power_of_2(max(int(lengths.max()) if lengths.numel() else 0, 1))

    def _check_like(self, q, k, v):
        for name, x, want in (("q", q, self._signature[0]), ("k", k, self._signature[1]), ("v", v, self._signature[1])):
            got = (x.shape, x.dtype, x.device) if isinstance(x, torch.Tensor) else type(x).__name__
            if got != want:
                raise ValueError(f"{name}: the plan was prepared for (shape, dtype, device) = {want}, got {got}; "
                                 f"prepare a new plan")

    def run(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        self._check_like(q, k, v)
        if self.backend == "torch":
            out, lse = _attend(q, k, v, *self._lists, self.scale, self.G)
        else:
            check_forward_only(q=q, k=k, v=v)
            out, lse = self._launch(q, k, v)
        return (out, lse) if self.return_lse else out

    def _launch(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        B, Hq, D = q.shape
        Hkv, S = Hq // self.G, self.num_splits
        out = torch.empty_like(q)
        lse = torch.empty(B, Hq, dtype=torch.float32, device=q.device)
        if B == 0:
            return out, lse
        acc = torch.empty(B, Hq, S, D, dtype=torch.float32, device=q.device)
        m = torch.empty(B, Hq, S, dtype=torch.float32, device=q.device)
        l = torch.empty_like(m)
        kernel, options = ((_sparse_decode_kernel_tuned, {}) if self._config is None
                           else (_sparse_decode_kernel, self._config))
        kernel[(B, Hkv, S)](
            q, k, v, self.offsets, self.lengths, acc, m, l,
            self.scale * LOG2E, Hkv, S, self.len_bucket,
            q.stride(0), q.stride(1), k.stride(0), v.stride(0),
            acc.stride(0), acc.stride(1), acc.stride(2), m.stride(0), m.stride(1),
            G=self.G, BLOCK_G=max(16, triton.next_power_of_2(self.G)), BLOCK_D=D,
            IEEE=q.dtype == torch.float32, **options,
        )
        if self._config is None:
            self._tuned = _sparse_decode_kernel_tuned.best_config
        _merge_splits[(B * Hq,)](
            acc, m, l, out, lse, Hq, S,
            acc.stride(0), acc.stride(1), acc.stride(2), m.stride(0), m.stride(1), out.stride(0), out.stride(1),
            BLOCK_S=max(2, triton.next_power_of_2(S)), BLOCK_D=D,
        )
        return out, lse


def _launch_config(block_n, num_warps, num_stages) -> dict | None:
    """The fixed key tile and launch options, or None: autotune (on CUDA, when nothing is fixed)."""
    num_warps, num_stages = check_launch_options(num_warps, num_stages)
    if block_n is not None:
        block_n = check_tile(block_n, "block_n", 16, 256)
    if not INTERPRET and block_n is None and num_warps is None and num_stages is None:
        return None
    return {"BLOCK_N": block_n or 32, "num_warps": num_warps or 4, "num_stages": num_stages or 2}


def _default_splits(q, B: int, Hkv: int, max_len: int, block_n: int) -> int:
    """Enough programs to fill the GPU (two per SM), each with at least 4 key tiles of rows."""
    if q.device.type != "cuda":
        return 1
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    return max(1, min(triton.cdiv(2 * sms, max(B * Hkv, 1)), triton.cdiv(max(max_len, 1), 4 * block_n)))


def prepare_sparse_decode_attention(q, k, v, offsets, lengths, *, sm_scale=None, backend: str = "auto",
                                    block_n: int | None = None, num_splits: int | None = None,
                                    num_warps: int | None = None, num_stages: int | None = None,
                                    return_lse: bool = False) -> SparseDecodePlan:
    """Validate the layout, pick the backend, read the lengths and fix the split count once.

    Arguments as in :func:`sparse_decode_attention`. Here, and only here, the host waits for the
    device (the checks of the offsets and lengths, the longest head for ``num_splits``).
    """
    requested, backend = backend, select_backend(q, backend, "q")
    B, Hq, Hkv, D = check_inputs(q, k, v, offsets, lengths)
    if backend == "triton" and requested == "auto" and needs_grad(q, k, v):
        backend = "torch"  # the kernel has no backward; the reference is differentiable
    scale = _scale(sm_scale, D)
    signature = ((q.shape, q.dtype, q.device), (k.shape, k.dtype, k.device))
    config = _launch_config(block_n, num_warps, num_stages)  # checked on every backend, used by Triton's
    if num_splits is not None:
        num_splits = as_positive_int(num_splits, "num_splits")
    if backend == "triton":
        if D < 16 or D > 256 or D & (D - 1):
            raise ValueError(f"q: the Triton kernel needs a head dim that is a power of two in [16, 256], got {D}")
        check_interpretable(q, "q")
        if num_splits is None:
            max_len = int(lengths.max()) if lengths.numel() else 0
            num_splits = _default_splits(q, B, Hkv, max_len, (config or {}).get("BLOCK_N", 64))
    return SparseDecodePlan(backend, signature, offsets, lengths, scale, Hq // Hkv, num_splits, config, return_lse)


def sparse_decode_attention(q, k, v, offsets, lengths, *, sm_scale=None, backend: str = "auto",
                            block_n: int | None = None, num_splits: int | None = None,
                            num_warps: int | None = None, num_stages: int | None = None, return_lse: bool = False):
    """Decode attention over the packed cache. ``backend``: ``"auto"`` (Triton on CUDA, torch on CPU),
    ``"triton"`` or ``"torch"``. ``block_n`` (key tile, a power of two in [16, 256]),
    ``num_warps``, ``num_stages``: fix the launch (default: autotuned on CUDA); ``num_splits``:
    programs per KV head (default: enough to fill the GPU). Returns [B, Hq, D] (and the
    log-sum-exp [B, Hq] with ``return_lse``). bfloat16 is refused under Triton's interpreter."""
    return prepare_sparse_decode_attention(q, k, v, offsets, lengths, sm_scale=sm_scale, backend=backend,
                                           block_n=block_n, num_splits=num_splits, num_warps=num_warps,
                                           num_stages=num_stages, return_lse=return_lse).run(q, k, v)


def sparse_decode_attention_triton(q, k, v, offsets, lengths, **options):
    """:func:`sparse_decode_attention` with ``backend="triton"`` (kept for existing callers)."""
    return sparse_decode_attention(q, k, v, offsets, lengths, backend="triton", **options)


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
    for name, flat in (("k_heads", flat_k), ("v_heads", flat_v)):
        if any(not isinstance(t, torch.Tensor) or t.ndim != 2 for t in flat):
            raise ValueError(f"{name}: expected every block to be a [length, D] tensor")
        dims = sorted({t.shape[1] for t in flat})
        if len(dims) > 1:
            raise ValueError(f"{name}: every block must have one head dimension D, got {dims}")
    lens = torch.tensor([t.shape[0] for t in flat_k], dtype=torch.int64)
    if any(a.shape != c.shape for a, c in zip(flat_k, flat_v)):
        raise ValueError("v_heads: every V block must have the shape of its K block")
    offs = torch.cumsum(lens, 0) - lens
    dev = flat_k[0].device
    return (torch.cat(flat_k), torch.cat(flat_v), offs.view(B, Hkv).to(dev, index_dtype), lens.view(B, Hkv).to(dev, index_dtype))
