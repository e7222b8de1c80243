"""Unit tests of companion.best_of_n (brief §5); the Fraction checks are in test_best_of_n_exact.py."""

import numpy as np
import pytest
from scipy import integrate
from scipy.special import xlogy

from companion import best_of_n as bon
from companion.best_of_n import sampling

NS = [1, 2, 3, 5, 10, 30, 100, 1000]
GRID = np.unique(np.geomspace(1, 1e5, 60).round().astype(int))  # the chapter's n grid


def _random_refs(count, seed=0):
    rng = np.random.default_rng(seed)
    return [bon.random_reference(rng) for _ in range(count)]


def _tied_refs():
    """References with ties: rounded rewards, and the Markov LM with both rewards."""
    lm = bon.markov_lm(1.0, rng=np.random.default_rng(0))
    u = bon.uniform(100)
    rough = _random_refs(1)[0]
    return [
        (u.probs, bon.rounded_rewards(u.rewards, 7)),
        (rough.probs, bon.rounded_rewards(rough.rewards, 5)),
        (lm.probs, lm.loglik),
        (lm.probs, lm.count0),
    ]


def _all_refs():
    return [bon.uniform(10), bon.cherry_picked(), *_random_refs(3), *_tied_refs()]


# --- pmf -------------------------------------------------------------------------------


@pytest.mark.parametrize("tie_break", ["random", "index"])
def test_pmf_is_a_distribution(tie_break):
    for probs, rewards in _all_refs():
        for n in [1, 2, 7, 100, 10**4]:
            pmf = bon.best_of_n_pmf(probs, rewards, n, tie_break=tie_break)
            assert pmf.dtype == np.float64 and pmf.shape == probs.shape
            assert np.all(pmf >= 0)
            assert abs(pmf.sum() - 1) < 1e-12
            assert np.all(pmf[probs == 0] == 0)


@pytest.mark.parametrize("tie_break", ["random", "index"])
def test_n_equals_one_returns_pi(tie_break):
    for probs, rewards in _all_refs():
        np.testing.assert_allclose(bon.best_of_n_pmf(probs, rewards, 1, tie_break=tie_break), probs, rtol=0, atol=1e-15)
        assert abs(bon.kl_best_of_n(probs, rewards, 1, tie_break=tie_break)) < 1e-15


def test_level_pmf_matches_pmf_summed_over_levels():
    probs, rewards = _tied_refs()[3]  # Markov LM, reward = number of token 0 (7 levels)
    law, mass = bon.level_pmf(probs, rewards, 5)
    levels = np.unique(rewards)
    assert law.shape == mass.shape == levels.shape
    pmf = bon.best_of_n_pmf(probs, rewards, 5)
    np.testing.assert_allclose(law, [pmf[rewards == v].sum() for v in levels], atol=1e-15)
    np.testing.assert_allclose(mass, [probs[rewards == v].sum() for v in levels], atol=1e-15)
    np.testing.assert_allclose(law, np.cumsum(mass) ** 5 - np.r_[0, np.cumsum(mass)[:-1]] ** 5, atol=1e-14)


def test_index_tie_break_kl_at_least_random():
    for probs, rewards in _tied_refs():
        for n in [2, 5, 30]:
            kl_random = bon.kl_best_of_n(probs, rewards, n)
            kl_index = bon.kl_best_of_n(probs, rewards, n, tie_break="index")
            assert kl_index > kl_random + 1e-6  # strict here: every reference has tied outcomes
            for tie_break, kl in [("random", kl_random), ("index", kl_index)]:  # eq. (bon-kl) outcome by outcome
                pmf = bon.best_of_n_pmf(probs, rewards, n, tie_break=tie_break)
                seen = pmf > 0
                assert kl == pytest.approx(float(np.sum(pmf[seen] * np.log(pmf[seen] / probs[seen]))), abs=1e-12)


