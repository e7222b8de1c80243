"""Frozen-encoder probes: a standardised multinomial logistic regression on few labels."""

from __future__ import annotations


import torch
import torch.nn.functional as F

from companion.validation import as_nonnegative, as_positive_int

from .methods import occlusion_views
from .vit import TinyViT, check_images

__all__ = ["extract", "extract_pools", "extract_views", "linear_probe", "few_shot_split"]


@torch.no_grad()
def _check_vit(vit) -> None:
    if not isinstance(vit, TinyViT):
        raise ValueError(f"vit: expected a TinyViT encoder, got {type(vit).__name__}")


def extract(vit: TinyViT, x: torch.Tensor, pool: str = "cls", batch: int = 512) -> torch.Tensor:
    """Features ``[N, D]`` of full, unmasked images ``x`` ``[N, 1, H, W]`` (eval mode)."""
    _check_vit(vit)
    x = check_images(x, "x", vit.patch)
    was_training = vit.training
    vit.eval()
    out = torch.cat([vit.features(x[i:i + batch], pool) for i in range(0, len(x), batch)])
    vit.train(was_training)
    return out


@torch.no_grad()
def extract_pools(vit: TinyViT, x: torch.Tensor, batch: int = 512) -> dict[str, torch.Tensor]:
    """Both features of full images in one pass: ``{"cls": [N, D], "mean": [N, D]}``."""
    _check_vit(vit)
    x = check_images(x, "x", vit.patch)
    was_training = vit.training
    vit.eval()
    h = torch.cat([vit.encode(vit.tokens(x[i:i + batch])) for i in range(0, len(x), batch)])
    vit.train(was_training)
    return {"cls": h[:, 0], "mean": h[:, 1:].mean(1)}


@torch.no_grad()
def extract_views(vit: TinyViT, x: torch.Tensor, mask_ratio: float, seed: int = 0) -> torch.Tensor:
    """Features as OCL trains on them: the mean of the CLS outputs of the two occluded views
    of eq. (ocl-views), ``[N, D]``; compared with :func:`extract`, it shows how much a probe on
    full images loses to the change of sequence length (9 tokens in training, 65 here)."""
    _check_vit(vit)
    x = check_images(x, "x", vit.patch)
    was_training = vit.training
    vit.eval()
    view_a, view_b, _, _ = occlusion_views(vit.tokens(x), mask_ratio,
                                           torch.Generator().manual_seed(seed))
    z = vit.encode(torch.cat([view_a, view_b]))[:, 0]
    vit.train(was_training)
    return 0.5 * (z[: len(x)] + z[len(x):])


def few_shot_split(y: torch.Tensor, shots: int, seed: int = 0) -> torch.Tensor:
    """Indices of ``shots`` random examples of every class in ``y`` (seeded)."""
    as_positive_int(shots, "shots")
    g = torch.Generator().manual_seed(seed)
    picks = []
    for c in torch.unique(y):
        members = torch.nonzero(y == c).flatten()
        if len(members) < shots:
            raise ValueError(f"shots: class {int(c)} has only {len(members)} examples, "
                             f"fewer than {shots}")
        picks.append(members[torch.randperm(len(members), generator=g)[:shots]])
    return torch.cat(picks)


def linear_probe(f_tr: torch.Tensor, y_tr: torch.Tensor, f_te: torch.Tensor,
                 y_te: torch.Tensor, l2: float = 1e-3, iters: int = 100) -> float:
    """Test accuracy of a multinomial logistic regression on standardised features.

    Features are standardised with the training set's mean and standard deviation; the
    weights minimise the mean cross-entropy + ``l2`` ||W||^2 by L-BFGS (``iters`` iterations).
    """
    for t, name in ((f_tr, "f_tr"), (f_te, "f_te")):
        if t.dim() != 2 or len(t) == 0:
            raise ValueError(f"{name}: expected non-empty [N, D] features, got {tuple(t.shape)}")
        if not torch.isfinite(t).all():
            raise ValueError(f"{name}: features must be finite, got NaN or inf")
    if f_te.shape[1] != f_tr.shape[1]:
        raise ValueError(f"f_te: expected {f_tr.shape[1]} features, got {f_te.shape[1]}")
    if y_tr.shape != (len(f_tr),) or y_te.shape != (len(f_te),):
        raise ValueError(f"y_tr, y_te: expected one label per feature row, got "
                         f"{tuple(y_tr.shape)} and {tuple(y_te.shape)}")
    for t, name in ((y_tr, "y_tr"), (y_te, "y_te")):
        if t.dtype.is_floating_point or t.dtype == torch.bool or (len(t) and int(t.min()) < 0):
            raise ValueError(f"{name}: expected integer class labels >= 0, got dtype {t.dtype}"
                             + (f", min {t.min().item()}" if len(t) else ""))
    as_nonnegative(l2, "l2")
    as_positive_int(iters, "iters")
    mu, sd = f_tr.mean(0), f_tr.std(0) + 1e-6
    a, b = ((f_tr - mu) / sd).double(), ((f_te - mu) / sd).double()
    n_classes = int(max(y_tr.max(), y_te.max())) + 1
    W = torch.zeros(a.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W, bias], max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(a @ W + bias, y_tr) + l2 * (W ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(((b @ W + bias).argmax(1) == y_te).double().mean())
