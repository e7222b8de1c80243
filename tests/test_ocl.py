"""companion.ocl: views, losses, encoder, FLOP counts, renderer, probes, bad input."""

import math

import pytest
import torch
import torch.nn.functional as F

from companion.ocl import (MAE, OCL, SimCLR, TinyViT, augment, count_flops, few_shot_split,
                           keep_count, linear_probe, mae_loss, nt_xent, occlusion_views,
                           ocl_loss, render_glyphs, sincos_pos_embed_2d, tsp_similarity)
from companion.ocl.budget import steps_for_flops, train_for_flops
from companion.ocl.glyphs import TEST_FONTS, TRAIN_FONTS

torch.set_num_threads(1)


def test_keep_count_rounds_down_to_even():
    assert keep_count(64, 0.75) == 16
    assert keep_count(196, 0.9) == 18  # the paper's ViT/16 at 224: 9 patches per view
    assert keep_count(10, 0.5) == 4  # floor(5) = 5 is odd -> 4
    assert keep_count(64, 0.9) == 6


@pytest.mark.parametrize("ratio", [-0.1, 1.0, 1.5, 0.99])
def test_keep_count_refuses_bad_ratios(ratio):
    with pytest.raises(ValueError, match="mask_ratio"):
        keep_count(64, ratio)


def test_views_are_disjoint_halves_of_one_permutation():
    tokens = torch.randn(5, 64, 8)
    g = torch.Generator().manual_seed(3)
    va, vb, ia, ib = occlusion_views(tokens, 0.75, g)
    assert va.shape == vb.shape == (5, 8, 8) and ia.shape == ib.shape == (5, 8)
    for b in range(5):
        both = torch.cat([ia[b], ib[b]])
        assert len(set(both.tolist())) == 16  # unique within a view and disjoint across views
        assert torch.equal(va[b], tokens[b, ia[b]]) and torch.equal(vb[b], tokens[b, ib[b]])
    # the reference: argsort of the same noise, first K survive, split in two halves
    noise = torch.rand(5, 64, generator=torch.Generator().manual_seed(3))
    keep = noise.argsort(1)[:, :16]
    assert torch.equal(ia, keep[:, :8]) and torch.equal(ib, keep[:, 8:])
    assert not torch.equal(ia[0], ia[1])  # one permutation per sample


def test_views_are_seeded():
    tokens = torch.randn(3, 64, 4)
    one = occlusion_views(tokens, 0.5, torch.Generator().manual_seed(1))[2]
    two = occlusion_views(tokens, 0.5, torch.Generator().manual_seed(1))[2]
    assert torch.equal(one, two)


def test_views_refuse_bad_tokens():
    with pytest.raises(ValueError, match="tokens"):
        occlusion_views(torch.randn(64, 8), 0.75)
    with pytest.raises(ValueError, match="tokens"):
        occlusion_views(torch.randn(0, 64, 8), 0.75)
    with pytest.raises(ValueError, match="mask_ratio"):
        occlusion_views(torch.randn(2, 4, 8), 0.9)  # keeps 0 tokens


def test_tsp_similarity_endpoints_monotone_and_slope_ratio():
    s = torch.linspace(-1, 1, 201, dtype=torch.float64)
    psi = tsp_similarity(s, 1 / 64)
    assert psi[0] == 0 and psi[-1] == 1
    assert torch.all(psi.diff() > 0)
    slope = torch.autograd.functional.jacobian(lambda t: tsp_similarity(t, 1 / 64),
                                               torch.tensor([1.0, -1.0], dtype=torch.float64))
    assert slope[0, 0] / slope[1, 1] == pytest.approx((1 + 2 / 64) ** 2, rel=1e-9)


def test_ocl_loss_with_kappa_zero_is_infonce_at_twice_tau():
    g = torch.Generator().manual_seed(0)
    za, zb = torch.randn(7, 5, generator=g), torch.randn(7, 5, generator=g)
    tau = 0.07
    # brute force: symmetric cross-entropy of cosine / (2 tau), written with explicit sums
    cos = torch.tensor([[float(F.cosine_similarity(za[i], zb[j], dim=0)) for j in range(7)]
                        for i in range(7)])
    def ce(m):
        m = m.tolist()
        return sum(-m[i][i] + math.log(sum(math.exp(v) for v in m[i])) for i in range(7)) / 7
    want = 0.5 * (ce(cos / (2 * tau)) + ce(cos.T / (2 * tau)))
    assert float(ocl_loss(za, zb, kappa=0.0, tau=tau)) == pytest.approx(want, abs=1e-5)


