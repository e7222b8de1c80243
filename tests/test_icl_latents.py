"""ICL task latents (companion.icl_latents): generators, the masks (the subtle part), the
known-form readouts, the Bayes reference against least squares and by hand, the probes,
training and the shipped checkpoint, and bad input."""

import numpy as np
import pytest
import torch

import companion.icl_latents as il
from companion.icl_latents import train as tr

SMALL = dict(d_model=16, n_heads=2, d_ff=32)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------ tasks
def test_shapes_dtypes_and_noise_free_labels():
    task = il.LinearRegressionTask(dx=3, dy=2, noise=0.0)
    b = task.sample(5, 7, 4, generator=gen())
    assert b.x_c.shape == (5, 7, 3) and b.y_c.shape == (5, 7, 2)
    assert b.x_q.shape == (5, 4, 3) and b.y_q.shape == (5, 4, 2) and b.w.shape == (5, 8)
    assert all(t.dtype == torch.float32 for t in (b.x_c, b.y_c, b.x_q, b.y_q, b.w))
    W = b.w.reshape(5, 4, 2)
    ones = torch.ones(5, 7, 1)
    assert torch.allclose(b.y_c, torch.cat([b.x_c, ones], -1) @ W, atol=1e-6)


def test_query_styles_move_only_the_queries():
    task = il.LinearRegressionTask(dx=2)
    wide = task.sample(2000, 8, 8, query="wide", generator=gen(1))
    iid = task.sample(2000, 8, 8, query="iid", generator=gen(1))
    assert abs(float(wide.x_q.std()) - 3.0) < 0.3
    assert abs(float(wide.x_c.std()) - 1.0) < 0.1 and torch.equal(wide.x_c, iid.x_c)
    assert torch.equal(wide.w, iid.w)
    far = task.sample(500, 8, 8, query="far", intensity=3.0, generator=gen(2))
    norms = far.x_q.norm(dim=-1)
    assert float(norms.min()) >= 2.5 and float(norms.max()) <= 3.5
    near = task.sample(500, 8, 8, query="near", generator=gen(3))
    gap = (near.x_q - near.x_c).norm(dim=-1)  # query j sits next to context point j
    assert float(gap.max()) < 0.5 and abs(float(gap.pow(2).mean()) - 2 * 0.01) < 0.003


def test_every_query_style_shares_the_tasks_and_contexts():
    # the context is drawn before the queries: one generator state gives the same tasks,
    # context inputs and context labels (noise included) whatever the query style
    task = il.LinearRegressionTask()
    base = task.sample(50, 12, 12, generator=gen(11))
    for style in ("wide", "far", "near"):
        other = task.sample(50, 12, 12, query=style, generator=gen(11))
        assert torch.equal(other.w, base.w) and torch.equal(other.x_c, base.x_c)
        assert torch.equal(other.y_c, base.y_c)
        assert not torch.equal(other.x_q, base.x_q)


def test_near_queries_need_a_context_point_each():
    with pytest.raises(ValueError, match="^m:"):
        il.LinearRegressionTask().sample(2, 4, 5, query="near")


def test_sinusoid_task_is_its_features_times_the_amplitudes():
    task = il.SinusoidTask(n_freq=3, noise=0.0)
    b = task.sample(4, 10, 3, generator=gen())
    assert float(b.w.abs().max()) <= 1 and b.w.shape == (4, 3)
    by_hand = sum(b.w[:, None, f] * torch.sin(task.freqs[0, f] * b.x_c[..., 0])
                  for f in range(3))
    assert torch.allclose(b.y_c[..., 0], by_hand, atol=1e-6)
    assert torch.equal(task.freqs, il.SinusoidTask().freqs)  # fixed once, by the seed


@pytest.mark.parametrize("kwargs, name", [
    (dict(B=0, n=4, m=4), "B"), (dict(B=2, n=0, m=4), "n"), (dict(B=2, n=4, m=0), "m"),
    (dict(B=2, n=4, m=4, query="sideways"), "query"),
    (dict(B=2, n=4, m=4, intensity=-1.0), "intensity"),
])
def test_bad_sampling_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}:"):
        il.LinearRegressionTask().sample(**kwargs)


