"""Triton kernels of the book, one module per kernel, each beside its pure-torch reference.

Every module holds the ``@triton.jit`` kernel, a launcher that checks its inputs and raises
``ValueError`` naming the bad argument, the torch reference, a ``prepare_*`` step that validates
once and returns a plan whose ``run`` only launches, and a public op that runs the kernel on CUDA
tensors and the reference on CPU tensors unless told otherwise. This package holds what both
kernels share:

* the backend choice, :func:`select_backend` (``"auto"``: Triton on CUDA tensors, the torch
  reference otherwise), which both public ops call, so a test can ask what a CUDA tensor would
  select without a GPU (a fake CUDA tensor from ``torch._subclasses.fake_tensor.FakeTensorMode``);
* :func:`triton_runs_on`: whether the kernels can run on a device at all (CUDA, or the CPU under
  Triton's interpreter, ``TRITON_INTERPRET=1`` set *before* this package is imported);
* the 64-bit offset arithmetic of the kernels (:func:`head_offset`, :func:`row_offsets`): a
  product such as ``b * stride_b`` passes ``2**31`` elements on video-sized tensors;
* the GPU measurements: :func:`load_benchmark` reads ``benchmarks/results/<kernel>-*.json``,
  written by ``benchmarks/run_all.py`` on a GPU (format in ``benchmarks/README.md``).

Under the interpreter ``bfloat16`` is refused (:func:`check_interpretable`): the interpreter's
bf16 ``tl.dot`` is off by orders of magnitude, and a wrong answer is worse than none.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from companion.validation import as_choice, as_positive_int

# Triton 3.9 warns at every compilation that its FP-fusion default will change; keep today's
# default (fused multiply-adds on) explicitly, which also keeps a reader's GPU cells free of it.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

try:  # Triton ships with torch on Linux; elsewhere the torch references still run
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["INTERPRET", "HAS_TRITON", "BACKENDS", "KERNELS", "TunedPlan", "triton_runs_on", "select_backend",
           "needs_grad", "check_forward_only", "check_interpretable", "check_tile", "check_launch_options", "load_benchmark"]

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"  # read once: it decides how @triton.jit compiles
HAS_TRITON = triton is not None
BACKENDS = ("auto", "triton", "torch")
KERNELS = ("block_sparse_attention", "sparse_decode_attention")


# --- the backend choice ---------------------------------------------------------------------------

def _device(x, name: str) -> torch.device:
    if isinstance(x, torch.Tensor):
        return x.device
    if isinstance(x, (torch.device, str)):
        return torch.device(x)
    raise ValueError(f"{name}: expected a torch.Tensor (or a torch.device), got {type(x).__name__}")


def triton_runs_on(device) -> bool:
    """Whether the Triton kernels run on ``device`` (a device, a string or a tensor): on CUDA,
    or on the CPU under Triton's interpreter (``TRITON_INTERPRET=1`` before import)."""
    device = _device(device, "device")
    return HAS_TRITON and (device.type == "cuda" or (device.type == "cpu" and INTERPRET))


def select_backend(x, backend: str = "auto", name: str = "q") -> str:
    """The backend a public op runs for input ``x``: ``"triton"`` or ``"torch"``.

    ``"auto"``: Triton on CUDA tensors, the torch reference otherwise (also on the CPU under the
    interpreter, which is for tests); ``"torch"``: the reference; ``"triton"``: the kernel, which
    raises ``ValueError`` naming ``backend`` where it cannot run (see :func:`triton_runs_on`).
    ``name`` is the argument ``x`` is, for the error message.
    """
    backend = as_choice(backend, "backend", BACKENDS)
    device = _device(x, name)
    if backend == "auto":
        return "triton" if HAS_TRITON and device.type == "cuda" else "torch"
    if backend == "triton" and not triton_runs_on(device):
        why = "Triton is not installed" if not HAS_TRITON else f"{name} is on {device}"
        raise ValueError(f"backend: 'triton' needs CUDA tensors, or CPU tensors with TRITON_INTERPRET=1 set "
                         f"before importing companion.kernels ({why}); use backend='auto'")
    return backend


