"""Win rate versus KL: best-of-n, rewind-and-repeat and the KL-regularised optimum.

Continuous curves live in quantile space (the reference is Uniform(0, 1) on the
reward quantile u); the discrete optimum tilts a finite reference, eq. (bon-tilt).
"""

from __future__ import annotations

from functools import partial
from typing import Callable

import numpy as np
from scipy.optimize import brentq
from scipy.special import logsumexp

from companion.validation import as_float_array

from .core import _levels, _reference, kl_formula, win_rate_bound

_SERIES_BELOW = 0.1  # tilt_continuous switches to its Taylor series for beta below this


def bon_continuous(n) -> tuple[np.ndarray, np.ndarray]:
    """(KL, W) = (A_n, n / (n + 1)) of best-of-n on an atomless reference; vectorised in n."""
    return kl_formula(n), win_rate_bound(n)


def rewind_repeat_continuous(m) -> tuple[np.ndarray, np.ndarray]:
    """(KL, W) = (log m, 1 - 1/(2m)) of rewind-and-repeat: resample until u > 1 - 1/m (m >= 1 real)."""
    m = as_float_array(m, "m", low=1.0)
    return np.log(m)[()], (1 - 0.5 / m)[()]


def _tilt_continuous(beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (bon-tilt) on Uniform(0, 1) without argument checks."""
    beta = np.asarray(beta, dtype=np.float64)
    x = np.minimum(beta, _SERIES_BELOW) / 2  # Taylor series in x = beta / 2 near 0 ...
    x2 = x * x
    kl_series = x2 * (1 / 6 - x2 * (1 / 60 - x2 * (1 / 567 - x2 / 5400)))
    w_series = 0.5 + x * (1 / 6 - x2 * (1 / 90 - x2 * (1 / 945 - x2 / 9450)))
    b = np.maximum(beta, _SERIES_BELOW)  # ... and the closed form elsewhere
    c = -np.expm1(-b)  # 1 - e^{-beta}
    kl_closed = np.log(b / c) - 1 + b * np.exp(-b) / c
    w_closed = 1 / c - 1 / b
    small = beta < _SERIES_BELOW
    return np.where(small, kl_series, kl_closed)[()], np.where(small, w_series, w_closed)[()]


def tilt_continuous(beta) -> tuple[np.ndarray, np.ndarray]:
    """(KL, W) of q_beta(u) = beta e^{beta u} / (e^beta - 1), eq. (bon-tilt); beta >= 0.

    W = E[u] = 1/(1 - e^{-beta}) - 1/beta; KL = log(beta/c) - 1 + beta e^{-beta}/c with
    c = 1 - e^{-beta} (the stable form of log beta - beta - log c + beta E[u]); a Taylor
    series below beta = 0.1 gives the beta -> 0 limit (KL = 0, W = 1/2) to full precision.
    """
    return _tilt_continuous(as_float_array(beta, "beta", low=0.0))


def _tilt_levels(probs, rewards) -> tuple[np.ndarray, np.ndarray]:
    """Masses pi(l) > 0 and credits G(l) = F^-(l) + pi(l)/2 of the reward levels."""
    lv = _levels(*_reference(probs, rewards))
    seen = lv.mass > 0
    return lv.mass[seen], 0.5 * (lv.cdf + lv.cdf_minus)[seen]


def _tilt_discrete(mass: np.ndarray, credit: np.ndarray, beta) -> tuple[np.ndarray, np.ndarray]:
    """(KL(q_beta || pi), E_q[G]) for q_beta(l) ∝ pi(l) e^{beta G(l)}, in log space."""
    z = np.multiply.outer(beta, credit - credit[-1])  # <= 0: the top level has the largest G
    log_norm = logsumexp(z, b=mass, axis=-1)
    q = mass * np.exp(z - log_norm[..., None])
    kl = np.maximum((q * z).sum(axis=-1) - log_norm, 0.0)  # rounding can leave -1e-16 at beta = 0
    return kl[()], (q @ credit)[()]


def tilted_policy(probs, rewards, beta) -> tuple[np.ndarray, np.ndarray]:
    """(KL, W) of the tilted policy q_beta(y) ∝ pi(y) e^{beta G(y)}, G = F^- + pi/2, eq. (bon-tilt).

    W is the half-credit win rate against pi (eq. (bon-winrate) convention); vectorised in beta >= 0.
    """
    beta = as_float_array(beta, "beta", low=0.0)
    return _tilt_discrete(*_tilt_levels(probs, rewards), beta)


def _invert(curve: Callable, kl: float, kl_max: float, w_max: float) -> float:
    """W at KL = kl on the curve beta -> (KL, W), increasing in beta >= 0 towards (kl_max, w_max)."""
    if kl >= kl_max:
        return float(w_max)

    def gap(beta: float) -> float:
        return float(curve(beta)[0]) - kl

    lo, hi = 0.0, 1.0
    while gap(hi) < 0:
        lo, hi = hi, 16 * hi
        if hi > 1e300:  # kl within rounding of kl_max
            return float(w_max)
    beta = lo if gap(lo) >= 0 else brentq(gap, lo, hi, xtol=1e-15, rtol=1e-15)
    return float(curve(beta)[1])


def optimal_win_rate_at_kl(kl, probs=None, rewards=None) -> np.ndarray:
    """max W subject to KL(q || pi) <= kl, attained by the tilt of eq. (bon-tilt); vectorised in kl.

    ``probs is None``: atomless reference (quantile space).  Otherwise the discrete
    tilt q_beta(y) ∝ pi(y) e^{beta G(y)}, G = F^- + pi/2, with beta found by Brent's
    method; kl >= log(1/pi(top level)) gives the largest win rate 1 - pi(top level)/2.
    """
    kl = as_float_array(kl, "kl", low=0.0)
    if probs is None:
        if rewards is not None:
            raise ValueError("rewards: given without probs; pass both for a discrete reference")
        curve, kl_max, w_max = _tilt_continuous, np.inf, 1.0
    else:
        mass, credit = _tilt_levels(probs, rewards)
        curve = partial(_tilt_discrete, mass, credit)
        kl_max, w_max = -np.log(mass[-1]), credit[-1]
    out = [_invert(curve, k, kl_max, w_max) for k in kl.ravel()]
    return np.array(out).reshape(kl.shape)[()]