def test_bad_task_arguments_are_named():
    with pytest.raises(ValueError, match="^noise:"):
        il.LinearRegressionTask(noise=-0.1)
    with pytest.raises(ValueError, match="^dx:"):
        il.LinearRegressionTask(dx=0)
    with pytest.raises(ValueError, match="^w:"):
        il.LinearRegressionTask().f(torch.zeros(2, 3), torch.zeros(2, 4, 1))


# ------------------------------------------------------------------ masks
def test_masks_by_hand():
    assert il.implicit_mask(2, 2).tolist() == [[False, False, True, True]] * 4
    # the summary token (position 0) is read by no token, itself included (official mask)
    assert il.context_mask(2).tolist() == [[True, False, False], [True, False, False],
                                           [True, False, False]]
    assert il.predictor_mask(2).tolist() == [[False, True, True], [False, False, True],
                                             [False, True, False]]


def implicit(seed=0):
    torch.manual_seed(seed)
    return il.ImplicitTransformer(1, 1, n_layers=2, **SMALL).eval()


def test_implicit_queries_are_independent_and_the_context_is_a_set():
    model, b = implicit(), il.LinearRegressionTask().sample(3, 6, 5, generator=gen())
    with torch.no_grad():
        y, _ = model(b.x_c, b.y_c, b.x_q)
        moved = b.x_q.clone()
        moved[:, 2] += 5.0
        y2, _ = model(b.x_c, b.y_c, moved)
        perm = torch.randperm(6, generator=gen(4))
        y3, _ = model(b.x_c[:, perm], b.y_c[:, perm], b.x_q)
        alone = torch.cat([model(b.x_c, b.y_c, b.x_q[:, j:j + 1])[0] for j in range(5)], 1)
    others = [0, 1, 3, 4]
    assert torch.allclose(y[:, others], y2[:, others], atol=1e-6)
    assert not torch.allclose(y[:, 2], y2[:, 2])
    assert torch.allclose(y, y3, atol=1e-5)
    assert torch.allclose(y, alone, atol=1e-5)  # a query answers the same with or without others


def test_implicit_context_tokens_never_read_the_queries():
    model, b = implicit(), il.LinearRegressionTask().sample(2, 6, 3, generator=gen())
    with torch.no_grad():
        h = model.states(b.x_c, b.y_c, b.x_q)[:, :6]
        h2 = model.states(b.x_c, b.y_c, b.x_q + 3.0)[:, :6]
    assert torch.allclose(h, h2, atol=1e-6)


def explicit(predictor="tsf", seed=0):
    torch.manual_seed(seed)
    ctx = il.ContextEncoder(1, 1, n_layers=2, **SMALL)
    pred = (il.TransformerPredictor(1, 1, 16, n_layers=2, **SMALL) if predictor == "tsf"
            else il.MLPPredictor(1, 1, 16, hidden=16))
    return il.ExplicitModel(ctx, pred).eval()


@pytest.mark.parametrize("predictor", ["tsf", "mlp"])
def test_explicit_queries_see_the_context_only_through_z(predictor):
    model, b = explicit(predictor), il.LinearRegressionTask().sample(3, 6, 5, generator=gen())
    other = il.LinearRegressionTask().sample(3, 9, 5, generator=gen(7))
    with torch.no_grad():
        y, z = model(b.x_c, b.y_c, b.x_q)
        moved = b.x_q.clone()
        moved[:, 1] -= 4.0
        y2, _ = model(b.x_c, b.y_c, moved)
        # another context whose encoder is mocked to return the same z
        model_same_z = il.ExplicitModel(lambda x_c, y_c: z, model.predictor)
        y3, _ = model_same_z(other.x_c, other.y_c, b.x_q)
        _, z_other = model(other.x_c, other.y_c, b.x_q)
    keep = [0, 2, 3, 4]
    assert torch.allclose(y[:, keep], y2[:, keep], atol=1e-6)
    assert torch.equal(y, y3)
    assert not torch.allclose(z, z_other)


