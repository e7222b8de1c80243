"""Unit tests of companion.ngs: tours, exact optima, the maskable decoder, the searches, training."""

import itertools
import json

import numpy as np
import pytest
import torch

import companion.ngs as ngs
from companion.ngs import search, train
from companion.ngs.policy import allowed_mask


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return ngs.AttentionPolicy(d_model=32, n_layers=1, n_heads=4).eval()


def brute_force(coords):
    n = len(coords)
    best = min(itertools.permutations(range(1, n)), key=lambda p: ngs.tour_length(
        torch.as_tensor(coords)[None], torch.tensor([[0, *p]])[None]).item())
    return ngs.tour_length(torch.as_tensor(coords)[None], torch.tensor([[0, *best]])[None]).item()


# --- instances, lengths, validity ------------------------------------------------------------

def test_generate_and_length_match_a_loop():
    coords = ngs.generate_tsp(3, 7, seed=1)
    assert coords.shape == (3, 7, 2) and torch.equal(coords, ngs.generate_tsp(3, 7, seed=1))
    tours = torch.rand(3, 4, 7, generator=torch.Generator().manual_seed(0)).argsort(-1)
    got = ngs.tour_length(coords, tours)
    for b, s in itertools.product(range(3), range(4)):
        t = tours[b, s].tolist()
        loop = sum(float(torch.dist(coords[b, t[i]], coords[b, t[(i + 1) % 7]])) for i in range(7))
        assert got[b, s].item() == pytest.approx(loop, rel=1e-5)


@pytest.mark.parametrize("bad", [[[[0, 0, 1, 2]]], [[[0, 0, 0, 0]]], [[[0, 1, 2, 4]]]])
def test_tour_length_refuses_tours_that_are_not_permutations(bad):
    coords = ngs.generate_tsp(1, 4, seed=0)
    with pytest.raises(ValueError, match="^tours"):
        ngs.tour_length(coords, torch.tensor(bad))
    with pytest.raises(ValueError, match="^tours"):  # wrong length
        ngs.tour_length(coords, torch.tensor([[[0, 1, 2]]]))


def test_tour_length_takes_numpy_tours_and_refuses_floats():
    coords = ngs.generate_tsp(2, 5, seed=0)
    tours = np.stack([np.arange(5), np.arange(5)[::-1]])[:, None]  # (2, 1, 5) int64
    assert torch.allclose(ngs.tour_length(coords, tours), ngs.tour_length(coords, torch.as_tensor(tours.copy())))
    for bad in (tours.astype(float), torch.as_tensor(tours.copy()).float(), tours.tolist()):
        with pytest.raises(ValueError, match="^tours"):
            ngs.tour_length(coords, bad)


def test_check_tours_rejects_non_permutations():
    ngs.check_tours(torch.tensor([[[2, 0, 1]]]), 3)
    for bad in ([[[0, 0, 1]]], [[[0, 1, 3]]], [[[0, 1]]]):
        with pytest.raises(ValueError, match="^tours"):
            ngs.check_tours(torch.tensor(bad), 3)


@pytest.mark.parametrize("coords", [torch.rand(5, 2), torch.rand(2, 5, 3), torch.rand(1, 2, 2),
                                    torch.full((1, 5, 2), float("nan"))])
def test_bad_coordinates_raise_naming_coords(coords, policy):
    with pytest.raises(ValueError, match="^coords"):
        ngs.check_coords(coords)
    with pytest.raises(ValueError, match="^coords"):
        ngs.sample_search(policy, coords, 50)
    with pytest.raises(ValueError, match="^coords"):
        ngs.ngs_search(policy, coords, 100)


def test_held_karp_equals_brute_force_and_cp_sat():
    rng = np.random.default_rng(0)
    for n in (4, 6, 8):
        xy = rng.random((n, 2))
        length, tour = ngs.held_karp(xy)
        assert sorted(tour) == list(range(n)) and tour[0] == 0
        assert length == pytest.approx(brute_force(xy), abs=1e-6)
    for _ in range(2):
        xy = rng.random((11, 2))
        assert ngs.held_karp(xy)[0] == pytest.approx(ngs.solve_exact(xy)[0], abs=1e-5)