def test_binary_uniform_closed_forms():
    probs, rewards = [0.5, 0.5], [0.0, 1.0]
    for n in [1, 2, 10, 52, 10**4]:
        low = 0.5**n
        np.testing.assert_allclose(bon.best_of_n_pmf(probs, rewards, n), [low, 1 - low], rtol=1e-13, atol=0)
        kl = xlogy(low, 2 * low) + xlogy(1 - low, 2 * (1 - low))
        assert bon.kl_best_of_n(probs, rewards, n) == pytest.approx(kl, abs=1e-15)
        assert bon.win_rate(probs, rewards, n) == pytest.approx(low * 0.25 + (1 - low) * 0.75, abs=1e-15)
    assert bon.kl_best_of_n(probs, rewards, 10**4) == pytest.approx(np.log(2), abs=1e-15)


def test_continuous_limit():
    probs, rewards = bon.uniform(10**6)
    assert abs(bon.kl_best_of_n(probs, rewards, 10) - bon.kl_formula(10)) < 1e-9
    assert abs(bon.win_rate(probs, rewards, 10) - 10 / 11) < 1e-9


def test_large_n_is_stable():
    probs, rewards = bon.uniform(10**4)
    n = 10**5
    pmf = bon.best_of_n_pmf(probs, rewards, n)
    assert np.all(np.isfinite(pmf)) and np.all(pmf >= 0) and abs(pmf.sum() - 1) < 1e-12
    # against F^n - (F^-)^n with F = k / L, in log space (naive powers of cumsums: errors 1e-12 .. 6e-12)
    log_f = np.log1p(-np.arange(60, -1, -1) / 10**4)  # the top 60: the rest underflow
    direct = np.exp(n * log_f[1:]) * -np.expm1(n * (log_f[:-1] - log_f[1:]))
    assert direct[0] > 1e-300
    np.testing.assert_allclose(pmf[-60:], direct, rtol=2e-12)
    np.testing.assert_allclose(pmf[-2:], direct[-2:], rtol=1e-13)


# --- KL, formula, bounds ---------------------------------------------------------------

TABLE_3_3 = {  # brief §3.3, n = 2, 10, 100, 1000, 10**4
    "uniform L=10": (bon.uniform(10), [0.189, 1.361, 2.302, 2.303, 2.303]),
    "uniform L=1e3": (bon.uniform(1000), [0.193, 1.403, 3.615, 5.868, 6.907]),
    "uniform L=1e4": (bon.uniform(10**4), [0.193, 1.403, 3.615, 5.908, 8.170]),
    "binary": (bon.uniform(2), [0.131, 0.685, 0.693, 0.693, 0.693]),
    "3 atoms": (bon.cherry_picked(1e-4), [0.131, 0.686, 0.722, 1.190, 5.419]),
}


@pytest.mark.parametrize("name", TABLE_3_3)
def test_table_3_3(name):
    (probs, rewards), expected = TABLE_3_3[name]
    got = [bon.kl_best_of_n(probs, rewards, n) for n in [2, 10, 100, 1000, 10**4]]
    np.testing.assert_allclose(got, expected, rtol=0, atol=5e-4)


def test_table_3_3_formula_and_staircase_end():
    formula = bon.kl_formula(np.array([2, 10, 100, 1000, 10**4]))
    np.testing.assert_allclose(formula, [0.193, 1.403, 3.615, 5.909, 8.210], atol=5e-4)
    assert bon.kl_best_of_n(*bon.cherry_picked(), 10**5) == pytest.approx(9.209, abs=5e-4)


def test_kl_formula_closed_form():
    n = np.array([[1, 2], [3, 10**6]])
    out = bon.kl_formula(n)
    assert out.shape == (2, 2) and out[0, 0] == 0.0
    np.testing.assert_allclose(out, np.log(n) - (n - 1) / n, rtol=1e-15)
    assert isinstance(bon.kl_formula(5), np.float64)


def test_b1_bounds_on_random_references():
    for probs, rewards in _random_refs(150):
        sum_sq = np.sum(probs**2)
        assert bon.renyi2_entropy(probs) == pytest.approx(-np.log(sum_sq), rel=1e-14)
        for n in [2, 3, 5, 10, 30, 100, 1000]:
            kl, formula = bon.kl_best_of_n(probs, rewards, n), bon.kl_formula(n)
            w, w_max = bon.win_rate(probs, rewards, n), bon.win_rate_bound(n)
            assert 0 <= kl <= formula + 1e-12
            assert formula - kl <= bon.kl_gap_bound(probs, n) + 1e-12
            assert 0.5 - 1e-12 <= w <= w_max + 1e-12
            assert w_max - w <= bon.win_rate_gap_bound(probs, n) + 1e-12
    assert bon.kl_gap_bound([0.25] * 4, 3) == pytest.approx(2 * 3 * 2 * 0.25)
    assert bon.win_rate_gap_bound([0.25] * 4, 3) == pytest.approx(1 * 0.25)


