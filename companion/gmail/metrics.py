"""How the chapter measures the modality gap and the downstream task."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ._checks import as_batch, as_ids, as_int, same_rows
from .losses import caption_logits

__all__ = ["paired_cosine", "domain_classifier_accuracy", "centroid_gap", "caption_accuracy"]


def paired_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Mean cosine between row i of ``a`` and row i of ``b`` (the paper's Table 14 measure)."""
    a, b = as_batch(a, "a"), as_batch(b, "b")
    same_rows(a, b, "a, b")
    return float(F.cosine_similarity(a, b, dim=1).mean())


def centroid_gap(z_real: torch.Tensor, z_gen: torch.Tensor) -> float:
    """Distance between the mean real and the mean generated embedding."""
    z_real, z_gen = as_batch(z_real, "z_real"), as_batch(z_gen, "z_gen", dim=z_real.shape[1])
    return float((z_real.mean(0) - z_gen.mean(0)).norm())


def domain_classifier_accuracy(z_real: torch.Tensor, z_gen: torch.Tensor, folds: int = 5, seed: int = 0,
                               center: bool = False) -> float:
    """Cross-validated accuracy of a logistic regression telling real from generated embeddings
    (0.5: the two are indistinguishable to a linear probe; 1: two separate clusters). With
    ``center=True`` each set's own mean is subtracted first, so a constant offset between the two
    sets no longer counts: what is left is a difference of shape."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    z_real, z_gen = as_batch(z_real, "z_real"), as_batch(z_gen, "z_gen", dim=z_real.shape[1])
    folds = as_int(folds, "folds", minimum=2)
    X = torch.cat([z_real, z_gen]).detach().double().cpu().numpy()
    y = np.r_[np.zeros(len(z_real)), np.ones(len(z_gen))].astype(int)
    cv = StratifiedKFold(folds, shuffle=True, random_state=as_int(seed, "seed", minimum=0))
    scores = []
    for train, test in cv.split(X, y):
        Xtr, Xte = X[train].copy(), X[test].copy()
        if center:  # each set's mean from the training fold only, so no test point shifts itself
            for k in (0, 1):
                mean = Xtr[y[train] == k].mean(0)
                Xtr[y[train] == k] -= mean
                Xte[y[test] == k] -= mean
        clf = LogisticRegression(max_iter=2000).fit(Xtr, y[train])
        scores.append(clf.score(Xte, y[test]))
    return float(np.mean(scores))


def caption_accuracy(head, z: torch.Tensor, cap: torch.Tensor, text_bank: torch.Tensor) -> float:
    """Share of images whose nearest caption (after ``head``; zero-shot when ``head`` is None) is theirs."""
    z = as_batch(z, "z")
    cap = as_ids(cap, "cap", len(z), n_captions=len(text_bank))
    with torch.no_grad():
        out = z if head is None else head(z)
        pred = caption_logits(out, text_bank, 0.0).argmax(1)
    return float((pred == cap).double().mean())
