"""The FactTest exercise checkers: a right answer passes with its points, each classic mistake is
named, a stub is reported as not done with score 0, and the messages cite the printed equations."""

import numpy as np
import pytest

from companion import facttest as ft
from companion.exercises import eq
from companion.exercises import facttest as ex


def _stub(*args):
    raise NotImplementedError()


def _counterexample():
    return dict(atoms=[0.0, 1.0, 2.0], probs=[0.65, 0.3, 0.05], n0=100)


def _strict(scores, tau):
    return np.asarray(scores) > tau


def _shifted(s, c, w, B, a, d, rng):
    return ft.FactTest(a, d).fit(s, c, weights=w, bound=B, rng=rng).threshold_


def test_index_checker_passes_the_package_and_names_mistakes():
    report = ex.check_index(ft.order_statistic_index)
    assert report.passed and repr(report) == "2" and "2 of 2 points" in str(report)
    assert "1-based rank" in str(ex.check_index(lambda n0, a, d: ft.order_statistic_index(n0, a, d) - 1))
    assert "ignores delta" in str(ex.check_index(lambda n0, a, d: ft.naive_index(n0, a)))
    assert "not n0" in str(ex.check_index(lambda n0, a, d: min(ft.order_statistic_index(n0, a, d), n0)))
    assert "Bin(n0, 1 - alpha)" in str(ex.check_index(lambda n0, a, d: ex._first_k(n0, a, d)))

    def crashes(n0, a, d):  # the first k whose tail is small enough, searched only up to n0
        return [k for k in range(1, n0 + 1) if ft.violation_probability(k, n0, a) <= d][0]

    text = str(ex.check_index(crashes))
    assert "raised IndexError" in text and "n0 + 1" in text
    text = str(ex.check_index(lambda n0, a, d: ft.order_statistic_index(n0, a, d / 2)))
    assert "cases wrong" in text and "expected" in text
    assert "return an int" in str(ex.check_index(lambda n0, a, d: float(ft.order_statistic_index(n0, a, d))))
    assert "forget `return`" in str(ex.check_index(lambda n0, a, d: None))


def test_ties_checker_passes_a_right_answer_and_names_mistakes():
    report = ex.check_ties(_strict, _counterexample)
    assert report.passed and repr(report) == "2"
    d = ft.DiscreteVEScores(K=5)
    assert ex.check_ties(_strict, lambda: dict(atoms=d.atoms, probs=d.null_probs, n0=200)).passed
    assert "must abstain" in str(ex.check_ties(lambda s, t: np.asarray(s) >= t, _counterexample))
    assert "bool array" in str(ex.check_ties(lambda s, t: (np.asarray(s) > t).astype(int), _counterexample))
    weak = dict(atoms=np.arange(1000.0), probs=np.full(1000, 1e-3), n0=200)
    assert "no counterexample" in str(ex.check_ties(_strict, lambda: weak))
    assert "+inf" in str(ex.check_ties(_strict, lambda: dict(atoms=d.atoms, probs=d.null_probs, n0=20)))
    assert "sum to 1" in str(ex.check_ties(_strict, lambda: dict(atoms=[0.0, 1.0], probs=[0.5, 0.6], n0=200)))
    assert "must return a dict" in str(ex.check_ties(_strict, lambda: ([0.0, 1.0], [0.5, 0.5], 200)))
    assert "distinct" in str(ex.check_ties(_strict, lambda: dict(atoms=[1.0, 1.0], probs=[0.5, 0.5], n0=200)))


def test_shift_checker_passes_the_package_and_names_mistakes():
    report = ex.check_shifted_threshold(_shifted, reps=100)
    assert report.passed and repr(report) == "2"

    def plain(s, c, w, B, a, d, rng):  # ignores the weights
        return ft.facttest_threshold(s[~c], a, d)

    report = ex.check_shifted_threshold(plain, reps=100)
    assert any("*target* law" in p for p in report.problems) and any("+inf" in p for p in report.problems)

    def all_answers(s, c, w, B, a, d, rng):  # rejection sampling of every answer, right ones included
        return ft.facttest_threshold(s[rng.random(s.size) <= w / B], a, d)

    assert "incorrect answers only" in str(ex.check_shifted_threshold(all_answers, reps=100))

    def inverse(s, c, w, B, a, d, rng):  # keeps with probability min(1, 1/w): the source law, thinned the wrong way
        null, wn = s[~c], w[~c]
        return ft.facttest_threshold(null[rng.random(null.size) <= np.minimum(1, 1 / wn)], a, d)

    assert "not 1/w_i" in str(ex.check_shifted_threshold(inverse, reps=100))
    assert "not a number" in str(ex.check_shifted_threshold(lambda *args: "tau", reps=10))


@pytest.mark.parametrize("check", [
    lambda stub: ex.check_index(stub),
    lambda stub: ex.check_ties(stub, stub),
    lambda stub: ex.check_ties(_strict, stub),
    lambda stub: ex.check_shifted_threshold(stub, reps=10),
], ids=["index", "ties", "ties-half-done", "shift"])
def test_a_stub_is_reported_as_not_done_and_scores_zero(check):
    report = check(_stub)
    assert report.not_done and not report.passed and report.score == 0 and repr(report) == "0"
    assert "not done yet" in report._repr_markdown_() and "NotImplementedError" in str(report)


def test_the_ties_checker_names_the_first_stub_first():
    def decide(scores, tau):
        raise NotImplementedError()

    def tie_counterexample():
        raise NotImplementedError()

    assert "`decide` still raises" in str(ex.check_ties(decide, tie_counterexample))
    assert "`tie_counterexample` still raises" in str(ex.check_ties(_strict, tie_counterexample))


def test_points_and_equation_citations():
    assert [ex.check_index(ft.order_statistic_index).points, ex.check_ties(_strict, _counterexample).points,
            ex.check_shifted_threshold(_shifted, reps=10).points] == [2, 2, 2]
    messages = [str(ex.check_index(lambda n0, a, d: ft.naive_index(n0, a))),
                str(ex.check_ties(lambda s, t: np.asarray(s) >= t, _counterexample)),
                str(ex.check_shifted_threshold(lambda *args: 0.0, reps=10))]
    for label, text in zip(("facttest-khat", "facttest-errors", "facttest-khat"), messages):
        assert eq(label) in text and "facttest-" not in text


def test_the_checkers_export_no_solution():
    assert set(ex.__all__) == {"check_index", "check_ties", "check_shifted_threshold"}
    assert not [name for name in dir(ex) if "solution" in name.lower()]
