"""The Sparse VideoGen exercise checkers: right answers pass, each classic mistake is named."""

import torch

from companion.exercises import svg as ex
from companion.svg.masks import band_mask, to_blocks


def test_temporal_block_mask_checker():
    assert ex.check_temporal_block_mask(ex.temporal_block_mask_solution).passed

    def frame_major(layout, width, block):
        return to_blocks(band_mask(layout, width, "token"), block)

    assert any("frame-major" in p for p in ex.check_temporal_block_mask(frame_major).problems)

    def no_condition(layout, width, block):
        i = torch.arange(layout.n)
        return to_blocks((i[:, None] - i[None, :]).abs() < width, block)

    assert any("condition" in p for p in ex.check_temporal_block_mask(no_condition).problems)

    def inclusive(layout, width, block):
        return ex.temporal_block_mask_solution(layout, width + 1, block)

    assert any("<= width" in p for p in ex.check_temporal_block_mask(inclusive).problems)

    def floor_blocks(layout, width, block):
        return ex.temporal_block_mask_solution(layout, width, block)[: layout.n // block, : layout.n // block]

    assert any("ceil(N / block)" in p for p in ex.check_temporal_block_mask(floor_blocks).problems)
    assert any("raised" in p for p in ex.check_temporal_block_mask(lambda *a: 1 / 0).problems)


def test_online_softmax_checker():
    assert ex.check_online_softmax(ex.online_softmax_solution).passed

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
