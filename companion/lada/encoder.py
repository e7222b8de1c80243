"""The frozen image encoder E of the LADA chapter, the book-scale stand-in for CLIP's.

:class:`GlyphCNN` is a four-convolution network with a 128-d feature ``v = E(x)``; it is
pre-trained once on classes the stream never shows (capital letters) with a temporary linear
head, then frozen. Every method downstream sees only cached features, so no gradient ever
reaches E: LADA's efficiency argument in miniature.
"""

from __future__ import annotations

import torch
from torch import nn

from companion.validation import as_finite_tensor, as_index_tensor, as_instance, as_positive, as_positive_int

__all__ = ["GlyphCNN", "pretrain_encoder", "extract_features", "cache_features", "checksum"]


class GlyphCNN(nn.Module):
    """conv3x3(1->16) GELU, conv(16->16), maxpool, conv(16->32) GELU, conv(32->32), maxpool,
    flatten (32*4*4 = 512) -> linear -> ``feat_dim`` = the feature v."""

    def __init__(self, feat_dim: int = 128):
        super().__init__()
        self.feat_dim = as_positive_int(feat_dim, "feat_dim")
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.GELU(), nn.Conv2d(16, 16, 3, padding=1), nn.GELU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.GELU(), nn.Conv2d(32, 32, 3, padding=1), nn.GELU(),
            nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 4 * 4, self.feat_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or tuple(x.shape[1:]) != (1, 16, 16):
            raise ValueError(f"x: expected images of shape (N, 1, 16, 16), got {tuple(x.shape)}")
        return self.body(x)


def _check_images(x) -> None:
    """``x``: a finite float tensor of images ``(N, 1, 16, 16)``."""
    as_finite_tensor(x, "x", shape=(None, 1, 16, 16), floating=True, empty=True)


def pretrain_encoder(x: torch.Tensor, y: torch.Tensor, epochs: int = 3, seed: int = 0,
                     feat_dim: int = 128, batch: int = 128, lr: float = 1e-3) -> GlyphCNN:
    """Train E with a temporary linear head by cross-entropy (Adam), then freeze it (eval mode,
    ``requires_grad=False``) and drop the head."""
    epochs = as_positive_int(epochs, "epochs")
    batch, lr = as_positive_int(batch, "batch"), as_positive(lr, "lr")
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"x, y: expected the same non-zero length, got {len(x)} and {len(y)}")
    _check_images(x)
    as_index_tensor(y, "y")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    enc = GlyphCNN(feat_dim).to(x.device)
    head = nn.Linear(enc.feat_dim, int(y.max()) + 1).to(x.device)
    opt = torch.optim.Adam([*enc.parameters(), *head.parameters()], lr=lr)
    for _ in range(epochs):
        for idx in torch.randperm(len(x), generator=gen).split(batch):
            idx = idx.to(x.device)
            loss = nn.functional.cross_entropy(head(enc(x[idx])), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    enc.eval().requires_grad_(False)
    return enc


@torch.no_grad()
def extract_features(enc: GlyphCNN, x: torch.Tensor, batch: int = 512) -> torch.Tensor:
    """Raw (unnormalised) features v = E(x), ``(N, feat_dim)``, computed once and cached."""
    if len(x) == 0:
        raise ValueError("x: expected at least one image, got none")
    _check_images(x)
    return torch.cat([enc(x[i: i + batch]) for i in range(0, len(x), batch)])


def cache_features(enc: GlyphCNN, stream: list, device=None) -> list:
    """The stream with its images replaced by raw features E(x), computed once (no gradient), on
    ``device`` (the encoder's by default)."""
    from .data import Task

    as_instance(enc, "enc", GlyphCNN)
    if not isinstance(stream, (list, tuple)) or not all(isinstance(t, Task) for t in stream):
        raise ValueError("stream: expected a list of Task")
    device = device if device is not None else next(enc.parameters()).device
    out = []
    for t in stream:
        train_x, test_x = t.train_x.to(device), t.test_x.to(device)
        out.append(Task(t.name, t.classes, extract_features(enc, train_x), t.train_y.to(device),
                        extract_features(enc, test_x), t.test_y.to(device)))
    return out


def checksum(module_or_tensors) -> float:
    """A float fingerprint of parameters (sum of |w| plus a position-weighted sum), to show that
    nothing changed them."""
    tensors = (module_or_tensors.parameters() if isinstance(module_or_tensors, nn.Module)
               else module_or_tensors)
    total = 0.0
    for t in tensors:
        flat = t.detach().double().flatten().cpu()
        total += float(flat.abs().sum() + (flat * torch.arange(1, len(flat) + 1, dtype=torch.float64)).sum())
    return total
