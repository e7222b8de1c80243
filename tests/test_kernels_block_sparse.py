"""The Triton block-sparse attention kernel against its torch reference, under TRITON_INTERPRET=1 on the CPU."""

import os

import pytest
import torch
import torch.nn.functional as F

from companion.kernels import block_sparse_attention as bsa

pytestmark = pytest.mark.skipif(not (bsa.INTERPRET or torch.cuda.is_available()),
                                reason="needs a GPU or TRITON_INTERPRET=1 (tests/conftest.py sets it without a GPU)")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def qkv(B, H, N, D, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, D, generator=g).to(DEVICE, dtype) for _ in range(3)]


def random_mask(lead, nb, p, seed):
    g = torch.Generator().manual_seed(seed)
    m = torch.rand(*lead, nb, nb, generator=g) < p
    return m | torch.eye(nb, dtype=torch.bool)  # the diagonal on: no empty row


@pytest.mark.parametrize("B,H,N,D,block,lead", [
    (1, 2, 64, 16, 16, (2,)),       # per-head masks
    (2, 2, 50, 16, 16, (1,)),       # N not a multiple of the block, one mask for all heads
    (1, 3, 70, 32, 32, (1, 3)),     # N not a multiple of 32, D = 32, [B, H] masks
    (2, 1, 40, 16, 16, ()),         # a 2-D mask
    (1, 1, 528, 16, 16, (1,)),      # the toy DiT's sequence
])
def test_kernel_equals_reference(B, H, N, D, block, lead):
    q, k, v = qkv(B, H, N, D, seed=N)
    mask = random_mask(lead, -(-N // block), 0.3, seed=D)
    out, lse = bsa.block_sparse_attention(q, k, v, mask, block, backend="triton", return_lse=True)
    ref, ref_lse = bsa.block_sparse_attention_reference(q, k, v, mask, block, return_lse=True)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(lse, ref_lse, atol=1e-4, rtol=1e-4)


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
    idx, cnt = bsa.block_lut(torch.tensor([[False, True, True], [False, False, False], [True, False, True]]))
    assert cnt.tolist() == [2, 0, 2] and idx[0, :2].tolist() == [1, 2] and idx[2, :2].tolist() == [0, 2]


@pytest.mark.parametrize("kwargs,name", [
    (dict(q=torch.randn(2, 32, 16)), "q"),
    (dict(k=torch.randn(1, 1, 33, 16)), "k"),
    (dict(v=torch.randn(1, 1, 32, 16, dtype=torch.float64)), "v"),
    (dict(k=torch.randn(1, 1, 32, 16).half()), "k"),
    (dict(q=torch.full((1, 1, 32, 16), float("nan"))), "q"),
    (dict(block_size=24), "block_size"),
    (dict(block_mask=torch.ones(3, 3, dtype=torch.bool)), "block_mask"),
    (dict(block_mask=torch.ones(2, 2)), "block_mask"),
    (dict(block_mask=torch.ones(5, 2, 2, dtype=torch.bool)), "block_mask"),
    (dict(backend="cuda"), "backend"),
    (dict(sm_scale=-1.0), "sm_scale"),
])
def test_bad_input_names_the_argument(kwargs, name):
    args = dict(q=torch.randn(1, 1, 32, 16), k=torch.randn(1, 1, 32, 16), v=torch.randn(1, 1, 32, 16),
                block_mask=torch.ones(2, 2, dtype=torch.bool), block_size=16)
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"^{name}"):
        bsa.block_sparse_attention(**args)


def test_triton_path_needs_a_power_of_two_head_dim():
    q = torch.randn(1, 1, 32, 24)
    with pytest.raises(ValueError, match="^q: head dimension"):
        bsa.block_sparse_attention(q, q, q, torch.ones(2, 2, dtype=torch.bool), 16, backend="triton")


def test_benchmark_parses_and_dry_runs(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_block_sparse_attention.py"
    spec = importlib.util.spec_from_file_location("bench_bsa", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--dry-run", "--densities", "0.25", "1.0"]) == 0
    assert "cogvideox" in capsys.readouterr().out
    assert bench.band_block_mask(8, 1.0).all()
    if not torch.cuda.is_available():
        assert bench.main([]) == 2 and "no CUDA GPU" in capsys.readouterr().err
