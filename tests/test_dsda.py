"""DSDA (companion.dsda): samplers against hand computations, PCGrad against its closed form,
the losses at their known zeros, the metrics on synthetic cases, and bad input."""

import math

import numpy as np

import pytest
import torch
from torch import nn

import companion.dsda as ds


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models: one thread is many times faster on a busy machine (restored afterwards)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def quadratic(a, scales=None):
    """E(x) = 1/2 sum_j s_j (x_j - a_j)^2 and its gradient, as a sampler's grad_fn."""
    s = torch.ones_like(a) if scales is None else scales

    def grad_fn(x):
        return 0.5 * (s * (x - a) ** 2).sum(1), s * (x - a)

    return grad_fn


def counting(grad_fn):
    calls = {"n": 0}

    def wrapped(x):
        calls["n"] += 1
        return grad_fn(x)

    return wrapped, calls


def linear_model(d=4, K=3):
    torch.manual_seed(0)
    model = ds.MLP(d, (), K)  # no hidden layer: f(x) = A x + c
    return model


# ------------------------------------------------------------------ energy
def test_energy_gradient_of_a_linear_model_is_exact():
    model = linear_model()
    x = torch.rand(5, 4, dtype=torch.float32)
    y = torch.tensor([0, 1, 2, 0, 1])
    lam = 0.3
    energy, grad = ds.model_energy_grad(model, y, prior=lam)(x)
    A, c = model.head.weight.detach(), model.head.bias.detach()
    want_e = -(x @ A.T + c).gather(1, y[:, None])[:, 0] + 0.5 * lam * ((x - 0.5) ** 2).sum(1)
    assert torch.allclose(energy, want_e, atol=1e-6)
    assert torch.allclose(grad, -A[y] + lam * (x - 0.5), atol=1e-6)


def test_energy_grad_does_not_touch_the_model():
    model = linear_model()
    before = [p.detach().clone() for p in model.parameters()]
    ds.model_energy_grad(model, torch.tensor([0]))(torch.rand(1, 4))
    assert all(torch.equal(p, q) for p, q in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())


# ------------------------------------------------------------------ samplers
@pytest.mark.parametrize("order, per_step", [(1, 1), (2, 2), (4, 4)])
def test_nfe_per_step_and_budget(order, per_step):
    grad_fn, calls = counting(quadratic(torch.zeros(3)))
    cfg = ds.SamplerConfig(0.1, noise=0.0, rk_order=order, low=-5, high=5)
    _, trace = ds.langevin(grad_fn, torch.ones(2, 3), cfg, nfe_budget=10)
    steps = 10 // per_step
    assert trace["nfe"][-1] == steps * per_step <= 10
    assert calls["n"] == steps * per_step + 1  # + one uncounted monitoring call at the end


def test_euler_and_heun_contract_a_quadratic_by_their_hand_factors():
    a = torch.tensor([0.2, -0.1, 0.4])
    x0 = torch.tensor([[1.0, 2.0, -1.0]])
    alpha, steps = 0.1, 7
    for order, factor in [(1, 1 - alpha), (2, 1 - alpha + alpha ** 2 / 2)]:
        cfg = ds.SamplerConfig(alpha, noise=0.0, rk_order=order, low=-10, high=10)
        x, _ = ds.langevin(quadratic(a), x0, cfg, nfe_budget=steps * order)
        assert torch.allclose(x - a, (x0 - a) * factor ** steps, atol=1e-6)


def test_rk4_matches_the_exponential_to_fourth_order():
    a, x0 = torch.zeros(2), torch.tensor([[1.0, -2.0]])
    alpha = 0.2
    cfg = ds.SamplerConfig(alpha, noise=0.0, rk_order=4, low=-10, high=10)
    x, _ = ds.langevin(quadratic(a), x0, cfg, nfe_budget=4)
    factor = 1 - alpha + alpha ** 2 / 2 - alpha ** 3 / 6 + alpha ** 4 / 24
    assert torch.allclose(x, x0 * factor, atol=1e-6)


