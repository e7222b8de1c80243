"""FLAIR: the database harness, the estimators and the decision engine against independent
references (NumPy counts, hand-computed histograms, brute-force loops)."""

import json

import numpy as np
import pytest
import torch

import companion.flair as fl
from companion.flair import stream as st

torch.set_num_threads(1)  # tiny models: one thread is many times faster on a busy machine


@pytest.fixture(scope="module", params=["duckdb", "sqlite"])
def table(request):
    return fl.DriftingTable(fl.connect(request.param), 4000, seed=3)


def test_counts_are_the_databases_and_match_the_numpy_mirror(table):
    qs = fl.sample_queries(table.snapshot(), 50, np.random.default_rng(0))
    assert [table.count(q) for q in qs] == [int(q.mask(table.snapshot()).sum()) for q in qs]
    # the batched statement gives the same counts, an (almost surely) empty query included
    corner = fl.RangeQuery((0, 1, 2, 3), [0] * 4, [0] * 4)
    batch = qs + [corner, fl.RangeQuery((2,), [0], [999])]
    assert table.count(corner) == 0
    assert table.count_many(batch).tolist() == [table.count(q) for q in batch]
    assert table.count_many([]).shape == (0,)
    with pytest.raises(ValueError, match="^qs"):
        table.count_many([None])
    assert sum(table.count(q) > 0 for q in qs) >= 40  # anchored on rows: mostly non-empty


@pytest.mark.parametrize("backend", ["duckdb", "sqlite"])
def test_drift_events_change_the_table_as_described(backend):
    t = fl.DriftingTable(fl.connect(backend), 2000, seed=1)
    assert t.apply_drift("insert", 0.25) == 500 and t.n_rows == 2500 == len(t.snapshot())
    before = t.snapshot().copy()
    touched = t.apply_drift("delete", 0.2)
    assert t.n_rows == 2500 - touched and touched >= 500  # a band of values: ties may add rows
    pairs = set()
    for _ in range(4):  # each update rewires a random pair of columns
        before = t.snapshot().copy()
        touched = t.apply_drift("update", 0.3)
        a, b, theta = (t.last_update[k] for k in ("a", "b", "theta"))
        assert a != b and theta == int(np.quantile(before[:, a], 0.3))
        assert touched == int((before[:, a] < theta).sum())
        want = before.copy()
        want[want[:, a] < theta, b] = (want[want[:, a] < theta, b] + 350) % 1000
        assert sorted(map(tuple, t.snapshot())) == sorted(map(tuple, want))
        pairs.add((a, b))
    assert len(pairs) > 1
    with pytest.raises(ValueError, match="^kind"):
        t.apply_drift("truncate", 0.1)
    with pytest.raises(ValueError, match="^severity"):
        t.apply_drift("insert", 1.5)


def test_the_generator_is_correlated_and_seeded():
    a = fl.DriftingTable(fl.connect(), 3000, seed=5).snapshot()
    b = fl.DriftingTable(fl.connect(), 3000, seed=5).snapshot()
    assert np.array_equal(a, b) and a.min() >= 0 and a.max() <= 999
    corr = np.corrcoef(a.T)[np.triu_indices(4, 1)]
    assert np.abs(corr).max() > 0.3


def test_sql_uses_bound_parameters_and_refuses_bad_queries():
    q = fl.RangeQuery((0, 2), [10, 20], [30, 40])
    assert fl.to_sql(q) == ("SELECT COUNT(*) FROM t WHERE c0 BETWEEN ? AND ? AND c2 BETWEEN ? AND ?",
                            [10, 30, 20, 40])
    with pytest.raises(ValueError, match="^lo"):
        fl.RangeQuery((0,), [50], [40])
    with pytest.raises(ValueError, match="^cols"):
        fl.RangeQuery((4,), [0], [1])
    with pytest.raises(ValueError, match="^cols"):
        fl.RangeQuery((1, 1), [0, 0], [1, 1])
    with pytest.raises(ValueError, match="^table"):
        fl.to_sql(q, table="t; DROP TABLE t")
    with pytest.raises(ValueError, match="^backend"):
        fl.connect("postgres")


def test_explain_parser_reads_both_plan_formats():
    assert fl.parse_explain("│ ~1,234 rows │") == 1234
    assert fl.parse_explain("~1234 Rows") == 1234
    assert fl.parse_explain("FILTER\nEC: 1234\n") == 1234
    assert fl.parse_explain("SEQ_SCAN t") is None
    with pytest.raises(ValueError, match="^text"):
        fl.parse_explain(None)
    t = fl.DriftingTable(fl.connect("duckdb"), 1000, seed=0)
    assert t.engine_estimate(fl.RangeQuery((0,), [0], [999])) > 0
    assert fl.DriftingTable(fl.connect("sqlite"), 100, seed=0).engine_estimate(
        fl.RangeQuery((0,), [0], [999])) is None


