"""Generation by gradient ascent on a class logit, started from Metta samples (eq. (metta-ascent))."""

from __future__ import annotations

import torch
from torch import nn

from companion.validation import as_finite_tensor, as_positive, as_positive_int

__all__ = ["ascend"]


def ascend(model: nn.Module, x0: torch.Tensor, class_index, *, steps: int = 300, step_size: float = 0.05,
           clamp: tuple[float, float] | None = (0.0, 1.0)) -> torch.Tensor:
    """``x_{t+1} = clip(x_t + eta * grad_x f_c(x_t))`` for ``steps`` steps, eq. (metta-ascent).

    ``class_index`` is one label c for every row or a tensor ``(N,)`` of labels. ``clamp=None`` is
    the paper's unclamped ascent. The model's parameters are not changed; ``x0`` is not modified.
    """
    x = as_finite_tensor(x0, "x0", ndim=2, floating=True).detach().clone()
    steps, eta = as_positive_int(steps, "steps", minimum=0), as_positive(step_size, "step_size")
    with torch.no_grad():
        n_out = model(x[:1]).shape[1]
    c = torch.as_tensor(class_index, device=x.device)
    if c.is_floating_point() or c.dtype == torch.bool or c.ndim > 1:
        raise ValueError(f"class_index: expected an integer or an integer tensor (N,), got {class_index!r}")
    c = c.long().expand(x.shape[0]) if c.ndim == 0 else c.long()
    if c.shape[0] != x.shape[0]:
        raise ValueError(f"class_index: expected {x.shape[0]} labels, got {c.shape[0]}")
    if int(c.min()) < 0 or int(c.max()) >= n_out:
        raise ValueError(f"class_index: labels must lie in 0..{n_out - 1}, got {int(c.min())}..{int(c.max())}")
    if clamp is not None and not (len(clamp) == 2 and clamp[0] < clamp[1]):
        raise ValueError(f"clamp: expected (low, high) with low < high, or None, got {clamp!r}")
    if clamp is not None and (float(x.min()) < clamp[0] or float(x.max()) > clamp[1]):
        raise ValueError(f"x0: the ascent starts in its clamp box [{clamp[0]:g}, {clamp[1]:g}] (a Metta sample "
                         f"of U), got values {float(x.min()):g}..{float(x.max()):g}; rescale x0 or pass clamp=None")
    rows = torch.arange(x.shape[0], device=x.device)
    for _ in range(steps):
        x.requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(model(x)[rows, c].sum(), x)
        with torch.no_grad():
            x = x + eta * grad
            if clamp is not None:
                x = x.clamp(*clamp)
    return x.detach()