def test_momentum_beats_euler_on_an_ill_conditioned_quadratic():
    scales = torch.tensor([1.0, 0.01])  # condition number 100
    a, x0 = torch.zeros(2), torch.tensor([[1.0, 1.0]])

    def nfe_to(cfg, tol=1e-3, budget=3000):
        x, trace = ds.langevin(quadratic(a, scales), x0, cfg, nfe_budget=budget, record_every=1)
        return ds.nfe_to_threshold(trace, 0.5 * 0.01 * tol ** 2)

    euler = nfe_to(ds.SamplerConfig(1.0, noise=0.0, low=-10, high=10))
    heavy = nfe_to(ds.SamplerConfig(1.0, noise=0.0, momentum=0.8, low=-10, high=10))
    assert heavy < euler < math.inf


def test_samples_stay_in_the_box_and_momentum_is_reflected():
    cfg = ds.SamplerConfig(0.5, noise=0.05, momentum=0.9, rk_order=2)
    x, _ = ds.langevin(quadratic(torch.full((3,), 5.0)), torch.rand(8, 3), cfg, nfe_budget=40,
                       generator=torch.Generator().manual_seed(0))
    assert x.min() >= 0 and x.max() <= 1
    assert torch.allclose(x, torch.ones_like(x))  # the minimum outside the box: its corner


def test_sampler_bad_input():
    grad_fn = quadratic(torch.zeros(2))
    cfg = ds.SamplerConfig(0.1, rk_order=2)
    with pytest.raises(ValueError, match="^x0"):
        ds.langevin(grad_fn, torch.tensor([[float("nan"), 0.0]]), cfg, nfe_budget=4)
    with pytest.raises(ValueError, match="^x0"):
        ds.langevin(grad_fn, torch.zeros(0, 2), cfg, nfe_budget=4)
    with pytest.raises(ValueError, match="^x0"):
        ds.langevin(grad_fn, torch.zeros(3), cfg, nfe_budget=4)
    with pytest.raises(ValueError, match="^nfe_budget"):
        ds.langevin(grad_fn, torch.zeros(1, 2), cfg, nfe_budget=1)
    with pytest.raises(ValueError, match="^rk_order"):
        ds.SamplerConfig(0.1, rk_order=3)
    with pytest.raises(ValueError, match="^momentum"):
        ds.SamplerConfig(0.1, momentum=1.0)
    with pytest.raises(ValueError, match="^step"):
        ds.SamplerConfig(-0.1)
    with pytest.raises(ValueError, match="^low, high"):
        ds.SamplerConfig(0.1, low=1.0, high=0.0)
    model = linear_model()
    with pytest.raises(ValueError, match="^classes"):
        ds.synthesize(model, [], 4, cfg, nfe_budget=4)
    with pytest.raises(ValueError, match="^classes"):
        ds.synthesize(model, [7], 4, cfg, nfe_budget=4)
    with pytest.raises(ValueError, match="^conf_threshold"):
        ds.synthesize(model, [0], 4, cfg, nfe_budget=4, conf_threshold=1.5)


def test_synthesize_keeps_confident_samples_of_each_class():
    model = linear_model()
    with torch.no_grad():
        model.head.weight.mul_(50)  # confident enough to pass the 0.9 filter
    cfg = ds.SamplerConfig(0.1, momentum=0.9, rk_order=2, noise=0.0)
    S, info = ds.synthesize(model, [0, 2], 16, cfg, nfe_budget=20)
    conf = model(S.x).softmax(1).gather(1, S.y[:, None])[:, 0]
    assert set(S.y.tolist()) == {0, 2}
    passed = 0
    for c in (0, 2):  # a class either keeps its confident samples or falls back to its top 8
        mine = conf[S.y == c]
        assert (mine >= 0.9).all() or len(mine) == 8
        passed += int((mine >= 0.9).sum())
    assert passed > 0 and passed == round(info["hit_rate"] * 32)
    assert torch.allclose(S.logits, model(S.x).detach())


def test_synthesize_falls_back_to_the_most_confident_when_none_pass():
    model = linear_model()  # small weights: no sample reaches p = 0.9
    cfg = ds.SamplerConfig(0.1, rk_order=1, noise=0.0)
    S, info = ds.synthesize(model, [0, 2], 16, cfg, nfe_budget=4)
    assert info["hit_rate"] == 0
    assert (S.y == 0).sum() == 8 and (S.y == 2).sum() == 8


# ------------------------------------------------------------------ DAMO
def test_pcgrad_closed_form_for_two_tasks():
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    # <g1, g2> = -1: g1 - (-1/2) g2 = (0.5, 0.5); g2 - (-1/1) g1 = (0, 1)
    assert torch.allclose(ds.pcgrad([g1, g2]), torch.tensor([0.5, 1.5]))
    d = ds.pcgrad([g1, g2])
    assert d @ g1 >= 0 and d @ g2 >= 0


