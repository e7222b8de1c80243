"""WorMI: MiniHome's rules, the expert, retrieval, compound attention and the agent's bookkeeping."""

import numpy as np
import pytest
import torch

from companion.wormi import agent, minihome, models
from companion.wormi.minihome import ACTION, FACT, TASKS, Domain, goal_vectors, reached
from companion.wormi.models import CompoundAttention, ReasoningPolicy, WorldModel, world_features
from companion.wormi.retrieval import PrototypeIndex, abstract_transition, retrieve


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _state(*facts):
    s = np.zeros((1, minihome.F), dtype=bool)
    s[0, [FACT[f] for f in facts]] = True
    return s


@pytest.mark.parametrize("modifier, action, needed, where", [
    ("lock", "open_fridge", "hold_key", ("at_kitchen",)),
    ("power", "switch_on_microwave", "wall_switch_on", ("at_kitchen", "food_in_microwave")),
    ("dirty", "put_food_plate", "plate_clean", ("at_kitchen", "hold_food", "hold_plate")),
    ("dark", "grab_food", "light_on", ("at_kitchen", "fridge_open", "food_in_fridge")),
    ("dark", "grab_plate", "light_on", ("at_kitchen", "cabinet_open", "plate_in_cabinet")),
    ("remote", "turn_on_tv", "hold_remote", ("at_living",)),
    ("door", "walk_bedroom", "bedroom_door_open", ("at_kitchen",)),
    ("wipe", "put_food_microwave", "microwave_wiped", ("at_kitchen", "microwave_open", "hold_food")),
])
def test_each_modifier_adds_its_precondition(modifier, action, needed, where):
    a = np.array([ACTION[action]])
    for domain, with_fact, changes in [(Domain(), False, True), (Domain({modifier}), False, False),
                                       (Domain({modifier}), True, True)]:
        s = _state(*where, *((needed,) if with_fact else ()))
        s_next, changed = domain.step(s, a)
        assert bool(changed[0]) is changes and (not changes) == bool((s_next == s).all())
        assert bool(domain.afforded(s)[0, a[0]]) is changes


def test_every_domain_starts_from_the_same_distribution():
    for mods in [(), ("dirty",), ("lock", "power")]:
        s = Domain(set(mods)).initial_states(200, np.random.default_rng(0))
        assert np.array_equal(s, Domain().initial_states(200, np.random.default_rng(0)))
        assert not s[:, FACT["plate_clean"]].any() and s[:, FACT["food_in_fridge"]].all()


@pytest.mark.parametrize("mods", [(), ("lock",), ("lock", "power"), ("dirty", "dark"), ("lock", "door"),
                                  ("power", "remote"), ("wipe",), ("dark", "door")])
def test_expert_reaches_every_goal_within_the_horizon(mods):
    domain = Domain(set(mods))
    for task in TASKS:
        ep = agent.Episodes.start(domain, 64, seed=3)
        ep.tasks, ep.g = [task] * 64, goal_vectors([task] * 64)
        agent.run(ep, lambda e: domain.expert(e.s, e.tasks).clip(min=0))
        assert ep.done.all(), (mods, task)


def test_modifiers_lengthen_the_plans():
    steps = {}
    for mods in [(), ("lock", "power")]:
        ep = agent.Episodes.start(Domain(set(mods)), 64, seed=4)
        agent.run(ep, lambda e: e.domain.expert(e.s, e.tasks).clip(min=0))
        steps[mods] = ep.steps.mean()
    assert steps[("lock", "power")] > steps[()] + 1


def test_blocked_by_names_the_modifier_only_when_the_base_rules_allow_the_action():
    domain = Domain({"lock", "power"})
    s = np.concatenate([_state("at_kitchen"), _state("at_living")])
    a = np.array([ACTION["open_fridge"]] * 2)
    assert minihome.blocked_by(domain, s, a) == [frozenset({"lock"}), frozenset()]


