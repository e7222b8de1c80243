"""The exercise checkers: a right answer passes, and each classic mistake is named."""

import numpy as np
import pytest

import companion.best_of_n as bon
from companion.exercises import Report
from companion.exercises import best_of_n as ex


def test_report_needs_a_check_to_pass():
    report = Report("x")
    assert not report.passed and repr(report) == "0"  # nothing checked is not a pass
    report.check(True, "")
    assert report.passed and "correct" in str(report) and repr(report) == "1"
    report.check(False, "wrong sign")
    assert not report.passed and "wrong sign" in report._repr_markdown_()


def test_estimator_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_estimator(bon.kl_estimator).passed

    def naive(eps, n):
        stay = (1 - eps) ** n
        return stay * (np.log(n) + (n - 1) * np.log(1 - eps) - (n - 1) / n) + (1 - stay) * np.log((1 - stay) / eps)

    with np.errstate(all="ignore"):
        report = ex.check_estimator(naive)
    assert not report.passed
    assert any("eps = 1 " in p for p in report.problems) and any("log1p" in p for p in report.problems)

    def wrong_sign(eps, n):
        return bon.kl_estimator(eps, n) - 2 * (1 - eps) ** n * np.log(n)

    assert "at eps = 0.001" in str(ex.check_estimator(wrong_sign))
    assert "vectorise" in str(ex.check_estimator(lambda eps, n: float(bon.kl_estimator(eps[0], n))))


def test_pmf_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_pmf(bon.best_of_n_pmf).passed

    def no_ties(probs, rewards, n):
        F = np.array([probs[rewards <= r].sum() for r in rewards])
        Fm = np.array([probs[rewards < r].sum() for r in rewards])
        return F**n - Fm**n

    report = ex.check_pmf(no_ties)
    assert any("does not" in p or "sums to" in p for p in report.problems)

    def index_order(probs, rewards, n):  # ignores the rewards: assumes answers listed in reward order
        F = np.cumsum(probs)
        return F**n - np.r_[0, F[:-1]] ** n

    assert any("reward order" in p for p in ex.check_pmf(index_order).problems)

    def first_wins(probs, rewards, n):
        return bon.best_of_n_pmf(probs, rewards, n, tie_break="index")

    assert any("splits a tied level wrongly" in p for p in ex.check_pmf(first_wins).problems)

    def mutates(probs, rewards, n):
        out = bon.best_of_n_pmf(probs, rewards, n)
        probs *= 1.0 + 1e-3
        return out

    assert any("changed its input" in p for p in ex.check_pmf(mutates).problems)


def test_win_rate_checker():
    probs, rewards = bon.uniform(100)
    n = next(k for k in range(1, 10_000) if bon.win_rate(probs, rewards, k) >= 0.99)
    good = dict(n=n, kl_true=bon.kl_best_of_n(probs, rewards, n), kl_formula=float(bon.kl_formula(n)),
                kl_rewind=float(np.log(50)))

    def answer(**change):
        return lambda: {**good, **change}

    assert ex.check_win_rate_budget(answer()).passed
    assert "n/(n+1)" in str(ex.check_win_rate_budget(answer(n=99)))
    assert "not the smallest" in str(ex.check_win_rate_budget(answer(n=n + 1)))
    assert "formula's value" in str(ex.check_win_rate_budget(answer(kl_true=good["kl_formula"])))
    assert not ex.check_win_rate_budget(answer(kl_rewind=float(np.log(100)))).passed
    assert "must return a dict" in str(ex.check_win_rate_budget(lambda: n))



def test_a_passing_report_scores_its_points_for_nbgrader():
    report = ex.check_estimator(bon.kl_estimator)
    assert report.passed and repr(report) == "2" and "2 of 2 points" in str(report)


def test_checkers_cite_the_printed_equation_numbers():
    from companion.exercises import eq

    assert eq("bon-pmf-ties") == "eq. (3)"
    with pytest.raises(ValueError, match="^label"):
        eq("no-such-equation")
    report = ex.check_pmf(lambda probs, rewards, n: np.asarray(probs) * 0 + 0.5)
    assert "eq. (" in str(report) and "bon-" not in str(report)


def test_call_number_and_call_array_take_numbers_and_name_what_is_not():
    import numpy as np
    import torch

    report = Report("Exercise X", points=1)
    assert report.call_number(lambda: torch.tensor(2.5), what="a 0-d tensor") == 2.5
    assert report.call_number(lambda: np.float64(1.0), what="a numpy float") == 1.0
    assert report.call_number(lambda: torch.ones(3), what="three values", hint="; sum them") is None
    assert "returned Tensor of shape (3,), not a single number (three values); sum them" in report.problems[-1]
    assert report.call_number(lambda: "x", what="a string") is None
    assert "returned str, not a single number (a string)" in report.problems[-1]
    np.testing.assert_array_equal(report.call_array(lambda: [1, 2], what="a list"), [1.0, 2.0])
    assert report.call_array(lambda: {"a": 1}, what="a dict") is None
    assert not report.passed and report.score == 0
