"""Unit tests of companion.pieclam: the likelihood and its gradient, the cone, the prior, bad input."""

import networkx as nx
import numpy as np
import pytest
import torch

from companion import pieclam as pc

torch.set_num_threads(1)


def _graph(name="karate"):
    ei, n, _ = pc.nx_graph(name)
    return ei, n


def _codes(n, dim, lorentz, seed=0, inside=True):
    g = torch.Generator().manual_seed(seed)
    F = pc.project_cone(0.2 + torch.rand(n, dim, dtype=torch.float64, generator=g), lorentz)
    if lorentz and inside:  # strictly inside the cone, so every logit is positive and no clamp acts
        t, s = F.chunk(2, dim=1)
        F = torch.cat([t + 0.3, 0.5 * s], dim=1)
    return F


# --- the cone --------------------------------------------------------------------------------


def test_projection_lands_in_the_cone_and_is_idempotent():
    F = 3 * torch.randn(500, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    P = pc.project_cone(F, True)
    t, s = P.chunk(2, dim=1)
    assert (s.abs() <= t + 1e-12).all()
    torch.testing.assert_close(pc.project_cone(P, True), P, rtol=0, atol=1e-14)
    X = pc.edge_logits(P, torch.combinations(torch.arange(60)).T, True)
    assert (X >= -1e-12).all()  # Lorentz products of cone points are non-negative
    assert (pc.project_cone(F, False) >= 0).all()


def test_projection_is_the_nearest_point():
    g = torch.Generator().manual_seed(1)
    F = 2 * torch.randn(200, 2, dtype=torch.float64, generator=g)
    P = pc.project_cone(F, True)
    d = (F - P).norm(dim=1)
    cand = pc.project_cone(4 * torch.randn(5000, 2, dtype=torch.float64, generator=g), True)  # points of the cone
    dists = torch.cdist(F, cand)
    assert (d <= dists.min(dim=1).values + 1e-12).all()
    clipped_t = F[:, :1].clamp_min(0)  # the classic mistake: clip s into [-t, t]
    clip = torch.cat([clipped_t, torch.maximum(torch.minimum(F[:, 1:], clipped_t), -clipped_t)], 1)
    assert ((F - clip).norm(dim=1) >= d - 1e-12).all() and ((F - clip).norm(dim=1) > d + 1e-6).any()


def test_bipartite_construction_is_exact():
    a = 0.8
    F = torch.tensor([[a, a]] * 3 + [[a, -a]] * 3, dtype=torch.float64)
    P = pc.prob_matrix(F, True)
    same = np.add.outer(np.r_[np.zeros(3), np.ones(3)], np.zeros(6))
    side = np.r_[np.zeros(3), np.ones(3)]
    cross = side[:, None] != side[None, :]
    assert np.all(P[~cross] == 0)
    np.testing.assert_allclose(P[cross], 1 - np.exp(-2 * a * a), rtol=1e-14)
    assert same.shape == P.shape


# --- the likelihood and its gradient ------------------------------------------------------------


@pytest.mark.parametrize("lorentz,dim", [(False, 3), (True, 4)])
@pytest.mark.parametrize("name", ["karate", "davis", "florentine"])
def test_fast_loglik_equals_the_dense_definition(name, lorentz, dim):
    ei, n = _graph(name)
    F = _codes(n, dim, lorentz)
    A = pc.to_dense(ei, n)
    fast, dense = pc.clam_loglik(F, ei, lorentz), pc.dense_loglik(F, A, lorentz)
    assert abs(float(fast - dense)) < 1e-9 * max(1.0, abs(float(dense)))
    # with omitted dyads: held-out edges and non-edges count neither way
    tr, tp, tn = pc.link_split(ei, n, seed=0)
    om = torch.cat([tp, tn], 1)
    known = torch.ones(n, n, dtype=torch.bool)
    known[om[0], om[1]] = known[om[1], om[0]] = False
    fast = pc.clam_loglik(F, tr, lorentz, omitted=om)
    dense = pc.dense_loglik(F, A, lorentz, known=known)
    assert abs(float(fast - dense)) < 1e-9 * max(1.0, abs(float(dense)))
    # the shares of the nodes add up to the whole
    assert abs(float(pc.star_loglik(F, ei, lorentz).sum() - pc.clam_loglik(F, ei, lorentz))) < 1e-9


@pytest.mark.parametrize("lorentz,dim", [(False, 3), (True, 4)])
def test_gradient_equals_autograd_and_finite_differences(lorentz, dim):
    ei, n = _graph("karate")
    tr, tp, tn = pc.link_split(ei, n, seed=1)
    for omitted, graph in ((None, ei), (torch.cat([tp, tn], 1), tr)):
        F = _codes(n, dim, lorentz).requires_grad_(True)
        (auto,) = torch.autograd.grad(pc.clam_loglik(F, graph, lorentz, omitted), F)
        analytic = pc.clam_grad(F.detach(), graph, lorentz, omitted)
        torch.testing.assert_close(analytic, auto, rtol=1e-6, atol=1e-6)
        # central differences on a few entries
        F0 = F.detach()
        for i, j in [(0, 0), (5, dim - 1), (33, 1)]:
            h = 1e-6
            Fp, Fm = F0.clone(), F0.clone()
            Fp[i, j] += h
            Fm[i, j] -= h
            fd = (pc.clam_loglik(Fp, graph, lorentz, omitted) - pc.clam_loglik(Fm, graph, lorentz, omitted)) / (2 * h)
            assert abs(float(fd) - float(analytic[i, j])) < 1e-5 * max(1.0, abs(float(fd)))


def test_omitted_dyads_do_not_leak():
    ei, n = _graph("karate")
    tr, tp, tn = pc.link_split(ei, n, seed=2)
    F = _codes(n, 4, True)
    om = torch.cat([tp, tn], 1)
    shuffled = om[:, torch.randperm(om.shape[1], generator=torch.Generator().manual_seed(0))]
    # the loss sees only which dyads are held out, not which of them are edges
    assert float(pc.clam_loglik(F, tr, True, om)) == pytest.approx(float(pc.clam_loglik(F, tr, True, shuffled)))
    assert not torch.isin(tp[0] * n + tp[1], tr[0] * n + tr[1]).any()


def test_clamp_keeps_the_gradient_finite_and_pulling():
    F = torch.tensor([[1.0, 1.0], [2.0, 2.0]], dtype=torch.float64)  # x = 2 - 2 = 0 on the edge
    ei = torch.tensor([[0, 1], [1, 0]])
    g = pc.clam_grad(F, ei, True)
    assert torch.isfinite(g).all()
    Fg = F.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(pc.clam_loglik(Fg, ei, True), Fg)
    torch.testing.assert_close(auto, g)


def test_empty_graph_loglik_is_the_non_edge_penalty():
    F = _codes(5, 2, False)
    empty = torch.zeros(2, 0, dtype=torch.long)
    X = F @ F.T
    assert float(pc.clam_loglik(F, empty, False)) == pytest.approx(-float(X.triu(1).sum()))
    assert float(pc.clam_loglik(torch.zeros(5, 2, dtype=torch.float64), empty, False)) == 0.0


def test_loglik_agrees_with_the_dense_definition_on_clamped_edges():
    # x_01 = 1 - 1 = 0 and x_23 = 0.25 - 0.25 = 0: both edge logits are clamped at x_min
    F = torch.tensor([[1.0, 1.0], [1.0, 1.0], [0.5, -0.5], [0.5, -0.5], [2.0, 0.3]], dtype=torch.float64)
    ei = torch.tensor([[0, 1, 2, 3, 0, 4], [1, 0, 3, 2, 4, 0]])
    A = pc.to_dense(ei, 5)
    for x_min in (pc.X_MIN, 0.1):
        fast, dense = pc.clam_loglik(F, ei, True, x_min=x_min), pc.dense_loglik(F, A, True, x_min=x_min)
        assert float(fast) == pytest.approx(float(dense), rel=1e-12, abs=1e-12)
        assert float(pc.star_loglik(F, ei, True, x_min=x_min).sum()) == pytest.approx(float(fast), abs=1e-12)
    # each clamped edge contributes log(1 - e^{-x_min}), the floor of its probability, and no more
    no_clamped = pc.clam_loglik(F, ei[:, 4:], True)
    assert float(pc.clam_loglik(F, ei, True) - no_clamped) == pytest.approx(2 * np.log(-np.expm1(-pc.X_MIN)))


def test_likelihood_functions_refuse_bad_input_naming_the_argument():
    ei, n = _graph("karate")
    F = _codes(n, 4, True)
    once = pc.undirected_pairs(ei)  # the networkx convention: each edge once
    outside = F.clone()
    outside[3, 2] = outside[3, 0] + 0.5  # |s| > t
    tr, tp, tn = pc.link_split(ei, n, seed=0)
    om = torch.cat([tp, tn], 1)
    twice = torch.cat([om, om[:, :1].flip(0)], 1)  # a held-out dyad listed as (n, m) and (m, n)
    for fn in (pc.clam_loglik, pc.clam_grad, pc.star_loglik):
        with pytest.raises(ValueError, match="^edge_index: .*once .*networkx.*both directions"):
            fn(F, once, True)
        with pytest.raises(ValueError, match="^F: .*cone"):
            fn(outside, ei, True)
        with pytest.raises(ValueError, match="^F: .*non-negative"):
            fn(-F, ei, False)
        with pytest.raises(ValueError, match="^x_min"):
            fn(F, ei, True, x_min=0.0) if fn is pc.star_loglik else fn(F, ei, True, None, 0.0)
    for fn in (pc.clam_loglik, pc.clam_grad):
        with pytest.raises(ValueError, match="^omitted: .*more than once"):
            fn(F, tr, True, twice)
        with pytest.raises(ValueError, match="^omitted: .*also in edge_index"):
            fn(F, ei, True, om)
        with pytest.raises(ValueError, match="^omitted: .*shape"):
            fn(F, tr, True, om[0])


def test_a_batch_of_graphs_is_fitted_as_separate_graphs():
    graphs = [_graph("karate"), _graph("davis"), _graph("florentine")]
    ei, N, batch, offsets = pc.disjoint_union(graphs)
    F = _codes(N, 4, True)
    per_graph = [pc.clam_loglik(F[o:o + n], g, True) for (g, n), o in zip(graphs, offsets)]
    assert float(pc.clam_loglik(F, ei, True, batch=batch)) == pytest.approx(float(sum(per_graph)), rel=1e-12)
    grads = torch.cat([pc.clam_grad(F[o:o + n], g, True) for (g, n), o in zip(graphs, offsets)])
    torch.testing.assert_close(pc.clam_grad(F, ei, True, batch=batch), grads)
    cfg = pc.ClamConfig(dim=4, lorentz=True, feat_steps=50)
    together = pc.fit_clam(ei, N, cfg, F0=F, batch=batch).F
    for (g, n), o in zip(graphs, offsets):
        alone = pc.fit_clam(g, n, cfg, F0=F[o:o + n]).F
        torch.testing.assert_close(together[o:o + n], alone, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="^edge_index: .*two different graphs"):
        pc.clam_loglik(F, torch.tensor([[0, 40], [40, 0]]), True, batch=batch)
    with pytest.raises(ValueError, match="^batch: .*one graph index per node"):
        pc.clam_loglik(F, ei, True, batch=batch[:-1])
    with pytest.raises(ValueError, match="^batch: .*without a prior"):
        pc.fit_clam(ei, N, pc.ClamConfig(dim=4, use_prior=True), batch=batch)


# --- fitting -------------------------------------------------------------------------------


def test_ieclam_fits_the_bipartite_block_model_and_bigclam_does_not():
    ei, _, Pt = pc.named_sbm("bipartite", seed=0)
    err = {}
    for lorentz in (False, True):
        r = pc.fit_clam(ei, 200, pc.ClamConfig(dim=4, lorentz=lorentz, feat_steps=600))
        err[lorentz] = pc.prob_error(pc.prob_matrix(r.F, lorentz), Pt)
        assert r.history["loglik"][-1] > r.history["loglik"][0]
    assert err[True] < 0.1 < 0.2 < err[False]


def test_pieclam_runs_and_its_prior_samples():
    ei, n = _graph("davis")
    attrs = np.random.default_rng(0).standard_normal((n, 2))
    cfg = pc.ClamConfig(dim=2, lorentz=True, use_prior=True, warmup_steps=20, feat_steps=10, prior_steps=10,
                        rounds=2, n_blocks=2, hidden=8)
    r = pc.fit_clam(ei, n, cfg, attrs=attrs)
    assert r.prior is not None and r.prior_input().shape == (n, 4)
    for kind in ("S", "P", "PS"):
        assert np.isfinite(pc.anomaly_scores(r, kind)).all()
    sei, Fs = pc.sample_graph(r, 40, seed=0)
    pc.check_codes(Fs, True)
    pc.as_edge_index(sei, 40)


def test_flow_density_integrates_to_one():
    torch.manual_seed(0)
    prior = pc.RealNVPPrior(2, n_blocks=4, hidden=16)
    with torch.no_grad():  # random (not zero) last layers, so the flow is not the identity
        for p in prior.parameters():
            p.add_(0.1 * torch.randn_like(p))
    grid = torch.linspace(-12, 12, 601, dtype=torch.float64)
    xx, yy = torch.meshgrid(grid, grid, indexing="ij")
    with torch.no_grad():
        p = prior.log_prob(torch.stack([xx.ravel(), yy.ravel()], 1)).exp()
    h = float(grid[1] - grid[0])
    assert float(p.sum()) * h * h == pytest.approx(1.0, abs=0.02)
    x = prior.sample(100)
    assert torch.isfinite(prior.log_prob(x)).all()


def test_flow_couplings_split_every_inclusive_exclusive_pair():
    # the official code splits the t half from the s half and swaps after each block; the old
    # parity masks (arange(dim) % 2) kept t_c and s_c together in every block when C was even
    for C, n_attrs in ((1, 0), (2, 0), (3, 0), (2, 2), (2, 3)):
        prior = pc.RealNVPPrior(2 * C + n_attrs, n_blocks=4, first=pc.clam_split(2 * C, True, n_attrs))
        for block in prior.blocks:
            kept = block.mask.bool()
            assert all(kept[c] != kept[C + c] for c in range(C)), (C, n_attrs, kept)
        assert torch.equal(prior.blocks[0].mask + prior.blocks[1].mask, torch.ones(2 * C + n_attrs, dtype=torch.float64))
    # and fit_clam builds its prior that way: the first block moves s as a function of t
    ei, n = _graph("davis")
    r = pc.fit_clam(ei, n, pc.ClamConfig(dim=4, use_prior=True, warmup_steps=5, feat_steps=2, prior_steps=2,
                                         rounds=1, n_blocks=2, hidden=8))
    assert r.prior.blocks[0].mask.tolist() == [1.0, 1.0, 0.0, 0.0]
    block = r.prior.blocks[0]
    with torch.no_grad():
        block.net[-1].weight.normal_(generator=torch.Generator().manual_seed(0))
    x = _codes(3, 4, True)
    J = torch.autograd.functional.jacobian(lambda v: block(v)[0].sum(0), x)  # (4 outputs, 3 rows, 4 inputs)
    assert J[2:, :, :2].abs().sum() > 0  # d s / d t != 0
    assert J[:2, :, 2:].abs().sum() == 0  # t passes through unchanged


def test_the_prior_loss_is_summed_over_the_nodes():
    # the official code sums the negative log-likelihood over the nodes; a mean would weigh the
    # weight decay N times more against the data and hold the flow near its Gaussian start
    from companion.pieclam.fit import _fit_prior

    class Recorder:  # an optimizer that keeps the gradient it is given
        def __init__(self, prior):
            self.prior = prior

        def zero_grad(self):
            self.prior.zero_grad()

        def step(self):
            self.grad = self.prior.base_mean.grad.clone()

    x = _codes(30, 2, True)
    grads = []
    for data in (x, torch.cat([x, x])):
        prior = pc.RealNVPPrior(2, n_blocks=2, hidden=8, noise_std=0.0)
        opt = Recorder(prior)
        _fit_prior(prior, opt, data, 1, torch.Generator().manual_seed(0))
        grads.append(opt.grad)
    torch.testing.assert_close(grads[1], 2 * grads[0])


def test_kde_is_a_density_and_picks_its_bandwidth_by_cross_validation():
    g = torch.Generator().manual_seed(0)
    data = torch.cat([torch.randn(100, 2, generator=g, dtype=torch.float64) * 0.1 + 2,
                      torch.randn(100, 2, generator=g, dtype=torch.float64) * 0.1 - 2])
    kde = pc.GaussianKDE(data)
    scott = 200 ** (-1 / 6)
    assert kde.factor < scott  # two tight clusters far apart: Scott's rule over-smooths
    grid = torch.linspace(-4, 4, 401, dtype=torch.float64)
    xx, yy = torch.meshgrid(grid, grid, indexing="ij")
    p = kde.log_prob(torch.stack([xx.ravel(), yy.ravel()], 1)).exp()
    assert float(p.sum()) * float(grid[1] - grid[0]) ** 2 == pytest.approx(1.0, abs=0.01)
    assert (kde.loo_log_prob() < kde.log_prob(data)).all()  # without its own kernel a point is less likely
    assert kde.sample(50, generator=g).shape == (50, 2)
    with pytest.raises(ValueError, match="^data"):
        pc.GaussianKDE(torch.zeros(1, 2))


def test_bridge_mass_counts_codes_that_connect_to_both_sides():
    a = 0.9
    ref = torch.tensor([[a, a]] * 5 + [[a, -a]] * 5, dtype=torch.float64)
    side = np.r_[np.zeros(5, int), np.ones(5, int)]
    assert pc.bridge_mass(ref, ref, side, True, 0.5) == 0.0  # every fitted code sits on one side
    middle = torch.tensor([[a, 0.0]] * 4, dtype=torch.float64)  # s = 0: equally linked to both sides
    assert pc.bridge_mass(middle, ref, side, True, 0.5) == 1.0
    np.testing.assert_allclose(pc.side_contrast(ref, ref, side, True), 1.0)
    with pytest.raises(ValueError, match="^side"):
        pc.side_contrast(ref, ref, side[:-1], True)


def test_lorentz_boosts_keep_the_decoder_and_are_recovered():
    F = _codes(40, 4, True)
    pairs = torch.combinations(torch.arange(40)).T
    for a, flip in (((0.7, -0.3), (False, True)), ((-1.2, 0.0), (True, False))):
        G = pc.lorentz_boost(F, a, flip)
        torch.testing.assert_close(pc.edge_logits(G, pairs, True), pc.edge_logits(F, pairs, True))
        pc.check_codes(G, True)  # the cone maps onto itself
        J = torch.autograd.functional.jacobian(lambda v: pc.lorentz_boost(v[None], a, flip)[0], F[0])
        assert abs(float(torch.linalg.det(J))) == pytest.approx(1.0)
        M = pc.LorentzMap.fit(F, G)
        assert M.flip == flip and np.allclose(M.a, a, atol=1e-4)
        torch.testing.assert_close(M(F), G, rtol=1e-6, atol=1e-6)


def test_ring_prior_is_a_density_inside_the_cone():
    ring = pc.RingMixture()
    x = ring.sample(2000, seed=0)
    pc.check_codes(x, True)
    grid_t = torch.linspace(0, 3, 301, dtype=torch.float64)
    grid_s = torch.linspace(-1.5, 1.5, 301, dtype=torch.float64)
    tt, ss = torch.meshgrid(grid_t, grid_s, indexing="ij")
    p = ring.log_prob(torch.stack([tt.ravel(), ss.ravel()], 1)).exp()
    assert float(p.sum()) * 0.01 * 0.01 == pytest.approx(1.0, abs=0.01)
    ei = pc.sample_edges(x[:300], True, seed=0)
    pc.as_edge_index(ei, 300)


def test_roc_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 30).astype(float), rng.integers(0, 5, 40).astype(float)
    pairs = (pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean()
    assert pc.roc_auc(pos, neg) == pytest.approx(pairs)


def test_planted_structural_anomalies_keep_degrees():
    ei, block, _ = pc.named_sbm("bipartite", seed=0)
    ei2, anom = pc.plant_structural(ei, 200, 0.05, seed=0)
    assert anom.sum() == 10
    np.testing.assert_array_equal(pc.degree_scores(ei, 200)[anom], pc.degree_scores(ei2, 200)[anom])
    A, A2 = pc.to_dense(ei, 200).bool(), pc.to_dense(ei2, 200).bool()
    assert (A[anom] != A2[anom]).any(dim=1).all()  # every anomaly got new neighbours
    pc.as_edge_index(ei2, 200)


# --- bad input ----------------------------------------------------------------------------------


def test_bad_graphs_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="^graph: .*directed"):
        pc.from_networkx(nx.DiGraph([(0, 1)]))
    g = nx.Graph([(0, 1), (1, 1)])
    with pytest.raises(ValueError, match="^graph: .*self-loop"):
        pc.from_networkx(g)
    with pytest.raises(ValueError, match="^edge_index: .*self-loops"):
        pc.as_edge_index(torch.tensor([[0, 1, 1], [1, 0, 1]]), 3)
    with pytest.raises(ValueError, match="^edge_index: .*undirected"):
        pc.as_edge_index(torch.tensor([[0, 1, 0], [1, 0, 2]]), 3)
    with pytest.raises(ValueError, match="^edge_index: .*in \\[0, 3\\)"):
        pc.as_edge_index(torch.tensor([[0, 5], [5, 0]]), 3)
    with pytest.raises(ValueError, match="^edge_index: .*shape"):
        pc.as_edge_index(torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match="^edge_index: .*no edges"):
        pc.fit_clam(torch.zeros(2, 0, dtype=torch.long), 5, pc.ClamConfig(feat_steps=1))
    with pytest.raises(ValueError, match="^edge_index: .*at least 10 edges"):
        pc.link_split(pc.from_networkx(nx.path_graph(9))[0], 9)


