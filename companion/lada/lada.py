"""LADA's three parts on cached features: label-specific memory, the class vectors, and DPT.

* :class:`LabelMemory` -- lambda_1 memory vectors per class, initialised by k-means on the class's
  normalised features, trained during the class's task and frozen afterwards; logits
  eq. (lada-memory), summed per class by the block-diagonal map J of eq. (lada-sum);
* :class:`CosineClassifier` -- one vector per class (the chapter's stand-in for CLIP's tuned text
  prototypes), logits ``s * cos(v, t_c)`` of eq. (lada-logits) with CLIP's frozen scale s = 100 by
  default, old vectors frozen;
* :class:`DPTBank` -- distribution-preserved training: a spherical Gaussian mixture of lambda_2
  components per seen class, fitted on raw features, from which fresh pseudo-features of the old
  classes are drawn at every step, eq. (lada-dpt).

Class ids are global and contiguous: each call to ``add_classes`` / ``fit_classes`` must bring
the next ids ``C_seen, C_seen + 1, ...``.
"""

from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import torch
from torch import nn

from companion.validation import (as_finite_tensor, as_float_array, as_index_tensor, as_nonnegative, as_positive,
                                  as_positive_int)

__all__ = ["LabelMemory", "CosineClassifier", "DPTBank", "kmeans_centres", "check_features", "check_new_labels"]


def check_features(v: torch.Tensor, name: str, dim: int | None = None) -> torch.Tensor:
    """``v`` as a finite float tensor ``(N, dim)`` with N >= 1, or a ValueError naming ``name``."""
    as_finite_tensor(v, name, ndim=2)
    if dim is not None and v.shape[1] != dim:
        raise ValueError(f"{name}: feature dimension {v.shape[1]} does not match the model's dimension {dim}")
    return v.float()


def check_new_labels(labels: torch.Tensor, n_seen: int, n: int) -> list[int]:
    """The sorted distinct labels of a new task; they must be ``n_seen, n_seen + 1, ...``."""
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels: expected a 1-D integer tensor of length {n}, got {type(labels).__name__}")
    as_index_tensor(labels, "labels", n=n, empty=True)  # a float label 2.7 is not class 2
    classes = sorted(int(c) for c in torch.unique(labels))
    if classes != list(range(n_seen, n_seen + len(classes))):
        seen = f"ids already seen: 0..{n_seen - 1}" if n_seen else "no id seen yet"
        raise ValueError(f"labels: a new task must bring the contiguous ids {n_seen}, {n_seen + 1}, ... "
                         f"({seen}), got {classes}")
    return classes


def _unit(v: torch.Tensor) -> torch.Tensor:
    return nn.functional.normalize(v, dim=1)


_KMEANS: dict[tuple[str, int, int], np.ndarray] = {}


def kmeans_centres(x: np.ndarray, k: int, seed: int = 42) -> np.ndarray:
    """The ``min(k, n)`` centres of a k-means clustering of the rows of ``x`` (10 restarts, fixed
    seed). The result is deterministic, so it is memoised on the bytes of ``x``: the ablations of a
    chapter cluster the same class's features once, not once per learner."""
    from sklearn.cluster import KMeans

    k = as_positive_int(k, "k")
    x = as_float_array(x, "x")
    if x.ndim != 2:
        raise ValueError(f"x: expected a non-empty finite (n, d) array, got shape {x.shape}")
    key = (hashlib.sha1(np.ascontiguousarray(x).tobytes()).hexdigest(), int(k), int(seed))
    if key not in _KMEANS:
        if len(_KMEANS) > 4096:
            _KMEANS.clear()
        _KMEANS[key] = KMeans(n_clusters=min(k, len(x)), n_init=10, random_state=seed).fit(x).cluster_centers_
    return _KMEANS[key]


