"""Unit tests of companion.facttest: the index rule against exact sums, edge cases, bad input."""

import math
import warnings
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats

from companion import facttest as ft


def _v_exact(k, n0, alpha):
    """P(Bin(n0, 1 - alpha) >= k), summed term by term in Fractions."""
    a = Fraction(alpha)
    return sum(comb(n0, j) * (1 - a) ** j * a ** (n0 - j) for j in range(k, n0 + 1))


def _k_brute(n0, alpha, delta):
    """min{k : v(k) <= delta}, with v accumulated exactly from k = n0 + 1 downwards."""
    a, d = Fraction(alpha), Fraction(delta)
    tail, k = Fraction(0), n0 + 1
    for j in range(n0, 0, -1):
        tail += comb(n0, j) * (1 - a) ** j * a ** (n0 - j)
        if tail > d:
            break
        k = j
    return k


def test_violation_probability_equals_exact_binomial_sum():
    for n0 in (0, 1, 5, 17, 40):
        for k in range(1, n0 + 2):
            want = _v_exact(k, n0, Fraction(1, 10))
            assert ft.violation_probability(k, n0, 0.1) == pytest.approx(float(want), rel=1e-9, abs=1e-300)
    assert ft.violation_probability(11, 10, 0.1) == 0.0


@pytest.mark.parametrize("alpha,delta", [(0.1, 0.05), (0.05, 0.05), (0.1, 0.01), (0.25, 0.2), (0.5, 0.5)])
def test_index_equals_brute_force(alpha, delta):
    for n0 in list(range(0, 61)) + [100, 137]:
        assert ft.order_statistic_index(n0, alpha, delta) == _k_brute(n0, alpha, delta), n0


def test_worked_values_of_the_brief():
    for n0, k in [(20, 21), (29, 29), (50, 49), (100, 96), (200, 188), (1000, 916)]:
        assert ft.order_statistic_index(n0, 0.1, 0.05) == k
    assert [ft.min_null_samples(a, d) for a, d in [(0.1, 0.05), (0.1, 0.01), (0.05, 0.05), (0.05, 0.01)]] == [29, 44, 59, 90]


def test_too_few_points_gives_infinity_never_a_crash():
    for alpha, delta in [(0.1, 0.05), (0.05, 0.01), (0.3, 0.2)]:
        m = ft.min_null_samples(alpha, delta)
        for n0 in range(0, m + 3):
            k = ft.order_statistic_index(n0, alpha, delta)
            assert (k == n0 + 1) == (n0 < m)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                tau = ft.facttest_threshold(np.arange(n0, dtype=float), alpha, delta)
            assert (tau == math.inf) == (n0 < m) == bool(caught)
    with pytest.warns(UserWarning):
        f = ft.FactTest(0.1, 0.05).fit([0.1, 0.2, 0.3], [False, True, False])
    assert f.threshold_ == math.inf and not f.decide([1e300]).any()
    with pytest.warns(UserWarning):
        f = ft.FactTest(0.1, 0.05).fit([0.1, 0.2], [True, True])  # no incorrect answer at all: n0 = 0
    assert f.n0_ == 0 and f.threshold_ == math.inf


def test_an_infinite_threshold_warns_naming_n0_alpha_delta_and_the_n0_needed():
    with pytest.warns(UserWarning, match=r"^facttest_threshold: n0 = 20 .*alpha = 0.1, delta = 0.05.*n0 >= 29"):
        assert ft.facttest_threshold(np.arange(20.0), 0.1, 0.05) == math.inf
    with pytest.warns(UserWarning, match=r"^FactTest.fit: n0 = 0 .*alpha = 0.05, delta = 0.01.*n0 >= 90"):
        ft.FactTest(0.05, 0.01).fit([0.1, 0.2], [True, True])
    weights = np.r_[np.ones(10), np.full(90, 1e-9)]
    with pytest.warns(UserWarning, match=r"n0 = \d+ incorrect calibration answers \(kept by rejection sampling "
                                         r"out of 100\)"):
        f = ft.FactTest(0.1, 0.05).fit(np.arange(100.0), np.zeros(100, bool), weights=weights,
                                       rng=np.random.default_rng(0))
    assert f.n0_ == 100 and f.n0_used_ < 29 and f.threshold_ == math.inf
    with warnings.catch_warnings():  # enough null scores: silent
        warnings.simplefilter("error")
        assert ft.facttest_threshold(np.arange(29.0), 0.1, 0.05) == 28.0
        ft.FactTest(0.1, 0.05).fit(np.arange(40.0), np.zeros(40, bool))
        assert ft.order_statistic_index(5, 0.1, 0.05) == 6  # the index alone says +inf by its value


