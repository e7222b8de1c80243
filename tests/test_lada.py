"""Unit tests of companion.lada: the memory against k-means and a hand computation, freezing, DPT's
mixtures, the metrics on hand-made matrices, the selector, and bad input."""

import math

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans

import companion.lada as lada
from companion.lada.data import Task
from companion.lada.lada import kmeans_centres

torch.set_num_threads(1)


def _unit(x):
    return torch.nn.functional.normalize(x, dim=1)


def _toy_task(first: int, n_classes: int, n: int = 12, d: int = 6, seed: int = 0, spread: float = 0.3):
    """Well separated Gaussian classes around random centres, global ids first..first+n_classes-1."""
    g = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(n_classes, d, generator=g)
    y = torch.arange(first, first + n_classes).repeat_interleave(n)
    x = centres.repeat_interleave(n, 0) + spread * torch.randn(n * n_classes, d, generator=g)
    xt = centres.repeat_interleave(4, 0) + spread * torch.randn(4 * n_classes, d, generator=g)
    return Task(f"t{first}", list(range(first, first + n_classes)), x, y, xt,
                torch.arange(first, first + n_classes).repeat_interleave(4))


# --- LabelMemory ---------------------------------------------------------------------------------

def test_memory_vectors_are_the_kmeans_centres_and_J_is_one_hot():
    task = _toy_task(0, 3, n=10)
    v = _unit(task.train_x)
    mem = lada.LabelMemory(6)
    mem.add_classes(v, task.train_y, k=4)
    for c in range(3):
        km = KMeans(4, n_init=10, random_state=42).fit(v[task.train_y == c].double().numpy())
        got = mem.vectors()[mem.class_of == c].detach().double().numpy()
        np.testing.assert_allclose(got, km.cluster_centers_, atol=1e-6)
    J = mem.assignment()
    assert J.shape == (12, 3)
    assert torch.equal(J.sum(1), torch.ones(12))
    assert torch.equal(J.sum(0), torch.full((3,), 4.0))


def test_a_class_with_fewer_samples_than_k_gets_one_vector_per_sample():
    v = _unit(torch.randn(5, 4, generator=torch.Generator().manual_seed(1)))
    mem = lada.LabelMemory(4)
    mem.add_classes(v, torch.tensor([0, 0, 1, 1, 1]), k=8)
    assert mem.class_of.tolist() == [0, 0, 1, 1, 1]
    assert mem.num_params() == 5 * 4


def test_memory_logit_of_one_vector_matches_the_hand_computation():
    mem = lada.LabelMemory(2, beta=2.0)
    mem.frozen, mem.class_of, mem.n_classes = [torch.tensor([[0.6, 0.8]])], torch.tensor([0]), 1
    v = torch.tensor([[1.0, 0.0]])
    assert math.isclose(float(mem.logits(v)), math.exp(-2.0 * (1 - 0.6)), rel_tol=1e-6)


def test_memory_logits_equal_the_matrix_form_with_J():
    task = _toy_task(0, 3, n=10)
    v = _unit(task.train_x)
    mem = lada.LabelMemory(6, beta=1.5)
    mem.add_classes(v, task.train_y, k=3)
    want = torch.exp(-1.5 * (1 - v @ mem.vectors().T)) @ mem.assignment()
    torch.testing.assert_close(mem.logits(v), want)


# --- freezing ----------------------------------------------------------------------------------

def test_old_memory_and_class_vectors_are_bit_identical_after_the_next_task():
    t1, t2 = _toy_task(0, 3, seed=0), _toy_task(3, 2, seed=1)
    learner = lada.LADALearner(6, lam1=3, lam2=2, epochs=3, seed=0)
    learner.learn_task(t1)
    mem1 = learner.memory.frozen[0].clone()
    cls1 = learner.classifier.frozen[0].clone()
    learner.learn_task(t2)
    assert torch.equal(learner.memory.frozen[0], mem1)
    assert torch.equal(learner.classifier.frozen[0], cls1)
    assert not learner.memory.frozen[0].requires_grad and not learner.classifier.frozen[0].requires_grad
    assert learner.memory.num_params() == (3 + 2) * 3 * 6