class LabelMemory(nn.Module):
    """Label-specific memory units: W_c, lambda_1 vectors of class c, eq. (lada-memory)."""

    def __init__(self, dim: int, beta: float = 1.0, seed: int = 42):
        super().__init__()
        self.dim = as_positive_int(dim, "dim")
        self.beta, self.seed = as_positive(beta, "beta"), seed
        self.frozen: list[torch.Tensor] = []  # W of finished tasks, never trained again
        self.current: nn.Parameter | None = None  # W of the task being learned
        self.register_buffer("class_of", torch.zeros(0, dtype=torch.int64))  # memory vector -> class
        self.n_classes = 0

    def add_classes(self, feats_norm: torch.Tensor, labels: torch.Tensor, k: int) -> None:
        """Initialise W_c for every class of a new task with the k-means centres of its normalised
        features (``min(k, n_c)`` centres, 10 restarts), trainable until :meth:`freeze_current`."""
        k = as_positive_int(k, "k")
        feats_norm = check_features(feats_norm, "feats_norm", self.dim)
        if self.current is not None:
            raise ValueError("add_classes: call freeze_current() before adding the next task's classes")
        classes = check_new_labels(labels, self.n_classes, len(feats_norm))
        x = feats_norm.detach().cpu().double().numpy()
        centres, owner = [], []
        for c in classes:
            xc = x[(labels == c).cpu().numpy()]
            centres.append(kmeans_centres(xc, k, self.seed))
            owner += [c] * len(centres[-1])
        w = torch.tensor(np.concatenate(centres), dtype=torch.float32, device=feats_norm.device)
        self.current = nn.Parameter(w)
        self.class_of = torch.cat([self.class_of.to(w.device), torch.tensor(owner, device=w.device)])
        self.n_classes = classes[-1] + 1

    def freeze_current(self) -> None:
        """Move the current task's W into the frozen memory: no gradient, no weight decay."""
        if self.current is not None:
            self.frozen.append(self.current.detach().clone())
            self.current = None

    def vectors(self) -> torch.Tensor:
        """M: all memory vectors of all tasks, ``(P, d)`` (rows; the columns of eq. (lada-sum))."""
        parts = self.frozen + ([self.current] if self.current is not None else [])
        if not parts:
            raise RuntimeError("LabelMemory: no class has been added yet")
        return torch.cat(parts)

    def assignment(self) -> torch.Tensor:
        """J: the ``(P, C)`` one-hot map from memory vector to class, eq. (lada-sum)."""
        return nn.functional.one_hot(self.class_of, self.n_classes).float()

    def logits(self, v_norm: torch.Tensor) -> torch.Tensor:
        """l^lada_c(v) = sum_m exp(-beta (1 - v^T w_{c,m})), eq. (lada-memory), for all C classes."""
        return self.forward(check_features(v_norm, "v_norm", self.dim))

    def forward(self, v_norm: torch.Tensor) -> torch.Tensor:
        """:meth:`logits` without the input checks."""
        affinity = torch.exp(-self.beta * (1.0 - v_norm @ self.vectors().T))  # (B, P)
        out = torch.zeros(len(v_norm), self.n_classes, device=v_norm.device, dtype=affinity.dtype)
        return out.index_add(1, self.class_of.to(v_norm.device), affinity)  # = affinity @ J

    def blockwise(self, v_norm: torch.Tensor) -> torch.Tensor:
        """:meth:`forward`, computed for the frozen and the current memory apart, so that the
        frozen block builds no autograd graph when no gradient has to reach ``v_norm`` (the
        training loop's path: the same numbers, about a fifth less time per step)."""
        self.vectors()  # raises before any class is added
        out = torch.zeros(len(v_norm), self.n_classes, device=v_norm.device, dtype=v_norm.dtype)
        owner = self.class_of.to(v_norm.device)
        n_frozen = sum(len(w) for w in self.frozen)
        for W, cols in ((self._frozen_matrix(), slice(0, n_frozen)), (self.current, slice(n_frozen, None))):
            if W is None or len(W) == 0:
                continue
            grad = torch.is_grad_enabled() and (W.requires_grad or v_norm.requires_grad)
            with torch.set_grad_enabled(grad):
                affinity = torch.exp(-self.beta * (1.0 - v_norm @ W.T))  # (B, P_block)
                out = out.index_add(1, owner[cols], affinity)
        return out

    def _frozen_matrix(self) -> torch.Tensor | None:
        """The frozen memory vectors of all finished tasks in one matrix, concatenated once."""
        if not self.frozen:
            return None
        if getattr(self, "_frozen_cache", (None, 0))[1] != len(self.frozen):
            self._frozen_cache = (torch.cat(self.frozen), len(self.frozen))
        return self._frozen_cache[0]

    def num_params(self) -> int:
        return sum(w.numel() for w in self.frozen) + (self.current.numel() if self.current is not None else 0)


class CosineClassifier(nn.Module):
    """One vector t_c per class; logits s * cos(v, t_c). Old vectors frozen, current trainable."""

    def __init__(self, dim: int, scale: float = 100.0):
        super().__init__()
        self.dim = as_positive_int(dim, "dim")
        self.scale = as_positive(scale, "scale")
        self.frozen: list[torch.Tensor] = []
        self.current: nn.Parameter | None = None

    @property
    def n_classes(self) -> int:
        return sum(len(t) for t in self.frozen) + (len(self.current) if self.current is not None else 0)

    def add_classes(self, init: torch.Tensor) -> None:
        """Append trainable vectors for a new task's classes, initialised at ``init`` ``(c, d)``."""
        init = check_features(init, "init", self.dim)
        if self.current is not None:
            raise ValueError("add_classes: call freeze_current() before adding the next task's classes")
        self.current = nn.Parameter(init.detach().clone())

    def freeze_current(self) -> None:
        if self.current is not None:
            self.frozen.append(self.current.detach().clone())
            self.current = None

    def logits(self, v_norm: torch.Tensor) -> torch.Tensor:
        """s * v^T t_c / |t_c| for all C classes (``v_norm`` has unit rows)."""
        return self.forward(check_features(v_norm, "v_norm", self.dim))

    def forward(self, v_norm: torch.Tensor) -> torch.Tensor:
        """:meth:`logits` without the input checks (the training loop's path)."""
        parts = self.frozen + ([self.current] if self.current is not None else [])
        if not parts:
            raise RuntimeError("CosineClassifier: no class has been added yet")
        return self.scale * v_norm @ _unit(torch.cat(parts)).T

    def num_params(self) -> int:
        return self.n_classes * self.dim