def test_the_summary_token_is_not_read_by_the_context_tokens():
    model, b = explicit(), il.LinearRegressionTask().sample(2, 5, 1, generator=gen())
    captured = {}
    enc = model.context
    hook = enc.encoder.layers[-1].register_forward_hook(
        lambda mod, inp, out: captured.setdefault("h", out))
    with torch.no_grad():
        enc(b.x_c, b.y_c)
        h = captured.pop("h")[:, 1:]
        enc.summary.add_(1.0)  # change c: the context tokens' states must not move
        enc(b.x_c, b.y_c)
        h2 = captured.pop("h")[:, 1:]
    hook.remove()
    assert torch.allclose(h, h2, atol=1e-6)


def test_the_summary_token_does_not_read_itself():
    # official mask: no token reads c, c included. With a context of one point, c's first
    # attention output is then that point's value alone, whatever c is; had c read itself
    # (the old mask), moving c would move it
    model, one = explicit(), il.LinearRegressionTask().sample(2, 1, 1, generator=gen(2))
    enc = model.context
    seen = []
    hook = enc.encoder.layers[0].self_attn.register_forward_hook(
        lambda mod, inp, out: seen.append(out[0][:, 0].clone()))
    with torch.no_grad():
        enc(one.x_c, one.y_c)
        enc.summary.add_(3.0)
        enc(one.x_c, one.y_c)
    hook.remove()
    assert len(seen) == 2 and torch.allclose(seen[0], seen[1], atol=1e-5)


def test_known_latent_model_needs_w_and_readouts_match_by_hand():
    model = il.ExplicitModel(None, il.LinearReadoutPredictor(1, 1, 2, linear=False))
    x_q = torch.tensor([[[2.0], [-1.0]]])
    with pytest.raises(ValueError, match="^w:"):
        model(torch.zeros(1, 3, 1), torch.zeros(1, 3, 1), x_q)
    y, z = model(torch.zeros(1, 3, 1), torch.zeros(1, 3, 1), x_q, w=torch.tensor([[3.0, 0.5]]))
    assert torch.allclose(y[0, :, 0], torch.tensor([6.5, -2.5]))
    sin = il.SinusoidReadoutPredictor(torch.tensor([[1.0, 2.0]]), z_dim=2)
    with torch.no_grad():
        sin.to_a.weight.copy_(torch.eye(2))
        sin.to_a.bias.zero_()
    got = sin(torch.tensor([[0.5, -1.0]]), torch.tensor([[[0.3]]]))
    assert torch.allclose(got, torch.tensor([[[0.5 * np.sin(0.3) - np.sin(0.6)]]]).float())
    with pytest.raises(ValueError, match="^z_dim:"):
        il.LinearReadoutPredictor(1, 1, 5, linear=False)


def test_bad_model_inputs_are_named():
    model = implicit()
    with pytest.raises(ValueError, match="^x_c:"):
        model(torch.zeros(2, 3), torch.zeros(2, 3, 1), torch.zeros(2, 1, 1))
    with pytest.raises(ValueError, match="^y_c:"):
        model(torch.zeros(2, 3, 1), torch.zeros(2, 4, 1), torch.zeros(2, 1, 1))
    with pytest.raises(ValueError, match="^x_q:"):
        model(torch.zeros(2, 3, 1), torch.zeros(2, 3, 1), torch.zeros(2, 1, 2))


# ------------------------------------------------------------------ Bayes reference
def test_bayes_matches_least_squares_as_the_noise_vanishes():
    b = il.LinearRegressionTask(dx=2, noise=0.0).sample(4, 6, 3, generator=gen())
    mean, var = il.bayes_linreg_predict(b.x_c, b.y_c, b.x_q, noise=1e-6)
    for t in range(4):
        phi = np.c_[b.x_c[t].numpy(), np.ones(6)]
        coef = np.linalg.lstsq(phi, b.y_c[t].numpy(), rcond=None)[0]
        want = np.c_[b.x_q[t].numpy(), np.ones(3)] @ coef
        assert np.allclose(mean[t].numpy(), want, atol=1e-4)
    assert torch.allclose(mean, b.y_q, atol=1e-4) and float(var.max()) < 1e-8