def test_bad_input_is_refused():
    d = Domain()
    with pytest.raises(ValueError, match="modifiers"):
        Domain({"gravity"})
    with pytest.raises(ValueError, match="s: expected shape"):
        d.step(np.zeros((2, 5)), np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match="0 or 1"):
        d.step(np.full((1, minihome.F), np.nan), np.zeros(1, dtype=int))
    with pytest.raises(ValueError, match="0 or 1"):
        d.afforded(np.full((1, minihome.F), 2))
    with pytest.raises(ValueError, match=r"a: action indices"):
        d.step(_state("at_kitchen"), np.array([minihome.A]))
    with pytest.raises(ValueError, match=r"a: expected 1 integer"):
        d.step(_state("at_kitchen"), np.array([0, 1]))
    with pytest.raises(ValueError, match="tasks"):
        goal_vectors(["fly"])
    with pytest.raises(ValueError, match="phi"):
        PrototypeIndex([np.zeros((3, 71))]).distances(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="s_next"):
        abstract_transition(_state("at_kitchen"), np.array([0]), np.zeros((2, minihome.F), dtype=bool))
    with pytest.raises(ValueError, match="mode"):
        agent.ImplantedPolicy(ReasoningPolicy(), None, [], [], mode="magic")


def test_reached_is_a_strict_conjunction():
    g = goal_vectors(["serve_hot"])
    assert not reached(_state("food_hot"), g)[0] and reached(_state("food_hot", "food_on_plate"), g)[0]


# --- retrieval ---------------------------------------------------------------------------------------


def test_abstract_transition_layout():
    s, s2 = _state("at_kitchen"), _state("at_kitchen", "fridge_open")
    phi = abstract_transition(s, np.array([ACTION["open_fridge"]]), s2)
    assert phi.shape == (1, 2 * minihome.F + minihome.A)
    assert phi[0, minihome.F + ACTION["open_fridge"]] == 1
    assert phi[0, minihome.F + minihome.A + FACT["fridge_open"]] == 1


def test_prototype_index_ranks_the_world_that_saw_the_failure_first():
    kitchen = _state("at_kitchen")
    fail = abstract_transition(kitchen, np.array([ACTION["open_fridge"]]), kitchen)
    works = abstract_transition(kitchen, np.array([ACTION["open_fridge"]]), _state("at_kitchen", "fridge_open"))
    index = PrototypeIndex([works, np.concatenate([works, fail])])
    assert index.topk(np.concatenate([works, fail]), 1) == [1]
    assert np.allclose(index.distances(works), 0)
    assert index.topk(np.zeros((0, fail.shape[1])), 2) == []


def test_prototypes_are_the_distinct_transitions_or_kmeans_centroids():
    rng = np.random.default_rng(0)
    phi = (rng.random((200, 71)) < 0.3).astype(np.float32)
    assert len(PrototypeIndex.fit([np.concatenate([phi, phi])], k=1000).prototypes[0]) == len(np.unique(phi, axis=0))
    assert len(PrototypeIndex.fit([phi], k=16).prototypes[0]) == 16


# --- compound attention ----------------------------------------------------------------------------


def _worlds(B=5, K=3, W=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(B, K, W, generator=gen), torch.randn(B, K, W, generator=gen),
            torch.rand(B, K, minihome.A, generator=gen), torch.rand(B, K, minihome.A, generator=gen)]


def test_gate_zero_or_no_world_leaves_the_policy_unchanged():
    torch.manual_seed(0)
    c = CompoundAttention(d=32, width=16)
    h = torch.randn(5, 4, 32)
    assert torch.equal(c(h, _worlds())[0], h)  # W_O = 0 at initialisation
    with torch.no_grad():
        torch.nn.init.normal_(c.out.weight)
    assert not torch.equal(c(h, _worlds())[0], h)
    assert torch.equal(c(h, [])[0], h)
    assert torch.equal(c(h, _worlds(), torch.zeros(5, 3, dtype=torch.bool))[0], h)


def test_compound_attention_is_permutation_equivariant_and_masks_worlds():
    torch.manual_seed(0)
    c = CompoundAttention(d=32, width=16)
    with torch.no_grad():
        torch.nn.init.normal_(c.out.weight)
    h, worlds = torch.randn(5, 4, 32), _worlds()
    out, beta = c(h, worlds)
    perm = torch.tensor([2, 0, 1])
    out_p, beta_p = c(h, [w[:, perm] for w in worlds])
    assert torch.allclose(out, out_p, atol=1e-5) and torch.allclose(beta[..., perm], beta_p, atol=1e-6)
    mask = torch.tensor([[True, False, True]] * 5)
    out_m, beta_m = c(h, worlds, mask)
    assert (beta_m[..., 1] == 0).all() and torch.allclose(beta_m.sum(-1), torch.ones(5, 4))
    # a masked world's features do not matter
    other = [w.clone() for w in worlds]
    for w in other:
        w[:, 1] = 7.0
    assert torch.allclose(c(h, other, mask)[0], out_m, atol=1e-6)