def test_pcgrad_leaves_agreeing_gradients_alone():
    g = [torch.tensor([1.0, 2.0, 0.0]), torch.tensor([0.5, 0.0, 1.0]), torch.tensor([0.0, 1.0, 1.0])]
    assert torch.allclose(ds.pcgrad(g), sum(g))


def test_pcgrad_two_random_tasks_never_conflict_with_either():
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        g1, g2 = torch.randn(10, generator=gen), torch.randn(10, generator=gen)
        d = ds.pcgrad([g1, g2], gen)
        assert d @ g1 >= -1e-5 and d @ g2 >= -1e-5


def test_pcgrad_bad_input():
    with pytest.raises(ValueError, match="^grads"):
        ds.pcgrad([])
    with pytest.raises(ValueError, match="^grads"):
        ds.pcgrad([torch.zeros(3), torch.zeros(4)])
    with pytest.raises(ValueError, match="^grads"):
        ds.pcgrad([torch.tensor([float("nan"), 0.0]), torch.zeros(2)])


def test_losses_vanish_at_their_targets():
    t = torch.randn(6, 4)
    assert ds.retain_kd_loss(t, t).abs() < 1e-6
    masked = t.clone()
    masked[:, 1] = -1e4
    assert ds.forget_loss(masked, t, [1]).abs() < 1e-5
    assert ds.forget_loss(t, t, [1]) > 0
    protos = torch.randn(3, 5)
    labels = torch.tensor([0, 1, 2])
    near = ds.discrimination_loss(protos, labels, protos * 1, torch.tensor([0, 1, 2]), 0.01)
    far = ds.discrimination_loss(protos.flip(0), labels, protos, torch.tensor([0, 1, 2]), 0.01)
    assert near < far


def test_forget_classes_are_checked():
    t = torch.randn(2, 3)
    for bad in ([], [3], [0, 1, 2]):
        with pytest.raises(ValueError, match="^forget_classes"):
            ds.forget_loss(t, t, bad)
    with pytest.raises(ValueError, match="^T"):
        ds.retain_kd_loss(t, t, T=0)
    with pytest.raises(ValueError, match="^forget_classes"):
        ds.head_surgery(linear_model(), [0, 1, 2])


def test_damo_forgets_on_a_tiny_problem_and_leaves_the_teacher_alone():
    from companion.metta_class import digits

    torch.manual_seed(0)
    data = digits(seed=0)
    teacher = ds.train_classifier(data.X_train, data.y_train, steps=300, batch=128, lr=3e-3)
    before = [p.detach().clone() for p in teacher.parameters()]
    cfg = ds.SamplerConfig(0.01, momentum=0.9, rk_order=2)
    S, _ = ds.synthesize(teacher, range(10), 16, cfg, nfe_budget=40)
    retain = [k for k in range(10) if k != 3]
    buffers = [b.clone() for b in teacher.buffers()]
    student, hist = ds.damo_unlearn(teacher, S.subset(retain), S.subset([3]), [3], steps=60,
                                    self_conflict=True)
    assert len(hist["cos_RR"]) == 60
    # the student's BatchNorm statistics stay the original's (eval mode during DAMO)
    assert all(torch.equal(a, b) for a, b in zip(buffers, student.buffers()))
    scores = ds.evaluate(student, data, [3])
    base = ds.evaluate(teacher, data, [3])
    assert scores["forget acc (test)"] < 0.2
    assert scores["retain acc (test)"] > base["retain acc (test)"] - 0.05
    assert all(torch.equal(p, q) for p, q in zip(before, teacher.parameters()))
    assert len(hist["cos_RF"]) == 60
    with pytest.raises(ValueError, match="^combine"):
        ds.damo_unlearn(teacher, S.subset(retain), S.subset([3]), [3], steps=1, combine="mgda")


def test_head_surgery_masks_only_the_forget_logit():
    model = linear_model()
    x = torch.rand(20, 4)
    cut = ds.head_surgery(model, [1])
    assert (cut(x).argmax(1) != 1).all()
    assert torch.equal(cut.features(x), model.features(x))
    assert model.head.bias[1] > -1e3  # the original is untouched


