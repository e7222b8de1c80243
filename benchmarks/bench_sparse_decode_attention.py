"""Decode latency of the packed sparse decode-attention kernel vs full-cache SDPA (CUDA only).

One new query token per sequence at Llama-3-8B-like shapes (32 query heads, 8 KV heads, head dim 128,
bf16), contexts 32K-128K, batch 1 and 8. Three ways to attend, per layer:

* ``sdpa_full``: torch ``scaled_dot_product_attention`` with q_len = 1 over the full cache (GQA);
* ``kernel_full``: our Triton kernel over the full cache (every head keeps n tokens);
* ``kernel_catekv``: our Triton kernel over the CateKV cache (a fraction r of the KV heads keep n
  tokens, the others ``budget + 32``).

Correctness is checked on the GPU first (kernel vs reference, bf16). Results (device, versions, shapes,
ms, ratios) go to ``benchmarks/results/sparse_decode_attention-<device>.json``.

    python benchmarks/bench_sparse_decode_attention.py [--contexts 32768 131072] [--batches 1 8]
                                                      [--ratio 0.4] [--budget 2048] [--dry-run]

``--dry-run`` prints the plan (shapes, bytes) without touching a GPU. Without CUDA (and without
``--dry-run``) the script exits with status 2 and a clear message.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = Path(__file__).parent / "results"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--contexts", type=int, nargs="+", default=[32_768, 65_536, 131_072])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--ratio", type=float, default=0.4, help="adaptive-head ratio r")
    p.add_argument("--budget", type=int, default=2048, help="tokens kept by a consistent head (+32 tail)")
    p.add_argument("--block-n", type=int, default=64)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit (no GPU needed)")
    args = p.parse_args(argv)
    if not 0 <= args.ratio <= 1:
        p.error("--ratio must be in [0, 1]")
    if args.q_heads % args.kv_heads:
        p.error("--q-heads must be a multiple of --kv-heads")
    return args


def catekv_lengths(n: int, kv_heads: int, ratio: float, budget: int) -> list[int]:
    """Kept length of each KV head: the first round(r * Hkv) adaptive (n), the rest budget + 32."""
    n_adapt = round(ratio * kv_heads)
    return [n] * n_adapt + [min(n, budget + 32)] * (kv_heads - n_adapt)


def plan(args) -> list[dict]:
    rows = []
    for n in args.contexts:
        for b in args.batches:
            lens = catekv_lengths(n, args.kv_heads, args.ratio, args.budget)
            per_tok = 2 * 2 * args.head_dim  # K and V, bf16
            rows.append({"context": n, "batch": b, "catekv_lengths": lens,
                         "full_kv_bytes_per_layer": per_tok * args.kv_heads * n * b,
                         "catekv_kv_bytes_per_layer": per_tok * sum(lens) * b})
    return rows


def run(args) -> dict:
    import triton
    import torch.nn.functional as F
    from triton.testing import do_bench

    from companion.kernels.sparse_decode_attention import (sparse_decode_attention_reference,
                                                           sparse_decode_attention_triton)

    dev, dtype = "cuda", torch.bfloat16
    Hq, Hkv, D = args.q_heads, args.kv_heads, args.head_dim
    # correctness first, on a small ragged GQA case and on one benchmark-like case
    g = torch.Generator(device=dev).manual_seed(0)
    for lens in ([[1000, 0, 37, 4096, 1, 64, 65, 2080]], [catekv_lengths(8192, Hkv, args.ratio, args.budget)] * 2):
        B = len(lens)
        L = torch.tensor(lens, device=dev)
        off = (torch.cumsum(L.flatten(), 0) - L.flatten()).view_as(L)
        k = torch.randn(int(L.sum()), D, device=dev, dtype=dtype, generator=g)
        v = torch.randn_like(k)
        q = torch.randn(B, Hq, D, device=dev, dtype=dtype, generator=g)
        err = (sparse_decode_attention_triton(q, k, v, off, L, block_n=args.block_n).float()
               - sparse_decode_attention_reference(q, k, v, off, L).float()).abs().max().item()
        if not err < 2e-2:
            raise SystemExit(f"kernel differs from the reference on CUDA (max abs error {err:.3g}); not timing")
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "dtype": "bfloat16", "q_heads": Hq, "kv_heads": Hkv, "head_dim": D, "adaptive_ratio": args.ratio,
               "budget": args.budget, "correctness_max_abs_err": err, "rows": []}
    for row in plan(args):
        n, B = row["context"], row["batch"]
        q = torch.randn(B, Hq, D, device=dev, dtype=dtype)
        k_full = torch.randn(B, Hkv, n, D, device=dev, dtype=dtype)
        v_full = torch.randn_like(k_full)
        ms_sdpa = do_bench(lambda: F.scaled_dot_product_attention(q[:, :, None], k_full, v_full, enable_gqa=True),
                           warmup=25, rep=100)
        # the full cache, packed: every head keeps n rows
        kp, vp = k_full.reshape(-1, D), v_full.reshape(-1, D)
        Lf = torch.full((B, Hkv), n, device=dev, dtype=torch.int32)
        offf = (torch.arange(B * Hkv, device=dev, dtype=torch.int64) * n).view(B, Hkv).to(torch.int32)
        ms_kfull = do_bench(lambda: sparse_decode_attention_triton(q, kp, vp, offf, Lf, block_n=args.block_n),
                            warmup=25, rep=100)
        # the CateKV cache: ragged lengths, packed (only what is kept is allocated)
        Lc = torch.tensor([row["catekv_lengths"]] * B, device=dev, dtype=torch.int32)
        offc = (torch.cumsum(Lc.flatten().long(), 0) - Lc.flatten().long()).view(B, Hkv).to(torch.int32)
        kc = torch.randn(int(Lc.sum()), D, device=dev, dtype=dtype)
        vc = torch.randn_like(kc)
        ms_kcate = do_bench(lambda: sparse_decode_attention_triton(q, kc, vc, offc, Lc, block_n=args.block_n),
                            warmup=25, rep=100)
        bw = row["full_kv_bytes_per_layer"] / (ms_kfull * 1e-3) / 1e9
        results["rows"].append({**{k: v for k, v in row.items() if k != "catekv_lengths"},
                                "ms_sdpa_full": ms_sdpa, "ms_kernel_full": ms_kfull, "ms_kernel_catekv": ms_kcate,
                                "speedup_catekv_vs_sdpa": ms_sdpa / ms_kcate,
                                "speedup_catekv_vs_kernel_full": ms_kfull / ms_kcate,
                                "kernel_full_gb_per_s": bw})
        print(json.dumps(results["rows"][-1]))
        torch.cuda.empty_cache()
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        for row in plan(args):
            print(json.dumps(row))
        return 0
    if not torch.cuda.is_available():
        print("bench_sparse_decode_attention: no CUDA GPU here; this benchmark only runs on a GPU "
              "(use --dry-run to see the plan).", file=sys.stderr)
        return 2
    results = run(args)
    out = args.out or RESULTS / f"sparse_decode_attention-{torch.cuda.get_device_name().replace(' ', '_')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
