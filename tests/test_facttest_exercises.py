"""The FactTest exercise checkers: a right answer passes, and each classic mistake is named."""

import numpy as np

from companion import facttest as ft
from companion.exercises import facttest as ex


def test_index_checker():
    assert ex.check_index(ft.order_statistic_index).passed
    assert "1-based" in str(ex.check_index(lambda n0, a, d: ft.order_statistic_index(n0, a, d) - 1))
    assert "ignores delta" in str(ex.check_index(lambda n0, a, d: ft.naive_index(n0, a)))
    assert "n0 + 1" in str(ex.check_index(lambda n0, a, d: min(ft.order_statistic_index(n0, a, d), n0)))
    assert "Bin(n0, 1 - alpha)" in str(ex.check_index(lambda n0, a, d: ex._first_k(n0, a, d)))

    def crashes(n0, a, d):
        return [k for k in range(1, n0 + 1) if ft.violation_probability(k, n0, a) <= d][0]

    assert "raised IndexError" in str(ex.check_index(crashes))
    assert "expected" in str(ex.check_index(lambda n0, a, d: ft.order_statistic_index(n0, a, d / 2)))


def test_tie_checkers():
    assert ex.check_decide(lambda s, t: s > t).passed
    assert "must abstain" in str(ex.check_decide(lambda s, t: s >= t))
    d = ft.DiscreteVEScores(K=5)
    assert ex.check_tie_counterexample(d.atoms, d.null_probs, 200, 0.1, 0.05).passed
    assert "+inf" in str(ex.check_tie_counterexample(d.atoms, d.null_probs, 20, 0.1, 0.05))
    assert "no counterexample" in str(ex.check_tie_counterexample(np.arange(1000.0), np.full(1000, 1e-3), 200, 0.1, 0.05))
    assert "sum to 1" in str(ex.check_tie_counterexample([0.0, 1.0], [0.5, 0.6], 200, 0.1, 0.05))


def test_shift_checker():
    def good(s, c, w, B, a, d, rng):
        return ft.FactTest(a, d).fit(s, c, weights=w, bound=B, rng=rng).threshold_

    assert ex.check_shifted_threshold(good, reps=100).passed

    def plain(s, c, w, B, a, d, rng):
        return ft.facttest_threshold(s[~c], a, d)

    report = ex.check_shifted_threshold(plain, reps=100)
    assert any("target" in p for p in report.problems) and any("+inf" in p for p in report.problems)

    def all_answers(s, c, w, B, a, d, rng):
        return ft.facttest_threshold(s[rng.random(s.size) <= w / B], a, d)

    assert "incorrect answers only" in str(ex.check_shifted_threshold(all_answers, reps=100))
