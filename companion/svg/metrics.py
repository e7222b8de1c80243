"""Fidelity and cost: PSNR and SSIM against the dense model's video, and attention FLOPs."""

from __future__ import annotations

import torch
import torch.nn.functional as F_

from companion.validation import as_float_array, as_positive_int

__all__ = ["psnr", "ssim", "attention_flops", "linear_flops"]


def _pair(a, b):
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        raise ValueError(f"b: expected a tensor of the shape of a {getattr(a, 'shape', None)}, "
                         f"got {getattr(b, 'shape', type(b))}")
    if a.ndim < 3:
        raise ValueError(f"a: expected videos [n, ..., H, W], got shape {tuple(a.shape)}")


def psnr(a: torch.Tensor, b: torch.Tensor, data_range: float = 2.0) -> torch.Tensor:
    """PSNR in dB of each video (first dimension) of ``b`` against ``a``; pixel range ``data_range``."""
    _pair(a, b)
    mse = (a.float() - b.float()).pow(2).flatten(1).mean(1)
    return 10 * torch.log10(data_range**2 / mse.clamp_min(1e-12))


def ssim(a: torch.Tensor, b: torch.Tensor, data_range: float = 2.0, window: int = 7, sigma: float = 1.5) -> torch.Tensor:
    """Mean SSIM of each video, over its frames (Gaussian window; Wang et al. 2004 constants)."""
    _pair(a, b)
    data_range = float(as_float_array(data_range, "data_range", low=0, low_open=True))
    sigma = float(as_float_array(sigma, "sigma", low=0, low_open=True))
    if as_positive_int(window, "window") % 2 == 0 or window > min(a.shape[-2:]):
        raise ValueError(f"window: expected an odd size <= the frame's {tuple(a.shape[-2:])}, got {window}")
    n = a.shape[0]
    x, y = (t.float().reshape(-1, 1, *t.shape[-2:]) for t in (a, b))
    g = torch.exp(-((torch.arange(window) - window // 2) ** 2) / (2 * sigma**2))
    w = (g[:, None] * g[None]) / g.sum() ** 2
    w = w[None, None]
    mu_x, mu_y = F_.conv2d(x, w), F_.conv2d(y, w)
    sxx = F_.conv2d(x * x, w) - mu_x**2
    syy = F_.conv2d(y * y, w) - mu_y**2
    sxy = F_.conv2d(x * y, w) - mu_x * mu_y
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    s = ((2 * mu_x * mu_y + c1) * (2 * sxy + c2)) / ((mu_x**2 + mu_y**2 + c1) * (sxx + syy + c2))
    return s.reshape(n, -1).mean(1)


def attention_flops(n: int, heads: int, head_dim: int, density: float = 1.0, batch: int = 1) -> float:
    """FLOPs of one attention layer: ``4 B H N^2 D`` (QK^T and PV, two FLOPs per multiply-add), times density."""
    n, heads, head_dim, batch = (as_positive_int(x, name) for x, name in
                                 ((n, "n"), (heads, "heads"), (head_dim, "head_dim"), (batch, "batch")))
    density = float(as_float_array(density, "density", low=0, high=1))
    return 4.0 * batch * heads * n * n * head_dim * density


def linear_flops(n: int, width: int, mlp_ratio: float = 4.0, batch: int = 1) -> float:
    """FLOPs of the projections of one block: QKV and output (4 d^2) and the MLP (2 r d^2) per token."""
    n, width, batch = (as_positive_int(x, name) for x, name in ((n, "n"), (width, "width"), (batch, "batch")))
    mlp_ratio = float(as_float_array(mlp_ratio, "mlp_ratio", low=0))
    return 2.0 * batch * n * (4 + 2 * mlp_ratio) * width * width
