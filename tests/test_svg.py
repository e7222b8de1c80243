"""Unit tests of companion.svg: layout transform, masks, block densities, profiling, the SVG pipeline,
the toy DiT, training and the shipped checkpoint."""

import json

import pytest
import torch
import torch.nn.functional as F

from companion.kernels import block_sparse_attention as bsa
from companion.svg import analysis, data, masks, metrics, model, profiling, sparse, train
from companion.svg.layout import VideoLayout, to_frame_major, to_token_major, token_major_perm

TOY = VideoLayout(16, 8, 64)


# --- layout ------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [TOY, VideoLayout(0, 3, 5), VideoLayout(4, 5, 3)])
def test_permutation_and_inverse_are_exact_inverses(layout):
    perm = token_major_perm(layout)
    assert sorted(perm.tolist()) == list(range(layout.n))
    assert perm[: layout.c].tolist() == list(range(layout.c))  # condition tokens stay
    c, F_, S = layout.c, layout.frames, layout.frame_size
    for f in range(F_):  # pi(c + f S + p) = c + p F + f
        for p in range(S):
            assert perm[c + p * F_ + f] == c + f * S + p
    x = torch.randn(2, 3, layout.n, 4)
    types = torch.tensor([[True, False, True], [False, False, True]])
    y = to_token_major(x, layout, types)
    assert torch.equal(y[~types], x[~types])
    assert torch.equal(to_frame_major(y, layout, types), x)
    assert torch.equal(to_token_major(to_frame_major(x, layout, types), layout, types), x)


def test_layout_validation():
    with pytest.raises(ValueError, match="^c"):
        VideoLayout(-1, 2, 2)
    with pytest.raises(ValueError, match="^frames"):
        VideoLayout(0, 0, 2)
    with pytest.raises(ValueError, match="^x"):
        to_token_major(torch.randn(1, 1, 10, 4), TOY)
    with pytest.raises(ValueError, match="^is_temporal"):
        to_token_major(torch.randn(1, 2, TOY.n, 4), TOY, torch.ones(3, dtype=torch.bool))


# --- masks and densities --------------------------------------------------------------------------

def test_temporal_mask_is_the_token_major_band_pulled_back():
    tm = masks.band_mask(TOY, 64, "token")
    perm = token_major_perm(TOY)
    assert torch.equal(tm[perm][:, perm], masks.band_mask(TOY, 64, "frame"))
    # a video query sees the same patch in every frame
    i = TOY.c + 3 * 64 + 10
    assert all(tm[i, TOY.c + f * 64 + 10] for f in range(8)) and tm[i, : TOY.c].all() and tm[: TOY.c].all()


def test_block_densities_of_the_brief():
    tm = masks.band_mask(TOY, 64, "token")
    e = masks.element_density(tm)
    perm = token_major_perm(TOY)
    assert e == pytest.approx(77632 / 528**2)
    assert masks.block_density(tm, 16) / e == pytest.approx(2.3248, abs=1e-3)
    assert masks.block_density(tm[perm][:, perm], 16) / e == pytest.approx(1.0981, abs=1e-3)
    wide = VideoLayout(32, 8, 64)
    assert masks.block_density(masks.band_mask(wide, 64, "token"), 32) == 1.0


def test_svg_masks_share_one_block_mask_and_density():
    m = masks.svg_masks(TOY, 16, 2)
    perm = token_major_perm(TOY)
    assert torch.equal(m["temporal"][perm][:, perm], m["spatial"])
    assert masks.element_density(m["temporal"]) == pytest.approx(m["density"])
    assert masks.half_blocks_for_density(TOY, 16, 0.25) == 2 and m["density"] <= 0.25
    with pytest.raises(ValueError, match="^density"):
        masks.half_blocks_for_density(TOY, 16, 0.05)
    with pytest.raises(ValueError, match="^block"):
        masks.block_band(VideoLayout(8, 4, 16), 16, 1)
    with pytest.raises(ValueError, match="^order"):
        masks.band_mask(TOY, 4, "diagonal")


# --- profiling ------------------------------------------------------------------------------------