def test_bad_codes_and_settings_are_refused():
    with pytest.raises(ValueError, match="^F: .*non-negative"):
        pc.check_codes(torch.tensor([[1.0, -0.5]]), False)
    with pytest.raises(ValueError, match="^F: .*cone"):
        pc.check_codes(torch.tensor([[1.0, 2.0]]), True)
    with pytest.raises(ValueError, match="^F: .*finite"):
        pc.check_codes(torch.tensor([[float("nan"), 0.0]]), False)
    with pytest.raises(ValueError, match="^dim: .*even"):
        pc.lorentz_diag(3, True)
    with pytest.raises(ValueError, match="^dim: .*even"):
        pc.ClamConfig(dim=3, lorentz=True)
    ei, n = _graph("davis")
    with pytest.raises(ValueError, match="^F0: .*non-negative"):
        pc.fit_clam(ei, n, pc.ClamConfig(dim=2, lorentz=False, feat_steps=1), F0=-torch.ones(n, 2))
    with pytest.raises(ValueError, match="^attrs: .*one row per node"):
        pc.fit_clam(ei, n, pc.ClamConfig(dim=2, use_prior=True), attrs=np.zeros((n + 1, 2)))
    with pytest.raises(ValueError, match="^attrs: .*finite"):
        pc.fit_clam(ei, n, pc.ClamConfig(dim=2, use_prior=True), attrs=np.full((n, 2), np.inf))
    with pytest.raises(ValueError, match="^omitted: .*also in edge_index"):
        pc.fit_clam(ei, n, pc.ClamConfig(dim=2, feat_steps=1), omitted=pc.undirected_pairs(ei)[:, :3])
    with pytest.raises(ValueError, match="^pos_scores"):
        pc.roc_auc([], [1.0])
    with pytest.raises(ValueError, match="^neg_scores"):
        pc.roc_auc([1.0], [])
    with pytest.raises(ValueError, match="^lr_feat_n"):
        pc.ClamConfig(lr_feat_n=-1.0)
    with pytest.raises(ValueError, match="^name"):
        pc.named_sbm("ring")


