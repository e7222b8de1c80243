"""Real images and detailed captions: scikit-learn's bundled 8x8 digits, split per seed.

Every digit gets a *detailed caption* ``"a {thin|regular|bold} handwritten digit {name}"``: the
stroke thickness is the tercile of its ink mass :math:`m(x)=\\sum_{ij}x_{ij}` within its class,
so that pairing a generated image with a real one means more than "same digit". Caption id is
``3 * digit + thickness`` (30 captions).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ._checks import as_batch, as_digits, as_images
from ..validation import as_positive_int

__all__ = ["Split", "Splits", "load_digits_splits", "thickness_terciles", "thickness", "caption_ids",
           "caption_strings", "THICKNESS", "DIGIT_NAMES"]

THICKNESS = ("thin", "regular", "bold")
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


class Split(NamedTuple):
    """Images ``x`` (N, 64) in [0, 1], digits ``y`` (N,) and caption ids ``cap`` (N,)."""

    x: torch.Tensor
    y: torch.Tensor
    cap: torch.Tensor

    def to(self, device) -> "Split":
        return Split(*(t.to(device) for t in self))


class Splits(NamedTuple):
    """P pre-trains f_r, G fits the generator, D is the scarce real downstream data, T the test set;
    ``thresholds`` (10, 2) are the ink-mass terciles per digit."""

    P: Split
    G: Split
    D: Split
    T: Split
    thresholds: torch.Tensor

    def to(self, device) -> "Splits":
        return Splits(*(s.to(device) for s in self[:4]), self.thresholds.to(device))


def caption_strings() -> list[str]:
    """The 30 detailed captions, indexed by caption id."""
    return [f"a {t} handwritten digit {d}" for d in DIGIT_NAMES for t in THICKNESS]


def thickness_terciles(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The 33rd and 67th percentiles of the ink mass of each digit: ``(10, 2)``."""
    x = as_images(x, "x")
    y = as_digits(y, "y", len(x))
    mass = x.sum(1)
    out = torch.zeros(10, 2, dtype=x.dtype, device=x.device)
    for c in range(10):
        m = mass[y == c]
        if len(m) < 3:
            raise ValueError(f"y: digit {c} has {len(m)} images, at least 3 are needed for terciles")
        out[c] = torch.quantile(m, torch.tensor([1 / 3, 2 / 3], dtype=x.dtype, device=x.device))
    return out


def thickness(x: torch.Tensor, y: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """0 (thin), 1 (regular) or 2 (bold): where the ink mass of each image falls among its digit's terciles."""
    mass = as_images(x, "x").sum(1)
    y = as_digits(y, "y", len(mass))
    thresholds = as_batch(thresholds, "thresholds", dim=2)
    if len(thresholds) != 10:
        raise ValueError(f"thresholds: expected shape (10, 2), got {tuple(thresholds.shape)}")
    t = thresholds[y]
    return (mass > t[:, 0]).long() + (mass > t[:, 1]).long()


def caption_ids(y: torch.Tensor, thick: torch.Tensor) -> torch.Tensor:
    """Caption id ``3 * digit + thickness``."""
    if y.shape != thick.shape:
        raise ValueError(f"thick: expected the shape of y {tuple(y.shape)}, got {tuple(thick.shape)}")
    if len(y) and (int(y.min()) < 0 or int(y.max()) > 9):
        raise ValueError(f"y: digits must lie in 0..9, got {int(y.min())}..{int(y.max())}")
    if len(y) and (int(thick.min()) < 0 or int(thick.max()) > 2):
        raise ValueError(f"thick: thicknesses must lie in 0..2, got {int(thick.min())}..{int(thick.max())}")
    return (3 * y + thick).long()


def load_digits_splits(seed: int, n_pretrain: int = 50, n_gen_fit: int = 60, n_down: int = 3) -> Splits:
    """Stratified P/G/D/T splits of the 1,797 digits (per digit: ``n_pretrain``, ``n_gen_fit``,
    ``n_down``, the rest for testing); the thickness terciles come from the pool P u G u D."""
    from sklearn.datasets import load_digits

    n_pretrain, n_gen_fit = as_positive_int(n_pretrain, "n_pretrain"), as_positive_int(n_gen_fit, "n_gen_fit")
    n_down = as_positive_int(n_down, "n_down", minimum=0)
    X, Y = load_digits(return_X_y=True)
    rng = np.random.default_rng(as_positive_int(seed, "seed", minimum=0))
    parts = {k: [] for k in "PGDT"}
    sizes = (n_pretrain, n_gen_fit, n_down)
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(Y == c))
        if len(idx) < sum(sizes) + 10:
            raise ValueError(f"n_pretrain, n_gen_fit, n_down: digit {c} has {len(idx)} images, fewer than "
                             f"{sum(sizes)} + 10 test images")
        cuts = np.cumsum(sizes)
        for k, part in zip("PGDT", np.split(idx, cuts)):
            parts[k].append(part)
    x = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(Y, dtype=torch.int64)
    pool = np.concatenate(parts["P"] + parts["G"] + parts["D"])
    thresholds = thickness_terciles(x[pool], y[pool])
    out = {}
    for k, chunks in parts.items():
        i = torch.tensor(np.concatenate(chunks), dtype=torch.int64)
        out[k] = Split(x[i], y[i], caption_ids(y[i], thickness(x[i], y[i], thresholds)) if len(i)
                       else torch.zeros(0, dtype=torch.int64))
    return Splits(out["P"], out["G"], out["D"], out["T"], thresholds)