def test_bayes_by_hand_one_point_and_no_context():
    # one context point x = 1, y = 2, noise 1, prior 1: Phi = [1, 1]; precision = Phi^T Phi + I
    x_c, y_c = torch.tensor([[[1.0]]]), torch.tensor([[[2.0]]])
    mean, var = il.bayes_linreg_predict(x_c, y_c, torch.tensor([[[0.0], [1.0]]]), noise=1.0)
    # Sigma = inv([[2, 1], [1, 2]]) = [[2, -1], [-1, 2]] / 3; mu = Sigma [2, 2] = [2/3, 2/3]
    assert torch.allclose(mean[0, :, 0], torch.tensor([2 / 3, 4 / 3]), atol=1e-6)
    assert torch.allclose(var[0, :, 0], torch.tensor([1 + 2 / 3, 1 + 2 / 3]), atol=1e-6)
    x_q = torch.tensor([[[0.0], [2.0], [5.0]]])
    mean0, var0 = il.bayes_linreg_predict(torch.zeros(1, 0, 1), torch.zeros(1, 0, 1), x_q,
                                          noise=0.1)
    assert torch.equal(mean0, torch.zeros(1, 3, 1))
    assert torch.allclose(var0[0, :, 0], torch.tensor([1.0, 5.0, 26.0]) + 0.01)


def test_bayes_variance_grows_away_from_the_data_and_bad_input_is_named():
    b = il.LinearRegressionTask().sample(1, 20, 1, generator=gen())
    xs = torch.tensor([[[0.0], [2.0], [4.0], [8.0]]])
    _, var = il.bayes_linreg_predict(b.x_c, b.y_c, xs, noise=0.1)
    assert bool((var[0, 1:, 0] > var[0, :-1, 0]).all())
    bad = b.x_c.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="^x_c:"):
        il.bayes_linreg_predict(bad, b.y_c, xs, noise=0.1)
    with pytest.raises(ValueError, match="^noise:"):
        il.bayes_linreg_predict(b.x_c, b.y_c, xs, noise=0.0)
    with pytest.raises(ValueError, match="^y_c:"):
        il.bayes_linreg_predict(b.x_c, b.y_c[:, :5], xs, noise=0.1)


# ------------------------------------------------------------------ probes
def test_probe_r2_is_one_on_a_linear_map_and_zero_on_noise():
    g = gen()
    Z = torch.randn(400, 6, generator=g)
    A = torch.randn(6, 2, generator=g)
    assert il.linear_probe_r2(Z, Z @ A + 3.0) > 0.999
    assert abs(il.linear_probe_r2(Z, torch.randn(400, 2, generator=g))) < 0.1
    with pytest.raises(ValueError, match="^W:"):
        il.linear_probe_r2(Z, torch.randn(300, 2))
    with pytest.raises(ValueError, match="^Z:"):
        il.linear_probe_r2(Z[:, 0], Z)
    with pytest.raises(ValueError, match="^train_frac:"):
        il.linear_probe_r2(Z, Z, train_frac=1.5)


def test_raw_context_probe_reads_about_half_of_the_weights():
    # a linear readout of the raw context recovers the intercept (mean of y) but not much of
    # the slope (sum x_i y_i is quadratic in the inputs); the paper's baseline explains ~half
    r2 = il.raw_context_probe_r2(il.LinearRegressionTask(), 16, 3000, generator=gen())
    assert 0.3 < r2 < 0.7


def test_collect_latents_needs_a_context_encoder():
    Z, W = il.collect_latents(explicit(), il.LinearRegressionTask(), 10, 6, generator=gen())
    assert Z.shape == (10, 16) and W.shape == (10, 2)
    with pytest.raises(ValueError, match="^model:"):
        il.collect_latents(implicit(), il.LinearRegressionTask(), 10, 6)


