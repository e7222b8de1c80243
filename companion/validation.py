"""Argument checks shared by every chapter's module.

Each helper either returns a cleaned value or raises :class:`ValueError` whose
message starts with the argument's name and says what was expected, e.g.
``probs: must sum to 1 (got 0.9); normalise with probs / probs.sum()``.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = [
    "as_1d_float_array",
    "as_probability_vector",
    "as_positive_int",
    "as_probability",
    "check_same_length",
    "as_float_array",
    "as_positive_int_array",
    "as_choice",
    "as_generator",
    "as_instance",
    "as_finite_tensor",
    "as_real",
    "as_positive",
    "as_nonnegative",
    "as_index_tensor",
]


def _fail(name: str, message: str) -> None:
    raise ValueError(f"{name}: {message}")


def as_1d_float_array(x: Any, name: str, *, allow_empty: bool = False) -> np.ndarray:
    """Return ``x`` as a finite 1-D float64 array, or raise naming ``name``."""
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(name, f"expected a 1-D array of numbers, got {type(x).__name__}")
    if arr.ndim != 1:
        _fail(name, f"expected a 1-D array, got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        _fail(name, "expected a non-empty 1-D array, got an empty one")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        _fail(name, f"must be finite, got {arr[bad]} at index {bad}")
    return arr


def as_probability_vector(p: Any, name: str = "probs", *, atol: float = 1e-9) -> np.ndarray:
    """Return ``p`` as a float64 probability vector (non-negative, summing to 1 within ``atol``)."""
    arr = as_1d_float_array(p, name)
    if np.any(arr < 0):
        bad = int(np.flatnonzero(arr < 0)[0])
        _fail(name, f"probabilities must be >= 0, got {arr[bad]} at index {bad}")
    total = float(arr.sum())
    if abs(total - 1.0) > atol:
        _fail(name, f"must sum to 1 (got {total!r}); normalise with {name} / {name}.sum()")
    return arr


def as_positive_int(n: Any, name: str = "n", *, minimum: int = 1) -> int:
    """Return ``n`` as a Python int ``>= minimum``; bools and non-integral floats are refused."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Integral):
        _fail(name, f"expected an integer >= {minimum}, got {n!r} ({type(n).__name__})")
    if n < minimum:
        _fail(name, f"expected an integer >= {minimum}, got {n}")
    return int(n)


def as_probability(x: Any, name: str, *, low_open: bool = True, high_open: bool = True) -> float:
    """Return ``x`` as a float in the interval (0, 1), with either end closed on request."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        _fail(name, f"expected a real number, got {x!r}")
    x = float(x)
    lo_ok = x > 0 if low_open else x >= 0
    hi_ok = x < 1 if high_open else x <= 1
    if not (np.isfinite(x) and lo_ok and hi_ok):
        interval = ("(" if low_open else "[") + "0, 1" + (")" if high_open else "]")
        _fail(name, f"expected a number in {interval}, got {x}")
    return x


def check_same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    """Raise if two 1-D arrays differ in length, naming both."""
    if a.shape[0] != b.shape[0]:
        _fail(name_b, f"expected the same length as {name_a} ({a.shape[0]}), got {b.shape[0]}")


def as_float_array(
    x: Any,
    name: str,
    *,
    low: float = -np.inf,
    high: float = np.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> np.ndarray:
    """Return ``x`` (scalar or array of any shape) as finite float64 values inside an interval."""
    if isinstance(x, (bool, np.bool_)):
        _fail(name, f"expected real numbers, got {x!r}")
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(name, f"expected real numbers, got {type(x).__name__}")
    if arr.size == 0:
        _fail(name, "expected at least one value, got an empty array")
    flat = arr.ravel()
    if not np.all(np.isfinite(flat)):
        bad = int(np.flatnonzero(~np.isfinite(flat))[0])
        _fail(name, f"must be finite, got {flat[bad]} at flat index {bad}")
    inside = (flat > low if low_open else flat >= low) & (flat < high if high_open else flat <= high)
    if not np.all(inside):
        bad = int(np.flatnonzero(~inside)[0])
        interval = ("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]")
        _fail(name, f"expected values in {interval}, got {flat[bad]} at flat index {bad}")
    return arr


def as_positive_int_array(n: Any, name: str = "n", *, minimum: int = 1) -> np.ndarray:
    """Return ``n`` (an integer or an integer array of any shape) as int64 values ``>= minimum``.

    Bools and floats (even integral ones such as ``2.0``) are refused, as in :func:`as_positive_int`.
    """
    arr = np.asarray(n)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        _fail(name, f"expected integers >= {minimum}, got {n!r} (dtype {arr.dtype})")
    if arr.size == 0:
        _fail(name, "expected at least one value, got an empty array")
    if np.any(arr < minimum):
        _fail(name, f"expected integers >= {minimum}, got {arr.ravel()[np.argmin(arr.ravel())]}")
    return arr.astype(np.int64)


def as_choice(x: Any, name: str, choices: tuple[str, ...]) -> str:
    """Return ``x`` if it is one of the strings ``choices``."""
    if not isinstance(x, str) or x not in choices:
        _fail(name, f"expected one of {', '.join(map(repr, choices))}, got {x!r}")
    return x


def as_generator(rng: Any, name: str = "rng") -> np.random.Generator:
    """Return ``rng`` if it is a :class:`numpy.random.Generator` (e.g. ``np.random.default_rng(0)``)."""
    if not isinstance(rng, np.random.Generator):
        _fail(name, f"expected a numpy.random.Generator such as np.random.default_rng(0), got {type(rng).__name__}")
    return rng


def as_instance(x: Any, name: str, types: type | tuple[type, ...]) -> Any:
    """Return ``x`` if it is an instance of ``types`` (a class or a tuple of classes)."""
    if not isinstance(x, types):
        wanted = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        _fail(name, f"expected a {wanted}, got {type(x).__name__}")
    return x


def as_real(
    x: Any,
    name: str,
    *,
    low: float = -np.inf,
    high: float = np.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``x`` as a finite Python float inside an interval (bools refused).

    ``as_real(lr, "lr", low=0, low_open=True)`` is a learning rate; ``as_real(w, "w", low=0)`` a
    weight that may be zero; ``as_real(p, "p", low=0, high=1)`` a closed probability.
    """
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        _fail(name, f"expected a finite real number, got {x!r} ({type(x).__name__})")
    value = float(x)
    inside = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not (np.isfinite(value) and inside):
        if high == np.inf and low > -np.inf:
            wanted = f"a finite number {'>' if low_open else '>='} {low:g}"
        elif low == -np.inf and high < np.inf:
            wanted = f"a finite number {'<' if high_open else '<='} {high:g}"
        elif low == -np.inf:
            wanted = "a finite number"
        else:
            wanted = ("a number in " + ("(" if low_open else "[") + f"{low:g}, {high:g}"
                      + (")" if high_open else "]"))
        _fail(name, f"expected {wanted}, got {x!r}")
    return value