# --- second pass: the official flow, the known-prior schedule, intervals over splits -------------------


def test_flow_defaults_are_the_official_couplings():
    # the official RealNVP (transformation.py) builds normflows MLPs with ReLU and unbounded exp
    # log-scales, guarded by a radius-10 stop along the inverse pass; the book's first flow used
    # LeakyReLU and 2 tanh(s/2)
    prior = pc.RealNVPPrior(4, n_blocks=2, hidden=8)
    acts = [m for m in prior.blocks[0].net if not isinstance(m, torch.nn.Linear)]
    assert acts and all(type(m) is torch.nn.ReLU for m in acts)
    assert prior.blocks[0].log_scale_max is None and prior.limit_radius == 10.0
    cfg = pc.ClamConfig()
    assert (cfg.flow_activation, cfg.flow_scale_bound, cfg.flow_limit_radius) == ("relu", None, 10.0)
    # the scales are unbounded: a large raw log-scale passes through unchanged
    block = prior.blocks[0]
    with torch.no_grad():
        block.net[-1].bias.fill_(5.0)
    with torch.no_grad():
        s, _ = block._shift_scale(torch.zeros(1, 4, dtype=torch.float64))
    assert float(s.max()) == pytest.approx(5.0)
    old = pc.RealNVPPrior(4, n_blocks=2, hidden=8, activation="leaky_relu", scale_bound=2.0)
    with torch.no_grad():
        old.blocks[0].net[-1].bias.fill_(5.0)
        s_old, _ = old.blocks[0]._shift_scale(torch.zeros(1, 4, dtype=torch.float64))
    assert float(s_old.max()) == pytest.approx(2 * np.tanh(2.5))


