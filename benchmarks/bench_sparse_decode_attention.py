"""Decode attention (CateKV) on a GPU: the kernel alone over the CateKV cache, against full-cache decode.

**Shape.** One layer of a Llama-3-8B-like model (32 query heads, 8 KV heads, head dimension 128,
bf16), one new token per sequence, contexts of 32K, 64K and 128K tokens. **Batches:** 1, and the
largest batch whose *full* cache for the whole model (32 layers) fits next to its 16 GB of bf16
weights in 90% of the device's memory (``max_batch``; one layer of it is allocated here).

**The CateKV cache.** ``round(r * Hkv)`` adaptive KV heads keep the whole context, the others
keep ``budget`` selected tokens plus a recent ``window`` (r = 0.4, budget 2,048, window 32, the
chapter's setting), packed back to back as the kernel reads them.

**What is timed**, with :func:`common.time_ms` (``triton.testing.do_bench``, median, after a warm-up
that compiles and autotunes), every input and plan built before:

* ``catekv``: ``plan.run`` of our kernel over the CateKV cache;
* ``kernel_full``: our kernel over the full cache, every head keeping the context (a
  FlashDecoding-style split-K decode: the baseline on the same code);
* ``sdpa_full``: ``scaled_dot_product_attention`` with one query over the full cache
  (``enable_gqa``), its backend pinned and recorded;
* ``flash_attn_full``: ``flash_attn_with_kvcache`` over the full cache, when ``flash_attn`` is
  installed (otherwise recorded as missing).

Each output is checked on the whole benchmark shape against the fp32 reference first; bytes
moved count K and V rows read plus the query and output.

    python benchmarks/bench_sparse_decode_attention.py            # a CUDA GPU, about a minute
    python benchmarks/bench_sparse_decode_attention.py --smoke    # tiny shapes, CPU interpreter
    python benchmarks/bench_sparse_decode_attention.py --dry-run  # the plan, anywhere
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (add_common_args, environment, fractions, half_dtype, max_abs_error,  # noqa: E402
                               out_dir, ratios, sdpa_backend, start, time_ms, write_results)

KERNEL = "sparse_decode_attention"
MODEL = dict(q_heads=32, kv_heads=8, head_dim=128, layers=32, weights_gb=16.06)  # Llama-3-8B
SMOKE = dict(q_heads=4, kv_heads=2, head_dim=16, contexts=[96, 160], batches=["1", "2"], budget=16, window=8)
SDPA_DECODE_ORDER = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")  # scores are small


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--contexts", type=int, nargs="+", default=[32_768, 65_536, 131_072])
    p.add_argument("--batches", nargs="+", default=["1", "max"], help="batch sizes, or 'max' (see max_batch)")
    p.add_argument("--ratio", type=float, default=0.4, help="adaptive-head ratio r")
    p.add_argument("--budget", type=int, default=2048, help="tokens a consistent head selects")
    p.add_argument("--window", type=int, default=32, help="recent tokens every head keeps")
    add_common_args(p)
    args = p.parse_args(argv)
    if not 0 <= args.ratio <= 1:
        p.error("--ratio must be in [0, 1]")
    if any(b != "max" and not (b.isdigit() and int(b) >= 1) for b in args.batches):
        p.error(f"--batches: each must be an integer >= 1 or 'max', got {args.batches}")
    if min(args.contexts) < 1 or args.budget < 0 or args.window < 0:
        p.error("--contexts must be >= 1, --budget and --window >= 0")
    return args


def catekv_lengths(n: int, kv_heads: int, ratio: float, budget: int, window: int) -> list[int]:
    """Rows each KV head keeps: the first round(r * Hkv) adaptive (n), the rest budget + window."""
    n_adapt = round(ratio * kv_heads)
    return [n] * n_adapt + [min(n, budget + window)] * (kv_heads - n_adapt)


def max_batch(n: int, memory_bytes: float, model: dict = MODEL, itemsize: int = 2) -> int:
    """The largest batch whose full K/V cache for every layer fits, with the weights, in 90% of memory."""
    per_sequence = model["layers"] * 2 * model["kv_heads"] * n * model["head_dim"] * itemsize
    return max(1, int((0.9 * memory_bytes - model["weights_gb"] * 1e9) // per_sequence))


def plan(args, memory_bytes: float | None = None) -> list[dict]:
    """One row per (context, batch); ``memory_bytes`` (the device's) resolves ``max``."""
    shape = dict(SMOKE) if args.smoke else dict(MODEL, contexts=args.contexts, batches=args.batches,
                                                budget=args.budget, window=args.window)
    rows = []
    for n in shape["contexts"]:
        for b in shape["batches"]:
            if b == "max":
                batch = max_batch(n, memory_bytes) if memory_bytes else None
                rule = "largest batch whose 32-layer full cache and 16 GB weights fit in 90% of memory"
            else:
                batch, rule = int(b), ("smoke: fixed" if args.smoke else "fixed")
            lens = catekv_lengths(n, shape["kv_heads"], args.ratio, shape["budget"], shape["window"])
            rows.append(dict(context=n, batch=batch, batch_rule=rule, q_heads=shape["q_heads"],
                             kv_heads=shape["kv_heads"], head_dim=shape["head_dim"], adaptive_ratio=args.ratio,
                             budget=shape["budget"], window=shape["window"], catekv_lengths=lens))
    return rows


def packed(lengths: list[int], batch: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(offsets int64, lengths int32) [batch, Hkv] of heads packed back to back."""
    lens = torch.tensor([lengths] * batch, device=device, dtype=torch.int64)
    offsets = (lens.flatten().cumsum(0) - lens.flatten()).view_as(lens)
    return offsets, lens.to(torch.int32)


def flash_attn_side(q, k_full, v_full):
    """``flash_attn_with_kvcache`` over the full cache in its layout [B, n, Hkv, D], or None."""
    try:
        from flash_attn import flash_attn_with_kvcache
    except ImportError:
        return None
    kc, vc = k_full.transpose(1, 2).contiguous(), v_full.transpose(1, 2).contiguous()
    return lambda: flash_attn_with_kvcache(q[:, None], kc, vc)[:, 0]


def bench_row(row: dict, device: torch.device, smoke: bool) -> dict:
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    from companion.kernels.sparse_decode_attention import (prepare_sparse_decode_attention,
                                                           sparse_decode_attention_reference)

    B, n, Hq, Hkv, D = row["batch"], row["context"], row["q_heads"], row["kv_heads"], row["head_dim"]
    dtype = half_dtype(device)
    env = environment(device, dtype, smoke, KERNEL)
    reps = 2 if smoke else 10
    g = torch.Generator(device=device).manual_seed(0)
    q = torch.randn(B, Hq, D, device=device, dtype=dtype, generator=g)
    k_full, v_full = (torch.randn(B, Hkv, n, D, device=device, dtype=dtype, generator=g) for _ in range(2))
    off_f, len_f = packed([n] * Hkv, B, device)  # the full cache, packed: it is k_full's own memory
    kp, vp = k_full.view(-1, D), v_full.view(-1, D)
    off_c, len_c = packed(row["catekv_lengths"], B, device)
    kept = sum(row["catekv_lengths"])
    kc, vc = (torch.randn(B * kept, D, device=device, dtype=dtype, generator=g) for _ in range(2))

    plans = {"catekv": (prepare_sparse_decode_attention(q, kc, vc, off_c, len_c, backend="triton"), kc, vc),
             "kernel_full": (prepare_sparse_decode_attention(q, kp, vp, off_f, len_f, backend="triton"), kp, vp)}
    ref = {"catekv": sparse_decode_attention_reference(q, kc, vc, off_c, len_c),
           "full": sparse_decode_attention_reference(q, kp, vp, off_f, len_f)}
    errs = {side: max_abs_error(p.run(q, k, v), ref["catekv" if side == "catekv" else "full"])
            for side, (p, k, v) in plans.items()}
    for side, err in errs.items():
        if not err <= env["tolerance"]:
            raise SystemExit(f"context {n}, batch {B}: the kernel ({side}) differs from the fp32 reference by "
                             f"{err:.3g} > {env['tolerance']}; nothing timed, nothing written")
    ms = {side: time_ms(lambda p=p, k=k, v=v: p.run(q, k, v), device, reps) for side, (p, k, v) in plans.items()}

    q4 = q[:, :, None]

    def sdpa():
        return F.scaled_dot_product_attention(q4, k_full, v_full, enable_gqa=True)[:, :, 0]

    backend = sdpa_backend(sdpa, SDPA_DECODE_ORDER)
    errors = {}
    with sdpa_kernel([backend]):
        errs["sdpa_full"] = max_abs_error(sdpa(), ref["full"])
        ms["sdpa_full"] = time_ms(sdpa, device, reps)
    flash = flash_attn_side(q, k_full, v_full) if device.type == "cuda" else None
    ms["flash_attn_full"] = None
    if flash is None:
        errors["flash_attn_full"] = "flash_attn is not installed (or no GPU)"
    else:
        errs["flash_attn_full"] = max_abs_error(flash(), ref["full"])
        ms["flash_attn_full"] = time_ms(flash, device, reps)
    for side in ("sdpa_full", "flash_attn_full"):  # a baseline that computes something else is not timed
        if side in errs and not errs[side] <= env["tolerance"]:
            errors[side], ms[side] = f"max abs error {errs[side]:.3g} > {env['tolerance']}: not counted", None

    qo = 2 * B * Hq * D * dtype.itemsize  # the query read, the output written
    full_bytes = 2 * B * Hkv * n * D * dtype.itemsize + qo
    moved = {"catekv": 2 * B * kept * D * dtype.itemsize + qo, "kernel_full": full_bytes, "sdpa_full": full_bytes,
             "flash_attn_full": full_bytes}
    gbps = {side: (moved[side] / t / 1e6 if t is not None else None) for side, t in ms.items()}
    record = {**env, **{key: row[key] for key in ("context", "batch", "batch_rule", "q_heads", "kv_heads",
                                                  "head_dim", "adaptive_ratio", "budget", "window")},
              "kept_rows": kept, "num_splits": plans["catekv"][0].num_splits, "sdpa_backend": backend.name,
              "ms": ms, "bytes": moved, "gbps": gbps,
              "peak_fraction": fractions(gbps, (env["peak"] or {}).get("gbps")),
              "speedup": ratios(ms, "catekv"), "max_abs_error": errs, "errors": errors,
              "tuning": {side: {"autotuned": p.autotuned, "num_splits": p.num_splits, **(p.config or {})}
                         for side, (p, _, _) in plans.items()}}
    print(json.dumps({key: record[key] for key in ("context", "batch", "ms", "speedup", "max_abs_error")}))
    return record


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        for row in plan(args):
            print(json.dumps(row))
        return 0
    out = out_dir(args)
    device = start(args, "bench_sparse_decode_attention")
    if device is None:
        return 2
    memory = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    records = []
    for row in plan(args, memory):
        records.append(bench_row(row, device, args.smoke))
        if device.type == "cuda":
            torch.cuda.empty_cache()
    write_results(out, KERNEL, device, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
