"""companion.metta_class: the Metta sampler, the nets, the metrics, set operations and generation,
each pinned to a case computed by hand or by brute force, and the refusals of bad input."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal
from sklearn.covariance import LedoitWolf

import companion.metta_class as mc

torch.set_num_threads(1)


# --- the sampler ---------------------------------------------------------------------------------

def test_sampler_draws_inside_its_box_and_repeats_with_a_seed():
    s = mc.MettaSampler([0.0, -2.0], [1.0, 3.0])
    X = s.sample(2000, torch.Generator().manual_seed(0))
    assert X.shape == (2000, 2) and s.contains(X).all()
    assert torch.equal(X, s.sample(2000, torch.Generator().manual_seed(0)))
    assert abs(float(X[:, 1].mean()) - 0.5) < 0.15  # the middle of [-2, 3]
    assert s.log_density() == pytest.approx(-math.log(5.0))
    assert mc.MettaSampler.cube(64).log_density() == 0.0
    assert s.sample(0).shape == (0, 2)


def test_from_data_pads_the_bounding_box_by_ten_percent_of_its_range():
    s = mc.MettaSampler.from_data(torch.tensor([[0.0, 10.0], [2.0, 10.0]]), pad=0.1)
    # dimension 0: range 2, padded by 0.2; dimension 1 is constant: width 1, padded by 0.1
    assert torch.allclose(s.low, torch.tensor([-0.2, 9.9])) and torch.allclose(s.high, torch.tensor([2.2, 10.1]))


@pytest.mark.parametrize("X, match", [
    (torch.zeros(0, 2), "^X: expected at least one element"),
    (torch.tensor([[0.0, float("nan")]]), "^X: contains NaN or inf"),
    (torch.zeros(3), r"^X: expected 2 dimensions, got shape \(3,\)"),
    (np.zeros((3, 2)), "^X: expected a torch.Tensor"),
])
def test_from_data_refuses_bad_points(X, match):
    with pytest.raises(ValueError, match=match):
        mc.MettaSampler.from_data(X)


def test_sampler_refuses_bad_bounds():
    with pytest.raises(ValueError, match="^high: every bound must exceed low; dimension 1"):
        mc.MettaSampler([0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="^high: expected shape"):
        mc.MettaSampler([0.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="^low: the bounds must be finite"):
        mc.MettaSampler([float("nan")], [1.0])
    with pytest.raises(ValueError, match="^pad"):
        mc.MettaSampler.from_data(torch.zeros(2, 2), pad=-1)
    with pytest.raises(ValueError, match="^n: expected an integer"):
        mc.MettaSampler.cube(2).sample(-1)


# --- data ------------------------------------------------------------------------------------------

def test_the_data_are_offline_scaled_and_split():
    d = mc.digits(0)
    assert d.X_train.shape == (1257, 64) and d.X_test.shape == (540, 64)
    assert float(d.X_train.min()) == 0.0 and float(d.X_train.max()) == 1.0
    assert torch.bincount(d.y_test).min() >= 50  # stratified
    b = mc.blobs()
    assert b.X_train.shape == (6000, 2) and b.centers.shape == (3, 2)
    # every training point belongs to the blob whose centre is nearest (unit variance, far centres)
    assert float((torch.cdist(b.X_train, b.centers).argmin(1) == b.y_train).float().mean()) > 0.99


def test_shuffle_pixels_permutes_each_row_and_keeps_the_masked_pixels():
    X = torch.rand(20, 8, generator=torch.Generator().manual_seed(0))
    Y = mc.shuffle_pixels(X, torch.Generator().manual_seed(1))
    assert torch.equal(Y.sort(1).values, X.sort(1).values) and not torch.equal(X, Y)
    among = torch.tensor([True, True, True, False, False, True, False, True])
    Z = mc.shuffle_pixels(X, torch.Generator().manual_seed(1), among=among)
    assert torch.equal(Z[:, ~among], X[:, ~among])
    assert torch.equal(Z[:, among].sort(1).values, X[:, among].sort(1).values)
    with pytest.raises(ValueError, match="^among"):
        mc.shuffle_pixels(X, among=torch.ones(3, dtype=torch.bool))


# --- the nets ---------------------------------------------------------------------------------------

def _toy(n=60, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 3, generator=gen)
    return X, (X[:, 0] > 0.5).long()


def test_a_metta_net_has_one_more_output_than_classes():
    X, y = _toy()
    net = mc.train_metta_nets(X, y, 2, mc.MettaSampler.cube(3), n_metta=30, seeds=[0, 1], hidden=(8,), steps=3)
    assert net.n_members == 2 and net(X).shape == (2, 60, 3) and net.member(1)(X).shape == (60, 3)
    std = mc.train_standard_nets(X, y, 2, seeds=[0], hidden=(8,), steps=3)
    assert std(X).shape == (1, 60, 2)


def test_an_ensemble_member_is_the_mlp_of_its_seed():
    ens = mc.MLPEnsemble(3, (5, 4), 2, seeds=[7, 11])
    torch.manual_seed(11)
    ref = mc.mlp(3, (5, 4), 2)
    X = torch.rand(9, 3)
    assert torch.allclose(ens(X)[1], ref(X), atol=1e-6)
    assert torch.allclose(ens.member(1)(X), ref(X), atol=1e-6)


def test_ensemble_members_train_independently():
    X, y = _toy()
    X2, y2 = _toy(seed=5)
    runs = []
    for other in ((X, y), (X2, 1 - y2)):
        ens = mc.MLPEnsemble(3, (8,), 2, seeds=[0, 1])
        mc.train_ensemble(ens, [(X, y), other], steps=20, batch_size=16)
        runs.append(ens)
    # member 0 saw the same data and batches in both runs: changing member 1's data changes nothing
    assert torch.equal(runs[0].member(0)(X), runs[1].member(0)(X))
    assert not torch.equal(runs[0].member(1)(X), runs[1].member(1)(X))


def test_the_unary_margin_is_the_log_density_ratio_on_a_case_solved_by_hand():
    # class ~ U[0, 1/2], Metta ~ U[0, 1], equal counts: on [0, 1/2] the class density is 2, the
    # Metta density 1, so the optimal log-odds is log 2 (eq. metta-margin); beyond 1/2 it is -inf.
    X_class = torch.rand(3000, 1, generator=torch.Generator().manual_seed(0)) / 2
    net = mc.train_unary_nets([X_class], mc.MettaSampler.cube(1), n_metta=3000, hidden=(32, 32), steps=1500,
                              lr=3e-3)
    inside = mc.unary_margin(net.member(0), torch.linspace(0.1, 0.4, 31)[:, None])
    outside = mc.unary_margin(net.member(0), torch.linspace(0.6, 0.95, 31)[:, None])
    assert abs(float(inside.median()) - math.log(2)) < 0.2
    assert float(outside.max()) < -2


def test_unary_margin_of_hand_set_weights():
    net = mc.mlp(2, (), 2)  # a linear layer: f = W x + b
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1.0, 2.0], [0.5, -1.0]]))
        net[0].bias.copy_(torch.tensor([0.25, -0.25]))
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    # s = (1 - 0.5) x1 + (2 + 1) x2 + 0.5
    assert torch.allclose(mc.unary_margin(net, X), torch.tensor([1.0, 3.5, -1.5]))
    with pytest.raises(ValueError, match="^net: a unary net has 2 outputs"):
        mc.unary_margin(mc.mlp(2, (), 3), X)


def test_training_refuses_bad_input():
    X, y = _toy()
    cube = mc.MettaSampler.cube(3)
    with pytest.raises(ValueError, match=r"^y: expected indices in 0\.\.1, got 2"):
        mc.train_metta_nets(X, y + 1, 2, cube, n_metta=10, steps=1)
    with pytest.raises(ValueError, match="^n_metta: expected an integer >= 1, got 0"):
        mc.train_metta_nets(X, y, 2, cube, n_metta=0, steps=1)
    with pytest.raises(ValueError, match=r"^X: expected 2 dimensions, got shape \(60, 3, 1\)"):
        mc.train_metta_nets(X[..., None], y, 2, cube, n_metta=10, steps=1)
    with pytest.raises(ValueError, match="^sampler: draws 64-dimensional points but X has 3"):
        mc.train_metta_nets(X, y, 2, mc.MettaSampler.cube(64), n_metta=10, steps=1)
    with pytest.raises(ValueError, match="^steps"):
        mc.train_standard_nets(X, y, 2, steps=0)
    with pytest.raises(ValueError, match="^lr"):
        mc.train_standard_nets(X, y, 2, steps=1, lr=-1.0)
    with pytest.raises(ValueError, match="^classes"):
        mc.train_unary_nets([], cube, n_metta=10)
    with pytest.raises(ValueError, match="^data: expected one"):
        mc.train_ensemble(mc.MLPEnsemble(3, (4,), 2, [0, 1]), [(X, y)], steps=1)


def test_a_short_metta_training_already_claims_the_empty_space():
    b = mc.blobs(n_train=1500, n_test=30)
    box = mc.MettaSampler.from_data(b.X_train)
    net = mc.train_metta_nets(b.X_train, b.y_train, 3, box, n_metta=1500, hidden=(20, 10), steps=300)
    fresh = box.sample(2000, torch.Generator().manual_seed(3))
    assert mc.occupancy_factor(mc.predict(net.member(0), fresh), 3) < 0.5


# --- metrics ----------------------------------------------------------------------------------------

class _Constant(torch.nn.Module):
    def __init__(self, logits):
        super().__init__()
        self.logits = torch.tensor(logits)

    def forward(self, x):
        return self.logits.expand(x.shape[0], -1)


def test_occupancy_of_a_net_that_never_or_always_says_metta():
    M = torch.rand(50, 4)
    assert mc.occupancy_factor(mc.predict(_Constant([3.0, 1.0, 0.0]), M), 2) == 1.0
    assert mc.occupancy_factor(mc.predict(_Constant([0.0, 1.0, 3.0]), M), 2) == 0.0
    assert mc.occupancy_factor(torch.tensor([0, 2, 2, 1]), 2) == 0.5


def test_purity_is_the_precision_on_digits_and_metta_points_computed_by_hand():
    y = torch.tensor([0, 0, 1, 1, 2, 3, 3, 3])  # K = 3, label 3 is Metta
    pred = torch.tensor([0, 1, 1, 1, 2, 0, 2, 3])
    # class 0: predicted twice, right once; class 1: 3 times, right twice; class 2: twice, once
    assert torch.allclose(mc.purity_factors(pred, y, 3), torch.tensor([0.5, 2 / 3, 0.5], dtype=torch.float64))
    never = mc.purity_factors(torch.tensor([0, 0, 3]), torch.tensor([0, 1, 3]), 3)
    assert never[0] == 0.5 and torch.isnan(never[1:]).all()
    with pytest.raises(ValueError, match=r"^y: expected indices in 0\.\.3, got 4"):
        mc.purity_factors(pred, y + 1, 3)
    with pytest.raises(ValueError, match="^pred: expected at least one index, got none"):
        mc.purity_factors(torch.tensor([], dtype=torch.long), y[:0], 3)
    with pytest.raises(ValueError, match="^pred: expected integer indices, got dtype torch.float32"):
        mc.occupancy_factor(torch.tensor([0.5]), 1)


def test_auroc_equals_a_brute_force_count_with_ties():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 40).astype(float), rng.integers(0, 5, 30).astype(float)
    brute = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (pos.size * neg.size)
    assert mc.auroc(pos, neg) == pytest.approx(brute, abs=1e-12)
    assert mc.auroc([2.0, 3.0], [0.0, 1.0]) == 1.0 and mc.auroc([0.0], [1.0]) == 0.0
    with pytest.raises(ValueError, match="^negative: expected a non-empty"):
        mc.auroc([1.0], [])
    with pytest.raises(ValueError, match="^positive: scores must be finite"):
        mc.auroc([np.nan], [1.0])


def test_gaussian_density_matches_scipy():
    gen = torch.Generator().manual_seed(0)
    X = torch.cat([torch.randn(40, 3, generator=gen), torch.randn(20, 3, generator=gen) + 4])
    y = torch.cat([torch.zeros(40, dtype=torch.long), torch.ones(20, dtype=torch.long)])
    model = mc.GaussianDensity(X, y, 2)
    Xn, Q = X.double().numpy(), torch.rand(5, 3, generator=gen)
    ref = np.logaddexp(*[np.log(w) + multivariate_normal(Xn[y.numpy() == k].mean(0),
                                                         LedoitWolf().fit(Xn[y.numpy() == k]).covariance_)
                         .logpdf(Q.double().numpy()) for k, w in ((0, 40 / 60), (1, 20 / 60))])
    assert np.allclose(model.log_density(Q), ref, atol=1e-9)
    with pytest.raises(ValueError, match="^y: class 1 has 1 points"):
        mc.GaussianDensity(X[:41], y[:41], 2)
    with pytest.raises(ValueError, match=r"^X: expected shape \(N, 3\), got \(2, 4\)"):
        model.log_density(torch.zeros(2, 4))


def test_scores_of_one_net_and_of_an_ensemble():
    net = _Constant([0.0, 0.0, math.log(2.0)])
    X = torch.zeros(4, 2)
    assert torch.allclose(mc.metta_probability(net, X), torch.full((4,), 0.5))
    assert torch.allclose(mc.max_softmax(net, X), torch.full((4,), 0.5))
    ens = mc.MLPEnsemble(2, (3,), 3, seeds=[0, 1])
    assert mc.predict(ens, X).shape == (2, 4) and mc.metta_probability(ens, X).shape == (2, 4)


# --- set operations ---------------------------------------------------------------------------------

def test_set_operations_on_small_memberships():
    a = mc.membership(torch.tensor([1.0, -1.0, 2.0, -3.0]))
    b = mc.membership(torch.tensor([-1.0, -1.0, 0.5, 4.0]))
    assert a.tolist() == [True, False, True, False]
    assert mc.union(a, b).tolist() == [True, False, True, True]
    assert mc.complement(a).tolist() == [False, True, False, True]
    assert mc.agreement(a, b) == 0.5
    assert mc.overlap_rate(a, b) == pytest.approx(1 / 3)  # both at index 2, either at 0, 2, 3
    assert mc.overlap_rate(a & ~a, a & ~a) == 0.0
    with pytest.raises(ValueError, match="^b: expected shape"):
        mc.agreement(a, b[:3])
    with pytest.raises(ValueError, match="^memberships: expected shape"):
        mc.union(a, b[:2])
    with pytest.raises(ValueError, match="^m: expected a non-empty 1-D bool tensor"):
        mc.complement(torch.tensor([1, 0]))
    with pytest.raises(ValueError, match="^scores: margins must be finite"):
        mc.membership(torch.tensor([float("nan")]))


# --- generation ---------------------------------------------------------------------------------

def _linear():
    net = torch.nn.Linear(3, 2)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, 0.0]]))
        net.bias.zero_()
    return net


def test_ascent_on_a_linear_model_is_exact_and_stays_in_the_box():
    net, x0 = _linear(), torch.full((2, 3), 0.5)
    x = mc.ascend(net, x0, 0, steps=4, step_size=0.05)
    # the gradient of logit 0 is w_0 everywhere: x0 + 4 * 0.05 * w_0, clipped to [0, 1]
    assert torch.allclose(x, (x0 + 0.2 * net.weight[0]).clamp(0, 1).detach())
    assert torch.equal(x0, torch.full((2, 3), 0.5))  # x0 is not modified
    far = mc.ascend(net, x0, 0, steps=100, step_size=0.05)
    assert far.min() >= 0 and far.max() <= 1 and far[0].tolist() == [1.0, 0.0, 1.0]
    free = mc.ascend(net, x0, 0, steps=100, step_size=0.05, clamp=None)
    assert free.max() > 1  # the paper's unclamped ascent leaves the cube
    with torch.no_grad():
        logits = [float(net(mc.ascend(net, x0, 0, steps=t, step_size=0.05))[0, 0]) for t in range(20)]
    assert all(b >= a - 1e-7 for a, b in zip(logits, logits[1:]))
    per_row = mc.ascend(net, x0, torch.tensor([0, 1]), steps=2, step_size=0.1)
    assert torch.allclose(per_row[1], (x0[1] + 0.2 * net.weight[1]).detach())


def test_ascent_refuses_bad_class_indices():
    net, x0 = _linear(), torch.rand(2, 3)
    for bad, match in [(2, r"labels must lie in 0\.\.1"), (-1, r"labels must lie in 0\.\.1"),
                       (0.5, "expected an integer"), (torch.tensor([0, 1, 1]), "expected 2 labels")]:
        with pytest.raises(ValueError, match=f"^class_index: {match}"):
            mc.ascend(net, x0, bad)
    with pytest.raises(ValueError, match="^clamp"):
        mc.ascend(net, x0, 0, clamp=(1.0, 0.0))
    with pytest.raises(ValueError, match="^step_size"):
        mc.ascend(net, x0, 0, step_size=0)


# --- second pass: inputs no net is trained on, the official weight decay, input checks -------------

def test_glyphs_are_made_like_the_digits_and_repeat_with_a_seed():
    X, index = mc.render_glyphs("08A", fonts=("DejaVuSans", "cmr10"), n_variants=2, seed=3)
    assert X.shape == (12, 64) and X.dtype == torch.float32 and index.tolist() == [0, 0, 1, 1, 2, 2] * 2
    assert float(X.min()) >= 0 and float(X.max()) == 1.0
    # 4x4 blocks of a binary bitmap: every value is a count / 16
    assert torch.equal(X * 16, (X * 16).round())
    assert torch.equal(X, mc.render_glyphs("08A", fonts=("DejaVuSans", "cmr10"), n_variants=2, seed=3)[0])
    assert not torch.equal(X, mc.render_glyphs("08A", fonts=("DejaVuSans", "cmr10"), n_variants=2, seed=4)[0])
    assert (X.reshape(-1, 8, 8).sum((1, 2)) > 4).all()  # every glyph has ink
    assert len(mc.FONTS) == 16 and mc.render_glyphs("1")[0].shape == (32, 64)


@pytest.mark.parametrize("kw, match", [
    (dict(chars=""), "^chars: expected a non-empty string"),
    (dict(chars=3), "^chars: expected a non-empty string"),
    (dict(chars="1", fonts=("NoSuchFont",)), "^fonts: expected names of matplotlib's bundled fonts"),
    (dict(chars="1", fonts=()), "^fonts: expected names"),
    (dict(chars="1", n_variants=0), "^n_variants: expected an integer >= 1"),
    (dict(chars="1", n_variants=1.5), "^n_variants: expected an integer"),
])
def test_render_glyphs_refuses_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        mc.render_glyphs(**kw)


def test_random_strokes_have_ink_in_block_counts_and_repeat():
    S = mc.random_strokes(25, seed=1)
    assert S.shape == (25, 64) and float(S.min()) >= 0 and float(S.max()) <= 1
    assert torch.equal(S * 16, (S * 16).round()) and (S.sum(1) > 1).all()
    assert torch.equal(S, mc.random_strokes(25, seed=1)) and not torch.equal(S, mc.random_strokes(25, seed=2))
    for bad in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="^n: expected an integer"):
            mc.random_strokes(bad)


def test_interpolations_join_two_different_classes():
    X = torch.eye(4)  # one point per class, a one-hot row
    y = torch.tensor([0, 1, 2, 3])
    M = mc.interpolate_classes(X, y, 200, torch.Generator().manual_seed(0))
    assert M.shape == (200, 4)
    # each midpoint is (e_a + e_b) / 2 with a != b: two entries of 0.5, never one entry of 1
    assert torch.equal((M == 0.5).sum(1), torch.full((200,), 2)) and torch.equal(M.sum(1), torch.ones(200))
    W = mc.interpolate_classes(X, y, 50, torch.Generator().manual_seed(0), weight=0.25)
    assert set(W.unique().tolist()) == {0.0, 0.25, 0.75}
    with pytest.raises(ValueError, match="^y: expected at least two classes"):
        mc.interpolate_classes(X, torch.zeros(4, dtype=torch.long), 5)
    with pytest.raises(ValueError, match=r"^weight: expected a number in \(0, 1\)"):
        mc.interpolate_classes(X, y, 5, weight=1.0)
    with pytest.raises(ValueError, match=r"^y: expected 4 indices \(one per row\), got 3"):
        mc.interpolate_classes(X, y[:3], 5)
    with pytest.raises(ValueError, match="^X: contains NaN or inf"):
        mc.interpolate_classes(X * float("nan"), y, 5)


def test_a_quarter_turn_is_a_rotation_by_ninety_degrees():
    X = torch.arange(2 * 64, dtype=torch.float32).reshape(2, 64)
    T = mc.quarter_turn(X, 8, torch.Generator().manual_seed(0)).reshape(2, 8, 8)
    img = X.reshape(2, 8, 8)
    for i in range(2):
        assert torch.equal(T[i], torch.rot90(img[i], 1)) or torch.equal(T[i], torch.rot90(img[i], -1))
    with pytest.raises(ValueError, match=r"^X: expected 64 pixels per row \(8 x 8\), got 63"):
        mc.quarter_turn(torch.zeros(2, 63))


def test_overlapping_blobs_overlap_and_refuse_a_bad_separation():
    ob = mc.overlapping_blobs(separation=2.0)
    assert ob.X_train.shape == (6000, 2) and torch.allclose(ob.centers[1], torch.tensor([2.0, 0.0]))
    near = torch.cdist(ob.X_train, ob.centers).argmin(1) == ob.y_train
    assert float(near[ob.y_train <= 1].float().mean()) < 0.9  # classes 0 and 1 share ground
    assert float(near[ob.y_train == 2].float().mean()) > 0.99
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="^separation"):
            mc.overlapping_blobs(separation=bad)


def _weight_norm(ens):
    return sum(float(W.detach().pow(2).sum()) for W in ens.weights)


def test_weight_decay_and_the_official_sgd_optimiser():
    X, y = _toy()
    norms = {}
    for wd in (0.0, 0.5):
        ens = mc.MLPEnsemble(3, (8,), 2, seeds=[0])
        mc.train_ensemble(ens, [(X, y)], steps=200, batch_size=16, weight_decay=wd)
        norms[wd] = _weight_norm(ens)
    assert norms[0.5] < 0.5 * norms[0.0]  # L2 shrinks the weights
    # SGD with weight decay, no data gradient (lr * wd per step): theta_t = (1 - lr wd)^t theta_0
    ens = mc.MLPEnsemble(3, (8,), 2, seeds=[0])
    start = [W.detach().clone() for W in ens.weights]
    zero = _ZeroLoss(ens)
    mc.train_ensemble(zero, [(X, y)], steps=10, batch_size=4, lr=0.1, weight_decay=0.2, optimizer="sgd")
    for W0, W in zip(start, ens.weights):
        assert torch.allclose(W.detach(), W0 * 0.98 ** 10, atol=1e-6)
    for bad, match in [(-1.0, "^weight_decay"), (float("nan"), "^weight_decay"), (True, "^weight_decay"),
                       ("sgd", "^weight_decay")]:
        with pytest.raises(ValueError, match=match):
            mc.train_ensemble(mc.MLPEnsemble(3, (4,), 2, [0]), [(X, y)], steps=1, weight_decay=bad)
    with pytest.raises(ValueError, match="^optimizer: expected one of 'adam', 'sgd'"):
        mc.train_ensemble(mc.MLPEnsemble(3, (4,), 2, [0]), [(X, y)], steps=1, optimizer="rmsprop")


class _ZeroLoss(mc.MLPEnsemble):
    """The ensemble's logits times zero: the loss has no gradient, so only weight decay moves it."""

    def __init__(self, ens):
        torch.nn.Module.__init__(self)
        self.d_in, self.hidden, self.n_out = ens.d_in, ens.hidden, ens.n_out
        self.weights, self.biases = ens.weights, ens.biases

    def forward(self, x):
        return super().forward(torch.zeros_like(x)) * 0.0