# ------------------------------------------------------------------ metrics
def test_svc_mia_follows_the_member_distribution():
    class Fixed(nn.Module):
        """Logits that give the true label (label 0) a chosen confidence p = x[:, 0]."""

        def __init__(self):
            super().__init__()
            self.head = nn.Linear(1, 2)

        def forward(self, x):
            p = x[:, 0].clamp(1e-6, 1 - 1e-6)
            return torch.stack([torch.log(p), torch.log1p(-p)], 1)

    gen = torch.Generator().manual_seed(0)
    member = 0.9 + 0.1 * torch.rand(200, 1, generator=gen)
    non = 0.1 + 0.3 * torch.rand(200, 1, generator=gen)
    y = torch.zeros(200, dtype=torch.long)
    model = Fixed()
    assert ds.svc_mia(model, member, y, non, y, member[:50], y[:50]) > 0.95
    assert ds.svc_mia(model, member, y, non, y, non[:50], y[:50]) < 0.05
    with pytest.raises(ValueError, match="^X"):
        ds.svc_mia(model, member, y, non, y, torch.zeros(0, 1), y[:0])


def test_nfe_to_threshold():
    trace = {"nfe": [0, 2, 4], "energy": [torch.tensor([3.0, 5.0]), torch.tensor([1.0, 2.0]),
                                          torch.tensor([0.0, 0.0])]}
    assert ds.nfe_to_threshold(trace, 1.5) == 2
    assert ds.nfe_to_threshold(trace, -1.0) == math.inf
    with pytest.raises(ValueError, match="^trace"):
        ds.nfe_to_threshold({"nfe": [], "energy": []}, 0.0)


def test_accuracy_bad_labels():
    model = linear_model()
    with pytest.raises(ValueError, match="^y"):
        ds.accuracy(model, torch.rand(3, 4), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="^y"):
        ds.accuracy(model, torch.rand(2, 4), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="^X"):
        ds.accuracy(model, torch.rand(2, 5, 1), torch.tensor([0, 1]))


# ------------------------------------------------------------------ second pass: energy, prior, MIA
def bn_model(d=4, K=3):
    torch.manual_seed(0)
    return ds.MLP(d, (6,), K, batchnorm=True).eval()


def test_class_energy_is_the_jem_joint_energy():
    model = bn_model()
    x, y = torch.rand(7, 4), torch.tensor([0, 1, 2, 0, 1, 2, 0])
    with torch.no_grad():
        f = model(x)
        e = ds.class_energy(model, x, y)
    assert torch.allclose(e, -f.gather(1, y[:, None])[:, 0], atol=1e-5)
    lse = -torch.logsumexp(f, 1) - torch.log_softmax(f, 1).gather(1, y[:, None])[:, 0]
    assert torch.allclose(e, lse, atol=1e-6)


def test_class_energy_refuses_bad_input():
    model = bn_model()
    y = torch.tensor([0, 1])
    for bad in (float("nan"), float("inf")):
        x = torch.rand(2, 4)
        x[1, 2] = bad
        with pytest.raises(ValueError, match="^x"):
            ds.class_energy(model, x, y)
    with pytest.raises(ValueError, match="^x"):
        ds.class_energy(model, torch.zeros(0, 4), y[:0])
    with pytest.raises(ValueError, match="^x"):
        ds.class_energy(model, torch.rand(4), y)
    with pytest.raises(ValueError, match="^y"):
        ds.class_energy(model, torch.rand(2, 4), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="^y"):
        ds.class_energy(model, torch.rand(2, 4), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="^prior"):
        ds.class_energy(model, torch.rand(2, 4), y, prior=-1.0)


def test_bn_prior_vanishes_at_the_stored_statistics_and_grows_away_from_them():
    model = bn_model()
    x = torch.randn(256, 4, generator=torch.Generator().manual_seed(1))
    bn = model.features[1]
    with torch.no_grad():
        a = model.features[0](x)
        bn.running_mean.copy_(a.mean(0))
        bn.running_var.copy_(a.var(0, unbiased=False) - bn.eps)
    with torch.no_grad():
        assert float(ds.bn_prior(model, x)) < 1e-8
        assert float(ds.bn_prior(model, x + 1.0)) > 0.01
        assert float(ds.bn_prior(model, 3.0 * x)) > 0.01
        assert float(ds.bn_prior(linear_model(), x)) == 0.0  # no BatchNorm, no prior
    assert model.training is False and torch.equal(bn.running_mean, a.mean(0))