def test_subtour_mip_equals_held_karp_and_cp_sat():
    rng = np.random.default_rng(1)
    for n in (5, 9, 12):
        xy = rng.random((n, 2))
        length, tour = ngs.solve_mip(xy)
        assert sorted(tour) == list(range(n)) and tour[0] == 0
        assert length == pytest.approx(ngs.held_karp(xy)[0], abs=1e-7)
    xy = rng.random((16, 2))
    assert ngs.solve_mip(xy)[0] == pytest.approx(ngs.solve_exact(xy)[0], abs=1e-5)


def test_shipped_tsp50_optima_recompute():
    ref = ngs.reference_solutions("tsp50_seed1234")
    assert ref["coords"].shape == (32, 50, 2) and "HiGHS" in ref["provenance"]["solver"]
    stored = torch.as_tensor(ref["tour"].astype(np.int64))[:, None]
    assert torch.allclose(ngs.tour_length(ref["coords"], stored).squeeze(1).double(),
                          torch.as_tensor(ref["length"]), atol=1e-4)
    assert ngs.solve_mip(ref["coords"][2].numpy())[0] == pytest.approx(ref["length"][2], abs=1e-6)
    with pytest.raises(ValueError, match="^name"):
        ngs.reference_solutions("tsp1000")


def test_shipped_optima_recompute():
    ref = ngs.reference_solutions()
    assert ref["coords"].shape == (32, 20, 2) and "CP-SAT" in ref["provenance"]["solver"]
    stored = torch.as_tensor(ref["tour"])[:, None]
    assert torch.allclose(ngs.tour_length(ref["coords"], stored).squeeze(1).double(),
                          torch.as_tensor(ref["length"]), atol=1e-4)
    for i in (0, 17):
        assert ngs.solve_exact(ref["coords"][i].numpy())[0] == pytest.approx(ref["length"][i], abs=1e-5)


# --- the decoder and its crossover mask --------------------------------------------------------

def test_rollouts_are_permutations(policy):
    coords = ngs.generate_tsp(4, 9, seed=2)
    gen = torch.Generator().manual_seed(0)
    for kw in (dict(), dict(greedy=True), dict(temperature=0.3), dict(logits="uniform")):
        out = policy.rollout(coords, 6, generator=gen, **kw)
        ngs.check_tours(out.tours, 9)
        assert torch.isfinite(out.logp).all() and (out.logp <= 0).all()


def test_edge_logits_steer_the_decoder(policy):
    coords = ngs.generate_tsp(1, 6, seed=2)
    bias = torch.full((1, 6, 6), -1e4)
    order = [0, 3, 1, 5, 2, 4]
    for a, b in zip(order, order[1:]):
        bias[0, a, b] = 0.0  # only the edges of one path are not penalised
    out = policy.rollout(coords, 4, start_nodes=torch.zeros(1, 4, dtype=torch.long), edge_logits=bias,
                         generator=torch.Generator().manual_seed(0))
    assert (out.tours == torch.tensor(order)).all()


def test_allowed_mask_reads_the_row_of_the_current_city():
    allowed = torch.tensor([[[[1, 2], [-1, -1], [0, -1]]]])  # (1, 1, 3, 2)
    assert allowed_mask(allowed, torch.tensor([[0]]), 3).tolist() == [[[False, True, True]]]
    assert allowed_mask(allowed, torch.tensor([[1]]), 3).tolist() == [[[False, False, False]]]
    assert allowed_mask(allowed, torch.tensor([[2]]), 3).tolist() == [[[True, False, False]]]


def test_parent_neighbours_are_undirected_and_wrap_around():
    tours = torch.tensor([[[0, 1, 2, 3, 4], [0, 2, 4, 1, 3]]])
    nb = search.parent_neighbours(tours, torch.tensor([[[0, 1]]]))  # (1, 1, 5, 4)
    assert sorted(nb[0, 0, 0].tolist()) == [1, 2, 3, 4]  # 4-0-1 in parent 0, 3-0-2 in parent 1
    assert sorted(nb[0, 0, 4].tolist()) == [0, 1, 2, 3]
    assert sorted(nb[0, 0, 2].tolist()) == [0, 1, 3, 4]


def test_self_crossover_reproduces_the_parent(policy):
    coords = ngs.generate_tsp(3, 10, seed=3)
    parent = torch.rand(3, 1, 10, generator=torch.Generator().manual_seed(1)).argsort(-1)
    allowed = search.parent_neighbours(parent, torch.zeros(3, 5, 2, dtype=torch.long))
    out = policy.rollout(coords, 5, allowed=allowed, mutation_rate=0.0, generator=torch.Generator().manual_seed(2))
    ngs.check_tours(out.tours, 10)
    assert (out.n_mut == 0).all()
    assert (search.edge_hash(out.tours) == search.edge_hash(parent)).all()


