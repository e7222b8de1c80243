"""Exact (Fraction) checks of the best-of-n pmf and win rate against brute-force enumeration (claim B2)."""

from fractions import Fraction as Fr
from itertools import product
from math import prod

import numpy as np
import pytest

from companion import best_of_n as bon

# (probs, rewards): no ties; ties; ties with a zero-probability outcome; all tied; 5 outcomes with two tie groups
CASES = [
    ([Fr(1, 2), Fr(1, 3), Fr(1, 6)], [0, 2, 1]),
    ([Fr(1, 4), Fr(1, 4), Fr(1, 8), Fr(3, 8)], [1, 0, 1, 2]),
    ([Fr(1, 5), Fr(0), Fr(2, 5), Fr(2, 5)], [3, 3, 1, 3]),
    ([Fr(1, 3), Fr(1, 3), Fr(1, 3)], [7, 7, 7]),
    ([Fr(1, 10), Fr(2, 10), Fr(3, 10), Fr(1, 10), Fr(3, 10)], [Fr(1, 2), 0, Fr(1, 2), 2, 0]),
]
NS = [1, 2, 3, 4]


@pytest.mark.parametrize("tie_break", ["random", "index"])
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("probs, rewards", CASES)
def test_pmf_equals_brute_force_as_fractions(probs, rewards, n, tie_break):
    exact = bon.best_of_n_pmf_exact(probs, rewards, n, tie_break=tie_break)
    assert exact == bon.brute_force_pmf(probs, rewards, n, tie_break=tie_break)
    assert sum(exact) == 1
    floats = bon.best_of_n_pmf(np.array(probs, dtype=float), np.array(rewards, dtype=float), n, tie_break=tie_break)
    np.testing.assert_allclose(floats, np.array(exact, dtype=float), rtol=0, atol=1e-15)


def test_index_tie_break_gives_ties_to_the_smallest_index():
    probs, rewards = [Fr(1, 3)] * 3, [0, 0, 0]
    assert bon.brute_force_pmf(probs, rewards, 2, tie_break="index") == [Fr(5, 9), Fr(3, 9), Fr(1, 9)]
    assert bon.best_of_n_pmf_exact(probs, rewards, 2, tie_break="index") == [Fr(5, 9), Fr(3, 9), Fr(1, 9)]
    assert bon.best_of_n_pmf_exact(probs, rewards, 2, tie_break="random") == [Fr(1, 3)] * 3


def _brute_force_win_rate(probs, rewards, n, tie_credit):
    """E[1{r(Y*) > r(Z)} + tie_credit 1{r(Y*) = r(Z)}] by enumerating (y_1..y_n, z)."""
    total = Fr(0)
    for *draws, z in product(range(len(probs)), repeat=n + 1):
        best = max(rewards[i] for i in draws)
        credit = 1 if best > rewards[z] else tie_credit if best == rewards[z] else 0
        total += credit * prod(probs[i] for i in (*draws, z))
    return total


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("probs, rewards", CASES)
def test_win_rate_exact(probs, rewards, n):
    w = bon.win_rate_exact(probs, rewards, n)
    assert w == _brute_force_win_rate(probs, rewards, n, Fr(1, 2))
    assert w <= Fr(n, n + 1)
    assert bon.win_rate_exact(probs, rewards, n, ties="lose") == _brute_force_win_rate(probs, rewards, n, 0)
    p, r = np.array(probs, dtype=float), np.array(rewards, dtype=float)
    assert bon.win_rate(p, r, n) == pytest.approx(float(w), abs=1e-15)


def test_brute_force_refuses_more_than_1e5_tuples():
    with pytest.raises(ValueError, match=r"^n: .*6\*\*7"):
        bon.brute_force_pmf([Fr(1, 6)] * 6, range(6), 7)  # 6**7 = 279936
    with pytest.raises(ValueError, match=r"^n: .*317\*\*2"):
        bon.brute_force_pmf([Fr(1, 317)] * 317, range(317), 2)  # 100489, just above the limit


@pytest.mark.parametrize(
    "probs, match",
    [([], "^probs"), ([Fr(1, 2), Fr(1, 4)], r"^probs: .*sum"), ([Fr(3, 2), Fr(-1, 2)], "^probs"), ([[1]], "^probs")],
)
def test_exact_bad_probs(probs, match):
    with pytest.raises(ValueError, match=match):
        bon.best_of_n_pmf_exact(probs, list(range(len(probs))), 2)


def test_exact_bad_rewards_and_n():
    with pytest.raises(ValueError, match="^rewards"):
        bon.brute_force_pmf([Fr(1, 2), Fr(1, 2)], [0], 2)
    with pytest.raises(ValueError, match="^rewards"):
        bon.win_rate_exact([Fr(1, 2), Fr(1, 2)], [0, float("nan")], 2)
    for n in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="^n"):
            bon.win_rate_exact([Fr(1, 2), Fr(1, 2)], [0, 1], n)
    with pytest.raises(ValueError, match="^tie_break"):
        bon.best_of_n_pmf_exact([Fr(1)], [0], 2, tie_break="first")