def test_b4_tightness_regimes():
    assert bon.kl_formula(10) - bon.kl_best_of_n(*bon.uniform(10**4), 10) < 1e-6
    assert bon.kl_formula(10**4) - bon.kl_best_of_n(*bon.uniform(10), 10**4) > 5
    assert bon.kl_best_of_n(*bon.cherry_picked(), 1000) < 1.2 < 5.9 < bon.kl_formula(1000)


def test_win_rate_tie_conventions():
    probs, rewards = bon.cherry_picked(0.25)
    for n in [1, 3, 20]:
        law, mass = bon.level_pmf(probs, rewards, n)
        half, lose = bon.win_rate(probs, rewards, n), bon.win_rate(probs, rewards, n, ties="lose")
        assert half - lose == pytest.approx(0.5 * np.dot(law, mass), abs=1e-15)
    assert bon.win_rate(probs, rewards, 1) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("probs, rewards", [bon.cherry_picked(0.01), *_random_refs(2), *_tied_refs()[:2]])
def test_invariance_to_permutation_and_increasing_transform(probs, rewards):
    def summary(p, r, n):
        return bon.kl_best_of_n(p, r, n), bon.win_rate(p, r, n), bon.expected_estimator(p, r, n)

    perm = np.random.default_rng(0).permutation(len(probs))
    for n in [2, 17, 400]:
        base = summary(probs, rewards, n)
        for p, r in [(probs[perm], rewards[perm]), (probs, np.exp(rewards / 3) - 7), (probs, rewards**3 + 2 * rewards)]:
            np.testing.assert_allclose(summary(p, r, n), base, rtol=1e-12, atol=1e-15)
        permuted = bon.best_of_n_pmf(probs[perm], rewards[perm], n)
        np.testing.assert_allclose(permuted, bon.best_of_n_pmf(probs, rewards, n)[perm], atol=1e-16)


def test_zero_probability_outcomes_drop_out():
    probs, rewards = np.array([0.3, 0.0, 0.7, 0.0]), np.array([0.0, 5.0, 1.0, -1.0])
    for n in [1, 4, 50]:
        assert bon.best_of_n_pmf(probs, rewards, n)[[1, 3]].tolist() == [0.0, 0.0]
        for f in (bon.kl_best_of_n, bon.win_rate, bon.expected_estimator):
            assert f(probs, rewards, n) == pytest.approx(f([0.3, 0.7], [0.0, 1.0], n), abs=1e-15)


# --- estimator -------------------------------------------------------------------------


def test_estimator_bounds_monotone_and_endpoints():
    eps = np.geomspace(1e-300, 1, 20_000)
    for n in [1, 2, 3, 10, 100, 1000, 10**5, 10**9]:
        values = bon.kl_estimator(eps, n)
        assert values.shape == eps.shape
        assert np.all(values >= -1e-15) and np.all(values <= bon.kl_formula(n) + 1e-12)
        assert np.all(np.diff(values) <= 1e-12)  # non-increasing in eps
        assert values[-1] == 0.0  # exactly 0 at eps = 1
        assert values[0] == pytest.approx(bon.kl_formula(n), abs=1e-14)
    assert bon.kl_estimator(1.0, 7) == 0.0 and isinstance(bon.kl_estimator(0.5, 7), np.float64)


@pytest.mark.parametrize("eps", [1e-4, 1e-2, 0.3, 0.9])
def test_estimator_is_kl_of_atom_plus_remainder(eps):
    """KL-hat_n(eps) = exact KL for an atom eps at the top plus the remainder split into 2e5 atoms."""
    atoms = 200_000
    probs = np.r_[np.full(atoms, (1 - eps) / atoms), eps]
    rewards = np.arange(atoms + 1, dtype=float)
    for n in [1, 2, 10, 100]:
        exact = bon.kl_best_of_n(probs, rewards, n)
        # measured discretisation error: <= 1.1e-8 (n = 100, eps = 1e-4); it grows like n^2 / atoms
        assert abs(float(bon.kl_estimator(eps, n)) - exact) < 2e-8