def test_world_model_heads_have_the_documented_shapes():
    m = WorldModel(width=16)
    s = torch.zeros(3, minihome.F)
    out = m(s, s)
    assert out["h1"].shape == (3, 16) and out["aff"].shape == (3, minihome.A)
    assert m.dynamics(out["h2"], torch.zeros(3, dtype=torch.long)).shape == (3, minihome.F)
    assert [f.shape[-1] for f in world_features(out)] == [16, 16, minihome.A, minihome.A]


# --- training and the agent ------------------------------------------------------------------------

TINY = dict(seed=0, reasoning_episodes=8, reasoning_epochs=1, world_episodes=8, world_epochs=1, world_mix=(0.5, 0.3),
            compose_episodes=4, compose_epochs=1, compose_lr=3e-3, K=2, prototypes=16, width=16,
            shared_init=True, implant_layers=(0, 1), compose_worlds="subset")


@pytest.fixture(scope="module")
def tiny():
    from companion.wormi.train import train_all

    return train_all(TINY)


def test_the_training_path_runs_and_every_mode_acts(tiny):
    agents = tiny.agents
    assert len(tiny.history["compose"]) >= 1 and tiny.history["compose_samples"] > 0
    for mode in agent.MODES:
        policy = agents.oracle(("lock", "power")) if mode == "oracle" else agents.policy(mode)
        frame, ep = agent.evaluate(policy, Domain({"lock", "power"}), n=8, seed=1)
        assert len(frame) == 8 and frame.success.dtype == bool
    precision = agent.retrieval_precision(policy, ep, [frozenset(m) for m in agents_library()])
    assert np.isnan(precision) or 0 <= precision <= 1


def agents_library():
    from companion.wormi.train import LIBRARY

    return LIBRARY


def test_the_checkpoint_round_trips(tiny, tmp_path):
    from companion.checkpoints import load_checkpoint, save_checkpoint
    from companion.wormi.train import _build

    agents = tiny.agents
    meta = {"recipe": TINY, "prototypes": [len(p) for p in agents.prototypes()],
            "oracle_prototypes": [len(p) for p in agents.prototypes(True)],
            "official_prototypes": [len(p) for p in agents.prototypes(official=True)]}
    save_checkpoint(agents, tmp_path / "tiny.pt", meta)
    loaded, _ = load_checkpoint(tmp_path / "tiny.pt", _build)
    for a, b in zip(agents.state_dict().values(), loaded.state_dict().values()):
        assert torch.equal(a, b)


def test_implant_and_remove_leave_the_other_worlds_untouched(tiny):
    policy = tiny.agents.policy("retrieve")
    s = torch.as_tensor(Domain().initial_states(6, np.random.default_rng(0)), dtype=torch.float32)
    before = agent.library_features(policy.library, s, s)
    j = policy.implant(tiny.agents.oracles[0], tiny.agents.prototypes(True)[0])
    after = agent.library_features(policy.library, s, s)
    assert all(torch.equal(x, y[:, :-1]) for x, y in zip(before, after)) and len(policy.index) == j + 1
    policy.remove(j)
    assert all(torch.equal(x, y) for x, y in zip(before, agent.library_features(policy.library, s, s)))


def test_retrieval_covers_what_the_first_world_misses():
    from companion.wormi.retrieval import retrieve

    # step 0 is explained by worlds 0 and 1, step 1 only by world 2
    dist = np.array([[[0.0, 0.0, 2.0], [2.0, 2.0, 0.0]]]).transpose(0, 1, 2)
    assert retrieve(dist, 2, cover=False).tolist() == [[0, 1]]
    assert retrieve(dist, 2, cover=True).tolist() == [[0, 2]]
    assert retrieve(dist, 2, excluded=np.array([[True, False, False]])).tolist() == [[1, 2]]
    with pytest.raises(ValueError, match="K"):
        retrieve(dist, 4)


def test_a_world_model_acts_on_its_behaviour_cloning_head(tiny):
    world = tiny.agents.library[0]
    ep = agent.Episodes.start(Domain(), 5, seed=0)
    s, g = (torch.as_tensor(x, dtype=torch.float32) for x in (ep.s, ep.g))
    assert np.array_equal(agent.WorldModelPolicy(world)(ep), world(s, g)["bc"].argmax(-1).numpy())