def test_training_refuses_data_outside_the_samplers_box():
    d = mc.digits(0)
    cube = mc.MettaSampler.cube(64)
    raw = d.X_train * 16  # the pitfall: pixels 0..16 beside a Metta class drawn from [0, 1]
    with pytest.raises(ValueError, match=r"^X: \d+ of 1257 points lie outside the sampler's box \[0, 1\] "
                                         r"\(data range 0\.\.16\); scale the data into U"):
        mc.train_metta_nets(raw, d.y_train, 10, cube, n_metta=10, steps=1)
    with pytest.raises(ValueError, match="^classes: .* outside the sampler's box"):
        mc.train_unary_nets([d.X_train[:5], raw[:5]], cube, n_metta=10, steps=1)
    b = mc.blobs(n_train=300, n_test=30)
    with pytest.raises(ValueError, match="^X: .* outside the sampler's box"):  # a box of other data
        mc.train_metta_nets(b.X_train, b.y_train, 3, mc.MettaSampler.from_data(b.X_train[b.y_train == 0]),
                            n_metta=10, steps=1)


def test_unary_nets_take_one_sampler_per_class():
    a, b = torch.rand(20, 2), torch.rand(20, 2) * 10
    boxes = [mc.MettaSampler.cube(2), mc.MettaSampler.cube(2, 0.0, 10.0)]
    net = mc.train_unary_nets([a, b], boxes, n_metta=30, hidden=(4,), steps=2)
    assert net.n_members == 2
    with pytest.raises(ValueError, match=r"^sampler: expected one sampler or one per class \(2\), got 3"):
        mc.train_unary_nets([a, b], boxes + boxes[:1], n_metta=30, steps=1)
    with pytest.raises(ValueError, match="^classes: expected the same number of features"):
        mc.train_unary_nets([a, torch.rand(5, 3)], mc.MettaSampler.cube(2), n_metta=30, steps=1)