def test_forced_mutation_when_no_parent_edge_is_free(policy):
    coords = ngs.generate_tsp(2, 8, seed=4)
    allowed = torch.full((2, 3, 8, 4), -1)
    out = policy.rollout(coords, 3, allowed=allowed, generator=torch.Generator().manual_seed(0))
    ngs.check_tours(out.tours, 8)
    assert (out.n_mut == 7).all()


def test_full_mutation_equals_unrestricted_sampling(policy):
    coords = ngs.generate_tsp(2, 8, seed=5)
    allowed = search.parent_neighbours(torch.arange(8).expand(2, 1, 8), torch.zeros(2, 4, 2, dtype=torch.long))
    free = policy.rollout(coords, 4, generator=torch.Generator().manual_seed(9))
    mut = policy.rollout(coords, 4, allowed=allowed, mutation_rate=1.0, generator=torch.Generator().manual_seed(9))
    assert torch.equal(free.tours, mut.tours)


# --- selection, dedupe, budget -------------------------------------------------------------------

def test_rank_weights_of_distinct_tours():
    costs = torch.tensor([[3.0, 1.0, 2.0, 5.0]])
    distinct = torch.arange(4)[None]
    w = search.parent_weights(costs, distinct, 0.01)
    assert torch.allclose(w.sum(-1), torch.ones(1))
    assert (w[0, [1, 2, 0, 3]].diff() < 0).all()  # decreasing in rank
    assert torch.allclose(search.parent_weights(costs, distinct, 1e6), torch.full((1, 4), 0.25))
    for kappa in (0.0, -1.0):
        with pytest.raises(ValueError, match="^rank_coef"):
            search.parent_weights(costs, distinct, kappa)


def test_edge_hash_ignores_rotation_and_direction():
    t = torch.tensor([0, 3, 1, 4, 2, 5])
    same = torch.stack([t, t.roll(2), t.flip(0), t.roll(-1).flip(0)])
    assert (search.edge_hash(same) == search.edge_hash(t)).all()
    assert search.edge_hash(torch.tensor([0, 1, 3, 4, 2, 5])) != search.edge_hash(t)


def test_parent_weights_give_copies_zero_and_rank_the_distinct_tours():
    costs = torch.tensor([[5.0, 1.0, 3.0, 2.0, 4.0]])
    hashes = torch.tensor([[1, 1, 1, 2, 3]])  # tours 1 and 2 repeat tour 0
    w = search.parent_weights(costs, hashes, 0.001)
    assert w[0, 1] == 0 and w[0, 2] == 0 and torch.allclose(w.sum(-1), torch.ones(1))
    raw = 1 / (0.001 * 5 + torch.tensor([2.0, 0.0, 1.0]))  # distinct ranks of tours 0, 3, 4
    assert torch.allclose(w[0, [0, 3, 4]], raw / raw.sum())


def test_copies_never_breed():
    gen = torch.Generator().manual_seed(0)
    costs = torch.tensor([[1.0, 1.0, 1.0, 1.0, 2.0, 3.0]])  # the best tour four times
    hashes = torch.tensor([[7, 7, 7, 7, 8, 9]])
    parents = search.select_parents(costs, hashes, 2000, 2, 0.001, gen)
    assert set(parents.flatten().tolist()) <= {0, 4, 5}  # never a later copy
    assert (parents[..., 0] != parents[..., 1]).all()


def test_no_child_of_the_search_has_twin_parents(policy):
    coords = ngs.generate_tsp(2, 5, seed=3)  # 5 cities: 12 distinct tours, so copies abound
    res = ngs.ngs_search(policy, coords, 200, ngs.NGSConfig(pop_size=20, n_offspring=20),
                         torch.Generator().manual_seed(0))
    pairs = list(zip(res.history["twin_parents"], res.history["distinct"]))
    assert min(d for _, d in pairs) < 20  # the population did hold copies
    assert all(t == 0 for t, d in pairs if d >= 2)