def test_histograms_and_avi_against_a_hand_computed_case():
    data = np.zeros((8, 4), dtype=int)
    data[:, 0] = [0, 1, 2, 3, 4, 5, 6, 7]
    data[:, 1] = data[:, 0]  # perfectly correlated with c0
    hist = fl.ColumnHistograms.fit(data, bins=8)
    q = fl.RangeQuery((0,), [0], [3])  # 4 of 8 rows
    assert hist.selectivity(q)[0] == pytest.approx(0.5, abs=0.07)
    assert list(hist.selectivity(q)[1:]) == [1.0, 1.0, 1.0]
    both = fl.RangeQuery((0, 1), [0, 0], [3, 3])  # truly 4 rows; independence says 8/4 = 2
    assert fl.avi_estimate(both, hist) == pytest.approx(2.0, rel=0.3)
    rng = np.random.default_rng(0)
    uniform = rng.integers(0, 1000, (20000, 4))
    h = fl.ColumnHistograms.fit(uniform)
    q = fl.RangeQuery((0, 3), [100, 500], [399, 999])
    assert fl.avi_estimate(q, h) == pytest.approx(q.mask(uniform).sum(), rel=0.05)


def test_featurize_shapes_and_values():
    data = np.random.default_rng(1).integers(0, 1000, (5000, 4))
    hist = fl.ColumnHistograms.fit(data)
    x = fl.featurize([fl.RangeQuery((1,), [0], [999]), fl.RangeQuery((0, 3), [0, 0], [499, 999])], hist)
    assert x.shape == (2, fl.D_FEATURES)
    assert np.allclose(x[0, :8], [-1, 1] * 4) and np.allclose(x[0, 8:12], 0, atol=1e-9)
    assert x[0, 12] == pytest.approx(np.log1p(5000) / np.log(5000))
    assert x[1, 1] == pytest.approx(2 * 499 / 999 - 1) and x[1, 8] == pytest.approx(np.log(0.5), abs=0.02)
    with pytest.raises(ValueError, match="^qs"):
        fl.featurize([], hist)