def test_flow_radius_guard_stops_far_points():
    torch.manual_seed(0)
    prior = pc.RealNVPPrior(2, n_blocks=4, hidden=8)
    with torch.no_grad():
        for p in prior.parameters():
            p.add_(0.3 * torch.randn_like(p))
    far = torch.tensor([[50.0, -40.0]], dtype=torch.float64)  # outside radius 10: never moved
    u = (far - prior.base_mean) * torch.exp(-prior.base_log_std)
    base = -0.5 * (u**2).sum(-1) - prior.base_log_std.sum() - np.log(2 * np.pi)
    with torch.no_grad():
        torch.testing.assert_close(prior.log_prob(far), base)
    free = pc.RealNVPPrior(2, n_blocks=4, hidden=8, limit_radius=None)
    free.load_state_dict(prior.state_dict())
    with torch.no_grad():
        assert not torch.allclose(free.log_prob(far), base)


def test_known_prior_schedule_keeps_its_noise():
    # the official settings of the known-prior experiment never step their scheduler within 5
    # rounds (step size 100), so the noise stays at 0.25; halve_each_round=False does the same
    x = pc.RingMixture().sample(40, seed=0)
    kept = pc.fit_flow(x, pc.ClamConfig(dim=2, use_prior=True, prior_steps=2, rounds=3, noise=0.25,
                                        n_blocks=2, hidden=8, halve_each_round=False))
    halved = pc.fit_flow(x, pc.ClamConfig(dim=2, use_prior=True, prior_steps=2, rounds=3, noise=0.25,
                                          n_blocks=2, hidden=8))
    assert kept.noise_std == 0.25 and halved.noise_std == pytest.approx(0.25 / 8)


