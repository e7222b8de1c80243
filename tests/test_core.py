"""Unit tests of companion.core (CoRE): losses against brute force and closed forms, the moment
invariance of the cross-city losses, the post-hoc baselines, the protocols and bad input."""

import numpy as np
import pytest
import torch
from scipy.linalg import orthogonal_procrustes
from sklearn.linear_model import Ridge

import companion.core as core
from companion.core.evaluate import _ridge


def _remix(n, gen):
    """A Householder reflection fixing the all-ones vector: keeps count, sum and Gram matrix."""
    v = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    v = v - v.mean()
    return torch.eye(n, dtype=torch.float64) - 2 * v @ v.T / (v.T @ v)


@pytest.fixture
def pair():
    gen = torch.Generator().manual_seed(0)
    Hs = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    Ht = torch.randn(5, 4, generator=gen, dtype=torch.float64) * torch.tensor([2.0, 1.0, 0.5, 0.3])
    return Hs, Ht, gen


def test_generator_shapes_and_determinism():
    a, b = core.make_city_pair(n_a=40, n_b=30, seed=3)
    a2, _ = core.make_city_pair(n_a=40, n_b=30, seed=3)
    assert a.od.shape == (40, 40) and b.od.shape == (30, 30) and a.z.shape == (40, 4)
    assert (a.od >= 0).all() and np.all(np.diag(a.od) == 0)
    assert a.od.sum() == 200_000 and b.od.sum() == 100_000
    assert all((y > 0).all() for y in a.labels.values())
    assert np.all(np.diag(a.adj) == 1) and np.allclose(a.adj, a.adj.T)
    assert np.array_equal(a.od, a2.od) and np.array_equal(a.labels["gdp"], a2.labels["gdp"])


def test_mobility_loss_matches_brute_force():
    gen = torch.Generator().manual_seed(1)
    H = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    od = torch.tensor([[0, 3, 1, 0], [2, 0, 0, 5], [0, 1, 0, 1], [4, 0, 2, 0]], dtype=torch.float64)
    want = 0.0
    for i in range(4):
        denom = sum(np.exp(float(H[i] @ H[k])) for k in range(4))
        for j in range(4):
            if od[i, j] > 0:
                want -= float(od[i, j] / od.sum()) * np.log(np.exp(float(H[i] @ H[j])) / denom)
    assert float(core.mobility_loss(H, od)) == pytest.approx(want, rel=1e-12)


def test_manifold_align_matches_a_loop(pair):
    Hs, Ht, gen = pair
    Q = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    S = [np.array([r / np.linalg.norm(r) for r in (Q @ H.T).numpy()]) for H in (Hs, Ht)]
    D = [1 - s @ s.T for s in S]
    want = np.mean([np.sum((D[0][k] - D[1][k]) ** 2) for k in range(6)])
    assert float(core.manifold_align_loss(Hs, Ht, probes=Q)) == pytest.approx(want, rel=1e-12)
    assert float(core.manifold_align_loss(Hs, Hs, probes=Q)) == pytest.approx(0.0, abs=1e-12)
    assert float(core.manifold_align_loss(Hs, 3 * Hs, probes=Q)) == pytest.approx(0.0, abs=1e-12)


def test_cross_city_losses_see_only_moments(pair):
    Hs, Ht, gen = pair
    M = _remix(len(Ht), gen)
    assert torch.allclose(M @ torch.ones(len(Ht), dtype=torch.float64), torch.ones(len(Ht), dtype=torch.float64))
    Q = torch.randn(16, 4, generator=gen, dtype=torch.float64)
    q, k = torch.nn.Linear(4, 4).double(), torch.nn.Linear(4, 4).double()
    R = torch.linalg.qr(torch.randn(4, 4, generator=gen, dtype=torch.float64))[0]
    for f in (lambda H: core.manifold_align_loss(Hs, H, probes=Q), lambda H: core.cycle_recon_loss(Hs, H, q, k)):
        base = float(f(Ht).detach())
        assert float(f(M @ Ht).detach()) == pytest.approx(base, rel=1e-10)
        assert float(f(Ht[torch.randperm(len(Ht), generator=gen)]).detach()) == pytest.approx(base, rel=1e-10)
        assert abs(float(f(Ht @ R).detach()) / base - 1) > 1e-3


def test_cycle_recon_trivial_minimum_and_single_region(pair):
    Hs, Ht, _ = pair
    q, k = torch.nn.Linear(4, 4).double(), torch.nn.Linear(4, 4).double()
    for lin in (q, k):
        torch.nn.init.zeros_(lin.weight)
        torch.nn.init.zeros_(lin.bias)
    assert float(core.cycle_recon_loss(Hs, Ht, q, k).detach()) == 0.0
    q2, k2 = torch.nn.Linear(4, 4).double(), torch.nn.Linear(4, 4).double()
    assert np.isfinite(float(core.cycle_recon_loss(Hs[:1], Ht[:1], q2, k2).detach()))


def test_moment_match_zero_on_same_moments(pair):
    Hs, Ht, gen = pair
    assert float(core.moment_match_loss(Ht, _remix(len(Ht), gen) @ Ht)) == pytest.approx(0.0, abs=1e-12)
    assert float(core.moment_match_loss(Hs, Ht)) > 0.1
    assert float(core.moment_gap(Hs, Hs)) == 0.0