def test_expected_estimator_tracks_exact_kl_on_the_chapter_families():
    worst = 0.0
    for probs, rewards in [*map(bon.uniform, [10, 100, 1000, 10**4]), bon.cherry_picked()]:
        for n in GRID:
            expected = bon.expected_estimator(probs, rewards, int(n))
            assert 0 <= expected <= bon.kl_formula(int(n)) + 1e-12
            worst = max(worst, abs(expected - bon.kl_best_of_n(probs, rewards, int(n))))
    assert 0.05 < worst <= 0.06  # brief: worst 0.054 (3 atoms, n = 3)
    probs, rewards = bon.cherry_picked()
    assert bon.expected_estimator(probs, rewards, 3) == pytest.approx(0.370, abs=5e-4)
    assert bon.expected_estimator(probs, rewards, 2) == pytest.approx(0.179, abs=5e-4)


def test_expected_estimator_with_ties_uses_the_level_mass():
    probs, rewards = _tied_refs()[3]
    _, mass = bon.level_pmf(probs, rewards, 1)
    collapsed = np.arange(mass.size, dtype=float)
    for n in [2, 9, 200]:
        on_levels = bon.expected_estimator(mass, collapsed, n)
        assert bon.expected_estimator(probs, rewards, n) == pytest.approx(on_levels, abs=1e-14)
        by_index = bon.best_of_n_pmf(probs, rewards, n, tie_break="index")
        assert bon.expected_estimator(probs, rewards, n, tie_break="index") == pytest.approx(
            float(np.dot(by_index, bon.kl_estimator(probs, n))), abs=1e-13
        )


def test_estimate_kl_mean_and_standard_error():
    eps = np.array([0.5, 0.1, 0.01, 1.0])
    values = bon.kl_estimator(eps, 10)
    mean, se = bon.estimate_kl(eps, 10)
    assert mean == pytest.approx(values.mean(), abs=1e-15)
    assert se == pytest.approx(values.std(ddof=1) / 2, abs=1e-15)


def test_estimator_average_from_samples_is_within_4_se_of_its_expectation():
    probs, rewards = _random_refs(1, seed=2)[0]
    draws = bon.sample_best_of_n(probs, rewards, 50, 20_000, np.random.default_rng(0))
    mean, se = bon.estimate_kl(probs[draws], 50)
    assert abs(mean - bon.expected_estimator(probs, rewards, 50)) < 4 * se


# --- Monte Carlo -----------------------------------------------------------------------

MC_REFS = {"untied": _random_refs(1, seed=3)[0], "tied": _tied_refs()[3]}


@pytest.mark.parametrize("name", MC_REFS)
def test_mc_kl_within_4_se_of_exact(name):
    probs, rewards = MC_REFS[name]
    mean, se = bon.mc_kl(probs, rewards, 8, 20_000, np.random.default_rng(0))
    assert 0 < se < 0.05
    assert abs(mean - bon.kl_best_of_n(probs, rewards, 8)) < 4 * se


@pytest.mark.parametrize("name", MC_REFS)
def test_chi2_check_accepts_the_sampler(name):
    probs, rewards = MC_REFS[name]
    assert bon.chi2_check(probs, rewards, 8, 20_000, np.random.default_rng(0)) > 1e-3


def test_chi2_check_rejects_a_wrong_sampler(monkeypatch):
    """Power check: a sampler that gives ties to the smallest index instead of breaking them at random."""
    right = sampling.sample_best_of_n

    def index_tie_break(p, r, n, size, rng):
        return right(p, np.asarray(r) - 1e-6 * np.arange(len(r)) / len(r), n, size, rng)

    monkeypatch.setattr(sampling, "sample_best_of_n", index_tie_break)
    probs, rewards = MC_REFS["tied"]
    assert bon.chi2_check(probs, rewards, 8, 20_000, np.random.default_rng(0)) < 1e-6