def planted(seed, layout=VideoLayout(16, 4, 16), D=16):
    """Head 0 attends to its own frame (spatial), head 1 to its own patch in every frame (temporal)."""
    g = torch.Generator().manual_seed(seed)
    n, c = layout.n, layout.c
    frame = torch.cat([torch.full((c,), -1), torch.arange(layout.frames).repeat_interleave(layout.frame_size)])
    patch = torch.cat([torch.full((c,), -1), torch.arange(layout.frame_size).repeat(layout.frames)])
    q = torch.randn(1, 2, n, D, generator=g) * 0.1
    for h, key in enumerate((frame, patch)):
        onehot = F.one_hot(key.clamp_min(0), D).float() * (key[:, None] >= 0)
        q[0, h] += 4 * onehot
    return q, q.clone(), torch.randn(1, 2, n, D, generator=g), layout


@pytest.mark.parametrize("seed", range(5))
def test_profiling_classifies_planted_heads(seed):
    q, k, v, layout = planted(seed)
    m = masks.svg_masks(layout, 16, 1)
    cand = [m["spatial"], m["temporal"]]
    mse, best = profiling.profile_heads(q, k, v, cand, 4, torch.Generator().manual_seed(seed))
    assert best.tolist() == [[0, 1]] and mse.shape == (2, 1, 2)
    assert profiling.oracle_head_types(q, k, v, cand)[1].tolist() == [[0, 1]]


def test_attention_mass_finds_the_planted_patterns_and_uniform_attention():
    q, k, v, layout = planted(0)
    m = masks.svg_masks(layout, 16, 0)  # own frame / own patch in every frame
    rows = torch.arange(layout.c, layout.n)
    mass = profiling.attention_mass(q, k, [m["spatial"], m["temporal"]], rows)
    assert mass.shape == (2, 1, 2)
    assert mass[0, 0, 0] > 0.75 and mass[1, 0, 1] > 0.75  # each planted head inside its mask
    assert mass[1, 0, 0] < 0.5 and mass[0, 0, 1] < 0.5
    uniform = profiling.attention_mass(torch.zeros_like(q), k, [m["spatial"]], rows)
    assert torch.allclose(uniform, m["spatial"][rows].float().mean(), atol=1e-6)
    with pytest.raises(ValueError, match="^masks"):
        profiling.attention_mass(q, k, [])


def test_profiling_bad_input():
    q, k, v, layout = planted(0)
    m = masks.svg_masks(layout, 16, 1)
    cand = [m["spatial"], m["temporal"]]
    with pytest.raises(ValueError, match="^num_rows"):
        profiling.profile_heads(q, k, v, cand, 0)
    with pytest.raises(ValueError, match="^num_rows"):
        profiling.profile_heads(q, k, v, cand, layout.n + 1)
    with pytest.raises(ValueError, match="^masks"):
        profiling.profile_heads(q, k, v, [], 4)
    with pytest.raises(ValueError, match="^masks"):
        profiling.profile_heads(q, k, v, [cand[0][:-1]], 4)
    with pytest.raises(ValueError, match="^masks"):
        profiling.profile_heads(q, k, v, [torch.zeros_like(cand[0])], 4)
    with pytest.raises(ValueError, match="^k"):
        profiling.profile_heads(q, k[..., :8], v, cand, 4)
    with pytest.raises(ValueError, match="^q"):
        profiling.profile_heads(q * float("nan"), k, v, cand, 4)
    with pytest.raises(ValueError, match="^row_range"):
        profiling.profile_heads(q, k, v, cand, 4, row_range=(10, 5))


# --- the SVG pipeline -----------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_svg_pipeline_equals_masked_dense_attention(backend):
    if backend == "triton" and not (bsa.INTERPRET or torch.cuda.is_available()):
        pytest.skip("needs TRITON_INTERPRET=1 or a GPU")
    layout = VideoLayout(16, 4, 16)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, layout.n, 16, generator=g) for _ in range(3))
    m = masks.svg_masks(layout, 16, 1)
    types = torch.tensor([[False, True], [True, True]])
    out = sparse.svg_attention(q, k, v, layout, types, m["block"], 16, backend=backend)
    elem = torch.where(types[..., None, None], m["temporal"], m["spatial"])
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=elem)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="^q"):
        sparse.svg_attention(q[..., :-1, :], k, v, layout, types, m["block"], 16)