def test_index_is_monotone():
    for n0 in (30, 80, 300):
        ks = [ft.order_statistic_index(n0, 0.1, d) for d in (0.01, 0.05, 0.1, 0.3)]
        assert ks == sorted(ks, reverse=True)
        ks = [ft.order_statistic_index(n0, a, 0.05) for a in (0.05, 0.1, 0.2)]
        assert ks == sorted(ks, reverse=True)
    ks = [ft.order_statistic_index(n0, 0.1, 0.05) for n0 in range(0, 400)]
    assert all(b >= a for a, b in zip(ks, ks[1:]))


def test_threshold_matches_a_downward_loop():
    """An independent version: walk k down from n0, accumulating binomial terms in log space."""
    from scipy.special import gammaln

    rng = np.random.default_rng(0)
    for n0 in (44, 120, 999):
        t = rng.normal(size=n0)
        alpha, delta = 0.1, 0.05
        total, k = 0.0, n0 + 1
        for j in range(n0, 0, -1):
            log_term = gammaln(n0 + 1) - gammaln(j + 1) - gammaln(n0 - j + 1) + j * np.log(1 - alpha) + (n0 - j) * np.log(alpha)
            if total + np.exp(log_term) > delta:
                break
            total += np.exp(log_term)
            k = j
        assert ft.facttest_threshold(t, alpha, delta) == np.sort(t)[k - 1]


def test_strict_rule_and_ties():
    f = ft.FactTest(0.1, 0.05).fit(np.r_[np.zeros(100), np.ones(10)], np.r_[np.zeros(100, bool), np.ones(10, bool)])
    assert f.threshold_ == 0.0
    assert not f.decide([0.0]).any() and f.decide([1e-12]).all()  # a tie with the threshold abstains
    d = ft.DiscreteVEScores(K=5)
    k = ft.order_statistic_index(200, 0.1, 0.05)
    strict = ft.discrete_violation_probability(d.atoms, d.null_probs, k, 200, 0.1, ">")
    ge = ft.discrete_violation_probability(d.atoms, d.null_probs, k, 200, 0.1, ">=")
    assert strict <= 0.05 < ge


def test_exact_violation_and_beta_law_in_simulation():
    rng = np.random.default_rng(0)
    g = ft.GaussianScores()
    sim = ft.simulate_violation(g, 200, 0.1, 0.05, 4000, rng)
    assert abs(sim["frequency"] - sim["v"]) < 4 * math.sqrt(sim["v"] * (1 - sim["v"]) / 4000)
    k = sim["k"]
    assert stats.kstest(sim["r0"], stats.beta(200 - k + 1, k).cdf).pvalue > 1e-3
    d = ft.DiscreteVEScores(K=5)
    for rule, op in [(">", "facttest"), (">=", "facttest>=")]:
        sim = ft.simulate_violation(d, 200, 0.1, 0.05, 4000, rng, rule=op)
        exact = ft.discrete_violation_probability(d.atoms, d.null_probs, k, 200, 0.1, rule)
        assert abs(sim["frequency"] - exact) < 4 * math.sqrt(max(exact * (1 - exact), 1e-4) / 4000)


def test_discrete_ve_law_matches_literal_sampling():
    d = ft.DiscreteVEScores(K=5)
    rng = np.random.default_rng(1)
    scores = ft.vanilla_entropy_score(d.sample_answers(20000, False, rng))
    idx = np.searchsorted(d.atoms, np.round(scores, 12))
    assert np.allclose(d.atoms[idx], scores)
    counts = np.bincount(idx, minlength=d.atoms.size)
    assert stats.chisquare(counts, 20000 * d.null_probs).pvalue > 1e-3
    assert abs(ft.DiscreteVEScores().null_probs.sum() - 1) < 1e-12


def test_shift_world_and_rejection_sampling():
    w = ft.ShiftWorld()
    x = np.linspace(0.01, 0.99, 7)
    assert np.allclose(w.ratio(x), 10 / 3 * x**2) and w.bound == pytest.approx(10 / 3)
    rng = np.random.default_rng(0)
    keep = np.mean([ft.rejection_sample(np.full(1000, 0.5), bound=2.0, rng=rng).mean() for _ in range(20)])
    assert abs(keep - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 20000)
    assert ft.rejection_sample(np.ones(50), rng=rng).all()
    xs, cs, ts = w.sample(200000, "target", rng)
    for tau in (0.5, 2.0):
        assert np.mean(ts[~cs] > tau) == pytest.approx(float(w.type1(tau, "target")), abs=5e-3)
        assert np.mean(ts[cs] <= tau) == pytest.approx(float(w.type2(tau, "target")), abs=5e-3)