def test_copies_fill_the_last_places_best_first():
    gen = torch.Generator().manual_seed(0)
    # 2 distinct tours, then 6 copies of tour 0 (as if their lengths differed by rounding);
    # a float32 key of -1e9 - rank ties them all, and the copies came out in no fixed order
    hashes = torch.tensor([[7, 8, 7, 7, 7, 7, 7, 7]])
    for copies, best_first in (([1.1, 1.2, 1.3, 1.4, 1.5, 1.6], [2, 3, 4, 5, 6, 7]),
                               ([1.3, 1.1, 1.6, 1.2, 1.5, 1.4], [3, 5, 2, 7, 6, 4])):
        keep = search.select_survivors(torch.tensor([[1.0, 2.0, *copies]]), hashes, 8, 0.001, gen)
        assert sorted(keep[0, :2].tolist()) == [0, 1]
        assert keep[0, 2:].tolist() == best_first


def test_survivors_prefer_distinct_tours_and_survive_a_population_of_copies():
    gen = torch.Generator().manual_seed(0)
    hashes = torch.tensor([[7, 7, 7, 8, 9]])
    keep = search.select_survivors(torch.tensor([[1.0, 1.0, 1.0, 2.0, 3.0]]), hashes, 3, 0.001, gen)
    assert sorted(keep[0].tolist()) == [0, 3, 4]  # one copy of the repeated tour, then the others
    keep = search.select_survivors(torch.ones(1, 6), torch.zeros(1, 6, dtype=torch.long), 4, 0.001, gen)
    assert keep.shape == (1, 4) and len(set(keep[0].tolist())) == 4