def test_occupancy_and_purity_refuse_labels_outside_0_to_k():
    # K = 2 real classes and the Metta label 2: a prediction 5 or -1 is no output of such a net
    with pytest.raises(ValueError, match=r"^pred: expected indices in 0\.\.2, got 5"):
        mc.occupancy_factor(torch.tensor([0, 2, 5]), 2)
    with pytest.raises(ValueError, match=r"^pred: expected indices in 0\.\.2, got -1"):
        mc.occupancy_factor(torch.tensor([-1, 2]), 2)
    with pytest.raises(ValueError, match=r"^pred: expected indices in 0\.\.3, got 4"):
        mc.purity_factors(torch.tensor([0, 4, 1]), torch.tensor([0, 1, 3]), 3)
    with pytest.raises(ValueError, match=r"^pred: expected indices in 0\.\.3, got -2"):
        mc.purity_factors(torch.tensor([0, -2, 1]), torch.tensor([0, 1, 3]), 3)
    with pytest.raises(ValueError, match=r"^pred: expected 1 dimension of indices, got shape \(1, 2\)"):
        mc.occupancy_factor(torch.tensor([[0, 1]]), 2)


def test_ascent_refuses_a_start_outside_its_clamp_box():
    net = _linear()
    with pytest.raises(ValueError, match=r"^x0: the ascent starts in its clamp box \[0, 1\]"):
        mc.ascend(net, torch.full((2, 3), 16.0), 0)  # digits not divided by 16
    with pytest.raises(ValueError, match=r"^x0: the ascent starts in its clamp box \[-1, 1\]"):
        mc.ascend(net, torch.full((2, 3), -2.0), 0, clamp=(-1.0, 1.0))
    with pytest.raises(ValueError, match="^x0: contains NaN or inf"):
        mc.ascend(net, torch.full((2, 3), float("nan")), 0)
    with pytest.raises(ValueError, match=r"^x0: expected 2 dimensions, got shape \(3,\)"):
        mc.ascend(net, torch.zeros(3), 0)
    assert mc.ascend(net, torch.full((2, 3), 16.0), 0, steps=1, clamp=None).shape == (2, 3)