def test_sampler_is_reproducible_and_breaks_ties_at_random():
    probs, rewards = [0.25, 0.25, 0.5], [1.0, 1.0, 0.0]  # outcomes 0 and 1 tie at the top
    a = bon.sample_best_of_n(probs, rewards, 3, 40_000, np.random.default_rng(0))
    assert np.array_equal(a, bon.sample_best_of_n(probs, rewards, 3, 40_000, np.random.default_rng(0)))
    assert a.dtype == np.int64
    counts = np.bincount(a, minlength=3) / a.size
    np.testing.assert_allclose(counts, bon.best_of_n_pmf(probs, rewards, 3), atol=0.01)  # (0.4375, 0.4375, 0.125)


# --- trade-offs ------------------------------------------------------------------------

TABLE_3_7 = [  # n, W optimum at KL = A_n, W rewind-and-repeat at KL = A_n (brief §3.7)
    (2, 0.6759, 0.5878),
    (4, 0.8040, 0.7354),
    (16, 0.94129, 0.9202),
    (64, 0.98462, 0.97909),
    (1000, 0.99900, 0.99864),
]


@pytest.mark.parametrize("n, w_opt, w_rr", TABLE_3_7)
def test_table_3_7(n, w_opt, w_rr):
    kl, w = bon.bon_continuous(n)
    assert w == pytest.approx(n / (n + 1), abs=1e-15)
    assert bon.optimal_win_rate_at_kl(kl) == pytest.approx(w_opt, abs=5e-5)
    rr_kl, rr_w = bon.rewind_repeat_continuous(np.exp(kl))
    assert rr_kl == pytest.approx(kl, abs=1e-15)
    assert rr_w == pytest.approx(w_rr, abs=5e-5)


def test_b5_continuous_best_of_n_between_rewind_and_optimum():
    n = np.unique(np.geomspace(2, 1e4, 40).round().astype(int))
    kl, w = bon.bon_continuous(n)
    optimum = bon.optimal_win_rate_at_kl(kl)
    rewind = bon.rewind_repeat_continuous(np.exp(kl))[1]
    assert np.all(w <= optimum + 1e-12) and np.all(optimum - w < 0.01)
    assert np.all(w > rewind)


def test_tilt_continuous_against_quadrature():
    for beta in [1e-3, 0.05, 0.1, 0.5, 3.0, 40.0]:
        density = lambda u: beta * np.exp(beta * (u - 1)) / -np.expm1(-beta)  # noqa: E731
        kl = integrate.quad(lambda u: density(u) * np.log(density(u)), 0, 1, epsabs=1e-15, epsrel=1e-12)[0]
        w = integrate.quad(lambda u: u * density(u), 0, 1, epsabs=1e-15, epsrel=1e-12)[0]
        got_kl, got_w = bon.tilt_continuous(beta)
        assert got_kl == pytest.approx(kl, rel=1e-9, abs=1e-15)
        assert got_w == pytest.approx(w, rel=1e-12)


def test_tilt_continuous_limits_are_stable():
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        kl, w = bon.tilt_continuous(np.array([0.0, 1e-12, 1e6, 1e300]))
    assert kl[0] == 0.0 and w[0] == 0.5
    assert kl[1] == pytest.approx(1e-24 / 24, rel=1e-12) and w[1] == pytest.approx(0.5 + 1e-12 / 12, rel=1e-15)
    assert kl[2] == pytest.approx(np.log(1e6) - 1, rel=1e-15) and w[2] == pytest.approx(1 - 1e-6, rel=1e-15)
    assert np.isfinite(kl[3]) and w[3] == 1.0
    kl, w = bon.tilt_continuous(np.array([0.1 * (1 - 1e-15), 0.1]))  # series | closed form
    assert kl[0] == pytest.approx(kl[1], rel=1e-12) and w[0] == pytest.approx(w[1], rel=1e-15)


def _discrete_refs():
    return [bon.cherry_picked(), bon.uniform(10), *_random_refs(5, seed=1), _tied_refs()[2], _tied_refs()[3]]


def test_discrete_best_of_n_never_beats_the_tilted_optimum():
    for probs, rewards in _discrete_refs():
        ns = [1, 2, 3, 10, 100, 1000, 10**4]
        kls = np.array([bon.kl_best_of_n(probs, rewards, n) for n in ns])
        wins = np.array([bon.win_rate(probs, rewards, n) for n in ns])
        optimum = bon.optimal_win_rate_at_kl(kls, probs, rewards)
        assert np.all(wins <= optimum + 1e-12)