def test_ocl_loss_symmetric_and_scale_free():
    g = torch.Generator().manual_seed(1)
    za, zb = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    assert float(ocl_loss(za, zb)) == pytest.approx(float(ocl_loss(zb, za)), abs=1e-6)
    assert float(ocl_loss(3 * za, zb)) == pytest.approx(float(ocl_loss(za, zb)), abs=1e-5)


def test_losses_refuse_bad_input():
    z = torch.randn(4, 3)
    with pytest.raises(ValueError, match="z_a"):
        ocl_loss(z[:1], z[:1])  # no negatives
    with pytest.raises(ValueError, match="z_b"):
        ocl_loss(z, torch.randn(4, 2))
    with pytest.raises(ValueError, match="z_a"):
        ocl_loss(torch.full((4, 3), float("nan")), z)
    with pytest.raises(ValueError, match="tau"):
        ocl_loss(z, z, tau=0)
    with pytest.raises(ValueError, match="kappa"):
        tsp_similarity(torch.zeros(2), kappa=-1)
    with pytest.raises(ValueError, match="mask"):
        mae_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), torch.zeros(2, 3))


def test_nt_xent_matches_a_brute_force_count():
    g = torch.Generator().manual_seed(2)
    p1, p2 = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    z = F.normalize(torch.cat([p1, p2]), dim=1)
    total = 0.0
    for i in range(6):
        pos = (i + 3) % 6
        others = [math.exp(float(z[i] @ z[j]) / 0.2) for j in range(6) if j != i]
        total += -float(z[i] @ z[pos]) / 0.2 + math.log(sum(others))
    assert float(nt_xent(p1, p2, 0.2)) == pytest.approx(total / 6, abs=1e-5)


def test_mae_loss_counts_masked_patches_only():
    pred, target = torch.zeros(1, 2, 2), torch.tensor([[[1.0, 1.0], [5.0, 5.0]]])
    assert float(mae_loss(pred, target, torch.tensor([[1.0, 0.0]]))) == pytest.approx(1.0)


def test_sincos_positions():
    pos = sincos_pos_embed_2d(8, 4)
    assert pos.shape == (16, 8)
    assert torch.allclose(pos[0], torch.tensor([0.0, 0, 1, 1, 0, 0, 1, 1]))
    assert len({tuple(r.tolist()) for r in pos.round(decimals=5)}) == 16
    with pytest.raises(ValueError, match="dim"):
        sincos_pos_embed_2d(6, 4)


def test_vit_takes_any_token_subset_and_adds_one_cls():
    vit = TinyViT()
    x = torch.rand(2, 1, 16, 16)
    t = vit.tokens(x)
    assert t.shape == (2, 64, 48)
    for n in (1, 3, 64):
        assert vit.encode(t[:, :n]).shape == (2, n + 1, 48)
    assert vit.features(x, "mean").shape == (2, 48)


@pytest.mark.parametrize("bad, match", [
    (torch.rand(2, 16, 16), r"\[B,1,H,W\]"),
    (torch.rand(2, 3, 16, 16), r"\[B,1,H,W\]"),
    (torch.rand(2, 1, 15, 15), "divisible"),
    (torch.full((2, 1, 16, 16), float("nan")), "finite"),
    (torch.rand(0, 1, 16, 16), "empty"),
])
def test_vit_refuses_bad_images(bad, match):
    with pytest.raises(ValueError, match=match):
        TinyViT().tokens(bad)


def test_vit_refuses_bad_settings():
    with pytest.raises(ValueError, match="patch"):
        TinyViT(img_size=16, patch=3)
    with pytest.raises(ValueError, match="pool"):
        TinyViT().features(torch.rand(1, 1, 16, 16), pool="max")


def _vit_forward_flops(n, D=48, depth=3, hidden=96):
    """Analytic FLOPs of the encoder's blocks on n tokens (2 per multiply-add)."""
    return depth * (2 * n * (3 * D * D + D * D + 2 * D * hidden) + 2 * 2 * n * n * D)