def test_svg_attention_fast_cpu_path_equals_the_kernel_reference():
    layout = VideoLayout(16, 4, 16)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 3, layout.n, 16, generator=g) for _ in range(3))
    m = masks.svg_masks(layout, 16, 1)
    types = torch.tensor([[True, False, True]])
    fast = sparse.svg_attention(q, k, v, layout, types, m["block"], 16, backend="auto")
    ref = sparse.svg_attention(q, k, v, layout, types, m["block"], 16, backend="torch")
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="^backend"):
        sparse.svg_attention(q, k, v, layout, types, m["block"], 16, backend="sdpa")


def test_kernel_errors_are_small_on_the_reference_path():
    layout = VideoLayout(16, 4, 16)
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, layout.n, 16, generator=g) for _ in range(3))
    errs = analysis.kernel_errors(q, k, v, layout, torch.tensor([[False, True]]), 16, 1, "torch")
    assert set(errs) == {"kernel", "pipeline", "awkward"} and max(errs.values()) < 1e-5


def test_head_recorder_summary_with_all_rows_is_the_oracle():
    torch.manual_seed(0)
    net = model.TinyVideoDiT(frames=4, size=8, patch=2, dim=32, depth=2, heads=2).eval()
    layout = net.layout
    m = masks.svg_masks(layout, 16, 0)
    video = layout.n - layout.c  # profiling draws from the video rows only
    rec = analysis.HeadRecorder(layout, [m["spatial"], m["temporal"]], (2, video), draws=2,
                                dense_steps=1, dense_layers=(0,), keep=1)
    y, noise = torch.tensor([0, 3]), torch.randn(2, 4, 1, 8, 8)
    recorded = model.sample(net, y, noise, steps=3, attn_fn=rec)
    torch.testing.assert_close(recorded, model.sample(net, y, noise, steps=3))  # it only watches
    assert rec.sparse_pairs == [(1, 1), (1, 2)] and set(rec.kept) == {0, 1}
    summary = analysis.head_summary(rec)
    assert summary["decisions"] == 2 * 2 * 2
    assert summary["agreement"][video] == 1.0 and summary["regret"][video] == 0.0
    assert summary["regret"][2] >= 0.0 and 0.0 <= summary["clear"] <= 1.0
    assert 0.0 <= summary["mass_best"] <= 1.0


def test_amdahl_and_measured_speedup():
    assert analysis.amdahl(0.8, 0.2, 3.5) == pytest.approx(1.84, abs=0.005)  # the worked examples
    assert analysis.amdahl(0.85, 0.1, 3.5) == pytest.approx(2.20, abs=0.005)
    assert analysis.amdahl(0.5, 1.0, 10.0) == pytest.approx(1.0)  # all steps dense: no gain
    with pytest.raises(ValueError, match="^dense_frac"):
        analysis.amdahl(0.8, 1.5, 2.0)
    with pytest.raises(ValueError, match="^attn_speedup"):
        analysis.amdahl(0.8, 0.2, 0.0)
    assert analysis.measured_speedup([], 0.25) is None
    recs = [{"smoke": True, "shape": "hunyuanvideo-720p", "density": 0.25, "speedup": {"sdpa": 9.0}},
            {"smoke": False, "shape": "hunyuanvideo-720p", "density": 0.1, "speedup": {"sdpa": 6.0},
             "device": "H200"},
            {"smoke": False, "shape": "hunyuanvideo-720p", "density": 0.26, "speedup": {"sdpa": 3.0},
             "device": "H200"},
            {"smoke": False, "shape": "cogvideox-1.5", "density": 0.25, "speedup": {"sdpa": 2.0}}]
    got = analysis.measured_speedup(recs, 0.25)
    assert got == {"speedup": 3.0, "density": 0.26, "device": "H200", "shape": "hunyuanvideo-720p"}
    assert analysis.measured_speedup(recs[:1], 0.25) is None  # a CPU smoke run is not a measurement


