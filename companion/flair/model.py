"""FLAIR's two modules and its online loop.

* the **task featurisation module** (TFM): a small regression network whose 16-d hidden layer
  is the representation ``z = M_TFM(x)`` and whose head is the cold-start predictor;
* the **dynamic decision engine** (DDE): a tiny prior-data fitted network ``q_theta(y | z, C)``
  meta-trained on random regression tasks (eq. flair-meta), which predicts from a context of
  labelled pairs in one forward pass (eq. flair-dde);
* the **context memory**: a FIFO queue of the ``m`` most recent (z, y) pairs (eq. flair-context);
* :class:`FLAIR`: predict from the memory, then push the executed result (no gradient step).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import torch
from torch import nn

from companion.validation import as_finite_tensor, as_generator, as_instance, as_positive_int

from .db import MAX_VALUE, N_COLS, ColumnHistograms, RangeQuery

__all__ = ["D_FEATURES", "featurize", "label", "TaskFeaturizer", "fit_tfm", "weighted_mse",
           "DynamicDecisionEngine", "sample_prior_batch", "meta_train", "prior_nll",
           "ContextMemory", "FLAIR"]

D_FEATURES = 3 * N_COLS + 1  # 13
_LOG_SEL_FLOOR = 1e-6


def label(card) -> np.ndarray:
    """The regression target ``y = ln(card + 1)``."""
    card = np.asarray(card, dtype=float)
    if np.any(~np.isfinite(card)) or np.any(card < 0):
        raise ValueError("card: expected finite cardinalities >= 0")
    return np.log1p(card)


def featurize(qs: list[RangeQuery], hist: ColumnHistograms, n_rows: int | None = None) -> np.ndarray:
    """Features ``[len(qs), 13]``: per column the bounds scaled to [-1, 1] (8), the log
    selectivity from the current histograms (4), and ``ln(AVI + 1) / ln N`` (1)."""
    if not isinstance(qs, (list, tuple)) or not qs or not all(isinstance(q, RangeQuery) for q in qs):
        raise ValueError("qs: expected a non-empty list of RangeQuery")
    if not isinstance(hist, ColumnHistograms):
        raise ValueError(f"hist: expected ColumnHistograms, got {type(hist).__name__}")
    n = hist.n_rows if n_rows is None else as_positive_int(n_rows, "n_rows")
    out = np.empty((len(qs), D_FEATURES))
    for i, q in enumerate(qs):
        sel = hist.selectivity(q)
        out[i, : 2 * N_COLS] = 2 * q.bounds().ravel() / MAX_VALUE - 1
        out[i, 2 * N_COLS: 3 * N_COLS] = np.log(np.maximum(sel, _LOG_SEL_FLOOR))
        out[i, -1] = np.log1p(n * np.prod(sel)) / np.log(n)
    return out


# --- the task featurisation module ---------------------------------------------------------

class TaskFeaturizer(nn.Module):
    """MLP ``13 -> 128 -> 128 -> d_z -> 1``; ``forward(x) -> (z, y_hat)``.

    Inputs are standardised with the training set's statistics (buffers set by :func:`fit_tfm`).
    """

    def __init__(self, d_in: int = D_FEATURES, d_z: int = 16, hidden: int = 128):
        super().__init__()
        self.d_in, self.d_z = as_positive_int(d_in, "d_in"), as_positive_int(d_z, "d_z")
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU(), nn.Linear(hidden, d_z), nn.ReLU())
        self.head = nn.Linear(d_z, 1)
        self.register_buffer("x_mean", torch.zeros(d_in))
        self.register_buffer("x_std", torch.ones(d_in))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"x: expected shape [B, {self.d_in}], got {tuple(x.shape)}")
        z = self.body((x - self.x_mean) / self.x_std)
        return z, self.head(z).squeeze(-1)


def weighted_mse(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """MSE with weights ``w_i = max(y_i / mean(y), 1e-3)``: large cardinalities count more."""
    if not isinstance(y, torch.Tensor) or not isinstance(pred, torch.Tensor) or y.shape != pred.shape:
        raise ValueError(f"y: expected the shape of pred {tuple(getattr(pred, 'shape', ()))}, got "
                         f"{tuple(getattr(y, 'shape', ()))}")
    w = (y / y.mean().clamp_min(1e-6)).clamp_min(1e-3)
    return (w * (pred - y) ** 2).mean()


def fit_tfm(model: TaskFeaturizer, x, y, epochs: int = 60, batch: int = 128, lr: float = 1e-3,
            seed: int = 0, standardize: bool = True) -> list[float]:
    """Train ``model`` in place with Adam on the weighted MSE; returns the loss of each epoch.

    ``standardize=False`` keeps the model's input statistics (fine-tuning a trained model).
    """
    dev = next(model.parameters()).device
    x = torch.as_tensor(np.asarray(x), dtype=torch.float32, device=dev)
    y = torch.as_tensor(np.asarray(y), dtype=torch.float32, device=dev)
    if x.ndim != 2 or x.shape[1] != model.d_in or y.shape != (len(x),) or len(x) == 0:
        raise ValueError(f"x: expected x [N, {model.d_in}] and y [N] with N >= 1, got "
                         f"{tuple(x.shape)}, {tuple(y.shape)}")
    as_finite_tensor(x, "x")  # (each argument named: NaN labels were once blamed on x)
    as_finite_tensor(y, "y")
    if standardize:
        model.x_mean.copy_(x.mean(0))
        model.x_std.copy_(x.std(0).clamp_min(1e-3) if len(x) > 1 else torch.ones_like(x[0]))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    history = []
    for _ in range(as_positive_int(epochs, "epochs")):
        perm, total = torch.randperm(len(x), generator=gen).to(dev), 0.0
        for i in range(0, len(x), batch):
            idx = perm[i: i + batch]
            loss = weighted_mse(model(x[idx])[1], y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        history.append(total / len(x))
    model.eval()
    return history


# --- the dynamic decision engine ------------------------------------------------------------

class _Layer(nn.Module):
    """Pre-norm block: the context attends to itself, each query to the context only
    (one attention module for both calls)."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(),
                                nn.Linear(2 * d_model, d_model))

    def forward(self, c: torch.Tensor, q: torch.Tensor, pad: torch.Tensor | None):
        hc, hq = self.norm1(c), self.norm1(q)
        c = c + self.attn(hc, hc, hc, key_padding_mask=pad, need_weights=False)[0]
        q = q + self.attn(hq, hc, hc, key_padding_mask=pad, need_weights=False)[0]
        return c + self.ff(self.norm2(c)), q + self.ff(self.norm2(q))


