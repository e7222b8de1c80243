"""Sparse VideoGen, second pass: profiling draws video rows only (the condition rows carry no
signal), the random-types null, per-video PSNR for the interval, and bad input."""

import pytest
import torch

from companion.svg import analysis, masks, model, profiling, sparse
from companion.svg.layout import VideoLayout


def _net():
    torch.manual_seed(0)
    return model.TinyVideoDiT(frames=4, size=8, patch=2, dim=32, depth=2, heads=2).eval()


def test_condition_rows_carry_no_signal_about_a_head():
    layout = VideoLayout(16, 4, 16)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, layout.n, 16, generator=g) for _ in range(3))
    m = masks.svg_masks(layout, 16, 0)
    cond = torch.arange(layout.c)
    full = profiling.rows_attention(q, k, v, cond)
    for name in ("spatial", "temporal"):  # a condition row sees every key under both masks
        torch.testing.assert_close(profiling.rows_attention(q, k, v, cond, m[name]), full)
    # so the oracle over the video rows alone picks exactly what the all-rows oracle picks
    video = torch.arange(layout.c, layout.n)
    mse_video = torch.stack([(profiling.rows_attention(q, k, v, video, m[x])
                              - profiling.rows_attention(q, k, v, video)).pow(2).mean((-1, -2))
                             for x in ("spatial", "temporal")])
    mse_all, best_all = profiling.oracle_head_types(q, k, v, [m["spatial"], m["temporal"]])
    assert torch.equal(mse_video.argmin(0), best_all)
    torch.testing.assert_close(mse_all * layout.n, mse_video * (layout.n - layout.c))


def test_sampler_and_recorder_profile_from_the_video_rows():
    net = _net()
    layout = net.layout
    svg = sparse.SparseSampler(layout, "svg", half_blocks=0, dense_steps=1, num_rows=4)
    assert svg.row_range == (layout.c, layout.n)
    assert sparse.SparseSampler(layout, "svg", 0, video_rows_only=False).row_range is None
    m = masks.svg_masks(layout, 16, 0)
    rec = analysis.HeadRecorder(layout, [m["spatial"], m["temporal"]], (layout.n,), 1, 1)
    assert rec.row_range == (layout.c, layout.n)
    with pytest.raises(ValueError, match="^num_rows"):  # more rows than the video has
        model.sample(net, torch.tensor([0]), torch.randn(1, 4, 1, 8, 8), 2, attn_fn=rec)


def test_random_types_are_seeded_and_vary():
    net = _net()
    y, noise = torch.tensor([0, 3]), torch.randn(2, 4, 1, 8, 8)
    runs = []
    for _ in range(2):
        fn = sparse.SparseSampler(net.layout, "random", 0, dense_steps=0, dense_layers=(), seed=3)
        runs.append((model.sample(net, y, noise, 6, attn_fn=fn), fn))
    torch.testing.assert_close(runs[0][0], runs[1][0])  # same seed, same video
    types = torch.stack([e["temporal"] for e in runs[0][1].log.values()]).float()
    assert 0.2 < float(types.mean()) < 0.8  # both kinds drawn


def test_compare_methods_reports_per_video_psnr_and_refuses_bad_input():
    net = _net()
    y, noise = torch.tensor([0, 3]), torch.randn(2, 4, 1, 8, 8)
    rows, videos = analysis.compare_methods(net, y, noise, 2, [("svg", 0.9), ("random", 0.9)],
                                            num_rows=4, dense_steps=1, seed=5)
    assert [r["method"] for r in rows] == ["svg", "random"] and rows[0]["seed"] == 5
    assert len(rows[0]["psnr_videos"]) == 2
    assert rows[0]["psnr"] == pytest.approx(sum(rows[0]["psnr_videos"]) / 2)
    assert set(videos) == {("svg", 0.9), ("random", 0.9)}
    with pytest.raises(ValueError, match="^noise"):
        analysis.compare_methods(net, y, noise[:1], 2, [("svg", 0.9)])
    with pytest.raises(ValueError, match="^noise"):
        analysis.compare_methods(net, y, torch.full_like(noise, float("nan")), 2, [("svg", 0.9)])
    with pytest.raises(ValueError, match="^steps"):
        analysis.compare_methods(net, y, noise, 0, [("svg", 0.9)])
    with pytest.raises(ValueError, match="^num_rows"):
        analysis.compare_methods(net, y, noise, 2, [("svg", 0.9)], num_rows=2.5)
    with pytest.raises(ValueError, match="^mode"):
        analysis.compare_methods(net, y, noise, 2, [("window", 0.9)])


def test_profile_heads_bad_row_range():
    layout = VideoLayout(16, 4, 16)
    q = torch.randn(1, 1, layout.n, 16)
    m = masks.svg_masks(layout, 16, 0)
    with pytest.raises(ValueError, match="^row_range"):
        profiling.profile_heads(q, q, q, [m["spatial"]], 4, row_range=(50, 10))
    with pytest.raises(ValueError, match="^num_rows"):
        profiling.profile_heads(q, q, q, [m["spatial"]], layout.n, row_range=(layout.c, layout.n))
