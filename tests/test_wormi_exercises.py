"""The WorMI exercise checkers: a right answer passes, each classic mistake is named, a stub is not done."""

import numpy as np

import companion.exercises.wormi as ex
from companion.wormi import A, PrototypeIndex, abstract_transition


def test_no_solution_is_exported():
    assert all(name.startswith("check_") for name in ex.__all__)


def test_abstract_transition_checker():
    assert ex.check_abstract_transition(abstract_transition).passed
    cases = {
        "s', not the change": lambda s, a, s2: np.concatenate([s, np.eye(A)[a], s2], 1),
        "wrong sign": lambda s, a, s2: np.concatenate([s, np.eye(A)[a], s.astype(float) - s2], 1),
        "another order": lambda s, a, s2: np.concatenate([np.eye(A)[a], s, s2.astype(float) - s], 1),
        "expected (B, 2F + A)": lambda s, a, s2: np.concatenate([s, s2.astype(float) - s], 1),
    }
    for phrase, wrong in cases.items():
        report = ex.check_abstract_transition(wrong)
        assert not report.passed and phrase in str(report), (phrase, str(report))


def test_retrieval_scores_checker():
    assert ex.check_retrieval_scores(lambda traj, protos: PrototypeIndex(protos).score(traj)).passed

    def d2(traj, p):
        return ((traj[:, None] - p[None]) ** 2).sum(-1)

    cases = {
        "nearest": lambda traj, protos: np.array([d2(traj, p).mean() for p in protos]),
        "squared distances": lambda traj, protos: np.array([np.sqrt(d2(traj, p)).min(1).mean() for p in protos]),
        "average them": lambda traj, protos: np.array([d2(traj, p).min(1).sum() for p in protos]),
        "farthest": lambda traj, protos: np.array([d2(traj, p).max(1).mean() for p in protos]),
        "empty trajectory": lambda traj, protos: np.array([d2(traj, p).min(1).mean() for p in protos]),
    }
    for phrase, wrong in cases.items():
        report = ex.check_retrieval_scores(wrong)
        assert not report.passed and phrase in str(report), (phrase, str(report))


def test_world_weights_checker():
    def right(logits, mask):
        return logits.masked_fill(~mask[:, None], float("-inf")).softmax(-1).nan_to_num(0.0)

    assert ex.check_world_weights(right).passed
    cases = {
        "absent worlds get weight": lambda logits, mask: logits.softmax(-1),
        "not NaN": lambda logits, mask: logits.masked_fill(~mask[:, None], float("-inf")).softmax(-1),
        "reasoning tokens": lambda logits, mask: logits.masked_fill(~mask[:, None], float("-inf"))
        .softmax(1).nan_to_num(0.0),
        "expected (B, n, K)": lambda logits, mask: logits[..., 0],
    }
    for phrase, wrong in cases.items():
        report = ex.check_world_weights(wrong)
        assert not report.passed and phrase in str(report), (phrase, str(report))
