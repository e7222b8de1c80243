"""What the chapter measures: the paper's occupancy and purity factors, and out-of-distribution
scores (the Metta probability, and the baselines max-softmax and a Gaussian density)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import logsumexp
from scipy.stats import rankdata
from torch import nn

from companion.validation import as_finite_tensor, as_index_tensor, as_positive_int

__all__ = ["predict", "occupancy_factor", "purity_factors", "auroc", "max_softmax", "metta_probability",
           "GaussianDensity"]


def _logits(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    X = as_finite_tensor(X, "X", ndim=2, floating=True)
    with torch.no_grad():
        return model(X)


def predict(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """The predicted label ``argmax_j f_j(x)`` of each row of ``X`` (over all outputs, Metta included);
    ``(N,)`` for one net, ``(S, N)`` for an ensemble (as for the scores below)."""
    return _logits(model, X).argmax(-1)


def occupancy_factor(pred: torch.Tensor, metta_label: int) -> float:
    """OF, eq. (metta-occupancy): the share of fresh Metta samples predicted as a real class.

    ``pred`` holds the predicted labels of Metta samples; for a net without a Metta output every
    prediction is a real class and OF = 1.
    """
    metta_label = as_positive_int(metta_label, "metta_label", minimum=0)
    pred = _as_pred(pred, metta_label)
    return float((pred != metta_label).double().mean())


def purity_factors(pred: torch.Tensor, y: torch.Tensor, n_classes: int) -> torch.Tensor:
    """PF_k, eq. (metta-purity): the precision of each real class k on real test points (labels
    ``0..K-1``) together with Metta test points (label ``K``). NaN where class k is never predicted."""
    n_classes = as_positive_int(n_classes, "n_classes", minimum=1)
    pred = _as_pred(pred, n_classes)
    y = as_index_tensor(y, "y", n=pred.shape[0], high=n_classes + 1)
    k = torch.arange(n_classes, device=pred.device)
    predicted = (pred[:, None] == k).double()
    hits = (predicted * (y[:, None] == k).double()).sum(0)
    count = predicted.sum(0)
    return torch.where(count > 0, hits / count.clamp(min=1), torch.full_like(count, float("nan")))


def auroc(positive, negative) -> float:
    """P(a positive scores above a negative), ties counting half (the Mann-Whitney form of the AUROC)."""
    pos, neg = _as_scores(positive, "positive"), _as_scores(negative, "negative")
    ranks = rankdata(np.concatenate([pos, neg]))
    return float((ranks[:pos.size].sum() - pos.size * (pos.size + 1) / 2) / (pos.size * neg.size))


def max_softmax(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """``max_j softmax(f(x))_j``, the classic confidence score (low means out of distribution)."""
    return _logits(model, X).softmax(-1).max(-1).values


def metta_probability(model: nn.Module, X: torch.Tensor) -> torch.Tensor:
    """``softmax(f(x))_K``, the probability a Metta net gives its Metta output (the last one)."""
    return _logits(model, X).softmax(-1)[..., -1]


class GaussianDensity:
    """The density baseline: a mixture of one Gaussian per class, weighted by class frequency, with
    Ledoit-Wolf shrunk covariances. ``log_density(X)`` is high in distribution."""

    def __init__(self, X: torch.Tensor, y: torch.Tensor, n_classes: int):
        from sklearn.covariance import LedoitWolf

        X = as_finite_tensor(X, "X", ndim=2, floating=True)
        n_classes = as_positive_int(n_classes, "n_classes", minimum=1)
        y = as_index_tensor(y, "y", n=X.shape[0], high=n_classes).cpu().numpy()
        Xn = X.detach().cpu().double().numpy()
        self.d = Xn.shape[1]
        self.parts = []
        for k in range(n_classes):
            Xk = Xn[y == k]
            if Xk.shape[0] < 2:
                raise ValueError(f"y: class {k} has {Xk.shape[0]} points; a Gaussian needs at least 2")
            cov = LedoitWolf().fit(Xk).covariance_
            sign, logdet = np.linalg.slogdet(cov)
            self.parts.append((np.log(Xk.shape[0] / Xn.shape[0]), Xk.mean(0), np.linalg.inv(cov), logdet))

    def log_density(self, X: torch.Tensor) -> np.ndarray:
        """``log sum_k pi_k N(x; mu_k, Sigma_k)`` for each row of ``X``."""
        Xn = as_finite_tensor(X, "X", shape=(None, self.d), floating=True).detach().cpu().double().numpy()
        terms = []
        for log_pi, mu, prec, logdet in self.parts:
            diff = Xn - mu
            maha = np.einsum("ni,ij,nj->n", diff, prec, diff)
            terms.append(log_pi - 0.5 * (maha + logdet + self.d * np.log(2 * np.pi)))
        return logsumexp(np.stack(terms), axis=0)


def _as_pred(pred, top: int) -> torch.Tensor:
    """Predicted labels of a net with outputs ``0..top`` (``top`` = K is the Metta label)."""
    return as_index_tensor(pred, "pred", high=top + 1)


def _as_scores(s, name: str) -> np.ndarray:
    arr = s.detach().cpu().double().numpy() if isinstance(s, torch.Tensor) else np.asarray(s, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D array of scores, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: scores must be finite, got NaN or inf")
    return arr