_NET = torch.nn.Sequential(torch.nn.Linear(2, 3))
_LONG = torch.zeros(3, dtype=torch.long)
METTA_BAD_INPUTS = [  # inputs the chapter never passes; each must be refused naming its argument
    (lambda: mc.Dataset(torch.zeros(3, 2), _LONG[:2], torch.zeros(3, 2), _LONG, 2), "y_train"),
    (lambda: mc.Dataset(torch.zeros(3, 2), _LONG, torch.zeros(3, 5), _LONG, 2), "X_test"),
    (lambda: mc.Dataset(torch.zeros(3, 2), _LONG, torch.zeros(3, 2), _LONG, 1), "n_classes"),
    (lambda: mc.blobs(0, 10), "n_train"),
    (lambda: mc.digits(test_size=1.5), "test_size"),
    (lambda: mc.max_softmax(_NET, torch.full((3, 2), float("nan"))), "X"),
    (lambda: mc.metta_probability(_NET, torch.full((3, 2), float("inf"))), "X"),
    (lambda: mc.overlap_rate(torch.zeros(3, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)), "b"),
]


@pytest.mark.parametrize("call, name", METTA_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument_table(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


def test_official_recipe_trains_the_saved_nets_and_its_checkpoint_loads_back(tmp_path):
    from companion.checkpoints import provenance, save_checkpoint
    from companion.metta_class import train as T

    assert mc.steps_per_epoch(13_827, 256) == 55 and mc.steps_per_epoch(1257, 256) == 5
    tiny = dict(mc.RECIPES["quick"], seeds=[3, 4], hidden=[8], epochs=2, save_at=[1, 2], log_every=1,
                ablations={"weight decay 0": dict(weight_decay=0.0, epochs=1),
                           "wider": dict(hidden=[16], epochs=1)})
    modules, history = mc.train_official(tiny)
    assert sorted(modules) == sorted(["metta_e1", "metta_e2", "standard_e1", "standard_e2", "ablation0_metta_e1",
                                      "ablation0_standard_e1", "ablation1_metta_e1", "ablation1_standard_e1"])
    assert [row["epoch"] for row in history["metta"]] == [0, 1, 2] and len(history["standard"][0]["test_accuracy"]) == 2
    path = save_checkpoint(modules, tmp_path / "official-sgd.pt",
                           provenance(command="test", recipe=tiny, seconds=1.0, device="cpu", history=history))
    nets, meta = mc.load_official_nets(path)
    assert nets[("metta", 2)].n_members == 2 and nets[("wider", "standard")].hidden == (16,)
    X = torch.rand(5, 64)
    assert torch.equal(nets[("metta", 1)](X), modules["metta_e1"](X))
    assert T.CHECKPOINTS.name == "checkpoints"


def test_official_recipe_refuses_bad_input(tmp_path):
    with pytest.raises(ValueError, match="^recipe: expected a dict"):
        mc.train_official({"seeds": [0]})
    with pytest.raises(ValueError, match="^path"):
        mc.load_official_nets(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="^batch_size: expected an integer >= 1"):
        mc.steps_per_epoch(10, 0)
    with pytest.raises(ValueError, match="^n: expected an integer >= 1"):
        mc.steps_per_epoch(2.5, 3)


def test_head_keeps_the_first_members_and_refuses_bad_counts():
    ens = mc.MLPEnsemble(3, (4,), 2, [0, 1, 2])
    X = torch.rand(6, 3)
    assert torch.equal(ens.head(2)(X), ens(X)[:2])
    with pytest.raises(ValueError, match="^n: expected at most 3 members, got 4"):
        ens.head(4)
    with pytest.raises(ValueError, match="^n: expected an integer >= 1"):
        ens.head(0)
    with pytest.raises(ValueError, match="^split_seed: expected an integer >= 0"):
        mc.official_nets(-1)


def test_the_shipped_checkpoint_is_the_recipe_of_the_training_module():
    nets, meta = mc.load_official_nets()
    assert meta["recipe"] == mc.RECIPES["quick"]
    assert meta["command"] == "python -m companion.metta_class.train --scale quick"
    final = meta["recipe"]["epochs"]
    assert nets[("metta", final)].n_members == 5 and nets[("standard", final)].n_out == 10
    assert nets[("official widths 640-320-110", "metta")].hidden == (640, 320, 110)
    last = meta["history"]["metta"][-1]
    assert last["epoch"] == final and len(last["test_accuracy"]) == 5
