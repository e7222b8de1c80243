"""Benchmark of the block-sparse attention kernel (Sparse VideoGen chapter) on a CUDA GPU.

For a CogVideoX-like and a HunyuanVideo-like attention shape (bf16) and band masks of kept
density 0.1, 0.25, 0.5 and 1.0 (the mask every head runs after the layout transformation), it

1. checks the Triton kernel against the torch reference on the GPU (max abs error, on a slice);
2. times the kernel, dense ``scaled_dot_product_attention`` and, when available, FlexAttention with
   the same block mask, with ``triton.testing.do_bench`` (median ms);
3. writes ``benchmarks/results/block_sparse_attention-<device>.json`` (device, versions, shapes,
   density, ms, ratio to SDPA).

Usage::

    python benchmarks/bench_block_sparse_attention.py            # needs CUDA
    python benchmarks/bench_block_sparse_attention.py --dry-run  # print the plan, anywhere
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# name: (B, H, c, F, S, D); N = c + F S, padded up to a multiple of the block
SHAPES = {
    "cogvideox-1.5": (2, 48, 226, 11, 4080, 64),
    "hunyuanvideo-480p": (1, 24, 256, 33, 1560, 128),
}
DENSITIES = (0.1, 0.25, 0.5, 1.0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=sorted(SHAPES))
    p.add_argument("--densities", nargs="+", type=float, default=list(DENSITIES))
    p.add_argument("--block", type=int, default=128, choices=(64, 128))
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit (no GPU needed)")
    args = p.parse_args(argv)
    for d in args.densities:
        if not 0 < d <= 1:
            p.error(f"--densities: each must be in (0, 1], got {d}")
    return args


def band_block_mask(nb: int, density: float) -> torch.Tensor:
    """A diagonal band of blocks whose block density is closest to ``density`` (all blocks at 1.0)."""
    idx = torch.arange(nb)
    dist = (idx[:, None] - idx[None, :]).abs()
    best = min(range(nb), key=lambda k: abs(float((dist <= k).float().mean()) - density))
    return dist <= best


def plan(args):
    rows = []
    for name in args.shapes:
        B, H, c, F, S, D = SHAPES[name]
        n = c + F * S
        n_pad = -(-n // args.block) * args.block
        rows.append(dict(shape=name, B=B, H=H, N=n, N_padded=n_pad, D=D, densities=args.densities))
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        print(json.dumps({"plan": plan(args), "block": args.block, "dtype": args.dtype}, indent=1))
        return 0
    if not torch.cuda.is_available():
        print("bench_block_sparse_attention: no CUDA GPU here; this benchmark only runs on a GPU "
              "(use --dry-run to check the plan).", file=sys.stderr)
        return 2
    import triton.testing
    import torch.nn.functional as F_

    from companion.kernels.block_sparse_attention import block_sparse_attention, block_sparse_attention_reference

    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention)
    except Exception:  # FlexAttention is optional
        flex = None
    dtype = getattr(torch, args.dtype)
    device = torch.cuda.get_device_name()
    records = []
    for row in plan(args):
        B, H, n, D = row["B"], row["H"], row["N_padded"], row["D"]
        torch.manual_seed(0)
        q, k, v = (torch.randn(B, H, n, D, device="cuda", dtype=dtype) for _ in range(3))
        nb = n // args.block
        # correctness first: 2 query blocks' worth of a random per-head mask on a short slice
        short = 8 * args.block
        m = (torch.rand(H, 8, 8, device="cuda") < 0.4) | torch.eye(8, dtype=torch.bool, device="cuda")
        sl = (slice(None), slice(None), slice(0, short))
        out = block_sparse_attention(q[sl], k[sl], v[sl], m, args.block, backend="triton")
        ref = block_sparse_attention_reference(q[sl], k[sl], v[sl], m, args.block)
        err = float((out.float() - ref.float()).abs().max())
        tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
        if not err <= tol:
            print(f"{row['shape']}: kernel disagrees with the reference (max abs error {err:.3g} > {tol})")
            return 1
        ms_sdpa = triton.testing.do_bench(lambda: F_.scaled_dot_product_attention(q, k, v))
        for density in args.densities:
            bm = band_block_mask(nb, density)
            real = float(bm.float().mean())
            ms = triton.testing.do_bench(lambda: block_sparse_attention(q, k, v, bm.cuda(), args.block,
                                                                        backend="triton", check_finite=False))
            rec = dict(shape=row["shape"], B=B, H=H, N=row["N"], N_padded=n, D=D, block=args.block,
                       density_target=density, density=real, ms_kernel=ms, ms_sdpa=ms_sdpa,
                       speedup_vs_sdpa=ms_sdpa / ms, max_abs_error=err)
            if flex is not None:
                bmc = bm.cuda()
                blk = create_block_mask(lambda b, h, qi, ki: bmc[qi // args.block, ki // args.block], None, None,
                                        n, n, device="cuda", BLOCK_SIZE=args.block)
                rec["ms_flex"] = triton.testing.do_bench(lambda: flex(q, k, v, block_mask=blk))
            records.append(rec)
            print(json.dumps(rec))
    args.out.mkdir(parents=True, exist_ok=True)
    meta = dict(device=device, torch=torch.__version__, triton=__import__("triton").__version__, dtype=args.dtype,
                results=records)
    path = args.out / f"block_sparse_attention-{re.sub(r'[^A-Za-z0-9]+', '-', device).strip('-').lower()}.json"
    path.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