def test_the_encoder_is_frozen_and_never_changed_by_caching():
    x = torch.rand(40, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    enc = lada.pretrain_encoder(x, torch.arange(40) % 4, epochs=1, feat_dim=8)
    before = lada.checksum(enc)
    feats = lada.extract_features(enc, x)
    assert feats.shape == (40, 8) and not feats.requires_grad
    assert all(not p.requires_grad for p in enc.parameters())
    assert lada.checksum(enc) == before


# --- DPT ---------------------------------------------------------------------------------------

def test_dpt_fits_raw_features_and_samples_one_row_per_component():
    task = _toy_task(0, 3, n=20)
    bank = lada.DPTBank(n_components=2, eta=8.0)
    bank.fit_classes(task.train_x, task.train_y)
    assert len(bank) == 6
    assert bank.labels.tolist() == [0, 0, 1, 1, 2, 2]
    for c in range(3):  # the means live where the raw (unnormalised) features are
        mean_c = task.train_x[task.train_y == c].mean(0)
        pooled = (bank.pis[bank.labels == c, None] * bank.means[bank.labels == c]).sum(0)
        torch.testing.assert_close(pooled, mean_c, atol=1e-3, rtol=1e-3)
        assert math.isclose(float(bank.pis[bank.labels == c].sum() * bank.eta), 8.0, rel_tol=1e-5)
    feats, labels, weights = bank.sample(torch.Generator().manual_seed(0))
    assert feats.shape == (6, 6) and torch.equal(labels, bank.labels)
    torch.testing.assert_close(weights, bank.pis * 8.0)
    again, _, _ = bank.sample(torch.Generator().manual_seed(1))
    assert not torch.allclose(feats, again)


def test_dpt_noise_has_the_fitted_standard_deviation():
    bank = lada.DPTBank(1, eta=1.0)
    bank.means, bank.sigmas = torch.zeros(1, 4000), torch.tensor([0.5])
    bank.pis, bank.labels = torch.ones(1), torch.zeros(1, dtype=torch.int64)
    feats, _, _ = bank.sample(torch.Generator().manual_seed(0))
    assert abs(float(feats.std()) - 0.5) < 0.02


def test_dpt_reduces_components_for_a_small_class_with_a_warning():
    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(0))
    bank = lada.DPTBank(n_components=4)
    with pytest.warns(UserWarning, match="class 1 has 3 samples"):
        bank.fit_classes(x, torch.tensor([0, 0, 0, 0, 1, 1, 1]))
    assert bank.labels.tolist() == [0] * 4 + [1] * 3


def test_dpt_shrinks_the_new_task_share_on_a_toy_stream():
    stream = [_toy_task(0, 3, seed=0, spread=1.5), _toy_task(3, 3, seed=5, spread=1.5)]
    shares = {}
    for use_dpt in (False, True):
        r = lada.run_stream(lada.LADALearner(6, lam1=2, lam2=2, use_dpt=use_dpt, epochs=20, lr=1e-2, seed=0,
                                             eta=8.0), stream)
        shares[use_dpt] = r.new_share[-1]
    assert shares[True] <= shares[False]


# --- metrics -------------------------------------------------------------------------------------

def test_metrics_on_a_hand_made_matrix():
    nan = np.nan
    A = np.array([[0.9, nan, nan], [0.95, 0.8, nan], [0.5, 0.7, 0.9]])
    assert math.isclose(lada.last(A), (0.5 + 0.7 + 0.9) / 3)
    assert math.isclose(lada.forgetting(A), ((0.95 - 0.5) + (0.8 - 0.7)) / 2)
    assert math.isclose(lada.average_incremental([0.9, 0.85, 0.7]), 0.8166666666666667)
    assert lada.task_recall(torch.tensor([0, 1, 1, 2]), torch.tensor([0, 1, 2, 2])) == 0.75


def test_new_task_share_counts_old_samples_predicted_as_new():
    y = torch.tensor([0, 0, 1, 1, 2, 2])
    pred = torch.tensor([2, 0, 2, 1, 2, 2])
    assert lada.new_task_share(pred, y, [2]) == 0.5