def needs_grad(*tensors) -> bool:
    """Whether autograd would track an op on ``tensors`` (grad mode on, one of them requires grad)."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def check_forward_only(**tensors: torch.Tensor) -> None:
    """Refuse, naming the argument, a tensor that requires grad on the way to a Triton kernel: the
    kernels have no backward, so their output would have no ``grad_fn`` and a loss through them
    would silently get no gradient. (``backend="auto"`` picks the differentiable torch reference
    for such inputs instead.)"""
    if not torch.is_grad_enabled():
        return
    for name, x in tensors.items():
        if isinstance(x, torch.Tensor) and x.requires_grad:
            raise ValueError(f"{name}: requires grad, but backend='triton' is forward-only (no backward: the output "
                             f"would carry no gradient); use backend='torch' or 'auto' (differentiable), or run "
                             f"under torch.no_grad()")


def check_interpretable(x: torch.Tensor, name: str = "q") -> None:
    """Refuse bfloat16 under Triton's interpreter, whose bf16 ``tl.dot`` is wrong (by ~1e9)."""
    if INTERPRET and x.dtype == torch.bfloat16:
        raise ValueError(f"{name}: bfloat16 is refused under TRITON_INTERPRET=1 (the interpreter's bf16 dot "
                         f"product is wrong); pass float16 or float32, or use backend='auto' (the torch "
                         f"reference on the CPU)")


def check_tile(x, name: str, low: int, high: int) -> int:
    """A tile size: a power of two in ``[low, high]``."""
    x = as_positive_int(x, name)
    if x & (x - 1) or not low <= x <= high:
        raise ValueError(f"{name}: expected a power of two in [{low}, {high}], got {x}")
    return x


def check_launch_options(num_warps, num_stages) -> tuple[int | None, int | None]:
    """``num_warps`` in {1, 2, 4, 8, 16} and ``num_stages`` >= 1, or None (tuned)."""
    if num_warps is not None:
        num_warps = check_tile(num_warps, "num_warps", 1, 16)
    if num_stages is not None:
        num_stages = as_positive_int(num_stages, "num_stages")
    return num_warps, num_stages


# --- 64-bit offsets, shared by the kernels and tested on shapes past 2**31 elements ---------------

if HAS_TRITON:

    @triton.jit
    def head_offset(b, h, stride_b, stride_h):
        """Element offset of head ``h`` of sequence ``b``: ``b * stride_b + h * stride_h`` in int64."""
        return b.to(tl.int64) * stride_b + h.to(tl.int64) * stride_h

    @triton.jit
    def row_offsets(rows, stride_row):
        """Element offsets ``rows * stride_row`` of a vector of row indices, in int64."""
        return rows.to(tl.int64) * stride_row


# --- the GPU measurements -------------------------------------------------------------------------

def load_benchmark(kernel: str, root: str | Path | None = None) -> list[dict]:
    """The records of ``benchmarks/results/<kernel>-*.json`` (one file per device), in file order.

    ``root``: the repository (default: :func:`companion.book.repo_root` of the working directory,
    else of this package's folder, as in an editable install from a clone). Returns ``[]`` when no
    GPU measurement exists or outside a clone of the repository. Every record is self-contained
    (device, versions, dtype, shape, ms, ratio; the format is in ``benchmarks/README.md``).
    """
    kernel = as_choice(kernel, "kernel", KERNELS)
    if root is None:
        from companion.book import repo_root

        root = repo_root() or repo_root(Path(__file__).parent)
        if root is None:
            return []
    records = []
    for path in sorted((Path(root) / "benchmarks" / "results").glob(f"{kernel}-*.json")):
        data = json.loads(path.read_text())
        if not (isinstance(data, dict) and data.get("kernel") == kernel and isinstance(data.get("records"), list)):
            raise ValueError(f"kernel: {path.name} is not a results file of {kernel} "
                             f"(expected {{'kernel': '{kernel}', 'records': [...]}})")
        records.extend(data["records"])
    return records


class TunedPlan:
    """What both kernels' prepared plans share: their launch configuration, fixed or autotuned.

    A plan sets ``backend``, ``_config`` (the caller's tiles, or ``None`` to autotune on CUDA) and
    ``_tuned`` (the autotuner's choice, once it has run).
    """

    @property
    def autotuned(self) -> bool:
        return self.backend == "triton" and self._config is None

    @property
    def config(self) -> dict | None:
        if not self.autotuned:
            return self._config
        best = self._tuned
        return None if best is None else {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}
