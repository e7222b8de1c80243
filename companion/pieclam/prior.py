"""The prior of PieClam: a small RealNVP normalising flow over the code space, written in torch.

``x = g(z)`` with ``z`` from a diagonal Gaussian with trainable mean and scale, and ``g`` a stack of
affine coupling blocks. Each block keeps half of the coordinates (``mask``) and moves the other
half by ``y = x * exp(s(x_kept)) + t(x_kept)``; the log-scales are bounded with ``tanh`` so
that a step of the optimiser cannot blow the flow up. The masks alternate, so every coordinate
is moved by every other block. ``log p(x) = log N(z) - sum of the log-scales`` along the inverse
pass (eq. (pieclam-flow)).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["RealNVPPrior"]


class _Coupling(nn.Module):
    def __init__(self, dim: int, mask: torch.Tensor, hidden: int, n_hidden_layers: int):
        super().__init__()
        self.register_buffer("mask", mask)
        layers, width = [], dim
        for _ in range(n_hidden_layers):
            layers += [nn.Linear(width, hidden), nn.LeakyReLU(0.1)]
            width = hidden
        last = nn.Linear(width, 2 * dim)
        nn.init.zeros_(last.weight)  # every block starts as the identity
        nn.init.zeros_(last.bias)
        self.net = nn.Sequential(*layers, last)
        self.log_scale_max = 2.0

    def _shift_scale(self, kept: torch.Tensor):
        s, t = self.net(kept).chunk(2, dim=-1)
        s = self.log_scale_max * torch.tanh(s / self.log_scale_max) * (1 - self.mask)
        return s, t * (1 - self.mask)

    def forward(self, z):  # base -> data
        s, t = self._shift_scale(z * self.mask)
        return z * torch.exp(s) + t, s.sum(-1)

    def inverse(self, x):  # data -> base
        s, t = self._shift_scale(x * self.mask)
        return (x - t) * torch.exp(-s), -s.sum(-1)


class RealNVPPrior(nn.Module):
    """A RealNVP density on R^dim: ``log_prob(x)`` of shape ``(N,)`` and ``sample(n)``.

    ``noise_std``: during training (``.train()``), the fitting loop adds Gaussian noise of this
    standard deviation to the codes before ``log_prob`` (the regulariser of the prior).
    """

    def __init__(self, dim: int, n_blocks: int = 8, hidden: int = 32, n_hidden_layers: int = 2,
                 noise_std: float = 0.05):
        super().__init__()
        for name, v, low in (("dim", dim, 1), ("n_blocks", n_blocks, 1), ("hidden", hidden, 1),
                             ("n_hidden_layers", n_hidden_layers, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name}: expected an integer >= {low}, got {v!r}")
        if not (isinstance(noise_std, (int, float)) and noise_std >= 0 and math.isfinite(noise_std)):
            raise ValueError(f"noise_std: expected a finite number >= 0, got {noise_std!r}")
        self.dim, self.noise_std = dim, float(noise_std)
        blocks = []
        for b in range(n_blocks):
            if dim == 1:
                mask = torch.zeros(1)  # one coordinate: nothing to condition on, an affine map
            else:
                mask = (torch.arange(dim) % 2 == b % 2).double()
            blocks.append(_Coupling(dim, mask.double(), hidden, n_hidden_layers))
        self.blocks = nn.ModuleList(blocks)
        self.base_mean = nn.Parameter(torch.zeros(dim, dtype=torch.float64))
        self.base_log_std = nn.Parameter(torch.zeros(dim, dtype=torch.float64))
        self.double()

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(x)`` for each row of ``x`` (shape ``(N, dim)``), eq. (pieclam-flow)."""
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: expected shape (N, {self.dim}), got {tuple(x.shape)}")
        z, log_det = x, torch.zeros(x.shape[0], dtype=x.dtype)
        for block in reversed(self.blocks):
            z, ld = block.inverse(z)
            log_det = log_det + ld
        u = (z - self.base_mean) * torch.exp(-self.base_log_std)
        base = -0.5 * (u**2).sum(-1) - self.base_log_std.sum() - 0.5 * self.dim * math.log(2 * math.pi)
        return base + log_det

    @torch.no_grad()
    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` draws from the prior (shape ``(n, dim)``)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n: expected an integer >= 1, got {n!r}")
        z = torch.randn(n, self.dim, dtype=torch.float64, generator=generator)
        x = self.base_mean + z * torch.exp(self.base_log_std)
        for block in self.blocks:
            x, _ = block(x)
        return x
