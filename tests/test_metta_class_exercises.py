"""The checkers of the Metta-Class exercises: a right answer passes, and each classic mistake is named."""

import numpy as np
import torch

import companion.metta_class as mc
from companion.exercises import metta_class as ex


def test_purity_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_purity(mc.purity_factors).passed
    assert ex.check_purity(mc.purity_factors).score == 2

    def recall(pred, y, K):
        k = torch.arange(K)
        return ((pred[:, None] == k) & (y[:, None] == k)).sum(0) / (y[:, None] == k).sum(0)

    assert "recall" in str(ex.check_purity(recall))

    def no_metta(pred, y, K):
        keep = y < K
        return mc.purity_factors(pred[keep], y[keep], K)

    assert "dropped the Metta test points" in str(ex.check_purity(no_metta))

    def zero_not_nan(pred, y, K):
        return torch.nan_to_num(mc.purity_factors(pred, y, K), nan=0.0)

    assert "return NaN there" in str(ex.check_purity(zero_not_nan))

    def stub(pred, y, K):
        raise NotImplementedError()

    report = ex.check_purity(stub)
    assert report.not_done and report.score == 0


def test_ascent_checker_accepts_the_package_and_names_mistakes():
    def package(model, x0, c, steps, step_size):
        return mc.ascend(model, x0, c, steps=steps, step_size=step_size)

    assert ex.check_ascent(package).passed

    def unclamped(model, x0, c, steps, step_size):
        return mc.ascend(model, x0, c, steps=steps, step_size=step_size, clamp=None)

    assert "leave [0, 1]" in str(ex.check_ascent(unclamped))

    def clamp_once(model, x0, c, steps, step_size):
        return unclamped(model, x0, c, steps, step_size).clamp(0, 1)

    assert "clamp only once" in str(ex.check_ascent(clamp_once))

    def descend(model, x0, c, steps, step_size):
        return mc.ascend(lambda x: -model(x), x0, c, steps=steps, step_size=step_size)

    assert "*down* the gradient" in str(ex.check_ascent(descend))

    def in_place(model, x0, c, steps, step_size):
        x0 += 0.0
        x0.mul_(0.5)
        return package(model, x0, c, steps, step_size)

    assert "changed x0 in place" in str(ex.check_ascent(in_place))


def test_union_margin_checker_accepts_logaddexp_and_names_mistakes():
    assert ex.check_union_margin(np.logaddexp).passed
    assert "max(s_a, s_b)" in str(ex.check_union_margin(np.maximum))
    assert "multiplies the density ratios" in str(ex.check_union_margin(lambda a, b: a + b))
    with np.errstate(all="ignore"):
        naive = ex.check_union_margin(lambda a, b: np.log(np.exp(a) + np.exp(b)))
    assert "overflows" in str(naive)
