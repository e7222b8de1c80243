"""The GPU benchmarks' whole path at tiny shapes on the CPU (`run_all.py --smoke`), and the JSON it writes."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import companion.kernels as kernels
from benchmarks import bench_block_sparse_attention as bench_bsa
from benchmarks import bench_sparse_decode_attention as bench_sda
from benchmarks import common

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One smoke run of every benchmark, in a fresh process (it must pick the interpreter before
    importing the kernels), writing into a temporary clone-like folder."""
    root = tmp_path_factory.mktemp("smoke")
    before = sorted(p.name for p in common.RESULTS.iterdir())
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--smoke",
                          "--out", str(root / "benchmarks" / "results")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""})
    assert sorted(p.name for p in common.RESULTS.iterdir()) == before  # nothing lands in benchmarks/results
    return run, root


def test_smoke_run_passes_and_writes_one_file_per_kernel(smoke):
    run, root = smoke
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    names = sorted(p.name for p in (root / "benchmarks" / "results").iterdir())
    assert names == [f"{k}-cpu-triton-interpreter.json" for k in sorted(kernels.KERNELS)]
    assert "run_all: smoke run finished" in run.stdout


def test_smoke_block_sparse_records(smoke):
    _, root = smoke
    records = kernels.load_benchmark("block_sparse_attention", root=root)
    assert [r["density_target"] for r in records] == sorted(bench_bsa.DENSITIES)
    for r in records:
        common.validate_record(r, "block_sparse_attention")
        assert r["smoke"] and r["device"] == "cpu (Triton interpreter)" and r["peak"] is None
        assert r["dtype"] == "float16" and r["N"] == 104 and r["block_size"] == 32
        assert set(r["ms"]) == {"kernel", "sdpa", "flex"} and r["ms"]["flex"] is not None, r["errors"]
        assert r["speedup"]["sdpa"] == pytest.approx(r["ms"]["sdpa"] / r["ms"]["kernel"])
        assert r["max_abs_error"]["kernel"] <= r["tolerance"] and r["max_abs_error"]["flex"] <= r["tolerance"]
        assert r["tflops"]["sdpa"] == pytest.approx(4 * r["H"] * r["N"] ** 2 * r["D"] / r["ms"]["sdpa"] / 1e9)
        assert all(f is None for f in r["peak_fraction"].values())  # no known peak for the CPU
        assert r["sdpa_backend"] in common.SDPA_ORDER and not r["flex_compiled"]
    assert records[-1]["density"] == 1.0 and records[-1]["pair_density"] == 1.0


def test_smoke_decode_records(smoke):
    _, root = smoke
    records = kernels.load_benchmark("sparse_decode_attention", root=root)
    assert [(r["context"], r["batch"]) for r in records] == [(96, 1), (96, 2), (160, 1), (160, 2)]
    for r in records:
        common.validate_record(r, "sparse_decode_attention")
        assert r["smoke"] and r["peak"] is None and set(r["ms"]) == {"catekv", "kernel_full", "sdpa_full",
                                                                      "flash_attn_full"}
        assert r["ms"]["flash_attn_full"] is None and "flash_attn_full" in r["errors"]
        assert r["kept_rows"] == sum(bench_sda.catekv_lengths(r["context"], 2, 0.4, 16, 8))
        assert r["bytes"]["catekv"] < r["bytes"]["kernel_full"] == r["bytes"]["sdpa_full"]
        assert r["gbps"]["catekv"] == pytest.approx(r["bytes"]["catekv"] / r["ms"]["catekv"] / 1e6)
        assert all(e <= r["tolerance"] for e in r["max_abs_error"].values())


def test_the_repository_results_hold_gpu_records_in_the_format():
    for kernel in kernels.KERNELS:
        for record in kernels.load_benchmark(kernel, root=ROOT):
            common.validate_record(record, kernel)
            assert not record["smoke"] and record["device"] != "cpu (Triton interpreter)"