def test_budget_is_counted_exactly(policy):
    coords = ngs.generate_tsp(3, 6, seed=6)  # 6 cities: only 60 distinct tours, so duplicates abound
    gen = torch.Generator().manual_seed(0)
    for budget, cfg in ((300, ngs.NGSConfig()), (120, ngs.NGSConfig(pop_size=70, n_offspring=20)),
                        (200, ngs.NGSConfig(logits="uniform")), (200, ngs.NGSConfig(parents="random"))):
        before = policy.decoded
        res = ngs.ngs_search(policy, coords, budget, cfg, gen)
        assert res.n_decoded == budget == policy.decoded - before == res.decoded[-1] and res.all_valid
        assert res.curve.shape == (3, budget // cfg.n_offspring) and (res.curve.diff(dim=1) <= 0).all()
        ngs.check_tours(res.best_tours[:, None], 6)
        assert torch.allclose(ngs.tour_length(coords, res.best_tours[:, None]).squeeze(1), res.best_len)
    before = policy.decoded
    res = ngs.aco_search(policy, coords, 150, ngs.ACOConfig(n_ants=50), gen)
    assert res.n_decoded == 150 == policy.decoded - before and res.decoded == [50, 100, 150] and res.all_valid
    assert (res.curve.diff(dim=1) <= 0).all()
    res = ngs.sample_search(policy, coords, 150, block=50, generator=gen)
    assert res.n_decoded == 150 and res.decoded == [50, 100, 150]
    assert ngs.greedy_multistart(policy, coords).n_decoded == 8 * 6


def test_bad_search_arguments_raise_naming_the_argument(policy):
    coords = ngs.generate_tsp(2, 6, seed=0)
    cases = [
        (dict(budget=40), "pop_size"),  # population 50 larger than the budget
        (dict(budget=120), "budget"),  # not whole generations of 50
        (dict(budget=100, config=ngs.NGSConfig(mutation_rate=1.5)), "mutation_rate"),
        (dict(budget=100, config=ngs.NGSConfig(rank_coef=-0.1)), "rank_coef"),
        (dict(budget=100, config=ngs.NGSConfig(pop_size=1)), "n_parents"),
        (dict(budget=0), "budget"),
    ]
    for kw, name in cases:
        with pytest.raises(ValueError, match=f"^{name}"):
            ngs.ngs_search(policy, coords, **kw)
    with pytest.raises(ValueError, match="^temperature"):
        ngs.sample_search(policy, coords, 50, temperature=0.0)
    with pytest.raises(ValueError, match="^budget"):
        ngs.aco_search(policy, coords, 120, ngs.ACOConfig(n_ants=50))
    with pytest.raises(ValueError, match="^decay"):
        ngs.aco_search(policy, coords, 100, ngs.ACOConfig(decay=1.5))
    with pytest.raises(ValueError, match="^edge_logits"):
        policy.rollout(coords, 3, edge_logits=torch.zeros(2, 6, 5))


# --- training and the checkpoint ------------------------------------------------------------------

def test_a_few_training_steps_run_and_move_the_weights():
    torch.manual_seed(0)
    pol = ngs.AttentionPolicy(d_model=32, n_layers=1, n_heads=4)
    before = [p.detach().clone() for p in pol.parameters()]
    hist = ngs.train_pomo(pol, n=8, steps=3, batch_size=4, lr=1e-3, seed=0, log_every=1)
    assert hist["step"] == [1, 2, 3] and all(np.isfinite(hist["valid_greedy_len"]))
    assert any(not torch.equal(a, b) for a, b in zip(before, pol.parameters()))


def test_training_entry_point_writes_a_checkpoint_with_provenance(tmp_path, monkeypatch):
    monkeypatch.setitem(train.RECIPES, "quick", {**train.RECIPES["quick"], "batch_size": 2,
                                                 "model": dict(d_model=16, n_layers=1, n_heads=2)})
    assert train.main(["--scale", "quick", "--steps", "2", "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "tsp20.json").read_text())
    assert {"command", "recipe", "commit", "training_seconds", "device", "final", "data"} <= set(meta)
    pol, _ = ngs.load_policy(tmp_path / "tsp20.pt")
    ngs.check_tours(pol.rollout(ngs.generate_tsp(1, 20, 0), 2).tours, 20)


def test_shipped_checkpoint_loads_into_the_current_model():
    pol, meta = ngs.load_policy()
    assert meta["recipe"]["n"] == 20 and meta["training_seconds"] > 0
    assert (train.CHECKPOINTS / "tsp20.pt").stat().st_size < 5e6
    coords = ngs.generate_tsp(8, 20, seed=99)
    greedy = ngs.greedy_multistart(pol, coords, augment=False).best_len.mean()
    assert greedy < 4.5  # a trained policy: random tours of 20 cities are ~10.4 long, optimal ~3.8


def test_full_scale_trains_instead_of_loading(monkeypatch):
    monkeypatch.setitem(train.RECIPES, "full", {**train.RECIPES["full"], "steps": 2, "batch_size": 2,
                                                "model": dict(d_model=16, n_layers=1, n_heads=2)})
    pol, meta = ngs.load_or_train("full")
    assert meta["source"] == "trained in this run" and meta["history"]["step"][-1] == 2
    assert pol.config["d_model"] == 16 and not pol.training


def test_the_50_city_recipe_starts_from_the_20_city_weights(tmp_path):
    """--scale tsp50 writes tsp50.pt; its record names the starting checkpoint and its hash."""
    import hashlib

    assert train.main(["--scale", "tsp50", "--steps", "1", "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "tsp50.json").read_text())
    assert meta["recipe"]["n"] == 50 and meta["recipe"]["init"] == "tsp20.pt"
    assert meta["data"]["validation"]["n"] == 50
    sha = hashlib.sha256((train.CHECKPOINTS / "tsp20.pt").read_bytes()).hexdigest()
    assert meta["init"]["sha256"] == sha
    pol, _ = ngs.load_policy(tmp_path / "tsp50.pt")
    ngs.check_tours(pol.rollout(ngs.generate_tsp(1, 50, 0), 2).tours, 50)


def test_init_loads_the_starting_weights_before_training():
    torch.manual_seed(1)
    pol = ngs.AttentionPolicy()
    ref, _ = ngs.load_policy()
    hist = ngs.train_pomo(pol, n=6, steps=1, batch_size=1, lr=1e-12, seed=0, init="tsp20.pt")
    # one step at a vanishing learning rate: the weights are (almost) the shipped ones
    assert hist["step"] == [1]
    for a, b in zip(pol.state_dict().values(), ref.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6)


def test_shipped_50_city_checkpoint_is_trained_at_50_cities():
    pol, meta = ngs.load_or_train("quick", n=50)
    assert meta["recipe"]["n"] == 50 and meta["recipe"]["init"] == "tsp20.pt"
    assert re_commit(meta["commit"]) and meta["training_seconds"] > 0
    assert (train.CHECKPOINTS / "tsp50.pt").stat().st_size < 5e6
    ref20, _ = ngs.load_policy()
    coords = ngs.generate_tsp(8, 50, seed=99)
    g50 = ngs.greedy_multistart(pol, coords, augment=False).best_len.mean()
    g20 = ngs.greedy_multistart(ref20, coords, augment=False).best_len.mean()
    assert g50 < g20  # training at the test size shortened the greedy tours


def re_commit(commit):
    import re

    return re.fullmatch(r"[0-9a-f]{40}", commit) is not None


@pytest.mark.parametrize("kw, name", [
    (dict(n=20.0), "n"), (dict(n=2), "n"), (dict(steps=0), "steps"), (dict(steps=1.5), "steps"),
    (dict(batch_size=True), "batch_size"), (dict(lr=float("nan")), "lr"), (dict(lr=0.0), "lr"),
])
def test_bad_training_arguments_raise_naming_the_argument(kw, name):
    args = dict(n=6, steps=1, batch_size=1, lr=1e-3) | kw
    with pytest.raises(ValueError, match=f"^{name}"):
        ngs.train_pomo(ngs.AttentionPolicy(d_model=16, n_layers=1, n_heads=2), **args)


def test_load_or_train_refuses_unknown_sizes_and_scales():
    with pytest.raises(ValueError, match="^n"):
        ngs.load_or_train("quick", n=30)
    with pytest.raises(ValueError, match="^scale"):
        ngs.load_or_train("huge")


# --- the official ACO update, tuning, bad inputs (second pass) -------------------------------------

def test_aco_follows_the_official_ant_system_update(policy, monkeypatch):
    """tau starts at 1; each ant deposits Q ((R - min R)/(max R - min R))^2, Q = 1/(A decay), on
    the directed edges of its path (the official update skips the closing edge)."""
    coords = ngs.generate_tsp(1, 6, seed=3)
    seen = []
    real = search._policy_decode

    def spy(pol, c, S, valid, **kw):
        seen.append(kw["edge_logits"].clone())
        out = real(pol, c, S, valid, **kw)
        seen.append(out.tours.clone())
        return out

    monkeypatch.setattr(search, "_policy_decode", spy)
    cfg = ngs.ACOConfig(n_ants=4, temperature=0.5)
    ngs.aco_search(policy, coords, 8, cfg, torch.Generator().manual_seed(0))
    assert torch.equal(seen[0], torch.zeros(1, 6, 6))  # log 1 = 0 on every edge at the start
    tours = seen[1][0]
    R = -ngs.tour_length(coords, tours[None])[0].double()
    dep = ((R - R.min()) / (R.max() - R.min())) ** 2 / (4 * 0.95)
    tau = torch.full((6, 6), 0.95, dtype=torch.float64)
    for k in range(4):
        for a, b in zip(tours[k, :-1].tolist(), tours[k, 1:].tolist()):
            tau[a, b] += dep[k]
    # the decoder divides scores by T, so the pheromone term arrives multiplied by T
    assert torch.allclose(seen[2][0].double(), (0.5 * tau.log()).float().double(), atol=1e-6)


def test_tuning_runs_every_temperature_and_method(policy):
    coords = ngs.generate_tsp(3, 7, seed=4)
    for method, cfg in (("sampling", None), ("ngs", ngs.NGSConfig(pop_size=10, n_offspring=10)),
                        ("aco", ngs.ACOConfig(n_ants=10))):
        scores = ngs.tune_temperature(policy, coords, 40, (0.5, 1.0), seed=0, method=method, config=cfg)
        assert list(scores) == [0.5, 1.0] and all(np.isfinite(list(scores.values())))
    # one temperature: the batched run is the plain run from the same seed, exactly
    one = ngs.tune_temperature(policy, coords, 40, (0.7,), seed=1)
    plain = ngs.sample_search(policy, coords, 40, temperature=0.7, block=40,
                              generator=torch.Generator().manual_seed(1))
    assert one[0.7] == pytest.approx(float(plain.best_len.mean()), abs=1e-6)
    # several: each copy of the instances is decoded at its own temperature (a hot sampler
    # on a random tiny policy finds tours no better than a cool one does)
    many = ngs.tune_temperature(policy, coords, 40, (0.05, 1e3), seed=1)
    assert list(many) == [0.05, 1e3] and many[0.05] != many[1e3]


def test_per_instance_temperatures_match_separate_runs(policy):
    """A (B,) temperature tensor decodes each instance at its own temperature."""
    coords = ngs.generate_tsp(2, 8, seed=6)
    low = policy.rollout(coords, 64, temperature=torch.tensor([0.05, 0.05]),
                         generator=torch.Generator().manual_seed(0))
    mixed = policy.rollout(coords, 64, temperature=torch.tensor([0.05, 50.0]),
                           generator=torch.Generator().manual_seed(0))
    assert torch.equal(low.tours[0], mixed.tours[0])  # instance 0 unchanged by instance 1's T
    assert len(set(map(tuple, mixed.tours[1].tolist()))) > len(set(map(tuple, low.tours[1].tolist())))


@pytest.mark.parametrize("call, name", [
    (lambda p, c: p.rollout(c, 2, temperature=float("inf")), "temperature"),
    (lambda p, c: p.rollout(c, 2, temperature=True), "temperature"),
    (lambda p, c: p.rollout(c, 2, temperature=torch.tensor([1.0])), "temperature"),
    (lambda p, c: p.rollout(c, 2, temperature=torch.tensor([1.0, float("nan")])), "temperature"),
    (lambda p, c: p.rollout(c, 2.5), "num_samples"),
    (lambda p, c: p.rollout(c, 2, start_nodes=torch.full((2, 2), 6)), "start_nodes"),
    (lambda p, c: p.rollout(c, 2, start_nodes=torch.zeros(2, 2)), "start_nodes"),
    (lambda p, c: p.rollout(c, 2, allowed=torch.full((2, 2, 6, 4), 9)), "allowed"),
    (lambda p, c: p.rollout(c, 2, allowed=torch.zeros(2, 2, 6, 4)), "allowed"),
    (lambda p, c: p.rollout(c, 2, edge_logits=torch.full((2, 6, 6), float("nan"))), "edge_logits"),
    (lambda p, c: p.rollout(c, 2, mutation_rate=float("nan")), "mutation_rate"),
    (lambda p, c: ngs.sample_search(p, c, 0), "budget"),
    (lambda p, c: ngs.sample_search(p, c, 10, block=3), "budget"),
    (lambda p, c: ngs.sample_search(p, c, 10.0, block=5), "budget"),
    (lambda p, c: ngs.greedy_multistart(p, c, augment="yes"), "augment"),
    (lambda p, c: ngs.ngs_search(p, c, 100, ngs.NGSConfig(temperature=float("inf"))), "temperature"),
    (lambda p, c: ngs.ngs_search(p, c, 100, ngs.NGSConfig(rank_coef=float("nan"))), "rank_coef"),
    (lambda p, c: ngs.ngs_search(p, c, 100, ngs.NGSConfig(pop_size=10.5)), "pop_size"),
    (lambda p, c: ngs.ngs_search(p, c, 100, ngs.NGSConfig(logits="random")), "logits"),
    (lambda p, c: ngs.ngs_search(p, c, 100, ngs.NGSConfig(parents="best")), "parents"),
    (lambda p, c: ngs.ngs_search(p, c, 100, {"pop_size": 10}), "config"),
    (lambda p, c: ngs.aco_search(p, c, 100, ngs.ACOConfig(alpha=float("nan"))), "alpha"),
    (lambda p, c: ngs.aco_search(p, c, 100, ngs.ACOConfig(tau0=float("inf"))), "tau0"),
    (lambda p, c: ngs.aco_search(p, c, 100, ngs.ACOConfig(tau0=0.0)), "tau0"),
    (lambda p, c: ngs.aco_search(p, c, 100, ngs.ACOConfig(Q=-1.0)), "Q"),
    (lambda p, c: ngs.aco_search(p, c, 100, ngs.ACOConfig(decay=float("nan"))), "decay"),
    (lambda p, c: ngs.aco_search(p, c, 100, ngs.ACOConfig(n_ants=0)), "n_ants"),
    (lambda p, c: ngs.tune_temperature(p, c, 10, ()), "temperatures"),
    (lambda p, c: ngs.tune_temperature(p, c, 10, (0.5, -1.0)), "temperatures"),
    (lambda p, c: ngs.tune_temperature(p, c, 10, (0.5, 0.5)), "temperatures"),
    (lambda p, c: ngs.tune_temperature(p, c, 10, "hot"), "temperatures"),
    (lambda p, c: ngs.tune_temperature(p, c, 10, (1.0,), method="beam"), "method"),
    (lambda p, c: ngs.tune_temperature(p, c, 10, (1.0,), method="aco", config=ngs.NGSConfig()),
     "config"),
])
def test_bad_decoder_and_search_inputs_raise_naming_the_argument(policy, call, name):
    coords = ngs.generate_tsp(2, 6, seed=0)
    with pytest.raises(ValueError, match=f"^{name}"):
        call(policy, coords)


@pytest.mark.parametrize("call, name", [
    (lambda: search.neighbour_table(torch.tensor([[[0, 1, 2, 2]]])), "tours"),
    (lambda: search.neighbour_table(torch.tensor([[[0.0, 1.0, 2.0]]])), "tours"),
    (lambda: search.neighbour_table(torch.tensor([[0, 1, 2]])), "tours"),
    (lambda: search.parent_neighbours(torch.arange(4).expand(1, 2, 4), torch.tensor([[[0, 2]]])),
     "parents"),
    (lambda: search.parent_neighbours(torch.arange(4).expand(1, 2, 4), torch.tensor([[[0.0, 1.0]]])),
     "parents"),
    (lambda: search.parent_neighbours(torch.arange(4).expand(1, 2, 4), torch.tensor([[0, 1]])),
     "parents"),
    (lambda: search.edge_hash(torch.tensor([0, 1, 5])), "tours"),
    (lambda: search.edge_hash([0, 1, 2]), "tours"),
    (lambda: search.parent_weights(torch.tensor([[1.0, float("nan")]]), torch.tensor([[1, 2]]), 0.1),
     "costs"),
    (lambda: search.parent_weights(torch.empty(1, 0), torch.empty(1, 0, dtype=torch.long), 0.1),
     "costs"),
    (lambda: search.parent_weights(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2, 3]]), 0.1),
     "hashes"),
    (lambda: search.parent_weights(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]]), float("inf")),
     "rank_coef"),
    (lambda: search.select_parents(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]]), 3, 3, 0.1, None),
     "n_parents"),
    (lambda: search.select_parents(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]]), 0, 2, 0.1, None),
     "n_children"),
    (lambda: search.select_survivors(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]]), 3, 0.1, None),
     "k"),
    (lambda: search.select_survivors(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]]), 1.0, 0.1, None),
     "k"),
])
def test_bad_population_inputs_raise_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


