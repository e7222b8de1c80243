"""Synthetic videos for the toy video diffusion transformer: bouncing shapes over a static texture.

Each video holds one or two soft-edged squares or discs moving at constant velocity and
bouncing off the walls, over a static background: a smooth gradient plus a fixed random
texture. The two parts carry the two kinds of structure Sparse VideoGen relies on:

* the background is the same in every frame, so the best guess of a noisy background pixel is
  the same pixel in the other frames (what a *temporal* head reads);
* a shape is only where it is in this frame, and a frame-wide exposure change (``flicker``,
  one brightness offset per frame) is only visible in this frame, so the best guess of them
  comes from the rest of the frame (what a *spatial* head reads).

The label (8 classes: the first shape's type times the quadrant of its velocity) stands in for
a text prompt.
"""

from __future__ import annotations

import numpy as np
import torch

from companion.validation import as_positive_int, as_real

__all__ = ["bouncing_shapes", "N_CLASSES"]

N_CLASSES = 8
_SPEEDS = np.array([-1.5, -1.0, -0.5, 0.5, 1.0, 1.5])


def _trajectory(x0: float, v: float, lo: float, hi: float, frames: int) -> np.ndarray:
    """Positions of a point moving at speed ``v`` between walls ``lo`` and ``hi`` (elastic bounces)."""
    out = np.empty(frames)
    x = x0
    for f in range(frames):
        out[f] = x
        x += v
        if x < lo:
            x, v = 2 * lo - x, -v
        elif x > hi:
            x, v = 2 * hi - x, -v
    return out


def _texture(rng: np.random.Generator, size: int, amplitude: float) -> np.ndarray:
    """A static random texture: white noise blurred over about one pixel, scaled to ``amplitude``."""
    noise = rng.standard_normal((size, size))
    k = np.exp(-0.5 * np.arange(-2, 3) ** 2)
    k /= k.sum()
    for axis in (0, 1):  # separable blur, wrapping at the edges
        noise = sum(w * np.roll(noise, s, axis) for s, w in zip(range(-2, 3), k))
    return amplitude * noise / (noise.std() + 1e-12)


def bouncing_shapes(n: int, frames: int = 16, size: int = 16, channels: int = 1, max_shapes: int = 2,
                    texture: float = 0.15, flicker: float = 0.1,
                    seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` videos ``float32[n, frames, channels, size, size]`` in [-1, 1] and labels ``int64[n]``.

    ``texture``: standard deviation of the static background texture (in [0, 1] pixel units);
    ``flicker``: half-range of the per-frame brightness offset, drawn uniformly per frame.
    """
    n = as_positive_int(n, "n")
    frames = as_positive_int(frames, "frames")
    size = as_positive_int(size, "size", minimum=8)
    channels = as_positive_int(channels, "channels")
    max_shapes = as_positive_int(max_shapes, "max_shapes")
    for name, value in (("texture", texture), ("flicker", flicker)):
        as_real(value, name, low=0, high=0.5)  # an amplitude
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.arange(size) + 0.5, np.arange(size) + 0.5, indexing="ij")
    video = np.empty((n, frames, channels, size, size), np.float32)
    labels = np.empty(n, np.int64)
    for i in range(n):
        a = rng.uniform(-0.15, 0.15, 3)
        background = 0.3 + a[0] + a[1] * xx / size + a[2] * yy / size + _texture(rng, size, texture)
        canvas = np.broadcast_to(background, (frames, size, size))
        colour = rng.uniform(0.3, 1.0, channels) if channels > 1 else np.ones(1)
        layers = np.zeros((frames, channels, size, size))
        for s in range(rng.integers(1, max_shapes + 1)):
            disc = bool(rng.integers(2))
            half = rng.integers(2, 4) if disc else rng.integers(3, 6) / 2
            bright = rng.uniform(0.7, 1.0)
            v = rng.choice(_SPEEDS, 2)
            cx = _trajectory(rng.uniform(half, size - half), v[0], half, size - half, frames)
            cy = _trajectory(rng.uniform(half, size - half), v[1], half, size - half, frames)
            dx, dy = xx[None] - cx[:, None, None], yy[None] - cy[:, None, None]
            if disc:
                d = np.sqrt(dx**2 + dy**2) - half
            else:
                d = np.maximum(np.abs(dx), np.abs(dy)) - half
            shape = bright / (1 + np.exp(d / 0.5))
            layers = np.maximum(layers, shape[:, None] * colour[None, :, None, None])
            if s == 0:
                labels[i] = 4 * int(disc) + 2 * int(v[0] > 0) + int(v[1] > 0)
        offset = rng.uniform(-flicker, flicker, frames)[:, None, None, None]  # one exposure per frame
        video[i] = np.clip(np.maximum(canvas[:, None], layers) + offset, 0, 1) * 2 - 1
    return torch.from_numpy(video), torch.from_numpy(labels)