def test_q_error_and_gmq():
    qe = fl.q_error([10.0, 1.0, 0.0, 50.0], [5.0, 4.0, 0.0, 50.0])
    assert np.allclose(qe, [2.0, 4.0, 1.0, 1.0])
    assert np.allclose(fl.q_error([5.0, 4.0], [10.0, 1.0]), [2.0, 4.0])  # symmetric
    assert fl.gmq(qe) == pytest.approx(np.sqrt(8) ** 0.5 * 1.0)
    s = fl.summarize(qe)
    assert s["max"] == 4.0 and s["p50"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="^pred_card"):
        fl.q_error([np.nan], [1.0])
    with pytest.raises(ValueError, match="^true_card"):
        fl.q_error([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="^qe"):
        fl.gmq([0.5])


def _dde(**kw):
    torch.manual_seed(0)
    return fl.DynamicDecisionEngine(d_x=4, d_model=16, n_layers=2, n_heads=2, **kw).eval()


def test_dde_is_a_set_function_of_its_context():
    dde = _dde()
    gen = torch.Generator().manual_seed(0)
    cx, cy, qx = torch.randn(2, 9, 4, generator=gen), torch.randn(2, 9, generator=gen), torch.randn(2, 3, 4, generator=gen)
    with torch.no_grad():
        mean, log_var = dde(cx, cy, qx)
        assert mean.shape == log_var.shape == (2, 3)
        perm = torch.randperm(9, generator=gen)
        assert torch.allclose(dde(cx[:, perm], cy[:, perm], qx)[0], mean, atol=1e-5)
        # padded entries under the mask change nothing
        pad_x = torch.cat([cx, 100 * torch.randn(2, 4, 4, generator=gen)], 1)
        pad_y = torch.cat([cy, 100 * torch.randn(2, 4, generator=gen)], 1)
        mask = torch.arange(13) < 9
        assert torch.allclose(dde(pad_x, pad_y, qx, mask.expand(2, 13))[0], mean, atol=1e-5)
        # queries do not see each other
        qx2 = qx.clone()
        qx2[:, 1] = 50.0
        assert torch.allclose(dde(cx, cy, qx2)[0][:, [0, 2]], mean[:, [0, 2]], atol=1e-6)
        # the context's label scale is undone: labels x 10 + 3 give predictions x 10 + 3
        assert torch.allclose(dde(cx, 10 * cy + 3, qx)[0], 10 * mean + 3, atol=1e-4)


def test_dde_refuses_bad_input():
    dde = _dde()
    cx, cy, qx = torch.randn(1, 5, 4), torch.randn(1, 5), torch.randn(1, 1, 4)
    with pytest.raises(ValueError, match="^ctx_x.*empty"):
        dde(torch.randn(1, 0, 4), torch.randn(1, 0), qx)
    bad = cx.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="^ctx_x"):
        dde(bad, cy, qx)
    with pytest.raises(ValueError, match="^ctx_y"):
        dde(cx, torch.full((1, 5), float("nan")), qx)
    with pytest.raises(ValueError, match="^ctx_y"):
        dde(cx, torch.randn(1, 4), qx)
    with pytest.raises(ValueError, match="^qry_x"):
        dde(cx, cy, torch.randn(1, 1, 3))
    with pytest.raises(ValueError, match="^ctx_mask"):
        dde(cx, cy, qx, torch.zeros(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="^d_model"):
        fl.DynamicDecisionEngine(d_x=4, d_model=10, n_heads=4)


def test_prior_sampler_shapes_and_seeds():
    a = fl.sample_prior_batch(3, 7, 2, 5, np.random.default_rng(0))
    b = fl.sample_prior_batch(3, 7, 2, 5, np.random.default_rng(1))
    assert [tuple(t.shape) for t in a] == [(3, 7, 5), (3, 7), (3, 2, 5), (3, 2)]
    assert all(torch.isfinite(t).all() for t in a) and not torch.equal(a[0], b[0])
    with pytest.raises(ValueError, match="^n_ctx"):
        fl.sample_prior_batch(3, 0, 2, 5, np.random.default_rng(0))


def test_meta_training_lowers_the_prior_nll():
    dde = _dde()
    valid = fl.sample_prior_batch(32, 30, 10, 4, np.random.default_rng(99))
    before = fl.prior_nll(dde, valid)
    fl.meta_train(dde, 150, batch=8, lr=3e-3, seed=0, n_ctx=(20, 40), n_qry=10)
    assert fl.prior_nll(dde, valid) < before - 0.2


def test_context_memory_is_a_fifo_queue():
    mem = fl.ContextMemory(capacity=3, d=2)
    for i in range(5):
        mem.push([i, -i], float(i))
    Z, Y = mem.arrays()
    assert mem.full and len(mem) == 3 and Y.tolist() == [2, 3, 4] and Z[:, 0].tolist() == [2, 3, 4]
    with pytest.raises(ValueError, match="^z"):
        mem.push([1.0, 2.0, 3.0], 1.0)
    with pytest.raises(ValueError, match="^capacity"):
        fl.ContextMemory(0)


class _CountingEngine(torch.nn.Module):
    def __init__(self, d_x):
        super().__init__()
        self.d_x, self.calls, self.w = d_x, 0, torch.nn.Parameter(torch.zeros(1))

    def forward(self, cx, cy, qx, ctx_mask=None):
        self.calls += 1
        return cy.mean(1, keepdim=True).expand(qx.shape[:2]) + 0 * self.w, torch.zeros(qx.shape[:2])


def _tfm():
    torch.manual_seed(0)
    return fl.TaskFeaturizer(d_z=4).eval()


def test_flair_uses_the_head_until_the_memory_is_full():
    tfm, engine = _tfm(), _CountingEngine(4)
    flair = fl.FLAIR(tfm, engine, capacity=3, offset=False)
    xs = np.random.default_rng(0).standard_normal((6, fl.D_FEATURES))
    for i, x in enumerate(xs):
        pred = flair.predict(x)
        if i < 3:
            with torch.no_grad():
                assert pred == pytest.approx(float(tfm(torch.tensor(x[None], dtype=torch.float32))[1][0]))
        else:
            assert pred == pytest.approx(np.mean(range(i - 3, i)))  # the labels before query i
        assert engine.calls == max(0, i - 2)
        flair.observe(x, float(i))
    flair.freeze_memory()
    flair.observe(xs[0], 100.0)
    assert flair.memory.arrays()[1].tolist() == [3, 4, 5]


def test_the_head_offset_hands_the_engine_what_the_head_gets_wrong():
    tfm, engine = _tfm(), _CountingEngine(4)
    flair = fl.FLAIR(tfm, engine, capacity=3)  # offset=True: the book's recipe
    xs = np.random.default_rng(1).standard_normal((4, fl.D_FEATURES))
    with torch.no_grad():
        head = tfm(torch.tensor(xs, dtype=torch.float32))[1].numpy()
    for i in range(3):
        flair.observe(xs[i], float(head[i]) + 2.0)  # the head is off by +2 on every query
    # the counting engine predicts the context's mean label: here the mean residual, 2
    assert flair.predict(xs[3]) == pytest.approx(head[3] + 2.0, abs=1e-5)


@pytest.mark.parametrize("freeze_after", [None, 5])
def test_batched_phase_equals_the_one_query_at_a_time_loop(freeze_after):
    torch.manual_seed(1)
    tfm, dde = _tfm(), fl.DynamicDecisionEngine(d_x=4, d_model=16, n_layers=1, n_heads=2).eval()
    rng = np.random.default_rng(0)
    batched = st.InContext(fl.FLAIR(tfm, dde, capacity=4), freeze_after=freeze_after)
    online = st.InContext(fl.FLAIR(tfm, dde, capacity=4), freeze_after=freeze_after)
    for n in (3, 6, 5):  # three phases; the first ends before the queue is full
        X, y = rng.standard_normal((n, fl.D_FEATURES)), rng.standard_normal(n)
        got = batched.run_phase(X, [None] * n, y)[0]
        want = st.Method.run_phase(online, X, [None] * n, y)[0]
        assert np.allclose(got, want, atol=1e-5)
        assert np.array_equal(batched.flair.memory.arrays()[1], online.flair.memory.arrays()[1])


def test_tfm_and_fine_tuning_learn():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, fl.D_FEATURES))
    y = 3 + X[:, 0] - 0.5 * X[:, 12]
    tfm = fl.TaskFeaturizer()
    hist = fl.fit_tfm(tfm, X, y, epochs=30, seed=0)
    assert hist[-1] < 0.1 * hist[0]
    ft = st.FineTuned(tfm, every=20, window=40, epochs=5)
    for x, t in zip(X[:40], 5 + y[:40]):  # the concept shifts by +2
        ft.observe(x, t)
    assert ft.rounds == 2 and ft.tfm is not tfm
    err = lambda m: np.mean([(m.predict(x, None) - t) ** 2 for x, t in zip(X[40:80], 5 + y[40:80])])  # noqa: E731
    assert err(ft) < err(st.Static(tfm))
    with pytest.raises(ValueError, match="^x"):
        fl.fit_tfm(tfm, X[:, :5], y)


