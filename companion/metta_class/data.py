"""The chapter's data, all offline: scikit-learn's 8x8 digits (scaled by 1/16 into [0, 1]^64) and
the 2-D blobs of the paper's repository (three N(mu_k, I) clusters, so the true densities are known)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import as_int, as_points

__all__ = ["Dataset", "digits", "blobs", "shuffle_pixels"]


def _rand(shape, generator: torch.Generator | None, device) -> torch.Tensor:
    """Uniform draws made on the generator's device (a seeded CPU generator gives the same numbers
    on every machine), then moved to ``device``."""
    where = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=where).to(device)


@dataclass(frozen=True)
class Dataset:
    """A train/test split: float32 inputs ``(N, d)``, int64 labels ``0..K-1``; ``centers`` for blobs."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int
    centers: torch.Tensor | None = None

    def to(self, device) -> "Dataset":
        move = (lambda t: None if t is None else t.to(device))
        return Dataset(move(self.X_train), move(self.y_train), move(self.X_test), move(self.y_test),
                       self.n_classes, move(self.centers))


def _tensors(X, y):
    return torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.int64)


def digits(seed: int = 0, test_size: float = 0.3) -> Dataset:
    """The 1,797 digits of ``sklearn.datasets.load_digits`` as x / 16, split stratified by class."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    seed = as_int(seed, "seed", low=0)
    if not 0 < test_size < 1:
        raise ValueError(f"test_size: expected a fraction in (0, 1), got {test_size!r}")
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X / 16.0, y, test_size=test_size, stratify=y, random_state=seed)
    return Dataset(*_tensors(X_tr, y_tr), *_tensors(X_te, y_te), n_classes=10)


def blobs(n_train: int = 6000, n_test: int = 900, random_state: int = 42) -> Dataset:
    """Three unit-variance Gaussian blobs in 2-D (``make_blobs``, as in the paper's 2-D example)."""
    from sklearn.datasets import make_blobs

    n_train, n_test = as_int(n_train, "n_train", low=3), as_int(n_test, "n_test", low=3)
    X, y, centers = make_blobs(n_samples=n_train + n_test, centers=3, n_features=2, cluster_std=1.0,
                               random_state=random_state, return_centers=True)
    return Dataset(*_tensors(X[:n_train], y[:n_train]), *_tensors(X[n_train:], y[n_train:]), n_classes=3,
                   centers=torch.as_tensor(centers, dtype=torch.float32))


def shuffle_pixels(X: torch.Tensor, generator: torch.Generator | None = None,
                   among: torch.Tensor | None = None) -> torch.Tensor:
    """Each row of ``X`` with its features permuted at random: the same intensities, no digit left.

    ``among``, a bool mask ``(d,)``, restricts the permutation to those features (the others stay).
    """
    X = as_points(X)
    if among is None:
        among = torch.ones(X.shape[1], dtype=torch.bool, device=X.device)
    if not isinstance(among, torch.Tensor) or among.dtype != torch.bool or among.shape != (X.shape[1],):
        raise ValueError(f"among: expected a bool mask of shape ({X.shape[1]},), got {among!r:.60}")
    cols = torch.nonzero(among.to(X.device)).squeeze(1)
    keys = _rand((X.shape[0], cols.numel()), generator, X.device)
    out = X.clone()
    out[:, cols] = torch.gather(X[:, cols], 1, keys.argsort(1))
    return out