def test_discrete_tilt_is_inverted_correctly():
    probs, rewards = bon.cherry_picked()
    beta = np.array([0.0, 0.3, 2.0, 15.0, 80.0])
    kl, w = bon.tilted_policy(probs, rewards, beta)
    assert kl[0] == pytest.approx(0, abs=1e-15) and w[0] == pytest.approx(0.5, abs=1e-15)
    assert np.all(np.diff(kl) > 0) and np.all(np.diff(w) > 0)
    np.testing.assert_allclose(bon.optimal_win_rate_at_kl(kl[1:], probs, rewards), w[1:], rtol=1e-10)
    top = 1e-4
    kl_inf, w_inf = bon.tilted_policy(probs, rewards, 1e6)
    assert kl_inf == pytest.approx(np.log(1 / top), rel=1e-12) and w_inf == pytest.approx(1 - top / 2, rel=1e-15)
    assert bon.optimal_win_rate_at_kl(100.0, probs, rewards) == 1 - top / 2  # beyond the maximal KL


# --- families --------------------------------------------------------------------------


def test_families():
    probs, rewards = bon.uniform(5)
    assert probs.tolist() == [0.2] * 5 and rewards.tolist() == [0, 1, 2, 3, 4]
    probs, rewards = bon.cherry_picked(1e-3)
    assert probs.tolist() == [0.5, 0.5 - 1e-3, 1e-3] and rewards.tolist() == [0, 1, 2]
    rng = np.random.default_rng(0)
    sizes = []
    for _ in range(200):
        probs, rewards = bon.random_reference(rng, L_max=20)
        assert 2 <= probs.size <= 20 and abs(probs.sum() - 1) < 1e-12 and np.array_equal(rewards, np.arange(probs.size))
        sizes.append(probs.size)
    assert min(sizes) == 2 and max(sizes) == 20
    levels = bon.rounded_rewards(np.linspace(-1, 3, 101), 4)
    assert np.unique(levels).tolist() == [0, 1, 2, 3] and np.all(np.diff(levels) >= 0)


@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0])
def test_markov_lm(alpha):
    lm = bon.markov_lm(alpha, rng=np.random.default_rng(0))
    assert lm.probs.shape == (4096,) and lm.sequences.shape == (4096, 6) and lm.sequences.dtype == np.int64
    assert abs(lm.probs.sum() - 1) < 1e-12 and np.allclose(np.exp(lm.loglik), lm.probs)
    assert lm.sequences[:2].tolist() == [[0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1]]
    assert np.array_equal(lm.count0, (lm.sequences == 0).sum(axis=1))
    # exact ties: equal (first token, transition counts) <=> bit-identical log-likelihood
    pairs = lm.sequences[:, :-1] * 4 + lm.sequences[:, 1:]
    counts = np.stack([(pairs == k).sum(axis=1) for k in range(16)], axis=1)
    keys = np.column_stack([lm.sequences[:, 0], counts])
    n_keys, n_values = len(np.unique(keys, axis=0)), len(np.unique(lm.loglik))
    assert len(np.unique(np.column_stack([keys, lm.loglik]), axis=0)) == n_keys == n_values < 4096
    again = bon.markov_lm(alpha, rng=np.random.default_rng(0))
    assert np.array_equal(again.loglik, lm.loglik)


# --- bad inputs ------------------------------------------------------------------------