def test_run_stream_feeds_labels_back_after_predicting():
    table = fl.DriftingTable(fl.connect(), 3000, seed=2)
    X, y, _ = fl.offline_workload(table, 300, seed=0)
    tfm = fl.TaskFeaturizer()
    fl.fit_tfm(tfm, X, y, epochs=5)
    df = fl.run_stream(table, {"AVI": fl.AVI(), "static": fl.Static(tfm), "kNN": fl.KNNContext(tfm, 10)},
                       phases=3, per_phase=20, seed=0)
    assert len(df) == 3 * 20 * 3 and set(df.drift) == {"none", "insert", "delete"}
    assert (df.qerr >= 1).all() and (df.true_card >= 0).all()
    with pytest.raises(ValueError, match="^methods"):
        fl.run_stream(table, {})
    with pytest.raises(ValueError, match="^drift"):
        fl.run_stream(table, {"AVI": fl.AVI()}, drift=("merge",))


def test_ridge_on_context_is_the_closed_form_and_knn_averages_neighbours():
    tfm = _tfm()
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, fl.D_FEATURES))
    y = rng.standard_normal(12)
    ridge, knn = st.RidgeContext(tfm, capacity=10, alpha=0.5), st.KNNContext(tfm, capacity=10, k=3)
    for x, t in zip(X[:10], y[:10]):
        ridge.observe(x, t)
        knn.observe(x, t)
    with torch.no_grad():
        Z = tfm(torch.tensor(X, dtype=torch.float32))[0].numpy().astype(float)
    mu, sd = Z[:10].mean(0), Z[:10].std(0) + 1e-6
    A = np.c_[(Z[:10] - mu) / sd, np.ones(10)]
    P = 0.5 * np.eye(A.shape[1])
    P[-1, -1] = 0.0
    w = np.linalg.lstsq(A.T @ A + P, A.T @ y[:10], rcond=None)[0]
    assert ridge.predict(X[10], None) == pytest.approx(np.r_[(Z[10] - mu) / sd, 1] @ w, rel=1e-4, abs=1e-4)
    near = np.argsort(((Z[:10] - Z[10]) ** 2).sum(1))[:3]
    assert knn.predict(X[10], None) == pytest.approx(y[near].mean(), rel=1e-5)


def test_audit_compares_the_database_with_the_mirror():
    out = fl.audit(fl.DriftingTable(fl.connect("duckdb"), 2000, seed=4), 30, seed=0)
    assert out["exact"] and out["gmq_avi"] >= 1 and out["gmq_explain"] >= 1
    assert out["explain_distinct"] >= 1 and 0 < out["explain_mode_share"] <= 1
    assert out["explain_mode_of_rows"] > 0
    assert "gmq_explain" not in fl.audit(fl.DriftingTable(fl.connect("sqlite"), 500, seed=4), 10)


