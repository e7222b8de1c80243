"""Argument checks of :mod:`companion.gmail`: each raises ``ValueError`` naming the argument."""

from __future__ import annotations

import numbers

import torch

from ..validation import as_finite_tensor, as_index_tensor

N_CAPTIONS = 30  # 10 digits x 3 stroke thicknesses


def as_batch(x, name: str, *, dim: int | None = None) -> torch.Tensor:
    """``x`` as a finite, non-empty float tensor ``(N, dim)``."""
    return as_finite_tensor(x, name, shape=(None, dim), floating=True)


def as_ids(ids, name: str, n: int | None = None, *, n_captions: int | None = N_CAPTIONS) -> torch.Tensor:
    """``ids`` as an int64 tensor ``(n,)`` of caption ids in ``[0, n_captions)`` (any id >= 0 if None)."""
    return as_index_tensor(ids, name, n=n, high=n_captions, empty=True)


def same_rows(a: torch.Tensor, b: torch.Tensor, names: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{names}: expected the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")


def nonzero_rows(x: torch.Tensor, name: str) -> torch.Tensor:
    """Refuse rows of zero norm, which have no direction (their cosine would silently be 0)."""
    zero = x.norm(dim=1) == 0
    if bool(zero.any()):
        raise ValueError(f"{name}: row {int(zero.nonzero()[0])} is a zero vector, which has no direction")
    return x


def as_scalar(x, name: str) -> torch.Tensor:
    """``x`` (a number or a one-element tensor, e.g. a learned parameter) as a finite scalar tensor."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Real, torch.Tensor)):
        raise ValueError(f"{name}: expected a finite real number, got {x!r}")
    t = torch.as_tensor(x)
    if t.numel() != 1 or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name}: expected one finite real number, got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: must be finite, got {t.item()}")
    return t


def as_images(x, name: str) -> torch.Tensor:
    """``x`` as a batch of flattened 8x8 images ``(N, 64)`` with grey levels in [0, 1] (an image on
    scikit-learn's raw 0-16 scale must be divided by 16 first)."""
    x = as_batch(x, name, dim=64)
    lo, hi = float(x.min()), float(x.max())
    if lo < 0 or hi > 1:
        hint = " (the 0-16 scale of load_digits? divide by 16)" if hi > 1 else ""
        raise ValueError(f"{name}: expected grey levels in [0, 1], got values in [{lo:g}, {hi:g}]{hint}")
    return x


def as_digits(y, name: str, n: int | None = None) -> torch.Tensor:
    """``y`` as an int64 tensor ``(n,)`` of digit labels in 0..9 (refuses float or negative labels)."""
    return as_index_tensor(y, name, n=n, high=10, empty=True)