GOOD_P, GOOD_R = np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 2.0])
REFERENCE_FUNCTIONS = [
    lambda p, r: bon.best_of_n_pmf(p, r, 2),
    lambda p, r: bon.level_pmf(p, r, 2),
    lambda p, r: bon.kl_best_of_n(p, r, 2),
    lambda p, r: bon.win_rate(p, r, 2),
    lambda p, r: bon.expected_estimator(p, r, 2),
    lambda p, r: bon.sample_best_of_n(p, r, 2, 10, np.random.default_rng(0)),
    lambda p, r: bon.mc_kl(p, r, 2, 10, np.random.default_rng(0)),
    lambda p, r: bon.chi2_check(p, r, 2, 10, np.random.default_rng(0)),
    lambda p, r: bon.tilted_policy(p, r, 1.0),
    lambda p, r: bon.optimal_win_rate_at_kl(0.1, p, r),
]
BAD_REFERENCES = [
    ([], [], "^probs: .*empty"),
    ([0.5, 0.5], [0.0, 1.0, 2.0], "^rewards: .*same length"),
    ([[0.5, 0.5]], [[0.0, 1.0]], "^probs: .*1-D"),
    ([0.5, np.nan, 0.5], GOOD_R, "^probs: .*finite"),
    ([0.5, np.inf, 0.5], GOOD_R, "^probs: .*finite"),
    (GOOD_P, [0.0, np.nan, 1.0], "^rewards: .*finite"),
    (GOOD_P, [0.0, -np.inf, 1.0], "^rewards: .*finite"),
    ([0.6, -0.1, 0.5], GOOD_R, "^probs: .*>= 0"),
    ([0.2, 0.3, 0.6], GOOD_R, r"^probs: .*probs / probs\.sum\(\)"),
]


@pytest.mark.parametrize("probs, rewards, match", BAD_REFERENCES)
@pytest.mark.parametrize("call", REFERENCE_FUNCTIONS)
def test_bad_reference_raises_naming_the_argument(call, probs, rewards, match):
    with pytest.raises(ValueError, match=match):
        call(probs, rewards)


def test_sum_tolerance_is_1e_9():
    assert bon.kl_best_of_n([0.2, 0.3, 0.5 + 5e-10], GOOD_R, 3) >= 0
    with pytest.raises(ValueError, match="^probs"):
        bon.kl_best_of_n([0.2, 0.3, 0.5 + 5e-9], GOOD_R, 3)


N_FUNCTIONS = [
    lambda n: bon.best_of_n_pmf(GOOD_P, GOOD_R, n),
    lambda n: bon.kl_best_of_n(GOOD_P, GOOD_R, n, tie_break="index"),
    lambda n: bon.win_rate(GOOD_P, GOOD_R, n),
    lambda n: bon.expected_estimator(GOOD_P, GOOD_R, n),
    lambda n: bon.kl_estimator(0.5, n),
    lambda n: bon.estimate_kl([0.5, 0.2], n),
    lambda n: bon.kl_formula(n),
    lambda n: bon.kl_gap_bound(GOOD_P, n),
    lambda n: bon.win_rate_bound(n),
    lambda n: bon.win_rate_gap_bound(GOOD_P, n),
    lambda n: bon.bon_continuous(n),
    lambda n: bon.sample_best_of_n(GOOD_P, GOOD_R, n, 5, np.random.default_rng(0)),
]


@pytest.mark.parametrize("n", [0, -1, 2.5, True, np.array([3, 0])])
@pytest.mark.parametrize("call", N_FUNCTIONS)
def test_bad_n_raises_naming_n(call, n):
    with pytest.raises(ValueError, match="^n: "):
        call(n)


@pytest.mark.parametrize("eps", [0.0, -0.1, 1.5, np.nan, [0.5, 0.0]])
def test_bad_eps(eps):
    with pytest.raises(ValueError, match="^eps: "):
        bon.kl_estimator(eps, 3)
    with pytest.raises(ValueError, match="^selected_ref_probs: "):
        bon.estimate_kl(np.r_[0.5, eps], 3)


