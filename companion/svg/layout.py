"""The token layout of a video DiT and the layout transformation of Sparse VideoGen.

A sequence holds ``c`` condition tokens, then ``F`` frames of ``S`` tokens each, *frame-major*:
token ``c + f S + p`` is patch ``p`` of frame ``f``. The transformation to *token-major* order,
eq. (svg-perm), puts the ``F`` tokens of one spatial position next to each other,

    pi(c + f S + p) = c + p F + f,

and leaves the condition tokens where they are. A temporal head's stripes (stride ``S``) become
a band around the diagonal, which a block-sparse kernel can skip in whole blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from companion.validation import as_instance, as_positive_int

__all__ = ["VideoLayout", "token_major_perm", "to_token_major", "to_frame_major"]


@dataclass(frozen=True)
class VideoLayout:
    """``c`` condition tokens followed by ``frames`` frames of ``frame_size`` tokens (frame-major)."""

    c: int
    frames: int
    frame_size: int

    def __post_init__(self):
        as_positive_int(self.c, "c", minimum=0)  # condition tokens
        as_positive_int(self.frames, "frames")
        as_positive_int(self.frame_size, "frame_size")

    @property
    def n(self) -> int:
        """Sequence length ``N = c + F S``."""
        return self.c + self.frames * self.frame_size

    def check_length(self, n: int, name: str = "q") -> None:
        """Raise naming ``name`` when a sequence of length ``n`` does not fit this layout."""
        if n != self.n:
            raise ValueError(f"{name}: sequence length {n} does not match the layout, N = c + F*S = "
                             f"{self.c} + {self.frames}*{self.frame_size} = {self.n}")


def token_major_perm(layout: VideoLayout) -> torch.Tensor:
    """``perm`` with ``x_token_major = x_frame_major[..., perm, :]``: ``perm[pi(i)] = i``.

    Position ``c + p F + f`` of the token-major sequence holds frame-major token
    ``c + f S + p``.
    """
    as_instance(layout, "layout", VideoLayout)
    c, F, S = layout.c, layout.frames, layout.frame_size
    # row p of the (S, F) transpose lists the frames of patch p
    video = torch.arange(F * S).view(F, S).t().reshape(-1)
    return torch.cat([torch.arange(c), c + video])


def _heads(x: torch.Tensor, is_temporal, name: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.ndim != 4:
        raise ValueError(f"{name}: expected a tensor [B, H, N, D], got {getattr(x, 'shape', type(x))}")
    B, H = x.shape[:2]
    t = torch.as_tensor(is_temporal, dtype=torch.bool, device=x.device)
    if t.ndim == 0:
        t = t.expand(B, H)
    elif t.ndim == 1:
        t = t.expand(B, H) if t.shape[0] == H else t
    if t.shape != (B, H):
        raise ValueError(f"is_temporal: expected a bool per head, shape ({B}, {H}) or ({H},), got {tuple(t.shape)}")
    return t


def _permute(x, layout, is_temporal, perm, name):
    t = _heads(x, is_temporal, name)
    layout.check_length(x.shape[2], name)
    return torch.where(t[..., None, None], x[:, :, perm.to(x.device)], x)


def to_token_major(x: torch.Tensor, layout: VideoLayout, is_temporal=True) -> torch.Tensor:
    """Permute the rows of the temporal heads of ``x`` [B, H, N, D] to token-major order."""
    return _permute(x, layout, is_temporal, token_major_perm(layout), "x")


def to_frame_major(x: torch.Tensor, layout: VideoLayout, is_temporal=True) -> torch.Tensor:
    """The inverse of :func:`to_token_major` (rows of the temporal heads back to frame-major order)."""
    return _permute(x, layout, is_temporal, torch.argsort(token_major_perm(layout)), "x")