@pytest.mark.parametrize("call, name", [
    (lambda: ngs.generate_tsp(2, 5, seed=1.5), "seed"),
    (lambda: ngs.generate_tsp(2, 5, seed=-1), "seed"),
    (lambda: ngs.generate_tsp(2, 5, seed=True), "seed"),
    (lambda: ngs.generate_tsp(2.0, 5, seed=0), "num"),
    (lambda: ngs.generate_tsp(0, 5, seed=0), "num"),
    (lambda: ngs.AttentionPolicy(d_model=12.5), "d_model"),
    (lambda: ngs.AttentionPolicy(n_layers=0), "n_layers"),
    (lambda: ngs.AttentionPolicy(d_model=30, n_heads=8), "n_heads"),
    (lambda: ngs.AttentionPolicy(tanh_clip=float("nan")), "tanh_clip"),
])
def test_bad_instance_and_model_arguments_raise_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


from companion.ngs import policy as _np_, tsp as _nt

_NAN = float("nan")
NGS_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _np_.allowed_mask(torch.zeros(2, 1, 5, 4, dtype=torch.long), torch.tensor([[0], [9]]), 5), "current"),
    (lambda: _np_.allowed_mask(torch.zeros(2, 5, 4), torch.tensor([0, 1]), 5), "allowed"),
    (lambda: _np_.check_temperature(_NAN), "temperature"),
    (lambda: _nt.held_karp(np.full((4, 2), _NAN)), "coords"),
    (lambda: _nt.held_karp(np.zeros((25, 2))), "coords"),
    (lambda: _nt.is_permutation(torch.zeros(2, 5), 5), "tours"),
    (lambda: _nt.solve_mip(np.random.rand(5, 2), time_limit_s=-1), "time_limit_s"),
    (lambda: _nt.solve_exact(np.full((4, 2), _NAN)), "coords"),
    (lambda: _nt.solve_exact(np.random.rand(5, 2), time_limit_s=0), "time_limit_s"),
    (lambda: _nt.solve_mip(np.full((4, 2), _NAN)), "coords"),
]


@pytest.mark.parametrize("call, name", NGS_MORE_BAD_INPUTS)
def test_ngs_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
