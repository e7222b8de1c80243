"""The Bayes-optimal predictor of regression that is linear in known features (eq. (icl-bayes)).

With prior ``W ~ N(0, tau^2 I)``, noise ``sigma`` and context features ``Phi (n, P)``, the
posterior over ``W`` is Gaussian with

    Sigma_n = sigma^2 (Phi^T Phi + (sigma^2 / tau^2) I)^{-1},   mu_n = Sigma_n Phi^T y / sigma^2,

and the predictive distribution at a query is ``N(phi(x')^T mu_n, sigma^2 + phi^T Sigma_n phi)``.
For linear regression ``phi(x) = [x, 1]`` and the prior is exact, so ``mu_n`` minimises the
expected squared error of every query: no learner can beat it on average. The form above stays
finite as ``sigma -> 0`` (it becomes least squares) and reduces to the prior with no context.
"""

from __future__ import annotations

import torch

from companion.validation import as_finite_tensor, as_positive

__all__ = ["bayes_feature_predict", "bayes_linreg_predict"]


def bayes_feature_predict(phi_c, y_c, phi_q, noise: float, prior_var: float = 1.0):
    """Posterior predictive mean ``(B, m, dy)`` and variance ``(B, m, 1)`` of eq. (icl-bayes).

    ``phi_c (B, n, P)`` and ``phi_q (B, m, P)`` are the features of the context and query
    inputs, ``y_c (B, n, dy)`` the context labels; ``n = 0`` gives the prior predictive.
    """
    phi_c, y_c, phi_q = (as_finite_tensor(t, name, ndim=3, empty=True).double()
                         for t, name in ((phi_c, "phi_c"), (y_c, "y_c"), (phi_q, "phi_q")))
    noise, prior_var = as_positive(noise, "noise"), as_positive(prior_var, "prior_var")
    B, n, P = phi_c.shape
    if y_c.shape[:2] != (B, n):
        raise ValueError(f"y_c: expected the (B, n) of phi_c {(B, n)}, got {tuple(y_c.shape)}")
    if phi_q.shape[0] != B or phi_q.shape[2] != P:
        raise ValueError(f"phi_q: expected shape ({B}, m, {P}) to match phi_c, got {tuple(phi_q.shape)}")
    if phi_q.shape[1] == 0:
        raise ValueError("phi_q: expected at least one query (m >= 1), got m = 0")
    eye = torch.eye(P, dtype=torch.float64, device=phi_c.device)
    precision = phi_c.transpose(1, 2) @ phi_c + (noise ** 2 / prior_var) * eye  # Sigma_n^-1 sigma^2
    mu = torch.linalg.solve(precision, phi_c.transpose(1, 2) @ y_c)  # (B, P, dy)
    cov = noise ** 2 * torch.linalg.inv(precision)  # Sigma_n
    mean = phi_q @ mu
    var = noise ** 2 + ((phi_q @ cov) * phi_q).sum(-1, keepdim=True)
    return mean.float(), var.float()


def bayes_linreg_predict(x_c, y_c, x_q, noise: float, prior_var: float = 1.0):
    """:func:`bayes_feature_predict` for linear regression, ``phi(x) = [x, 1]``."""
    x_c = as_finite_tensor(x_c, "x_c", ndim=3, empty=True).double()
    x_q = as_finite_tensor(x_q, "x_q", ndim=3, empty=True).double()
    if x_q.shape[0] != x_c.shape[0] or x_q.shape[2] != x_c.shape[2]:
        raise ValueError(f"x_q: expected shape ({x_c.shape[0]}, m, {x_c.shape[2]}) to match x_c, "
                         f"got {tuple(x_q.shape)}")
    if x_q.shape[1] == 0:
        raise ValueError("x_q: expected at least one query (m >= 1), got m = 0")

    def phi(x):
        return torch.cat([x, torch.ones_like(x[..., :1])], -1)

    return bayes_feature_predict(phi(x_c), y_c, phi(x_q), noise, prior_var)
