"""Unit tests of companion.species_range: the method pinned to independent references."""

import itertools

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score

import companion.species_range as sr
from companion.exercises import species_range as ex


def test_encoding_by_hand():
    got = sr.sincos_encode(torch.tensor([[90.0, 30.0], [-180.0, 0.0]]))
    # [sin(pi lon/180), sin(pi lat/90), cos(pi lon/180), cos(pi lat/90)]
    want = [[1.0, np.sqrt(3) / 2, 0.0, 0.5], [0.0, 0.0, -1.0, 1.0]]
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float32), atol=1e-6)


def test_fibonacci_sphere_area_uniform_and_unit_vectors():
    ll = sr.fibonacci_sphere(4000)
    assert abs((ll[:, 1] > 0).mean() - 0.5) < 0.02
    assert abs((np.abs(ll[:, 1]) > 30).mean() - 0.5) < 0.02  # sin(30 deg) = 1/2 of the area
    u = sr.lonlat_to_unit(torch.tensor(ll))
    assert torch.allclose(u.norm(dim=1), torch.ones(len(ll), dtype=u.dtype))


def _loss_brute(F, R, W, species, lam, eps=1e-5):
    B = len(species)
    total = 0.0
    for a, b in itertools.product(range(B), range(B)):
        p = 1 / (1 + np.exp(-float(F[a] @ W[b])))
        q = 1 / (1 + np.exp(-float(R[a] @ W[b])))
        if a == b:
            total += -lam * np.log(p + eps)
        elif species[a] != species[b]:
            total += -np.log(1 - p + eps)
        total += -np.log(1 - q + eps)
    return total / B**2


