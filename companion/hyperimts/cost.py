"""What one training step costs: wall time and peak memory, for any model of the chapter.

:func:`step_cost` times a full step (forward, backward, Adam) and measures the peak of the memory
the step allocates. On a GPU that is ``torch.cuda.max_memory_allocated`` above the level before
the step; on a CPU, where torch keeps no allocator statistics, :class:`PeakMemory` follows every
storage the step's operations allocate (forward and backward) until it is freed, which is the same
quantity without the allocator's caching.
"""

from __future__ import annotations

import statistics
import time
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..validation import as_positive_int
from .model import masked_mse

__all__ = ["PeakMemory", "step_cost"]


class PeakMemory(TorchDispatchMode):
    """Peak bytes of the storages allocated by the operations run inside the context.

    Each new storage (not a view or an in-place result of an input) is counted from the operation
    that creates it until it is freed; ``peak`` is the largest total seen, ``current`` what is
    still held at the end. Memory that existed before (weights, optimizer state, inputs) is not
    counted.
    """

    def __init__(self):
        super().__init__()
        self.live: dict[int, int] = {}
        self.current = self.peak = 0

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {id(t.untyped_storage()) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                key = id(storage)
                if key not in inputs and key not in self.live:
                    self.live[key] = storage.nbytes()
                    self.current += storage.nbytes()
                    weakref.finalize(storage, self._free, key)
        self.peak = max(self.peak, self.current)
        return out


def step_cost(model: torch.nn.Module, batch, *, warmup: int = 3, repeats: int = 10) -> dict[str, float]:
    """Cost of one training step (forward, backward, Adam) of ``model`` on ``batch``.

    ``seconds``: median wall time over ``repeats`` steps after ``warmup`` (on CUDA, synchronised);
    ``peak_bytes``: the peak memory the step allocates above what it starts with (see the module's
    docstring); ``parameter_bytes`` for reference. The batch is moved to the model's device and
    its padded view built before anything is measured, for every model alike.
    """
    if not isinstance(model, torch.nn.Module) or not any(True for _ in model.parameters()):
        raise ValueError(f"model: expected a torch.nn.Module with parameters, got {type(model).__name__}")
    for name, value, low in (("warmup", warmup, 0), ("repeats", repeats, 1)):
        as_positive_int(value, name, minimum=low)
    device = next(model.parameters()).device
    batch = batch.to(device)
    batch.padded  # noqa: B018 -- build the cached padded view outside the measured region
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step():
        loss = masked_mse(model(batch), batch)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    if device.type == "cuda":
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        peak = torch.cuda.max_memory_allocated(device) - base
    else:
        with PeakMemory() as memory:
            step()
        peak = memory.peak
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"seconds": statistics.median(times), "peak_bytes": float(peak), "parameter_bytes": float(params)}