def test_mean_interval_is_the_student_t_interval():
    from scipy import stats

    x = np.array([0.2, 0.25, 0.1, 0.3, 0.22])
    m, lo, hi = pc.mean_interval(x)
    ref = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert m == pytest.approx(x.mean()) and (lo, hi) == pytest.approx(ref)
    m90, lo90, hi90 = pc.mean_interval(x, level=0.9)
    assert lo < lo90 < m90 < hi90 < hi


@pytest.mark.parametrize("values, level, match", [
    ([0.1], 0.95, "values"), ([], 0.95, "values"), ([0.1, np.nan], 0.95, "values"),
    ([0.1, np.inf], 0.95, "values"), ([[0.1, 0.2]], 0.95, "values"), ([0.1, 0.2], 1.5, "level"),
    ([0.1, 0.2], 0.0, "level"),
])
def test_mean_interval_rejects_bad_input(values, level, match):
    with pytest.raises(ValueError, match=match):
        pc.mean_interval(values, level=level)


def test_fitted_gaussian_matches_the_sample_moments():
    g = torch.Generator().manual_seed(0)
    data = torch.randn(400, 2, generator=g, dtype=torch.float64) @ torch.tensor([[1.0, 0.5], [0.0, 0.3]],
                                                                                 dtype=torch.float64) + 2
    gauss = pc.FittedGaussian(data)
    ref = torch.distributions.MultivariateNormal(data.mean(0), torch.cov(data.T))
    x = torch.randn(5, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(gauss.log_prob(x), ref.log_prob(x))
    draws = gauss.sample(20000, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(draws.mean(0), data.mean(0), atol=0.03, rtol=0)


@pytest.mark.parametrize("data, match", [
    (torch.zeros(1, 2), "data"), (torch.zeros(5), "data"),
    (torch.tensor([[0.0, 1.0], [np.nan, 2.0], [1.0, 1.0]]), "data"),
    (torch.tensor([[0.0, 1.0], [np.inf, 2.0], [1.0, 1.0]]), "data"),
])
def test_fitted_gaussian_rejects_bad_input(data, match):
    with pytest.raises(ValueError, match=match):
        pc.FittedGaussian(data)


def test_fitted_gaussian_rejects_bad_queries():
    gauss = pc.FittedGaussian(torch.randn(10, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="x"):
        gauss.log_prob(torch.zeros(3, 3))
    for n in (0, 2.5, True):
        with pytest.raises(ValueError, match="n"):
            gauss.sample(n)


@pytest.mark.parametrize("kwargs, match", [
    (dict(activation="tanh"), "activation"), (dict(scale_bound=0.0), "scale_bound"),
    (dict(scale_bound=float("nan")), "scale_bound"), (dict(limit_radius=-1.0), "limit_radius"),
    (dict(limit_radius=True), "limit_radius"),
])
def test_flow_rejects_bad_coupling_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pc.RealNVPPrior(2, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(flow_activation="elu"), "flow_activation"), (dict(flow_scale_bound=0), "flow_scale_bound"),
    (dict(flow_limit_radius=float("inf")), "flow_limit_radius"), (dict(halve_each_round=1), "halve_each_round"),
])
def test_config_rejects_bad_flow_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pc.ClamConfig(**kwargs)


def test_gae_learns_held_out_links_and_checks_its_input():
    ei, n, _ = pc.nx_graph("karate")
    aucs = []
    for k in range(3):
        tr, tp, tn = pc.link_split(ei, n, seed=k)
        Z = pc.fit_gae(tr, n, masked_pairs=torch.cat([tp, tn], 1), seed=k)
        assert Z.shape == (n, 16) and Z.dtype == torch.float64
        aucs.append(pc.roc_auc(pc.gae_probs(Z, tp).numpy(), pc.gae_probs(Z, tn).numpy()))
    assert np.mean(aucs) > 0.6
    with pytest.raises(ValueError, match="edge_index"):
        pc.fit_gae(torch.tensor([[0, 1], [1, 2]]), 3)  # one direction only


@pytest.mark.parametrize("x, cfg, match", [
    (torch.zeros(1, 2), pc.ClamConfig(dim=2), "x"), (torch.zeros(5), pc.ClamConfig(dim=2), "x"),
    (torch.tensor([[0.0, 1.0], [np.nan, 1.0]]), pc.ClamConfig(dim=2), "x"),
    (torch.zeros(5, 2), {"dim": 2}, "cfg"),
])
def test_fit_flow_rejects_bad_input(x, cfg, match):
    with pytest.raises(ValueError, match=match):
        pc.fit_flow(x, cfg)


from companion.pieclam import baselines as _pb, core as _pco, data as _pd, metrics as _pm, prior as _pp

_NAN, _EI = float("nan"), torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # each edge in both directions
PIECLAM_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: _pb.GAE(0), "num_nodes"),
    (lambda: _pd.RingMixture(n_modes=0), "n_modes"),
    (lambda: _pd.RingMixture(std=_NAN), "std"),
    (lambda: _pm.anomaly_scores(None, kind="Q"), "kind"),
    (lambda: _pco.as_batch(torch.tensor([0, 7]), 3), "batch"),
    (lambda: _pco.as_omitted(torch.tensor([[0, 9]]), 3), "omitted"),
    (lambda: _pm.bridge_mass(torch.full((3, 2), _NAN), torch.rand(3, 2), np.array([0, 1, 0]), False, 0.5), "codes"),
    (lambda: _pco.clam_grad(torch.full((3, 2), _NAN), _EI, False), "F"),
    (lambda: _pp.clam_split(0, False), "dim"),
    (lambda: _pb.degree_scores(torch.tensor([[0, 5]]).T, 3), "edge_index"),
    (lambda: _pco.dense_loglik(torch.rand(3, 2), torch.zeros(3, 4), False), "A"),
    (lambda: _pd.disjoint_union([]), "graphs"),
    (lambda: _pm.edge_density(_EI, 1), "num_nodes"),
    (lambda: _pco.edge_logits(torch.rand(3, 2), torch.tensor([[0, 5]]).T, False), "pairs"),
    (lambda: _pco.edge_probs(torch.full((3, 2), _NAN), _EI, False), "F"),
    (lambda: _pb.gae_anomaly_scores(torch.full((3, 2), _NAN), _EI, 3), "Z"),
    (lambda: _pb.gae_probs(torch.rand(3, 2), torch.tensor([[0, 5]]).T), "pairs"),
    (lambda: _pm.lorentz_boost(torch.rand(3, 2), (_NAN,)), "a"),
    (lambda: _pd.nx_graph("zachary"), "name"),
    (lambda: _pd.plant_contextual(10, np.zeros(10), frac=1.5), "frac"),
    (lambda: _pco.check_pairs(torch.tensor([[0, 5]]).T, 3), "pairs"),
    (lambda: _pm.LorentzMap((0.5,), (True, False)), "flip"),
    (lambda: _pd.plant_structural(_EI, 3, frac=_NAN), "frac"),
    (lambda: _pm.prob_error(np.zeros((3, 3)), np.zeros((3, 4))), "P_true"),
    (lambda: _pm.prob_matrix(torch.full((3, 2), _NAN), False), "F"),
    (lambda: _pco.project_cone(torch.full((3, 2), _NAN), True), "F"),
    (lambda: _pm.rapidity(torch.full((3, 2), _NAN)), "F"),
    (lambda: _pm.roc_curve(np.array([_NAN]), np.array([0.5])), "pos_scores"),
    (lambda: _pm.sample_edges(torch.full((3, 2), _NAN), False), "F"),
    (lambda: _pm.sample_graph(None, 0), "num_nodes"),
    (lambda: _pm.sample_graph("result", 5), "result"),
    (lambda: _pd.sbm([2, 2], np.array([[0.5, 1.5], [1.5, 0.5]])), "P"),
    (lambda: _pd.sbm_probs([2, 0], np.eye(2) * 0.5), "sizes"),
    (lambda: _pd.sbm_probs([2, 2], np.eye(3) * 0.5), "P"),
    (lambda: _pco.dense_loglik(torch.rand(3, 2), torch.zeros(3, 3), False, known=torch.ones(3, 3)), "known"),
    (lambda: _pm.spectral_ratio(torch.tensor([[0, 5]]).T, 3), "edge_index"),
    (lambda: _pd.to_dense(torch.tensor([[0, 5]]).T, 3), "edge_index"),
    # issue 49, through companion.validation: float or bool indices, fractional and bool counts,
    # a NaN or bool rate, a 1-D edge list
    (lambda: _pco.as_edge_index(_EI.double(), 3), "edge_index: expected integer indices"),
    (lambda: _pco.as_edge_index(_EI[0], 3), "edge_index: expected 2 dimensions"),
    (lambda: _pco.as_edge_index(_EI, 2.5), "num_nodes: expected an integer"),
    (lambda: _pco.check_pairs(_EI.bool(), 3), "pairs: expected integer indices"),
    (lambda: _pco.as_omitted(torch.tensor([[0.0], [2.0]]), 3), "omitted: expected integer indices"),
    (lambda: _pco.as_batch(torch.tensor([0.0, 0.0, 1.0]), 3), "batch: expected integer indices"),
    (lambda: _pco.lorentz_diag(True, False), "dim: expected an integer"),
    (lambda: _pco.clam_loglik(torch.rand(3, 2), _EI, False, x_min=_NAN), "x_min: expected a finite number > 0"),
    (lambda: _pco.edge_logits(torch.rand(3), _EI, False), "F: expected 2 dimensions"),
    (lambda: _pp.clam_split(4, True, n_attrs=1.5), "n_attrs: expected an integer >= 0"),
    (lambda: _pp.RealNVPPrior(2, noise_std=_NAN), "noise_std: expected a finite number >= 0"),
    (lambda: _pp.RealNVPPrior(2, limit_radius=True), "limit_radius: expected a finite real number"),
    (lambda: pc.ClamConfig(lr_feat_n=True), "lr_feat_n: expected a finite real number"),
    (lambda: pc.ClamConfig(seed=1.0), "seed: expected an integer >= 0"),
    (lambda: _pd.RingMixture().sample(2.0), "n: expected an integer"),
    (lambda: _pb.GAE(4, hidden=True), "hidden: expected an integer"),
]


@pytest.mark.parametrize("call, name", PIECLAM_BAD_INPUTS)
def test_pieclam_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
