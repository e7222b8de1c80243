"""Running a learner over the stream, and the continual-learning metrics of the chapter.

``A[j, k]`` is the accuracy on task k's test set after learning task j, with predictions among
every class seen by then; NaN above the diagonal (eq. (lada-forgetting) and the text around it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["StreamResult", "run_stream", "last", "forgetting", "average_incremental", "task_recall",
           "new_task_share", "check_accuracy_matrix", "summary_table"]


def check_accuracy_matrix(A) -> np.ndarray:
    """``A`` as a square float array of at least 2 tasks, finite on and below the diagonal."""
    try:
        A = np.asarray(A, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"A: expected a square (K, K) array of accuracies, got {type(A).__name__}") from None
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"A: expected a square (K, K) accuracy matrix with K >= 2, got shape {A.shape}")
    low = np.tril(np.ones_like(A, dtype=bool))
    if not np.isfinite(A[low]).all():
        raise ValueError("A: entries on and below the diagonal must be finite accuracies")
    if np.any((A[low] < 0) | (A[low] > 1)):
        bad = A[low][(A[low] < 0) | (A[low] > 1)][0]
        raise ValueError(f"A: accuracies on and below the diagonal must lie in [0, 1], got {bad}")
    return A


def last(A) -> float:
    """Last: the mean over tasks of the accuracy after the final task, mean_k A[K, k]."""
    A = check_accuracy_matrix(A)
    return float(A[-1].mean())


def forgetting(A) -> float:
    """(1/(K-1)) sum_{k<K} (max_{k<=j<K} A[j, k] - A[K, k]), eq. (lada-forgetting)."""
    A = check_accuracy_matrix(A)
    K = len(A)
    return float(np.mean([A[k:K - 1, k].max() - A[K - 1, k] for k in range(K - 1)]))


def average_incremental(step_accs) -> float:
    """Average incremental accuracy: the mean over steps of the accuracy on all seen test data."""
    a = np.asarray(step_accs, dtype=float)
    if a.ndim != 1 or a.size == 0 or not np.isfinite(a).all():
        raise ValueError(f"step_accs: expected a non-empty 1-D array of finite accuracies, got {a!r}")
    return float(a.mean())


def task_recall(selected, true) -> float:
    """The share of inputs whose selected task is their true task."""
    selected, true = torch.as_tensor(selected), torch.as_tensor(true)
    if selected.shape != true.shape or selected.numel() == 0:
        raise ValueError(f"selected: expected the non-empty shape of true {tuple(true.shape)}, "
                         f"got {tuple(selected.shape)}")
    for name, t in (("selected", selected), ("true", true)):
        if t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex():
            raise ValueError(f"{name}: expected integer task ids, got dtype {t.dtype}")
    return float((selected == true).double().mean())


def new_task_share(pred: torch.Tensor, y: torch.Tensor, new_classes: list[int]) -> float:
    """Among old-class samples (label not in ``new_classes``), the share predicted as a new class."""
    pred, y = torch.as_tensor(pred), torch.as_tensor(y)
    if y.ndim != 1:
        raise ValueError(f"y: expected a 1-D tensor of labels, got shape {tuple(y.shape)}")
    if pred.shape != y.shape:
        raise ValueError(f"pred: expected the shape of y {tuple(y.shape)}, got {tuple(pred.shape)}")
    if len(new_classes) == 0:
        raise ValueError("new_classes: expected the ids of at least one new class, got none")
    new = torch.tensor(new_classes, device=y.device)
    old = ~torch.isin(y, new)
    if not old.any():
        raise ValueError("y: expected at least one sample of an old class")
    return float(torch.isin(pred[old], new).double().mean())


@dataclass
class StreamResult:
    """What one learner did over the stream."""

    A: np.ndarray  # (K, K) accuracy matrix, NaN above the diagonal
    seen_acc: np.ndarray  # (K,) accuracy on all seen test data after each step
    new_share: np.ndarray  # (K,) old-class test samples predicted as the newest task; NaN at step 0
    recall: np.ndarray  # (K,) task recall of a selector (NaN for learners without one)
    params: np.ndarray  # (K,) parameters after each step
    seconds_per_step: float  # mean wall time of one optimiser step (NaN if nothing is trained)


def _evaluate(learner, stream, j, select, out) -> None:
    """Fill row j of ``out`` (a dict of arrays) after the learner has learned task j."""
    x = torch.cat([t.test_x for t in stream[: j + 1]])
    y = torch.cat([t.test_y for t in stream[: j + 1]])
    tid = torch.cat([torch.full((len(t.test_y),), k) for k, t in enumerate(stream[: j + 1])])
    pred = learner.predict(x, tid, select) if select else learner.predict(x)
    for k in range(j + 1):
        out["A"][j, k] = float((pred[tid == k] == y[tid == k]).double().mean())
    out["seen_acc"][j] = float((pred == y).double().mean())
    if j > 0:
        out["new_share"][j] = new_task_share(pred, y, stream[j].classes)
    if select in ("centroid", "confidence"):
        out["recall"][j] = task_recall(learner.last_selected.cpu(), tid)
    out["params"][j] = learner.num_params()


def _check_test_labels(task, j: int) -> None:
    """``task.test_y``: one integer label per test row, each among ``task.classes``."""
    y, name = task.test_y, f"stream[{j}].test_y"
    if not isinstance(y, torch.Tensor) or y.ndim != 1 or y.dtype.is_floating_point or y.dtype == torch.bool:
        raise ValueError(f"{name}: expected a 1-D integer tensor, got "
                         f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")
    if len(y) != len(task.test_x):
        raise ValueError(f"{name}: expected one label per row of test_x ({len(task.test_x)}), got {len(y)}")
    outside = ~torch.isin(y, torch.tensor(list(task.classes), dtype=y.dtype, device=y.device))
    if outside.any():
        raise ValueError(f"{name}: labels must be among the task's classes {list(task.classes)}, "
                         f"got {int(y[outside][0])}")


@torch.no_grad()
def run_stream(learner, stream, selects: tuple[str, ...] | None = None, after_task=None):
    """Learn the tasks of ``stream`` (features cached) in order, evaluating after every task.

    Returns a :class:`StreamResult`; for a :class:`~companion.lada.learners.TaskAdapters`,
    ``selects`` evaluates the same trained adapters with several selectors and returns a dict
    ``{select: StreamResult}``. ``after_task(j, learner)``, if given, is called after task j
    has been learned (to take a snapshot of the parameters, for instance).
    """
    if not stream:
        raise ValueError("stream: expected at least one task, got none")
    for j, task in enumerate(stream):
        _check_test_labels(task, j)
    K = len(stream)
    names = tuple(selects) if selects else (None,)
    outs = {s: {key: (np.full((K, K), np.nan) if key == "A" else np.full(K, np.nan))
                for key in ("A", "seen_acc", "new_share", "recall", "params")} for s in names}
    for j, task in enumerate(stream):
        with torch.enable_grad():
            learner.learn_task(task)
        if after_task is not None:
            after_task(j, learner)
        for s in names:
            _evaluate(learner, stream, j, s or getattr(learner, "select", None), outs[s])
    sps = learner.train_seconds / learner.train_steps if learner.train_steps else float("nan")
    results = {s: StreamResult(**o, seconds_per_step=sps) for s, o in outs.items()}
    return results if selects else results[None]


def summary_table(results: dict):
    """One row per method, means over seeds: Last, forgetting, average incremental accuracy, the
    new-task share at the final step, parameters after the stream and milliseconds per step.

    ``results`` maps a method's name to its list of :class:`StreamResult` (one per seed).
    """
    import pandas as pd

    if not isinstance(results, dict) or not results or any(not runs for runs in results.values()):
        raise ValueError("results: expected {method: [StreamResult, ...]} with at least one run each")
    rows = {}
    for name, runs in results.items():
        rows[name] = {
            "Last": np.mean([last(r.A) for r in runs]),
            "forgetting": np.mean([forgetting(r.A) for r in runs]),
            "avg. incremental": np.mean([average_incremental(r.seen_acc) for r in runs]),
            "new-task share": np.mean([r.new_share[-1] for r in runs]),
            "parameters": int(runs[0].params[-1]),
            "seeds": len(runs),
        }
    return pd.DataFrame(rows).T.astype({"parameters": int, "seeds": int})