def test_the_shipped_checkpoint_loads_into_the_current_code():
    from companion.wormi.train import CHECKPOINTS, LIBRARY, UNSEEN, load_or_train

    agents, meta = load_or_train("quick")
    assert (CHECKPOINTS / "quick.pt").stat().st_size < 5_000_000
    assert meta["training_seconds"] > 0  # and a clean commit: tests/test_checkpoints.py
    assert len(agents.library) == len(LIBRARY) and len(agents.oracles) == len(UNSEEN)
    assert [len(p) for p in agents.prototypes()] == meta["prototypes"]
    frame, _ = agent.evaluate(agents.policy("retrieve"), Domain(), n=8, seed=0)
    assert frame.success.mean() >= 0.75  # the shipped agent solves the base rules
    with pytest.raises(ValueError, match="scale"):
        load_or_train("huge")


# --- issue 49: bad input refused, naming the argument --------------------------------------------

def test_expert_with_fewer_tasks_than_states_is_refused_not_uninitialised():
    """Old code: zip() stopped at the shorter list and the rest of np.empty was returned."""
    d, s = Domain(), np.concatenate([_state("at_kitchen")] * 3)
    task = sorted(TASKS)[0]
    with pytest.raises(ValueError, match=r"tasks: expected one task per state \(3 states\), got 1"):
        d.expert(s, [task])
    with pytest.raises(ValueError, match="tasks: expected one task per state"):
        d.expert(s, [task] * 4)
    with pytest.raises(ValueError, match="tasks: unknown"):
        d.expert(s, ["fly"] * 3)
    assert d.expert(s, [task] * 3).shape == (3,)


def _phi_row(value=0.0):
    row = np.zeros((1, minihome.F + minihome.A + minihome.F), dtype=np.float32)
    row[0, 0] = value
    return row


_INDEX = PrototypeIndex([_phi_row(), _phi_row(1.0)])
_FEATS = [torch.zeros(2, 3, 4) for _ in range(4)]

WORMI_BAD_INPUTS = [
    (lambda **kw: Domain().expert(s=np.concatenate([_state("at_kitchen")] * 2), **kw),
     dict(tasks=[sorted(TASKS)[0]]), "tasks"),
    (lambda **kw: Domain().expert(s=_state("at_kitchen"), **kw), dict(tasks=["fly"]), "tasks"),
    (lambda **kw: Domain().expert(tasks=[sorted(TASKS)[0]], **kw),
     dict(s=np.full((1, minihome.F), np.nan)), "s"),
    (lambda **kw: PrototypeIndex(**kw), dict(prototypes=[_phi_row(np.nan)]), "prototypes"),
    (lambda **kw: PrototypeIndex(**kw), dict(prototypes=[]), "prototypes"),
    (lambda **kw: PrototypeIndex.fit(**kw), dict(phis_per_model=[_phi_row(np.inf)]), "phis_per_model"),
    (lambda **kw: _INDEX.distances(**kw), dict(phi=_phi_row(np.nan)), "phi"),
    (lambda **kw: _INDEX.score(**kw), dict(traj_phi=_phi_row(np.nan)), "traj_phi"),
    (lambda **kw: _INDEX.topk(K=1, **kw), dict(traj_phi=_phi_row(np.nan)), "phi"),
    (lambda **kw: _INDEX.topk(traj_phi=_phi_row(), **kw), dict(K=3), "K"),
    (lambda **kw: agent.select_worlds(idx=np.zeros((2, 1), dtype=int), present=np.ones((2, 1), bool), **kw),
     dict(features=[torch.full((2, 3, 4), float("nan"))] + _FEATS[1:]), "features"),
    (lambda **kw: abstract_transition(a=np.array([0]), s_next=_state("at_kitchen"), **kw),
     dict(s=np.full((1, minihome.F), np.nan)), "s"),
    (lambda **kw: abstract_transition(s=_state("at_kitchen"), s_next=_state("at_kitchen"), **kw),
     dict(a=np.array([-1])), "a"),
    (lambda **kw: minihome.blocked_by(Domain(), s=_state("at_kitchen"), **kw), dict(a=np.array([0.5])), "a"),
    (lambda **kw: goal_vectors(**kw), dict(tasks=["fly"]), "tasks"),
    (lambda **kw: PrototypeIndex.fit([_phi_row()], **kw), dict(k=2.5), "k"),
    (lambda **kw: PrototypeIndex.fit([_phi_row()], **kw), dict(k=0), "k"),
    (lambda **kw: agent.evaluate(agent.WorldModelPolicy(WorldModel(8)), Domain(), **kw), dict(n=2.5), "n"),
    (lambda **kw: agent.evaluate(agent.WorldModelPolicy(WorldModel(8)), Domain(), **kw), dict(n=0), "n"),
    (lambda **kw: PrototypeIndex(**kw), dict(prototypes=[np.full((2, 71), np.inf, np.float32)]), "prototypes"),
    # issue 49, through companion.validation: a fractional or bool K, a NaN share, 2-D features
    (lambda **kw: retrieve(np.zeros((1, 2, 3)), **kw), dict(K=1.5), "K: expected an integer >= 1"),
    (lambda **kw: retrieve(np.zeros((1, 2, 3)), **kw), dict(K=True), "K: expected an integer >= 1"),
    (lambda **kw: retrieve(K=1, **kw), dict(dist=np.full((1, 2, 3), np.nan)), "dist: must be finite"),
    (lambda **kw: agent.collect(Domain(), 1, 0, **kw), dict(mix=(np.nan, 0.0)), "mix: expected a number in"),
    (lambda **kw: agent.collect(Domain(), 1, 0, **kw), dict(drop=np.nan), "drop: expected a number in"),
    (lambda **kw: agent.select_worlds(idx=np.zeros((2, 1), dtype=int), present=np.ones((2, 1), bool), **kw),
     dict(features=[torch.zeros(2, 4)] * 4), "features\\[0\\]: expected 3 dimensions"),
    (lambda **kw: agent.train_reasoning({"g": np.zeros(1)}, **kw), dict(batch=2.0), "batch: expected an integer"),
    (lambda **kw: WorldModel(**kw), dict(width=True), "width: expected an integer"),
    (lambda **kw: models.Implant(**kw), dict(layers=(0.5, 1)), "layers: expected an integer >= 0"),
]


