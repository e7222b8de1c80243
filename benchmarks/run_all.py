"""Run every kernel benchmark, one after the other, and write their JSON results.

    python benchmarks/run_all.py            # on a CUDA GPU: benchmarks/results/*.json, about 5 minutes
    python benchmarks/run_all.py --smoke    # every benchmark's whole path at tiny shapes, on the CPU
                                            # through Triton's interpreter; results in _build/benchmarks-smoke

Each benchmark runs in its own process, so that a smoke run can choose Triton's interpreter
before the kernels are imported. The exit status is the first failing benchmark's, else 0.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ("bench_block_sparse_attention.py", "bench_sparse_decode_attention.py")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny shapes, CPU interpreter when there is no GPU")
    p.add_argument("--out", type=Path, default=None, help="results folder (see each benchmark's --help)")
    args = p.parse_args(argv)
    extra = (["--smoke"] if args.smoke else []) + (["--out", str(args.out)] if args.out else [])
    status, t_all = 0, time.perf_counter()
    for script in BENCHMARKS:
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(HERE / script), *extra])
        print(f"{script}: exit {code} after {time.perf_counter() - t0:.0f} s", flush=True)
        status = status or code
    print(f"run_all: {'smoke ' if args.smoke else ''}run finished in {time.perf_counter() - t_all:.0f} s, "
          f"exit {status}")
    return status


if __name__ == "__main__":
    sys.exit(main())
