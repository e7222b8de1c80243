"""The checkers of the ORTE exercises: a right answer passes, and each classic mistake is named."""

import torch
import torch.nn.functional as F

import companion.orte as ot
from companion.exercises import orte as ex


def _plain_ste(logits, gumbel, tau_f, tau_b):
    soft = torch.softmax((logits + gumbel) / tau_f, -1)
    return F.one_hot(soft.argmax(-1), 2).to(soft.dtype) - soft.detach() + soft


def test_ste_checker_accepts_the_package_and_names_mistakes():
    ok = ex.check_ste(lambda lg, g, tf, tb: ot.decoupled_ste(lg, tf, tb, g))
    assert ok.score == 2
    assert "too large" in str(ex.check_ste(_plain_ste))

    def soft_only(logits, gumbel, tau_f, tau_b):
        return torch.softmax((logits + gumbel) / tau_f, -1)

    assert "exactly 0 or 1" in str(ex.check_ste(soft_only))

    def stub(*args):
        raise NotImplementedError()

    report = ex.check_ste(stub)
    assert report.not_done and report.score == 0


def test_contrast_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_contrast(ot.contrast_loss).score == 2

    def flat(x, xp, xn):
        sp = F.cosine_similarity(x.flatten(1), xp.flatten(1), dim=1) / 0.5
        sn = F.cosine_similarity(x.flatten(1), xn.flatten(1), dim=1) / 0.5
        return (torch.logaddexp(sp, sn) - sp).mean()

    assert "flattened" in str(ex.check_contrast(flat))

    def no_temp(x, xp, xn):
        sp, sn = F.cosine_similarity(x, xp, dim=1), F.cosine_similarity(x, xn, dim=1)
        return (torch.logaddexp(sp, sn) - sp).mean()

    assert "temperature" in str(ex.check_contrast(no_temp))

    def swapped(x, xp, xn):
        return ot.contrast_loss(x, xn, xp)

    assert "prefers the complement" in str(ex.check_contrast(swapped))
