"""Argument checks for tensors (the numpy ones live in :mod:`companion.validation`)."""

from __future__ import annotations

import numbers
from typing import Any

import torch


def as_points(X: Any, name: str = "X", *, d: int | None = None) -> torch.Tensor:
    """``X`` as a non-empty, finite float tensor of shape ``(N, d)``."""
    if not isinstance(X, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor of shape (N, d), got {type(X).__name__}")
    if X.ndim != 2:
        raise ValueError(f"{name}: expected shape (N, d), got {tuple(X.shape)}")
    if X.shape[0] == 0:
        raise ValueError(f"{name}: expected at least one point, got an empty tensor of shape {tuple(X.shape)}")
    if d is not None and X.shape[1] != d:
        raise ValueError(f"{name}: expected {d} features per point, got shape {tuple(X.shape)}")
    if not X.is_floating_point():
        raise ValueError(f"{name}: expected a float tensor, got dtype {X.dtype}")
    if not torch.isfinite(X).all():
        raise ValueError(f"{name}: must be finite, got NaN or inf")
    return X


def as_labels(y: Any, n: int, n_labels: int, name: str = "y") -> torch.Tensor:
    """``y`` as an integer tensor of shape ``(n,)`` with values in ``0..n_labels-1``."""
    if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.shape[0] != n:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"{name}: expected an integer tensor of shape ({n},), got {shape}")
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"{name}: expected integer labels, got dtype {y.dtype}")
    if n and (int(y.min()) < 0 or int(y.max()) >= n_labels):
        raise ValueError(f"{name}: labels must lie in 0..{n_labels - 1}, got {int(y.min())}..{int(y.max())}")
    return y.long()


def as_int(value: Any, name: str, *, low: int, high: int | None = None) -> int:
    """``value`` as a Python int in ``[low, high]`` (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in {low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name}: expected an integer {bound}, got {value}")
    return int(value)


def as_positive(value: Any, name: str) -> float:
    """``value`` as a finite float > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0 or value == float("inf"):
        raise ValueError(f"{name}: expected a finite number > 0, got {value!r}")
    return float(value)
