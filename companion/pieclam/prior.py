"""Densities over the code space: PieClam's RealNVP prior, and a kernel density baseline.

**RealNVP** (eq. (pieclam-flow)): ``x = g(z)`` with ``z`` from a diagonal Gaussian with trainable
mean and scale, and ``g`` a stack of affine coupling blocks. A block keeps one group of
coordinates, ``A``, and moves the other, ``B``, by ``y_B = x_B * exp(s(x_A)) + t(x_A)``; the
next block swaps the roles of ``A`` and ``B``, as the official code's fixed ``swap``
permutation after every block does. The split matters: a coordinate is only ever moved as a
function of the *other* group. By default ``A`` is the first half of the coordinates, which
for Clam codes ``[t_1..t_C | s_1..s_C]`` is every inclusive entry, so each exclusive entry
``s_c`` is moved as a function of the inclusive ones and vice versa (:func:`clam_split` keeps
that property when node attributes are appended). As in the official code, the coupling networks
use ReLU and the log-scales are unbounded; points that leave a radius of 10 along the inverse pass
stop moving (an earlier version of this book bounded the log-scales with ``tanh`` instead, an
option kept for the ablation). ``log p(x) = log N(z) - sum of the log-scales`` along the inverse
pass.

A RealNVP is a smooth bijection of R^d, and it pushes forward a Gaussian, whose density is
positive everywhere: so is the prior's. Between two clusters of codes it always leaves some mass
(a "bridge"); it can only thin it by stretching space there.

**GaussianKDE**: a Gaussian kernel density estimate, the non-flow density the chapter compares
with. Its bandwidth matrix is ``h^2`` times the sample covariance, with ``h`` chosen by likelihood
cross-validation (the leave-one-out log-likelihood of the data) on a grid around Scott's rule
``n^{-1/(d+4)}``, which alone over-smooths data made of separate clusters.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..validation import as_nonnegative, as_positive, as_positive_int

__all__ = ["RealNVPPrior", "GaussianKDE", "FittedGaussian", "clam_split"]


def clam_split(dim: int, lorentz: bool, n_attrs: int = 0) -> torch.Tensor:
    """The coordinates ``A`` that the even coupling blocks condition on, for
    ``[codes | attrs]``.

    IeClam/PieClam codes (``lorentz=True``): the inclusive entries ``t``, so that every pair
    ``(t_c, s_c)`` is split between ``A`` and ``B``. BigClam codes: their first half. Attributes:
    their first half. The odd blocks condition on the complement.
    """
    as_positive_int(dim, "dim", minimum=1)
    as_positive_int(n_attrs, "n_attrs", minimum=0)
    if lorentz and dim % 2:
        raise ValueError("dim: IeClam codes hold C inclusive and C exclusive entries, "
                         f"so dim must be even, got {dim}")
    codes = torch.arange(dim) < (dim // 2 if lorentz else (dim + 1) // 2)
    return torch.cat([codes, torch.arange(n_attrs) < (n_attrs + 1) // 2])


_ACTIVATIONS = {"leaky_relu": lambda: nn.LeakyReLU(0.1), "relu": nn.ReLU}


class _Coupling(nn.Module):
    """One affine coupling block: keeps the coordinates where ``mask`` is 1, moves the others.

    ``scale_bound``: the log-scales are left unbounded (``None``, as the official code's
    ``normflows`` coupling does), or pass through ``b * tanh(s / b)`` (an earlier version of this
    book used b = 2).
    """

    def __init__(self, dim: int, mask: torch.Tensor, hidden: int, n_hidden_layers: int,
                 activation: str = "relu", scale_bound: float | None = None):
        super().__init__()
        self.register_buffer("mask", mask)
        layers, width = [], dim
        for _ in range(n_hidden_layers):
            layers += [nn.Linear(width, hidden), _ACTIVATIONS[activation]()]
            width = hidden
        last = nn.Linear(width, 2 * dim)
        nn.init.zeros_(last.weight)  # every block starts as the identity
        nn.init.zeros_(last.bias)
        self.net = nn.Sequential(*layers, last)
        self.log_scale_max = scale_bound

    def _shift_scale(self, kept: torch.Tensor):
        s, t = self.net(kept).chunk(2, dim=-1)
        moved = 1 - self.mask
        if self.log_scale_max is not None:
            s = self.log_scale_max * torch.tanh(s / self.log_scale_max)
        return s * moved, t * moved

    def forward(self, z):  # base -> data
        s, t = self._shift_scale(z * self.mask)
        return z * torch.exp(s) + t, s.sum(-1)

    def inverse(self, x):  # data -> base
        s, t = self._shift_scale(x * self.mask)
        return (x - t) * torch.exp(-s), -s.sum(-1)


class RealNVPPrior(nn.Module):
    """A RealNVP density on R^dim: ``log_prob(x)`` of shape ``(N,)`` and ``sample(n)``.

    ``first`` (boolean, length ``dim``): the coordinates ``A`` the even blocks condition on (odd
    blocks: the rest); default the first ``ceil(dim/2)``. ``noise_std``: during training, the
    fitting loop adds Gaussian noise of this standard deviation to the codes (the regulariser).
    The defaults are the official code's: ``activation="relu"`` (its ``normflows`` MLP), unbounded
    log-scales (``scale_bound=None``) and ``limit_radius=10``: along the inverse pass, a point
    stops moving (and its log-determinant stops counting) once a coordinate leaves that radius,
    the official guard against a blow-up of unbounded scales. ``activation="leaky_relu"`` (slope
    0.1), ``scale_bound=2.0`` and ``limit_radius=None`` give the flow of an earlier version of
    this book (tanh-bounded log-scales), kept for the ablation.
    """

    def __init__(self, dim: int, n_blocks: int = 8, hidden: int = 32, n_hidden_layers: int = 2,
                 noise_std: float = 0.05, first: torch.Tensor | None = None,
                 activation: str = "relu", scale_bound: float | None = None,
                 limit_radius: float | None = 10.0):
        super().__init__()
        for name, v, low in (("dim", dim, 1), ("n_blocks", n_blocks, 1), ("hidden", hidden, 1),
                             ("n_hidden_layers", n_hidden_layers, 0)):
            as_positive_int(v, name, minimum=low)
        as_nonnegative(noise_std, "noise_std")
        first = torch.arange(dim) < (dim + 1) // 2 if first is None else torch.as_tensor(first)
        if first.dtype != torch.bool or first.shape != (dim,):
            raise ValueError(f"first: expected a boolean mask of length {dim}, got {first.dtype} {tuple(first.shape)}")
        if dim > 1 and (bool(first.all()) or not bool(first.any())):
            raise ValueError("first: the mask must split the coordinates into two non-empty groups")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation: expected one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        for name, v in (("scale_bound", scale_bound), ("limit_radius", limit_radius)):
            if v is not None:
                as_positive(v, name)
        self.dim, self.noise_std = dim, float(noise_std)
        self.limit_radius = None if limit_radius is None else float(limit_radius)
        masks = (first.double(), (~first).double())
        self.blocks = nn.ModuleList(
            _Coupling(dim, masks[b % 2], hidden, n_hidden_layers, activation,
                      None if scale_bound is None else float(scale_bound)) for b in range(n_blocks))
        self.base_mean = nn.Parameter(torch.zeros(dim, dtype=torch.float64))
        self.base_log_std = nn.Parameter(torch.zeros(dim, dtype=torch.float64))
        self.double()

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(x)`` for each row of ``x`` (shape ``(N, dim)``), eq. (pieclam-flow)."""
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: expected shape (N, {self.dim}), got {tuple(x.shape)}")
        z, log_det = x, torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        moving = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
        for block in reversed(self.blocks):
            z_out, ld = block.inverse(z)
            if self.limit_radius is not None:  # the official guard: far points stop moving
                moving = moving & (z.abs() < self.limit_radius).all(dim=1)
                z_out, ld = torch.where(moving[:, None], z_out, z), torch.where(moving, ld, 0.0)
            z, log_det = z_out, log_det + ld
        u = (z - self.base_mean) * torch.exp(-self.base_log_std)
        base = -0.5 * (u**2).sum(-1) - self.base_log_std.sum() - 0.5 * self.dim * math.log(2 * math.pi)
        return base + log_det

    @torch.no_grad()
    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` draws from the prior (shape ``(n, dim)``), on the prior's device."""
        as_positive_int(n, "n", minimum=1)
        dev = self.base_mean.device
        z = torch.randn(n, self.dim, dtype=torch.float64, generator=generator, device=dev)
        x = self.base_mean + z * torch.exp(self.base_log_std)
        for block in self.blocks:
            x, _ = block(x)
        return x


class GaussianKDE:
    """A Gaussian kernel density estimate on the rows of ``data`` (N x d).

    ``factor``: the bandwidth ``h`` in units of the data's standard deviations; default: the value
    of ``SCOTT * 2**k``, ``k = -4, -3.5, ..., 1``, with the best leave-one-out log-likelihood.
    ``log_prob(x)`` at new points; ``loo_log_prob()`` at the data points, each without its own
    kernel (the honest in-sample score: with its own kernel every point looks likely);
    ``sample(n)`` draws a data point and adds kernel noise.
    """

    def __init__(self, data: torch.Tensor, factor: float | None = None):
        data = torch.as_tensor(data).detach().double()
        if data.ndim != 2 or data.shape[0] < 2:
            raise ValueError(f"data: expected shape (N, d) with N >= 2, got {tuple(data.shape)}")
        if not bool(torch.isfinite(data).all()):
            raise ValueError("data: must be finite (nan or inf found)")
        if factor is not None and not (isinstance(factor, (int, float)) and 0 < factor < math.inf):
            raise ValueError(f"factor: expected a finite number > 0, got {factor!r}")
        n, d = data.shape
        cov = torch.atleast_2d(torch.cov(data.T)) + 1e-12 * torch.eye(d, dtype=data.dtype, device=data.device)
        self.data, self.dim, self._root = data, d, torch.linalg.cholesky(cov)
        if factor is None:
            scott = n ** (-1.0 / (d + 4))
            grid = [scott * 2.0**k for k in torch.arange(-4, 1.01, 0.5).tolist()]
            factor = max(grid, key=lambda h: float(self._with(h).loo_log_prob().mean()))
        self.factor = float(factor)
        self.chol = self.factor * self._root  # H = chol chol^T

    def _with(self, factor: float) -> GaussianKDE:
        return GaussianKDE(self.data, factor)

    def _kernel_logs(self, x: torch.Tensor) -> torch.Tensor:
        diff = x[:, None, :] - self.data[None]
        z = torch.linalg.solve_triangular(self.chol, diff.reshape(-1, self.dim).T, upper=False).T
        log_norm = torch.log(torch.diagonal(self.chol)).sum() + 0.5 * self.dim * math.log(2 * math.pi)
        return -0.5 * (z**2).sum(-1).reshape(x.shape[0], -1) - log_norm

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=self.data.dtype, device=self.data.device)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: expected shape (M, {self.dim}), got {tuple(x.shape)}")
        return torch.logsumexp(self._kernel_logs(x), dim=1) - math.log(self.data.shape[0])

    def loo_log_prob(self) -> torch.Tensor:
        logs = self._kernel_logs(self.data)
        logs.fill_diagonal_(-math.inf)
        return torch.logsumexp(logs, dim=1) - math.log(self.data.shape[0] - 1)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        as_positive_int(n, "n", minimum=1)
        pick = torch.randint(self.data.shape[0], (n,), generator=generator)
        noise = torch.randn(n, self.dim, dtype=self.data.dtype, generator=generator)
        return self.data[pick] + noise @ self.chol.T


class FittedGaussian:
    """One Gaussian with the sample mean and covariance of the rows of ``data`` (N x d, N >= 2):
    ``log_prob(x)`` and ``sample(n, generator)``. The density without any of a flow's structure,
    the null of the sampling and prior-recovery claims."""

    def __init__(self, data: torch.Tensor):
        data = torch.as_tensor(data).detach().double()
        if data.ndim != 2 or data.shape[0] < 2:
            raise ValueError(f"data: expected shape (N, d) with N >= 2, got {tuple(data.shape)}")
        if not bool(torch.isfinite(data).all()):
            raise ValueError("data: must be finite (nan or inf found)")
        d = data.shape[1]
        cov = torch.atleast_2d(torch.cov(data.T)) + 1e-12 * torch.eye(d, dtype=data.dtype)
        self.dim, self.mean, self.chol = d, data.mean(0), torch.linalg.cholesky(cov)
        self._dist = torch.distributions.MultivariateNormal(self.mean, scale_tril=self.chol)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.as_tensor(x, dtype=torch.float64)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"x: expected shape (M, {self.dim}), got {tuple(x.shape)}")
        return self._dist.log_prob(x)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        as_positive_int(n, "n", minimum=1)
        z = torch.randn(n, self.dim, dtype=torch.float64, generator=generator)
        return self.mean + z @ self.chol.T

