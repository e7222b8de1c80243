"""Wall-clock time of one training step of every method, measured in a fresh process.

The chapter's own process has rendered glyphs, loaded encoders and run probes; their memory and
threads should not weigh on the timing. :func:`time_in_subprocess` starts ``python -m
companion.ocl.timing`` with one thread, which builds the methods on one random encoder, times
them in interleaved rounds with :func:`companion.ocl.budget.time_steps` and prints the seconds
as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from companion.validation import as_positive_int

from .budget import time_steps
from .methods import MAE, OCL, SimCLR
from .vit import TinyViT

__all__ = ["TIMED", "build_timed", "time_in_subprocess"]

TIMED = ("OCL (r=0.75)", "OCL (r=0.9)", "MAE (r=0.75)", "SimCLR", "SimCLR, no aug.")


def build_timed(model: dict, seed: int = 0) -> dict:
    """The timed methods of :data:`TIMED`, all on one random encoder built from ``model``."""
    if not isinstance(model, dict):
        raise ValueError(f"model: expected the encoder's settings as a dict (TinyViT's arguments), got "
                         f"{type(model).__name__}")
    torch.manual_seed(seed)
    vit = TinyViT(**model)
    return {"OCL (r=0.75)": OCL(vit, 0.75), "OCL (r=0.9)": OCL(vit, 0.9),
            "MAE (r=0.75)": MAE(vit, 0.75, norm_pix=True), "SimCLR": SimCLR(vit, aug=True),
            "SimCLR, no aug.": SimCLR(vit, aug=False)}


def time_in_subprocess(model: dict, batch: int = 32, rounds: int = 20, warmup: int = 3,
                       seed: int = 0, timeout: float = 300) -> dict:
    """``{method: [seconds per step]}`` from a fresh one-thread process (see the module)."""
    batch = as_positive_int(batch, "batch", minimum=2)
    rounds, warmup = as_positive_int(rounds, "rounds"), as_positive_int(warmup, "warmup", minimum=0)
    args = json.dumps(dict(model=model, batch=batch, rounds=rounds, warmup=warmup, seed=seed))
    out = subprocess.run([sys.executable, "-m", "companion.ocl.timing", args],
                         capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode:
        raise RuntimeError("the timing process failed: " + out.stderr.strip()[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    cfg = json.loads((argv or sys.argv[1:])[0])
    torch.set_num_threads(1)
    methods = build_timed(cfg["model"], cfg["seed"])
    size = cfg["model"]["img_size"]
    x = torch.rand(cfg["batch"], 1, size, size, generator=torch.Generator().manual_seed(0))
    print(json.dumps(time_steps(methods, x, cfg["rounds"], cfg["warmup"])))


if __name__ == "__main__":
    main()
