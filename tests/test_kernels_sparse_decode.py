"""The sparse decode-attention kernel (Triton, under TRITON_INTERPRET=1 on the CPU) equals its reference."""

import pytest
import torch

from companion.kernels import INTERPRET
from companion.kernels import sparse_decode_attention as sda
from test_kernels_backend import no_host_sync  # tests/ is on sys.path (pytest, rootdir without __init__)

TRITON = INTERPRET or torch.cuda.is_available()
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not TRITON, reason="needs CUDA or TRITON_INTERPRET=1")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# every dtype the launcher accepts here: bfloat16 is refused under the interpreter (its bf16 dot is wrong)
DTYPES = [torch.float32, torch.float16] + ([] if INTERPRET else [torch.bfloat16])
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def make(lengths, hq, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    k_heads = [[torch.randn(n, d, generator=g) for n in row] for row in lengths]
    v_heads = [[torch.randn(n, d, generator=g) for n in row] for row in lengths]
    k, v, off, lens = sda.pack_varlen(k_heads, v_heads)
    q = torch.randn(len(lengths), hq, d, generator=g)
    return [t.to(DEV, dtype) for t in (q, k, v)] + [off.to(DEV), lens.to(DEV)], k_heads, v_heads


def dense(q, k_heads, v_heads):
    """An independent check: per (b, h) plain softmax attention, zeros for an empty head."""
    B, Hq, D = q.shape
    Hkv = len(k_heads[0])
    G = Hq // Hkv
    out = torch.zeros(B, Hq, D)
    for b in range(B):
        for j in range(Hq):
            k, v = k_heads[b][j // G], v_heads[b][j // G]
            if len(k):
                out[b, j] = torch.softmax(q[b, j].float().cpu() @ k.T / D**0.5, -1) @ v
    return out


@pytest.mark.parametrize("lengths,hq,d", [
    ([[256, 56, 1, 33], [0, 31, 32, 65]], 4, 16),   # MHA (G = 1): 0, 1, not a multiple of the block
    ([[70, 0], [1, 33]], 8, 32),                     # GQA ratio 4
    ([[0]], 4, 16),                                  # the only head keeps nothing (k has 0 rows)
    ([[1]], 2, 16),                                  # a single row
])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_reference_matches_plain_attention_and_kernel(lengths, hq, d, num_splits):
    args, kh, vh = make(lengths, hq, d)
    ref, lse = sda.sparse_decode_attention_reference(*args, return_lse=True)
    torch.testing.assert_close(ref.cpu(), dense(args[0], kh, vh), atol=1e-5, rtol=1e-5)
    empty = torch.tensor([[n == 0 for n in row for _ in range(hq // len(row))] for row in lengths])
    assert torch.equal(ref.cpu()[empty], torch.zeros_like(ref.cpu()[empty]))  # 0 kept tokens -> zeros
    assert torch.isinf(lse.cpu()[empty]).all() and torch.isfinite(lse.cpu()[~empty]).all()
    if TRITON:
        out, lse_t = sda.sparse_decode_attention(*args, backend="triton", block_n=16, num_splits=num_splits,
                                                 return_lse=True)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        assert torch.equal(torch.isinf(lse_t), torch.isinf(lse))
        torch.testing.assert_close(lse_t[~empty.to(lse_t.device)], lse[~empty.to(lse.device)], atol=1e-4, rtol=1e-4)


@needs_triton
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernel_block_sizes_dtypes_and_default_splits(dtype):
    args, _, _ = make([[100, 17, 0, 64]], 8, 16, dtype=dtype, seed=3)
    ref = sda.sparse_decode_attention_reference(*args)
    for block_n in (16, 64, None):
        out = sda.sparse_decode_attention(*args, backend="triton", block_n=block_n)
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), ref.float(), atol=TOL[dtype], rtol=TOL[dtype])


@needs_triton
def test_more_splits_than_rows_and_an_empty_batch():
    args, _, _ = make([[3, 40]], 4, 16, seed=4)
    torch.testing.assert_close(sda.sparse_decode_attention(*args, backend="triton", block_n=16, num_splits=8),
                               sda.sparse_decode_attention_reference(*args), atol=1e-4, rtol=1e-4)
    q, k = torch.zeros(0, 4, 16, device=DEV), torch.zeros(0, 16, device=DEV)
    off = torch.zeros(0, 2, dtype=torch.int32, device=DEV)
    for backend in ("triton", "torch"):
        out, lse = sda.sparse_decode_attention(q, k, k, off, off, backend=backend, return_lse=True)
        assert out.shape == (0, 4, 16) and lse.shape == (0, 4)


def test_auto_backend_on_cpu_is_the_reference():
    args, _, _ = make([[5, 9]], 2, 16)
    if DEV == "cpu":
        assert torch.equal(sda.sparse_decode_attention(*args), sda.sparse_decode_attention_reference(*args))
        assert sda.prepare_sparse_decode_attention(*args).backend == "torch"


def test_bfloat16_is_refused_under_the_interpreter_and_served_by_the_reference():
    if not INTERPRET:
        pytest.skip("the refusal is for the interpreter only")
    args, _, _ = make([[5, 9]], 4, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="^q: bfloat16 is refused under TRITON_INTERPRET=1"):
        sda.sparse_decode_attention(*args, backend="triton")
    if DEV == "cpu":
        torch.testing.assert_close(sda.sparse_decode_attention(*args), sda.sparse_decode_attention_reference(*args))


@pytest.mark.parametrize("backend", ["triton", "torch"] if TRITON else ["torch"])
def test_the_prepared_plan_equals_the_one_shot_op_and_never_syncs(backend):
    (q, k, v, off, lens), _, _ = make([[40, 0, 7], [1, 64, 33]], 6, 16, seed=5)
    plan = sda.prepare_sparse_decode_attention(q, k, v, off, lens, backend=backend, block_n=16, num_splits=2,
                                               return_lse=True)
    assert plan.backend == backend
    with no_host_sync():
        out, lse = plan.run(q, k, v)
        out2, _ = plan.run(q, 2 * k, v)  # new values in the prepared layout: no new checks
    ref, ref_lse = sda.sparse_decode_attention(q, k, v, off, lens, backend=backend, block_n=16, num_splits=2,
                                               return_lse=True)
    assert torch.equal(out, ref) and torch.equal(lse, ref_lse)
    torch.testing.assert_close(out2, sda.sparse_decode_attention_reference(q, 2 * k, v, off, lens),
                               atol=1e-4, rtol=1e-4)
    with pytest.raises(AssertionError, match="host sync"), no_host_sync():  # the spy sees prepare's syncs
        sda.prepare_sparse_decode_attention(q, k, v, off, lens, backend=backend)
    with pytest.raises(ValueError, match="^q: the plan was prepared for"):
        plan.run(q[:1], k, v)
    if backend == "triton":
        assert plan.offsets.dtype == torch.int64 and plan.len_bucket == 64  # 64-bit rows; tuning key bucket
        assert plan.config == {"BLOCK_N": 16, "num_warps": 4, "num_stages": 2} and not plan.autotuned


@pytest.mark.parametrize("mutate,name", [
    (lambda a: {**a, "q": a["q"][0]}, "q"),                                         # 2-D q
    (lambda a: {**a, "k": a["k"][None]}, "k"),                                      # 3-D k
    (lambda a: {**a, "v": a["v"][:-1]}, "v"),                                       # v not shaped like k
    (lambda a: {**a, "k": a["k"].double(), "v": a["v"].double()}, "k"),             # dtype mismatch
    (lambda a: {**a, "q": a["q"].long()}, "q"),                                     # not a float
    (lambda a: {**a, "offsets": a["offsets"].float()}, "offsets"),                  # not integers
    (lambda a: {**a, "lengths": a["lengths"][:, :1]}, "lengths"),                   # shape mismatch
    (lambda a: {**a, "q": a["q"][:, :3]}, "q"),                                     # Hq not a multiple of Hkv
    (lambda a: {**a, "lengths": a["lengths"] - 10}, "lengths"),                     # negative length
    (lambda a: {**a, "offsets": a["offsets"] + 1000}, "offsets"),                   # beyond the buffer
    (lambda a: {**a, "sm_scale": -1.0}, "sm_scale"),
    (lambda a: {**a, "backend": "cuda"}, "backend"),
    (lambda a: {**a, "block_n": 24}, "block_n"),                                    # checked on every backend
    (lambda a: {**a, "block_n": 512}, "block_n"),
    (lambda a: {**a, "num_splits": 0}, "num_splits"),
    (lambda a: {**a, "num_warps": 6}, "num_warps"),
    (lambda a: {**a, "num_stages": 0}, "num_stages"),
])
def test_bad_input_names_the_argument(mutate, name):
    (q, k, v, off, lens), _, _ = make([[5, 9]], 4, 16)
    a = mutate(dict(q=q, k=k, v=v, offsets=off, lengths=lens))
    with pytest.raises(ValueError, match=f"^{name}"):
        sda.sparse_decode_attention(a.pop("q"), a.pop("k"), a.pop("v"), a.pop("offsets"), a.pop("lengths"), **a)


@needs_triton
def test_triton_launcher_checks():
    (q, k, v, off, lens), _, _ = make([[5, 9]], 4, 24)
    with pytest.raises(ValueError, match="^q: the Triton kernel needs a head dim"):
        sda.sparse_decode_attention(q, k, v, off, lens, backend="triton")
    assert sda.sparse_decode_attention(q, k, v, off, lens).shape == (1, 4, 24)  # the reference takes any D
    (q, k, v, off, lens), _, _ = make([[5, 9]], 4, 16)
    torch.testing.assert_close(sda.sparse_decode_attention_triton(q, k, v, off, lens, block_n=16),
                               sda.sparse_decode_attention_reference(q, k, v, off, lens), atol=1e-4, rtol=1e-4)


def test_pack_varlen_layout():
    k_heads = [[torch.ones(2, 16), torch.zeros(0, 16)], [torch.full((3, 16), 2.0), torch.ones(1, 16)]]
    k, v, off, lens = sda.pack_varlen(k_heads, k_heads)
    assert k.shape == (6, 16) and off.tolist() == [[0, 2], [2, 5]] and lens.tolist() == [[2, 0], [3, 1]]
    with pytest.raises(ValueError, match="^k_heads"):
        sda.pack_varlen([], [])


# --- on a GPU: every dtype, the autotuned launch ----------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gpu_autotuned_kernel_equals_the_fp32_reference(dtype):
    """Ragged GQA heads up to 5,000 rows, several splits: bf16/fp16 inputs against the fp32
    reference on the same inputs, within 2e-2 (bf16), 2e-3 (fp16), 1e-4 (fp32)."""
    args, _, _ = make([[5000, 0, 37, 4096], [1, 64, 65, 2080]], 16, 128, dtype=dtype, seed=9)
    plan = sda.prepare_sparse_decode_attention(*args, backend="auto")
    assert plan.backend == "triton" and plan.autotuned and plan.num_splits >= 1
    out = plan.run(*args[:3])
    assert set(plan.config) == {"BLOCK_N", "num_warps", "num_stages"}
    ref = sda.sparse_decode_attention_reference(*args)
    torch.testing.assert_close(out.float(), ref.float(), atol=TOL[dtype], rtol=TOL[dtype])


def test_autotune_keeps_small_key_tiles_for_exact_float32():
    assert sda._tiles_fit(sda.CONFIGS, {}, IEEE=False) == sda.CONFIGS
    assert {c.kwargs["BLOCK_N"] for c in sda._tiles_fit(sda.CONFIGS, {}, IEEE=True)} == {32, 64}