def test_sparse_sampler_modes_and_dense_fallback():
    torch.manual_seed(0)
    net = model.TinyVideoDiT(frames=4, size=8, patch=2, dim=32, depth=2, heads=2).eval()
    layout = net.layout
    y = torch.tensor([0, 3])
    noise = torch.randn(2, 4, 1, 8, 8)
    dense = model.sample(net, y, noise, steps=3)
    everything = sparse.SparseSampler(layout, "svg", half_blocks=100, dense_steps=0, dense_layers=(), num_rows=8)
    torch.testing.assert_close(model.sample(net, y, noise, steps=3, attn_fn=everything), dense, atol=1e-5, rtol=1e-5)
    svg = sparse.SparseSampler(layout, "svg", half_blocks=0, dense_steps=1, dense_layers=(0,), num_rows=8)
    model.sample(net, y, noise, steps=3, attn_fn=svg)
    assert sorted(svg.log) == [(1, 1), (1, 2)] and svg.log[(1, 1)]["temporal"].shape == (2, 2)
    with pytest.raises(ValueError, match="^mode"):
        sparse.SparseSampler(layout, "window", half_blocks=1)


# --- data, model, metrics, training, checkpoint ----------------------------------------------------

def test_bouncing_shapes_are_seeded_and_in_range():
    v, y = data.bouncing_shapes(6, frames=5, size=16, seed=3)
    assert v.shape == (6, 5, 1, 16, 16) and v.min() >= -1 and v.max() <= 1 and y.max() < data.N_CLASSES
    assert torch.equal(v, data.bouncing_shapes(6, frames=5, size=16, seed=3)[0])
    assert (v[:, 1:] - v[:, :-1]).abs().sum() > 0  # something moves
    with pytest.raises(ValueError, match="^n"):
        data.bouncing_shapes(0)
    with pytest.raises(ValueError, match="^flicker"):
        data.bouncing_shapes(2, flicker=0.9)


def test_the_background_is_static_and_the_flicker_is_per_frame():
    calm, _ = data.bouncing_shapes(8, frames=6, texture=0.15, flicker=0.0, seed=5)
    steady = (calm - calm.median(1, keepdim=True).values).abs() < 1e-6  # pixels equal to their median
    assert steady.float().mean() > 0.6  # most pixels are background, the same in every frame
    flick, _ = data.bouncing_shapes(8, frames=6, texture=0.15, flicker=0.1, seed=5)
    frame_shift = (flick - calm).mean((2, 3, 4))  # [n, frames]: one offset per frame
    assert frame_shift.std(1).min() > 0.01


def test_patchify_roundtrip_and_frame_major_order():
    net = model.TinyVideoDiT(frames=3, size=8, patch=2, dim=32, depth=1, heads=2)
    x = torch.randn(2, 3, 1, 8, 8)
    assert torch.equal(net.unpatchify(net.patchify(x)), x)
    tokens = net.patchify(x)
    assert torch.equal(tokens[:, 16 + 5], x[:, 1, 0, 2:4, 2:4].reshape(2, 4))  # frame 1, patch 5 = (row 1, col 1)


def test_metrics():
    a = torch.rand(3, 2, 1, 16, 16) * 2 - 1
    assert torch.all(metrics.psnr(a, a) > 100) and torch.allclose(metrics.ssim(a, a), torch.ones(3))
    noisy = a + 0.1 * torch.randn_like(a)
    assert metrics.psnr(a, noisy).mean() == pytest.approx(10 * torch.log10(torch.tensor(4 / 0.01)).item(), abs=0.5)
    assert metrics.attention_flops(10, 2, 4, 0.5) == 4 * 2 * 100 * 4 * 0.5
    with pytest.raises(ValueError, match="^b"):
        metrics.psnr(a, a[:2])


def test_a_few_training_steps_run_with_finite_losses():
    torch.manual_seed(0)
    net = model.TinyVideoDiT(frames=4, size=8, dim=32, depth=1, heads=2)
    hist = train.train_dit(net, n_videos=32, steps=6, batch_size=8, lr=3e-3, data=dict(frames=4, size=8),
                           log_every=3, device="cpu")
    assert hist["step"] == [3, 6] and all(torch.isfinite(torch.tensor(hist["valid_loss"])))
    with pytest.raises(ValueError, match="^steps"):
        train.train_dit(net, n_videos=32, steps=0, batch_size=8, lr=1e-3)


