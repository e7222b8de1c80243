"""The checkers of the CoRE chapter: the reference solutions pass, the usual mistakes fail with
an explanation, a stub is reported as not done."""

import numpy as np
import torch

import companion.core as core
from companion.exercises import core as ex


def _stub(*args):
    raise NotImplementedError()


def test_manifold_align_checker():
    good = ex.check_manifold_align(lambda Hs, Ht, Q: core.manifold_align_loss(Hs, Ht, probes=Q))
    assert good.passed and good.points == 2 and repr(good) == "2"

    def raw(Hs, Ht, Q):
        D_s, D_t = 1 - (Q @ Hs.T) @ (Q @ Hs.T).T, 1 - (Q @ Ht.T) @ (Q @ Ht.T).T
        return ((D_s - D_t) ** 2).sum(1).mean()

    bad = ex.check_manifold_align(raw)
    assert not bad.passed and repr(bad) == "0" and "normalises each probe's row" in str(bad)

    def summed(Hs, Ht, Q):
        S = [torch.nn.functional.normalize(Q @ H.T, dim=-1) for H in (Hs, Ht)]
        return ((S[0] @ S[0].T - S[1] @ S[1].T) ** 2).sum()

    assert "sum over the probes" in str(ex.check_manifold_align(summed))
    assert ex.check_manifold_align(_stub).not_done


def test_coral_checker():
    assert ex.check_coral(core.coral).passed
    diag = ex.check_coral(lambda Es, Et, eps: (Et - Et.mean(0)) / Et.std(0, ddof=1) * Es.std(0, ddof=1) + Es.mean(0))
    assert not diag.passed and "correlations" in str(diag)
    no_mean = ex.check_coral(lambda Es, Et, eps: core.coral(Es, Et, eps) - Es.mean(0))
    assert "mean" in str(no_mean) and not no_mean.passed
    assert ex.check_coral(lambda Es, Et, eps: np.zeros(3)).problems
    assert ex.check_coral(_stub).not_done