def test_in_context_errors_scale_and_ridge_recovers_a_linear_task():
    rng = np.random.default_rng(0)
    cx, qx = rng.standard_normal((4, 30, 3)), rng.standard_normal((4, 5, 3))
    w = rng.standard_normal(3)
    cy, qy = cx @ w + 2.0, qx @ w + 2.0
    assert np.allclose(st.ridge_predict(cx, cy, qx, alpha=1e-9), qy, atol=1e-5)
    out = fl.in_context_errors(fl.DynamicDecisionEngine(d_x=3, d_model=8, n_layers=1, n_heads=2),
                               cx, cy, qx, qy)
    assert out["ridge"] < 0.01 and out["context mean"] == pytest.approx(
        float((((qy - cy.mean(1, keepdims=True)) ** 2) / cy.var(1, keepdims=True)).mean()))
    with pytest.raises(ValueError, match="^ctx_x"):
        st.ridge_predict(cx, cy[:, :5], qx)


def test_the_shipped_engine_loads_and_its_entry_point_trains(tmp_path):
    dde, meta = fl.load_dde()
    assert isinstance(dde, fl.DynamicDecisionEngine) and not dde.training
    assert meta["recipe"] == json.loads(json.dumps(fl.train.RECIPES["quick"])) and meta["parameters"] == sum(p.numel() for p in dde.parameters())
    assert meta["final"]["valid_nll_after"] < meta["final"]["valid_nll_before"]
    assert (fl.train.CHECKPOINTS / "dde.pt").stat().st_size < 5e6
    assert fl.train.main(["--steps", "2", "--out", str(tmp_path)]) == 0
    again, _ = fl.train.load_dde(tmp_path / "dde.pt")
    assert sum(p.numel() for p in again.parameters()) == meta["parameters"]


# --- issue 49: bad input refused, naming the argument --------------------------------------------

def _small_table():
    return fl.DriftingTable(fl.connect("sqlite"), 50, seed=0)


_HIST = fl.ColumnHistograms.fit(np.arange(40).reshape(10, 4))

FLAIR_BAD_INPUTS = [
    (lambda **kw: fl.RangeQuery(cols=(0,), hi=[5], **kw), dict(lo=[np.nan]), "lo"),
    (lambda **kw: fl.RangeQuery(cols=(0,), lo=[1], **kw), dict(hi=[np.inf]), "hi"),
    (lambda **kw: fl.RangeQuery(cols=(0,), hi=[5], **kw), dict(lo=[2.7]), "lo"),
    (lambda **kw: fl.RangeQuery(cols=(0,), lo=[1], **kw), dict(hi=[5.5]), "hi"),
    (lambda **kw: fl.RangeQuery(cols=(0,), hi=[5], **kw), dict(lo=["a"]), "lo"),
    (lambda **kw: fl.RangeQuery(lo=[1], hi=[5], **kw), dict(cols=(7,)), "cols"),
    (lambda **kw: fl.RangeQuery(cols=(0,), hi=[1], **kw), dict(lo=[3]), "lo"),
    (lambda **kw: fl.ColumnHistograms.fit(**kw), dict(data=np.full((5, 4), np.nan)), "data"),
    (lambda **kw: fl.ColumnHistograms.fit(**kw), dict(data=np.zeros((0, 4))), "data"),
    (lambda **kw: fl.ColumnHistograms.fit(data=np.zeros((3, 4)), **kw), dict(bins=0), "bins"),
    (lambda **kw: _small_table().apply_drift("delete", **kw), dict(severity=1.0), "severity"),
    (lambda **kw: _small_table().apply_drift("insert", **kw), dict(severity=float("nan")), "severity"),
    (lambda **kw: _small_table().apply_drift(severity=0.1, **kw), dict(kind="drop"), "kind"),
    (lambda **kw: fl.avi_estimate(fl.RangeQuery((0,), [1], [5]), _HIST, **kw), dict(n_rows=2.5), "n_rows"),
    (lambda **kw: st.q_error(true_card=[1.0], **kw), dict(pred_card=[np.nan]), "pred_card"),
    (lambda **kw: st.gmq(**kw), dict(qe=[0.5]), "qe"),
    (lambda **kw: st.decode(**kw), dict(y_hat=float("nan")), "y_hat"),
    (lambda **kw: fl.to_sql(fl.RangeQuery((0,), [1], [5]), **kw), dict(table="t; DROP"), "table"),
    # issue 49, through companion.validation: a fractional or bool column, a NaN row among integers,
    # NaN labels named as y (they were blamed on x)
    (lambda **kw: fl.RangeQuery(lo=[1], hi=[5], **kw), dict(cols=(0.5,)), "cols: expected an integer >= 0"),
    (lambda **kw: fl.RangeQuery(lo=[1], hi=[5], **kw), dict(cols=(True,)), "cols: expected an integer >= 0"),
    (lambda **kw: fl.RangeQuery(lo=[1], hi=[5], **kw), dict(cols=0), "cols: expected a tuple"),
    (lambda **kw: fl.ColumnHistograms.fit(**kw), dict(data=np.r_[np.zeros((4, 4)), [[1, np.nan, 2, 3]]]),
     "data: must be finite"),
    (lambda **kw: fl.ColumnHistograms.fit(**kw), dict(data=np.zeros((3, 4), bool)), "data: expected numeric rows"),
    (lambda **kw: fl.fit_tfm(fl.TaskFeaturizer(), np.zeros((3, fl.D_FEATURES)), **kw), dict(y=[0.0, np.nan, 1.0]),
     "y: contains NaN or inf"),
]


