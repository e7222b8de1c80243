"""Checkers for the exercises of the chapter *WorMI: world model implanting*.

* :func:`check_abstract_transition` -- exercise 1, ``phi(s, a, s')`` (``wormi-phi``), 1 point;
* :func:`check_retrieval_scores` -- exercise 2, the trajectory score of every world
  (``wormi-retrieve``), 2 points;
* :func:`check_world_weights` -- exercise 3, the masked world weights ``beta`` (``wormi-beta``), 1 point.

Each runs the student's function on cases built to expose one mistake each, compares the answer
with :mod:`companion.wormi` and names the mistake it recognises.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion.exercises import Report, eq
from companion.wormi.minihome import A, F, Domain
from companion.wormi.retrieval import PrototypeIndex, abstract_transition

__all__ = ["check_abstract_transition", "check_retrieval_scores", "check_world_weights"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade);
# the world weights are computed inside CompoundAttention.forward, which takes no logits.
REFERENCES = {"check_abstract_transition": ("companion.wormi.retrieval.abstract_transition",),
              "check_retrieval_scores": ("companion.wormi.retrieval.PrototypeIndex.score",
                                         "companion.wormi.retrieval.PrototypeIndex.distances"),
              "check_world_weights": ()}


def _transitions(n: int, seed: int):
    rng = np.random.default_rng(seed)
    domain = Domain({"lock"})
    s = domain.initial_states(n, rng)
    a = rng.integers(0, A, n)
    s_next, _ = domain.step(s, a)
    return s, a, s_next


def _named(report: Report, got: np.ndarray, want: np.ndarray, variants: dict, what: str) -> bool:
    if got.shape == want.shape and np.allclose(got, want, atol=1e-5):
        return report.check(True, "")
    named = [msg for v, msg in variants.values() if got.shape == v.shape and np.allclose(got, v, atol=1e-5)]
    return report.check(False, named[0] if named else f"wrong values for {what}.")


def check_abstract_transition(phi_fn: Callable) -> Report:
    """Check ``phi_fn(s (B, F) bool, a (B,) int, s_next (B, F) bool) -> (B, 2F + A)``, eq. (wormi-phi)."""
    report = Report("Exercise 1 (abstract transitions)", points=1)
    s, a, s_next = _transitions(12, seed=5)
    got = report.call_array(phi_fn, s.copy(), a.copy(), s_next.copy(), what="12 transitions of the lock domain")
    if got is None:
        return report
    want = abstract_transition(s, a, s_next)
    if not report.check(got.shape == want.shape, f"returned shape {got.shape}; expected (B, 2F + A) = "
                        f"{want.shape}: the state ({F}), the one-hot action ({A}) and the change ({F})."):
        return report
    onehot = np.eye(A)[a]
    variants = {
        "next": (np.concatenate([s, onehot, s_next], 1),
                 f"the last block is s', not the change s' - s of {eq('wormi-phi')}: a blocked action "
                 "(no change) must give a zero block, whatever the state."),
        "sign": (np.concatenate([s, onehot, s.astype(float) - s_next], 1),
                 "the change has the wrong sign: use s' - s (a fact that became true is +1)."),
        "order": (np.concatenate([onehot, s, s_next.astype(float) - s], 1),
                  "the blocks are in another order; keep [s, onehot(a), s' - s] so the prototypes match."),
    }
    _named(report, got, want, variants, "phi")
    return report


def _library(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    protos = [(rng.random((k, 2 * F + A)) < 0.2).astype(np.float32) for k in (5, 8, 3)]
    traj = (rng.random((6, 2 * F + A)) < 0.2).astype(np.float32)
    traj[0] = protos[1][2]  # one step matches a prototype of world 1 exactly
    return protos, traj


def check_retrieval_scores(score_fn: Callable) -> Report:
    """Check ``score_fn(traj_phi (t, P), prototypes list of (k_j, P)) -> (N,)``, eq. (wormi-retrieve)."""
    report = Report("Exercise 2 (retrieval scores)", points=2)
    protos, traj = _library(seed=11)
    got = report.call_array(score_fn, traj.copy(), [p.copy() for p in protos],
                            what="a trajectory of 6 steps, 3 worlds with 5, 8 and 3 prototypes")
    if got is None:
        return report
    want = PrototypeIndex(protos).score(traj)
    if not report.check(got.shape == (3,), f"returned shape {got.shape}; expected one score per world, (3,)."):
        return report
    d2 = [((traj[:, None] - p[None]) ** 2).sum(-1) for p in protos]  # (t, k_j)
    variants = {
        "sqrt": (np.array([np.sqrt(d).min(1).mean() for d in d2]),
                 f"you take Euclidean distances; {eq('wormi-retrieve')} uses squared distances."),
        "all": (np.array([d.mean() for d in d2]),
                "you average over all prototypes of a world; each step counts only its nearest "
                f"prototype (the min in {eq('wormi-retrieve')}), so one matching prototype is enough."),
        "sum": (np.array([d.min(1).sum() for d in d2]),
                "you sum over the steps; average them (divide by t) so trajectories of different "
                "lengths score on one scale."),
        "max": (np.array([d.max(1).mean() for d in d2]),
                "you take the farthest prototype; use the nearest one (min)."),
    }
    if not _named(report, got, want, variants, "the scores"):
        return report
    empty = report.call_array(score_fn, traj[:0].copy(), protos, what="an empty trajectory")
    if empty is not None:
        report.check(empty.shape == (3,) and np.allclose(empty, 0),
                     "an empty trajectory (before the first step) should score 0 for every world "
                     "(no evidence yet), without NaN.")
    return report


def check_world_weights(beta_fn: Callable) -> Report:
    """Check ``beta_fn(logits (B, n, K), mask (B, K) bool) -> (B, n, K)``, eq. (wormi-beta)."""
    report = Report("Exercise 3 (world weights)", points=1)
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(3, 4, 3, generator=gen)
    mask = torch.tensor([[True, True, True], [True, False, True], [False, False, False]])
    got = report.call(beta_fn, logits.clone(), mask.clone(), what="logits (3, 4, 3), mask (3, 3)")
    if got is None:
        return report
    got = torch.as_tensor(got, dtype=torch.float32)
    if not report.check(tuple(got.shape) == (3, 4, 3), f"returned shape {tuple(got.shape)}; expected (B, n, K)."):
        return report
    want = logits.masked_fill(~mask[:, None], float("-inf")).softmax(-1).nan_to_num(0.0)
    if not report.check(bool(torch.isfinite(got).all()),
                        "a row with no world present (all masked) must give weights 0, not NaN: "
                        "the policy is then pi_R unchanged."):
        return report
    variants = {
        "unmasked": (logits.softmax(-1), "absent worlds get weight: set their logits to -inf (or "
                     "zero their weights) before normalising over the worlds."),
        "axis": (logits.masked_fill(~mask[:, None], float("-inf")).softmax(1).nan_to_num(0.0),
                 f"you normalise over the reasoning tokens; {eq('wormi-beta')} normalises over the "
                 "worlds j (the last axis), one distribution per token."),
    }
    _named(report, got.numpy(), want.numpy(), {k: (v.numpy(), m) for k, (v, m) in variants.items()}, "beta")
    return report