def test_flop_counts_order_and_analytic_ratio():
    torch.manual_seed(0)
    f = {name: m.flops_per_step(64) for name, m in
         [("ocl", OCL(TinyViT(), 0.75)), ("ocl90", OCL(TinyViT(), 0.9)),
          ("mae", MAE(TinyViT(), 0.75)), ("simclr", SimCLR(TinyViT()))]}
    assert f["ocl"] < f["mae"] < f["simclr"]
    assert f["ocl90"] < f["ocl"]
    # the encoder sees 2 x (8 + 1) tokens per image in OCL, 2 x 65 in SimCLR
    analytic = _vit_forward_flops(9) * 2 / (_vit_forward_flops(65) * 2)
    assert f["ocl"] / f["simclr"] == pytest.approx(analytic, rel=0.15)


def test_flop_counter_sees_an_all_token_encoder():
    vit = TinyViT()
    t = vit.tokens(torch.rand(4, 1, 16, 16)).detach()
    assert count_flops(vit.encode, t) == pytest.approx(4 * _vit_forward_flops(65), rel=0.02)
    assert count_flops(vit.encode, t[:, :8]) == pytest.approx(4 * _vit_forward_flops(9), rel=0.02)


def test_augment_keeps_shape_and_range_and_is_seeded():
    x = torch.rand(4, 1, 16, 16)
    a = augment(x, torch.Generator().manual_seed(0))
    b = augment(x, torch.Generator().manual_seed(0))
    assert a.shape == x.shape and torch.equal(a, b) and a.min() >= 0 and a.max() <= 1
    assert not torch.equal(a, x)


def test_glyphs_render_every_pair_seeded():
    fonts = list(TRAIN_FONTS + TEST_FONTS)
    x, y, f = render_glyphs(fonts=fonts, n_variants=1, clutter_p=0.0)
    assert x.shape == (36 * len(fonts), 1, 16, 16) and x.dtype == torch.float32
    assert y.dtype == torch.int64 and f.dtype == torch.int64
    assert float(x.amax((1, 2, 3)).min()) > 0.4  # every (char, font) pair draws a glyph
    x2, _, _ = render_glyphs("A", ["cmr10"], 2, seed=5)
    x3, _, _ = render_glyphs("A", ["cmr10"], 2, seed=5)
    assert torch.equal(x2, x3)
    assert torch.equal(x2[0], render_glyphs("AB", ["cmr10", "cmb10"], 2, seed=5)[0][0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(chars=""), "chars"), (dict(chars="AA"), "chars"), (dict(fonts=["Arial"]), "fonts"),
    (dict(n_variants=0), "n_variants"), (dict(clutter_p=2.0), "clutter_p"),
])
def test_glyphs_refuse_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        render_glyphs(**kwargs)


def test_linear_probe_separates_and_refuses_bad_input():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(3).repeat_interleave(20)
    f = torch.randn(60, 5, generator=g) * 0.1 + F.one_hot(y, 5).float()
    assert linear_probe(f[::2], y[::2], f[1::2], y[1::2]) == 1.0
    with pytest.raises(ValueError, match="f_tr"):
        linear_probe(f[:0], y[:0], f, y)
    with pytest.raises(ValueError, match="f_te"):
        linear_probe(f, y, f[:, :3], y)
    with pytest.raises(ValueError, match="y_tr"):
        linear_probe(f, y[:5], f, y)
    idx = few_shot_split(y, 4)
    assert len(idx) == 12 and torch.bincount(y[idx]).tolist() == [4, 4, 4]
    with pytest.raises(ValueError, match="shots"):
        few_shot_split(y, 21)


def test_training_is_seeded_and_snapshots():
    pool = torch.rand(32, 1, 16, 16)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        method = OCL(TinyViT(dim=16, depth=1, heads=2), 0.75)
        runs.append(train_for_flops(method, pool, 3, batch=16, seed=0, snapshot_steps=[1]))
    assert runs[0].loss == runs[1].loss and len(runs[0].loss) == 3
    assert sorted(runs[0].snapshots) == [runs[0].flops_per_step, 3 * runs[0].flops_per_step]
    assert steps_for_flops(10, 3) == 3
    with pytest.raises(ValueError, match="pool"):
        train_for_flops(method, pool[:4], 1, batch=16)