def test_an_full_loss_matches_brute_force_and_masks_same_species():
    gen = torch.Generator().manual_seed(0)
    F, R, W = (torch.randn(5, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    species = torch.tensor([0, 0, 1, 2, 2])
    got = float(sr.an_full_loss(F, R, W, species, 7.0))
    assert got == pytest.approx(_loss_brute(F, R, W, species, 7.0), rel=1e-10)
    # the pair (a=1, b=0) is the same species: its location feature gets no gradient from w_0
    F = F.clone().requires_grad_(True)
    W0 = W.clone()
    W0[2:] = 0.0  # leave only species 0's embeddings active for locations 0, 1
    sr.an_full_loss(F, torch.zeros_like(R), W0, species, 1.0).backward()
    grad_pos = F.grad[1].clone()
    P = torch.sigmoid(F[1] @ W0[1])
    assert torch.allclose(grad_pos, -(1 - P) * W0[1] / 25, atol=1e-6)


def test_average_precision_matches_sklearn_and_handles_ties():
    rng = np.random.default_rng(0)
    for _ in range(20):
        y = rng.random(50) < 0.2
        y[0] = True
        s = np.round(rng.normal(size=50), 1)  # many ties
        assert sr.average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    assert sr.average_precision([1, 0, 0], [3.0, 2.0, 1.0]) == 1.0
    assert sr.average_precision([0, 0, 1], [1.0, 1.0, 1.0]) == pytest.approx(1 / 3)


def test_fit_sinr_lr_matches_sklearn():
    rng = np.random.default_rng(1)
    ctx, bg = rng.normal(size=(4, 6)) + 1.0, rng.normal(size=(200, 6))
    w, b = sr.fit_sinr_lr(ctx, bg)
    X, y = np.concatenate([ctx, bg]), np.r_[np.ones(4), np.zeros(200)]
    ref = LogisticRegression(C=1.0, class_weight="balanced", tol=1e-12, max_iter=10000).fit(X, y)
    assert np.allclose(w, ref.coef_[0], atol=1e-5) and b == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_kde_by_hand():
    ctx = torch.tensor([[0.0, 0.0]])
    cells = torch.tensor([[0.0, 0.0], [90.0, 0.0]])
    got = sr.kde_scores(ctx, cells, bw_km=sr.EARTH_KM)  # kappa = 1
    assert torch.allclose(got, torch.tensor([1.0, np.exp(-1.0)], dtype=torch.float32), atol=1e-6)


def test_set_encoder_permutation_and_padding_invariant():
    torch.manual_seed(0)
    model = sr.FSSINR(sr.LocationEncoder(16, 1)).eval()
    ctx = torch.tensor([[[10.0, 5.0], [-40.0, 20.0], [100.0, -30.0]]])
    none = torch.zeros(1, 3, dtype=torch.bool)
    w = model.species_embedding(ctx, none)
    assert torch.allclose(w, model.species_embedding(ctx[:, [2, 0, 1]], none), atol=1e-5)
    padded = torch.cat([ctx, torch.zeros(1, 2, 2)], dim=1)
    mask = torch.tensor([[False, False, False, True, True]])
    assert torch.allclose(w, model.species_embedding(padded, mask), atol=1e-5)


def test_globe_generator():
    g = sr.make_globe(400, 10, 3, seed=2, jitter_km=0.0)
    assert g.ranges.any(1).all() and not (g.ranges & ~g.land).any()
    cell = {tuple(c): i for i, c in enumerate(g.cells_ll)}
    assert all(g.ranges[s, cell[tuple(o)]] for s in range(13) for o in g.obs[s])
    again = sr.make_globe(400, 10, 3, seed=2, jitter_km=0.0)
    assert np.array_equal(g.ranges, again.ranges)


@pytest.mark.parametrize("call, name", [
    (lambda: sr.sincos_encode(torch.tensor([[200.0, 0.0]])), "ll"),
    (lambda: sr.sincos_encode(torch.tensor([[float("nan"), 0.0]])), "ll"),
    (lambda: sr.sincos_encode(torch.zeros(3, 3)), "ll"),
    (lambda: sr.FSSINR(sr.LocationEncoder(8, 1)).species_embedding(
        torch.zeros(2, 3, 2), torch.zeros(2, 4, dtype=torch.bool)), "ctx_mask"),
    (lambda: sr.an_full_loss(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2),
                             torch.arange(4)), "species"),
    (lambda: sr.an_full_loss(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2),
                             torch.arange(3), pos_weight=0.0), "pos_weight"),
    (lambda: sr.average_precision([0, 0], [1.0, 2.0]), "y_true"),
    (lambda: sr.average_precision([1, 0], [1.0]), "scores"),
    (lambda: sr.kde_scores(torch.zeros(1, 2), torch.zeros(1, 2), -1.0), "bw_km"),
    (lambda: sr.fit_sinr_lr(np.zeros((0, 3)), np.zeros((5, 3))), "feat_ctx"),
    (lambda: sr.make_globe(n_cells=10), "n_cells"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_checkers_accept_the_reference_and_explain_mistakes():
    assert ex.check_an_full(sr.an_full_loss).score == 2
    assert ex.check_average_precision(sr.average_precision).score == 2

    def no_mask(F, R, W, species, lam):
        return sr.an_full_loss(F, R, W, torch.arange(len(species)), lam)

    report = ex.check_an_full(no_mask)
    assert report.score == 0 and "same" in " ".join(report.problems)

    def every_rank(y, s):
        ranked = np.asarray(y)[np.argsort(-np.asarray(s), kind="stable")]
        return float(np.mean(np.cumsum(ranked) / np.arange(1, len(ranked) + 1)))

    report = ex.check_average_precision(every_rank)
    assert report.score == 0 and "every rank" in " ".join(report.problems)


# --- issue 49: bad input refused, naming the argument --------------------------------------------

def _feats(b=4, d=3, fill=0.0):
    return torch.full((b, d), fill)


_SP = torch.arange(4)
_NAN = float("nan")

SPECIES_RANGE_BAD_INPUTS = [
    (lambda **kw: sr.an_full_loss(bg_feat=_feats(), w=_feats(), species=_SP, **kw), dict(loc_feat=_feats(fill=_NAN)),
     "loc_feat"),
    (lambda **kw: sr.an_full_loss(loc_feat=_feats(), w=_feats(), species=_SP, **kw), dict(bg_feat=_feats(fill=_NAN)),
     "bg_feat"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), species=_SP, **kw), dict(w=_feats(fill=float("inf"))), "w"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), _SP, **kw), dict(pos_weight=_NAN), "pos_weight"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), _SP, **kw), dict(pos_weight=-1.0), "pos_weight"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), **kw), dict(species=torch.arange(3)), "species"),
    (lambda **kw: sr.an_full_loss(_feats(0), _feats(0), _feats(0), **kw), dict(species=torch.arange(0)), "loc_feat"),
    (lambda **kw: sr.fit_sinr_lr(feat_bg=np.zeros((5, 3)), **kw), dict(feat_ctx=np.full((2, 3), np.nan)), "feat_ctx"),
    (lambda **kw: sr.fit_sinr_lr(feat_ctx=np.zeros((2, 3)), **kw), dict(feat_bg=np.full((5, 3), np.inf)), "feat_bg"),
    (lambda **kw: sr.fit_sinr_lr(feat_ctx=np.zeros((2, 3)), **kw), dict(feat_bg=np.zeros((0, 3))), "feat_bg"),
    (lambda **kw: sr.fit_sinr_lr(np.zeros((2, 3)), np.zeros((5, 3)), **kw), dict(C=_NAN), "C"),
    (lambda **kw: sr.fit_sinr_lr(np.zeros((2, 3)), np.zeros((5, 3)), **kw), dict(iters=0), "iters"),
    (lambda **kw: sr.kde_scores(np.zeros((1, 2)), np.zeros((3, 2)), **kw), dict(bw_km=_NAN), "bw_km"),
    (lambda **kw: sr.kde_scores(np.zeros((1, 2)), np.zeros((3, 2)), **kw), dict(bw_km=0.0), "bw_km"),
    (lambda **kw: sr.kde_scores(cells_ll=np.zeros((3, 2)), bw_km=100.0, **kw), dict(ctx_ll=np.full((1, 2), np.nan)),
     "ll"),
    (lambda **kw: sr.fibonacci_sphere(**kw), dict(n=2.5), "n"),
    (lambda **kw: sr.fibonacci_sphere(**kw), dict(n=0), "n"),
    (lambda **kw: sr.sample_background(gen=torch.Generator().manual_seed(0), **kw), dict(n=1.5), "n"),
    (lambda **kw: sr.lonlat_to_unit(**kw), dict(ll=np.array([[200.0, 0.0]])), "ll"),
    (lambda **kw: sr.sincos_encode(**kw), dict(ll=np.zeros((3, 3))), "ll"),
    (lambda **kw: sr.average_precision(y_true=[1, 0], **kw), dict(scores=[0.5, np.nan]), "scores"),
    (lambda **kw: sr.average_precision(scores=[0.5, 0.2], **kw), dict(y_true=[0, 0]), "y_true"),
    (lambda **kw: sr.average_precision(scores=[0.5, 0.2], **kw), dict(y_true=[0.5, 1]), "y_true"),
    # issue 49, through companion.validation: float or bool species ids, integer features, a list,
    # bools as numbers, inf coordinates, a fractional width
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), **kw), dict(species=torch.tensor([0.0, 1, 2, 3])),
     "species: expected integer indices"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), **kw), dict(species=[0, 1, 2, 3]),
     "species: expected a tensor"),
    (lambda **kw: sr.an_full_loss(bg_feat=_feats(), w=_feats(), species=_SP, **kw),
     dict(loc_feat=torch.zeros(4, 3, dtype=torch.long)), "loc_feat: expected a floating-point tensor"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), _SP, **kw), dict(pos_weight=True),
     "pos_weight: expected a finite real number"),
    (lambda **kw: sr.an_full_loss(_feats(), _feats(), _feats(), _SP, **kw), dict(eps=_NAN), "eps: expected a finite"),
    (lambda **kw: sr.kde_scores(np.zeros((1, 2)), np.zeros((3, 2)), **kw), dict(bw_km=True), "bw_km: expected a finite"),
    (lambda **kw: sr.sincos_encode(**kw), dict(ll=np.array([[np.inf, 0.0]])), "ll: contains NaN or inf"),
    (lambda **kw: sr.LocationEncoder(**kw), dict(width=2.5), "width: expected an integer"),
    (lambda **kw: sr.LocationEncoder(**kw), dict(depth=-1), "depth: expected an integer >= 0"),
    (lambda **kw: sr.LocationEncoder(**kw), dict(dropout=_NAN), "dropout: expected a number in"),
    (lambda **kw: sr.make_globe(**kw), dict(jitter_km=-1.0), "jitter_km: expected a finite number >= 0"),
    (lambda **kw: sr.fit_sinr_lr(np.zeros((2, 3)), np.zeros((5, 3)), **kw), dict(C=True), "C: expected a finite"),
]