def test_other_bad_arguments():
    rng = np.random.default_rng(0)
    cases = [
        ("^size: ", lambda: bon.sample_best_of_n(GOOD_P, GOOD_R, 2, 0, rng)),
        ("^size: ", lambda: bon.chi2_check(GOOD_P, GOOD_R, 2, -3, rng)),
        ("^size: ", lambda: bon.mc_kl(GOOD_P, GOOD_R, 2, 1, rng)),
        ("^rng: ", lambda: bon.sample_best_of_n(GOOD_P, GOOD_R, 2, 5, 0)),
        ("^rng: ", lambda: bon.random_reference(np.random.RandomState(0))),
        ("^min_expected: ", lambda: bon.chi2_check(GOOD_P, GOOD_R, 2, 5, rng, min_expected=0)),
        ("^tie_break: ", lambda: bon.best_of_n_pmf(GOOD_P, GOOD_R, 2, tie_break="first")),
        ("^ties: ", lambda: bon.win_rate(GOOD_P, GOOD_R, 2, ties="win")),
        ("^selected_ref_probs: ", lambda: bon.estimate_kl([0.5], 2)),
        ("^selected_ref_probs: ", lambda: bon.estimate_kl([[0.5, 0.5]], 2)),
        ("^beta: ", lambda: bon.tilt_continuous(-1.0)),
        ("^beta: ", lambda: bon.tilted_policy(GOOD_P, GOOD_R, [1.0, np.inf])),
        ("^m: ", lambda: bon.rewind_repeat_continuous(0.5)),
        ("^kl: ", lambda: bon.optimal_win_rate_at_kl(-0.1)),
        ("^rewards: ", lambda: bon.optimal_win_rate_at_kl(0.1, GOOD_P)),
        ("^rewards: ", lambda: bon.optimal_win_rate_at_kl(0.1, None, GOOD_R)),
        ("^L: ", lambda: bon.uniform(0)),
        ("^eps: ", lambda: bon.cherry_picked(0.6)),
        ("^L_max: ", lambda: bon.random_reference(rng, L_max=1)),
        ("^k: ", lambda: bon.rounded_rewards(GOOD_R, 0)),
        ("^alpha: ", lambda: bon.markov_lm(0.0, rng=rng)),
        ("^length: ", lambda: bon.markov_lm(1.0, length=20, rng=rng)),
        ("^probs: ", lambda: bon.renyi2_entropy([0.5, 0.6])),
    ]
    for match, call in cases:
        with pytest.raises(ValueError, match=match):
            call()


_P, _R = np.array([0.2, 0.3, 0.5]), np.array([0.0, 1.0, 2.0])
_NAN, _RNG = float("nan"), np.random.default_rng(0)
BEST_OF_N_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: bon.best_of_n_pmf(_P, _R, 2.5), "n"),
    (lambda: bon.best_of_n_pmf(_P, _R, 2, tie_break="first"), "tie_break"),
    (lambda: bon.bon_continuous(0), "n"),
    (lambda: bon.cherry_picked(1.5), "eps"),
    (lambda: bon.chi2_check(_P, _R, 2, 0, _RNG), "size"),
    (lambda: bon.chi2_check(_P, _R, 2, 100, _RNG, min_expected=_NAN), "min_expected"),
    (lambda: bon.expected_estimator(_P, np.array([0.0, _NAN, 1.0]), 2), "rewards"),
    (lambda: bon.kl_formula(0.5), "n"),
    (lambda: bon.kl_gap_bound(np.array([0.5, 0.6]), 2), "probs"),
    (lambda: bon.level_pmf(_P, _R, 0), "n"),
    (lambda: bon.markov_lm(_NAN, rng=_RNG), "alpha"),
    (lambda: bon.markov_lm(1.0, vocab=1, rng=_RNG), "vocab"),
    (lambda: bon.mc_kl(_P, _R, 2, 0, _RNG), "size"),
    (lambda: bon.optimal_win_rate_at_kl(-1.0), "kl"),
    (lambda: bon.random_reference(_RNG, L_max=1), "L_max"),
    (lambda: bon.random_reference("rng"), "rng"),
    (lambda: bon.renyi2_entropy(np.array([0.5, 0.6])), "probs"),
    (lambda: bon.rewind_repeat_continuous(0.5), "m"),
    (lambda: bon.rounded_rewards(_R, 0), "k"),
    (lambda: bon.rounded_rewards(np.array([_NAN, 1.0]), 2), "rewards"),
    (lambda: bon.sample_best_of_n(_P, _R, 2, -1, _RNG), "size"),
    (lambda: bon.tilt_continuous(_NAN), "beta"),
    (lambda: bon.tilted_policy(_P, _R, _NAN), "beta"),
    (lambda: bon.uniform(0), "L"),
    (lambda: bon.win_rate(_P, _R, 2, ties="none"), "ties"),
    (lambda: bon.win_rate(_P, _R, 0), "n"),
    (lambda: bon.win_rate_bound(0), "n"),
    (lambda: bon.win_rate_gap_bound(_P, 0), "n"),
]


@pytest.mark.parametrize("call, name", BEST_OF_N_BAD_INPUTS)
def test_every_function_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
