"""Task generators with a known latent: every batch is ``B`` fresh tasks (eq. (icl-task)).

A task draws its latent ``w`` from the prior, then ``n`` context and ``m`` query inputs, and
labels them with ``y = f_w(x) + sigma * eps``. Out-of-distribution (OOD) evaluation moves the
*queries* only; the latent and the context keep the training distribution:

* ``"iid"``: ``x' ~ N(0, I)``, as the context;
* ``"wide"``: ``x' ~ N(0, s^2 I)`` with ``s = intensity``;
* ``"far"``: ``x' = s u + 0.1 eps`` with ``u`` uniform on the unit sphere (in 1-D: about ``+-s``);
* ``"near"``: ``x'_j = x_j + 0.1 eps``, one query next to each of the first ``m`` context
  points (the official style has ``m = n``: one query per context point).

The latent, the context inputs and the context labels are drawn first, the queries after them,
so batches drawn from the same generator state share their tasks and contexts whatever the
query style; only the queries (and their labels) differ.

Tensors are drawn on the CPU from ``generator`` (so a seed gives the same tasks on every
machine) and moved to ``device``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from companion.validation import as_nonnegative, as_positive_int

__all__ = ["TaskBatch", "LinearRegressionTask", "SinusoidTask", "QUERY_STYLES"]

QUERY_STYLES = ("iid", "wide", "far", "near")


@dataclass
class TaskBatch:
    """``B`` tasks: context ``(x_c, y_c)``, queries ``(x_q, y_q)`` and the latent ``w (B, P)``."""

    x_c: torch.Tensor
    y_c: torch.Tensor
    x_q: torch.Tensor
    y_q: torch.Tensor
    w: torch.Tensor

    def to(self, device) -> "TaskBatch":
        return TaskBatch(*(t.to(device) for t in (self.x_c, self.y_c, self.x_q, self.y_q, self.w)))


def _queries(x_c: torch.Tensor, m: int, query: str, intensity: float,
             gen: torch.Generator | None) -> torch.Tensor:
    """Query inputs ``(B, m, dx)`` of style ``query`` (see the module docstring)."""
    B, n, dx = x_c.shape
    eps = torch.randn(B, m, dx, generator=gen)
    if query == "iid":
        return eps
    if query == "wide":
        return intensity * eps
    if query == "far":
        u = torch.randn(B, m, dx, generator=gen)
        return intensity * u / u.norm(dim=-1, keepdim=True) + 0.1 * eps
    return x_c[:, :m] + 0.1 * eps  # "near": query j next to context point j (m <= n)


class _Task:
    """Shared sampling: subclasses define ``dx``, ``dy``, ``n_params``, ``prior`` and ``f``."""

    dx: int
    dy: int
    noise: float
    n_params: int

    def prior(self, B: int, gen: torch.Generator | None) -> torch.Tensor:
        raise NotImplementedError

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``phi(x)``: the task is linear in these features, ``f_w(x) = phi(x) W``."""
        raise NotImplementedError

    def f(self, w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The noise-free function of latent ``w (B, P)`` at inputs ``x (B, k, dx)``."""
        if w.ndim != 2 or w.shape[1] != self.n_params:
            raise ValueError(f"w: expected shape (B, {self.n_params}), got {tuple(w.shape)}")
        if x.ndim != 3 or x.shape[0] != w.shape[0] or x.shape[2] != self.dx:
            raise ValueError(f"x: expected shape ({w.shape[0]}, k, {self.dx}), got {tuple(x.shape)}")
        return self.features(x) @ w.reshape(w.shape[0], -1, self.dy)

    def sample(self, B: int, n: int, m: int, *, query: str = "iid", intensity: float = 3.0,
               generator: torch.Generator | None = None, device=None) -> TaskBatch:
        """``B`` fresh tasks with ``n`` context points and ``m`` queries of style ``query``."""
        B, n, m = as_positive_int(B, "B"), as_positive_int(n, "n"), as_positive_int(m, "m")
        if query not in QUERY_STYLES:
            raise ValueError(f"query: expected one of {QUERY_STYLES}, got {query!r}")
        intensity = as_nonnegative(intensity, "intensity")
        if intensity == 0:
            raise ValueError("intensity: expected a number > 0, got 0")
        if query == "near" and m > n:
            raise ValueError(f"m: the near style puts one query next to each context point, so "
                             f"m <= n = {n}; got {m}")
        w = self.prior(B, generator)  # the task and its context first: shared by every style
        x_c = torch.randn(B, n, self.dx, generator=generator)
        y_c = self.f(w, x_c) + self.noise * torch.randn(B, n, self.dy, generator=generator)
        x_q = _queries(x_c, m, query, intensity, generator)
        y_q = self.f(w, x_q) + self.noise * torch.randn(B, m, self.dy, generator=generator)
        return TaskBatch(x_c, y_c, x_q, y_q, w).to(device or "cpu")


class LinearRegressionTask(_Task):
    """``y = [x, 1] W + sigma eps`` with ``W in R^{(dx+1) x dy}``, ``W_ij ~ N(0, 1)``."""

    def __init__(self, dx: int = 1, dy: int = 1, noise: float = 0.1):
        self.dx, self.dy = as_positive_int(dx, "dx"), as_positive_int(dy, "dy")
        self.noise = as_nonnegative(noise, "noise")
        self.n_params = (self.dx + 1) * self.dy
        self.prior_var = 1.0

    def prior(self, B, gen):
        return torch.randn(B, self.n_params, generator=gen)

    def features(self, x):
        return torch.cat([x, torch.ones_like(x[..., :1])], dim=-1)


class SinusoidTask(_Task):
    """``y = sum_{d,f} a_df sin(phi_df x_d) + sigma eps``, amplitudes ``a ~ U[-1, 1]``.

    The frequencies ``phi = 5 U(0, 1)^{dx x F}`` are fixed once for the task family, drawn from
    a generator seeded ``freq_seed``; the latent is the ``dx F`` amplitudes.
    """

    def __init__(self, dx: int = 1, n_freq: int = 3, noise: float = 0.1, freq_seed: int = 1):
        self.dx, self.dy = as_positive_int(dx, "dx"), 1
        self.n_freq = as_positive_int(n_freq, "n_freq")
        self.noise = as_nonnegative(noise, "noise")
        self.freqs = 5 * torch.rand(self.dx, self.n_freq,
                                    generator=torch.Generator().manual_seed(freq_seed))
        self.n_params = self.dx * self.n_freq
        self.prior_var = 1 / 3

    def prior(self, B, gen):
        return 2 * torch.rand(B, self.n_params, generator=gen) - 1

    def features(self, x):
        return torch.sin(x[..., :, None] * self.freqs.to(x.device)).flatten(-2)
