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
    (lambda: core.transfer_eval(np.ones((5, 2)), np.arange(1.0, 6), np.ones((5, 2)), np.full(5, np.nan)), "yt"),
    (lambda: core.transfer_eval(np.ones((5, 2)), -np.arange(1.0, 6), np.ones((5, 2)), np.arange(1.0, 6)), "ys"),
    (lambda: core.transfer_eval(np.ones((5, 2)), np.arange(1.0, 6), np.ones((5, 2)), np.arange(1.0, 6), "mse"),
     "protocol"),
    (lambda: core.make_city_pair(n_a=1), "n_a"),
    (lambda: core.make_city_pair(n_a=20, n_b=20, topk=25), "topk"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), cross="both"), "cross"),
    (lambda: core.anchor_pairs(np.zeros((3, 2)), np.ones((3, 2)), n=5), "n"),
    (lambda: core.anchor_pairs(np.zeros((3, 2)), np.ones((3, 2)), n=0), "n"),
    (lambda: core.anchor_pairs(np.zeros((3, 2)), np.ones((3, 2)), n=1.5), "n"),
    (lambda: core.anchor_pairs(np.zeros((3, 2)), np.ones((3, 2)), mutual="yes"), "mutual"),
    (lambda: core.procrustes(np.random.default_rng(0).normal(size=(3, 3)), np.ones((3, 3))), "As"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), self_loops="double"), "self_loops"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), use_align=False, use_rec=False), "use_align"),
    (lambda: core.CoRE(torch.eye(3), -torch.eye(3)), "adj_t"),
    (lambda: core.CoRE(torch.eye(3), torch.zeros(3, 3), self_loops="identity"), "adj_t"),
    (lambda: core.DenseGAT(3, 2, heads=0), "heads"),
    (lambda: core.DenseGAT(3, 2)(torch.randn(4, 3), torch.eye(3)), "adj"),
    (lambda: core.graph_edges(torch.full((2, 2), float("nan"))), "adj"),
    (lambda: core.untrained_pair(*core.make_city_pair(n_a=20, n_b=15), d=0), "d"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call()


# --- second pass: the official encoder, the protocols' bad input, the diagnostics ---------------

def _gatconv_reference(layer, x, adj):
    """PyTorch Geometric's GATConv (concat=False, edge_dim=1, add_self_loops with fill 'mean'),
    written as loops over regions from its documented formula."""
    n, H, C = len(x), layer.heads, layer.d_out
    A = adj.clone()
    A.fill_diagonal_(0)
    h = (x @ layer.lin.weight.T).view(n, H, C)
    c = (layer.lin_edge.weight.view(H, C) * layer.att_edge).sum(-1)
    out = torch.zeros(n, H, C, dtype=x.dtype)
    for i in range(n):
        nbrs = [j for j in range(n) if A[i, j] > 0]
        weights = [A[i, j] for j in nbrs]
        loop = sum(weights) / len(weights) if nbrs else torch.tensor(0.0)
        srcs, ws = nbrs + [i], weights + [loop]
        e = torch.stack([torch.nn.functional.leaky_relu(
            (h[j] * layer.att_src).sum(-1) + (h[i] * layer.att_dst).sum(-1) + w * c, 0.2)
            for j, w in zip(srcs, ws)])  # (edges, H)
        alpha = torch.softmax(e, dim=0)
        out[i] = (alpha[..., None] * h[srcs]).sum(0)
    return out.mean(1) + layer.bias


def test_gat_layer_matches_gatconv_formula_with_its_self_loops():
    torch.manual_seed(0)
    layer = core.DenseGAT(3, 4, heads=8).double()
    adj = torch.tensor([[1.0, 0.5, 0.2, 0.0], [0.5, 1.0, 0.0, 0.0], [0.2, 0.0, 1.0, 0.0],
                        [0.0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    x = torch.randn(4, 3, dtype=torch.float64)
    assert torch.allclose(layer(x, adj), _gatconv_reference(layer, x, adj), atol=1e-12)
    # the diagonal of adj is replaced, not added to: any value gives the same layer
    adj2 = adj.clone().fill_diagonal_(7.0)
    assert torch.allclose(layer(x, adj2), layer(x, adj), atol=1e-12)
    row, col, w = core.graph_edges(adj)
    loops = row == col
    assert loops.sum() == 4 and torch.allclose(w[loops], torch.tensor([0.35, 0.5, 0.2, 0.0], dtype=torch.float64))


def test_identity_self_loops_keep_the_given_diagonal():
    adj = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    row, col, w = core.graph_edges(adj, "identity")
    assert w[(row == 0) & (col == 0)].item() == 2.0
    with pytest.raises(ValueError, match="^adj:"):
        core.graph_edges(torch.tensor([[0.0, 1.0], [1.0, 1.0]]), "identity")


def test_defaults_are_the_official_recipe():
    import inspect
    fit = inspect.signature(core.fit_pair).parameters
    assert (fit["d"].default, fit["heads"].default, fit["epochs"].default, fit["lr"].default,
            fit["n_probes"].default) == (128, 8, 600, 1e-3, 1000)
    model = inspect.signature(core.CoRE).parameters
    assert model["heads"].default == 8 and model["self_loops"].default == "mean"


def test_mirror_leaves_align_and_mobility_unchanged(pair):
    Hs, Ht, gen = pair
    Q = torch.randn(16, 4, generator=gen, dtype=torch.float64)
    od = torch.rand(5, 5, generator=gen, dtype=torch.float64).fill_diagonal_(0)
    assert float(core.manifold_align_loss(Hs, -Ht, probes=Q)) == pytest.approx(
        float(core.manifold_align_loss(Hs, Ht, probes=Q)), rel=1e-12)
    assert float(core.mobility_loss(-Ht, od)) == pytest.approx(float(core.mobility_loss(Ht, od)), rel=1e-12)


def test_transfer_protocol_uses_raw_embeddings_by_default():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(80, 3))
    y = np.exp(z @ np.array([0.5, -0.3, 0.2]))
    Es, Et = z + 5.0, z[:60] - 5.0  # a shift between the cities: only standardising removes it
    raw = core.transfer_eval(Es, y, Et, y[:60])
    std = core.transfer_eval(Es, y, Et, y[:60], standardised=True)
    assert std["r2"] > 0.9 and raw["r2"] < std["r2"]


def test_latent_probe_and_axis_cosine():
    rng = np.random.default_rng(0)
    z_s, z_t = rng.normal(size=(120, 4)), rng.normal(size=(100, 4))
    A = rng.normal(size=(4, 16))
    Es, Et = z_s @ A + 0.01 * rng.normal(size=(120, 16)), z_t @ A + 0.01 * rng.normal(size=(100, 16))
    assert core.latent_probe(Es, z_s) > 0.99
    assert core.latent_probe(rng.normal(size=(120, 16)), z_s) < 0.2
    Es, Et = z_s @ A, z_t @ A  # one shared map: shared axes
    assert core.probe_direction_cosine(Es, z_s, Et, z_t).min() > 0.95
    assert core.probe_direction_cosine(Es, z_s, -Et, z_t).max() < -0.95  # the mirror image
    R = np.linalg.qr(rng.normal(size=(16, 16)))[0]
    assert np.abs(core.probe_direction_cosine(Es, z_s, Et @ R, z_t)).mean() < 0.5  # unrelated axes


def test_anchor_pairs_for_every_target_region():
    rng = np.random.default_rng(0)
    z_s, z_t = rng.normal(size=(30, 2)), rng.normal(size=(20, 2))
    i, j = core.anchor_pairs(z_s, z_t, n=None, mutual=False)
    assert len(j) == 20 and sorted(j) == list(range(20))
    d = np.linalg.norm(z_s[:, None] - z_t[None], axis=-1)
    assert np.array_equal(i, d.argmin(0)[j]) and np.all(np.diff(d[i, j]) >= 0)


def test_untrained_pair_is_the_initial_model():
    a, b = core.make_city_pair(n_a=30, n_b=25, seed=0)
    Hs, Ht = core.untrained_pair(a, b, seed=3, d=8, heads=2)
    Hs2, _ = core.untrained_pair(a, b, seed=3, d=8, heads=2)
    assert Hs.shape == (30, 8) and Ht.shape == (25, 8) and np.array_equal(Hs, Hs2)


E5, Y5 = np.arange(10.0).reshape(5, 2) ** 1.5, np.arange(1.0, 6.0)


@pytest.mark.parametrize("call, name", [
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, alpha=0.0), "alpha"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, alpha=-1.0), "alpha"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, alpha=float("nan")), "alpha"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, alpha=float("inf")), "alpha"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, alpha=True), "alpha"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, alpha="1"), "alpha"),
    (lambda: core.transfer_eval(E5, np.full(5, 3.0), E5, Y5), "ys"),
    (lambda: core.transfer_eval(E5, Y5, E5, np.full(5, 3.0)), "yt"),
    (lambda: core.transfer_eval(E5, Y5, E5, np.full(5, 3.0), protocol="official"), "yt"),
    (lambda: core.transfer_eval(E5, Y5.astype(str), E5, Y5), "ys"),
    (lambda: core.transfer_eval(E5, Y5 > 2, E5, Y5), "ys"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5 + 1j), "yt"),
    (lambda: core.transfer_eval(E5, Y5[:, None], E5, Y5), "ys"),
    (lambda: core.transfer_eval(E5, Y5, E5, Y5, standardised="no"), "standardised"),
    (lambda: core.transfer_eval(E5.astype(str), Y5, E5, Y5), "Es"),
    (lambda: core.transfer_eval(E5, Y5, np.full((5, 2), np.inf), Y5), "Et"),
    (lambda: core.transfer_eval(np.ones((0, 2)), Y5, E5, Y5), "Es"),
    (lambda: core.type_agreement(E5, np.arange(5), E5, np.arange(4)), "types_t"),
    (lambda: core.type_agreement(E5, np.arange(4), E5, np.arange(5)), "types_s"),
    (lambda: core.type_agreement(E5, np.arange(5), E5, np.arange(5) + 0.5), "types_t"),
    (lambda: core.type_agreement(E5, np.arange(5), E5, -np.arange(5)), "types_t"),
    (lambda: core.chance_type_agreement(E5, np.arange(5), E5, np.arange(5.0)), "types_t"),
    (lambda: core.chance_type_agreement(E5, np.arange(5), E5, np.arange(5), n_perm=0), "n_perm"),
    (lambda: core.latent_probe(E5, np.ones((5, 2))), "z"),
    (lambda: core.latent_probe(E5, np.arange(10.0).reshape(5, 2), folds=1), "folds"),
    (lambda: core.latent_probe(E5, np.arange(10.0).reshape(5, 2), folds=6), "folds"),
    (lambda: core.latent_probe(E5, np.arange(8.0).reshape(4, 2)), "z"),
    (lambda: core.probe_direction_cosine(E5, np.arange(10.0).reshape(5, 2), E5,
                                         np.arange(15.0).reshape(5, 3)), "z_t"),
])
def test_bad_input_of_the_protocols_names_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call()