@pytest.mark.parametrize("fn, kwargs, name", SPECIES_RANGE_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


# --- issue 39: the real land mask, the official optimiser, the new baselines ----------------------

def test_real_land_mask_knows_the_continents():
    pts = np.array([[2.35, 48.86], [-30.0, 0.0], [-100.0, 40.0], [160.0, -30.0], [0.0, -80.0]])
    assert sr.real_land(pts).tolist() == [True, False, True, False, False]  # Antarctica left out


def test_globe_lies_on_real_land_with_four_covariates_and_coastal_towns():
    g = sr.make_globe(1500, 12, 3, seed=3)
    assert not (g.ranges & ~sr.real_land(g.cells_ll)).any() and g.ranges.any(1).all()
    assert g.cov.shape == (1500, len(sr.COV_NAMES)) == (1500, 4)
    assert np.allclose(g.cov[g.land].mean(0), 0, atol=1e-9)
    assert sr.real_land(g.towns).all()
    # towns sit closer to the sea than land cells do on average (effort biased to coasts)
    town_cells = [int(np.argmin(np.abs(g.cells_ll - t).sum(1))) for t in g.towns]
    assert g.coast_km[town_cells].mean() < g.coast_km[g.land].mean()


def test_schedule_warms_up_then_decays_per_official_epoch():
    opt = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=1.0)
    sched = sr._schedule(opt, steps=100, warmup=10, decay=0.5, decay_epochs=4)
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[24] == pytest.approx(1.0) and lrs[25] == pytest.approx(0.5) and lrs[99] == pytest.approx(0.125)


