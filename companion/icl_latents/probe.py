"""Linear probes of the task latent: is ``w`` linearly decodable (eq. (icl-probe))?

A ridge regression ``w ~ A z + b`` is fitted on a share of the tasks and scored on the others
by the coefficient of determination, averaged over the coordinates of ``w``:

    R^2 = mean_p [1 - sum_t (w_tp - w_hat_tp)^2 / sum_t (w_tp - mean_train(w_p))^2].

The baseline probe reads the raw context instead of ``z``: the ``n`` pairs ``(x_i, y_i)``
flattened in their sampled order.
"""

from __future__ import annotations

import torch

from companion.validation import as_nonnegative, as_positive_int

__all__ = ["collect_latents", "linear_probe", "linear_probe_r2", "raw_context_probe",
           "raw_context_probe_r2"]


@torch.no_grad()
def collect_latents(model, task, n_tasks: int, n: int, generator=None, device=None):
    """``(Z, W)``: the context encoder's ``z (n_tasks, z_dim)`` and the true ``w`` of fresh tasks."""
    if getattr(model, "context", None) is None:
        raise ValueError("model: expected an explicit model with a context encoder")
    device = device or next(model.parameters()).device
    batch = task.sample(as_positive_int(n_tasks, "n_tasks"), n, 1, generator=generator, device=device)
    model.eval()
    return model.context(batch.x_c, batch.y_c).double().cpu(), batch.w.double().cpu()


def linear_probe(Z, W, *, ridge: float = 1e-3, train_frac: float = 0.75, seed: int = 0,
                 shuffle: bool = True):
    """Fit a ridge probe ``Z -> W`` (with intercept) and score it on held-out rows, eq. (icl-probe).

    The probe is fitted on a share ``train_frac`` of the rows (a random share drawn with
    ``seed``, or the first rows if ``shuffle=False``). Returns ``(R^2, W_test, W_hat_test)``.
    """
    Z, W = torch.as_tensor(Z, dtype=torch.float64), torch.as_tensor(W, dtype=torch.float64)
    if Z.ndim != 2 or W.ndim != 2:
        raise ValueError(f"Z: expected 2-D Z (N, k) and W (N, P), got {tuple(Z.shape)}, "
                         f"{tuple(W.shape)}")
    if Z.shape[0] != W.shape[0]:
        raise ValueError(f"W: expected as many rows as Z ({Z.shape[0]}), got {W.shape[0]}")
    for name, t in (("Z", Z), ("W", W)):
        if not torch.isfinite(t).all():
            raise ValueError(f"{name}: must be finite (found NaN or inf)")
    as_nonnegative(ridge, "ridge")
    if not 0 < train_frac < 1:
        raise ValueError(f"train_frac: expected a number in (0, 1), got {train_frac!r}")
    N = Z.shape[0]
    n_train = int(round(train_frac * N))
    if n_train < 2 or N - n_train < 2:
        raise ValueError(f"Z: expected enough rows for a train/test split, got {N}")
    perm = (torch.randperm(N, generator=torch.Generator().manual_seed(seed)) if shuffle
            else torch.arange(N))
    tr, te = perm[:n_train], perm[n_train:]
    z_mu, w_mu = Z[tr].mean(0), W[tr].mean(0)
    Zc, Wc = Z[tr] - z_mu, W[tr] - w_mu
    A = torch.linalg.solve(Zc.T @ Zc + ridge * torch.eye(Z.shape[1], dtype=torch.float64),
                           Zc.T @ Wc)
    pred = (Z[te] - z_mu) @ A + w_mu
    ss_res = ((W[te] - pred) ** 2).sum(0)
    ss_tot = ((W[te] - w_mu) ** 2).sum(0)
    return float((1 - ss_res / ss_tot).mean()), W[te], pred


def linear_probe_r2(Z, W, **kw) -> float:
    """The held-out ``R^2`` of :func:`linear_probe` (same arguments)."""
    return linear_probe(Z, W, **kw)[0]


def raw_context_probe(task, n: int, n_tasks: int, generator=None, **kw):
    """The baseline: :func:`linear_probe` from the flattened raw context ``(x_i, y_i)_{i<=n}``."""
    batch = task.sample(as_positive_int(n_tasks, "n_tasks"), n, 1, generator=generator)
    raw = torch.cat([batch.x_c, batch.y_c], -1).flatten(1)
    return linear_probe(raw, batch.w, **kw)


def raw_context_probe_r2(task, n: int, n_tasks: int, generator=None, **kw) -> float:
    """The held-out ``R^2`` of :func:`raw_context_probe`."""
    return raw_context_probe(task, n, n_tasks, generator, **kw)[0]
