"""The checkers of the LADA exercises: a right answer passes, and each classic mistake is named."""

import numpy as np
import torch

import companion.lada as lada
from companion.exercises import lada as ex


def _memory_logits(v, W, class_of, n_classes, beta):
    affinity = torch.exp(-beta * (1 - v @ W.T))
    return affinity @ torch.nn.functional.one_hot(class_of, n_classes).to(affinity.dtype)


def test_memory_checker_accepts_a_right_answer_and_names_mistakes():
    report = ex.check_memory_logits(_memory_logits)
    assert report.passed and report.score == 2

    def best_only(v, W, class_of, n, beta):
        a = torch.exp(-beta * (1 - v @ W.T))
        return torch.stack([a[:, class_of == c].amax(1) for c in range(n)], 1)

    assert "best memory vector (a max)" in str(ex.check_memory_logits(best_only))

    def normalised(v, W, class_of, n, beta):
        return _memory_logits(v, torch.nn.functional.normalize(W, dim=1), class_of, n, beta)

    assert "you normalise the memory vectors" in str(ex.check_memory_logits(normalised))

    def no_one_minus(v, W, class_of, n, beta):
        return torch.exp(beta * v @ W.T) @ torch.nn.functional.one_hot(class_of, n).float()

    assert "exp(beta * v.w)" in str(ex.check_memory_logits(no_one_minus))

    def no_beta(v, W, class_of, n, beta):
        return _memory_logits(v, W, class_of, n, 1.0)

    assert "ignores beta" in str(ex.check_memory_logits(no_beta))

    def unsummed(v, W, class_of, n, beta):
        return torch.exp(-beta * (1 - v @ W.T))

    assert "returned shape (2, 3), expected (2, 2)" in str(ex.check_memory_logits(unsummed))

    def stub(*args):
        raise NotImplementedError()

    report = ex.check_memory_logits(stub)
    assert report.not_done and report.score == 0


def test_forgetting_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_forgetting(lada.forgetting).passed

    def diagonal(A):
        return np.mean([A[k, k] - A[-1, k] for k in range(len(A) - 1)])

    assert "right after it was learned" in str(ex.check_forgetting(diagonal))

    def with_last_row(A):
        return np.mean([np.max(A[k:, k]) - A[-1, k] for k in range(len(A) - 1)])

    assert "over the last row too" in str(ex.check_forgetting(with_last_row))

    def nan_max(A):
        return np.mean([np.max(A[:, k]) - A[-1, k] for k in range(len(A) - 1)])

    assert "you return NaN" in str(ex.check_forgetting(nan_max))

    def percent(A):
        return 100 * lada.forgetting(A)

    assert "percentage" in str(ex.check_forgetting(percent))

    def all_tasks(A):
        K = len(A)
        return np.sum([np.nanmax(A[k:, k]) - A[-1, k] for k in range(K)]) / K

    assert "over all K tasks" in str(ex.check_forgetting(all_tasks))


def _sample(m, v, w, eta, g):
    return m + v.sqrt()[:, None] * torch.randn(m.shape, generator=g), w * eta


def test_sampling_checker_accepts_a_right_answer_and_names_mistakes():
    assert ex.check_sample_prototypes(_sample).passed
    assert "by the variance" in str(ex.check_sample_prototypes(
        lambda m, v, w, e, g: (m + v[:, None] * torch.randn(m.shape, generator=g), w * e)))
    assert "means without noise" in str(ex.check_sample_prototypes(lambda m, v, w, e, g: (m, w * e)))
    assert "multiplies them by eta" in str(ex.check_sample_prototypes(
        lambda m, v, w, e, g: (_sample(m, v, w, e, g)[0], w)))
    assert "normalise the pseudo-features" in str(ex.check_sample_prototypes(
        lambda m, v, w, e, g: (torch.nn.functional.normalize(_sample(m, v, w, e, g)[0], dim=1), w * e)))
    assert "generator you are given" in str(ex.check_sample_prototypes(
        lambda m, v, w, e, g: (m + v.sqrt()[:, None] * torch.randn(m.shape), w * e)))
    reseeded = lambda m, v, w, e, g: _sample(m, v, w, e, torch.Generator().manual_seed(7))
    assert "fresh pseudo-features" in str(ex.check_sample_prototypes(reseeded))
