"""The paper's KL estimator from the reference probability of the selected output."""

from __future__ import annotations

import numpy as np
from scipy.special import xlogy

from companion.validation import as_1d_float_array, as_float_array, as_positive_int

from .core import TieBreak, _prepare


def _kl_hat(eps: np.ndarray, n: int) -> np.ndarray:
    """Eq. (bon-estimator) without argument checks; eps in (0, 1]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_stay = np.log1p(-eps)  # log(1 - eps); -inf at eps = 1
        stay = np.exp(n * log_stay)  # (1 - eps)^n
        move = -np.expm1(n * log_stay)  # 1 - (1 - eps)^n
        remainder = stay * (np.log(n) + (n - 1) * log_stay - (n - 1) / n)
    return np.where(stay > 0, remainder, 0.0) + xlogy(move, move / eps)


def kl_estimator(eps, n: int) -> np.ndarray:
    """KL-hat_n(eps), eq. (bon-estimator); vectorised in eps in (0, 1].

    KL-hat_n(eps) = (1-eps)^n [log n + (n-1) log(1-eps) - (n-1)/n]
                    + (1 - (1-eps)^n) log((1 - (1-eps)^n) / eps),
    the exact KL of best-of-n for one atom eps at the top reward plus an atomless
    remainder.  In [0, A_n]; exactly 0 at eps = 1.
    """
    eps = as_float_array(eps, "eps", low=0.0, high=1.0, low_open=True)
    return _kl_hat(eps, as_positive_int(n, "n"))[()]


def estimate_kl(selected_ref_probs, n: int) -> tuple[float, float]:
    """Mean and standard error of KL-hat_n(eps_m) over draws, eq. (bon-estimator).

    ``selected_ref_probs[m]`` = pi(y_m), the reference probability of the m-th
    best-of-n output (of its reward level when rewards tie).
    """
    name = "selected_ref_probs"
    eps = as_float_array(as_1d_float_array(selected_ref_probs, name), name, low=0.0, high=1.0, low_open=True)
    if eps.size < 2:
        raise ValueError(f"{name}: need at least 2 draws for a standard error, got {eps.size}")
    values = _kl_hat(eps, as_positive_int(n, "n"))
    return float(values.mean()), float(values.std(ddof=1) / np.sqrt(values.size))


def expected_estimator(probs, rewards, n: int, *, tie_break: TieBreak = "random") -> float:
    """E[KL-hat_n(eps)] with Y ~ pi^(n), exactly: sum_y pi^(n)(y) KL-hat_n(eps(y)).

    eps(y) = pi(level of y) for ``tie_break="random"`` (= pi(y) without ties);
    eps(y) = pi(y) for ``"index"``, whose levels are single outcomes.
    """
    _, lv, law = _prepare(probs, rewards, n, tie_break)
    seen = lv.mass > 0
    return float(np.dot(law[seen], _kl_hat(lv.mass[seen], int(n))))
