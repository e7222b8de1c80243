"""How the chapter measures the modality gap and the downstream task."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ._checks import as_batch, as_ids, same_rows
from ..validation import as_positive_int
from .losses import caption_logits

__all__ = ["paired_cosine", "domain_classifier_accuracy", "concentration", "caption_retrieval", "caption_accuracy"]


def paired_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean cosine between row i of ``a`` and row i of ``b`` (the paper's Table 14 measure)."""
    a, b = as_batch(a, "a"), as_batch(b, "b")
    same_rows(a, b, "a, b")
    return float(F.cosine_similarity(a, b, dim=1).mean())


def concentration(z: torch.Tensor) -> float:
    """Length of the mean of the unit vectors ``z``: 1 if they all point one way, near 0 if spread."""
    return float(F.normalize(as_batch(z, "z"), dim=1).mean(0).norm())


def caption_retrieval(z: torch.Tensor, cap: torch.Tensor, z_ref: torch.Tensor, cap_ref: torch.Tensor) -> float:
    """Share of ``z`` whose nearest caption centroid of the reference set ``z_ref`` (cosine) is their own."""
    z, z_ref = as_batch(z, "z"), as_batch(z_ref, "z_ref")
    cap, cap_ref = as_ids(cap, "cap", len(z)), as_ids(cap_ref, "cap_ref", len(z_ref))
    present = torch.unique(cap_ref)
    cents = torch.stack([z_ref[cap_ref == c].mean(0) for c in present.tolist()])
    pred = present[(F.normalize(z, dim=1) @ F.normalize(cents, dim=1).T).argmax(1)]
    return float((pred == cap).double().mean())


def domain_classifier_accuracy(z_real: torch.Tensor, z_gen: torch.Tensor, folds: int = 5, seed: int = 0) -> float:
    """Cross-validated accuracy of a logistic regression telling real from generated embeddings
    (0.5: the two are indistinguishable to a linear probe; 1: two separate clusters)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    z_real, z_gen = as_batch(z_real, "z_real"), as_batch(z_gen, "z_gen", dim=z_real.shape[1])
    folds = as_positive_int(folds, "folds", minimum=2)
    X = torch.cat([z_real, z_gen]).detach().double().cpu().numpy()
    y = np.r_[np.zeros(len(z_real)), np.ones(len(z_gen))]
    cv = StratifiedKFold(folds, shuffle=True, random_state=as_positive_int(seed, "seed", minimum=0))
    return float(cross_val_score(LogisticRegression(solver="liblinear", random_state=0), X, y, cv=cv).mean())


def caption_accuracy(head, z: torch.Tensor, cap: torch.Tensor, text_bank: torch.Tensor) -> float:
    """Share of images whose nearest caption (after ``head``; zero-shot when ``head`` is None) is theirs."""
    z = as_batch(z, "z")
    cap = as_ids(cap, "cap", len(z), n_captions=len(text_bank))
    with torch.no_grad():
        out = z if head is None else head(z)
        pred = caption_logits(out, text_bank, 0.0).argmax(1)
    return float((pred == cap).double().mean())