def _masked_stats(v: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std over the context axis (dim 1) of the entries where ``mask`` is True."""
    w = mask.to(v.dtype).unsqueeze(-1) if v.ndim == 3 else mask.to(v.dtype)
    n = w.sum(1, keepdim=True).clamp_min(1)
    mean = (v * w).sum(1, keepdim=True) / n
    var = (((v - mean) * w) ** 2).sum(1, keepdim=True) / n
    return mean, var.sqrt()


YJ_LAMBDAS = (-1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)  # the grid of the power transform
RIDGE_ALPHAS = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 1e3, 1e5)  # the grid of the in-context ridge


def _yeo_johnson(x: torch.Tensor, lam: float) -> torch.Tensor:
    """The Yeo-Johnson power transform with exponent ``lam`` (elementwise)."""
    pos, neg = x.clamp_min(0), (-x).clamp_min(0)
    up = torch.log1p(pos) if abs(lam) < 1e-9 else ((pos + 1) ** lam - 1) / lam
    down = torch.log1p(neg) if abs(lam - 2) < 1e-9 else ((neg + 1) ** (2 - lam) - 1) / (2 - lam)
    return torch.where(x >= 0, up, -down)


def _power_transform(cx, qx, mask):
    """Per feature, the Yeo-Johnson exponent of :data:`YJ_LAMBDAS` of highest Gaussian
    likelihood on the context, applied to context and queries (sklearn's PowerTransformer,
    which TabPFN's ensemble uses, fits it by Brent's method instead of a grid)."""
    w = mask.to(cx.dtype).unsqueeze(-1)
    n = w.sum(1, keepdim=True).clamp_min(1)
    jac = (torch.sign(cx) * torch.log1p(cx.abs()) * w).sum(1, keepdim=True)
    best_ll, best_c, best_q = None, cx, qx
    for lam in YJ_LAMBDAS:
        tc = _yeo_johnson(cx, lam)
        _, sd = _masked_stats(tc, mask)
        ll = -0.5 * n * torch.log(sd ** 2 + 1e-12) + (lam - 1) * jac
        if best_ll is None:
            best_ll, best_c, best_q = ll, tc, _yeo_johnson(qx, lam)
        else:
            better = ll > best_ll
            best_ll = torch.where(better, ll, best_ll)
            best_c = torch.where(better, tc, best_c)
            best_q = torch.where(better, _yeo_johnson(qx, lam), best_q)
    return best_c, best_q


def _soft_clip(cx, qx, mask, n_sigma: float = 4.0):
    """TabPFN's outlier handling: bounds at mean +- 4 sd of the context, re-estimated without
    the values beyond them, and values past a bound squashed logarithmically onto it."""
    mean, sd = _masked_stats(cx, mask)
    inside = mask.unsqueeze(-1) & ((cx - mean).abs() <= n_sigma * sd)
    w = inside.to(cx.dtype)
    cnt = w.sum(1, keepdim=True).clamp_min(1)
    mean = (cx * w).sum(1, keepdim=True) / cnt
    sd = ((((cx - mean) * w) ** 2).sum(1, keepdim=True) / cnt).sqrt()
    lo, hi = mean - n_sigma * sd, mean + n_sigma * sd

    def squash(v):
        v = torch.maximum(-torch.log1p(v.abs()) + lo, v)
        return torch.minimum(torch.log1p(v.abs()) + hi, v)

    return squash(cx), squash(qx)


def _check_sets(ctx_x, qry_x, mask) -> None:
    """Shapes of a batch of contexts ``[B, m, d]``, queries ``[B, n, d]`` and a bool mask ``[B, m]``."""
    if not (torch.is_tensor(ctx_x) and ctx_x.ndim == 3 and ctx_x.shape[1] > 0):
        raise ValueError(f"ctx_x: expected a tensor [B, m, d] with m >= 1, got "
                         f"{tuple(getattr(ctx_x, 'shape', ()))}")
    if not (torch.is_tensor(qry_x) and qry_x.ndim == 3 and qry_x.shape[0] == ctx_x.shape[0]
            and qry_x.shape[2] == ctx_x.shape[2]):
        raise ValueError(f"qry_x: expected a tensor [{ctx_x.shape[0]}, n, {ctx_x.shape[2]}], got "
                         f"{tuple(getattr(qry_x, 'shape', ()))}")
    if not (torch.is_tensor(mask) and mask.dtype == torch.bool and mask.shape == ctx_x.shape[:2]):
        raise ValueError(f"mask: expected a bool tensor {tuple(ctx_x.shape[:2])}, got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)} "
                         f"{tuple(getattr(mask, 'shape', ()))}")


def preprocess(ctx_x, qry_x, mask, power: bool = False):
    """The engine's input pipeline, after TabPFN's (eq. flair-dde): standardise with the
    context's statistics (clipped at +-100), drop the features that are constant in the
    context (zeroed here, which is what dropping then zero-padding gives), optionally
    apply the power transform and standardise again, squash outliers beyond 4 sd, and
    rescale by ``d / used`` so the total scale does not depend on how many features
    survive.

    Returns ``(context, queries, used)`` with ``used [B, 1, d]`` the surviving features.
    """
    _check_sets(ctx_x, qry_x, mask)
    mean, sd = _masked_stats(ctx_x, mask)
    used = sd > 1e-6 * (1 + mean.abs())
    cx = ((ctx_x - mean) / (sd + 1e-6)).clamp(-100, 100)
    qx = ((qry_x - mean) / (sd + 1e-6)).clamp(-100, 100)
    if power:
        cx, qx = _power_transform(cx, qx, mask)
        mean, sd = _masked_stats(cx, mask)
        cx, qx = (cx - mean) / (sd + 1e-6), (qx - mean) / (sd + 1e-6)
    cx, qx = _soft_clip(cx, qx, mask)
    keep = used.to(cx.dtype)
    scale = ctx_x.shape[-1] / keep.sum(-1, keepdim=True).clamp_min(1)
    cx = (cx * keep * scale).masked_fill(~mask.unsqueeze(-1), 0.0)
    return cx, qx * keep * scale, used


def ridge_loo(cx, cy, qx, mask, alphas=RIDGE_ALPHAS):
    """Ridge regression of ``cy`` on ``cx`` within each context, its penalty chosen among
    ``alphas`` by exact leave-one-out error (the hat-matrix shortcut), no penalty on the
    intercept. Returns the queries' predictions ``[B, n]`` and each context pair's
    leave-one-out prediction ``[B, m]``; masked pairs take no part."""
    _check_sets(cx, qx, mask)
    if not (torch.is_tensor(cy) and cy.shape == cx.shape[:2]):
        raise ValueError(f"cy: expected a tensor {tuple(cx.shape[:2])}, got "
                         f"{tuple(getattr(cy, 'shape', ()))}")
    B, m, d = cx.shape
    w = mask.to(torch.float64)
    A = torch.cat([cx.double(), torch.ones(B, m, 1, dtype=torch.float64, device=cx.device)], 2)
    A = A * w.unsqueeze(-1)
    Q = torch.cat([qx.double(), torch.ones(B, qx.shape[1], 1, dtype=torch.float64,
                                           device=cx.device)], 2)
    y = cy.double() * w
    AtA, Aty = A.transpose(1, 2) @ A, A.transpose(1, 2) @ y.unsqueeze(-1)
    pen = torch.ones(d + 1, dtype=torch.float64, device=cx.device)
    pen[-1] = 1e-8
    best_err = best_q = best_loo = None
    for alpha in alphas:
        K = AtA + alpha * torch.diag(pen)
        Kinv = torch.linalg.inv(K)
        coef = Kinv @ Aty
        fit = (A @ coef)[..., 0]
        h = ((A @ Kinv) * A).sum(-1).clamp(max=1 - 1e-6)
        loo = y - (y - fit) / (1 - h)
        err = (((y - loo) ** 2) * w).sum(1) / w.sum(1).clamp_min(1)
        pred = (Q @ coef)[..., 0]
        if best_err is None:
            best_err, best_q, best_loo = err, pred, loo
        else:
            better = err < best_err
            best_err = torch.where(better, err, best_err)
            best_q = torch.where(better[:, None], pred, best_q)
            best_loo = torch.where(better[:, None], loo, best_loo)
    return best_q.to(cx.dtype), best_loo.to(cx.dtype)


class DynamicDecisionEngine(nn.Module):
    """A prior-data fitted network over a set of labelled context pairs (eq. flair-dde).

    ``forward(ctx_x [B, m, d], ctx_y [B, m], qry_x [B, n, d], ctx_mask [B, m] | None)`` returns
    the predictive mean and log-variance ``[B, n]`` of each query's label. Features go through
    :func:`preprocess` (TabPFN's pipeline) and labels are standardised with the *context's*
    statistics, the output mapped back. With ``ridge_skip`` (the book's addition) the network
    predicts a correction to an in-context ridge fit (:func:`ridge_loo`): each token also
    carries the ridge prediction of its point (leave-one-out for the context), and the mean is
    ridge plus the network's output, whose last layer starts at zero. ``ensemble``: average the
    plain and the power-transformed input pipelines, as TabPFN's regression ensemble does.
    There is no positional encoding (the context is a set) and queries never attend to each
    other.
    """

    def __init__(self, d_x: int = 16, d_model: int = 64, n_layers: int = 3, n_heads: int = 4,
                 ridge_skip: bool = False, ensemble: bool = False, preprocessing: bool = True):
        super().__init__()
        self.d_x = as_positive_int(d_x, "d_x")
        if as_positive_int(d_model, "d_model") % as_positive_int(n_heads, "n_heads"):
            raise ValueError(f"d_model: expected a multiple of n_heads ({n_heads}), got {d_model}")
        self.ridge_skip, self.ensemble = bool(ridge_skip), bool(ensemble)
        self.preprocessing = bool(preprocessing)
        self.embed_x, self.embed_y = nn.Linear(d_x, d_model), nn.Linear(1, d_model)
        self.embed_p = nn.Linear(1, d_model) if self.ridge_skip else None
        self.layers = nn.ModuleList(_Layer(d_model, n_heads) for _ in range(as_positive_int(n_layers, "n_layers")))
        self.norm = nn.LayerNorm(d_model)
        self.decoder = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(), nn.Linear(2 * d_model, 2))
        if self.ridge_skip:  # start at the ridge fit
            nn.init.zeros_(self.decoder[-1].weight)
            nn.init.zeros_(self.decoder[-1].bias)
        self.power = False  # which input pipeline meta_train draws for the next step
        self.correction = True  # False: the ridge skip alone (an ablation of the network)

    def _check(self, ctx_x, ctx_y, qry_x, ctx_mask):
        if ctx_x.ndim != 3 or ctx_x.shape[2] != self.d_x:
            raise ValueError(f"ctx_x: expected shape [B, m, {self.d_x}], got {tuple(ctx_x.shape)}")
        B, m, _ = ctx_x.shape
        if m == 0:
            raise ValueError("ctx_x: the context is empty (m = 0); the engine needs labelled pairs")
        if ctx_y.shape != (B, m):
            raise ValueError(f"ctx_y: expected shape [{B}, {m}], got {tuple(ctx_y.shape)}")
        if qry_x.ndim != 3 or qry_x.shape[0] != B or qry_x.shape[2] != self.d_x:
            raise ValueError(f"qry_x: expected shape [{B}, n, {self.d_x}], got {tuple(qry_x.shape)}")
        for name, t in (("ctx_x", ctx_x), ("ctx_y", ctx_y), ("qry_x", qry_x)):
            if not torch.isfinite(t).all():
                raise ValueError(f"{name}: expected finite values (found NaN or inf)")
        if ctx_mask is None:
            return torch.ones(B, m, dtype=torch.bool, device=ctx_x.device)
        if ctx_mask.shape != (B, m) or ctx_mask.dtype != torch.bool:
            raise ValueError(f"ctx_mask: expected a bool tensor [{B}, {m}], got {ctx_mask.dtype} "
                             f"{tuple(ctx_mask.shape)}")
        if not ctx_mask.any(1).all():
            raise ValueError("ctx_mask: every task needs at least one valid context pair")
        return ctx_mask

    def _member(self, ctx_x, cy, qry_x, mask, power):
        """One input pipeline: standardised-label mean and log-variance ``[B, n]``."""
        if self.preprocessing:
            cx, qx, _ = preprocess(ctx_x, qry_x, mask, power=power)
        else:  # the first pass's engine: standardisation only
            x_mean, x_std = _masked_stats(ctx_x, mask)
            cx, qx = (ctx_x - x_mean) / (x_std + 1e-6), (qry_x - x_mean) / (x_std + 1e-6)
            cx = cx.masked_fill(~mask.unsqueeze(-1), 0.0)
        c = self.embed_x(cx) + self.embed_y(cy.unsqueeze(-1))
        q = self.embed_x(qx)
        if self.ridge_skip:
            p_q, p_c = ridge_loo(cx, cy, qx, mask)
            p_c = p_c.masked_fill(~mask, 0.0)
            c = c + self.embed_p(p_c.unsqueeze(-1))
            q = q + self.embed_p(p_q.unsqueeze(-1))
        pad = ~mask
        for layer in self.layers:
            c, q = layer(c, q, pad)
        mean_n, log_var_n = self.decoder(self.norm(q)).unbind(-1)
        if self.ridge_skip:
            mean_n = mean_n + p_q if self.correction else p_q
        return mean_n, log_var_n.clamp(-10, 10)

    def forward(self, ctx_x, ctx_y, qry_x, ctx_mask=None):
        mask = self._check(ctx_x, ctx_y, qry_x, ctx_mask)
        y_mean, y_std = _masked_stats(ctx_y, mask)
        y_std = y_std + 1e-6
        cy = ((ctx_y - y_mean) / y_std).masked_fill(~mask, 0.0)
        if self.training or not self.ensemble:
            mean_n, log_var_n = self._member(ctx_x, cy, qry_x, mask, self.power and self.preprocessing)
        else:  # the two members' mixture: its mean and variance
            (m0, v0), (m1, v1) = (self._member(ctx_x, cy, qry_x, mask, p) for p in (False, True))
            mean_n = 0.5 * (m0 + m1)
            var = 0.5 * (v0.exp() + v1.exp()) + 0.25 * (m0 - m1) ** 2
            log_var_n = var.log().clamp(-10, 10)
        return mean_n * y_std + y_mean, log_var_n + 2 * torch.log(y_std)


# --- the prior and Bayesian meta-training ----------------------------------------------------

def _prior_inputs(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """Inputs of a prior task: correlated Gaussians (1/3), a 2-5 component Gaussian mixture
    (1/3), or (1/3) the kind a ReLU featuriser emits: ``relu(u W + b)`` of a low-dimensional
    latent ``u``, sparse and with some units dead (constant) on every point."""
    u = rng.random()
    if u < 1 / 3:
        L = np.tril(rng.standard_normal((d, d)), -1) + np.eye(d)
        return rng.standard_normal((n, d)) @ L.T
    if u < 2 / 3:
        k = rng.integers(2, 6)
        centres = 2 * rng.standard_normal((k, d))
        return centres[rng.integers(k, size=n)] + 0.5 * rng.standard_normal((n, d))
    k = int(rng.integers(2, 9))
    latent = rng.standard_normal((n, k))
    h = latent @ rng.standard_normal((k, d)) + rng.normal(0, 1.5, d)
    return np.maximum(h, 0) * np.exp(rng.normal(0, 0.5, d))


def _prior_function(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """A random function: an MLP (0.3), a GP through random Fourier features (0.25), a linear
    map (dense or on three features) plus a smaller MLP (0.35), or nothing (0.1, pure noise)."""
    n, d = x.shape
    xs = (x - x.mean(0)) / (x.std(0) + 1e-6)

    def mlp():
        act = [np.tanh, lambda v: np.maximum(v, 0), np.sin][rng.integers(3)]
        w1, w2 = rng.standard_normal((d, 32)) / np.sqrt(d), rng.standard_normal(32) / np.sqrt(32)
        return act(xs @ w1 + rng.standard_normal(32)) @ w2

    u = rng.random()
    if u < 0.3:
        return mlp()
    if u < 0.55:
        ell = np.sqrt(d) * np.exp(rng.uniform(np.log(0.3), np.log(3)))
        w, b = rng.standard_normal((d, 128)) / ell, rng.uniform(0, 2 * np.pi, 128)
        return np.cos(xs @ w + b) @ rng.standard_normal(128) * np.sqrt(2 / 128)
    if u < 0.9:
        beta = rng.standard_normal(d) / np.sqrt(d)
        if rng.random() < 0.5:  # sparse: three active features
            beta[rng.choice(d, d - 3, replace=False)] = 0.0
        return xs @ beta + np.exp(rng.uniform(np.log(0.05), np.log(0.5))) * mlp()
    return np.zeros(n)


def sample_prior_batch(batch: int, n_ctx: int, n_qry: int, d: int, rng: np.random.Generator):
    """``batch`` tasks phi ~ p(phi), each with ``n_ctx + n_qry`` points ``y = f(x) + eps``.

    Returns float32 tensors ``cx [B, n_ctx, d], cy [B, n_ctx], qx [B, n_qry, d], qy [B, n_qry]``;
    the noise is ``eps ~ N(0, (s std f)^2)`` with ``s ~ LogUniform(0.01, 2)`` (unit variance
    when f is zero).
    """
    batch, n_ctx = as_positive_int(batch, "batch"), as_positive_int(n_ctx, "n_ctx")
    n_qry, d, rng = as_positive_int(n_qry, "n_qry"), as_positive_int(d, "d"), as_generator(rng)
    n = n_ctx + n_qry
    X, Y = np.empty((batch, n, d)), np.empty((batch, n))
    for b in range(batch):
        x = _prior_inputs(rng, n, d)
        f = _prior_function(rng, x)
        s = np.exp(rng.uniform(np.log(0.01), np.log(2.0)))
        scale = f.std() if f.std() > 1e-9 else 1.0
        X[b], Y[b] = x, f + s * scale * rng.standard_normal(n)
    t = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    return t(X[:, :n_ctx]), t(Y[:, :n_ctx]), t(X[:, n_ctx:]), t(Y[:, n_ctx:])


def _gaussian_nll(mean, log_var, y, scale):
    """Gaussian NLL in units of each task's label scale, so that every task weighs the same."""
    log_var_n = log_var - 2 * torch.log(scale)
    z = (y - mean) / scale
    return 0.5 * (log_var_n + z ** 2 * torch.exp(-log_var_n)).mean()


def prior_nll(dde: DynamicDecisionEngine, tasks) -> float:
    """Mean NLL of ``dde`` on prior tasks ``(cx, cy, qx, qy)`` (a validation set of the prior)."""
    as_instance(dde, "dde", DynamicDecisionEngine)
    if not isinstance(tasks, (tuple, list)) or len(tasks) != 4 or not all(isinstance(t, torch.Tensor) for t in tasks):
        raise ValueError("tasks: expected four tensors (context x, context y, query x, query y)")
    cx, cy, qx, qy = (t.to(next(dde.parameters()).device) for t in tasks)
    with torch.no_grad():
        mean, log_var = dde(cx, cy, qx)
        return float(_gaussian_nll(mean, log_var, qy, cy.std(1, keepdim=True) + 1e-6))


def meta_train(dde: DynamicDecisionEngine, steps: int, batch: int = 16, lr: float = 1e-3, seed: int = 0,
               n_ctx: tuple[int, int] = (10, 100), n_qry: int = 20, progress=None) -> list[float]:
    """Bayesian meta-training (eq. flair-meta): minimise the query NLL over tasks from the prior.

    Each step draws a context size in ``n_ctx`` and one of the two input pipelines (plain or
    power-transformed) of the engine's ensemble; AdamW with a linear warm-up and cosine decay,
    gradients clipped at 1. Returns the loss of every step.
    """
    as_instance(dde, "dde", DynamicDecisionEngine)
    steps = as_positive_int(steps, "steps")
    if not (isinstance(n_ctx, tuple) and len(n_ctx) == 2 and 1 <= n_ctx[0] <= n_ctx[1]):
        raise ValueError(f"n_ctx: expected a range (low, high) with 1 <= low <= high, got {n_ctx!r}")
    rng = np.random.default_rng(seed)
    dev = next(dde.parameters()).device
    opt = torch.optim.AdamW(dde.parameters(), lr=lr, weight_decay=1e-4)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    dde.train()
    losses = []
    it = range(steps)
    for _ in (progress(it) if progress else it):
        m = int(rng.integers(n_ctx[0], n_ctx[1] + 1))
        cx, cy, qx, qy = (t.to(dev) for t in sample_prior_batch(batch, m, n_qry, dde.d_x, rng))
        dde.power = bool(rng.random() < 0.5)  # either input pipeline of the ensemble
        mean, log_var = dde(cx, cy, qx)
        loss = _gaussian_nll(mean, log_var, qy, cy.std(1, keepdim=True) + 1e-6)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(dde.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    dde.power = False
    dde.eval()
    return losses


# --- the context memory and the online predictor ------------------------------------------------

class ContextMemory:
    """FIFO queue of the ``capacity`` most recent pairs ``(z_i, y_i)`` (eq. flair-context)."""

    def __init__(self, capacity: int = 80, d: int = 16):
        self.capacity, self.d = as_positive_int(capacity, "capacity"), as_positive_int(d, "d")
        self._z: deque = deque(maxlen=self.capacity)
        self._y: deque = deque(maxlen=self.capacity)

    def push(self, z, y: float) -> None:
        """Append a pair; the oldest one leaves when the queue is full."""
        z = np.asarray(z, dtype=np.float32)
        if z.shape != (self.d,) or not np.isfinite(z).all():
            raise ValueError(f"z: expected a finite vector of shape ({self.d},), got {z.shape}")
        if not np.isfinite(y):
            raise ValueError(f"y: expected a finite label, got {y}")
        self._z.append(z)
        self._y.append(float(y))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``Z [len, d]`` and ``Y [len]``, oldest first."""
        return (np.stack(self._z) if self._z else np.empty((0, self.d), np.float32),
                np.asarray(self._y, dtype=np.float32))

    @property
    def full(self) -> bool:
        return len(self._y) == self.capacity

    def __len__(self) -> int:
        return len(self._y)


class FLAIR:
    """In-context adaptation (eq. flair-predict): ``y_t = DDE(TFM(x_t) | C_t)``.

    :meth:`predict` uses the TFM head until the memory holds ``capacity`` pairs (cold
    start), then the DDE on the memory; :meth:`observe` pushes the executed result. No
    parameter changes online; :meth:`freeze_memory` stops the pushes (the ablation with a
    stale context). With ``offset=True`` (the book's recipe, eq. flair-offset) the engine
    regresses what the head gets wrong: the context's labels are ``y_i - head(z_i)`` and the
    prediction is ``head(z) + DDE(z | C)``; ``offset=False`` is the official loop, the engine
    on the labels themselves.
    """

    def __init__(self, tfm: TaskFeaturizer, dde: DynamicDecisionEngine,
                 capacity: int = 80, offset: bool = True):
        as_instance(tfm, "tfm", TaskFeaturizer), as_instance(dde, "dde", nn.Module)
        if dde.d_x != tfm.d_z:
            raise ValueError(f"dde: expected an engine over d_x = {tfm.d_z} "
                             f"(the TFM's z), got {dde.d_x}")
        self.tfm, self.dde = tfm.eval(), dde.eval()
        self.memory = ContextMemory(capacity, tfm.d_z)
        self.frozen, self.offset = False, bool(offset)

    def _z(self, x) -> tuple[torch.Tensor, torch.Tensor]:
        dev = next(self.tfm.parameters()).device
        x = torch.as_tensor(np.asarray(x, dtype=np.float32), device=dev).reshape(1, -1)
        return self.tfm(x)

    def engine(self, cz: torch.Tensor, cy: torch.Tensor,
               qz: torch.Tensor) -> torch.Tensor:
        """The engine's mean ``[B, n]`` for contexts ``cz [B, m, d], cy [B, m]`` and queries
        ``qz [B, n, d]``, through the head's offset when ``offset`` is set."""
        if not self.offset:
            return self.dde(cz, cy, qz)[0]
        head = lambda z: self.tfm.head(z).squeeze(-1)  # noqa: E731
        return head(qz) + self.dde(cz, cy - head(cz), qz)[0]

    @torch.no_grad()
    def predict(self, x) -> float:
        """The predicted label ``ln(card + 1)`` of one featurised query ``x [13]``."""
        z, y_head = self._z(x)
        if not self.memory.full:
            return float(y_head[0])
        cz, cy = (torch.as_tensor(a, device=z.device) for a in self.memory.arrays())
        return float(self.engine(cz[None], cy[None], z[None])[0, 0])

    @torch.no_grad()
    def observe(self, x, y: float) -> None:
        """Push the executed pair ``(TFM(x), y)`` (after predicting ``x``)."""
        if not self.frozen:
            self.memory.push(self._z(x)[0][0].cpu().numpy(), y)

    def freeze_memory(self) -> None:
        """Stop pushing: the memory keeps the pairs it holds now."""
        self.frozen = True