def test_model_energy_grad_adds_the_weighted_prior_and_its_gradient():
    model = bn_model()
    x, y = torch.rand(16, 4), torch.tensor([0, 1, 2, 0] * 4)
    share, grad = ds.model_energy_grad(model, y, bn_weight=2.0)(x)
    with torch.no_grad():
        want = ds.class_energy(model, x, y) + 2.0 * ds.bn_prior(model, x)
    assert torch.allclose(share, want, atol=1e-5)
    xr = x.clone().requires_grad_(True)
    u = ds.class_energy(model, xr, y).mean() + 2.0 * ds.bn_prior(model, xr)
    (g,) = torch.autograd.grad(16 * u, xr)
    assert torch.allclose(grad, g, atol=1e-5)
    with pytest.raises(ValueError, match="^bn_weight"):
        ds.model_energy_grad(model, y, bn_weight=-1.0)


def test_the_prior_keeps_synthetic_digits_in_the_data_range():
    """The review's finding: without the prior the samples sit on the faces of the box, far from
    every real digit; with it they sit near the real data (the recipe fix of the second pass)."""
    from companion.metta_class import digits

    data = digits(seed=0)
    teacher = ds.train_classifier(data.X_train, data.y_train, steps=150, seed=0)
    cfg = ds.SamplerConfig(0.01, momentum=0.9, rk_order=2)
    out = {}
    for gamma in (0.0, 10.0):
        S, _ = ds.synthesize(teacher, range(10), 10, cfg, nfe_budget=60, bn_weight=gamma)
        out[gamma] = (float(((S.x == 0) | (S.x == 1)).float().mean()),
                      ds.data_range_ranks(teacher, S.x, S.y, data.X_test, data.y_test,
                                          data.X_train))
    assert out[0.0][1]["nearest real"] > 0.999 and out[0.0][1]["energy"] < 0.01
    assert out[10.0][1]["nearest real"] < 0.995 and out[10.0][1]["energy"] > 0.005
    assert out[10.0][0] < out[0.0][0] - 0.3


def test_discrimination_loss_refuses_labels_without_a_prototype():
    protos, classes = torch.randn(3, 5), torch.tensor([0, 1, 2])
    h = torch.randn(4, 5)
    assert torch.isfinite(ds.discrimination_loss(h, torch.tensor([0, 1, 2, 0]), protos,
                                                 classes, 1.0))
    with pytest.raises(ValueError, match=r"^labels: classes \[5\] have no prototype"):
        ds.discrimination_loss(h, torch.tensor([0, 1, 5, 0]), protos, classes, 1.0)
    with pytest.raises(ValueError, match="^labels"):
        ds.discrimination_loss(h, torch.tensor([0, 1]), protos, classes, 1.0)
    with pytest.raises(ValueError, match="^labels"):
        ds.discrimination_loss(h, torch.zeros(4), protos, classes, 1.0)
    bad = h.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="^features"):
        ds.discrimination_loss(bad, torch.tensor([0, 1, 2, 0]), protos, classes, 1.0)
    with pytest.raises(ValueError, match="^prototypes"):
        ds.discrimination_loss(h, torch.tensor([0, 1, 2, 0]), torch.randn(3, 4), classes, 1.0)
    with pytest.raises(ValueError, match="^proto_classes"):
        ds.discrimination_loss(h, torch.tensor([0, 1, 2, 0]), protos, torch.tensor([0, 1]),
                               1.0)
    with pytest.raises(ValueError, match="^tau"):
        ds.discrimination_loss(h, torch.tensor([0, 1, 2, 0]), protos, classes, 0.0)


class _Margin(nn.Module):
    """Two logits whose true-label (label 0) log-odds is x[:, 0]; ``shift`` is added to logit 0."""

    def __init__(self, shift=0.0):
        super().__init__()
        self.head = nn.Linear(1, 2)
        self.shift = shift

    def forward(self, x):
        return torch.stack([x[:, 0] + self.shift, torch.zeros(len(x))], 1)


def test_logit_margin_is_the_log_odds_of_the_true_label():
    x, y = torch.tensor([[2.0], [-1.0]]), torch.tensor([0, 0])
    assert np.allclose(ds.logit_margin(_Margin(), x, y), [2.0, -1.0])
    assert np.allclose(ds.logit_margin(_Margin(), x, torch.tensor([1, 1])), [-2.0, 1.0])


