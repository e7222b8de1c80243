"""What the kernel benchmarks share: the run's set-up, the device's peak, the timer, the pinned
SDPA backend and the results file (format in ``benchmarks/README.md``)."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SMOKE_OUT = ROOT / "_build" / "benchmarks-smoke"
FORMAT = 1

# Dense (no structured sparsity) tensor-core peaks from the vendor's datasheets:
# (substring of torch.cuda.get_device_name(), {dtype: TFLOP/s}, memory bandwidth in GB/s).
# The first match wins, so the more specific names come first.
PEAKS = (
    ("H200 NVL", {"bfloat16": 835.0, "float16": 835.0}, 4800.0),
    ("H200", {"bfloat16": 989.0, "float16": 989.0}, 4800.0),
    ("H100 NVL", {"bfloat16": 835.0, "float16": 835.0}, 3900.0),
    ("H100 PCIe", {"bfloat16": 756.0, "float16": 756.0}, 2000.0),
    ("H100", {"bfloat16": 989.0, "float16": 989.0}, 3350.0),
    ("A100-SXM4-80GB", {"bfloat16": 312.0, "float16": 312.0}, 2039.0),
    ("A100 80GB PCIe", {"bfloat16": 312.0, "float16": 312.0}, 1935.0),
    ("A100", {"bfloat16": 312.0, "float16": 312.0}, 1555.0),
    ("L4", {"bfloat16": 121.0, "float16": 121.0}, 300.0),
    ("T4", {"float16": 65.0}, 320.0),
)
TOLERANCE = {"bfloat16": 2e-2, "float16": 5e-3, "float32": 1e-4}  # max abs error against the fp32 reference
SDPA_ORDER = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


# --- the run's set-up -----------------------------------------------------------------------------

def add_common_args(parser) -> None:
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes, on the CPU through Triton's interpreter when there is no GPU")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results folder (default {RESULTS.relative_to(ROOT)}, or "
                             f"{SMOKE_OUT.relative_to(ROOT)} with --smoke)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit (no GPU needed)")


def out_dir(args) -> Path:
    """Where the results go; a smoke run never writes into ``benchmarks/results``."""
    out = (args.out or (SMOKE_OUT if args.smoke else RESULTS)).resolve()
    if args.smoke and (out == RESULTS or RESULTS in out.parents):
        raise SystemExit(f"--out: a smoke run never writes into {RESULTS.relative_to(ROOT)} (it holds GPU "
                         f"measurements only); pick another folder")
    return out


def start(args, name: str) -> torch.device | None:
    """The device of the run, or None (and a message) when it cannot run here.

    A smoke run without CUDA uses Triton's interpreter, which must be chosen before the kernels
    are imported: the benchmarks import them after this call.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    if not args.smoke:
        print(f"{name}: no CUDA GPU here; the benchmark measures a GPU (use --smoke for the CPU path, "
              f"--dry-run for the plan).", file=sys.stderr)
        return None
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import companion.kernels as kernels

    if not kernels.INTERPRET:
        raise SystemExit(f"{name}: companion.kernels was imported before TRITON_INTERPRET=1 was set; "
                         f"run the benchmark in a fresh process")
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu (Triton interpreter)"


def half_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 where the GPU computes it (compute capability >= 8), float16 otherwise and on the
    CPU (the interpreter refuses bfloat16)."""
    if device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 8:
        return torch.bfloat16
    return torch.float16


def peak(name: str, dtype: str) -> dict | None:
    """The device's dense tensor-core peak for ``dtype`` and its memory bandwidth, or None (unknown)."""
    for key, tflops, gbps in PEAKS:
        if key in name and dtype in tflops:
            return {"name": key, "tflops": tflops[dtype], "gbps": gbps}
    return None


def environment(device: torch.device, dtype: torch.dtype, smoke: bool, kernel: str) -> dict:
    """The fields every record starts with."""
    import triton

    name, dt = device_name(device), str(dtype).removeprefix("torch.")
    return {"format": FORMAT, "kernel": kernel, "device": name, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda, "dtype": dt, "smoke": smoke,
            "timer": ("triton.testing.do_bench (median, L2 flushed)" if device.type == "cuda"
                      else "time.perf_counter (median; CPU smoke run, not a speed)"),
            "peak": peak(name, dt), "tolerance": TOLERANCE[dt]}


# --- timing ---------------------------------------------------------------------------------------