def test_oracle_selection_beats_the_centroid_selector_when_tasks_overlap():
    # each task holds two opposite classes (c and -c), so both task centroids sit near the origin
    # and the centroid selector is close to a coin flip, while the oracle is always right
    g = torch.Generator().manual_seed(0)
    a, b = _unit(torch.randn(2, 8, generator=g))

    def task(first, centre):
        x = torch.cat([centre + 0.05 * torch.randn(30, 8, generator=g),
                       -centre + 0.05 * torch.randn(30, 8, generator=g)])
        y = torch.tensor([first, first + 1]).repeat_interleave(30)
        return Task("t", [first, first + 1], x, y, x.clone(), y)

    res = lada.run_stream(lada.TaskAdapters(8, epochs=5, seed=0), [task(0, a), task(2, b)],
                          selects=("centroid", "oracle"))
    assert lada.last(res["oracle"].A) >= lada.last(res["centroid"].A) + 0.2
    assert res["centroid"].recall[-1] < 0.8


def test_learners_run_the_whole_interface_on_a_toy_stream():
    stream = [_toy_task(0, 3, seed=0), _toy_task(3, 2, seed=1)]
    for learner in (lada.FineTuneSeq(6, epochs=2), lada.NCM(6), lada.TaskAdapters(6, epochs=2),
                    lada.LADALearner(6, lam1=2, lam2=2, epochs=2)):
        r = lada.run_stream(learner, stream)
        assert r.A.shape == (2, 2) and np.isnan(r.A[0, 1]) and np.isfinite(r.A[1]).all()
        assert r.params[-1] >= r.params[0]
    calls = []
    lada.run_stream(lada.NCM(6), stream, after_task=lambda j, learner: calls.append((j, learner.n_classes)))
    assert calls == [(0, 3), (1, 5)]
    table = lada.summary_table({"NCM": [lada.run_stream(lada.NCM(6), stream)]})
    assert list(table.index) == ["NCM"] and table.loc["NCM", "seeds"] == 1


def test_glyphs_are_drawn_for_every_face_and_letter():
    x, y = lada.render_glyphs("aAzZ09", lada.FONTS, 1, seed=0)
    assert x.shape == (6 * 21, 1, 16, 16)
    assert float(x.amax(dim=(1, 2, 3)).min()) > 0.3  # no face is missing a glyph


def test_stream_has_contiguous_global_ids_and_held_out_fonts():
    stream = lada.build_stream(seed=0)
    ids = [c for t in stream for c in t.classes]
    assert ids == list(range(36))
    assert set(lada.TRAIN_FONTS).isdisjoint(lada.TEST_FONTS) and len(lada.TRAIN_FONTS) == 15
    assert [len(t.train_y) for t in stream] == [400, 225, 225, 225, 225, 270]


# --- bad input -----------------------------------------------------------------------------------