# ------------------------------------------------------------------ training and checkpoint
def test_a_short_training_beats_predicting_zero():
    torch.manual_seed(0)
    model = il.ImplicitTransformer(1, 1, n_layers=2, **SMALL)
    task = il.LinearRegressionTask()
    hist = il.train_icl(model, task, steps=200, batch_size=16, n_range=(8, 16), m=8, lr=3e-3,
                        seed=0, log_every=50)
    val = task.sample(500, 12, 8, generator=gen(9))
    zero = float((val.y_q ** 2).mean())
    assert float(il.evaluate_mse(model, val).mean()) < 0.5 * zero
    assert hist["step"] == [50, 100, 150, 200]
    with pytest.raises(ValueError, match="^n_range:"):
        il.train_icl(model, task, steps=1, batch_size=2, n_range=(5, 2), m=1, lr=1e-3, seed=0)
    with pytest.raises(ValueError, match="^steps:"):
        il.train_icl(model, task, steps=0, batch_size=2, n_range=(2, 5), m=1, lr=1e-3, seed=0)


def test_the_suite_trains_and_round_trips_through_a_checkpoint(tmp_path):
    recipe = dict(tr.RECIPES["quick"], seeds=(0,), steps=3)
    suite, hist = tr.train_suite(recipe)
    assert set(suite["0"].keys()) == set(tr.MODELS) and len(hist) == len(tr.MODELS)
    assert tr.main(["--steps", "2", "--seed", "1", "--out", str(tmp_path)]) == 0
    loaded, meta = tr.load_suite(tmp_path / "quick.pt")
    assert meta["recipe"]["steps"] == 2 and list(loaded.keys()) == ["1"]


def test_the_official_lr_ablation_trains_two_models_at_a_constant_rate(tmp_path):
    recipe = tr.RECIPES["official-lr"]
    assert recipe["lr"] == 1e-4 and recipe["schedule"] == "constant" and recipe["clip"] is None
    assert {k: v for k, v in recipe.items() if k not in ("schedule", "clip", "models")} \
        == {**tr.RECIPES["quick"], "lr": 1e-4}  # the quick recipe, at the official rate
    assert tr.main(["--scale", "official-lr", "--steps", "2", "--out", str(tmp_path)]) == 0
    loaded, meta = tr.load_suite(tmp_path / "official-lr.pt")
    assert list(loaded["1"].keys()) == ["implicit", "explicit-tsf"]
    # a constant rate: Adam's step size never decays
    torch.manual_seed(0)
    model = il.ImplicitTransformer(1, 1, n_layers=1, **SMALL)
    il.train_icl(model, il.LinearRegressionTask(), steps=3, batch_size=2, n_range=(2, 3), m=None,
                 lr=1e-4, seed=0, schedule="constant", clip=None)
    with pytest.raises(ValueError, match="^schedule:"):
        il.train_icl(model, il.LinearRegressionTask(), steps=1, batch_size=2, n_range=(2, 3),
                     m=1, lr=1e-4, seed=0, schedule="linear")
    with pytest.raises(ValueError, match="^clip:"):
        il.train_icl(model, il.LinearRegressionTask(), steps=1, batch_size=2, n_range=(2, 3),
                     m=1, lr=1e-4, seed=0, clip=float("nan"))
    with pytest.raises(ValueError, match="^models:"):
        tr.build_models(recipe["model"], models=("implicit", "nope"))
    with pytest.raises(ValueError, match="^scale:"):
        tr.load_or_train("medium")


def test_the_shipped_checkpoint_loads_into_the_current_code():
    path = tr.CHECKPOINTS / "quick.pt"
    if not path.exists():
        pytest.skip("no shipped checkpoint")
    suite, meta = tr.load_suite(path)
    assert list(suite.keys()) == [str(s) for s in meta["recipe"]["seeds"]]
    assert meta["recipe"] == {**tr.RECIPES["quick"], "seeds": list(tr.RECIPES["quick"]["seeds"]),
                              "n_range": list(tr.RECIPES["quick"]["n_range"])}
    assert "+uncommitted" not in meta["commit"]
    assert meta["recipe"]["m"] is None  # m = n queries, as the official data module
    val = il.LinearRegressionTask().sample(200, 16, 16, generator=gen(5))
    models = suite[str(meta["recipe"]["seeds"][0])]
    for name in tr.MODELS:  # every shipped model predicts far better than zero
        assert float(il.evaluate_mse(models[name], val).mean()) < 0.2
    assert isinstance(models["known-latent"].predictor, il.TransformerPredictor)