class DPTBank:
    """Per-class spherical GMMs of raw features: the statistics DPT keeps instead of images."""

    def __init__(self, n_components: int = 4, eta: float = 64.0, seed: int = 42, reg_covar: float = 1e-6):
        self.n_components = as_positive_int(n_components, "n_components")
        self.eta, self.seed = as_positive(eta, "eta"), seed
        self.reg_covar = as_nonnegative(reg_covar, "reg_covar")
        self.means = self.sigmas = self.pis = self.labels = None
        self.n_classes = 0
        # pooled statistics of every raw feature fitted so far (the class-agnostic null of DPT)
        self._count, self._sum, self._sumsq = 0, None, 0.0

    def __len__(self) -> int:
        """The number of stored components (one pseudo-feature each per step)."""
        return 0 if self.labels is None else len(self.labels)

    def fit_classes(self, raw_feats: torch.Tensor, labels: torch.Tensor) -> None:
        """Fit lambda_2 spherical components per class (fewer, with a warning, for a class with fewer
        samples) on the raw, unnormalised features: means p_l, sigma_l^2 = Tr(Sigma_l)/d, weights pi_l.
        The variance floor ``reg_covar`` is scikit-learn's default 1e-6, which the official code keeps.
        The pooled mean and spherical variance of all fitted features are kept for :meth:`sample`'s
        ``pooled`` null."""
        from sklearn.mixture import GaussianMixture

        raw_feats = check_features(raw_feats, "raw_feats")
        if self.means is not None and raw_feats.shape[1] != self.means.shape[1]:
            raise ValueError(f"raw_feats: feature dimension {raw_feats.shape[1]} does not match the "
                             f"bank's dimension {self.means.shape[1]}")
        classes = check_new_labels(labels, self.n_classes, len(raw_feats))
        x = raw_feats.detach().cpu().double().numpy()
        means, sigmas, pis, owner = [], [], [], []
        for c in classes:
            xc = x[(labels == c).cpu().numpy()]
            k = self.n_components
            if len(xc) < k:
                warnings.warn(f"class {c} has {len(xc)} samples < n_components={k}; fitting {len(xc)}")
                k = len(xc)
            gmm = GaussianMixture(k, covariance_type="spherical", random_state=self.seed,
                                  reg_covar=self.reg_covar).fit(xc)
            means.append(gmm.means_)
            sigmas.append(np.sqrt(gmm.covariances_))
            pis.append(gmm.weights_)
            owner += [c] * k
        dev = raw_feats.device
        new = [torch.tensor(np.concatenate(a), dtype=torch.float32, device=dev) for a in (means, sigmas, pis)]
        new.append(torch.tensor(owner, dtype=torch.int64, device=dev))
        old = (self.means, self.sigmas, self.pis, self.labels)
        self.means, self.sigmas, self.pis, self.labels = (
            n if o is None else torch.cat([o, n]) for o, n in zip(old, new))
        self.n_classes = classes[-1] + 1
        self._count += len(x)
        self._sum = x.sum(0) if self._sum is None else self._sum + x.sum(0)
        self._sumsq += float((x ** 2).sum())

    def pooled_stats(self) -> tuple[torch.Tensor, float]:
        """The mean and the spherical standard deviation (sqrt of Tr(Sigma)/d) of every raw
        feature fitted so far, all classes pooled."""
        if self.means is None:
            raise RuntimeError("DPTBank: no class has been fitted yet")
        mean = self._sum / self._count
        var = max(self._sumsq / self._count - float((mean ** 2).sum()), 0.0) / len(mean)
        return torch.tensor(mean, dtype=torch.float32, device=self.means.device), math.sqrt(var)

    def sample(self, generator: torch.Generator | None = None, pooled: bool = False):
        """One fresh pseudo-feature per component, p~_l = p_l + sigma_l * eps, eps ~ N(0, I),
        eq. (lada-dpt): ``(feats (P, d) raw, labels (P,), weights pi_l * eta (P,))``.

        ``pooled=True`` is DPT's null: the same rows, labels and weights, but every row drawn from
        one spherical Gaussian fitted to all old features together, so no row carries its class's
        distribution."""
        if self.means is None:
            raise RuntimeError("DPTBank: no class has been fitted yet")
        eps = torch.randn(self.means.shape, generator=generator, device=self.means.device)
        if pooled:
            mean, sigma = self.pooled_stats()
            return mean + sigma * eps, self.labels, self.pis * self.eta
        return self.means + self.sigmas[:, None] * eps, self.labels, self.pis * self.eta

    def floats_per_class(self) -> float:
        """Stored floats per class: lambda_2 * (d + 2) (mean, variance and weight of each component)."""
        return 0.0 if self.means is None else len(self) * (self.means.shape[1] + 2) / self.n_classes
