"""The Sparse VideoGen exercise checkers: right answers pass, each classic mistake is named, a
stub is reported as not done with no points."""

import torch

from companion.exercises import svg as ex
from companion.svg.masks import band_mask, to_blocks


def right_mask(layout, width, block):
    i = torch.arange(layout.n)
    band = (i[:, None] - i[None, :]).abs() < width
    band[: layout.c] = True
    band[:, : layout.c] = True
    return to_blocks(band, block)


def right_update(m, l, acc, s, v):
    m_new = torch.maximum(m, s.max(1).values)
    m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
    alpha = torch.exp(m - m_safe)
    p = torch.exp(s - m_safe[:, None])
    return m_new, l * alpha + p.sum(1), acc * alpha[:, None] + p @ v


def test_no_solution_is_exported():
    assert not [name for name in dir(ex) if "solution" in name]


def test_temporal_block_mask_checker():
    report = ex.check_temporal_block_mask(right_mask)
    assert report.passed and report.points == 2 and repr(report) == "2"

    def frame_major(layout, width, block):
        return to_blocks(band_mask(layout, width, "token"), block)

    wrong = ex.check_temporal_block_mask(frame_major)
    assert any("frame-major" in p and "eq. (" in p for p in wrong.problems) and repr(wrong) == "0"

    def no_condition(layout, width, block):
        i = torch.arange(layout.n)
        return to_blocks((i[:, None] - i[None, :]).abs() < width, block)

    assert any("condition" in p for p in ex.check_temporal_block_mask(no_condition).problems)

    def inclusive(layout, width, block):
        return right_mask(layout, width + 1, block)

    assert any("<= width" in p for p in ex.check_temporal_block_mask(inclusive).problems)

    def floor_blocks(layout, width, block):
        return right_mask(layout, width, block)[: layout.n // block, : layout.n // block]

    assert any("ceil(N / block)" in p for p in ex.check_temporal_block_mask(floor_blocks).problems)
    assert any("raised ZeroDivisionError" in p for p in ex.check_temporal_block_mask(lambda *a: 1 / 0).problems)


def test_online_softmax_checker():
    report = ex.check_online_softmax(right_update)
    assert report.passed and report.points == 2

    def no_max(m, l, acc, s, v):
        p = torch.exp(s)
        return torch.maximum(m, s.max(1).values), l + p.sum(1), acc + p @ v

    assert any("overflows" in p for p in ex.check_online_softmax(no_max).problems)

    def no_rescale_acc(m, l, acc, s, v):
        m_new = torch.maximum(m, s.max(1).values)
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe[:, None])
        return m_new, l * torch.exp(m - m_safe) + p.sum(1), acc + p @ v

    assert any("rescale the accumulator" in p for p in ex.check_online_softmax(no_rescale_acc).problems)

    def no_rescale(m, l, acc, s, v):
        m_new = torch.maximum(m, s.max(1).values)
        m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        p = torch.exp(s - m_safe[:, None])
        return m_new, l + p.sum(1), acc + p @ v

    assert any("denominator l is wrong" in p for p in ex.check_online_softmax(no_rescale).problems)

    def unguarded(m, l, acc, s, v):
        m_new = torch.maximum(m, s.max(1).values)
        alpha, p = torch.exp(m - m_new), torch.exp(s - m_new[:, None])
        return m_new, l * alpha + p.sum(1), acc * alpha[:, None] + p @ v

    report = ex.check_online_softmax(unguarded)
    assert len(report.problems) == 1 and "-inf" in report.problems[0]


def test_stubs_are_not_done_and_score_zero():
    def temporal_block_mask(layout, width, block):
        raise NotImplementedError()

    def update(m, l, acc, s, v):
        raise NotImplementedError()

    for report, name in ((ex.check_temporal_block_mask(temporal_block_mask), "temporal_block_mask"),
                         (ex.check_online_softmax(update), "update")):
        assert report.not_done and not report.passed and report.score == 0 and repr(report) == "0"
        assert "not done yet" in str(report) and f"`{name}`" in str(report)
        assert len(report.problems) == 1  # reported once, not once per case