def test_shipped_checkpoint_loads_with_its_provenance():
    path = train.CHECKPOINTS / "tiny_dit.pt"
    if not path.exists():
        pytest.skip("no checkpoint shipped yet: python -m companion.svg.train --scale quick")
    net, meta = train.load_dit(path)
    for key in ("command", "recipe", "commit", "data", "training_seconds", "device", "final"):
        assert key in meta
    assert meta["model"] == train.RECIPES["quick"]["model"] and json.dumps(meta)
    assert meta["recipe"] == train.RECIPES["quick"] and meta["steps_done"] == meta["recipe"]["steps"]
    assert "uncommitted" not in meta["commit"] and "1 threads" in meta["device"]
    assert path.stat().st_size < 4e6
    loss = train.validation_loss(net)
    assert loss == pytest.approx(meta["final"]["valid_loss"], rel=1e-3)


from companion.svg import analysis as _sa, layout as _slay, masks as _smask, metrics as _smet, model as _sm
from companion.svg import profiling as _sprof

_NAN, _Q4 = float("nan"), torch.randn(1, 1, 16, 16)
_Z4, _NAN4 = torch.zeros(1, 1, 4, 8), torch.full((1, 1, 4, 8), float("nan"))
SVG_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: _sm.TinyVideoDiT(frames=0), "frames"),
    (lambda: _sm.TinyVideoDiT(size=18, patch=4), "patch"),
    (lambda: _smet.attention_flops(0, 2, 16), "n"),
    (lambda: _smet.attention_flops(8, 2, 16, density=1.5), "density"),
    (lambda: _smask.block_density(torch.ones(4, 4), 2), "mask"),
    (lambda: _smask.element_density(torch.ones(4, 4)), "mask"),
    (lambda: _sm.dense_attention(_NAN4, _Z4, _Z4), "q"),
    (lambda: _sa.head_summary("rec"), "rec"),
    (lambda: _sa.ssim(torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 8, 8), window=4), "window"),
    (lambda: _smet.linear_flops(8, 0), "width"),
    (lambda: _sa.measured_speedup([], _NAN), "density"),
    (lambda: _sa.oracle_head_types(_NAN4, _Z4, _Z4, []), "q"),
    (lambda: _smask.svg_masks("layout", 16, 1), "layout"),
    (lambda: _sa.kernel_errors(_Q4, _Q4, _Q4, "layout", None, 16, 1), "layout"),
    (lambda: _sa.HeadRecorder("layout", [], [1], 1, 1), "layout"),
    (lambda: _sprof.rows_attention(_Z4, _Z4, _Z4, torch.tensor([0, 9])), "rows"),
    (lambda: _sa.ssim(torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 8, 9)), "b"),
    (lambda: _sa.ssim(torch.zeros(1, 1, 8, 8), torch.zeros(1, 1, 8, 8), data_range=_NAN), "data_range"),
    (lambda: _smask.to_blocks(torch.ones(4, 4, dtype=torch.bool), 0), "block"),
    (lambda: _slay.token_major_perm("layout"), "layout"),
]


@pytest.mark.parametrize("call, name", SVG_BAD_INPUTS)
def test_svg_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()


SVG_MORE_BAD_INPUTS = [
    (lambda: _slay.to_frame_major(torch.zeros(1, 1, 3, 2), "layout"), "layout"),
    # issue 49, through companion.validation: bools and fractions as counts, NaN amplitudes and densities
    (lambda: VideoLayout(c=True, frames=2, frame_size=4), "c: expected an integer >= 0"),
    (lambda: _smask.block_band(VideoLayout(0, 2, 4), 2, 1.5), "half_blocks: expected an integer >= 0"),
    (lambda: _smask.half_blocks_for_density(VideoLayout(0, 2, 4), 2, float("nan")), "density: expected a number in"),
    (lambda: _smask.half_blocks_for_density(VideoLayout(0, 2, 4), 2, True), "density: expected a finite real"),
    (lambda: data.bouncing_shapes(1, texture=float("nan")), "texture: expected a number in"),
]


@pytest.mark.parametrize("call, name", SVG_MORE_BAD_INPUTS)
def test_svg_layout_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