def test_training_paths_run_keep_the_loss_and_the_snapshots():
    g = sr.make_globe(600, 12, 3, seed=4)
    sinr = sr.train_sinr(g, width=16, depth=1, steps=6, batch=32, warmup=2)
    assert len(sinr.history["loss"]) == 6 and np.isfinite(sinr.history["loss"]).all()
    # SINR's official dropout (0.5) reaches the residual blocks
    half = sr.train_sinr(g, width=16, depth=1, steps=1, batch=32, warmup=1, dropout=0.5)
    assert [m.p for m in half.enc.modules() if isinstance(m, torch.nn.Dropout)] == [0.5]
    fs = sr.train_fssinr(g, sinr, steps=5, batch=8, warmup=2, snapshots={3}, n_layers=1, ffn=16)
    assert len(fs.history["loss"]) == 5 and list(fs.history["snapshots"]) == [3]
    assert not fs.training
    # FS-SINR starts from SINR's location encoder
    fresh = sr.train_fssinr(g, sinr, steps=1, batch=8, warmup=1, lr=1e-12, n_layers=1, ffn=16)
    for a, b in zip(fresh.enc.state_dict().values(), sinr.enc.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6)


def test_episodes_exclude_the_target_and_give_singletons_no_context():
    counts, starts = np.array([1, 5]), np.array([0, 1])
    rng = np.random.default_rng(0)
    ctx, mask = sr._episodes(counts, starts, [(0, 0), (3, 1)], 20, True, rng)
    assert mask[0].all()  # a species seen once: empty context, as the official loader
    used = ctx[1][~mask[1]].tolist()
    assert sorted(used) == [1, 2, 4, 5] and 3 not in used


