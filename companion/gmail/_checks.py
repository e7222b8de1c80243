"""Argument checks of :mod:`companion.gmail`: each raises ``ValueError`` naming the argument."""

from __future__ import annotations

import numbers

import torch

N_CAPTIONS = 30  # 10 digits x 3 stroke thicknesses


def as_batch(x, name: str, *, dim: int | None = None) -> torch.Tensor:
    """``x`` as a finite, non-empty float tensor ``(N, dim)``."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch tensor (N, {dim or 'D'}), got {type(x).__name__}")
    if x.ndim != 2 or (dim is not None and x.shape[1] != dim):
        raise ValueError(f"{name}: expected shape (N, {dim or 'D'}), got {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty batch, got 0 rows")
    if not x.is_floating_point():
        raise ValueError(f"{name}: expected a float tensor, got {x.dtype}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: contains NaN or infinite values")
    return x


def as_ids(ids, name: str, n: int | None = None, *, n_captions: int | None = N_CAPTIONS) -> torch.Tensor:
    """``ids`` as an int64 tensor ``(n,)`` of caption ids in ``[0, n_captions)`` (any id >= 0 if None)."""
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1 or ids.is_floating_point():
        raise ValueError(f"{name}: expected a 1-D integer tensor of caption ids, got "
                         f"{getattr(ids, 'shape', type(ids).__name__)}")
    if n is not None and len(ids) != n:
        raise ValueError(f"{name}: expected {n} ids (one per row), got {len(ids)}")
    top = float("inf") if n_captions is None else n_captions
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= top):
        bad = int(ids[(ids < 0) | (ids >= top)][0])
        raise ValueError(f"{name}: caption ids must lie in [0, {top}), got {bad}")
    return ids.long()


def same_rows(a: torch.Tensor, b: torch.Tensor, names: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{names}: expected the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")


def as_int(n, name: str, minimum: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {n!r}")
    return int(n)


def as_nonneg(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not x >= 0 or x == float("inf"):
        raise ValueError(f"{name}: expected a finite number >= 0, got {x!r}")
    return float(x)


def as_positive(x, name: str) -> float:
    if as_nonneg(x, name) == 0:
        raise ValueError(f"{name}: expected a number > 0, got {x!r}")
    return float(x)


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
    if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"{name}: expected a 1-D integer tensor of digit labels, got "
                         f"{getattr(y, 'dtype', type(y).__name__)} {tuple(getattr(y, 'shape', ()))}")
    if n is not None and len(y) != n:
        raise ValueError(f"{name}: expected {n} labels (one per image), got {len(y)}")
    if len(y) and (int(y.min()) < 0 or int(y.max()) > 9):
        bad = int(y[(y < 0) | (y > 9)][0])
        raise ValueError(f"{name}: digit labels must lie in 0..9, got {bad}")
    return y.long()