from companion.core import evaluate as _ce, model as _cm

_NAN = float("nan")
CORE_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: _cm.attention_scale("model"), "model"),
    (lambda: _cm.cycle_recon_loss(torch.full((3, 4), _NAN), torch.zeros(3, 4), torch.nn.Linear(4, 4),
                                  torch.nn.Linear(4, 4)), "Hs"),
    (lambda: _cm.dense_graph(torch.zeros(3, 4)), "adj"),
    (lambda: _cm.dense_graph(torch.zeros(3, 3), self_loops="x"), "self_loops"),
    (lambda: _cm.fit_pair(None, None, cross="x"), "cross"),
    (lambda: _cm.moment_gap(torch.full((3, 4), _NAN), torch.zeros(3, 4)), "Hs"),
    (lambda: _ce.standardise(np.full((3, 2), _NAN)), "E"),
    (lambda: _cm.train_core(None, torch.zeros(3, 3), torch.zeros(3, 3), epochs=0), "epochs"),
    (lambda: _cm.fit_pair("city", None), "city_s"),
]


@pytest.mark.parametrize("call, name", CORE_BAD_INPUTS)
def test_core_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


# --- issue 49: the checks of companion.validation, new cases and the names they give ---------
E4 = E5[:4]
CORE_VALIDATION_BAD_INPUTS = [
    (lambda: core.type_agreement(E5, np.arange(5), E4, np.arange(5)), "types_t"),
    (lambda: core.type_agreement(E4, np.arange(5), E5, np.arange(5)), "types_s"),
    (lambda: core.type_agreement(E5, np.arange(5), E5, np.arange(5)[:, None]), "types_t"),
    (lambda: core.chance_type_agreement(E5, np.arange(5), E5, None), "types_t"),
    (lambda: core.manifold_align_loss(torch.randn(3, 2), torch.randn(3, 2),
                                      probes=torch.randn(4, 3)), "probes"),
    (lambda: core.manifold_align_loss(torch.randn(3, 2), torch.randn(3, 2),
                                      probes=torch.full((4, 2), _NAN)), "probes"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), use_align="no"), "use_align"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), use_rec=1), "use_rec"),
    (lambda: core.CoRE(torch.ones(3, 4), torch.eye(3)), "adj_s"),
    (lambda: core.CoRE(torch.eye(3), torch.eye(3), d=2.0), "d"),
    (lambda: core.make_city_pair(n_a=2.0), "n_a"),
    (lambda: core.make_city_pair(k=True), "k"),
    (lambda: core.train_core(None, torch.zeros(3, 3), torch.zeros(3, 3)), "model"),
    (lambda: core.train_core(None, torch.zeros(3, 3), torch.zeros(3, 3), lr=_NAN), "lr"),
    (lambda: core.train_core(None, torch.zeros(3, 3), torch.zeros(3, 3), n_probes=0),
     "n_probes"),
    (lambda: core.untrained_pair("a", "b"), "city_s"),
    (lambda: core.DenseGAT(3, 2)(torch.ones(3, 3, dtype=torch.long), torch.eye(3)), "x"),
    (lambda: core.DenseGAT(3, 2, self_loops="x"), "self_loops"),
    (lambda: core.DenseGAT(2.5, 2), "d_in"),
    (lambda: core.mobility_loss(torch.randn(3, 2), -torch.ones(3, 3)), "od"),
    (lambda: core.mobility_loss(torch.randn(3, 2), torch.ones(3, 3, dtype=torch.long) * 0
                                + torch.full((3, 3), _NAN)), "od"),
    (lambda: core.latent_probe(E5, np.arange(10.0).reshape(5, 2), alpha=_NAN), "alpha"),
    (lambda: core.probe_direction_cosine(E5, np.arange(10.0).reshape(5, 2), E5,
                                         np.arange(10.0).reshape(5, 2), alpha=-1), "alpha"),
    (lambda: core.coral(E5, E5, eps=_NAN), "eps"),
    (lambda: core.standardise(np.ones((3, 2), dtype=bool)), "E"),
    (lambda: core.standardise(np.ones((0, 2))), "E"),
    (lambda: core.standardise(np.ones(4)), "E"),
]