def time_ms(fn, device: torch.device, min_reps: int = 10, max_ms: float = 6000.0) -> float:
    """Median milliseconds of ``fn()``: a first call (compilation, autotuning) outside the count,
    then ``triton.testing.do_bench`` on CUDA with enough time for ``min_reps`` repetitions (at most
    ``max_ms``); on the CPU (smoke) a plain ``perf_counter`` loop of ``min_reps`` calls."""
    fn()
    if device.type != "cuda":
        times = []
        for _ in range(min_reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    import triton.testing

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = (time.perf_counter() - t0) * 1e3
    rep = min(max(100.0, min_reps * once), max_ms)
    return float(triton.testing.do_bench(fn, warmup=min(max(25.0, 2 * once), max_ms / 2), rep=rep,
                                         return_mode="median"))


def sdpa_backend(call, order=SDPA_ORDER):
    """The first SDPA backend of ``order`` that runs ``call()`` here (tried once, outside any timing)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for name in order:
        backend = getattr(SDPBackend, name)
        try:
            with warnings.catch_warnings(), sdpa_kernel([backend]):
                warnings.simplefilter("ignore")  # a refused backend warns why before raising
                call()
            return backend
        except RuntimeError:
            continue
    raise RuntimeError(f"no SDPA backend of {order} runs this call")


def max_abs_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref.float()).abs().max()) if out.numel() else 0.0


def ratios(ms: dict, over: str) -> dict:
    """``ms[side] / ms[over]`` for every other side: > 1 means ``over`` is faster."""
    return {side: (t / ms[over] if t is not None else None) for side, t in ms.items() if side != over}


def fractions(rates: dict, peak_rate: float | None) -> dict:
    return {side: (r / peak_rate if r is not None and peak_rate else None) for side, r in rates.items()}


# --- results --------------------------------------------------------------------------------------

def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def write_results(out: Path, kernel: str, device: torch.device, records: list[dict]) -> Path:
    """``<out>/<kernel>-<device>.json``: ``{"format", "kernel", "records"}``, every record whole."""
    for record in records:
        validate_record(record, kernel)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{kernel}-{slug(device_name(device))}.json"
    path.write_text(json.dumps({"format": FORMAT, "kernel": kernel, "records": records}, indent=1) + "\n")
    print(f"wrote {path}")
    return path


_COMMON = {"format": int, "kernel": str, "device": str, "torch": str, "triton": str, "dtype": str, "smoke": bool,
           "timer": str, "tolerance": float, "sdpa_backend": str, "ms": dict, "speedup": dict, "peak_fraction": dict,
           "max_abs_error": dict, "errors": dict}
_FIELDS = {
    "block_sparse_attention": {"shape": str, "B": int, "H": int, "N": int, "D": int, "block_size": int,
                               "density_target": float, "density": float, "pair_density": float, "tflops": dict,
                               "flex_compiled": bool},
    "sparse_decode_attention": {"context": int, "batch": int, "batch_rule": str, "q_heads": int, "kv_heads": int,
                                "head_dim": int, "adaptive_ratio": float, "budget": int, "window": int,
                                "kept_rows": int, "num_splits": int, "bytes": dict, "gbps": dict},
}
_MAIN_SIDE = {"block_sparse_attention": "kernel", "sparse_decode_attention": "catekv"}


def validate_record(record: dict, kernel: str) -> None:
    """Raise ValueError naming the first field of ``record`` that breaks the format."""
    for name, kind in {**_COMMON, **_FIELDS[kernel]}.items():
        value = record.get(name)
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ValueError(f"record: field {name!r} should be {kind.__name__}, got {value!r}")
    if record["kernel"] != kernel or record["format"] != FORMAT:
        raise ValueError(f"record: kernel/format {record['kernel']!r}/{record['format']} is not {kernel!r}/{FORMAT}")
    if "peak" not in record or (record["peak"] is not None and not {"name", "tflops", "gbps"} <= set(record["peak"])):
        raise ValueError(f"record: peak should be None or {{name, tflops, gbps}}, got {record.get('peak')!r}")
    main = _MAIN_SIDE[kernel]
    ms = record["ms"]
    if not (isinstance(ms.get(main), float) and ms[main] > 0):
        raise ValueError(f"record: ms[{main!r}] should be a positive time, got {ms.get(main)!r}")
    for side, t in ms.items():
        if t is None and side not in record["errors"]:
            raise ValueError(f"record: ms[{side!r}] is missing and errors does not say why")
        if t is not None and not (isinstance(t, float) and math.isfinite(t) and t > 0):
            raise ValueError(f"record: ms[{side!r}] should be a positive time, got {t!r}")
    if set(record["speedup"]) != set(ms) - {main}:
        raise ValueError(f"record: speedup should have the sides {sorted(set(ms) - {main})}, got {sorted(record['speedup'])}")
    err = record["max_abs_error"].get(main)
    if not (isinstance(err, float) and err <= record["tolerance"]):
        raise ValueError(f"record: max_abs_error[{main!r}] = {err!r} is not within the tolerance {record['tolerance']}")