def test_without_a_gpu_the_real_run_refuses_and_smoke_never_writes_into_results(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench_bsa.main([]) == 2 and "no CUDA GPU" in capsys.readouterr().err
    assert bench_sda.main([]) == 2 and "no CUDA GPU" in capsys.readouterr().err
    for main in (bench_bsa.main, bench_sda.main):
        with pytest.raises(SystemExit, match="^--out: a smoke run never writes into benchmarks/results"):
            main(["--smoke", "--out", str(common.RESULTS)])


def test_dry_run_plans_the_gpu_shapes(capsys):
    assert bench_bsa.main(["--dry-run"]) == 0
    (row,) = __import__("json").loads(capsys.readouterr().out)["plan"]
    assert row["shape"] == "hunyuanvideo-720p" and row["N"] == 256 + 33 * 3600 and row["blocks"] == 931
    assert bench_sda.main(["--dry-run", "--contexts", "131072", "--batches", "1"]) == 0
    row = __import__("json").loads(capsys.readouterr().out.splitlines()[0])
    assert row["catekv_lengths"] == [131072] * 3 + [2080] * 5  # round(0.4 * 8) = 3 adaptive heads
    with pytest.raises(SystemExit):
        bench_sda.parse_args(["--ratio", "2"])
    with pytest.raises(SystemExit):
        bench_sda.parse_args(["--batches", "zero"])


def test_largest_batch_rule():
    """On an H200's 143.8e9 bytes: a 32K-token sequence's full cache is 32 layers x 2 x 8 heads x
    32,768 x 128 x 2 bytes = 4.29e9 bytes; (0.9 x 143.8e9 - 16.06e9) / 4.29e9 = 26.4 -> 26."""
    assert bench_sda.max_batch(32_768, 143.8e9) == 26
    assert bench_sda.max_batch(131_072, 143.8e9) == 6
    assert bench_sda.max_batch(131_072, 16e9) == 1  # never below 1


def test_work_counts():
    nb, n, block = 5, 70, 16
    assert bench_bsa.attended_pairs(torch.ones(nb, nb, dtype=torch.bool), block, n) == n * n
    assert bench_bsa.attended_pairs(torch.eye(nb, dtype=torch.bool), block, n) == 4 * 16**2 + 6**2
    for density in (0.1, 0.25, 0.5, 1.0):
        band = bench_bsa.band_block_mask(931, density)
        assert abs(float(band.float().mean()) - density) < 0.003 and band.diagonal().all()


def test_peaks_by_device_name():
    assert common.peak("NVIDIA H200", "bfloat16") == {"name": "H200", "tflops": 989.0, "gbps": 4800.0}
    assert common.peak("NVIDIA H100 80GB HBM3", "bfloat16")["gbps"] == 3350.0
    assert common.peak("NVIDIA H100 PCIe", "float16")["tflops"] == 756.0
    assert common.peak("NVIDIA A100-SXM4-80GB", "bfloat16")["gbps"] == 2039.0
    assert common.peak("NVIDIA L4", "bfloat16")["tflops"] == 121.0
    assert common.peak("Tesla T4", "bfloat16") is None and common.peak("Tesla T4", "float16")["tflops"] == 65.0
    assert common.peak("cpu (Triton interpreter)", "float16") is None


def test_a_record_that_breaks_the_format_is_refused(smoke):
    _, root = smoke
    good = kernels.load_benchmark("sparse_decode_attention", root=root)[0]
    for broken, field in (({**good, "ms": {**good["ms"], "catekv": None}}, "ms"),
                          ({k: v for k, v in good.items() if k != "batch"}, "batch"),
                          ({**good, "max_abs_error": {**good["max_abs_error"], "catekv": 1.0}}, "max_abs_error"),
                          ({**good, "speedup": {}}, "speedup")):
        with pytest.raises(ValueError, match=f"^record: .*{field}"):
            common.validate_record(broken, "sparse_decode_attention")