def test_mia_auroc_is_one_when_members_stand_out_and_chance_when_they_do_not():
    gen = torch.Generator().manual_seed(0)
    y = torch.zeros(300, dtype=torch.long)
    member, non = 3 + torch.randn(300, 1, generator=gen), torch.randn(300, 1, generator=gen)
    same = torch.randn(300, 1, generator=gen)
    assert ds.mia_auroc(_Margin(), member, y, non, y) > 0.97
    assert abs(ds.mia_auroc(_Margin(), same, y, non, y) - 0.5) < 0.07
    # masking a logit by a constant (head surgery) does not change the ranking
    assert ds.mia_auroc(_Margin(-1e4), member, y, non, y) == ds.mia_auroc(_Margin(), member, y,
                                                                         non, y)
    with pytest.raises(ValueError, match="^X"):
        ds.mia_auroc(_Margin(), member, y, torch.zeros(0, 1), y[:0])


def test_percentile_rank_and_data_range_ranks():
    ref = np.arange(100.0)
    assert ds.percentile_rank([49.5], ref) == 0.5
    assert ds.percentile_rank([-5.0, -4.0, -3.0], ref) == 0.0
    assert ds.percentile_rank([1e3], ref) == 1.0
    with pytest.raises(ValueError, match="^values"):
        ds.percentile_rank([float("nan")], ref)
    with pytest.raises(ValueError, match="^reference"):
        ds.percentile_rank([1.0], [])
    from companion.metta_class import digits

    data = digits(seed=0)
    model = ds.train_classifier(data.X_train, data.y_train, steps=60, seed=0)
    half = len(data.X_test) // 2
    real = ds.data_range_ranks(model, data.X_test[:half], data.y_test[:half],
                               data.X_test[half:], data.y_test[half:], data.X_train)
    assert all(0.3 < v < 0.7 for v in real.values()), real  # real against real: the middle
    noise = torch.rand(100, 64, generator=torch.Generator().manual_seed(0))
    far = ds.data_range_ranks(model, noise, data.y_test[:100], data.X_test, data.y_test,
                              data.X_train)
    assert far["nearest real"] == 1.0
    with pytest.raises(ValueError, match="^y"):
        ds.data_range_ranks(model, noise, data.y_test[:99], data.X_test, data.y_test,
                            data.X_train)


def test_level_between_and_the_mean_threshold():
    assert ds.level_between(30.0, -10.0, 0.9) == pytest.approx(-6.0)
    with pytest.raises(ValueError, match="^start, target"):
        ds.level_between(-10.0, 30.0)
    with pytest.raises(ValueError, match="^start, target"):
        ds.level_between(float("nan"), 0.0)
    with pytest.raises(ValueError, match="^fraction"):
        ds.level_between(1.0, 0.0, 1.0)
    trace = {"nfe": [0, 1, 2], "energy": [torch.tensor([0.0, 10.0, 10.0]),
                                          torch.tensor([0.0, 4.0, 4.0]),
                                          torch.tensor([0.0, 2.0, 2.0])]}
    assert ds.nfe_to_threshold(trace, 3.0, "mean") == 1  # mean 2.67 after one NFE
    assert ds.nfe_to_threshold(trace, 3.0, "median") == 2  # median 4, then 2
    assert ds.nfe_to_threshold(trace, 0.5, "mean") == math.inf
    with pytest.raises(ValueError, match="^stat"):
        ds.nfe_to_threshold(trace, 2.0, "max")
    with pytest.raises(ValueError, match="^threshold"):
        ds.nfe_to_threshold(trace, float("nan"))


def test_sampler_study_runs_every_sampler_at_every_step():
    model = bn_model()
    runs = ds.sampler_study(model, {"euler": (1, 0.0), "rk2m": (2, 0.9)}, [0.01, 0.03],
                            n_per_class=4, nfe_budget=6)
    assert set(runs) == {"euler", "rk2m"} and all(set(r) == {0.01, 0.03} for r in runs.values())
    assert runs["rk2m"][0.01]["trace"]["nfe"][-1] == 6
    assert torch.equal(runs["euler"][0.01]["x0"], runs["rk2m"][0.03]["x0"])  # same starts
    with pytest.raises(ValueError, match="^samplers"):
        ds.sampler_study(model, {}, [0.01], n_per_class=4, nfe_budget=6)
    with pytest.raises(ValueError, match="^steps"):
        ds.sampler_study(model, {"euler": (1, 0.0)}, [], n_per_class=4, nfe_budget=6)
    with pytest.raises(ValueError, match="^steps"):
        ds.sampler_study(model, {"euler": (1, 0.0)}, [-0.1], n_per_class=4, nfe_budget=6)
    with pytest.raises(ValueError, match="^n_per_class"):
        ds.sampler_study(model, {"euler": (1, 0.0)}, [0.1], n_per_class=2.5, nfe_budget=6)


