"""Unit tests of companion.toping: persistence pinned to hand-computed cases, brute-force Betti
numbers, gudhi (the oracle, when installed) and finite differences; losses, metrics, generators."""

import networkx as nx
import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment

import companion.toping as tp


def _sorted(points):
    return sorted(map(tuple, np.round(points.detach().double().numpy(), 6).tolist()))


def test_triangle_by_hand():
    d = tp.edge_persistence(3, torch.tensor([[0, 1], [1, 2], [0, 2]]), torch.tensor([0.1, 0.2, 0.3]), 1.0)
    assert _sorted(d.h0) == [(0.0, 0.1), (0.0, 0.2), (0.0, 1.0)]
    assert _sorted(d.h1) == [(0.3, 1.0)]
    assert d.h0_edge.tolist() == [0, 1, -1] and d.h1_edge.tolist() == [2]


def test_square_with_chord_by_hand():
    edges = torch.tensor([[0, 1], [1, 2], [2, 3], [0, 3], [0, 2]])
    times = torch.tensor([0.5, 0.1, 0.4, 0.2, 0.3])  # order: (1,2) (0,3) (0,2) (2,3) (0,1)
    d = tp.edge_persistence(4, edges, times, 1.0)
    assert _sorted(d.h0) == [(0.0, 0.1), (0.0, 0.2), (0.0, 0.3), (0.0, 1.0)]
    assert _sorted(d.h1) == [(0.4, 1.0), (0.5, 1.0)]
    assert sorted(d.h1_edge.tolist()) == [0, 2]


def test_tree_and_empty_graph():
    tree = nx.random_labeled_tree(12, seed=1) if hasattr(nx, "random_labeled_tree") else nx.random_tree(12, seed=1)
    edges = torch.tensor(list(tree.edges))
    d = tp.edge_persistence(12, edges, torch.rand(11, dtype=torch.float64), 1.0)
    assert len(d.h1) == 0 and len(d.h0) == 12 and int((d.h0_edge == -1).sum()) == 1
    empty = tp.edge_persistence(5, torch.zeros(0, 2, dtype=torch.long), torch.zeros(0), 0.5)
    assert _sorted(empty.h0) == [(0.0, 0.5)] * 5 and len(empty.h1) == 0


def _random_graph(seed, n=12, p=0.3):
    g = nx.gnp_random_graph(n, p, seed=seed)
    return torch.tensor(list(g.edges), dtype=torch.long).reshape(-1, 2), g


