"""Block-sparse attention (Sparse VideoGen) on a GPU: the kernel alone, against dense SDPA and FlexAttention.

**Shape.** HunyuanVideo at 720p and 129 frames: its VAE makes 33 latent frames of 90 x 160, 2 x 2
patches make 45 x 80 = 3,600 tokens a frame, and 256 text tokens come first, so
N = 256 + 33 * 3,600 = 119,056 tokens, 24 heads of dimension 128, batch 1. That is the setting
the paper's speed-ups are quoted at and the top of the 75k-120k range of video DiTs; it is not a
multiple of the block, so the short last block is timed too. (``--shapes cogvideox-1.5`` adds a
CogVideoX-1.5-like shape, N = 45,106, 48 heads of 64.)

**Masks.** A diagonal band of blocks of 128 tokens, the pattern every head runs after the layout
transformation, at block densities 0.1, 0.25, 0.5 and 1.0 (1.0 measures the kernel against
FlashAttention on the same work).

**What is timed**, with :func:`common.time_ms` (``triton.testing.do_bench``, median, after a warm-up
that compiles and autotunes): ``plan.run(q, k, v)`` of a prepared plan (inputs checked and lookup
table built before), dense ``scaled_dot_product_attention`` with its backend pinned, and compiled
FlexAttention with a ``BlockMask.from_kv_blocks`` built from the same lookup table (every listed
block is a full block; the ``mask_mod`` reads the block mask, for the eager path). Before timing,
each output is checked on the **whole** shape against the fp32 reference computed in query chunks.

    python benchmarks/bench_block_sparse_attention.py            # a CUDA GPU, about 3 minutes
    python benchmarks/bench_block_sparse_attention.py --smoke    # tiny shapes, CPU interpreter
    python benchmarks/bench_block_sparse_attention.py --dry-run  # the plan, anywhere
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import (SDPA_ORDER, add_common_args, environment, fractions, half_dtype,  # noqa: E402
                               max_abs_error, out_dir, ratios, sdpa_backend, start, time_ms, write_results)

KERNEL = "block_sparse_attention"
# name: batch, heads, text tokens, latent frames, tokens per frame, head dim; N = text + frames * per frame
SHAPES = {
    "hunyuanvideo-720p": dict(B=1, H=24, text=256, frames=33, frame_tokens=3600, D=128),
    "cogvideox-1.5": dict(B=1, H=48, text=226, frames=11, frame_tokens=4080, D=64),
}
SMOKE_SHAPE = ("smoke", dict(B=1, H=2, text=8, frames=3, frame_tokens=32, D=16))  # N = 104: 4 blocks, one short
DENSITIES = (0.1, 0.25, 0.5, 1.0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["hunyuanvideo-720p"])
    p.add_argument("--densities", nargs="+", type=float, default=list(DENSITIES))
    p.add_argument("--block", type=int, default=128, choices=(64, 128), help="mask block (32 with --smoke)")
    add_common_args(p)
    args = p.parse_args(argv)
    for d in args.densities:
        if not 0 < d <= 1:
            p.error(f"--densities: each must be in (0, 1], got {d}")
    return args


def band_block_mask(nb: int, density: float, device=None) -> torch.Tensor:
    """The diagonal band of blocks ``|i - j| <= w`` whose block density is closest to ``density``."""
    idx = torch.arange(nb, device=device)
    dist = (idx[:, None] - idx[None, :]).abs()
    band = torch.bincount(dist.flatten(), minlength=nb).cumsum(0) / nb**2  # density of half-width w
    return dist <= int((band - density).abs().argmin())


def attended_pairs(mask: torch.Tensor, block: int, n: int) -> float:
    """(query, key) pairs a block mask [nb, nb] computes, counting the short last block as it is."""
    sizes = torch.full((mask.shape[-1],), float(block), device=mask.device)
    sizes[-1] = n - block * (mask.shape[-1] - 1)
    return float(sizes @ mask.float() @ sizes)


def plan(args) -> list[dict]:
    shapes = [SMOKE_SHAPE] if args.smoke else [(name, SHAPES[name]) for name in args.shapes]
    block = 32 if args.smoke else args.block
    rows = []
    for name, s in shapes:
        n = s["text"] + s["frames"] * s["frame_tokens"]
        dense_flops = 4 * s["B"] * s["H"] * n * n * s["D"]  # QK^T and PV, 2 flops a multiply-add
        rows.append(dict(shape=name, B=s["B"], H=s["H"], N=n, D=s["D"], block_size=block,
                         blocks=-(-n // block), densities=args.densities, dense_tflop=dense_flops / 1e12))
    return rows


def reference_chunk(row: dict, device: torch.device) -> int | None:
    """Queries per chunk of the fp32 reference: about a quarter of the free memory for its scores."""
    if device.type != "cuda":
        return None
    free = torch.cuda.mem_get_info(device)[0]
    per_query = row["B"] * row["H"] * row["N"] * 16  # scores, probabilities and mask, with slack
    chunk = row["block_size"]
    while 2 * chunk * per_query <= free / 4 and chunk < row["N"]:
        chunk *= 2
    return chunk


def flex_block_mask(mask: torch.Tensor, B: int, H: int, n: int, block: int, mask_mod):
    """FlexAttention's BlockMask of the block mask [nb, nb]: every active block a full block.

    ``mask_mod`` must say the same (the eager path evaluates it; the compiled one skips it on
    full blocks); one function for every density, so the compiled FlexAttention compiles once.
    """
    from torch.nn.attention.flex_attention import BlockMask

    from companion.kernels.block_sparse_attention import block_lut

    nb = mask.shape[-1]
    idx, cnt = block_lut(mask.expand(B, H, nb, nb), width=nb)  # from_kv_blocks wants every column
    return BlockMask.from_kv_blocks(torch.zeros_like(cnt), idx, cnt, idx, BLOCK_SIZE=block, mask_mod=mask_mod,
                                    seq_lengths=(n, n))


def bench_shape(row: dict, device: torch.device, smoke: bool) -> list[dict]:
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    from torch.nn.attention.flex_attention import flex_attention

    from companion.kernels.block_sparse_attention import (block_sparse_attention_reference,
                                                          prepare_block_sparse_attention)

    B, H, n, D, block = row["B"], row["H"], row["N"], row["D"], row["block_size"]
    dtype = half_dtype(device)
    env = environment(device, dtype, smoke, KERNEL)
    reps = 2 if smoke else 10
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(B, H, n, D, device=device, dtype=dtype, generator=g) for _ in range(3))

    def dense():
        return F.scaled_dot_product_attention(q, k, v)

    backend = sdpa_backend(dense, SDPA_ORDER if smoke else SDPA_ORDER[:-1])  # MATH would hold N x N scores
    with sdpa_kernel([backend]):
        ms_sdpa = time_ms(dense, device, reps)
    flex = torch.compile(flex_attention, dynamic=False) if device.type == "cuda" else flex_attention
    nb = row["blocks"]
    mask = torch.zeros(nb, nb, dtype=torch.bool, device=device)  # one buffer, refilled at each density

    def mask_mod(b, h, q_idx, kv_idx):
        return mask[q_idx // block, kv_idx // block]

    records = []
    for density in sorted(row["densities"]):
        mask.copy_(band_block_mask(nb, density, device))
        plan = prepare_block_sparse_attention(q, k, v, mask, block, backend="triton")
        ref = block_sparse_attention_reference(q, k, v, mask, block, query_chunk=reference_chunk(row, device))
        errs = {"kernel": max_abs_error(plan.run(q, k, v), ref)}
        if not errs["kernel"] <= env["tolerance"]:
            raise SystemExit(f"{row['shape']} at density {density}: the kernel differs from the fp32 reference by "
                             f"{errs['kernel']:.3g} > {env['tolerance']}; nothing timed, nothing written")
        ms = {"kernel": time_ms(lambda: plan.run(q, k, v), device, reps), "sdpa": ms_sdpa, "flex": None}
        errors = {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the CPU smoke run's flex is eager, and says so
                bm = flex_block_mask(mask, B, H, n, block, mask_mod)
                errs["flex"] = max_abs_error(flex(q, k, v, block_mask=bm), ref)
                if errs["flex"] <= env["tolerance"]:
                    ms["flex"] = time_ms(lambda: flex(q, k, v, block_mask=bm), device, reps)
                else:
                    errors["flex"] = f"max abs error {errs['flex']:.3g} > {env['tolerance']}: not timed"
        except Exception as e:  # FlexAttention is a baseline: its failure is recorded, not fatal
            errors["flex"] = f"{type(e).__name__}: {e}"[:300]
        del ref
        pairs = attended_pairs(mask, block, n)
        flops = {"kernel": 4 * B * H * D * pairs, "sdpa": 4 * B * H * D * n * n, "flex": 4 * B * H * D * pairs}
        tflops = {side: (flops[side] / t / 1e9 if t is not None else None) for side, t in ms.items()}
        records.append({**env, "shape": row["shape"], "B": B, "H": H, "N": n, "D": D, "block_size": block,
                        "density_target": density, "density": float(mask.float().mean()),
                        "pair_density": pairs / (n * n), "sdpa_backend": backend.name,
                        "flex_compiled": device.type == "cuda", "ms": ms, "tflops": tflops,
                        "peak_fraction": fractions(tflops, (env["peak"] or {}).get("tflops")),
                        "speedup": ratios(ms, "kernel"), "max_abs_error": errs, "errors": errors,
                        "tuning": {"autotuned": plan.autotuned, **(plan.config or {})}})
        print(json.dumps({key: records[-1][key] for key in ("shape", "density", "ms", "speedup", "max_abs_error")}))
    return records


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        print(json.dumps({"plan": plan(args), "dtype": "bfloat16 (float16 before compute capability 8)"}, indent=1))
        return 0
    out = out_dir(args)
    device = start(args, "bench_block_sparse_attention")
    if device is None:
        return 2
    records = [rec for row in plan(args) for rec in bench_shape(row, device, args.smoke)]
    write_results(out, KERNEL, device, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