def test_train_classifier_schedule_and_bad_input():
    X, y = torch.rand(40, 4), torch.arange(40) % 3
    model = ds.train_classifier(X, y, n_classes=3, hidden=(8,), steps=4, batch=8, seed=0)
    assert any(isinstance(m, nn.BatchNorm1d) for m in model.modules()) and not model.training
    with pytest.raises(ValueError, match="^milestones"):
        ds.train_classifier(X, y, n_classes=3, steps=4, milestones=(1.5,))
    with pytest.raises(ValueError, match="^lr"):
        ds.train_classifier(X, y, n_classes=3, steps=4, lr=0.0)
    with pytest.raises(ValueError, match="^steps"):
        ds.train_classifier(X, y, n_classes=3, steps=2.5)
    with pytest.raises(ValueError, match="^X"):
        ds.train_classifier(torch.full((4, 4), float("nan")), y[:4], n_classes=3, steps=2)


def test_bn_prior_bad_input():
    model = bn_model()
    with pytest.raises(ValueError, match="^x"):
        ds.bn_prior(model, torch.rand(1, 4))  # one row has no batch statistics
    with pytest.raises(ValueError, match="^x"):
        ds.bn_prior(model, torch.full((3, 4), float("nan")))
    with pytest.raises(ValueError, match="^x"):
        ds.bn_prior(model, torch.rand(4))


_M = ds.MLP(4, (8,), 3)
_XD, _YD = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
_FLAGS = np.array([0, 1] * 3)
DSDA_BAD_INPUTS = [  # inputs the chapter never passes; each must be refused naming its argument
    (lambda: ds.MLP(0), "d_in"),
    (lambda: ds.MLP(4, (2.5,), 3), "hidden"),
    (lambda: ds.MLP(4, (8,), 1), "n_classes"),
    (lambda: ds.SyntheticSet(_XD, _YD[:3], torch.zeros(6, 3)), "y"),
    (lambda: ds.SyntheticSet(_XD, _YD, torch.zeros(5, 3)), "logits"),
    (lambda: ds.emmn_unlearn(_M, [7]), "forget_classes"),
    (lambda: ds.emmn_unlearn(_M, [0], impair_lr=float("nan")), "impair_lr"),
    (lambda: ds.emmn_unlearn(_M, [0], repair_lr=0.0), "repair_lr"),
    (lambda: ds.emmn_unlearn(_M, [0], penalty=-1.0), "penalty"),
    (lambda: ds.feature_probe_auroc(_M, torch.full((6, 4), float("nan")), _FLAGS, _XD, _FLAGS), "X_fit"),
    (lambda: ds.feature_probe_auroc(_M, _XD, np.zeros(6), _XD, _FLAGS), "is_forget_fit"),
    (lambda: ds.feature_probe_auroc(_M, _XD, _FLAGS, _XD, _FLAGS[:4]), "is_forget_eval"),
    (lambda: ds.finetune(_M, _XD, _YD, steps=0), "steps"),
    (lambda: ds.finetune(_M, _XD, _YD, lr=float("nan")), "lr"),
    (lambda: ds.finetune(_M, _XD, _YD, batch=0), "batch"),
    (lambda: ds.finetune(_M, _XD, torch.arange(6)), "y_r"),
    (lambda: ds.logit_margin(_M, _XD, torch.arange(6)), "y"),
    (lambda: ds.logit_margin(_M, torch.full((6, 4), float("inf")), _YD), "X"),
    (lambda: ds.noise_sets(_M, [0], 2.5), "n_per_class"),
    (lambda: ds.noise_sets(_M, [9], 2), "classes"),
    (lambda: ds.retrain(_XD, torch.tensor([0, 1, 2, 3, 4, 99])), "y"),
    (lambda: ds.retrain(torch.full((6, 4), float("nan")), _YD), "X"),
]


@pytest.mark.parametrize("call, name", DSDA_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
