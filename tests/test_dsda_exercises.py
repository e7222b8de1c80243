"""The checkers of the DSDA exercises: a right answer passes, and each classic mistake is named."""

import torch

import companion.dsda as ds
from companion.exercises import dsda as ex


def test_pcgrad_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_pcgrad(lambda g1, g2: ds.pcgrad([g1, g2])).score == 2

    def always(g1, g2):
        return g1 - (g1 @ g2) / (g2 @ g2) * g2 + g2 - (g2 @ g1) / (g1 @ g1) * g1

    assert "even when the gradients agree" in str(ex.check_pcgrad(always))

    def sequential(g1, g2):
        p1 = g1 - min(0.0, float(g1 @ g2)) / (g2 @ g2) * g2
        return p1 + g2 - min(0.0, float(g2 @ p1)) / (p1 @ p1) * p1

    assert "already projected" in str(ex.check_pcgrad(sequential))

    def only_first(g1, g2):
        return g1 - min(0.0, float(g1 @ g2)) / (g2 @ g2) * g2

    assert "only the projected g1" in str(ex.check_pcgrad(only_first))

    def stub(g1, g2):
        raise NotImplementedError()

    report = ex.check_pcgrad(stub)
    assert report.not_done and report.score == 0


def test_heun_checker_accepts_the_package_and_names_mistakes():
    def package(grad_E, x, step, low, high):
        cfg = ds.SamplerConfig(step, rk_order=2, low=low, high=high)
        return ds._drift(lambda z: (torch.zeros(len(z)), grad_E(z)), x, cfg)[0]

    assert ex.check_heun(package).score == 2
    assert "Euler drift" in str(ex.check_heun(lambda g, x, a, lo, hi: -a * g(x)))

    def no_clamp(grad_E, x, step, low, high):
        k1 = -grad_E(x)
        return 0.5 * step * (k1 - grad_E(x + step * k1))

    assert "not clamped" in str(ex.check_heun(no_clamp))

    def no_half(grad_E, x, step, low, high):
        return 2 * package(grad_E, x, step, low, high)

    assert "factor 1/2" in str(ex.check_heun(no_half))
    assert "climbs the energy" in str(ex.check_heun(
        lambda g, x, a, lo, hi: -package(g, x, a, lo, hi)))


def test_auroc_checker_accepts_the_rank_definition_and_names_mistakes():
    import numpy as np
    from sklearn.metrics import roc_auc_score

    def sk(s_in, s_out):
        return roc_auc_score(np.r_[np.ones(len(s_in)), np.zeros(len(s_out))], np.r_[s_in, s_out]) \
            if len(set(np.r_[s_in, s_out])) > 1 else 0.5

    assert ex.check_auroc(sk).score == 2
    assert "only strict wins" in str(ex.check_auroc(
        lambda a, b: float((a[:, None] > b[None, :]).mean())))
    assert "as a win (>=)" in str(ex.check_auroc(
        lambda a, b: float((a[:, None] >= b[None, :]).mean())))
    assert "swapped" in str(ex.check_auroc(lambda a, b: 1 - sk(a, b)))

    def stub(a, b):
        raise NotImplementedError()

    report = ex.check_auroc(stub)
    assert report.not_done and report.score == 0