def test_extract_pools_matches_features():
    from companion.ocl import extract, extract_pools
    vit = TinyViT()
    x = torch.rand(5, 1, 16, 16)
    both = extract_pools(vit, x, batch=2)
    assert torch.allclose(both["cls"], extract(vit, x, "cls"), atol=1e-6)
    assert torch.allclose(both["mean"], extract(vit, x, "mean"), atol=1e-6)


def test_methods_refuse_bad_settings():
    from companion.ocl import build_method
    with pytest.raises(ValueError, match="name"):
        build_method("BYOL", TinyViT())
    with pytest.raises(ValueError, match="vit"):
        OCL(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="mask_ratio"):
        OCL(TinyViT(), 0.99)
    with pytest.raises(ValueError, match="batch"):
        OCL(TinyViT()).flops_per_step(1)


def test_extract_views_is_the_mean_of_the_two_views_cls():
    from companion.ocl import extract_views
    vit = TinyViT().eval()
    x = torch.rand(3, 1, 16, 16)
    got = extract_views(vit, x, 0.75, seed=4)
    va, vb, _, _ = occlusion_views(vit.tokens(x), 0.75, torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = 0.5 * (vit.encode(va)[:, 0] + vit.encode(vb)[:, 0])
    assert torch.allclose(got, want, atol=1e-5)


# --- issue 49: keep_count follows its formula exactly; the table of bad inputs --------------------

def test_keep_count_follows_its_documented_formula_for_every_length_and_ratio():
    """K = 2 floor(floor(L (1 - r)) / 2) in exact arithmetic; the float int(L * (1 - r)) gave 8 at
    L = 100, r = 0.9 (9.999... floored) instead of 10."""
    from fractions import Fraction

    assert keep_count(100, 0.9) == 10
    assert keep_count(100, 0.8) == 20
    for L in range(2, 257):
        for hundredths in range(0, 100):
            r = hundredths / 100
            want = 2 * (math.floor(L * (1 - Fraction(hundredths, 100))) // 2)
            if want < 2:
                with pytest.raises(ValueError, match="mask_ratio"):
                    keep_count(L, r)
            else:
                assert keep_count(L, r) == want, (L, r)


def _vit():
    torch.manual_seed(0)
    return TinyViT(img_size=8, patch=2, dim=8, depth=1, heads=2)


_TOK = torch.zeros(2, 16, 8)
_NANTOK = torch.full((2, 16, 8), float("nan"))
_F = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
_Y = torch.tensor([0, 1, 0, 1, 0, 1])

OCL_BAD_INPUTS = [
    (lambda **kw: occlusion_views(mask_ratio=0.5, **kw), dict(tokens=_NANTOK), "tokens"),
    (lambda **kw: occlusion_views(mask_ratio=0.5, **kw), dict(tokens=torch.zeros(0, 16, 8)), "tokens"),
    (lambda **kw: occlusion_views(_TOK, **kw), dict(mask_ratio=float("nan")), "mask_ratio"),
    (lambda **kw: occlusion_views(_TOK, **kw), dict(mask_ratio=0.99), "mask_ratio"),
    (lambda **kw: keep_count(mask_ratio=0.5, **kw), dict(L=10.5), "L"),
    (lambda **kw: keep_count(mask_ratio=0.5, **kw), dict(L=0), "L"),
    (lambda **kw: keep_count(10, **kw), dict(mask_ratio=1.0), "mask_ratio"),
    (lambda **kw: ocl_loss(z_b=torch.zeros(4, 3), **kw), dict(z_a=torch.full((4, 3), float("nan"))), "z_a"),
    (lambda **kw: ocl_loss(torch.zeros(4, 3), **kw), dict(z_b=torch.zeros(3, 3)), "z_b"),
    (lambda **kw: ocl_loss(torch.zeros(4, 3), torch.zeros(4, 3), **kw), dict(tau=float("nan")), "tau"),
    (lambda **kw: ocl_loss(torch.zeros(4, 3), torch.zeros(4, 3), **kw), dict(kappa=float("nan")), "kappa"),
    (lambda **kw: tsp_similarity(torch.zeros(2), **kw), dict(kappa=float("inf")), "kappa"),
    (lambda **kw: nt_xent(torch.zeros(4, 3), **kw), dict(p2=torch.full((4, 3), float("inf"))), "p2"),
    (lambda **kw: mae_loss(target=torch.zeros(1, 4, 2), mask=torch.ones(1, 4), **kw),
     dict(pred=torch.full((1, 4, 2), float("nan"))), "pred"),
    (lambda **kw: mae_loss(torch.zeros(1, 4, 2), mask=torch.ones(1, 4), **kw),
     dict(target=torch.full((1, 4, 2), float("nan"))), "target"),
    (lambda **kw: mae_loss(torch.zeros(1, 4, 2), torch.zeros(1, 4, 2), **kw), dict(mask=torch.zeros(1, 4)), "mask"),
    (lambda **kw: mae_loss(torch.zeros(1, 4, 2), torch.zeros(1, 4, 2), **kw),
     dict(mask=torch.full((1, 4), 0.5)), "mask"),
    (lambda **kw: augment(**kw), dict(x=torch.full((2, 1, 8, 8), float("nan"))), "x"),
    (lambda **kw: OCL(_vit(), **kw), dict(mask_ratio=float("nan")), "mask_ratio"),
    (lambda **kw: OCL(_vit()).loss(**kw), dict(x=torch.full((2, 1, 8, 8), float("nan"))), "x"),
    (lambda **kw: SimCLR(_vit()).loss(**kw), dict(x=torch.full((2, 1, 8, 8), float("nan"))), "x"),
    (lambda **kw: MAE(_vit()).loss(**kw), dict(x=torch.full((2, 1, 8, 8), float("nan"))), "x"),
    (lambda **kw: OCL(_vit()).flops_per_step(**kw), dict(batch=1), "batch"),
    (lambda **kw: few_shot_split(_Y, **kw), dict(shots=0), "shots"),
    (lambda **kw: few_shot_split(_Y, **kw), dict(shots=4), "shots"),
    (lambda **kw: linear_probe(_F, _Y, _F, _Y, **kw), dict(l2=float("nan")), "l2"),
    (lambda **kw: linear_probe(_F, _Y, _F, _Y, **kw), dict(iters=0), "iters"),
    (lambda **kw: linear_probe(_F, y_tr=_Y - 1, f_te=_F, y_te=_Y, **kw), dict(), "y_tr"),
    (lambda **kw: linear_probe(_F, _Y.float(), _F, _Y, **kw), dict(), "y_tr"),
    (lambda **kw: linear_probe(y_tr=_Y, f_te=_F, y_te=_Y, **kw), dict(f_tr=torch.full((6, 3), float("nan"))),
     "f_tr"),
    (lambda **kw: linear_probe(_F, _Y, y_te=_Y, **kw), dict(f_te=torch.zeros(6, 2)), "f_te"),
]


@pytest.mark.parametrize("fn, kwargs, name", OCL_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


# --- issue 37: pixels outside [0, 1] and NaN tokens refused; MAE's exact count; lr rule; timing ---

@pytest.mark.parametrize("fn", [
    lambda x: TinyViT(img_size=8, patch=2, dim=8, depth=1, heads=2).tokens(x),
    lambda x: augment(x),
    lambda x: OCL(_vit()).loss(x),
    lambda x: SimCLR(_vit()).loss(x),
    lambda x: MAE(_vit()).loss(x),
])
@pytest.mark.parametrize("shift", [-0.5, 1.0])
def test_pixels_outside_the_unit_interval_are_refused(fn, shift):
    x = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(0)) + shift
    with pytest.raises(ValueError, match=r"x: expected pixels in \[0, 1\]"):
        fn(x)
    fn(x.clamp(0, 1))  # the same images inside the range pass


def test_encoder_refuses_nan_tokens():
    vit = _vit()
    t = vit.tokens(torch.rand(2, 1, 8, 8))
    vit.encode(t)
    t[0, 3, 1] = float("nan")
    with pytest.raises(ValueError, match="tokens: must be finite"):
        vit.encode(t)
    with pytest.raises(ValueError, match="tokens"):
        vit.encode(torch.full((2, 4, 8), float("inf")))


def test_mae_visible_count_is_exact():
    from companion.ocl import visible_count
    assert visible_count(100, 0.9) == 10  # int(100 * (1 - 0.9)) is 9 in floating point
    assert visible_count(64, 0.75) == 16
    torch.manual_seed(0)
    mae = MAE(TinyViT(img_size=20, patch=2, dim=8, depth=1, heads=2), 0.9)
    assert mae.n_visible == 10
    with pytest.raises(ValueError, match="mask_ratio"):
        visible_count(4, 0.8)  # floor(0.8) = 0 visible tokens
    with pytest.raises(ValueError, match="L"):
        visible_count(2.5, 0.5)


def test_learning_rate_follows_the_official_rule():
    from companion.ocl import scaled_lr
    assert scaled_lr(5e-5, 7200) == pytest.approx(1.40625e-3)  # the official 1800 x 4 GPUs
    assert scaled_lr(2e-3, 128) == pytest.approx(1e-3)
    for bad, name in [(dict(base_lr=0.0, batch=8), "base_lr"), (dict(base_lr=float("nan"), batch=8),
                      "base_lr"), (dict(base_lr=1e-3, batch=0), "batch"),
                      (dict(base_lr=1e-3, batch=2.5), "batch")]:
        with pytest.raises(ValueError, match=name):
            scaled_lr(**bad)


def test_time_steps_interleaves_and_counts_rounds():
    from companion.ocl import time_steps
    vit = _vit()
    methods = {"OCL": OCL(vit, 0.5), "SimCLR": SimCLR(vit)}
    out = time_steps(methods, torch.rand(4, 1, 8, 8), rounds=3, warmup=1)
    assert set(out) == {"OCL", "SimCLR"} and all(len(v) == 3 and min(v) > 0 for v in out.values())
    assert all(p.grad is None for p in vit.parameters())  # gradients are not left behind
    with pytest.raises(ValueError, match="methods"):
        time_steps({}, torch.rand(4, 1, 8, 8))
    with pytest.raises(ValueError, match="rounds"):
        time_steps(methods, torch.rand(4, 1, 8, 8), rounds=0)


def test_timing_in_a_fresh_process_returns_every_method():
    from companion.ocl.timing import TIMED, time_in_subprocess
    model = dict(img_size=16, patch=2, dim=8, depth=1, heads=2, mlp_ratio=2.0)
    out = time_in_subprocess(model, batch=4, rounds=2, warmup=1)
    assert set(out) == set(TIMED) and all(len(v) == 2 and min(v) > 0 for v in out.values())
    with pytest.raises(RuntimeError, match="mask_ratio"):  # 16 tokens: r = 0.9 keeps none
        time_in_subprocess(dict(model, img_size=8), batch=4, rounds=1, warmup=0)
    with pytest.raises(ValueError, match="batch"):
        time_in_subprocess({}, batch=1)


def test_official_base_rates():
    from companion.ocl.train import OFFICIAL, official_base_lr
    assert official_base_lr("OCL") == OFFICIAL["base_lr"] == 5e-5
    assert official_base_lr("MAE") == OFFICIAL["mae_base_lr"] == 1.5e-4


from companion.ocl import budget as _ob, methods as _om, probe as _op, timing as _ot, vit as _ov

_NAN = float("nan")
OCL_MORE_BAD_INPUTS = [  # the rest of the package's public functions; each refused naming its argument
    (lambda: _ov.Block(0, 2, 2.0), "dim"),
    (lambda: _ov.Block(48, 5, 2.0), "heads"),
    (lambda: _ot.build_timed("model"), "model"),
    (lambda: _ov.check_images(torch.full((2, 1, 32, 32), 2.0)), "x"),
    (lambda: _om.count_flops("fn"), "fn"),
    (lambda: _op.extract("vit", torch.zeros(2, 1, 32, 32)), "vit"),
    (lambda: _op.extract_pools("vit", torch.zeros(2, 1, 32, 32)), "vit"),
    (lambda: _op.extract_views("vit", torch.zeros(2, 1, 32, 32), 0.5), "vit"),
    (lambda: _ob.steps_for_flops(100, 0), "flops_per_step"),
    (lambda: _ob.steps_for_flops(-1, 10), "flops_budget"),
]


@pytest.mark.parametrize("call, name", OCL_MORE_BAD_INPUTS)
def test_ocl_public_functions_refuse_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
