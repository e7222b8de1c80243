"""The HyperIMTS chapter's package: the IMTS data, the hypergraph, the model and its baselines."""

import json
import math
import sys

import numpy as np
import pytest
import torch

import companion.hyperimts as hx
from companion.data.imts import IMTSBatch, lead_lag_pairs, load_imts_csv, make_imts, padding_stats


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data():
    return make_imts(40, 6, seed=3)


def test_generator_is_seeded_sorted_and_splits_history_from_queries(data):
    again = make_imts(40, 6, seed=3)
    assert torch.equal(data.time, again.time) and torch.equal(data.value, again.value)
    assert not torch.equal(make_imts(40, 6, seed=4).value[:50], data.value[:50])
    for b in range(data.n_samples):
        r = data.sample_rows(b)
        assert np.all(np.diff(r["time"]) >= 0)
        assert r["time"][~r["is_query"]].max() <= 0.75 < r["time"][r["is_query"]].min()
        assert 1 <= np.unique(r["time"][r["is_query"]]).size <= 3          # the next 3 timestamps
        assert np.allclose(r["time"] * 480, np.round(r["time"] * 480), atol=1e-3)  # on the grid
    counts = np.bincount(data.var.numpy(), minlength=6)
    assert counts[:3].sum() > counts[3:].sum()  # leaders are observed more often than followers


def test_lead_lag_structure_can_be_switched_off():
    def follower_corr(lead_lag):
        d = make_imts(300, 4, lead_lag=lead_lag, seed=0, rate_range=(60, 60), n_panels=0, noise=0.0)
        # a follower value and its leader's value 0.1 earlier, where the leader was observed then
        xs, ys = [], []
        for b in range(d.n_samples):
            r = d.sample_rows(b)
            lead = dict(zip(np.round(r["time"][r["var"] == 0] * 480).astype(int), r["value"][r["var"] == 0]))
            for t, x in zip(r["time"][r["var"] == 2], r["value"][r["var"] == 2]):
                k = int(round(t * 480)) - 48
                if k in lead:
                    xs.append(x)
                    ys.append(lead[k])
        return np.corrcoef(xs, ys)[0, 1]

    assert lead_lag_pairs(4) == [(0, 2), (1, 3)]
    assert follower_corr(True) > 0.9
    assert abs(follower_corr(False)) < 0.2