def test_fssinr_scores_with_no_context_gives_one_map_for_all_species():
    torch.manual_seed(0)
    model = sr.FSSINR(sr.LocationEncoder(16, 1)).eval()
    cells = sr.fibonacci_sphere(50)
    p = sr.fssinr_scores(model, np.zeros((3, 0, 2)), cells)
    assert p.shape == (3, 50) and torch.allclose(p[0], p[2])


def test_covariate_features_prior_and_trend():
    cov = np.random.default_rng(0).normal(size=(40, 4))
    f = sr.covariate_features(cov)
    assert f.shape == (40, 8) and np.allclose(f.mean(0), 0) and np.allclose(f.std(0), 1)
    assert np.allclose(f[:, 4] * (cov[:, 0] ** 2).std() + (cov[:, 0] ** 2).mean(), cov[:, 0] ** 2)
    ranges = np.array([[True, False, True], [True, False, False]])
    assert sr.prior_scores(ranges).tolist() == [1.0, 0.0, 0.5]
    ks = [1, 2, 4, 8]
    aps = np.array([[0.1, 0.2], [0.2, 0.2], [0.3, 0.2], [0.4, 0.2]])  # +0.1 and 0 per doubling
    slope, lo, hi = sr.trend_per_doubling(ks, aps)
    assert slope == pytest.approx(np.polyfit(np.log2(ks), aps.mean(1), 1)[0]) == pytest.approx(0.05)
    assert lo <= slope <= hi and lo >= 0.0 - 1e-12


def test_bundle_round_trips_with_the_ablated_sinr():
    from companion.species_range import train as T

    recipe = dict(seed=0, steps=3, snapshots=[2], globe=dict(n_cells=600, n_train=12, n_test=3, seed=4),
                  sinr=dict(width=16, depth=1, steps=2, batch=32, lr=5e-4, decay=0.98, decay_epochs=2,
                            warmup=1),
                  fs=dict(batch=8, max_ctx=5, fixed_ctx=True, lr=5e-4, decay=0.98, decay_epochs=2, warmup=1),
                  arch=dict(n_layers=1, n_heads=2, ffn=16), sinr_ablation={"dropout": 0.5})
    bundle, history, _ = T.train_bundle(recipe)
    assert "sinr_ablation_loss_per_50" in history
    assert not torch.equal(bundle.sinr.table.weight, bundle.sinr_ablation.table.weight)
    again = T._build({"recipe": recipe})
    again.load_state_dict(bundle.state_dict())  # strict: the same modules, the ablation included
    plain = {k: v for k, v in recipe.items() if k != "sinr_ablation"}
    assert not hasattr(T._build({"recipe": plain}), "sinr_ablation")


def test_ablation_entry_point_trains_and_reloads_the_ablated_sinr(tmp_path, monkeypatch):
    from companion.checkpoints import load_checkpoint
    from companion.species_range import train as T

    tiny = dict(seed=0, globe=dict(n_cells=600, n_train=12, n_test=3, seed=4),
                sinr=dict(width=16, depth=1, steps=3, batch=32, lr=5e-4, decay=0.98, decay_epochs=2,
                          warmup=1, dropout=0.5))
    monkeypatch.setitem(T.ABLATIONS, "sinr-dropout", tiny)
    assert T.main(["--ablation", "sinr-dropout", "--out", str(tmp_path)]) == 0
    sinr, meta = load_checkpoint(tmp_path / "sinr-dropout-quick.pt", T._build_sinr)
    assert meta["recipe"] == tiny and sinr.table.weight.shape == (12, 16)
    with pytest.raises(ValueError, match="^name"):
        T.load_ablation("no-such-ablation")


def test_shipped_ablation_matches_its_recipe():
    from companion.species_range import train as T

    sinr, meta = T.load_ablation("sinr-dropout")
    if sinr is None:
        pytest.skip("no shipped ablation")
    assert meta["recipe"] == T.ABLATIONS["sinr-dropout"]
    assert sinr.table.weight.shape == (meta["recipe"]["globe"]["n_train"], meta["recipe"]["sinr"]["width"])