@pytest.mark.parametrize("seed", range(25))
def test_betti_numbers_of_both_parts_brute_force(seed):
    edges, g = _random_graph(seed)
    f = torch.rand(len(edges), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    dx, de = tp.cut_persistence(12, edges, f, 0.5)
    for d, part in ((dx, f > 0.5), (de, f <= 0.5)):
        sub = nx.Graph()
        sub.add_nodes_from(range(12))
        sub.add_edges_from(edges[part].tolist())
        c = nx.number_connected_components(sub)
        assert int((d.h0_edge == -1).sum()) == c
        assert len(d.h1) == int(part.sum()) - 12 + c


def test_cut_times_and_caps():
    edges = torch.tensor([[0, 1], [1, 2], [0, 2], [2, 3]])
    f = torch.tensor([0.9, 0.8, 0.6, 0.2])
    dx, de = tp.cut_persistence(4, edges, f, 0.5)
    assert np.allclose(sorted(dx.h0[:, 1].tolist()), [0.1, 0.2, 0.5, 0.5])  # deaths at 1 - f
    assert _sorted(dx.h1) == [(0.4, 0.5)]
    assert np.allclose(sorted(de.h0[:, 1].tolist()), [0.2, 0.5, 0.5, 0.5])  # deaths at f


@pytest.mark.parametrize("seed", range(10))
def test_equals_gudhi(seed):
    gudhi = pytest.importorskip("gudhi")
    edges, _ = _random_graph(seed, n=15, p=0.25)
    times = torch.rand(len(edges), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    d = tp.edge_persistence(15, edges, times, 1.0)
    st = gudhi.SimplexTree()
    for v in range(15):
        st.insert([v], filtration=0.0)
    for (u, v), t in zip(edges.tolist(), times.tolist()):
        st.insert([u, v], filtration=t)
    st.compute_persistence(persistence_dim_max=True)
    g0 = np.sort(st.persistence_intervals_in_dimension(0)[:, 1])
    g1 = np.sort(st.persistence_intervals_in_dimension(1)[:, 0])
    ours0 = np.sort(np.where(d.h0_edge >= 0, d.h0[:, 1], np.inf))
    assert np.array_equal(np.isinf(g0), np.isinf(ours0))
    assert np.allclose(g0[np.isfinite(g0)], ours0[np.isfinite(ours0)], atol=1e-9)
    assert np.allclose(g1, np.sort(d.h1[:, 0].numpy()), atol=1e-9)


def test_gradients_sparse_and_match_finite_differences():
    edges, _ = _random_graph(3, n=14, p=0.3)
    f = torch.rand(len(edges), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    f = f.requires_grad_(True)

    def total(v):
        dx, de = tp.cut_persistence(14, edges, v, 0.5)
        return sum((d.h0[:, 1] - d.h0[:, 0]).sum() + (d.h1[:, 1] - d.h1[:, 0]).sum() for d in (dx, de))

    total(f).backward()
    h = 1e-6
    fd = torch.zeros_like(f)
    for e in range(len(f)):
        up, down = f.detach().clone(), f.detach().clone()
        up[e] += h
        down[e] -= h
        fd[e] = (total(up) - total(down)) / (2 * h)
    assert torch.allclose(f.grad, fd, atol=1e-4)
    # every edge is paired (kills or creates): its gradient is +-1, none leaks elsewhere
    assert set(np.round(np.abs(f.grad.numpy()), 9).tolist()) == {1.0}
    dx, de = tp.cut_persistence(14, edges, f.detach().requires_grad_(True), 0.5)
    paired = set(dx.h0_edge.tolist()) | set(dx.h1_edge.tolist())
    g = torch.autograd.grad(dx.h0.sum() + dx.h1.sum(), f, allow_unused=True)
    assert g == (None,) or all(g[0][e] == 0 for e in range(len(f)) if e not in paired)


def test_ties_give_a_deterministic_pairing():
    edges = torch.tensor([[0, 1], [1, 2], [0, 2], [2, 3]])
    runs = [tp.edge_persistence(4, edges, torch.full((4,), 0.3), 1.0) for _ in range(3)]
    assert all(r.h1_edge.tolist() == [2] for r in runs)  # ties broken by edge index


def test_batch_equals_graph_by_graph():
    graphs = tp.make_ba_house_grid(6, base_extra_edges=2, seed=4)
    batch = tp.collate(graphs)
    f = torch.rand(len(batch.edges), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dx, _ = tp.batch_cut_persistence(batch.x.shape[0], batch.edges, f, 0.5, node_graph=batch.node_graph)
    start = 0
    for i, g in enumerate(graphs):
        one, _ = tp.cut_persistence(g.num_nodes, g.edges, f[start:start + len(g.edges)], 0.5)
        start += len(g.edges)
        assert _sorted(one.h0) == _sorted(dx.h0[dx.h0_seg == i])
        assert _sorted(one.h1) == _sorted(dx.h1[dx.h1_seg == i])


@pytest.mark.parametrize("bad, match", [
    (dict(edges=torch.tensor([[0, 5]])), "edges: node ids"),
    (dict(edges=torch.tensor([[1, 1]])), "self-loops"),
    (dict(times=torch.tensor([float("nan")])), "times: must be finite"),
    (dict(times=torch.tensor([0.1, 0.2])), "times: expected shape"),
    (dict(edges=torch.tensor([0.0, 1.0])), "edges: expected integer"),
    (dict(num_nodes=0), "num_nodes"),
    (dict(times=torch.tensor([2.0])), "times: the kept edges"),
])
def test_persistence_bad_input(bad, match):
    args = dict(num_nodes=3, edges=torch.tensor([[0, 1]]), times=torch.tensor([0.1]), cap=1.0) | bad
    with pytest.raises(ValueError, match=match):
        tp.edge_persistence(**args)


@pytest.mark.parametrize("t", [0, 1, 1.5, -0.1, True])
def test_cut_outside_unit_interval(t):
    with pytest.raises(ValueError, match=r"^t: expected a (real )?number"):
        tp.cut_persistence(3, torch.tensor([[0, 1]]), torch.tensor([0.3]), t)


def test_cut_rejects_nan_and_out_of_range_scores():
    with pytest.raises(ValueError, match="f: must be finite"):
        tp.cut_persistence(3, torch.tensor([[0, 1]]), torch.tensor([float("inf")]))
    with pytest.raises(ValueError, match="f: edge scores"):
        tp.cut_persistence(3, torch.tensor([[0, 1]]), torch.tensor([1.2]))


def test_undirected_averages_and_rejects_asymmetry():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    edges, vals = tp.undirected(ei, torch.tensor([1.0, 3.0, 0.0, 1.0]))
    assert edges.tolist() == [[0, 1], [1, 2]] and vals.tolist() == [2.0, 0.5]
    with pytest.raises(ValueError, match="edge_index: not symmetric"):
        tp.undirected(torch.tensor([[0, 1, 1], [1, 0, 2]]))
    with pytest.raises(ValueError, match="edge_index: expected shape"):
        tp.undirected(torch.tensor([0, 1]))


def _w1_brute(a, b, da, db):
    """W1 by an assignment problem on the diagonal-augmented cost matrix."""
    n, m = len(a), len(b)
    big = 1e9
    C = np.zeros((n + m, n + m))
    C[:n, :m] = np.abs(np.subtract.outer(a, b))
    C[:n, m:] = np.where(np.eye(n, dtype=bool), da[:, None], big)
    C[n:, :m] = np.where(np.eye(m, dtype=bool), db[None, :], big)
    r, c = linear_sum_assignment(C)
    return C[r, c].sum()


@pytest.mark.parametrize("seed", range(20))
def test_line_w1_equals_assignment(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(0, 7, 2)
    a, b = rng.random(n), rng.random(m)
    da, db = rng.random(n) * 0.5, rng.random(m) * 0.5
    assert tp.diagram_w1_line(a, b, da, db) == pytest.approx(_w1_brute(a, b, da, db), abs=1e-12)


def test_batched_w1_equals_one_by_one():
    rng = np.random.default_rng(0)
    a = [rng.random(k) for k in (3, 0, 5)]
    b = [rng.random(k) for k in (2, 4, 0)]
    da, db = [x / 3 for x in a], [x / 3 for x in b]
    got = tp.diagram_w1_lines(a, b, da, db)
    assert np.allclose(got, [_w1_brute(*z) for z in zip(a, b, da, db)])


def test_gap_of_the_oracle_house_by_hand():
    # a tree base plus a house: the oracle cut puts the 6 house edges in G_X
    g = tp.make_ba_house_grid(2, mode="housegrid", seed=0)
    g = next(x for x in g if x.motifs == ("house",))
    f = 0.05 + 0.9 * g.edge_gt.double()
    ex = len(g.edges) - 6
    # H0: 4 low and n-4 essential in T_X, ex low and n-ex essential in T_eps; the surplus of
    # n-4-(n-ex) essential points of T_X goes to the diagonal (0.25) and low points of T_eps (0.025)
    # cheaper than a match (0.45); H1: two house cycles (0.05, 0.5) to the diagonal at 0.225
    want = (ex - 4) * 0.275 + 2 * 0.225
    assert tp.topo_gap(g, f, filtration="edge") == pytest.approx(want, abs=1e-9)


def test_rational_hat_empty_and_shapes():
    hats = tp.RationalHat(4)
    empty = tp.edge_persistence(1, torch.zeros(0, 2, dtype=torch.long), torch.zeros(0), 0.5)
    empty.h0, empty.h0_seg, empty.h0_edge = empty.h0[:0], empty.h0_seg[:0], empty.h0_edge[:0]
    assert torch.equal(hats(empty, 3), torch.zeros(3, 8))
    d = tp.edge_persistence(3, torch.tensor([[0, 1]]), torch.tensor([0.2]), 0.5)
    v = hats(d, 1)
    c, r = hats.centres[0], hats.radii[0].abs()
    by_hand = sum(1 / (1 + torch.linalg.norm(torch.tensor(x) - c, dim=1))
                  - 1 / (1 + (r - torch.linalg.norm(torch.tensor(x) - c, dim=1)).abs())
                  for x in ([0.0, 0.2], [0.0, 0.5], [0.0, 0.5])) / 2
    assert torch.allclose(v[0, :4], by_hand) and torch.equal(v[0, 4:], torch.zeros(4))


def test_topo_discrepancy_by_hand_and_bad_input():
    vx = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    ve = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    # |mean differences| = [2, 1, 1]: top-2 sum 3
    assert float(tp.topo_discrepancy(vx, ve)) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="veps"):
        tp.topo_discrepancy(vx, ve[:1])
    with pytest.raises(ValueError, match="top"):
        tp.topo_discrepancy(vx, ve, top=4)


def test_gaussian_prior_by_hand_and_at_the_floor():
    p = torch.tensor([0.25, 0.75])
    rho = torch.full((2,), float(np.log(np.expm1(0.25 - 1e-3))))
    dens = 0.5 / (0.25 * np.sqrt(2 * np.pi)) * (1 + np.exp(-0.5 * 4))
    want = -np.log(dens) + 0.005 * 2 / 0.25 ** 2
    assert float(tp.gaussian_mixture_prior(p, rho)) == pytest.approx(want, rel=1e-6)
    floor = tp.gaussian_mixture_prior(torch.tensor([0.0, 1.0, 0.5]), torch.full((2,), -50.0))
    assert torch.isfinite(floor)
    with pytest.raises(ValueError, match="p: expected at least one element"):
        tp.gaussian_mixture_prior(torch.zeros(0), rho)
    with pytest.raises(ValueError, match="weight"):
        tp.gaussian_mixture_prior(p, rho, weight=1.0)


def test_bernoulli_info_loss_zero_at_r():
    assert float(tp.bernoulli_info_loss(torch.full((5,), 0.7), 0.7)) == pytest.approx(0.0, abs=1e-5)
    with pytest.raises(ValueError, match="r: expected"):
        tp.bernoulli_info_loss(torch.full((5,), 0.7), 1.0)


def test_two_means_is_the_best_split_and_ashman():
    s = np.random.default_rng(0).random(30)
    lo, hi = tp.two_means_1d(s)
    ss = np.sort(s)
    sse = [ss[:k].var() * k + ss[k:].var() * (30 - k) for k in range(1, 30)]
    assert len(lo) == int(np.argmin(sse)) + 1
    two = np.r_[np.full(10, 0.2), np.full(10, 0.8)] + np.tile([-0.01, 0.01], 10)
    assert tp.ashman_d(two) == pytest.approx(np.sqrt(2) * 0.6 / np.sqrt(2 * 0.01 ** 2))


def test_explanation_auc_and_one_class():
    assert tp.explanation_auc([0.1, 0.9, 0.8, 0.2], [0, 1, 1, 0]) == 1.0
    with pytest.raises(ValueError, match="edge_gt: needs both"):
        tp.explanation_auc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="edge_gt: expected shape"):
        tp.explanation_auc([0.1, 0.2], [1, 0, 1])
    with pytest.raises(ValueError, match="scores: must be finite"):
        tp.explanation_auc([np.nan, 0.2], [1, 0])


def test_generators_motifs_balance_and_seed():
    for mode, sizes in [("housegrid", {("house",): 6, ("grid",): 12})]:
        graphs = tp.make_ba_house_grid(40, mode=mode, seed=2)
        for g in graphs:
            assert int(g.edge_gt.sum()) == sizes[g.motifs]
            assert (g.edges[:, 0] < g.edges[:, 1]).all()
    graphs = tp.make_ba_house_grid(60, mode="nrnd", n_max=2, base_extra_edges=3, seed=1)
    assert sum(g.y for g in graphs) == 30
    for g in graphs:
        want = sum({"house": 6, "grid": 12}[m] for m in g.motifs)
        assert int(g.edge_gt.sum()) == want and (g.y == 1) == bool(g.motifs)
        assert nx.is_connected(g.to_networkx())
    again = tp.make_ba_house_grid(60, mode="nrnd", n_max=2, base_extra_edges=3, seed=1)
    assert all(torch.equal(a.edges, b.edges) and torch.equal(a.edge_gt, b.edge_gt) for a, b in zip(graphs, again))
    for mode in ("or", "and"):
        assert sum(g.y for g in tp.make_ba_house_grid(20, mode=mode, seed=0)) == 10


def test_size_matching_closes_the_node_count_shortcut():
    from scipy.stats import ks_2samp

    graphs = tp.make_ba_house_grid(1000, mode="nrnd", n_max=2, base_nodes=4, seed=0)
    n = [[g.num_nodes for g in graphs if g.y == y] for y in (0, 1)]
    assert set(n[0]) == set(n[1]) and ks_2samp(*n).pvalue > 1e-3  # the same size distribution


def test_chords_break_the_cycle_explainer():
    tree = [g for g in tp.make_ba_house_grid(40, mode="housegrid", seed=0)]
    chords = [g for g in tp.make_ba_house_grid(40, mode="housegrid", base_extra_edges=4, seed=0)]
    auc = lambda gs: tp.explanation_auc(np.concatenate([tp.cycle_edge_scores(g) for g in gs]),
                                        torch.cat([g.edge_gt for g in gs]).numpy())
    assert auc(tree) == 1.0 and auc(chords) < 0.9


@pytest.mark.parametrize("kw, match", [
    (dict(n_graphs=1), "n_graphs"), (dict(mode="xor"), "mode"), (dict(n_max=0), "n_max"),
    (dict(base_extra_edges=-1), "base_extra_edges"), (dict(base_extra_edges=99), "base_extra_edges"),
])
def test_generator_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        tp.make_ba_house_grid(**({"n_graphs": 10} | kw))


def test_perturbed_scores():
    g = tp.make_ba_house_grid(2, mode="housegrid", seed=0)[0]
    rng = np.random.default_rng(0)
    assert ((tp.perturbed_scores(g, "add", 0, rng, on="edge") > 0.5) == g.edge_gt.numpy()).all()
    assert (tp.perturbed_scores(g, "add", 2, rng, on="edge") > 0.5).sum() == int(g.edge_gt.sum()) + 2
    assert (tp.perturbed_scores(g, "drop", 2, rng, on="edge") > 0.5).sum() == int(g.edge_gt.sum()) - 2
    with pytest.raises(ValueError, match="how"):
        tp.perturbed_scores(g, "swap", 1, rng)
    with pytest.raises(ValueError, match="k: at most"):
        tp.perturbed_scores(g, "drop", 99, rng)


def test_models_train_and_the_topological_term_has_a_gradient():
    graphs = tp.make_ba_house_grid(40, base_extra_edges=2, seed=0)
    torch.manual_seed(0)
    model = tp.TopInG(tp.EdgeWeightedGIN(1, hidden=8), seed=0)
    model.train()
    out, p, aux = model(tp.collate(graphs[:32]))
    assert out.shape == (32, 2) and p.shape == (sum(len(g.edges) for g in graphs[:32]),)
    grads = torch.autograd.grad(aux["topo"], list(model.extractor.parameters()), allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    for make in (lambda: tp.GSAT(tp.EdgeWeightedGIN(1, hidden=8)),
                 lambda: tp.GINClassifier(tp.EdgeWeightedGIN(1, hidden=8))):
        m = make()
        hist = tp.fit(m, graphs[:32], graphs[32:], epochs=2, batch_size=16)
        assert len(hist.val_acc) == 2 and 0 <= hist.best_epoch < 2
    sal = tp.saliency_explain(m, tp.collate(graphs[32:]))
    assert sal.shape == (sum(len(g.edges) for g in graphs[32:]),) and (sal >= 0).all()
    with pytest.raises(ValueError, match="epochs"):
        tp.fit(m, graphs[:32], graphs[32:], epochs=0)
    with pytest.raises(ValueError, match="train"):
        tp.fit(m, [], graphs[32:], epochs=1)
    with pytest.raises(ValueError, match="graphs"):
        tp.collate([])


def test_spmotif_labels_motifs_and_spurious_bases():
    graphs = tp.make_spmotif(300, bias=0.9, split="train", seed=0)
    assert [sum(g.y == k for g in graphs) for k in range(3)] == [300, 300, 300]
    for g in graphs[:60]:
        assert int(g.edge_gt.sum()) == {0: 5, 1: 6, 2: 6}[g.y] and nx.is_connected(g.to_networkx())
    agree = np.mean([g.base == g.y for g in graphs])
    assert 0.86 < agree < 0.94  # the label's own base with probability b
    test = tp.make_spmotif(300, bias=0.9, split="test", seed=0)
    assert 0.28 < np.mean([g.base == g.y for g in test]) < 0.39  # independent in the test split
    clean = tp.make_spmotif(5, bias=0.5, perturb=0.0, seed=1)
    noisy = tp.make_spmotif(5, bias=0.5, perturb=0.2, seed=1)
    assert sum(len(g.edges) for g in noisy) > sum(len(g.edges) for g in clean)
    with pytest.raises(ValueError, match="bias"):
        tp.make_spmotif(5, bias=1.5)
    with pytest.raises(ValueError, match="split"):
        tp.make_spmotif(5, bias=0.5, split="dev")
    with pytest.raises(ValueError, match="perturb"):
        tp.make_spmotif(5, bias=0.5, perturb=1.0)


def test_self_check_passes_and_total_persistence_by_hand():
    ok, err = tp.persistence_self_check(n_graphs=8, n_grad=2, seed=3)
    assert ok and err < 1e-6
    # triangle cut at 0.5: G_X = {e0} (time 0.1), G_eps = {e1, e2} (times 0.2, 0.3)
    f = torch.tensor([0.9, 0.2, 0.3], dtype=torch.float64)
    total = tp.total_persistence(3, torch.tensor([[0, 1], [1, 2], [0, 2]]), f)
    # T_X: (0, .1) + 2 essential (0, .5); T_eps: (0, .2), (0, .3), 1 essential (0, .5)
    assert float(total) == pytest.approx(0.1 + 1.0 + 0.2 + 0.3 + 0.5)


@pytest.mark.parametrize("make, match", [
    (lambda: tp.EdgeWeightedGIN(0), "in_dim"),
    (lambda: tp.EdgeWeightedGIN(1, dropout=1.0), "dropout"),
    (lambda: tp.TopInG(tp.EdgeWeightedGIN(1, hidden=4), cut=1.0), "cut"),
    (lambda: tp.TopInG(tp.EdgeWeightedGIN(1, hidden=4), alpha=-1.0), "alpha"),
    (lambda: tp.TopInG(tp.EdgeWeightedGIN(1, hidden=4), tau=0.0), "tau"),
    (lambda: tp.GSAT(tp.EdgeWeightedGIN(1, hidden=4), r0=1.0), "r0"),
    (lambda: tp.GSAT(tp.EdgeWeightedGIN(1, hidden=4), n_classes=1), "n_classes"),
])
def test_models_bad_input(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# --- second pass: the paper's node filtration, exact W1 at any cut, refusals -------------------

import itertools  # noqa: E402


@pytest.mark.parametrize("edges", [[[0, 1], [0, 1]], [[0, 1], [1, 0]], [[0, 1], [1, 2], [2, 1]]])
def test_duplicate_and_reversed_edges_are_refused(edges):
    e = torch.tensor(edges)
    with pytest.raises(ValueError, match="edges: each undirected edge must appear once"):
        tp.cut_persistence(3, e, torch.full((len(e),), 0.3))
    with pytest.raises(ValueError, match="edges: each undirected edge must appear once"):
        tp.node_cut_persistence(3, e, torch.full((3,), 0.3))


def test_node_cut_by_hand():
    # triangle 0-1-2 with node scores 0.9, 0.8, 0.7 and a pendant 3 (0.2) on node 2
    edges = torch.tensor([[0, 1], [1, 2], [0, 2], [2, 3]])
    f = torch.tensor([0.9, 0.8, 0.7, 0.2], dtype=torch.float64)
    dx, de = tp.node_cut_persistence(4, edges, f)
    # T_X: vertices at 0.1, 0.2, 0.3; the merges are born and die together (dropped); one
    # essential class born at 0.1 and the cycle closed by the last edge at 0.3
    assert _sorted(dx.h0) == [(0.1, 0.5)] and _sorted(dx.h1) == [(0.3, 0.5)]
    # T_eps holds node 3 alone (the edge 2-3 crosses the cut): one essential class born at 0.2
    assert _sorted(de.h0) == [(0.2, 0.5)] and len(de.h1) == 0


def test_node_cut_elder_rule_by_hand():
    # path 0 - 1 - 2 with scores 0.9, 0.6, 0.8: vertices of T_X at 0.1, 0.4, 0.2; edges at
    # max(ends) = 0.4, 0.4. Node 2 (born 0.2) is merged into node 0's class (born 0.1) at 0.4.
    edges = torch.tensor([[0, 1], [1, 2]])
    f = torch.tensor([0.9, 0.6, 0.8], dtype=torch.float64)
    dx, de = tp.node_cut_persistence(3, edges, f)
    assert _sorted(dx.h0) == [(0.1, 0.5), (0.2, 0.4)]
    assert len(de.h0) == 0 and len(de.h1) == 0  # no node at or below the cut


@pytest.mark.parametrize("seed", range(15))
def test_node_cut_betti_numbers_brute_force(seed):
    edges, g = _random_graph(seed)
    f = torch.rand(12, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    for d, side in zip(tp.node_cut_persistence(12, edges, f, 0.4), (f > 0.4, f <= 0.4)):
        keep = np.flatnonzero(side.numpy()).tolist()
        sub = g.subgraph(keep)
        c = nx.number_connected_components(sub) if keep else 0
        assert int((d.h0_edge == -1).sum()) == c
        assert len(d.h1) == sub.number_of_edges() - len(keep) + c


@pytest.mark.parametrize("seed", range(6))
def test_node_filtration_equals_gudhi_lower_star(seed):
    gudhi = pytest.importorskip("gudhi")
    edges, g = _random_graph(seed, n=12, p=0.35)
    f = torch.rand(12, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    dx, _ = tp.node_cut_persistence(12, edges, f, 0.3)
    st = gudhi.SimplexTree()
    keep = f > 0.3
    for v in range(12):
        if keep[v]:
            st.insert([v], filtration=float(1 - f[v]))
    for u, v in edges.tolist():
        if keep[u] and keep[v]:
            st.insert([u, v], filtration=float(1 - min(f[u], f[v])))
    st.compute_persistence(persistence_dim_max=True)
    ours = sorted(tuple(round(x, 9) for x in p) for p in dx.h0[dx.h0_edge >= 0].tolist())
    theirs = sorted((round(b, 9), round(d, 9)) for b, d in st.persistence_intervals_in_dimension(0)
                    if np.isfinite(d) and d > b)
    assert ours == theirs
    ess = sorted(round(b, 9) for b, d in st.persistence_intervals_in_dimension(0) if np.isinf(d))
    assert sorted(round(b, 9) for b in dx.h0[dx.h0_edge == -1, 0].tolist()) == ess


def test_node_filtration_gradients_match_finite_differences():
    edges, _ = _random_graph(4, n=12, p=0.35)
    f = torch.rand(12, generator=torch.Generator().manual_seed(4), dtype=torch.float64).requires_grad_(True)
    total = lambda v: tp.total_persistence(12, edges, v, filtration="node")
    (grad,) = torch.autograd.grad(total(f), f)
    h = 1e-6
    fd = torch.stack([(total(f.detach() + h * e) - total(f.detach() - h * e)) / (2 * h)
                      for e in torch.eye(12, dtype=torch.float64)])
    assert torch.allclose(grad, fd, atol=1e-4) and grad.abs().sum() > 0


def _w1_enumerate(P, Q):
    """W1 with the L_inf metric by enumerating every partial matching (tiny diagrams only)."""
    P, Q = np.asarray(P, float).reshape(-1, 2), np.asarray(Q, float).reshape(-1, 2)
    dp, dq = (P[:, 1] - P[:, 0]) / 2, (Q[:, 1] - Q[:, 0]) / 2
    best = dp.sum() + dq.sum()
    for k in range(1, min(len(P), len(Q)) + 1):
        for ps in itertools.combinations(range(len(P)), k):
            for qs in itertools.permutations(range(len(Q)), k):
                cost = sum(np.abs(P[i] - Q[j]).max() for i, j in zip(ps, qs))
                cost += dp.sum() - dp[list(ps)].sum() + dq.sum() - dq[list(qs)].sum()
                best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(25))
def test_diagram_w1_equals_enumeration(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(0, 5, 2)
    P = np.sort(rng.random((n, 2)), 1)
    Q = np.sort(rng.random((m, 2)), 1)
    assert tp.diagram_w1(P, Q) == pytest.approx(_w1_enumerate(P, Q), abs=1e-12)


@pytest.mark.parametrize("t", [0.3, 0.5, 0.7])
def test_topo_gap_exact_at_every_cut(t):
    # the gap of topo_gaps equals the enumerated W1 of the two diagrams, dimension by dimension,
    # at cuts where the two parts' cycles die at different times (1 - t and t)
    g = next(x for x in tp.make_ba_house_grid(6, mode="housegrid", base_extra_edges=3, seed=3)
             if x.motifs == ("house",))
    rng = np.random.default_rng(0)
    for filtration, n in (("node", g.num_nodes), ("edge", len(g.edges))):
        f = rng.random(n)
        cut = tp.node_cut_persistence if filtration == "node" else tp.cut_persistence
        dx, de = cut(g.num_nodes, g.edges, torch.tensor(f), t)
        want = 0.0
        for dim in (0, 1):
            P, Q = dx.points(dim)[0].numpy(), de.points(dim)[0].numpy()
            P, Q = P[P[:, 1] > P[:, 0]], Q[Q[:, 1] > Q[:, 0]]
            if len(P) + len(Q) <= 9:
                want += _w1_enumerate(P, Q)
            else:  # too many to enumerate: the assignment on the augmented matrix
                want += tp.diagram_w1(P, Q)
        assert tp.topo_gap(g, f, t, filtration=filtration) == pytest.approx(want, abs=1e-9)


def test_topo_gap_at_cut_other_than_half_by_hand():
    # two disjoint triangles, edge filtration cut at t = 0.3: A (scores .9 .8 .6) in G_X, B
    # (.1 .2 .25) in G_eps. T_X: H0 deaths .1 .2 and 4 essential at .7; cycle (.4, .7).
    # T_eps: H0 deaths .1 .2 and 4 essential at .3; cycle (.25, .3).
    edges = torch.tensor([[0, 1], [1, 2], [0, 2], [3, 4], [4, 5], [3, 5]])
    g = tp.Graph(x=torch.ones(6, 1), edges=edges, y=1, edge_gt=torch.tensor([True] * 3 + [False] * 3))
    f = np.array([0.9, 0.8, 0.6, 0.1, 0.2, 0.25])
    h0 = 4 * 0.4  # the essential classes matched .7 <-> .3 (cheaper than the diagonal, .35 + .15)
    # the cycles are max(|.4 - .25|, |.7 - .3|) = .4 apart, so both go to the diagonal:
    # .15 + .025. Matching them by birth alone (.15) was the old error.
    h1 = 0.15 + 0.025
    assert tp.topo_gap(g, f, 0.3, filtration="edge") == pytest.approx(h0 + h1, abs=1e-12)


def test_line_w1_refuses_nan_and_negative_costs():
    with pytest.raises(ValueError, match=r"a\[0\]: must be finite"):
        tp.diagram_w1_line([np.nan, 0.2], [0.1], [0.1, 0.1], [0.1])
    with pytest.raises(ValueError, match=r"b\[0\]: must be finite"):
        tp.diagram_w1_line([0.2], [np.inf], [0.1], [0.1])
    with pytest.raises(ValueError, match=r"diag_a\[0\]: a distance to the diagonal cannot be negative"):
        tp.diagram_w1_lines([np.array([0.2])], [np.array([0.1])], [np.array([-0.1])], [np.array([0.1])])
    with pytest.raises(ValueError, match=r"diag_b\[0\]: expected 1 values"):
        tp.diagram_w1_line([0.2], [0.1], [0.1], [0.1, 0.2])
    # a point at position 0 with no NaN anywhere is a real point, never padding
    assert tp.diagram_w1_line([0.0], [0.0], [0.3], [0.3]) == pytest.approx(0.0)


def test_diagram_w1_bad_input():
    with pytest.raises(ValueError, match="P: expected points of shape"):
        tp.diagram_w1(np.zeros(3), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="Q: must be finite"):
        tp.diagram_w1(np.zeros((1, 2)), np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match="P: a point dies before"):
        tp.diagram_w1(np.array([[0.5, 0.1]]), np.zeros((0, 2)))


@pytest.mark.parametrize("bad, match", [
    (torch.tensor([np.nan, 0.5]), "p: contains NaN or inf"),
    (torch.tensor([0.5, 1.5]), "p: scores must lie in"),
    (torch.tensor([-0.1, 0.5]), "p: scores must lie in"),
])
def test_priors_refuse_bad_scores(bad, match):
    rho = torch.zeros(2)
    with pytest.raises(ValueError, match=match):
        tp.gaussian_mixture_prior(bad, rho)
    with pytest.raises(ValueError, match=match):
        tp.bernoulli_info_loss(bad, 0.7)


def test_negative_weights_are_refused():
    with pytest.raises(ValueError, match="gamma"):
        tp.gaussian_mixture_prior(torch.tensor([0.5]), torch.zeros(2), gamma=-0.1)
    with pytest.raises(ValueError, match="gamma"):
        tp.TopInG(tp.EdgeWeightedGIN(1, hidden=4), gamma=-0.1)
    with pytest.raises(ValueError, match="beta"):
        tp.TopInG(tp.EdgeWeightedGIN(1, hidden=4), beta=-1.0)
    with pytest.raises(ValueError, match="lam"):
        tp.GSAT(tp.EdgeWeightedGIN(1, hidden=4), lam=-1.0)
    with pytest.raises(ValueError, match="filtration"):
        tp.TopInG(tp.EdgeWeightedGIN(1, hidden=4), filtration="faces")


def test_topo_gaps_errors_name_fs():
    gs = tp.make_ba_house_grid(2, mode="housegrid", seed=0)
    good = [np.full(g.num_nodes, 0.3) for g in gs]
    with pytest.raises(ValueError, match=r"fs: expected one score vector per graph"):
        tp.topo_gaps(gs, good[:1])
    with pytest.raises(ValueError, match=r"fs\[1\]: expected shape"):
        tp.topo_gaps(gs, [good[0], np.full(3, 0.3)])
    with pytest.raises(ValueError, match=r"fs\[0\]: must be finite"):
        tp.topo_gaps(gs, [np.r_[np.nan, good[0][1:]], good[1]])
    with pytest.raises(ValueError, match=r"fs\[1\]: scores must lie in"):
        tp.topo_gaps(gs, [good[0], good[1] + 2])
    with pytest.raises(ValueError, match=r"fs\[0\]: expected shape"):  # node scores to the edge filtration
        tp.topo_gaps(gs, good, filtration="edge")
    with pytest.raises(ValueError, match="filtration"):
        tp.topo_gaps(gs, good, filtration="faces")


def test_gsat_follows_its_official_schedule():
    m = tp.GSAT(tp.EdgeWeightedGIN(1, hidden=4))
    assert [m.r(e) for e in (0, 9, 10, 19, 20, 99)] == [0.9, 0.9, 0.8, 0.8, 0.7, 0.7]
    assert m.selection_start == 20
    graphs = tp.make_ba_house_grid(40, base_extra_edges=2, seed=0)
    hist = tp.fit(m, graphs[:32], graphs[32:], epochs=22, batch_size=16)
    assert hist.best_epoch >= 20  # no model is selected before r reaches its final value


def test_fit_snapshots_and_bad_input():
    graphs = tp.make_ba_house_grid(40, base_extra_edges=2, seed=0)
    m = tp.GINClassifier(tp.EdgeWeightedGIN(1, hidden=4))
    hist = tp.fit(m, graphs[:32], graphs[32:], epochs=3, batch_size=16, snapshots=(1, 2))
    assert set(hist.snapshots) == {1, 2}
    with pytest.raises(ValueError, match="lr"):
        tp.fit(m, graphs[:32], graphs[32:], epochs=1, lr=0.0)
    with pytest.raises(ValueError, match="batch_size"):
        tp.fit(m, graphs[:32], graphs[32:], epochs=1, batch_size=0)


def test_toping_node_model_reads_the_rationale_only():
    graphs = tp.make_ba_house_grid(8, base_extra_edges=2, seed=0)
    batch = tp.collate(graphs)
    torch.manual_seed(0)
    node = tp.TopInG(tp.EdgeWeightedGIN(1, hidden=8), n_hats=3)
    first = tp.TopInG(tp.EdgeWeightedGIN(1, hidden=8), n_hats=3, filtration="edge", head_complement=True)
    assert node.head[0].in_features == 8 + 6 and first.head[0].in_features == 8 + 12
    node.eval()
    out, p, aux = node(batch)
    assert out.shape == (8, 2) and p.shape == (len(batch.edges),)
    q = torch.sigmoid(node.node_logits(batch))
    assert torch.allclose(p, torch.minimum(q[batch.edges[:, 0]], q[batch.edges[:, 1]]))
    assert set(aux) == {"topo", "prior"} and all(torch.isfinite(v) for v in aux.values())


def test_node_truth_perturbations_decoy_and_shortcuts():
    g = next(x for x in tp.make_ba_house_grid(6, mode="housegrid", seed=0) if x.motifs == ("house",))
    truth = tp.node_truth(g)
    assert truth.sum() == 5
    rng = np.random.default_rng(0)
    f = tp.perturbed_scores(g, "add", 0, rng)
    assert f.shape == (g.num_nodes,) and ((f > 0.5) == truth).all()
    assert (tp.perturbed_scores(g, "add", 2, rng) > 0.5).sum() == 7
    decoy = np.zeros(g.num_nodes, dtype=bool)
    decoy[np.flatnonzero(~truth)[:5]] = True
    assert ((tp.perturbed_scores(g, "add", 0, rng, truth=decoy) > 0.5) == decoy).all()
    with pytest.raises(ValueError, match="truth"):
        tp.perturbed_scores(g, "add", 0, rng, truth=decoy[:3])
    with pytest.raises(ValueError, match="k: expected an integer"):
        tp.perturbed_scores(g, "add", -1, rng)
    with pytest.raises(ValueError, match="on"):
        tp.perturbed_scores(g, "add", 0, rng, on="faces")
    deg = tp.degree_edge_scores(g)
    assert deg.shape == (len(g.edges),) and (deg >= 2).all()
    assert tp.cut_share([0.2, 0.6, 0.9, 0.1]) == 0.5
    with pytest.raises(ValueError, match=r"t: expected a number in \(0, 1\)"):
        tp.cut_share([0.2], t=1.0)


def test_distribution_gap_of_one_graph_is_its_gap_and_refuses_bad_fs():
    gs = tp.make_ba_house_grid(3, mode="housegrid", base_extra_edges=2, seed=5)
    rng = np.random.default_rng(1)
    fs = [rng.random(g.num_nodes) for g in gs]
    assert tp.distribution_gap(gs[:1], fs[:1]) == pytest.approx(tp.topo_gap(gs[0], fs[0]), abs=1e-12)
    # the optimal coupling can only lower the mean of the per-graph (identity-coupled) gaps
    assert tp.distribution_gap(gs, fs) <= tp.topo_gaps(gs, fs).mean() + 1e-12
    with pytest.raises(ValueError, match=r"fs\[2\]: must be finite"):
        tp.distribution_gap(gs, fs[:2] + [np.full(gs[2].num_nodes, np.nan)])


from companion.toping import data as _td, losses as _tpl, metrics as _tpm, models as _tpmod, persistence as _tpp

_E, _F3, _NAN = torch.tensor([[0, 1], [1, 2]]), torch.tensor([0.1, 0.5, 0.9]), float("nan")
_G = _td.Graph(torch.zeros(3, 2), _E, 0, torch.zeros(2, dtype=torch.bool))
TOPING_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: _tpmod.GINClassifier("gnn"), "gnn"),
    (lambda: _tpl.RationalHat(init_range=(0.5, 0.1)), "init_range"),
    (lambda: _tpl.RationalHat(n_elements=0), "n_elements"),
    (lambda: _tpl.RationalHat(lipschitz=_NAN), "lipschitz"),
    (lambda: _tpm.ashman_d(np.array([_NAN, 1.0, 2.0])), "scores"),
    (lambda: _tpp.batch_cut_persistence(3, _E, torch.tensor([_NAN, 0.5, 0.9])), "f"),
    (lambda: _tpp.batch_edge_persistence(3, _E, torch.tensor([_NAN, 0.5]), 1.0), "times"),
    (lambda: _tpp.batch_node_cut_persistence(3, _E, _F3, t=_NAN), "t"),
    (lambda: _tpm.cycle_edge_scores("graph"), "graph"),
    (lambda: _tpm.degree_edge_scores("graph"), "graph"),
    (lambda: _tpm.node_truth("graph"), "graph"),
    (lambda: _tpm.persistence_self_check(n_graphs=0), "n_graphs"),
    (lambda: _tpmod.saliency_explain("model", None), "model"),
    (lambda: _tpm.topo_gap(_G, _F3, t=_NAN), "t"),
    (lambda: _tpm.total_persistence(3, _E, torch.tensor([_NAN, 0.5, 0.9])), "f"),
    (lambda: _tpm.two_means_1d(np.array([_NAN, 1.0])), "scores"),
    # issue 49, through companion.validation: NaN or bool rates and cuts, fractional counts, 2-D scores
    (lambda: _td.make_spmotif(2, bias=_NAN), "bias: expected a number in"),
    (lambda: _td.make_spmotif(2, bias=0.5, perturb=_NAN), "perturb: expected a number in"),
    (lambda: _tpl.RationalHat(n_elements=2.0), "n_elements: expected an integer"),
    (lambda: _tpl.RationalHat(lipschitz=True), "lipschitz: expected a finite real number"),
    (lambda: _tpl.bernoulli_info_loss(_F3, _NAN), "r: expected a number in"),
    (lambda: _tpl.bernoulli_info_loss(_F3[None], 0.5), "p: expected 1 dimensions"),
    (lambda: _tpl.gaussian_mixture_prior(_F3, torch.zeros(2), weight=_NAN), "weight: expected a number in"),
    (lambda: _tpl.gaussian_mixture_prior(_F3, torch.zeros(2), gamma=_NAN), "gamma: expected a finite number"),
    (lambda: _tpmod.TopInG(_tpmod.EdgeWeightedGIN(2), alpha=_NAN), "alpha: expected a finite number >= 0"),
    (lambda: _tpmod.TopInG(_tpmod.EdgeWeightedGIN(2), cut=True), "cut: expected a real number"),
    (lambda: _tpmod.fit(None, [], [], 1, lr=_NAN), "lr: expected a finite number > 0"),
    (lambda: _tpm.perturbed_scores(_G, "add", 1.5, np.random.default_rng(0)), "k: expected an integer"),
    (lambda: _tpm.cut_share([0.2], t=_NAN), "t: expected a number in"),
    (lambda: _tpp.cut_persistence(3, _E, _F3[:2], t=True), "t: expected a real number"),
]


@pytest.mark.parametrize("call, name", TOPING_BAD_INPUTS)
def test_toping_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