# ------------------------------------------------------------------ issue 49: the table of bad inputs
_NAN3 = torch.full((2, 3, 1), float("nan"))
_Z3 = torch.zeros(2, 3, 1)


def _known_latent():
    return il.ExplicitModel(None, il.LinearReadoutPredictor(1, 1, 2, linear=False))


def _with_nan(t):
    t = t.clone()
    t[0, 0] = float("nan")
    return t


ICL_BAD_INPUTS = [
    (lambda **kw: implicit()(**kw), dict(x_c=_NAN3, y_c=_Z3, x_q=_Z3), "x_c"),
    (lambda **kw: implicit()(**kw), dict(x_c=_Z3, y_c=_NAN3, x_q=_Z3), "y_c"),
    (lambda **kw: implicit()(**kw), dict(x_c=_Z3, y_c=_Z3, x_q=_NAN3), "x_q"),
    (lambda **kw: implicit()(**kw), dict(x_c=torch.zeros(2, 0, 1), y_c=torch.zeros(2, 0, 1), x_q=_Z3), "x_c"),
    (lambda **kw: implicit()(**kw), dict(x_c=_Z3, y_c=_Z3, x_q=torch.zeros(2, 0, 1)), "x_q"),
    (lambda **kw: implicit()(**kw), dict(x_c=_Z3, y_c=_Z3, x_q=torch.zeros(5, 1, 1)), "x_q"),
    (lambda **kw: implicit()(**kw), dict(x_c=_Z3, y_c=torch.zeros(3, 3, 1), x_q=_Z3), "y_c"),
    (lambda **kw: explicit()(**kw), dict(x_c=_NAN3, y_c=_Z3, x_q=_Z3), "x_c"),
    (lambda **kw: explicit()(**kw), dict(x_c=_Z3, y_c=_Z3, x_q=_NAN3), "x_q"),
    (lambda **kw: explicit("mlp")(**kw), dict(x_c=_Z3, y_c=_Z3, x_q=torch.zeros(2, 0, 1)), "x_q"),
    (lambda **kw: explicit("mlp")(**kw), dict(x_c=_Z3, y_c=_Z3, x_q=torch.zeros(4, 2, 1)), "x_q"),
    (lambda **kw: explicit()(**kw), dict(x_c=torch.zeros(2, 0, 1), y_c=torch.zeros(2, 0, 1), x_q=_Z3), "x_c"),
    (lambda **kw: il.ContextEncoder(1, 1, n_layers=1, **SMALL)(**kw), dict(x_c=_Z3, y_c=_NAN3), "y_c"),
    (lambda **kw: _known_latent()(_Z3, _Z3, **kw), dict(x_q=_Z3, w=torch.full((2, 2), float("nan"))), "w"),
    (lambda **kw: _known_latent()(_Z3, _Z3, **kw), dict(x_q=_Z3, w=None), "w"),
    (lambda **kw: _known_latent()(_Z3, _Z3, **kw), dict(x_q=_Z3, w=torch.zeros(3, 2)), "w"),
    (lambda **kw: _known_latent()(_Z3, _Z3, **kw), dict(x_q=torch.zeros(2, 0, 1), w=torch.zeros(2, 2)), "x_q"),
    (lambda **kw: il.bayes_linreg_predict(_Z3, _Z3, noise=0.1, **kw), dict(x_q=torch.zeros(4, 2, 1)), "x_q"),
    (lambda **kw: il.bayes_linreg_predict(_Z3, _Z3, noise=0.1, **kw), dict(x_q=torch.zeros(2, 2, 3)), "x_q"),
    (lambda **kw: il.bayes_linreg_predict(_Z3, _Z3, noise=0.1, **kw), dict(x_q=torch.zeros(2, 0, 1)), "x_q"),
    (lambda **kw: il.bayes_linreg_predict(_Z3, _Z3, noise=0.1, **kw), dict(x_q=_NAN3), "x_q"),
    (lambda **kw: il.bayes_linreg_predict(_Z3, _Z3, _Z3, **kw), dict(noise=float("nan")), "noise"),
    (lambda **kw: il.bayes_linreg_predict(_Z3, _Z3, _Z3, noise=0.1, **kw), dict(prior_var=-1.0), "prior_var"),
    (lambda **kw: il.bayes_feature_predict(torch.zeros(2, 3, 2), _Z3, noise=0.1, **kw),
     dict(phi_q=torch.zeros(2, 1, 3)), "phi_q"),
    (lambda **kw: il.bayes_feature_predict(torch.zeros(2, 3, 2), noise=0.1, phi_q=torch.zeros(2, 1, 2), **kw),
     dict(y_c=torch.zeros(2, 4, 1)), "y_c"),
    (lambda **kw: il.linear_probe(torch.zeros(8, 2), **kw), dict(W=torch.full((8, 1), float("nan"))), "W"),
    (lambda **kw: il.linear_probe(W=torch.zeros(8, 1), **kw), dict(Z=torch.full((8, 2), float("inf"))), "Z"),
    (lambda **kw: il.linear_probe(torch.zeros(8, 2), torch.zeros(8, 1), **kw), dict(ridge=float("nan")), "ridge"),
    (lambda **kw: il.linear_probe(torch.zeros(8, 2), torch.zeros(8, 1), **kw), dict(train_frac=1.5), "train_frac"),
    (lambda **kw: il.linear_probe_r2(torch.zeros(8, 2), **kw), dict(W=torch.zeros(7, 1)), "W"),
    (lambda **kw: il.raw_context_probe(il.LinearRegressionTask(), 4, **kw), dict(n_tasks=0), "n_tasks"),
    (lambda **kw: il.raw_context_probe_r2(il.LinearRegressionTask(), n_tasks=8, **kw), dict(n=0), "n"),
    (lambda **kw: il.collect_latents(implicit(), il.LinearRegressionTask(), 8, 4, **kw), dict(), "model"),
    (lambda **kw: il.LinearRegressionTask().sample(2, 3, **kw), dict(m=0), "m"),
    (lambda **kw: il.LinearRegressionTask().sample(2, 3, 1, **kw), dict(intensity=float("nan")), "intensity"),
    (lambda **kw: il.implicit_mask(m=1, **kw), dict(n=-1), "n"),
    (lambda **kw: il.context_mask(**kw), dict(n=1.5), "n"),
    (lambda **kw: il.predictor_mask(**kw), dict(m=-2), "m"),
    (lambda **kw: il.implicit_mask(m=1, **kw), dict(n=0), "n"),
    (lambda **kw: il.context_mask(**kw), dict(n=0), "n"),
    (lambda **kw: il.TransformerPredictor(1, 1, 2, n_layers=1, **SMALL)(**kw),
     dict(z=torch.zeros(2, 3), x_q=_Z3), "z"),
    (lambda **kw: il.TransformerPredictor(1, 1, 2, n_layers=1, **SMALL)(**kw),
     dict(z=torch.full((2, 2), float("nan")), x_q=_Z3), "z"),
    (lambda **kw: il.TransformerPredictor(1, 1, 2, n_layers=1, **SMALL)(**kw),
     dict(z=torch.zeros(2, 2), x_q=torch.zeros(3, 1, 1)), "x_q"),
    (lambda **kw: il.MLPPredictor(1, 1, 2, hidden=4)(**kw), dict(z=torch.zeros(2, 2), x_q=_NAN3), "x_q"),
    (lambda **kw: il.LinearRegressionTask().sample(2, 3, 4, **kw), dict(query="near"), "m"),
    (lambda **kw: il.LinearRegressionTask().sample(n=3, m=1, **kw), dict(B=2.5), "B"),
    (lambda **kw: il.train_icl(implicit(), il.LinearRegressionTask(), steps=1, n_range=(2, 3), m=1,
                               seed=0, lr=1e-3, **kw), dict(batch_size=1.5), "batch_size"),
    (lambda **kw: il.train_icl(implicit(), il.LinearRegressionTask(), steps=1, batch_size=2, m=1,
                               seed=0, lr=1e-3, **kw), dict(n_range=(2.5, 3)), "n_range"),
    (lambda **kw: il.train_icl(implicit(), il.LinearRegressionTask(), steps=1, batch_size=2,
                               n_range=(2, 3), seed=0, lr=1e-3, **kw), dict(m=0), "m"),
    (lambda **kw: il.train_icl(implicit(), il.LinearRegressionTask(), steps=1, batch_size=2,
                               n_range=(2, 3), m=1, seed=0, **kw), dict(lr=float("nan")), "lr"),
    (lambda **kw: tr.evaluate_mse(implicit(), il.LinearRegressionTask().sample(2, 3, 1), **kw), dict(chunk=0),
     "chunk"),
    (lambda **kw: tr.evaluate_mse(implicit(), **kw), dict(batch=(_Z3, _Z3)), "batch"),
    (lambda **kw: tr.evaluate_mse(implicit(), **kw),
     dict(batch=il.TaskBatch(_Z3, _Z3, _Z3, torch.zeros(2, 2, 1), torch.zeros(2, 2))), "batch"),
    (lambda **kw: tr.predict(implicit(), **kw), dict(batch=None), "batch"),
    (lambda **kw: tr.load_suite(**kw), dict(path="/nonexistent/quick.pt"), "path"),
    (lambda **kw: tr.build_models(tr.RECIPES["quick"]["model"], **kw), dict(models=("mlp",)), "models"),
    (lambda **kw: il.collect_latents(explicit(), il.LinearRegressionTask(), n=4, **kw), dict(n_tasks=2.5),
     "n_tasks"),
]