@pytest.mark.parametrize("fn, kwargs, name", FLAIR_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_integral_float_bounds_are_still_accepted():
    q = fl.RangeQuery((0, 2), np.array([3.0, 10.0]), np.array([7.0, 10.0]))
    assert q.lo.tolist() == [3, 10] and q.hi.dtype == np.int64
    assert _small_table().apply_drift("delete", 0.4) > 0


# --- issue 38: the engine's input pipeline, its ridge skip, the head offset ------------------------

def test_preprocess_drops_constant_features_and_squashes_outliers():
    gen = torch.Generator().manual_seed(0)
    cx, qx = torch.randn(2, 40, 5, generator=gen), torch.randn(2, 3, 5, generator=gen)
    cx[:, :, 1] = 0.0  # a dead ReLU unit: constant in the context
    qx[:, :, 1] = 3.0  # ... but not in the queries, which the old engine divided by 1e-6
    cx[0, 0, 2] = 1e4  # an outlier in the context
    mask = torch.ones(2, 40, dtype=torch.bool)
    for power in (False, True):
        c, q, used = fl.preprocess(cx, qx, mask, power=power)
        assert used[:, 0].tolist() == [[True, False, True, True, True]] * 2
        assert torch.all(c[..., 1] == 0) and torch.all(q[..., 1] == 0)
        assert torch.isfinite(c).all() and q.abs().max() < 50
        # the outlier is squashed onto the bound, far below its standardised value (~6)
        assert c[0, 0, 2] < c[0, 1:, 2].max() + 5 * 4 / 5
        # the used features are rescaled by d / used = 5 / 4
        plain = (cx[1, :, 0] - cx[1, :, 0].mean()) / (cx[1, :, 0].std(unbiased=False) + 1e-6)
        if not power:
            assert torch.allclose(c[1, :, 0], plain.clamp(-4, 4) * 5 / 4, atol=0.2)


def test_preprocess_ignores_masked_pairs_and_the_power_transform_is_monotone():
    gen = torch.Generator().manual_seed(1)
    cx, qx = torch.randn(1, 30, 3, generator=gen).exp(), torch.randn(1, 4, 3, generator=gen)
    mask = torch.ones(1, 30, dtype=torch.bool)
    padded = torch.cat([cx, 1e3 * torch.ones(1, 5, 3)], 1)
    pmask = torch.cat([mask, torch.zeros(1, 5, dtype=torch.bool)], 1)
    for power in (False, True):
        c, q, _ = fl.preprocess(cx, qx, mask, power=power)
        c2, q2, _ = fl.preprocess(padded, qx, pmask, power=power)
        assert torch.allclose(c, c2[:, :30], atol=1e-5) and torch.allclose(q, q2, atol=1e-5)
    c, _, _ = fl.preprocess(cx, qx, mask, power=True)
    order = cx[0, :, 0].argsort()
    assert torch.all(c[0, order, 0].diff() >= -1e-6)  # a monotone transform keeps the order
    # a log-normal feature is made more symmetric than plain standardisation leaves it
    skew = lambda v: float((((v - v.mean()) / v.std()) ** 3).mean())  # noqa: E731
    plain, _, _ = fl.preprocess(cx, qx, mask, power=False)
    assert abs(skew(c[0, :, 0])) < abs(skew(plain[0, :, 0]))


def test_ridge_loo_is_the_closed_form_with_the_exact_leave_one_out_penalty():
    rng = np.random.default_rng(0)
    cx, qx = rng.standard_normal((1, 25, 3)), rng.standard_normal((1, 2, 3))
    cy = cx @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.standard_normal((1, 25))
    mask = torch.ones(1, 25, dtype=torch.bool)
    t = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    pred, loo = fl.ridge_loo(t(cx), t(cy), t(qx), mask)

    def fit(X, y, alpha):  # brute force: ridge with an unpenalised intercept
        A = np.c_[X, np.ones(len(X))]
        P = alpha * np.eye(4)
        P[-1, -1] = 0.0
        return np.linalg.solve(A.T @ A + P, A.T @ y)

    errs = {}
    for alpha in fl.model.RIDGE_ALPHAS:
        held = [np.r_[cx[0, i], 1] @ fit(np.delete(cx[0], i, 0), np.delete(cy[0], i), alpha)
                for i in range(25)]
        errs[alpha] = (np.mean((cy[0] - held) ** 2), np.array(held))
    best = min(errs, key=lambda a: errs[a][0])
    assert np.allclose(loo[0].numpy(), errs[best][1], atol=1e-3)
    want = np.c_[qx[0], np.ones(2)] @ fit(cx[0], cy[0], best)
    assert np.allclose(pred[0].numpy(), want, atol=1e-3)


def test_an_untrained_engine_with_the_ridge_skip_is_ridge_and_the_ensemble_averages():
    torch.manual_seed(0)
    dde = fl.DynamicDecisionEngine(d_x=4, d_model=16, n_layers=1, n_heads=2, ridge_skip=True,
                                   ensemble=True).eval()
    gen = torch.Generator().manual_seed(2)
    cx, qx = torch.randn(3, 30, 4, generator=gen), torch.randn(3, 5, 4, generator=gen)
    cy = cx @ torch.tensor([1.0, 0.0, -1.0, 2.0]) + 5
    mask = torch.ones(3, 30, dtype=torch.bool)
    with torch.no_grad():
        mean, _ = dde(cx, cy, qx)
        m, s = cy.mean(1, keepdim=True), cy.std(1, unbiased=False, keepdim=True) + 1e-6
        members = []
        for power in (False, True):
            c, q, _ = fl.preprocess(cx, qx, mask, power=power)
            members.append(fl.ridge_loo(c, (cy - m) / s, q, mask)[0] * s + m)
    assert torch.allclose(mean, 0.5 * (members[0] + members[1]), atol=1e-4)
    with torch.no_grad():  # a trained network moves the mean; correction=False drops it again
        dde.decoder[-1].bias.fill_(0.5)
        assert not torch.allclose(dde(cx, cy, qx)[0], mean, atol=1e-3)
        dde.correction = False
        assert torch.allclose(dde(cx, cy, qx)[0], mean, atol=1e-4)


def test_a_shuffled_context_keeps_the_phases_labels_in_another_order():
    tfm, engine = _tfm(), _CountingEngine(4)
    method = st.InContext(fl.FLAIR(tfm, engine, capacity=6, offset=False), shuffle_seed=0)
    X, y = np.random.default_rng(0).standard_normal((6, fl.D_FEATURES)), np.arange(6.0)
    method.run_phase(X, [None] * 6, y)
    pushed = method.flair.memory.arrays()[1]
    assert sorted(pushed.tolist()) == y.tolist() and pushed.tolist() != y.tolist()
    with pytest.raises(ValueError, match="^shuffle_seed"):
        method.observe(X[0], 1.0)


def test_run_stream_sizes_phase_zero_apart():
    table = fl.DriftingTable(fl.connect("duckdb"), 500, seed=0)
    runs = st.run_stream(table, {"AVI": st.AVI()}, phases=3, per_phase=7, first_phase=11,
                         severity=0.2, seed=0)
    assert runs.groupby("phase").size().tolist() == [11, 7, 7]


# --- issue 38: a loud fallback, and DuckDB in CI ------------------------------------------------

def test_ci_runs_the_counts_in_duckdb():
    """The book's claims are DuckDB's counts and estimates: CI must not fall back silently."""
    import importlib

    importlib.import_module("duckdb")  # no skip: a CI without DuckDB fails here

    con = fl.connect()
    assert con.backend == "duckdb" and not con.fallback and con.banner == "database backend: duckdb"


def test_the_sqlite_fallback_is_loud(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_duckdb(name, *args, **kwargs):
        if name == "duckdb":
            raise ImportError("no duckdb here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_duckdb)
    with pytest.warns(RuntimeWarning, match="falling back to sqlite3"):
        con = fl.connect()
    assert con.backend == "sqlite" and con.fallback and "FALLBACK" in con.banner
    with pytest.raises(ImportError, match="^backend"):
        fl.connect("duckdb")
    assert not fl.connect("sqlite").fallback  # asked for: no fallback


# --- issue 38: the flights table -------------------------------------------------------------------

@pytest.fixture(scope="module")
def flights():
    return fl.load_flights()


def test_the_flights_load_from_the_wheel_and_code_into_the_columns(flights):
    assert len(flights) == 327_346 and flights.month.nunique() == 12
    assert not flights[list(fl.FLIGHT_COLUMNS)].isna().any().any()
    codes = fl.code_flights(flights)
    assert codes.shape == (len(flights), 4) and codes.min() >= 0 and codes.max() <= 999
    # 13:49 is 829 minutes after midnight; a delay of -80 minutes codes to 0; 1,000 miles to 200
    one = flights.iloc[:1].assign(dep_time=1349.0, arr_delay=-80.0, distance=1000, air_time=70.0)
    assert fl.code_flights(one).tolist() == [[round(829 * 999 / 1440), 0, 200, 100]]
    with pytest.raises(ValueError, match="^df"):
        fl.code_flights(flights.drop(columns="air_time"))


@pytest.mark.parametrize("backend", ["duckdb", "sqlite"])
def test_the_flights_table_holds_one_month_and_moves_to_the_next(flights, backend):
    small = flights[flights.month <= 3]
    t = fl.FlightsTable(fl.connect(backend), small, per_month=500, seed=0)
    assert t.month == 1 and t.n_rows == 500 == len(t.snapshot())
    qs = fl.sample_queries(t.snapshot(), 30, np.random.default_rng(0))
    assert [t.count(q) for q in qs] == [int(q.mask(t.snapshot()).sum()) for q in qs]
    assert t.apply_drift("month") == 500 and t.month == 2
    assert t.con.execute("SELECT DISTINCT month FROM flights") == [(2,)]
    want = fl.code_flights(small[small.month == 2])
    assert set(map(tuple, t.snapshot())) <= set(map(tuple, want))
    t.apply_drift("month")
    with pytest.raises(ValueError, match="^kind"):
        t.apply_drift("month")  # March is the last month of this frame
    with pytest.raises(ValueError, match="^kind"):
        t.apply_drift("insert", 0.1)
    with pytest.raises(ValueError, match="^first_month"):
        fl.FlightsTable(fl.connect(backend), small, first_month=7)
    with pytest.raises(ValueError, match="^flights"):
        fl.FlightsTable(fl.connect(backend), small.iloc[:0])


def test_the_engines_pipeline_refuses_bad_shapes_naming_the_argument():
    cx, qx, cy = torch.randn(2, 5, 3), torch.randn(2, 1, 3), torch.randn(2, 5)
    mask = torch.ones(2, 5, dtype=torch.bool)
    with pytest.raises(ValueError, match="^ctx_x"):
        fl.preprocess(torch.randn(2, 0, 3), qx, mask[:, :0])
    with pytest.raises(ValueError, match="^qry_x"):
        fl.preprocess(cx, torch.randn(2, 1, 4), mask)
    with pytest.raises(ValueError, match="^mask"):
        fl.preprocess(cx, qx, mask.float())
    with pytest.raises(ValueError, match="^cy"):
        fl.ridge_loo(cx, cy[:, :4], qx, mask)
    with pytest.raises(ValueError, match="^mask"):
        fl.ridge_loo(cx, cy, qx, mask[:1])


from companion.flair import db as _fdb, model as _fm, stream as _fs, train as _ft_

_RNG = np.random.default_rng(0)
FLAIR_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _fdb.Connection(None, "oracle"), "backend"),
    (lambda: _fdb.DriftingTable("con", 10, 0), "con"),
    (lambda: _fm.FLAIR("tfm", None), "tfm"),
    (lambda: _fs.FineTuned("tfm"), "tfm"),
    (lambda: _fs.InContext("flair"), "flair"),
    (lambda: _fs.KNNContext("tfm"), "tfm"),
    (lambda: _fs.RidgeContext("tfm"), "tfm"),
    (lambda: _fs.Static("tfm"), "tfm"),
    (lambda: _fm.TaskFeaturizer(d_in=0), "d_in"),
    (lambda: _fs.audit("table"), "table"),
    (lambda: _fdb.draw_rows("concept", 3, _RNG), "concept"),
    (lambda: _fs.InContext(None), "flair"),
    (lambda: _fs.in_context_errors("dde", torch.zeros(1, 4, 2), torch.zeros(1, 4), torch.zeros(1, 2, 2), torch.zeros(1, 2)), "dde"),
    (lambda: _fm.label(np.array([-1.0])), "card"),
    (lambda: _ft_.load_dde("/nonexistent/dde.pt"), "path"),
    (lambda: _fm.meta_train("dde", 1), "dde"),
    (lambda: _fs.offline_workload("table", 1, 0), "table"),
    (lambda: _fm.prior_nll("dde", []), "dde"),
    (lambda: _fm.FLAIR(_fm.TaskFeaturizer(), "dde"), "dde"),
    (lambda: _fdb.sample_concept(_RNG, n_components=0), "n_components"),
    (lambda: _fdb.sample_queries(np.zeros((5, 4)), 0, _RNG), "n"),
    (lambda: _fs.summarize(np.array([0.5])), "qe"),
    (lambda: _fm.weighted_mse(torch.zeros(3), torch.zeros(4)), "y"),
]


@pytest.mark.parametrize("call, name", FLAIR_MORE_BAD_INPUTS)
def test_flair_public_functions_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