def test_padded_view_holds_the_same_observations(data):
    p = data.padded
    B, L, V = p.values.shape
    assert (B, V) == (data.n_samples, 6)
    assert int(p.obs_mask.sum()) == int((~data.is_query).sum()) and int(p.query_mask.sum()) == int(data.is_query.sum())
    assert torch.equal(p.target.reshape(-1)[p.node_cell], data.value)
    assert torch.all(p.values.reshape(-1)[p.node_cell][data.is_query] == 0)   # targets hidden
    assert torch.equal(p.times.reshape(-1)[p.node_cell // V], data.time.float())
    stats = padding_stats(data)
    assert stats["cells"] == B * L * V and stats["nodes"] == data.n_nodes
    assert stats["cells_per_node"] > 4  # the generator is in the sparse regime


def test_hypergraph_of_a_tiny_sample_by_hand():
    # rows: (time, var) = (0.1, 0), (0.3, 0), (0.3, 1), (0.5, 2); sample 0 of 1, V = 3
    time = torch.tensor([0.1, 0.3, 0.3, 0.5])
    var = torch.tensor([0, 0, 1, 2])
    g = hx.build_hypergraph(time, var, torch.zeros(4, dtype=torch.long), 1, 3)
    assert g.time_edge.tolist() == [0, 1, 1, 2] and g.n_time_edges == 3
    assert g.var_edge.tolist() == [0, 0, 1, 2] and g.n_var_edges == 3
    assert torch.allclose(g.edge_time, torch.tensor([0.1, 0.3, 0.5], dtype=torch.float64))
    assert g.slot.tolist() == [0, 1, 2, 3] and g.width == 4 and g.group.tolist() == [0, 0, 0, 0]
    pairs = sorted(map(tuple, g.pairs.T.tolist()))
    assert pairs == [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 3)]
    I_T, I_V, taus = hx.incidence_matrices(time, var, 3)
    assert I_T.tolist() == [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
    assert I_V.tolist() == [[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    # channel-independent: the two nodes at 0.3 no longer share a temporal hyperedge
    ci = hx.build_hypergraph(time, var, torch.zeros(4, dtype=torch.long), 1, 3, cross_variable=False)
    assert ci.n_time_edges == 4 and sorted(map(tuple, ci.pairs.T.tolist())) == [(i, i) for i in range(4)]
    assert ci.group.tolist() == [0, 0, 1, 2] and ci.slot.tolist() == [0, 1, 0, 0] and ci.width == 2


def test_segment_softmax_is_a_softmax_per_segment_and_stable():
    scores = torch.tensor([[1.0, 1000.0], [2.0, 0.0], [3.0, 999.0], [0.5, -3.0]])
    segment = torch.tensor([0, 1, 0, 1])
    w = hx.segment_softmax(scores, segment, 3)
    assert torch.isfinite(w).all()
    assert torch.allclose(w[[0, 2]], torch.softmax(scores[[0, 2]], 0))
    assert torch.allclose(w[[1, 3]], torch.softmax(scores[[1, 3]], 0))


@pytest.mark.parametrize("kw", [{}, {"cross_variable": False}, {"node_update": "linear"}], ids=str)
def test_forecast_does_not_depend_on_the_order_of_rows(data, kw):
    torch.manual_seed(0)
    model = hx.HyperIMTS(6, d_model=16, **kw).eval()
    b = data.select(range(5))
    perm = torch.randperm(b.n_nodes, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(b)
        got = model.forward_nodes(b.time[perm], b.var[perm], b.inputs[perm], b.is_query[perm], b.sample[perm], 5)
    assert torch.allclose(got, ref[perm], atol=1e-5)


def test_no_leakage_and_samples_do_not_interact(data):
    torch.manual_seed(0)
    for model in (hx.HyperIMTS(6, d_model=16), hx.HyperIMTS(6, d_model=16, node_update="linear"),
                  hx.GRUD(6, hidden=8), hx.MTANLite(6, d_model=8), hx.GraFITi(6, d_model=16)):
        model.eval()
        b = data.select(range(4))
        changed = IMTSBatch(b.time, b.var, (b.value + 5.0 * b.is_query).double(), b.is_query, b.offsets, 6)
        with torch.no_grad():
            assert torch.allclose(model(b), model(changed))              # query targets are never read
            alone = model(data.select([0]))
            assert torch.allclose(model(b)[: alone.numel()], alone, atol=1e-5)  # other samples do not matter


def test_chapter_cross_variable_ablation_cuts_every_path_between_variables(data):
    torch.manual_seed(0)
    model = hx.HyperIMTS(6, d_model=16, cross_variable=False).eval()
    b = data.select([0])
    other = b.var != 0
    changed = IMTSBatch(b.time, b.var, (b.value + 3.0 * (other & ~b.is_query)).double(), b.is_query,
                        b.offsets, 6)
    with torch.no_grad():
        mine = (b.var == 0) & b.is_query
        if mine.any():
            assert torch.allclose(model(b)[mine], model(changed)[mine], atol=1e-5)
    full = hx.HyperIMTS(6, d_model=16).eval()
    with torch.no_grad():
        assert not torch.allclose(full(b), full(changed))


def test_naive_baselines_by_hand():
    b = IMTSBatch.from_rows([0, 0, 0, 0, 0], [0.1, 0.2, 0.3, 0.8, 0.8], [0, 0, 1, 0, 1], [1.0, 3.0, 7.0, 0.0, 0.0],
                            [False, False, False, True, True], 3)
    q = b.is_query
    assert hx.last_value(b)[q].tolist() == [3.0, 7.0]
    assert hx.history_mean(b)[q].tolist() == [2.0, 7.0]


def test_grud_decay_inputs_by_hand():
    from companion.hyperimts.baselines import _decay_inputs

    b = IMTSBatch.from_rows([0] * 4, [0.0, 0.2, 0.5, 0.9], [0, 1, 0, 0], [1.0, 2.0, 4.0, 0.0],
                            [False, False, False, True], 2)
    delta, x_last = _decay_inputs(b.padded)
    assert torch.allclose(delta[0, :, 0], torch.tensor([0.0, 0.2, 0.5, 0.4]))
    assert x_last[0, :, 0].tolist() == [0.0, 1.0, 1.0, 4.0]
    assert torch.isfinite(hx.GRUD(2, hidden=4)(b)).all()


def test_training_lowers_the_loss_and_keeps_the_best_epoch(data):
    train = data.select(range(30))
    val = [data.select(range(30, 40))]
    for model in (hx.HyperIMTS(6, d_model=16), hx.GRUD(6, hidden=16), hx.MTANLite(6, d_model=16),
                  hx.GraFITi(6, d_model=16)):
        hist = hx.fit(model, train, val, epochs=3, batch_size=10, lr=1e-2, seed=0)
        assert hist["train"][-1] < hist["train"][0]
        assert min(hist["val"]) == hist["best_val"] == pytest.approx(hx.evaluate(model, val)["mse"])
    with pytest.raises(ValueError, match="^epochs"):
        hx.fit(hx.GRUD(6), train, val, epochs=0)
    with pytest.raises(ValueError, match="^patience"):
        hx.fit(hx.GRUD(6), train, val, epochs=3, patience=0)


def test_training_stops_when_the_validation_error_stops_improving(data):
    train, val = data.select(range(30)), [data.select(range(30, 40))]
    torch.manual_seed(0)
    # a learning rate too small to move the error: epoch 1 is the best, 2, 3 and 4 do not improve
    # (an equal error is no improvement), so patience 3 stops after epoch 4; the rate follows the
    # authors' schedule whatever the validation error does: three epochs at lr, then 0.8 per epoch
    hist = hx.fit(hx.GRUD(6, hidden=8), train, val, epochs=20, patience=3, batch_size=10, lr=1e-12)
    assert len(hist["val"]) == 4 and hist["stopped"] == "patience"
    assert hist["val"][hist["best_epoch"] - 1] == hist["best_val"] == min(hist["val"])
    assert hist["lr"] == pytest.approx([1e-12, 1e-12, 1e-12, 8e-13], rel=1e-12)
    capped = hx.fit(hx.GRUD(6, hidden=8), train, val, epochs=2, patience=5, batch_size=10, lr=1e-2)
    assert len(capped["val"]) == 2 and capped["stopped"] == "epochs"
    broken = hx.GRUD(6, hidden=8)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))
    with pytest.raises(FloatingPointError, match="^lr"):  # a diverged run is named, not kept
        hx.fit(broken, train, val, epochs=2, batch_size=10)


def test_step_cost_measures_time_and_peak_memory(data):
    cost = hx.step_cost(hx.HyperIMTS(6, d_model=16), data.select(range(8)), warmup=1, repeats=2)
    assert cost["seconds"] > 0 and cost["peak_bytes"] > cost["parameter_bytes"] > 0
    with hx.PeakMemory() as memory:  # 4 MB allocated and freed, then 1 MB kept
        big = torch.zeros(1024, 1024)
        del big
        kept = torch.ones(256, 1024)
    assert memory.peak == 4 * 2**20 and memory.current == 2**20 and kept.sum() > 0
    with hx.PeakMemory() as memory:  # views and in-place results of existing tensors are not new memory
        kept.add_(1.0).view(-1)[:10].mul_(2.0)
    assert memory.peak == 0


@pytest.mark.parametrize("change, match", [
    (dict(time=[0.3, 0.1, 0.8]), "^time: .*sorted"),
    (dict(var=[0, 5, 1]), "^var: unknown variable id 5"),
    (dict(var=[0, -1, 1]), "^var: unknown variable id -1"),
    (dict(value=[1.0, float("nan"), 0.0]), "^value: must be finite"),
    (dict(time=[0.1, float("inf"), 0.8]), "^time: must be finite"),
    (dict(is_query=[False, False, False]), "^is_query: sample 0 has no query"),
    (dict(offsets=[0, 2]), "^offsets:"),
    (dict(var=[0.0, 1.0, 1.0]), "^var: expected integer"),
])
def test_bad_input_names_the_argument(change, match):
    args = dict(time=[0.1, 0.3, 0.8], var=[0, 1, 1], value=[1.0, 2.0, 0.0], is_query=[False, False, True],
                offsets=[0, 3], n_vars=2)
    with pytest.raises(ValueError, match=match):
        IMTSBatch(**{**args, **change})


def test_generator_and_loss_refuse_bad_arguments(data):
    with pytest.raises(ValueError, match="^n_samples"):
        make_imts(0)
    with pytest.raises(ValueError, match="^history_end"):
        make_imts(5, history_end=1.5)
    with pytest.raises(ValueError, match="^rows"):
        hx.masked_mse(torch.zeros(data.n_nodes), data, rows=torch.zeros(data.n_nodes, dtype=torch.bool))


def test_csv_loader_reads_a_long_file(tmp_path):
    path = tmp_path / "tiny.csv"
    path.write_text(
        "sample,time,variable,value\n"
        "a,0,hr,80\na,1,hr,82\na,1,temp,37.0\na,3,hr,90\na,4,temp,38\na,5,hr,70\n"
        "b,2,temp,36.5\nb,3.5,hr,60\nb,6,hr,65\n"
        "c,4,hr,50\n")  # c has no history: dropped
    batch, names = load_imts_csv(path, history_end=2.0, n_future_times=2, time_unit=6.0)
    assert names == ["hr", "temp"] and batch.n_samples == 2
    a = batch.sample_rows(0)
    assert np.allclose(a["time"] * 6, [0, 1, 1, 3, 4]) and a["var"].tolist() == [0, 0, 1, 0, 1]
    assert a["is_query"].tolist() == [False, False, False, True, True]   # next 2 timestamps: 3 and 4
    b = batch.sample_rows(1)
    assert np.allclose(b["time"] * 6, [2, 3.5, 6]) and b["is_query"].tolist() == [False, True, True]


def test_csv_loader_bad_input(tmp_path):
    bad = tmp_path / "nan.csv"
    bad.write_text("sample,time,variable,value\na,0,hr,80\na,1,hr,\n")
    with pytest.raises(ValueError, match="^value: 1 missing"):
        load_imts_csv(bad, history_end=0.5)
    cols = tmp_path / "cols.csv"
    cols.write_text("id,time,variable,value\na,0,hr,80\n")
    with pytest.raises(ValueError, match="^path: .*lacks"):
        load_imts_csv(cols, history_end=0.5)
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("sample,time,variable,value\na,0,hr,80\na,1,bp,120\na,2,hr,81\n")
    with pytest.raises(ValueError, match="^variables: "):
        load_imts_csv(unknown, history_end=1.5, variables=["hr"])
    batch, names = load_imts_csv(unknown, history_end=1.5, variables=["hr"], on_unknown="drop")
    assert names == ["hr"] and batch.n_nodes == 2
    with pytest.raises(ValueError, match="^path: no such file"):
        load_imts_csv(tmp_path / "missing.csv", history_end=1.0)


def test_two_readings_closer_than_float32_can_tell_apart_stay_two():
    # 0.5 and 0.5 + 1e-8 are one float32 number: with times stored in float32 one reading was lost
    b = IMTSBatch.from_rows([0] * 4, [0.1, 0.5, 0.5 + 1e-8, 0.9], [0, 1, 1, 1], [1.0, 2.0, 3.0, 0.0],
                            [False, False, False, True], 2)
    assert b.time.dtype == torch.float64
    p = b.padded
    assert int(p.obs_mask.sum()) == 3 and p.values.shape[1] == 4               # four distinct timestamps
    assert sorted(p.values[p.obs_mask].tolist()) == [1.0, 2.0, 3.0]          # no reading lost
    g = hx.build_hypergraph(b.time, b.var, b.sample, 1, 2)
    assert g.n_time_edges == 4 and len(set(g.time_edge.tolist())) == 4


def test_node_attention_weights_path_equals_the_fused_path(data):
    torch.manual_seed(0)
    b = data.select(range(6))
    for kw in ({}, {"cross_variable": False}):
        model = hx.HyperIMTS(6, d_model=16, **kw).eval()
        record = []
        with torch.no_grad():
            fused = model(b)
            explicit = model.forward_nodes(b.time, b.var, b.inputs, b.is_query, b.sample, b.n_samples,
                                           attention=record)
        assert torch.allclose(fused, explicit, atol=1e-5)
        alpha, g = record[-1]
        assert alpha.shape == (g.n_groups, 4, g.width, g.width) and g.n_groups == (6 if kw == {} else 36)
        real = torch.zeros(g.n_groups, g.width, dtype=torch.bool)
        real[g.group, g.slot] = True
        assert torch.allclose(alpha.sum(-1)[real[:, None].expand_as(alpha[..., 0])], torch.tensor(1.0))
        assert float(alpha[~real[:, None, None, :].expand_as(alpha)].abs().max()) == 0.0   # no padding key
    att = hx.HyperIMTS(6, d_model=16).variable_attention(b)
    assert att.shape == (6, 6) and torch.isfinite(att).all() and (att >= 0).all()
    with pytest.raises(ValueError, match="^node_update"):
        hx.HyperIMTS(6, d_model=16, node_update="linear").variable_attention(b)
    with pytest.raises(ValueError, match="^node_update"):
        hx.HyperIMTS(6, node_update="mlp")


def test_only_node_attention_lets_a_variable_read_one_it_never_shares_a_timestamp_with():
    # variables 0 and 1 share no timestamp (history or query): in the bipartite graph, and in the
    # hypergraph without node attention and variable attention, nothing flows from 1 to 0
    b = IMTSBatch.from_rows([0] * 6, [0.1, 0.2, 0.3, 0.4, 0.8, 0.9], [0, 1, 0, 1, 0, 1],
                            [1.0, -1.0, 2.0, 0.5, 0.0, 0.0], [False] * 4 + [True] * 2, 2)
    changed = IMTSBatch(b.time, b.var, (b.value + 4.0 * (b.var == 1) * ~b.is_query).double(), b.is_query,
                        b.offsets, 2)
    q0 = (b.var == 0) & b.is_query
    torch.manual_seed(0)
    isolated = [hx.GraFITi(2, d_model=16), hx.HyperIMTS(2, d_model=16, node_update="linear", use_var_attention=False)]
    with torch.no_grad():
        for model in isolated:
            assert torch.allclose(model.eval()(b)[q0], model(changed)[q0], atol=1e-6), type(model).__name__
        model = hx.HyperIMTS(2, d_model=16, use_var_attention=False).eval()
        assert not torch.allclose(model(b)[q0], model(changed)[q0], atol=1e-4)


def test_batches_move_between_devices_and_select_any_samples(data):
    b = data.to("cpu").select([3, 0, 7])
    assert b.n_samples == 3 and b.device.type == "cpu"
    for k, s in enumerate([3, 0, 7]):
        want, got = data.sample_rows(s), b.sample_rows(k)
        assert all(np.array_equal(want[key], got[key]) for key in want)
    assert b.offsets.tolist() == [0, *np.cumsum([data.sample_rows(s)["time"].size for s in (3, 0, 7)]).tolist()]


class _FactoriesNeedADevice(torch.overrides.TorchFunctionMode):
    """Fails on any tensor factory called from the companion package without ``device=``: on a
    GPU such a tensor would land on the CPU and the next operation would mix devices."""

    FACTORIES = {torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.linspace, torch.logspace,
                 torch.eye, torch.tensor, torch.rand, torch.randn, torch.randint, torch.randperm}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        caller = sys._getframe(1).f_globals.get("__name__", "")
        created = func in self.FACTORIES or (func is torch.as_tensor and not isinstance(args[0], torch.Tensor))
        if created and "device" not in kwargs and caller.startswith("companion."):
            raise AssertionError(f"{caller}: torch.{func.__name__} without device= (would be on the CPU on a GPU run)")
        return func(*args, **kwargs)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(hx.MODELS))
def test_a_training_step_runs_on_the_device_of_the_model(data, name, device):
    """The GPU path, on any machine: every tensor the models, ``fit`` and the batches create inside
    a training step is created on the model's device (a CUDA host runs the same code for real)."""
    torch.manual_seed(0)
    model = hx.MODELS[name][1](6, dict(d_model=8, hidden=8, n_layers=2, n_heads=4)).to(device)
    with _FactoriesNeedADevice():
        hist = hx.fit(model, data.select(range(8)), [data.select(range(8, 12))], epochs=1, batch_size=4)
        pred = model(data.select(range(2)).to(device))
    assert pred.device.type == device and np.isfinite(hist["best_val"])
    with pytest.raises(AssertionError, match="without device="), _FactoriesNeedADevice():
        exec("torch.zeros(3)", {"torch": torch, "__name__": "companion.example"})  # the guard itself works


TINY = dict(n_vars=4, n_train=12, n_val=6, n_test=6, seed=0, first_seed=0, seeds=2, control_seeds=2, d_model=8,
            n_layers=2, n_heads=4, hidden=8, epochs=1, patience=2, batch_size=6, lr=1e-3, decay=0.8, decay_after=3)


def test_training_in_worker_processes_gives_the_same_models():
    from companion.hyperimts import train

    recipe = {**TINY, "seeds": 1, "control_seeds": 1, "epochs": 2}
    one, hist_one = train.train_all(recipe)
    two, hist_two = train.train_all(recipe, workers=2)
    assert list(hist_one) == list(hist_two)
    assert all(hist_one[k]["val"] == hist_two[k]["val"] for k in hist_one)
    assert all(torch.equal(a, b) for a, b in zip(one.state_dict().values(), two.state_dict().values()))
    with pytest.raises(ValueError, match="^workers"):
        train.train_all(recipe, workers=0)


def test_training_entry_point_writes_a_checkpoint_that_loads(tmp_path, monkeypatch):
    from companion.hyperimts import train

    monkeypatch.setitem(train.RECIPES, "quick", TINY)
    assert train.main(["--scale", "quick", "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "quick.json").read_text())
    assert meta["recipe"] == TINY and set(meta["histories"]) == {hx.model_key(n, s) for n in hx.MODELS for s in (0, 1)}
    monkeypatch.setattr(train, "CHECKPOINTS", tmp_path)
    models, record = hx.load_or_train("quick", 0)
    assert record["source"] == "checkpoint" and len(models) == 2 * len(hx.MODELS)
    for name in hx.MODELS:  # each model's recorded best validation error is what the loaded weights give
        data = hx.make_splits(TINY, lead_lag=hx.MODELS[name][0] == "lead-lag")[1]
        got = hx.evaluate(hx.trained(models, name, 1), data.batches(256))["mse"]
        assert got == pytest.approx(record["histories"][hx.model_key(name, 1)]["best_val"], rel=1e-5)
    _, other = hx.load_or_train("quick", 1)  # another data seed: trained here, not loaded
    assert other["source"] == "trained in this run"


def test_the_shipped_checkpoint_loads_into_the_current_model_code():
    from companion.checkpoints import load_checkpoint
    from companion.hyperimts import train

    path = train.CHECKPOINTS / "quick.pt"
    models, meta = load_checkpoint(path, lambda m: train.build_models(m["recipe"]))  # strict: every weight fits
    assert meta["recipe"] == train.RECIPES["quick"] and "uncommitted" not in meta["commit"]
    name = "GRU-D"
    seed = train.model_seeds(name, meta["recipe"])[0]
    _, val, _ = hx.make_splits(meta["recipe"])
    got = hx.evaluate(hx.trained(models, name, seed), val.batches(256))["mse"]
    assert got == pytest.approx(meta["histories"][hx.model_key(name, seed)]["best_val"], rel=1e-4)


def test_seed_statistics():
    mean, lo, hi = hx.mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and lo == pytest.approx(2 - 4.302653 / np.sqrt(3)) and hi == pytest.approx(2 + 4.302653 / np.sqrt(3))
    with pytest.raises(ValueError, match="^values"):
        hx.mean_ci([1.0])
    res = {"mse_by_var": [1.0, 4.0, float("nan")], "queries_by_var": [1, 3, 0]}
    assert hx.pooled_mse(res, [0, 1]) == pytest.approx(13 / 4) and hx.pooled_mse(res, [1, 2]) == 4.0
    with pytest.raises(ValueError, match="^variables"):
        hx.pooled_mse(res, [2])


# --- issue 49: the table of bad inputs ------------------------------------------------------------

_T = torch.tensor([0.1, 0.3, 0.8], dtype=torch.float64)
_V = torch.tensor([0, 1, 1])
_S = torch.zeros(3, dtype=torch.long)
_SMALL = IMTSBatch(time=[0.1, 0.3, 0.8], var=[0, 1, 1], value=[1.0, 2.0, 0.0], is_query=[False, False, True],
                   offsets=[0, 3], n_vars=2)

from companion.hyperimts import clinical as _hclin, model as _hmodel  # noqa: E402

HYPERIMTS_BAD_INPUTS = [
    (lambda **kw: hx.build_hypergraph(var=_V, sample=_S, n_samples=1, n_vars=2, **kw),
     dict(time=torch.tensor([0.1, float("nan"), 0.8], dtype=torch.float64)), "time"),
    (lambda **kw: hx.build_hypergraph(_T, sample=_S, n_samples=1, n_vars=2, **kw), dict(var=torch.tensor([0, 2, 1])),
     "var"),
    (lambda **kw: hx.build_hypergraph(_T, _V, n_samples=1, n_vars=2, **kw), dict(sample=torch.tensor([0, 0, 1])),
     "sample"),
    (lambda **kw: hx.build_hypergraph(_T, _V, _S, n_vars=2, **kw), dict(n_samples=0), "n_samples"),
    (lambda **kw: hx.build_hypergraph(_T, _V, _S, n_samples=1, **kw), dict(n_vars=1.5), "n_vars"),
    (lambda **kw: hx.incidence_matrices(var=[0, 1, 1], n_vars=2, **kw), dict(time=[0.1, float("nan"), 0.8]), "time"),
    (lambda **kw: hx.incidence_matrices(time=[0.1, 0.3, 0.8], n_vars=2, **kw), dict(var=[0, 1, 7]), "var"),
    (lambda **kw: hx.incidence_matrices(time=[0.1, 0.3, 0.8], n_vars=2, **kw), dict(var=[0.0, 1.0, 1.0]), "var"),
    (lambda **kw: hx.incidence_matrices(time=[0.1, 0.3, 0.8], var=[0, 1, 1], **kw), dict(n_vars=0), "n_vars"),
    (lambda **kw: hx.segment_softmax(segment=torch.tensor([0, 0, 1]), n_segments=2, **kw),
     dict(scores=torch.zeros(3)), "scores"),
    (lambda **kw: hx.segment_softmax(torch.zeros(3, 2), n_segments=2, **kw), dict(segment=torch.tensor([0, 1])),
     "segment"),
    (lambda **kw: hx.segment_softmax(torch.zeros(3, 2), torch.tensor([0, 0, 1]), **kw), dict(n_segments=0),
     "n_segments"),
    (lambda **kw: hx.masked_mse(batch=_SMALL, **kw), dict(pred=torch.zeros(2)), "pred"),
    (lambda **kw: hx.masked_mse(torch.zeros(3), **kw), dict(batch="batch"), "batch"),
    (lambda **kw: hx.masked_mse(torch.zeros(3), _SMALL, **kw), dict(rows=torch.zeros(3, dtype=torch.bool)), "rows"),
    (lambda **kw: hx.masked_mse(torch.zeros(3), _SMALL, **kw), dict(rows=torch.ones(2, dtype=torch.bool)), "rows"),
    (lambda **kw: hx.mean_ci([1.0, 2.0], **kw), dict(level=float("nan")), "level"),
    (lambda **kw: hx.mean_ci([1.0, 2.0], **kw), dict(level=1.0), "level"),
    (lambda **kw: hx.mean_ci(**kw), dict(values=[1.0, float("nan")]), "values"),
    (lambda **kw: hx.HyperIMTS(2, **kw), dict(d_model=7), "d_model"),
    (lambda **kw: hx.GraFITi(2, **kw), dict(d_model=7), "d_model"),
    # issue 49, through companion.validation: bool or float ids, out-of-range segments, a NaN share,
    # bool and fractional counts
    (lambda **kw: hx.build_hypergraph(_T, _V, n_samples=1, n_vars=2, **kw), dict(sample=torch.zeros(3, dtype=torch.bool)),
     "sample: expected integer indices"),
    (lambda **kw: hx.build_hypergraph(_T, sample=_S, n_samples=1, n_vars=2, **kw), dict(var=torch.tensor([0, 1])),
     "var: expected 3 indices"),
    (lambda **kw: hx.segment_softmax(torch.zeros(3, 2), n_segments=2, **kw), dict(segment=torch.tensor([0, 0, 5])),
     "segment: expected indices in 0..1"),
    (lambda **kw: hx.segment_softmax(torch.zeros(3, 2), n_segments=2, **kw), dict(segment=torch.tensor([0.0, 0, 1])),
     "segment: expected integer indices"),
    (lambda **kw: _hmodel.pairs_within(n_groups=2, **kw), dict(group=torch.tensor([0, 2])), "group: expected indices in"),
    (lambda **kw: _hmodel.pairs_within(n_groups=2, **kw), dict(group=[0, 1]), "group: expected a 1-D integer tensor"),
    (lambda **kw: _hclin.pbcseq_batch(**kw), dict(history_share=float("nan")), "history_share: expected a number in"),
    (lambda **kw: _hclin.pbcseq_batch(**kw), dict(history_share=True), "history_share: expected a real number"),
    (lambda **kw: hx.MTANLite(2, **kw), dict(n_ref=2.0), "n_ref: expected an integer"),
    (lambda **kw: hx.MTANLite(2, **kw), dict(d_time=True), "d_time: expected an integer"),
    (lambda **kw: hx.step_cost(hx.GraFITi(2), _SMALL, **kw), dict(repeats=1.5), "repeats: expected an integer"),
]


@pytest.mark.parametrize("fn, kwargs, name", HYPERIMTS_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument_table(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


# --- issue 45: the authors' schedule, the threshold gate, resumable training ------------------------

def test_the_learning_rate_follows_the_authors_delayed_step_decay():
    from companion.hyperimts import train

    # their DelayedStepDecayLR: factor 1 for epochs 0 and 1, then 0.8 ** (epoch - 2)
    assert [train.lr_factor(e) for e in range(6)] == pytest.approx([1, 1, 1, 0.8, 0.64, 0.512])
    assert train.RECIPES["quick"]["lr"] == 1e-3 and train.RECIPES["quick"]["patience"] == 10
    assert train.RECIPES["quick"]["seeds"] == 5 and train.RECIPES["quick"]["batch_size"] == 32
    assert train.model_seeds("HyperIMTS", train.RECIPES["quick"]) == [2024, 2025, 2026, 2027, 2028]
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="^epoch"):
            train.lr_factor(bad)
    with pytest.raises(ValueError, match="^name"):
        train.model_seeds("LSTM", train.RECIPES["quick"])


def test_the_variable_attention_gate_blends_only_above_the_threshold(data):
    torch.manual_seed(0)
    model = hx.HyperIMTS(6, d_model=16).eval()
    b = data.select(range(4))
    assert model.var_attention.threshold.item() == 0.5      # the authors' initial value
    w, opened = model.variable_to_variable(b)
    assert w.shape == (6, 6) and torch.allclose(w.sum(-1), torch.ones(6), atol=1e-5)
    model.var_attention.gate = "always"
    _, always = model.variable_to_variable(b)
    model.var_attention.gate = "off"
    _, off = model.variable_to_variable(b)
    assert bool((opened <= always + 1e-7).all()) and float(off.sum()) == 0.0   # threshold opens fewer pairs
    assert float(always.sum()) > float(opened.sum()) >= 0.0
    with torch.no_grad():
        model.var_attention.threshold.fill_(-1e9)        # every score above it: the same as "always"
    model.var_attention.gate = "threshold"
    _, low = model.variable_to_variable(b)
    assert torch.equal(low, always)
    with pytest.raises(ValueError, match="^gate"):
        hx.IrregularityAwareAttention(16, gate="soft")


def test_the_threshold_of_the_gate_gets_no_gradient(data):
    """The comparison with the threshold is a step function: the "learned" threshold never moves."""
    torch.manual_seed(0)
    model = hx.HyperIMTS(6, d_model=16)
    b = data.select(range(8))
    hx.masked_mse(model(b), b).backward()
    assert model.var_attention.threshold.grad is None
    assert model.var_attention.q.weight.grad is not None      # the scores themselves do learn


def test_training_resumes_from_the_partial_folder(tmp_path):
    from companion.hyperimts import train

    recipe = {**TINY, "seeds": 1, "control_seeds": 1, "epochs": 1}
    first, hist_first = train.train_all(recipe, partial=tmp_path)
    assert len(list(tmp_path.glob("*.pt"))) == len(hx.MODELS)
    again, hist_again = train.train_all(recipe, partial=tmp_path)   # everything loaded, nothing trained
    assert all(hist_first[k]["val"] == hist_again[k]["val"] for k in hist_first)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), again.state_dict().values()))
    with pytest.raises(ValueError, match="^partial"):
        train.train_all(recipe, workers=2, partial=tmp_path)


# --- issue 45: real irregular clinical data (survival::pbcseq) -------------------------------------

def _visits():
    import pandas as pd

    from companion.hyperimts.clinical import PBC_LABS

    rows = []
    for pid, days in ((1, [0, 100, 200, 300]), (2, [0, 50, 400]), (3, [0, 10])):
        for k, day in enumerate(days):
            rows.append({"id": pid, "day": day, **{lab: 1.0 + k + pid for lab in PBC_LABS}})
    frame = pd.DataFrame(rows)
    frame.loc[1, "chol"] = float("nan")   # a lab missing at a visit is left out, not imputed
    return frame


def test_pbcseq_visits_become_an_irregular_batch_with_the_later_visits_as_queries():
    from companion.hyperimts import clinical

    batch, ids = clinical.pbcseq_batch(_visits(), history_share=2 / 3, n_future=3, min_visits=3)
    assert ids.tolist() == [1, 2] and batch.n_samples == 2 and batch.n_vars == 7   # patient 3: 2 visits
    a = batch.sample_rows(0)
    assert a["time"].size == 4 * 7 - 1                                             # one cholesterol missing
    assert np.allclose(np.unique(a["time"][a["is_query"]]) * 5200, [300])           # ceil(2/3 * 4) = 3 history
    b = batch.sample_rows(1)
    assert np.allclose(np.unique(b["time"][b["is_query"]]) * 5200, [400])           # ceil(2/3 * 3) = 2 history
    bili = a["var"] == 0
    assert np.allclose(a["value"][bili], np.log([2.0, 3.0, 4.0, 5.0]))              # bilirubin on the log scale


def test_the_real_pbcseq_table_loads_offline():
    from companion.hyperimts import clinical

    rows = clinical.pbcseq_rows()
    assert rows["id"].nunique() == 312 and rows.groupby(["id", "day"]).ngroups == 1945
    train, val, test = clinical.pbcseq_splits()
    assert train.n_samples > val.n_samples > 0 and test.n_samples > 0
    seen = [set(map(int, b.sample.unique())) for b in (train, val, test)]
    assert sum(b.n_samples for b in (train, val, test)) == clinical.pbcseq_batch()[0].n_samples
    assert abs(float(train.value[~train.is_query].mean())) < 0.05 and seen[0]       # standardised on train


@pytest.mark.parametrize("kwargs, name", [
    (dict(frame="pbcseq"), "frame"), (dict(history_share=1.0), "history_share"),
    (dict(history_share=float("nan")), "history_share"), (dict(n_future=0), "n_future"),
    (dict(n_future=1.5), "n_future"), (dict(min_visits=1), "min_visits"), (dict(min_visits=9), "min_visits"),
])
def test_bad_pbcseq_arguments_are_named(kwargs, name):
    from companion.hyperimts import clinical

    kwargs = {"frame": _visits(), **kwargs}
    with pytest.raises(ValueError, match=f"^{name}"):
        clinical.pbcseq_batch(**kwargs)


def test_bad_pbcseq_tables_are_named():
    from companion.hyperimts import clinical

    frame = _visits()
    for bad in (frame.drop(columns="bili"), frame.iloc[:0], frame.assign(day=-1.0), frame.assign(ast=0.0)):
        with pytest.raises(ValueError, match="^frame"):
            clinical.pbcseq_rows(bad)
    with pytest.raises(ValueError, match="^shares"):
        clinical.pbcseq_splits({**clinical.PBC_RECIPES["quick"], "shares": [0.9, 0.1, 0.0]}, _visits())


def test_pbcseq_training_runs_and_the_entry_point_writes_its_checkpoint(tmp_path, monkeypatch):
    from companion.hyperimts import clinical, train

    tiny = {**clinical.PBC_RECIPES["quick"], "seeds": 1, "epochs": 1, "d_model": 8, "hidden": 8}
    monkeypatch.setitem(clinical.PBC_RECIPES, "quick", tiny)
    assert train.main(["--scale", "quick", "--data", "pbcseq", "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / "quick-pbcseq.json").read_text())
    assert meta["recipe"] == json.loads(json.dumps(tiny)) and len(meta["histories"]) == len(clinical.PBC_MODELS)
    monkeypatch.setattr(train, "CHECKPOINTS", tmp_path)
    models, record = clinical.load_or_train_pbcseq("quick", 0)
    assert record["source"] == "checkpoint"
    _, val, _ = clinical.pbcseq_splits(tiny)
    key = hx.model_key("GRU-D", 2024)
    got = hx.evaluate(models[key], val.batches(256))["mse"]
    assert got == pytest.approx(record["histories"][key]["best_val"], rel=1e-5)


def test_a_variable_without_its_history_keeps_its_queries(data):
    b = data.select(range(3))
    cut = hx.without_history_of(b, [0, 2])
    gone = ~b.is_query & ((b.var == 0) | (b.var == 2))
    assert cut.n_samples == 3 and cut.n_nodes == b.n_nodes - int(gone.sum())
    assert int(cut.is_query.sum()) == int(b.is_query.sum())
    assert not bool((~cut.is_query & ((cut.var == 0) | (cut.var == 2))).any())
    for bad in ([], [6], [-1], [0.5]):
        with pytest.raises(ValueError, match="^variables"):
            hx.without_history_of(b, bad)
    with pytest.raises(ValueError, match="^batch"):
        hx.without_history_of("batch", [0])


def test_the_shipped_pbcseq_checkpoint_loads_into_the_current_model_code():
    from companion.checkpoints import load_checkpoint
    from companion.hyperimts import clinical, train

    path = train.CHECKPOINTS / "quick-pbcseq.pt"
    models, meta = load_checkpoint(path, lambda m: clinical.build_pbc_models(m["recipe"]))
    assert meta["recipe"] == json.loads(json.dumps(clinical.PBC_RECIPES["quick"]))
    assert "uncommitted" not in meta["commit"]
    _, val, _ = clinical.pbcseq_splits(meta["recipe"])
    key = hx.model_key("HyperIMTS", clinical.pbc_seeds(meta["recipe"])[0])
    got = hx.evaluate(models[key], val.batches(256))["mse"]
    assert got == pytest.approx(meta["histories"][key]["best_val"], rel=1e-4)


@pytest.mark.parametrize("kwargs, name", [
    (dict(lr=float("nan")), "lr"), (dict(lr=0.0), "lr"), (dict(lr=True), "lr"), (dict(decay=0.0), "decay"),
    (dict(decay=1.5), "decay"), (dict(batch_size=0), "batch_size"), (dict(epochs=1.5), "epochs"),
    (dict(patience=2.0), "patience"),
])
def test_bad_training_arguments_are_named(data, kwargs, name):
    train, val = data.select(range(8)), [data.select(range(8, 12))]
    with pytest.raises(ValueError, match=f"^{name}"):
        hx.fit(hx.GRUD(6, hidden=4), train, val, **{"epochs": 1, **kwargs})


def test_the_irregularity_aware_scores_follow_the_authors_rule():
    """One sample: variable 0 observed at t = 0.1 and 0.2, variable 1 at 0.1 only (2 timestamps)."""
    torch.manual_seed(0)
    att = hx.IrregularityAwareAttention(4)
    time = torch.tensor([0.1, 0.1, 0.2], dtype=torch.float64)
    var = torch.tensor([0, 1, 0])
    g = hx.build_hypergraph(time, var, torch.zeros(3, dtype=torch.long), 1, 2)
    h = torch.tensor([[2.0, 9, 9, 9], [3.0, 9, 9, 9], [5.0, 9, 9, 9]])   # first channels 2, 3, 5
    e = torch.randn(2, 4)
    s, c, blend = att.scores(e, h, g, var, 2)
    static = att.q(e) @ att.k(e).T / 2.0
    fine = torch.tensor([[2 * 2 + 5 * 5, 2 * 3], [3 * 2, 3 * 3]]) / math.sqrt(2)   # sums over shared times
    share = torch.tensor([[1.0, 0.5], [1.0, 1.0]])                               # of u's timestamps
    assert torch.allclose(c[0], share)
    expect = torch.where(static > 0.5, (1 - share) * static + share * fine, static)
    assert torch.allclose(s[0], expect, atol=1e-6) and torch.equal(blend[0], static > 0.5)


from companion.hyperimts import baselines as _hb, clinical as _hcl, cost as _hc, model as _hm, train as _ht

HYPERIMTS_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _hm.HyperedgeAttention(30, 8, 4), "d_model"),
    (lambda: _hm.HyperedgeAttention(0, 8, 4), "d_model"),
    (lambda: _hm.NodeAttention(32, 0, 4), "d_key"),
    (lambda: _hb.MTANLite(0), "n_vars"),
    (lambda: _hcl.build_pbc_models("recipe"), "recipe"),
    (lambda: _ht.data_seed("recipe"), "recipe"),
    (lambda: _ht.evaluate_all("models", {}, {}, [0], {}), "models"),
    (lambda: _hb.history_mean("batch"), "batch"),
    (lambda: _hm.init_time_embedding("linear"), "linear"),
    (lambda: _hb.last_value("batch"), "batch"),
    (lambda: _hcl.load_or_train_pbcseq("huge", 0), "scale"),
    (lambda: _ht.make_splits("recipe"), "recipe"),
    (lambda: _ht.model_key("hyperimts", 1.5), "seed"),
    (lambda: _hm.pairs_within(torch.tensor([0, 3]), 2), "group"),
    (lambda: _hcl.pbc_seeds("recipe"), "recipe"),
    (lambda: _hc.step_cost("model", None), "model"),
    (lambda: _hc.step_cost(torch.nn.Linear(2, 2), None, repeats=0), "repeats"),
    (lambda: _hcl.train_pbcseq("recipe"), "recipe"),
    (lambda: _ht.trained(torch.nn.ModuleDict(), "hyperimts", 0), "name"),
    (lambda: _ht.model_key("", 0), "name"),
]


@pytest.mark.parametrize("call, name", HYPERIMTS_MORE_BAD_INPUTS)
def test_hyperimts_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