@pytest.mark.parametrize("fn, kwargs, name", ICL_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


from companion.icl_latents import models as _im, tasks as _it

_NAN = float("nan")
ICL_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _im.ExplicitModel("context", torch.nn.Linear(2, 2)), "context"),
    (lambda: _im.ImplicitTransformer(0, 1), "dx"),
    (lambda: _im.ExplicitModel(None, "predictor"), "predictor"),
    (lambda: _im.ImplicitTransformer(1, 1, d_model=30, n_heads=4), "d_model"),
    (lambda: _im.SinusoidReadoutPredictor(torch.tensor([_NAN]), 2), "freqs"),
    (lambda: _it.SinusoidTask(n_freq=0), "n_freq"),
    (lambda: _it.SinusoidTask(noise=_NAN), "noise"),
    (lambda: il.linear_probe(torch.zeros(8, 2), torch.zeros(8, 1), ridge=_NAN), "ridge: expected a finite number >= 0"),
    (lambda: il.linear_probe(torch.zeros(8, 2), torch.zeros(8, 1), ridge=True), "ridge: expected a finite real number"),
    # issue 49: the known-form predictors name x_q (and z) instead of failing inside a matmul
    (lambda: _im.LinearReadoutPredictor(2, 1, 4)(torch.zeros(3, 4), torch.zeros(3, 5, 7)), "x_q"),
    (lambda: _im.LinearReadoutPredictor(2, 1, 4)(torch.zeros(3, 4), torch.full((3, 5, 2), _NAN)), "x_q"),
    (lambda: _im.LinearReadoutPredictor(2, 1, 4)(torch.zeros(3, 5), torch.zeros(3, 5, 2)), "z"),
    (lambda: _im.SinusoidReadoutPredictor(torch.ones(2, 3), 4)(torch.zeros(3, 4), torch.zeros(3, 5, 1)), "x_q"),
    (lambda: _im.SinusoidReadoutPredictor(torch.ones(2, 3), 4)(torch.zeros(3, 4), torch.zeros(2, 5, 2)), "x_q"),
]


@pytest.mark.parametrize("call, name", ICL_MORE_BAD_INPUTS)
def test_icl_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
