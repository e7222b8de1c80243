"""The book's "generated image" source: a caption-conditional Gaussian in PCA space with a
per-digit fingerprint whose strength gamma sets the modality gap.

A small generator always blurs (here, a 12-component PCA truncation). On top of that it stamps
every image of digit c with the same faint pattern, a checkerboard times a fixed random sign mask
of that digit: the toy stand-in for a generator's per-concept style, a cue correlated with the
prompt that real images never carry (eq. ``gmail-generator``).
"""

from __future__ import annotations

import numpy as np
import torch

from ._checks import N_CAPTIONS, as_batch, as_digits, as_ids, as_images
from ..validation import as_nonnegative, as_positive_int
from .data import thickness

__all__ = ["fingerprint", "PCAGaussGenerator", "FINGERPRINT_SCALE"]

FINGERPRINT_SCALE = 0.15


def fingerprint(c: int, gamma: float) -> torch.Tensor:
    """The fingerprint of digit ``c`` at strength ``gamma``: ``0.15 gamma (C * s_c)``, flattened to (64,).

    ``C[i, j] = (-1)^(i+j)`` is a checkerboard and ``s_c`` a sign mask seeded by ``1234 + c``.
    """
    c = as_positive_int(c, "c", minimum=0)
    if c > 9:
        raise ValueError(f"c: expected a digit in 0..9, got {c}")
    gamma = as_nonnegative(gamma, "gamma")
    i, j = np.indices((8, 8))
    signs = np.random.default_rng(1234 + c).choice([-1.0, 1.0], size=(8, 8))
    return torch.tensor(gamma * FINGERPRINT_SCALE * (-1.0) ** (i + j) * signs, dtype=torch.float32).reshape(64)


class PCAGaussGenerator:
    """Fit on split G: a mean mu, k principal directions U, and for each caption (digit c,
    thickness a) a Gaussian N(m_ca, S_ca) of the latents z = U^T (x - mu), with the shrunk covariance
    S_ca = (n_ca S^_ca + nu S_c) / (n_ca + nu) + 1e-3 I."""

    def __init__(self, n_components: int = 12, nu: float = 10.0):
        self.k = as_positive_int(n_components, "n_components")
        if self.k > 64:
            raise ValueError(f"n_components: expected at most 64, got {self.k}")
        self.nu = as_nonnegative(nu, "nu")
        self.fitted = False

    def fit(self, x: torch.Tensor, y: torch.Tensor, cap: torch.Tensor, thresholds: torch.Tensor):
        """Fit on images ``x`` (N, 64), digits ``y``, caption ids ``cap``; ``thresholds`` (10, 2)
        decide the thickness of a sample (rejection)."""
        x = as_images(x, "x")
        y = as_digits(y, "y", len(x))
        cap = as_ids(cap, "cap", len(x))
        if not bool((cap // 3 == y).all()):
            raise ValueError("cap: caption id // 3 must be the digit y of every image")
        X = x.double().cpu().numpy()
        self.mu = X.mean(0)
        _, _, vt = np.linalg.svd(X - self.mu, full_matrices=False)
        self.U = vt[: self.k].T  # (64, k)
        Z = (X - self.mu) @ self.U
        yc, cc = y.cpu().numpy(), cap.cpu().numpy()
        self.means = np.zeros((N_CAPTIONS, self.k))
        self.chol = np.zeros((N_CAPTIONS, self.k, self.k))
        for c in range(10):
            Sc = np.cov(Z[yc == c].T)
            for a in range(3):
                z = Z[cc == 3 * c + a]
                if len(z) < 2:
                    raise ValueError(f"cap: caption {3 * c + a} has {len(z)} images, at least 2 are needed")
                S = (len(z) * np.cov(z.T, bias=True) + self.nu * Sc) / (len(z) + self.nu) + 1e-3 * np.eye(self.k)
                self.means[3 * c + a] = z.mean(0)
                self.chol[3 * c + a] = np.linalg.cholesky(S)
        self.thresholds = thresholds.detach().cpu()
        self.fitted = True
        return self

    def sample_clean(self, cap: torch.Tensor, seed: int, retries: int = 5) -> torch.Tensor:
        """Images (N, 64) for caption ids ``cap`` before the fingerprint: x~ = clip(mu + U z, 0, 1),
        resampled up to ``retries`` times while its thickness disagrees with the caption's."""
        if not self.fitted:
            raise ValueError("generator: call fit() before sampling")
        cap = as_ids(cap, "cap")
        rng = np.random.default_rng(as_positive_int(seed, "seed", minimum=0))
        ids = cap.cpu().numpy()
        out = np.zeros((len(ids), 64))
        todo = np.arange(len(ids))
        for attempt in range(as_positive_int(retries, "retries", minimum=0) + 1):
            eps = rng.standard_normal((len(todo), self.k))
            z = self.means[ids[todo]] + np.einsum("nij,nj->ni", self.chol[ids[todo]], eps)
            out[todo] = np.clip(self.mu + z @ self.U.T, 0.0, 1.0)
            xt = torch.tensor(out[todo], dtype=torch.float32)
            got = thickness(xt, torch.tensor(ids[todo] // 3), self.thresholds).numpy()
            todo = todo[got != ids[todo] % 3]
            if len(todo) == 0:
                break
        return torch.tensor(out, dtype=torch.float32, device=cap.device)

    def stamp(self, x_clean: torch.Tensor, cap: torch.Tensor, gamma: float) -> torch.Tensor:
        """x_g = clip(x~ + 0.15 gamma (C * s_c), 0, 1), eq. (gmail-generator)."""
        x_clean = as_batch(x_clean, "x_clean", dim=64)
        cap = as_ids(cap, "cap", len(x_clean))
        bank = torch.stack([fingerprint(c, gamma) for c in range(10)]).to(x_clean.device)
        return (x_clean + bank[cap // 3]).clamp(0.0, 1.0)

    def sample(self, cap: torch.Tensor, gamma: float = 0.0, seed: int = 0) -> torch.Tensor:
        """Generated images (N, 64) for caption ids ``cap`` at fingerprint strength ``gamma``."""
        return self.stamp(self.sample_clean(cap, seed), cap, gamma)
