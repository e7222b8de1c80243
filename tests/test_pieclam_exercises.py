"""The checkers of the PieClam exercises: a right answer passes, and each classic mistake is named."""

import torch

from companion import pieclam as pc
from companion.exercises import pieclam as ex

torch.set_num_threads(1)


def _bracket(F, ei, lorentz, coef_fn=lambda x: 1 / -torch.expm1(-x), edge_factor=1.0, self_term=True, use_L=True):
    L = pc.lorentz_diag(F.shape[1], lorentz, dtype=F.dtype)
    x = pc.edge_logits(F, ei, lorentz).clamp_min(1e-3)
    msg = torch.zeros_like(F).index_add_(0, ei[0], coef_fn(x)[:, None] * F[ei[1]])
    g = edge_factor * msg - F.sum(0) + (F if self_term else 0)
    return g * L if use_L else g


def test_gradient_checker():
    assert ex.check_grad(pc.clam_grad).passed
    mistakes = {
        "sign is flipped": lambda F, ei, lor: -pc.clam_grad(F, ei, lor),
        "self-term": lambda F, ei, lor: _bracket(F, ei, lor, self_term=False),
        "counted twice": lambda F, ei, lor: _bracket(F, ei, lor, edge_factor=2.0),
        "edge coefficient": lambda F, ei, lor: _bracket(F, ei, lor, coef_fn=lambda x: 1 / torch.expm1(x)),
        "L is missing": lambda F, ei, lor: _bracket(F, ei, lor, use_L=False),
    }
    for name, fn in mistakes.items():
        report = ex.check_grad(fn)
        assert not report.passed and any(name in p for p in report.problems), (name, report.problems)

    def no_clamp(F, ei, lor):
        L = pc.lorentz_diag(F.shape[1], lor, dtype=F.dtype)
        x = pc.edge_logits(F, ei, lor)
        msg = torch.zeros_like(F).index_add_(0, ei[0], (1 / -torch.expm1(-x))[:, None] * F[ei[1]])
        return (msg - F.sum(0) + F) * L

    report = ex.check_grad(no_clamp)
    assert not report.passed and any("clamp" in p for p in report.problems)
    assert "shape" in str(ex.check_grad(lambda F, ei, lor: pc.clam_grad(F, ei, lor)[:-1]))


def test_projection_checker():
    assert ex.check_projection(lambda F: pc.project_cone(F, True)).passed
    assert any("ReLU" in p for p in ex.check_projection(lambda F: F.clamp_min(0)).problems)

    def clip(F):
        t, s = F.chunk(2, dim=1)
        t = t.clamp_min(0)
        return torch.cat([t, torch.maximum(torch.minimum(s, t), -t)], dim=1)

    assert any("nearest point" in p and "45 degrees" in p for p in ex.check_projection(clip).problems)

    def clip_s_only(F):  # forgets t < 0: leaves the cone
        t, s = F.chunk(2, dim=1)
        return torch.cat([t, torch.maximum(torch.minimum(s, t.abs()), -t.abs())], dim=1)

    assert any("leaves the cone" in p for p in ex.check_projection(clip_s_only).problems)


def test_barrier_checker():
    report = ex.check_bigclam_barrier(lambda: ([60, 60], [[0.05, 0.8], [0.8, 0.05]]))
    assert report.passed and repr(report) == "2", report.problems
    report = ex.check_bigclam_barrier(lambda: ([60, 60], [[0.6, 0.05], [0.05, 0.6]]))
    assert not report.passed and any("assortative" in p and "eq. (2)" in p for p in report.problems)
    assert "symmetric" in str(ex.check_bigclam_barrier(lambda: ([60, 60], [[0.1, 0.8], [0.2, 0.1]])))
    assert "at least 20" in str(ex.check_bigclam_barrier(lambda: ([5, 5], [[0.0, 1.0], [1.0, 0.0]])))
    assert "must return (sizes, P)" in str(ex.check_bigclam_barrier(lambda: 3))



def test_points_and_equation_numbers():
    assert repr(ex.check_grad(pc.clam_grad)) == "2"
    assert repr(ex.check_projection(lambda F: pc.project_cone(F, True))) == "1"
    report = ex.check_grad(lambda F, ei, lor: pc.clam_grad(F, ei, lor) * 1.5)
    assert not report.passed and "eq. (6)" in str(report) and "pieclam-" not in str(report)
    assert "eq. (3)" in str(ex.check_projection(lambda F: F.clamp_min(0)))