def test_bad_input_is_refused_with_the_argument_named():
    mem = lada.LabelMemory(4)
    with pytest.raises(ValueError, match="feats_norm: contains NaN or inf"):
        mem.add_classes(torch.full((3, 4), float("nan")), torch.tensor([0, 0, 1]), 2)
    with pytest.raises(ValueError, match="feats_norm: expected at least one element"):
        mem.add_classes(torch.zeros(0, 4), torch.zeros(0, dtype=torch.int64), 2)
    with pytest.raises(ValueError, match="feats_norm: feature dimension 5 does not match the model's dimension 4"):
        mem.add_classes(torch.ones(3, 5), torch.tensor([0, 0, 1]), 2)
    with pytest.raises(ValueError, match="labels: a new task must bring the contiguous ids 0"):
        mem.add_classes(torch.ones(3, 4), torch.tensor([0, 0, 2]), 2)
    with pytest.raises(ValueError, match="k: expected an integer >= 1"):
        mem.add_classes(torch.ones(3, 4), torch.tensor([0, 0, 1]), 0)
    with pytest.raises(ValueError, match="beta: expected a finite number > 0"):
        lada.LabelMemory(4, beta=0.0)
    with pytest.raises(ValueError, match="lam1: expected an integer >= 1"):
        lada.LADALearner(4, lam1=0)
    with pytest.raises(ValueError, match="eta: expected a finite number > 0"):
        lada.DPTBank(eta=-1.0)
    learner = lada.LADALearner(6, lam1=2, lam2=2, epochs=1)
    with pytest.raises(RuntimeError, match="learn a task first"):
        learner.predict(torch.ones(2, 6))
    learner.learn_task(_toy_task(0, 2))
    with pytest.raises(ValueError, match="labels: a new task must bring the contiguous ids 2"):
        learner.learn_task(_toy_task(0, 2))  # ids overlap the first task
    with pytest.raises(ValueError, match="v_raw: feature dimension 3 does not match the model's dimension 6"):
        learner.predict(torch.ones(2, 3))
    with pytest.raises(ValueError, match="select: expected one of"):
        lada.TaskAdapters(6, select="random")
    with pytest.raises(ValueError, match="A: expected a square"):
        lada.forgetting(np.ones((2, 3)))
    with pytest.raises(ValueError, match="A: entries on and below the diagonal must be finite"):
        lada.last(np.array([[np.nan, np.nan], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="chars: expected a non-empty string"):
        lada.render_glyphs("", lada.FONTS, 1)
    with pytest.raises(ValueError, match="fonts: expected a non-empty list of names from FONTS"):
        lada.render_glyphs("a", ["Comic Sans"], 1)
    with pytest.raises(ValueError, match="order: expected a permutation"):
        lada.build_stream(order=[0, 0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="x: expected images of shape"):
        lada.GlyphCNN()(torch.ones(2, 3, 16, 16))


def test_step_timing_runs_in_every_regime_and_caching_keeps_labels():
    x = torch.rand(30, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    y = torch.arange(30) % 3 + 5
    enc = lada.pretrain_encoder(x, y, epochs=1, feat_dim=8)
    for mode in ("cached", "encoder-forward", "encoder-backward"):
        assert lada.step_seconds(enc, x, y, mode, steps=2, lam1=2, batch=8) > 0
    before = lada.checksum(enc)
    (task,) = lada.cache_features(enc, [Task("t", [5, 6, 7], x, y, x[:6], y[:6])])
    assert task.train_x.shape == (30, 8) and torch.equal(task.train_y, y)
    assert lada.checksum(enc) == before  # the backward regime trains a copy, never the encoder
    with pytest.raises(ValueError, match="mode: expected one of"):
        lada.step_seconds(enc, x, y, "finetune")


def test_weighted_ce_divides_the_weighted_sum_by_the_number_of_rows():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    y, w = torch.tensor([0, 1, 0]), torch.tensor([4.0, 1.0, 0.5])
    ce = [math.log(1 + math.exp(-2.0)), math.log(1 + math.exp(-1.0)), math.log(2.0)]
    want = (4.0 * ce[0] + 1.0 * ce[1] + 0.5 * ce[2]) / 3
    assert math.isclose(float(lada.weighted_ce(logits, y, w)), want, rel_tol=1e-6)


# --- issue 49: bad input refused, naming the argument --------------------------------------------

def test_oracle_task_id_beyond_the_tasks_learned_is_refused_not_uninitialised():
    """Old code: rows whose task id has no adapter were left as torch.empty garbage."""
    learner = lada.TaskAdapters(6, epochs=1)
    learner.learn_task(_toy_task(0, 2))
    v = torch.ones(3, 6)
    with pytest.raises(ValueError, match=r"task_id: expected indices in 0\.\.0"):
        learner.predict(v, torch.tensor([0, 1, 5]), select="oracle")
    with pytest.raises(ValueError, match="task_id"):
        learner.predict(v, torch.tensor([0, -1, 0]), select="oracle")
    with pytest.raises(ValueError, match="task_id: expected integer"):
        learner.predict(v, torch.tensor([0.0, 0.0, 0.0]), select="oracle")
    assert learner.predict(v, torch.tensor([0, 0, 0]), select="oracle").tolist() in ([0] * 3, [1] * 3)


def _learned(cls, **kw):
    learner = cls(6, epochs=1, **kw)
    learner.learn_task(_toy_task(0, 2))
    return learner


def _stream_with_bad_test_labels():
    task = _toy_task(0, 2)
    return [Task(task.name, task.classes, task.train_x, task.train_y, task.test_x, task.test_y + 3)]


_GOOD_A = np.array([[0.9, np.nan], [0.8, 0.7]])

LADA_BAD_INPUTS = [
    (lambda **kw: lada.LADALearner(6, **kw), dict(alpha=float("nan")), "alpha"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(alpha=float("inf")), "alpha"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(alpha=[1.0, 2.0]), "alpha"),
    (lambda **kw: _learned(lada.TaskAdapters).predict(torch.ones(2, 6), select="oracle", **kw),
     dict(task_id=torch.tensor([0, 3])), "task_id"),
    (lambda **kw: _learned(lada.TaskAdapters).predict(torch.ones(2, 6), select="oracle", **kw),
     dict(task_id=torch.tensor([-1, 0])), "task_id"),
    (lambda **kw: lada.run_stream(lada.NCM(6), **kw), dict(stream=_stream_with_bad_test_labels()),
     "test_y"),
    (lambda **kw: lada.forgetting(**kw), dict(A=np.array([[1.5, np.nan], [0.8, 0.7]])), "A"),
    (lambda **kw: lada.forgetting(**kw), dict(A=np.array([[0.9, np.nan], [-0.1, 0.7]])), "A"),
    (lambda **kw: lada.last(**kw), dict(A=np.array([[0.9, np.nan], [0.8, 70.0]])), "A"),
    (lambda **kw: lada.new_task_share(y=torch.tensor([0, 1, 2]), new_classes=[2], **kw),
     dict(pred=torch.tensor([0, 1])), "pred"),
    (lambda **kw: lada.new_task_share(y=torch.tensor([0, 1, 2]), new_classes=[2], **kw),
     dict(pred=torch.zeros(3, 2, dtype=torch.int64)), "pred"),
    (lambda **kw: lada.new_task_share(pred=torch.tensor([0, 1, 2]), new_classes=[2], **kw),
     dict(y=torch.zeros(3, 1, dtype=torch.int64)), "y"),
    (lambda **kw: lada.average_incremental(**kw), dict(step_accs=[0.5, float("nan")]), "step_accs"),
    (lambda **kw: lada.task_recall(true=torch.tensor([0, 1]), **kw), dict(selected=torch.tensor([0])),
     "selected"),
]


@pytest.mark.parametrize("fn, kwargs, name", LADA_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_accuracy_checks_keep_valid_matrices():
    assert lada.forgetting(_GOOD_A) == pytest.approx(0.1)
    assert lada.new_task_share(torch.tensor([2, 1, 2]), torch.tensor([0, 1, 2]), [2]) == 0.5


# --- issue 47: the official values, DPT's pooled null, more bad input ----------------------------

def test_the_defaults_are_the_official_values():
    """Old code: logit scale 16, lambda_1 = 8 and a variance floor of 1e-4 (official: CLIP's 100,
    16 and scikit-learn's 1e-6, with eta = 64, lambda_2 = 4, alpha = beta = 1)."""
    learner = lada.LADALearner(6)
    assert learner.classifier.scale == 100.0 and learner.lam1 == 16 and learner.alpha == 1.0
    assert learner.memory.beta == 1.0 and learner.bank.eta == 64.0 and learner.bank.n_components == 4
    assert learner.bank.reg_covar == 1e-6 and learner.dpt == "class"
    assert lada.CosineClassifier(6).scale == 100.0


def test_the_scale_reaches_the_class_logits():
    learner = lada.LADALearner(6, use_memory=False, use_dpt=False, scale=100.0, epochs=0)
    learner.learn_task(_toy_task(0, 2))
    v = _unit(torch.randn(3, 6, generator=torch.Generator().manual_seed(0)))
    t = _unit(learner.classifier.frozen[0])
    torch.testing.assert_close(learner.logits(v), 100.0 * v @ t.T)


def test_pooled_dpt_keeps_rows_labels_and_weights_but_not_the_class_mixtures():
    task = _toy_task(0, 3, n=20, spread=0.5)
    bank = lada.DPTBank(n_components=2, eta=8.0)
    bank.fit_classes(task.train_x, task.train_y)
    x = task.train_x.double()
    mean, sigma = bank.pooled_stats()
    torch.testing.assert_close(mean.double(), x.mean(0), rtol=1e-5, atol=1e-5)
    want = float(((x - x.mean(0)) ** 2).sum(1).mean() / x.shape[1]) ** 0.5
    assert math.isclose(sigma, want, rel_tol=1e-6)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    fc, yc, wc = bank.sample(g1)
    fp, yp, wp = bank.sample(g2, pooled=True)
    assert fp.shape == fc.shape and torch.equal(yp, yc) and torch.equal(wp, wc)
    # the same noise, around the pooled mean with the pooled spread instead of each component's
    eps = (fc - bank.means) / bank.sigmas[:, None]
    torch.testing.assert_close(fp, mean + sigma * eps, rtol=1e-4, atol=1e-4)


def test_a_learner_with_pooled_dpt_runs_and_differs_from_class_dpt():
    stream = [_toy_task(0, 3, seed=0, spread=1.5), _toy_task(3, 3, seed=5, spread=1.5)]
    kw = dict(lam1=2, lam2=2, epochs=3, seed=0, eta=8.0)
    a, b = lada.LADALearner(6, **kw), lada.LADALearner(6, dpt="pooled", **kw)
    lada.run_stream(a, stream)
    lada.run_stream(b, stream)
    assert not torch.equal(a.classifier.frozen[1], b.classifier.frozen[1])
    assert torch.equal(a.classifier.frozen[0], b.classifier.frozen[0])  # task 1: no DPT yet


ISSUE47_BAD_INPUTS = [
    (lambda **kw: lada.LADALearner(6, **kw), dict(scale=float("nan")), "scale"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(scale=0.0), "scale"),
    (lambda **kw: lada.FineTuneSeq(6, **kw), dict(scale=float("inf")), "scale"),
    (lambda **kw: lada.TaskAdapters(6, **kw), dict(scale=-1.0), "scale"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(lr=float("inf")), "lr"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(lam1=2.5), "lam1"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(lam2=0), "lam2"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(eta=float("nan")), "eta"),
    (lambda **kw: lada.LADALearner(6, **kw), dict(dpt="shuffled"), "dpt"),
    (lambda **kw: lada.DPTBank(**kw), dict(reg_covar=-1e-6), "reg_covar"),
    (lambda **kw: lada.DPTBank(**kw), dict(reg_covar=float("nan")), "reg_covar"),
]


@pytest.mark.parametrize("fn, kwargs, name", ISSUE47_BAD_INPUTS)
def test_bad_settings_are_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


_IMAGES, _IDS = torch.zeros(4, 1, 16, 16), torch.tensor([0, 1, 0, 1])

ISSUE47_BAD_DATA = [
    (lambda **kw: lada.build_stream(**kw), dict(seed=0.5), "seed"),
    (lambda **kw: lada.pretrain_encoder(y=_IDS, epochs=1, **kw),
     dict(x=torch.full((4, 1, 16, 16), float("nan"))), "x"),
    (lambda **kw: lada.pretrain_encoder(x=_IMAGES, epochs=1, **kw), dict(y=_IDS.float()), "y"),
    (lambda **kw: lada.pretrain_encoder(x=_IMAGES, epochs=1, **kw), dict(y=_IDS - 1), "y"),
    (lambda **kw: lada.extract_features(lada.GlyphCNN(), **kw),
     dict(x=torch.full((2, 1, 16, 16), float("inf"))), "x"),
    (lambda **kw: lada.task_recall(true=torch.tensor([0, 1]), **kw),
     dict(selected=torch.tensor([0.0, 1.0])), "selected"),
    (lambda **kw: lada.new_task_share(torch.tensor([0, 1]), torch.tensor([0, 1]), **kw),
     dict(new_classes=[]), "new_classes"),
    (lambda **kw: lada.weighted_ce(torch.zeros(3, 2), torch.zeros(3, dtype=torch.int64), **kw),
     dict(w=torch.ones(2)), "w"),
    (lambda **kw: lada.weighted_ce(torch.zeros(3, 2), torch.zeros(3, dtype=torch.int64), **kw),
     dict(w=torch.tensor([1.0, float("nan"), 1.0])), "w"),
    (lambda **kw: lada.class_means(torch.ones(3, 2), torch.zeros(3, dtype=torch.int64), **kw),
     dict(classes=[0, 1]), "classes"),
    (lambda **kw: _learned(lada.TaskAdapters).predict(torch.ones(2, 6), select="oracle", **kw),
     dict(task_id=torch.zeros(2, 1, dtype=torch.int64)), "task_id"),
    (lambda **kw: _learned(lada.TaskAdapters).predict(torch.ones(2, 6), select="oracle", **kw),
     dict(task_id=None), "task_id"),
    (lambda **kw: kmeans_centres(np.random.rand(10, 3), **kw), dict(k=2.5), "k"),
    (lambda **kw: kmeans_centres(k=2, **kw), dict(x=np.full((10, 3), np.nan)), "x"),
    (lambda **kw: lada.last(**kw), dict(A=[[0.5], [0.2, 0.3]]), "A"),
]


@pytest.mark.parametrize("fn, kwargs, name", ISSUE47_BAD_DATA)
def test_bad_data_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}"):
        fn(**kwargs)


def test_blockwise_memory_logits_equal_the_matrix_form_and_its_gradient():
    """The training loop's blockwise path gives forward()'s logits and the same gradient."""
    learner = lada.LADALearner(6, lam1=3, lam2=2, epochs=1, seed=0)
    learner.learn_task(_toy_task(0, 2))
    mem = learner.memory
    mem.add_classes(_unit(_toy_task(2, 2, seed=3).train_x), torch.arange(2, 4).repeat_interleave(12), 3)
    v = _unit(torch.randn(5, 6, generator=torch.Generator().manual_seed(4)))
    torch.testing.assert_close(mem.blockwise(v), mem.forward(v), rtol=1e-6, atol=1e-6)
    (g1,) = torch.autograd.grad(mem.forward(v).square().sum(), mem.current)
    (g2,) = torch.autograd.grad(mem.blockwise(v).square().sum(), mem.current)
    torch.testing.assert_close(g1, g2, rtol=1e-6, atol=1e-6)
    vg = v.clone().requires_grad_(True)  # a gradient into the features still flows through both
    (h1,) = torch.autograd.grad(mem.forward(vg).sum(), vg)
    (h2,) = torch.autograd.grad(mem.blockwise(vg).sum(), vg)
    torch.testing.assert_close(h1, h2, rtol=1e-6, atol=1e-6)


from companion.lada import data as _ld, encoder as _le, lada as _ll, metrics as _lm

_NAN = float("nan")
LADA_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _ll.CosineClassifier(0), "dim"),
    (lambda: _ll.CosineClassifier(8, scale=_NAN), "scale"),
    (lambda: _le.cache_features("enc", []), "enc"),
    (lambda: _le.cache_features(_le.GlyphCNN(), ["task"]), "stream"),
    (lambda: _lm.check_accuracy_matrix(np.array([[0.5, 1.5]])), "A"),
    (lambda: _ll.check_features(torch.full((2, 4), _NAN), "v"), "v"),
    (lambda: _ll.check_new_labels(torch.tensor([0, 9]), 2, 4), "labels"),
    (lambda: _ld.pretraining_set("huge"), "scale"),
    (lambda: _lm.summary_table("results"), "results"),
    # issue 49, through companion.validation: float labels (2.7 read as class 2), bools as numbers,
    # integer images, NaN weights, a NaN k-means input, a NaN learning rate
    (lambda: _ll.check_new_labels(torch.tensor([0.0, 1.0]), 0, 2), "labels: expected integer indices"),
    (lambda: _ll.LabelMemory(4, beta=True), "beta: expected a finite real number"),
    (lambda: _ll.DPTBank(reg_covar=_NAN), "reg_covar: expected a finite number >= 0"),
    (lambda: _ll.kmeans_centres(np.full((3, 2), _NAN), 2), "x: must be finite"),
    (lambda: _ll.check_features(torch.zeros(4), "v"), "v: expected 2 dimensions"),
    (lambda: lada.weighted_ce(torch.zeros(2, 2), torch.tensor([0, 1]), torch.tensor([1.0, _NAN])), "w: contains NaN"),
    (lambda: lada.LADALearner(4, lr=_NAN), "lr: expected a finite number > 0"),
    (lambda: lada.LADALearner(4, scale=0.0), "scale: expected a finite number > 0"),
    (lambda: _le.extract_features(_le.GlyphCNN(), torch.ones(2, 1, 16, 16, dtype=torch.long)),
     "x: expected a floating-point tensor"),
    (lambda: _le.pretrain_encoder(torch.rand(2, 1, 16, 16), torch.tensor([0.0, 1.0])), "y: expected integer indices"),
    (lambda: _le.pretrain_encoder(torch.rand(2, 1, 16, 16), torch.tensor([0, 1]), lr=_NAN), "lr: expected a finite"),
]


@pytest.mark.parametrize("call, name", LADA_MORE_BAD_INPUTS)
def test_lada_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
