"""The sparse decode-attention kernel (Triton, under TRITON_INTERPRET=1 on the CPU) equals its reference."""

import os

import pytest
import torch

from companion.kernels import sparse_decode_attention as sda

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1" or torch.cuda.is_available()
DEV = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not INTERPRET, reason="needs CUDA or TRITON_INTERPRET=1")


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
    ([[0]], 4, 16),                                  # the only head keeps nothing
])
@pytest.mark.parametrize("num_splits", [1, 3])
def test_reference_matches_plain_attention_and_kernel(lengths, hq, d, num_splits):
    args, kh, vh = make(lengths, hq, d)
    ref, lse = sda.sparse_decode_attention_reference(*args, return_lse=True)
    torch.testing.assert_close(ref.cpu(), dense(args[0], kh, vh), atol=1e-5, rtol=1e-5)
    empty = torch.tensor([[n == 0 for n in row for _ in range(hq // len(row))] for row in lengths])
    assert torch.equal(ref.cpu()[empty], torch.zeros_like(ref.cpu()[empty]))  # 0 kept tokens -> zeros
    assert torch.isinf(lse.cpu()[empty]).all() and torch.isfinite(lse.cpu()[~empty]).all()
    if INTERPRET:
        out, lse_t = sda.sparse_decode_attention(*args, backend="triton", block_n=16, num_splits=num_splits,
                                                 return_lse=True)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        assert torch.equal(torch.isinf(lse_t), torch.isinf(lse))
        torch.testing.assert_close(lse_t[~empty.to(lse_t.device)], lse[~empty.to(lse.device)], atol=1e-4, rtol=1e-4)


@needs_triton
def test_kernel_block_sizes_and_default_splits():
    args, _, _ = make([[100, 17, 0, 64]], 8, 16, seed=3)
    ref = sda.sparse_decode_attention_reference(*args)
    for block_n in (16, 64):
        torch.testing.assert_close(sda.sparse_decode_attention(*args, backend="triton", block_n=block_n), ref,
                                   atol=1e-4, rtol=1e-4)


def test_auto_backend_on_cpu_is_the_reference():
    args, _, _ = make([[5, 9]], 2, 16)
    if DEV == "cpu":
        assert torch.equal(sda.sparse_decode_attention(*args), sda.sparse_decode_attention_reference(*args))


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
])
def test_bad_input_names_the_argument(mutate, name):
    (q, k, v, off, lens), _, _ = make([[5, 9]], 4, 16)
    a = mutate(dict(q=q, k=k, v=v, offsets=off, lengths=lens))
    with pytest.raises(ValueError, match=f"^{name}"):
        sda.sparse_decode_attention(a.pop("q"), a.pop("k"), a.pop("v"), a.pop("offsets"), a.pop("lengths"), **a)


@needs_triton
def test_triton_launcher_checks():
    (q, k, v, off, lens), _, _ = make([[5, 9]], 4, 16)
    with pytest.raises(ValueError, match="^block_n"):
        sda.sparse_decode_attention(q, k, v, off, lens, backend="triton", block_n=24)
    with pytest.raises(ValueError, match="^num_splits"):
        sda.sparse_decode_attention(q, k, v, off, lens, backend="triton", num_splits=0)
    (q, k, v, off, lens), _, _ = make([[5, 9]], 4, 24)
    with pytest.raises(ValueError, match="^q: the Triton kernel needs a head dim"):
        sda.sparse_decode_attention(q, k, v, off, lens, backend="triton")
    assert sda.sparse_decode_attention(q, k, v, off, lens).shape == (1, 4, 24)  # the reference takes any D


def test_pack_varlen_layout():
    k_heads = [[torch.ones(2, 16), torch.zeros(0, 16)], [torch.full((3, 16), 2.0), torch.ones(1, 16)]]
    k, v, off, lens = sda.pack_varlen(k_heads, k_heads)
    assert k.shape == (6, 16) and off.tolist() == [[0, 2], [2, 5]] and lens.tolist() == [[2, 0], [3, 1]]
    with pytest.raises(ValueError, match="^k_heads"):
        sda.pack_varlen([], [])


def test_benchmark_script_parses_and_plans_without_a_gpu(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_sparse_decode_attention.py"
    spec = importlib.util.spec_from_file_location("bench_sda", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--dry-run", "--contexts", "131072", "--batches", "1"]) == 0
    row = __import__("json").loads(capsys.readouterr().out.splitlines()[0])
    assert row["catekv_lengths"] == [131072] * 3 + [2080] * 5  # round(0.4 * 8) = 3 adaptive heads
    if not torch.cuda.is_available():
        assert bench.main(["--contexts", "1024"]) == 2
        assert "no CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--ratio", "2"])