def test_fit_density_ratio_recovers_the_log_ratio():
    w = ft.ShiftWorld()
    rng = np.random.default_rng(0)
    xs, xt = w.sample_x(100000, "source", rng), w.sample_x(100000, "target", rng)
    w_hat = ft.fit_density_ratio(np.log(xs), np.log(xt))
    assert w_hat.coef_ == pytest.approx([np.log(10 / 3), 2.0], abs=0.1)


def test_scores_and_error_rates():
    s = ft.vanilla_entropy_score(np.array([[1, 1, 1, 1], [1, 2, 1, 2], [0, 1, 2, 3]]))
    assert np.allclose(s, [0.0, -np.log(2), -np.log(4)])
    m = ft.error_rates([True, True, False, False, True], [True, False, False, True, True])
    assert m["type1"] == 0.5 and m["type2"] == pytest.approx(1 / 3) and m["precision"] == pytest.approx(2 / 3)
    assert m["answer_rate"] == 0.6 and m["base_accuracy"] == 0.6 and m["n0"] == 2


def test_qa_model_trains_and_answers():
    world = ft.KnowledgeWorld(n_entities=200, seed=0)
    rng = np.random.default_rng(0)
    model, losses = ft.train_fact_model(world, world.corpus(3000, rng), epochs=3, lr=1e-2, seed=0)
    assert losses[-1] < losses[0]
    e, r = world.questions(300, 0.8, rng)
    out = ft.answer_questions(model, world, e, r, rng, K=7)
    assert out["ve"].shape == (300,) and out["hidden"].shape == (300, 128) and out["correct"].mean() > 0.1
    assert np.all(out["ve"] <= 1e-12) and np.all(out["ve"] >= -np.log(7) - 1e-12)
    answer = ft.learned_abstention(out, out)
    assert answer.dtype == np.bool_ and answer.shape == (300,)
    # fitted and judged on the same answers, the detector beats answering everything
    assert out["correct"][answer].mean() > out["correct"].mean()
    with pytest.raises(ValueError, match="^cal"):
        ft.learned_abstention({"ve": out["ve"]}, out)


@pytest.mark.parametrize("call,name", [
    (lambda: ft.order_statistic_index(10, 0.0, 0.05), "alpha"),
    (lambda: ft.order_statistic_index(10, 1.0, 0.05), "alpha"),
    (lambda: ft.order_statistic_index(10, 0.1, 1.5), "delta"),
    (lambda: ft.order_statistic_index(-1, 0.1, 0.05), "n0"),
    (lambda: ft.violation_probability(12, 10, 0.1), "k"),
    (lambda: ft.FactTest(alpha=2.0), "alpha"),
    (lambda: ft.FactTest(delta=0.0), "delta"),
    (lambda: ft.FactTest().fit([], []), "scores"),
    (lambda: ft.FactTest().fit([0.1, np.nan], [True, False]), "scores"),
    (lambda: ft.FactTest().fit([0.1, np.inf], [True, False]), "scores"),
    (lambda: ft.FactTest().fit([0.1, 0.2], [True]), "correct"),
    (lambda: ft.FactTest().fit([0.1, 0.2], [0.5, 1.0]), "correct"),
    (lambda: ft.FactTest().fit([0.1, 0.2], [True, False], weights=[1.0]), "weights"),
    (lambda: ft.FactTest().fit([0.1, 0.2], [True, False], weights=[1.0, -1.0], rng=np.random.default_rng(0)), "weights"),
    (lambda: ft.FactTest().fit([0.1, 0.2], [True, False], weights=[1.0, np.nan], rng=np.random.default_rng(0)), "weights"),
    (lambda: ft.FactTest().fit([0.1, 0.2], [True, False], weights=[1.0, 1.0], rng=0), "rng"),
    (lambda: ft.FactTest().decide([0.1]), "self"),
    (lambda: ft.facttest_threshold([0.1, np.nan], 0.1, 0.05), "null_scores"),
    (lambda: ft.rejection_sample([1.0, 3.0], bound=2.0, rng=np.random.default_rng(0)), "bound"),
    (lambda: ft.error_rates([True], [True, False]), "correct"),
    (lambda: ft.vanilla_entropy_score(np.ones((3, 2))), "samples"),
    (lambda: ft.fit_density_ratio([1.0], [1.0, 2.0]), "feat_source"),
])
def test_bad_input_raises_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_simulation_in_blocks_draws_the_same_calibration_sets(monkeypatch):
    from companion.facttest import sim

    for model in (ft.GaussianScores(), ft.DiscreteVEScores(K=5)):
        whole = ft.simulate_violation(model, 200, 0.1, 0.05, 300, np.random.default_rng(3))
        monkeypatch.setattr(sim, "_BLOCK", 1000)  # 5 calibration sets per block
        blocks = ft.simulate_violation(model, 200, 0.1, 0.05, 300, np.random.default_rng(3))
        monkeypatch.undo()
        assert np.array_equal(whole["tau"], blocks["tau"]) and whole["frequency"] == blocks["frequency"]


