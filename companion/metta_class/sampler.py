"""Metta samples: points drawn uniformly from the input universe U (eq. (metta-data))."""

from __future__ import annotations

import math
from typing import Any

import torch

from companion.validation import as_finite_tensor, as_nonnegative, as_positive_int
from .data import _rand

__all__ = ["MettaSampler"]


class MettaSampler:
    """The uniform distribution on a box ``U = [low_1, high_1] x ... x [low_d, high_d]``.

    ``MettaSampler.cube(d)`` is the paper's choice for images scaled to [0, 1]; the 2-D recipe,
    the data's bounding box padded by ``pad`` times its range on each side, is
    ``MettaSampler.from_data(X, pad=0.1)``.
    """

    def __init__(self, low: Any, high: Any):
        low = torch.as_tensor(low, dtype=torch.float32)
        high = torch.as_tensor(high, dtype=torch.float32, device=low.device)
        if low.ndim != 1 or low.numel() == 0:
            raise ValueError(f"low: expected a non-empty 1-D tensor of lower bounds, got shape {tuple(low.shape)}")
        if high.shape != low.shape:
            raise ValueError(f"high: expected shape {tuple(low.shape)} like low, got {tuple(high.shape)}")
        if not (torch.isfinite(low).all() and torch.isfinite(high).all()):
            raise ValueError("low: the bounds must be finite (low and high hold NaN or inf)")
        if not (high > low).all():
            i = int(torch.nonzero(high <= low)[0])
            raise ValueError(f"high: every bound must exceed low; dimension {i} has low {float(low[i])} "
                             f">= high {float(high[i])}")
        self.low, self.high = low, high

    @classmethod
    def cube(cls, d: int, low: float = 0.0, high: float = 1.0) -> "MettaSampler":
        """The cube ``[low, high]^d`` (pixels scaled to [0, 1])."""
        d = as_positive_int(d, "d", minimum=1)
        return cls(torch.full((d,), float(low)), torch.full((d,), float(high)))

    @classmethod
    def from_data(cls, X: torch.Tensor, pad: float = 0.1) -> "MettaSampler":
        """The bounding box of ``X`` ``(N, d)``, widened by ``pad * (max - min)`` on both sides.

        A feature that is constant in ``X`` gets a width of 1 before padding, so the box is never flat.
        """
        X = as_finite_tensor(X, "X", ndim=2, floating=True)
        pad = as_nonnegative(pad, "pad")
        lo, hi = X.min(0).values.float(), X.max(0).values.float()
        width = torch.where(hi > lo, hi - lo, torch.ones_like(hi))
        return cls(lo - pad * width, hi + pad * width)

    @property
    def d(self) -> int:
        return self.low.numel()

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` points ``(n, d)`` drawn independently and uniformly from U, on the bounds' device."""
        n = as_positive_int(n, "n", minimum=0)
        u = _rand((n, self.d), generator, self.low.device)
        return self.low + u * (self.high - self.low)

    def contains(self, X: torch.Tensor) -> torch.Tensor:
        """Which rows of ``X`` lie in U."""
        X = as_finite_tensor(X, "X", shape=(None, self.d), floating=True)
        low, high = self.low.to(X.device), self.high.to(X.device)
        return ((X >= low) & (X <= high)).all(1)

    def log_density(self) -> float:
        """``log u(x) = -sum_i log(high_i - low_i)`` for every x in U."""
        return -float(torch.log(self.high - self.low).double().sum())

    def __repr__(self) -> str:
        return f"MettaSampler(d={self.d}, volume={math.exp(-self.log_density()):.4g})"