def test_dense_gat_rows_sum_to_one_and_isolated_node_is_finite():
    torch.manual_seed(0)
    layer = core.DenseGAT(3, 2, heads=2)
    adj = torch.tensor([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1.0]])
    x = torch.randn(3, 3)
    att = layer.attention(x, adj)
    assert torch.allclose(att.sum(-1), torch.ones(2, 3))
    assert float(att[:, 2, :2].abs().max().detach()) == 0.0
    assert torch.isfinite(layer(x, adj)).all()


def test_coral_matches_source_moments():
    rng = np.random.default_rng(0)
    Es = rng.normal(size=(200, 3)) @ rng.normal(size=(3, 3)) + 1.0
    Et = rng.normal(size=(150, 3)) @ rng.normal(size=(3, 3)) - 2.0
    out = core.coral(Es, Et, eps=1e-9)
    assert np.allclose(np.cov(out.T), np.cov(Es.T), atol=1e-6)
    assert np.allclose(out.mean(0), Es.mean(0))


def test_procrustes_recovers_a_rotation_and_matches_scipy():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(20, 4))
    R, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    At = A @ R.T + 3.0  # the target is a rotated, shifted copy
    got = core.procrustes(A, At)
    assert np.allclose((At - At.mean(0)) @ got, A - A.mean(0))
    ref, _ = orthogonal_procrustes(At - At.mean(0), A - A.mean(0))
    assert np.allclose(got, ref)


def test_anchor_pairs_are_mutual_nearest_neighbours():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(30, 2))
    i, j = core.anchor_pairs(z, z[::-1] + 1e-3, n=10)
    assert np.array_equal(i, 29 - j)


def test_ridge_and_protocols():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 4)), rng.lognormal(size=50)
    w, b = _ridge(X, y, 1.0)
    ref = Ridge(alpha=1.0).fit(X, y)
    assert np.allclose(w, ref.coef_) and b == pytest.approx(ref.intercept_)
    same = core.transfer_eval(X, y, X, y)
    assert same["r2"] > 0 and same["spearman"] > 0
    official = core.transfer_eval(X, y, X, y, protocol="official")
    assert set(official) == {"mae", "rmse", "mape"} and official["mae"] >= 0


def test_type_agreement_and_chance():
    rng = np.random.default_rng(0)
    types = np.repeat(np.arange(4), 10)
    E = np.eye(4)[types] * 5 + rng.normal(scale=0.1, size=(40, 4))
    assert core.type_agreement(E, types, E, types) == 1.0
    assert core.chance_type_agreement(E, types, E, types, n_perm=100) == pytest.approx(0.25, abs=0.05)


def test_training_is_deterministic_and_records_every_term():
    a, b = core.make_city_pair(n_a=30, n_b=25, seed=0)
    Hs, Ht, hist, _ = core.fit_pair(a, b, cross="core", seed=1, d=8, epochs=3, n_probes=8)
    Hs2, _, _, _ = core.fit_pair(a, b, cross="core", seed=1, d=8, epochs=3, n_probes=8)
    assert np.array_equal(Hs, Hs2) and Hs.shape == (30, 8) and Ht.shape == (25, 8)
    assert set(hist) == {"mob", "align", "rec", "total", "gap"} and len(hist["mob"]) == 3


@pytest.mark.parametrize("call, name", [
    (lambda: core.mobility_loss(torch.randn(3, 2), torch.zeros(3, 3)), "od"),
    (lambda: core.mobility_loss(torch.randn(3, 2), torch.ones(2, 2)), "od"),
    (lambda: core.mobility_loss(torch.full((3, 2), float("nan")), torch.ones(3, 3)), "H"),
    (lambda: core.manifold_align_loss(torch.randn(3, 2), torch.randn(3, 4)), "Ht"),
    (lambda: core.manifold_align_loss(torch.randn(3, 2), torch.randn(3, 2), n_probes=0), "n_probes"),
    (lambda: core.moment_match_loss(torch.randn(0, 2), torch.randn(3, 2)), "Hs"),
    (lambda: core.coral(np.ones((5, 2)), np.ones((5, 3))), "Et"),
    (lambda: core.coral(np.ones((5, 2)), np.ones((5, 2)), eps=0), "eps"),
    (lambda: core.procrustes(np.ones((5, 2)), np.ones((4, 2))), "At"),
    (lambda: core.transfer_eval(np.ones((5, 2)), np.ones(4), np.ones((5, 2)), np.ones(5)), "ys"),
    (lambda: core.transfer_eval(np.ones((5, 2)), np.ones(5), np.ones((5, 2)), np.full(5, np.nan)), "yt"),
    (lambda: core.transfer_eval(np.ones((5, 2)), -np.ones(5), np.ones((5, 2)), np.ones(5)), "ys"),
    (lambda: core.transfer_eval(np.ones((5, 2)), np.ones(5), np.ones((5, 2)), np.ones(5), "mse"), "protocol"),
    (lambda: core.make_city_pair(n_a=1), "n_a"),
    (lambda: core.make_city_pair(n_a=20, n_b=20, topk=25), "topk"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), cross="both"), "cross"),
    (lambda: core.anchor_pairs(np.zeros((3, 2)), np.ones((3, 2)), n=5), "n"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call()