def test_the_dkw_rank_is_valid_and_more_conservative_than_k_hat():
    for alpha, delta in [(0.1, 0.05), (0.05, 0.01), (0.2, 0.1)]:
        for n0 in (1, 10, 30, 100, 1000, 5000):
            k = ft.dkw_index(n0, alpha, delta)
            assert 1 <= k <= n0 + 1
            assert k >= ft.order_statistic_index(n0, alpha, delta)  # the exact tail is the sharper bound
            if k <= n0:  # DKW's guarantee, checked against the exact binomial tail
                assert ft.violation_probability(k, n0, alpha) <= delta
    assert ft.dkw_index(1000, 0.1, 0.05) == 939  # ceil(1000 (0.9 + sqrt(log 20 / 2000)))
    assert ft.dkw_index(0, 0.1, 0.05) == 1
    for bad, match in [(dict(n0=-1), "^n0"), (dict(alpha=1.5), "^alpha"), (dict(delta=float("nan")), "^delta")]:
        args = dict(n0=10, alpha=0.1, delta=0.05) | bad
        with pytest.raises(ValueError, match=match):
            ft.dkw_index(**args)
    sim = ft.simulate_violation(ft.GaussianScores(mu=2.0), 200, 0.1, 0.05, 500, np.random.default_rng(0), rule="dkw")
    assert sim["k"] == ft.dkw_index(200, 0.1, 0.05) and sim["frequency"] <= 0.05


_NAN, _RNG = float("nan"), np.random.default_rng(0)
FACTTEST_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: ft.DiscreteVEScores(K=1), "K"),
    (lambda: ft.DiscreteVEScores(p_correct=1.5), "p_correct"),
    (lambda: ft.FactMLP(0, 2, 3), "n_entities"),
    (lambda: ft.GaussianScores(mu=_NAN), "mu"),
    (lambda: ft.GaussianScores(p_correct=-0.1), "p_correct"),
    (lambda: ft.KnowledgeWorld(n_entities=0), "n_entities"),
    (lambda: ft.KnowledgeWorld(noise=1.5), "noise"),
    (lambda: ft.ShiftWorld(source=(0.0, 2.0)), "source"),
    (lambda: ft.ShiftWorld(slope=_NAN), "slope"),
    (lambda: ft.as_correct(np.array([0, 2, 1])), "correct"),
    (lambda: ft.discrete_violation_probability([0.0, 1.0], [0.5, 0.6], 2, 10, 0.1), "null_probs"),
    (lambda: ft.discrete_violation_probability([1.0, 0.0], [0.5, 0.5], 2, 10, 0.1), "atoms"),
    (lambda: ft.discrete_violation_probability([0.0, 1.0], [0.5, 0.5], 12, 10, 0.1), "k"),
    (lambda: ft.discrete_violation_probability([0.0, 1.0], [0.5, 0.5], 2, 10, 0.1, rule="=="), "rule"),
    (lambda: ft.logistic_regression(np.full((4, 2), _NAN), np.array([0, 1, 0, 1])), "features"),
    (lambda: ft.logistic_regression(np.zeros((4, 2)), np.array([0, 1, 0, 2])), "labels"),
    (lambda: ft.max_prob_score(np.array([[0.5, 0.6]])), "probs"),
    (lambda: ft.min_null_samples(1.5, 0.1), "alpha"),
    (lambda: ft.naive_index(2.5, 0.1), "n0"),
    (lambda: ft.naive_threshold(np.array([_NAN, 1.0]), 0.1), "null_scores"),
    (lambda: ft.predictive_entropy_score(np.array([[_NAN, 0.5]])), "probs"),
    (lambda: ft.simulate_violation(ft.GaussianScores(), 10, 0.1, 0.05, 0, _RNG), "reps"),
    (lambda: ft.simulate_violation(ft.GaussianScores(), 10, 0.1, 0.05, 5, _RNG, rule="x"), "rule"),
]


@pytest.mark.parametrize("call, name", FACTTEST_BAD_INPUTS)
def test_every_function_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


FACTTEST_MORE_BAD_INPUTS = [
    (lambda: ft.answer_questions("model", None, None, None, _RNG), "model"),
    (lambda: ft.train_fact_model("world", []), "world"),
]


@pytest.mark.parametrize("call, name", FACTTEST_MORE_BAD_INPUTS)
def test_facttest_qa_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