@pytest.mark.parametrize("fn, kwargs, name", WORMI_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


# --- issue 46: second pass ------------------------------------------------------------------------

def test_held_out_pairs_are_new_pairs_of_known_rules():
    from companion.wormi.train import FRESH, LIBRARY, UNSEEN

    used = {tuple(sorted(m)) for m in LIBRARY + UNSEEN}
    assert len(FRESH) == 8 and not set(FRESH) & used
    assert all(len(p) == 2 and set(p) <= set(minihome.MODIFIERS) - {"wipe"} for p in FRESH)


def test_the_shipped_prototypes_are_kmeans_centroids_fewer_than_the_distinct_transitions():
    """Old checkpoint: 4,096 allowed prototypes, more than any world's distinct transitions, so
    the prototypes were the transitions themselves and k-means never ran."""
    from companion.wormi.train import OFFICIAL_PROTOTYPES, load_or_train

    agents, meta = load_or_train("quick")
    distinct = meta["history"]["distinct_transitions"]
    assert max(meta["prototypes"]) == meta["recipe"]["prototypes"] < min(distinct)
    assert set(meta["official_prototypes"]) == {OFFICIAL_PROTOTYPES}
    assert meta["recipe"]["shared_init"] and meta["recipe"]["compose_worlds"] == "subset"


def test_world_models_fine_tune_from_the_shared_one():
    data = agent.collect(Domain({"lock"}), 4, seed=0)
    base = agent.train_world_model(data, epochs=1, seed=0, width=16)
    same = agent.train_world_model(data, epochs=0, seed=5, width=16, init=base)
    assert all(torch.equal(a, b) for a, b in zip(base.state_dict().values(), same.state_dict().values()))
    tuned = agent.train_world_model(data, epochs=1, seed=5, width=16, init=base)
    assert not torch.equal(tuned.enc1.weight, base.enc1.weight)
    with pytest.raises(ValueError, match="init"):
        agent.train_world_model(data, epochs=0, width=32, init=base)


def test_composition_data_implants_the_domains_own_world_and_others():
    """Official recipe: every training episode implants a subset holding its own world model."""
    data = agent.collect(Domain({"lock"}), 12, seed=0, mix=(0.5, 0.0), own=3, K=2, subset=10)
    assert (data["chosen"][:, 0] == 3).all() and (data["chosen"][:, 1] != 3).all()
    assert len(np.unique(data["chosen"][:, 1])) > 1
    with pytest.raises(ValueError, match="subset"):
        agent.collect(Domain(), 2, seed=0, own=12, subset=10)


def test_implant_hooks_every_block_and_an_untrained_one_is_the_identity():
    from companion.wormi.models import Implant

    torch.manual_seed(0)
    pi_r, imp = ReasoningPolicy(d=32), Implant(d=32, width=16, layers=(0, 1))
    g = s = torch.zeros(5, minihome.F)
    prev = torch.zeros(5, dtype=torch.long)
    mask = torch.ones(5, 3, dtype=torch.bool)
    plain = pi_r(g, s, prev, prev)
    assert torch.equal(agent.implanted_logits(pi_r, imp, g, s, prev, prev, _worlds(), mask)[0], plain)
    with torch.no_grad():
        torch.nn.init.normal_(imp.at[1].out.weight)
    moved = agent.implanted_logits(pi_r, imp, g, s, prev, prev, _worlds(), mask)[0]
    assert not torch.equal(moved, plain)  # the module after the last block reaches the head
    with pytest.raises(ValueError, match="layers"):
        Implant(layers=(1, 1))


def test_composition_report_and_revealed_rules(tiny):
    agents = tiny.agents
    policy = agents.oracle(("lock", "power"))
    _, ep = agent.evaluate(policy, Domain({"lock", "power"}), n=8, seed=1)
    report = agent.composition_report(agents.pi_r, agents.compose, agents.oracles[0], ep)
    assert set(report["residual"]) == {0, 1} and report["attention"].shape == (4,)
    assert np.isclose(report["attention"].sum(), 1, atol=1e-5) and report["steps"] == ep.steps.sum()
    assert np.isnan(report["follow"]) or 0 <= report["follow"] <= 1
    assert 0 <= agent.revealed_rules(ep) <= 2 * 8
    fresh = agent.Episodes.start(Domain(), 2, seed=0)
    with pytest.raises(ValueError, match="ep"):
        agent.composition_report(agents.pi_r, agents.compose, agents.oracles[0], fresh)
    with pytest.raises(ValueError, match="ep"):
        agent.revealed_rules(fresh)


def test_agents_refuse_bad_choices(tiny):
    agents = tiny.agents
    with pytest.raises(ValueError, match="module"):
        agents.policy("random", module="compose_magic")
    with pytest.raises(ValueError, match="j"):
        agents.single(10)
    with pytest.raises(ValueError, match="j"):
        agents.single(1.5)
    with pytest.raises(ValueError, match="unseen"):
        agents.oracle(("dark", "lock"))  # a held-out pair has no oracle
    with pytest.raises(ValueError, match="official"):
        agents.prototypes(oracle=True, official=True)
    frame, _ = agent.evaluate(agents.single(0), Domain({"lock"}), n=4, seed=0)
    assert len(frame) == 4


from companion.wormi import agent as _wa, minihome as _wh, models as _wm

_NAN = float("nan")
WORMI_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _wm.CompoundAttention(d=0), "d"),
    (lambda: _wm.CompoundAttention(d=64, heads=5), "heads"),
    (lambda: _wa.Episodes("domain", [], *(np.zeros(1),) * 6), "domain"),
    (lambda: _wh.check_actions(np.array([99]), 1), "a"),
    (lambda: _wh.check_states(np.full((1, 3), _NAN)), "s"),
    (lambda: _wa.implanted_logits("pi_r", None, None, None, None, None, None, None), "pi_r"),
    (lambda: _wa.library_features(["wm"], torch.zeros(1, 3), torch.zeros(1, 3)), "library"),
    (lambda: _wh.reached(np.zeros((2, _wh.F), bool), np.zeros((3, _wh.F), bool)), "g"),
    (lambda: _wa.retrieval_precision("policy", None, []), "policy"),
    (lambda: _wa.train_composition("pi_r", [], {}), "pi_r"),
    (lambda: _wa.train_reasoning("data"), "data"),
    (lambda: _wa.train_reasoning({"g": np.zeros(1)}, epochs=0), "epochs"),
    (lambda: _wm.world_features("out"), "out"),
]


@pytest.mark.parametrize("call, name", WORMI_MORE_BAD_INPUTS)
def test_wormi_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
