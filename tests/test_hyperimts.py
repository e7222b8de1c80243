"""The HyperIMTS chapter's package: the IMTS data, the hypergraph, the model and its baselines."""

import numpy as np
import pytest
import torch

import companion.hyperimts as hx
from companion.data.imts import IMTSBatch, lead_lag_pairs, load_imts_csv, make_imts, padding_stats


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one thread is fastest, and immune to a busy machine; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
    assert torch.equal(p.times.reshape(-1)[p.node_cell // V], data.time)
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
    assert torch.allclose(g.edge_time, torch.tensor([0.1, 0.3, 0.5]))
    pairs = sorted(map(tuple, g.pairs.T.tolist()))
    assert pairs == [(0, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 3)]
    I_T, I_V, taus = hx.incidence_matrices(time, var, 3)
    assert I_T.tolist() == [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
    assert I_V.tolist() == [[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    # channel-independent: the two nodes at 0.3 no longer share a temporal hyperedge
    ci = hx.build_hypergraph(time, var, torch.zeros(4, dtype=torch.long), 1, 3, cross_variable=False)
    assert ci.n_time_edges == 4 and sorted(map(tuple, ci.pairs.T.tolist())) == [(i, i) for i in range(4)]


def test_segment_softmax_is_a_softmax_per_segment_and_stable():
    scores = torch.tensor([[1.0, 1000.0], [2.0, 0.0], [3.0, 999.0], [0.5, -3.0]])
    segment = torch.tensor([0, 1, 0, 1])
    w = hx.segment_softmax(scores, segment, 3)
    assert torch.isfinite(w).all()
    assert torch.allclose(w[[0, 2]], torch.softmax(scores[[0, 2]], 0))
    assert torch.allclose(w[[1, 3]], torch.softmax(scores[[1, 3]], 0))


@pytest.mark.parametrize("cross_variable", [True, False])
def test_forecast_does_not_depend_on_the_order_of_rows(data, cross_variable):
    torch.manual_seed(0)
    model = hx.HyperIMTS(6, d_model=16, cross_variable=cross_variable).eval()
    b = data.select(range(5))
    perm = torch.randperm(b.n_nodes, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(b)
        got = model.forward_nodes(b.time[perm], b.var[perm], b.inputs[perm], b.is_query[perm], b.sample[perm], 5)
    assert torch.allclose(got, ref[perm], atol=1e-5)


def test_no_leakage_and_samples_do_not_interact(data):
    torch.manual_seed(0)
    for model in (hx.HyperIMTS(6, d_model=16), hx.GRUD(6, hidden=8), hx.MTANLite(6, d_model=8)):
        model.eval()
        b = data.select(range(4))
        changed = IMTSBatch(b.time.double(), b.var, (b.value + 5.0 * b.is_query).double(), b.is_query, b.offsets, 6)
        with torch.no_grad():
            assert torch.allclose(model(b), model(changed))              # query targets are never read
            alone = model(data.select([0]))
            assert torch.allclose(model(b)[: alone.numel()], alone, atol=1e-5)  # other samples do not matter


def test_chapter_cross_variable_ablation_cuts_every_path_between_variables(data):
    torch.manual_seed(0)
    model = hx.HyperIMTS(6, d_model=16, cross_variable=False).eval()
    b = data.select([0])
    other = b.var != 0
    changed = IMTSBatch(b.time.double(), b.var, (b.value + 3.0 * (other & ~b.is_query)).double(), b.is_query,
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


def test_training_lowers_the_loss_and_cost_is_measured(data):
    train = data.select(range(30))
    val = [data.select(range(30, 40))]
    for model in (hx.HyperIMTS(6, d_model=16), hx.GRUD(6, hidden=16), hx.MTANLite(6, d_model=16)):
        hist = hx.fit(model, train, val, epochs=3, batch_size=10, lr=1e-2, seed=0)
        assert hist["train"][-1] < hist["train"][0]
        assert min(hist["val"]) == pytest.approx(hx.evaluate(model, val)["mse"])
    cost = hx.step_cost(hx.HyperIMTS(6, d_model=16), train, warmup=1, repeats=2)
    assert cost["seconds"] > 0 and cost["activation_bytes"] > cost["parameter_bytes"] > 0


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
