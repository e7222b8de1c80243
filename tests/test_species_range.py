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
]


@pytest.mark.parametrize("fn, kwargs, name", SPECIES_RANGE_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)
