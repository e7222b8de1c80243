"""The Triton block-sparse attention kernel against its torch reference, under TRITON_INTERPRET=1 on the CPU
(and on a GPU where there is one)."""

import pytest
import torch
import torch.nn.functional as F

from companion.kernels import block_sparse_attention as bsa
from test_kernels_backend import no_host_sync  # tests/ is on sys.path (pytest, rootdir without __init__)

pytestmark = pytest.mark.skipif(not (bsa.INTERPRET or torch.cuda.is_available()),
                                reason="needs a GPU or TRITON_INTERPRET=1 (tests/conftest.py sets it without a GPU)")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# every dtype the launcher accepts here: bfloat16 is refused under the interpreter (its bf16 dot is wrong)
DTYPES = [torch.float32, torch.float16] + ([] if bsa.INTERPRET else [torch.bfloat16])
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def qkv(B, H, N, D, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, D, generator=g).to(DEVICE, dtype) for _ in range(3)]


def random_mask(lead, nb, p, seed):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(*lead, nb, nb, generator=g) < p
    return m | torch.eye(nb, dtype=torch.bool)  # the diagonal on: no empty row


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("B,H,N,D,block,lead,tiles", [
    (1, 2, 64, 16, 16, (2,), {}),                                # per-head masks
    (2, 2, 50, 16, 16, (1,), {}),                                # N not a multiple of the block, one mask
    (1, 3, 70, 32, 32, (1, 3), {}),                              # N not a multiple of 32, D = 32, [B, H] masks
    (2, 1, 40, 16, 16, (), {}),                                  # a 2-D mask
    (1, 1, 1, 16, 16, (), {}),                                   # a single token
    (1, 2, 200, 16, 64, (2,), dict(block_m=16, block_n=32)),     # tiles smaller than the block; key tiles past N
    (1, 1, 130, 32, 128, (), dict(block_m=32, block_n=128)),     # one query tile of 32 in a block of 128
])
def test_kernel_equals_reference(dtype, B, H, N, D, block, lead, tiles):
    q, k, v = qkv(B, H, N, D, seed=N, dtype=dtype)
    mask = random_mask(lead, -(-N // block), 0.3, seed=D)
    out, lse = bsa.block_sparse_attention(q, k, v, mask, block, backend="triton", return_lse=True, **tiles)
    ref, ref_lse = bsa.block_sparse_attention_reference(q, k, v, mask, block, return_lse=True)
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref.float(), atol=TOL[dtype], rtol=TOL[dtype])
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shape", [(0, 2, 40, 16), (1, 0, 40, 16), (1, 2, 0, 16)])
def test_empty_inputs_give_empty_outputs(shape):
    q = torch.zeros(shape, device=DEVICE)
    nb = -(-shape[2] // 16)
    for backend in ("triton", "torch"):
        out, lse = bsa.block_sparse_attention(q, q, q, torch.ones(nb, nb, dtype=torch.bool), 16, backend=backend,
                                              return_lse=True)
        assert out.shape == shape and lse.shape == shape[:3]


def test_query_chunks_do_not_change_the_reference():
    q, k, v = qkv(1, 2, 150, 16, seed=7)
    mask = random_mask((2,), 10, 0.3, seed=7)
    whole, lse = bsa.block_sparse_attention_reference(q, k, v, mask, 16, return_lse=True)
    for chunk in (16, 64):
        part, part_lse = bsa.block_sparse_attention_reference(q, k, v, mask, 16, return_lse=True, query_chunk=chunk)
        torch.testing.assert_close(part, whole, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(part_lse, lse, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("N", [16, 9])
def test_single_block(N):
    q, k, v = qkv(1, 2, N, 16, seed=1)
    out = bsa.block_sparse_attention(q, k, v, torch.ones(1, 1, dtype=torch.bool), 16, backend="triton")
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("N,block", [(64, 16), (45, 16), (96, 32)])
def test_full_mask_equals_dense_attention(N, block):
    q, k, v = qkv(2, 2, N, 16, seed=2)
    nb = -(-N // block)
    out = bsa.block_sparse_attention(q, k, v, torch.ones(nb, nb, dtype=torch.bool), block, backend="triton")
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5)


def test_diagonal_only_is_block_local_attention():
    q, k, v = qkv(1, 1, 48, 16, seed=3)
    out = bsa.block_sparse_attention(q, k, v, torch.eye(3, dtype=torch.bool), 16, backend="triton")
    for i in range(3):
        s = slice(16 * i, 16 * (i + 1))
        torch.testing.assert_close(out[..., s, :], F.scaled_dot_product_attention(q[..., s, :], k[..., s, :],
                                                                                  v[..., s, :]), atol=1e-5, rtol=1e-5)


def test_empty_mask_row_returns_zero_and_minus_inf_lse():
    q, k, v = qkv(1, 2, 40, 16, seed=4)
    mask = torch.ones(2, 3, 3, dtype=torch.bool)
    mask[0, 1] = False  # head 0, query block 1 sees nothing
    mask[1, 2] = False  # head 1, the short last block sees nothing
    out, lse = bsa.block_sparse_attention(q, k, v, mask, 16, backend="triton", return_lse=True)
    ref, ref_lse = bsa.block_sparse_attention_reference(q, k, v, mask, 16, return_lse=True)
    assert torch.all(out[0, 0, 16:32] == 0) and torch.all(out[0, 1, 32:] == 0)
    assert torch.all(torch.isneginf(lse[0, 0, 16:32])) and torch.all(torch.isneginf(lse[0, 1, 32:]))
    assert torch.all(torch.isneginf(ref_lse[0, 0, 16:32])) and torch.all(torch.isneginf(ref_lse[0, 1, 32:]))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(out).all()


def test_an_all_empty_mask_gives_zeros():
    q, k, v = qkv(1, 1, 20, 16, seed=6)
    out, lse = bsa.block_sparse_attention(q, k, v, torch.zeros(2, 2, dtype=torch.bool), 16, backend="triton",
                                          return_lse=True)
    assert torch.equal(out, torch.zeros_like(out)) and torch.isneginf(lse).all()


def test_sm_scale_and_large_scores_are_stable():
    q, k, v = qkv(1, 1, 32, 16, seed=5)
    mask = torch.ones(2, 2, dtype=torch.bool)
    out = bsa.block_sparse_attention(30 * q, k, v, mask, 16, sm_scale=1.0, backend="triton")
    ref = bsa.block_sparse_attention_reference(30 * q, k, v, mask, 16, sm_scale=1.0)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


def test_auto_backend_picks_the_reference_on_cpu_and_lut_is_sorted():
    q, k, v = qkv(1, 1, 32, 16)
    mask = torch.tensor([[True, False], [True, True]])
    if DEVICE == "cpu":
        torch.testing.assert_close(bsa.block_sparse_attention(q, k, v, mask, 16),
                                   bsa.block_sparse_attention_reference(q, k, v, mask, 16))
        assert bsa.prepare_block_sparse_attention(q, k, v, mask, 16).backend == "torch"
    idx, cnt = bsa.block_lut(torch.tensor([[False, True, True], [False, False, False], [True, False, True]]))
    assert cnt.tolist() == [2, 0, 2] and idx[0, :2].tolist() == [1, 2] and idx[2, :2].tolist() == [0, 2]
    idx, _ = bsa.block_lut(torch.tensor([[False, True, True]]), width=3)  # FlexAttention's full width
    assert idx.tolist() == [[1, 2, 0]]


def test_bfloat16_is_refused_under_the_interpreter_and_served_by_the_reference():
    if not bsa.INTERPRET:
        pytest.skip("the refusal is for the interpreter only")
    q, k, v = qkv(1, 1, 32, 16, dtype=torch.bfloat16)
    mask = torch.ones(2, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="^q: bfloat16 is refused under TRITON_INTERPRET=1"):
        bsa.block_sparse_attention(q, k, v, mask, 16, backend="triton")
    if DEVICE == "cpu":  # "auto" on a CPU tensor is the reference, which computes in float32
        out = bsa.block_sparse_attention(q, k, v, mask, 16)
        torch.testing.assert_close(out, bsa.block_sparse_attention_reference(q, k, v, mask, 16))


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_the_prepared_plan_equals_the_one_shot_op_and_never_syncs(backend):
    q, k, v = qkv(2, 2, 70, 16, seed=8)
    mask = random_mask((2,), 5, 0.4, seed=8)
    plan = bsa.prepare_block_sparse_attention(q, k, v, mask, 16, backend=backend, return_lse=True)
    assert plan.backend == backend
    with no_host_sync():
        out, lse = plan.run(q, k, v)
        out2, _ = plan.run(2 * q, k, v)  # new values of the prepared shape: no new checks, no new table
    ref, ref_lse = bsa.block_sparse_attention(q, k, v, mask, 16, backend=backend, return_lse=True)
    assert torch.equal(out, ref) and torch.equal(lse, ref_lse)
    torch.testing.assert_close(out2, bsa.block_sparse_attention(2 * q, k, v, mask, 16, backend=backend))
    with pytest.raises(AssertionError, match="host sync"), no_host_sync():  # the spy sees prepare's syncs
        bsa.prepare_block_sparse_attention(q, k, v, mask, 16, backend=backend)
    with pytest.raises(ValueError, match="^k: the plan was prepared for"):
        plan.run(q, k[:, :, :64], v)


def test_fixed_tiles_are_the_plans_config():
    q, k, v = qkv(1, 1, 64, 16)
    plan = bsa.prepare_block_sparse_attention(q, k, v, torch.ones(2, 2, dtype=torch.bool), 32, backend="triton",
                                              block_m=16, block_n=32, num_warps=8, num_stages=3)
    assert plan.config == {"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3} and not plan.autotuned


def test_autotune_configs_fit_every_block():
    for block in bsa._BLOCKS:
        fit = bsa._tiles_fit(bsa.CONFIGS, {}, MASK_BLOCK=block)
        assert fit and all(block % c.kwargs["BLOCK_M"] == 0 and block % c.kwargs["BLOCK_N"] == 0 for c in fit)
    assert len(bsa._tiles_fit(bsa.CONFIGS, {}, MASK_BLOCK=128)) == len(bsa.CONFIGS)
    exact = bsa._tiles_fit(bsa.CONFIGS, {}, MASK_BLOCK=128, PRECISION="ieee")  # float32: small tiles only
    assert [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) for c in exact] == [(64, 32), (32, 32), (16, 16)]


@pytest.mark.parametrize("kwargs,name", [
    (dict(q=torch.randn(2, 32, 16)), "q"),
    (dict(q=[[1.0]]), "q"),
    (dict(k=torch.randn(1, 1, 33, 16)), "k"),
    (dict(v=torch.randn(1, 1, 32, 16, dtype=torch.float64)), "v"),
    (dict(k=torch.randn(1, 1, 32, 16).half()), "k"),
    (dict(q=torch.full((1, 1, 32, 16), float("nan"))), "q"),
    (dict(q=torch.randn(1, 1, 32, 0), k=torch.randn(1, 1, 32, 0), v=torch.randn(1, 1, 32, 0)), "q"),
    (dict(block_size=24), "block_size"),
    (dict(block_mask=torch.ones(3, 3, dtype=torch.bool)), "block_mask"),
    (dict(block_mask=torch.ones(2, 2)), "block_mask"),
    (dict(block_mask=torch.ones(5, 2, 2, dtype=torch.bool)), "block_mask"),
    (dict(backend="cuda"), "backend"),
    (dict(sm_scale=-1.0), "sm_scale"),
    (dict(block_m=24), "block_m"),
    (dict(block_n=32, block_size=16), "block_n"),
    (dict(block_m=8), "block_m"),
    (dict(num_warps=3), "num_warps"),
    (dict(num_stages=0), "num_stages"),
])
def test_bad_input_names_the_argument(kwargs, name):
    args = dict(q=torch.randn(1, 1, 32, 16), k=torch.randn(1, 1, 32, 16), v=torch.randn(1, 1, 32, 16),
                block_mask=torch.ones(2, 2, dtype=torch.bool), block_size=16)
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"^{name}"):
        bsa.block_sparse_attention(**args)


def test_reference_query_chunk_is_checked():
    q = torch.randn(1, 1, 32, 16)
    with pytest.raises(ValueError, match="^query_chunk"):
        bsa.block_sparse_attention_reference(q, q, q, torch.ones(2, 2, dtype=torch.bool), 16, query_chunk=24)


def test_triton_path_needs_a_power_of_two_head_dim():
    q = torch.randn(1, 1, 32, 24)
    with pytest.raises(ValueError, match="^q: head dimension"):
        bsa.block_sparse_attention(q, q, q, torch.ones(2, 2, dtype=torch.bool), 16, backend="triton")


# --- on a GPU: every dtype, the autotuned launch ----------------------------------------------------

@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gpu_autotuned_kernel_equals_the_fp32_reference(dtype):
    """bf16 and fp16 inputs against the fp32 reference on the same (rounded) inputs: the output
    is rounded to the input dtype and P is cast to it before P V, so the stated tolerance is
    2e-2 (bf16, 8 mantissa bits), 2e-3 (fp16), 1e-4 (fp32, exact "ieee" dots)."""
    q, k, v = qkv(2, 3, 1000, 64, seed=11, dtype=dtype)
    mask = random_mask((3,), 8, 0.3, seed=11)
    plan = bsa.prepare_block_sparse_attention(q, k, v, mask, 128, backend="auto")
    assert plan.backend == "triton" and plan.autotuned
    out = plan.run(q, k, v)
    assert set(plan.config) == {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"}
    ref = bsa.block_sparse_attention_reference(q, k, v, mask, 128)
    torch.testing.assert_close(out.float(), ref.float(), atol=TOL[dtype], rtol=TOL[dtype])