def test_shipped_checkpoint_loads_into_the_current_code():
    from companion.species_range import train as T

    path = T.CHECKPOINTS / "fssinr-quick.pt"
    if not path.exists():
        pytest.skip("no shipped checkpoint")
    bundle, meta = sr.load_or_train("quick")
    assert meta["recipe"] == T.RECIPES["quick"]
    assert sorted(int(k) for k in bundle.snaps) == sorted(meta["recipe"]["snapshots"])
    assert bundle.sinr.table.weight.shape == (meta["recipe"]["globe"]["n_train"], meta["recipe"]["sinr"]["width"])


_G = None


def _globe():
    global _G
    if _G is None:
        _G = sr.make_globe(600, 6, 2, seed=5)
    return _G


ISSUE_39_BAD_INPUTS = [
    (lambda **kw: sr.make_globe(**kw), dict(n_cells=2000.5), "n_cells"),
    (lambda **kw: sr.make_globe(**kw), dict(n_train=1), "n_train"),
    (lambda **kw: sr.make_globe(**kw), dict(jitter_km=float("nan")), "jitter_km"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(steps=2.5), "steps"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(lr=float("nan")), "lr"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(decay=1.5), "decay"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(pos_weight=float("nan")), "pos_weight"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(warmup=0), "warmup"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(dropout=1.0), "dropout"),
    (lambda **kw: sr.train_sinr(_globe(), **kw), dict(dropout=float("nan")), "dropout"),
    (lambda **kw: sr.covariate_features(**kw), dict(cov=np.full((5, 4), np.nan)), "cov"),
    (lambda **kw: sr.covariate_features(**kw), dict(cov=np.zeros(5)), "cov"),
    (lambda **kw: sr.prior_scores(**kw), dict(ranges=np.zeros((2, 3))), "ranges"),
    (lambda **kw: sr.prior_scores(**kw), dict(ranges=np.zeros((0, 3), bool)), "ranges"),
    (lambda **kw: sr.trend_per_doubling(aps=np.zeros((3, 4)), **kw), dict(ks=[1, 2, 2]), "ks"),
    (lambda **kw: sr.trend_per_doubling(aps=np.zeros((3, 4)), **kw), dict(ks=[0, 1, 2]), "ks"),
    (lambda **kw: sr.trend_per_doubling(ks=[1, 2, 4], **kw), dict(aps=np.zeros((2, 4))), "aps"),
    (lambda **kw: sr.trend_per_doubling(ks=[1, 2, 4], **kw), dict(aps=np.full((3, 4), np.nan)), "aps"),
    (lambda **kw: sr.fit_sinr_lr(np.zeros((2, 3)), **kw), dict(feat_bg=np.zeros((0, 3))), "feat_bg"),
    (lambda **kw: sr.kde_scores(np.zeros((1, 2)), np.zeros((3, 2)), **kw), dict(bw_km=float("inf")), "bw_km"),
]


@pytest.mark.parametrize("fn, kwargs, name", ISSUE_39_BAD_INPUTS)
def test_issue_39_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


import companion.species_range as _sr

_NAN = float("nan")
SR_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _sr.SINR("enc", 5), "enc"),
    (lambda: _sr.fssinr_scores("model", np.zeros((1, 2)), np.zeros((3, 2))), "model"),
    (lambda: _sr.real_land(np.array([[_NAN, 0.0]])), "ll"),
    (lambda: _sr.real_land(np.array([[0.0, 95.0]])), "ll"),
    (lambda: _sr.sample_contexts("globe", np.array([0]), 1, np.random.default_rng(0)), "globe"),
    (lambda: _sr.timed("fn"), "fn"),
    (lambda: _sr.timed(len, [1], repeats=0), "repeats"),
    (lambda: _sr.train_fssinr("globe", None), "globe"),
    (lambda: _sr.train_fssinr(_globe(), _sr.train_sinr(_globe(), width=8, depth=1, steps=1, batch=8,
                                                       warmup=1), steps=1, log_every=-1), "log_every"),
]


@pytest.mark.parametrize("call, name", SR_MORE_BAD_INPUTS)
def test_sr_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