def as_positive(x: Any, name: str) -> float:
    """A finite number > 0 (a learning rate, a temperature, a bandwidth)."""
    return as_real(x, name, low=0, low_open=True)


def as_nonnegative(x: Any, name: str) -> float:
    """A finite number >= 0 (a loss weight, a noise level that may be switched off)."""
    return as_real(x, name, low=0)


def as_finite_tensor(
    x: Any,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    shape: tuple[int | None, ...] | None = None,
    empty: bool = False,
    floating: bool = False,
):
    """Return ``x`` if it is a torch tensor with no NaN or inf, checked against a shape.

    ``ndim``: the number of dimensions (one of them, for a tuple); ``shape``: the sizes, ``None``
    where any size goes, e.g. ``(None, d)`` for a batch of ``d``-vectors; ``empty``: allow no
    elements; ``floating``: refuse integer and bool tensors.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        _fail(name, f"expected a torch.Tensor, got {type(x).__name__}")
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if dims is not None and x.ndim not in dims:
        _fail(name, f"expected {' or '.join(map(str, dims))} dimensions, got shape {tuple(x.shape)}")
    if shape is not None and (x.ndim != len(shape)
                              or any(s is not None and s != t for s, t in zip(shape, x.shape))):
        wanted = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
        _fail(name, f"expected shape {wanted}, got {tuple(x.shape)}")
    if x.numel() == 0 and not empty:
        _fail(name, f"expected at least one element, got shape {tuple(x.shape)}")
    if floating and not x.is_floating_point():
        _fail(name, f"expected a floating-point tensor, got dtype {x.dtype}")
    if x.is_floating_point() and not x.is_meta and not bool(torch.isfinite(x).all()):
        _fail(name, "contains NaN or inf")  # (a meta tensor has no values to check)
    return x


def as_index_tensor(
    x: Any,
    name: str,
    *,
    n: int | None = None,
    high: int | None = None,
    ndim: int = 1,
    empty: bool = False,
):
    """Return ``x`` (a tensor or array of integers: labels, ids, indices) as an int64 tensor.

    Refuses floats, bools and complex numbers (a float label 2.7 would silently become 2), a
    length other than ``n`` along the first dimension, and values outside ``0..high - 1``.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        try:
            x = torch.as_tensor(np.asarray(x))
        except (TypeError, ValueError, RuntimeError):
            _fail(name, f"expected integer indices, got {type(x).__name__}")
    if x.dtype.is_floating_point or x.dtype == torch.bool or x.is_complex():
        _fail(name, f"expected integer indices, got dtype {x.dtype}")
    if x.ndim != ndim:
        _fail(name, f"expected {ndim} dimension{'s' if ndim != 1 else ''} of indices, got shape "
                    f"{tuple(x.shape)}")
    if n is not None and x.shape[0] != n:
        _fail(name, f"expected {n} indices (one per row), got {x.shape[0]}")
    if x.numel() == 0:
        if not empty:
            _fail(name, "expected at least one index, got none")
        return x.long()
    bad = (x < 0) if high is None else (x < 0) | (x >= high)
    if bool(bad.any()):
        where = "0.." + ("" if high is None else str(high - 1))
        _fail(name, f"expected indices in {where}, got {int(x[bad][0])}")
    return x.long()