@pytest.mark.parametrize("call, name", CORE_VALIDATION_BAD_INPUTS)
def test_core_validation_names_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        call()


# --- the generator's interaction: positive definite by default, the signed one kept ----------
def test_similarity_interaction_is_positive_definite_and_shares_the_world():
    a, b = core.make_city_pair(n_a=40, n_b=30, seed=3)
    s_a, s_b = core.make_city_pair(n_a=40, n_b=30, seed=3, interaction="signed")
    assert np.array_equal(a.gamma, b.gamma) and np.array_equal(s_a.gamma, s_b.gamma)
    assert np.linalg.eigvalsh(a.gamma).min() >= 0.15 - 1e-12  # 0.15 (G G' + I)
    assert np.allclose(a.gamma, a.gamma.T)
    # the same world draws: city A's types, profiles and layout (drawn before its trips) agree
    assert np.array_equal(a.types, s_a.types) and np.array_equal(a.z, s_a.z)
    assert np.array_equal(a.coords, s_a.coords) and not np.array_equal(a.od, s_a.od)


def test_signed_interaction_is_the_first_passes_generator():
    rng = np.random.default_rng(3)  # the first passes drew Gamma as the fourth draw, 0.3 N(0, 1)
    rng.normal(0.0, 1.5, (5, 4)), rng.normal(0.0, 0.5, 4), rng.normal(0.0, 0.5, 4)
    want = 0.3 * rng.normal(0.0, 1.0, (4, 4))
    s_a, _ = core.make_city_pair(n_a=40, n_b=30, seed=3, interaction="signed")
    assert np.array_equal(s_a.gamma, want)


@pytest.mark.parametrize("bad", ["PSD", "", None, 1])
def test_interaction_refuses_an_unknown_kind(bad):
    with pytest.raises(ValueError, match="^interaction:"):
        core.make_city_pair(n_a=20, n_b=15, interaction=bad)


def test_callback_sees_every_epoch_and_leaves_the_run_unchanged():
    a, b = core.make_city_pair(n_a=30, n_b=25, seed=0)
    seen = {}

    def keep(epoch, model):
        with torch.no_grad():
            seen[epoch] = model.embeddings()[0].numpy().copy()

    Hs, _, _, _ = core.fit_pair(a, b, seed=1, d=8, epochs=4, n_probes=8, callback=keep)
    Hs2, _, _, _ = core.fit_pair(a, b, seed=1, d=8, epochs=2, n_probes=8)
    assert sorted(seen) == [1, 2, 3, 4] and np.array_equal(seen[4], Hs)
    assert np.array_equal(seen[2], Hs2)  # a longer run passes through the shorter one
    with pytest.raises(ValueError, match="^callback:"):
        core.fit_pair(a, b, seed=1, d=8, epochs=2, n_probes=8, callback="print")
