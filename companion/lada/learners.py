"""The continual learners of the chapter, all on cached features of the frozen encoder.

Every learner has ``learn_task(task)`` (a :class:`~companion.lada.data.Task` whose ``train_x`` /
``test_x`` are raw features) and ``predict(v_raw)`` -> global class ids among all classes seen so
far, with no task id (class-incremental, task-agnostic). :class:`TaskAdapters` also takes the
true task of each input for its oracle and records which task its selector picked.

* :class:`FineTuneSeq` -- one growing linear head, trained on the current task only;
* :class:`NCM` -- nearest class mean by cosine; nothing trained;
* :class:`TaskAdapters` -- one residual adapter and head per task, and a task selector;
* :class:`LADALearner` -- the base framework (class vectors, old ones frozen), optionally with
  label-specific memory (eq. (lada-memory)) and DPT (eq. (lada-loss)).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from companion.validation import (as_choice, as_finite_tensor, as_float_array, as_index_tensor, as_positive,
                                  as_positive_int)

from .lada import CosineClassifier, DPTBank, LabelMemory, check_features, check_new_labels

__all__ = ["FineTuneSeq", "NCM", "TaskAdapters", "LADALearner", "class_means", "weighted_ce", "step_seconds"]


def _unit(v: torch.Tensor) -> torch.Tensor:
    return nn.functional.normalize(v, dim=1)


def class_means(v_norm: torch.Tensor, y: torch.Tensor, classes: list[int]) -> torch.Tensor:
    """Normalised mean of the normalised features of each class, ``(len(classes), d)``."""
    empty = [c for c in classes if not bool((y == c).any())]
    if empty:
        raise ValueError(f"classes: no sample of class {empty[0]} among the labels y")
    return _unit(torch.stack([v_norm[y == c].mean(0) for c in classes]))


def weighted_ce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(1/N) sum_i w_i CE(logits_i, y_i): the weighted cross-entropy of eq. (lada-loss), divided by
    the number of rows N (not by the sum of the weights)."""
    if logits.ndim != 2 or y.shape != (len(logits),) or w.shape != (len(logits),):
        raise ValueError(f"w: expected logits (N, C) with y and w of shape (N,), got {tuple(logits.shape)}, "
                         f"{tuple(y.shape)} and {tuple(w.shape)}")
    as_finite_tensor(w, "w", empty=True)
    if bool((w < 0).any()):
        raise ValueError(f"w: expected weights >= 0, got {float(w.min())}")
    return _weighted_ce(logits, y, w)


def _weighted_ce(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """:func:`weighted_ce` without the input checks (the training loop's path)."""
    return (nn.functional.cross_entropy(logits, y, reduction="none") * w).mean()


class _Learner:
    """Shared bookkeeping: input checks, the seen classes, the optimiser loop and its timing."""

    def __init__(self, dim: int, epochs: int = 30, lr: float = 1e-3, batch: int = 64, seed: int = 0):
        self.dim = as_positive_int(dim, "dim")
        self.epochs = as_positive_int(epochs, "epochs", minimum=0)
        self.lr, self.batch = as_positive(lr, "lr"), as_positive_int(batch, "batch")
        self.gen = torch.Generator().manual_seed(seed)
        self.n_classes, self.n_tasks = 0, 0
        self.train_seconds, self.train_steps = 0.0, 0

    def _check_task(self, task) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        x = check_features(task.train_x, "task.train_x", self.dim)
        classes = check_new_labels(task.train_y, self.n_classes, len(x))
        if sorted(task.classes) != classes:
            raise ValueError(f"task.classes: {task.classes} does not match the labels of task.train_y {classes}")
        return x, task.train_y.to(x.device), classes

    def _check_predict(self, v_raw: torch.Tensor) -> torch.Tensor:
        if self.n_tasks == 0:
            raise RuntimeError(f"{type(self).__name__}.predict: learn a task first")
        return _unit(check_features(v_raw, "v_raw", self.dim))

    def _optimise(self, params: list[torch.Tensor], n: int, loss_fn) -> None:
        """AdamW (weight decay 5e-4) with a one-cycle schedule stepped per batch, for ``epochs``
        passes over ``n`` rows; ``loss_fn(idx)`` gives the loss of one mini-batch."""
        steps_per_epoch = -(-n // self.batch)
        if self.epochs == 0:
            return
        opt = torch.optim.AdamW(params, lr=self.lr, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.lr,
                                                    total_steps=self.epochs * steps_per_epoch)
        start = time.perf_counter()
        for _ in range(self.epochs):
            for idx in torch.randperm(n, generator=self.gen).split(self.batch):
                loss = loss_fn(idx)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        self.train_seconds += time.perf_counter() - start
        self.train_steps += self.epochs * steps_per_epoch

    def _done(self, classes: list[int]) -> None:
        self.n_classes, self.n_tasks = classes[-1] + 1, self.n_tasks + 1


class FineTuneSeq(_Learner):
    """Sequential fine-tuning: a linear head over all seen classes, all of it trained on the current
    task's data only (cross-entropy over every seen class), no replay."""

    def __init__(self, dim: int, scale: float = 16.0, **kw):
        super().__init__(dim, **kw)
        self.scale = as_positive(scale, "scale")
        self.weight = torch.zeros(0, dim)
        self.bias = torch.zeros(0)

    def learn_task(self, task) -> None:
        x, y, classes = self._check_task(task)
        v = _unit(x)
        weight = nn.Parameter(torch.cat([self.weight.to(x.device), class_means(v, y, classes)]))
        bias = nn.Parameter(torch.cat([self.bias.to(x.device), torch.zeros(len(classes), device=x.device)]))
        self._optimise([weight, bias], len(v), lambda i: nn.functional.cross_entropy(
            self.scale * v[i] @ weight.T + bias, y[i]))
        self.weight, self.bias = weight.detach(), bias.detach()
        self._done(classes)

    def predict(self, v_raw: torch.Tensor) -> torch.Tensor:
        v = self._check_predict(v_raw)
        return (self.scale * v @ self.weight.T + self.bias).argmax(1)

    def num_params(self) -> int:
        return self.weight.numel() + self.bias.numel()


class NCM(_Learner):
    """Nearest class mean: the normalised mean feature of each class; predict the closest by cosine."""

    def __init__(self, dim: int, **kw):
        super().__init__(dim, epochs=0, **kw)
        self.means = torch.zeros(0, dim)

    def learn_task(self, task) -> None:
        x, y, classes = self._check_task(task)
        self.means = torch.cat([self.means.to(x.device), class_means(_unit(x), y, classes)])
        self._done(classes)

    def predict(self, v_raw: torch.Tensor) -> torch.Tensor:
        return (self._check_predict(v_raw) @ self.means.T).argmax(1)

    def num_params(self) -> int:
        return self.means.numel()


class _Adapter(nn.Module):
    """v -> normalise(v + W_2 GELU(W_1 v)), W_2 zero-initialised (the identity at the start)."""

    def __init__(self, dim: int, hidden: int = 32):
        super().__init__()
        self.down, self.up = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        return _unit(v + self.up(nn.functional.gelu(self.down(v))))


class TaskAdapters(_Learner):
    """Task-partitioned parameters: per task an adapter and a cosine head over that task's classes,
    trained on that task alone. At test time a selector picks one task per input:
    ``"centroid"`` (closest task key, the task's mean feature), ``"confidence"`` (the head with the
    largest softmax probability) or ``"oracle"`` (the true task, given to :meth:`predict`)."""

    def __init__(self, dim: int, select: str = "centroid", hidden: int = 32, scale: float = 16.0, **kw):
        super().__init__(dim, **kw)
        self.select = as_choice(select, "select", ("centroid", "confidence", "oracle"))
        self.hidden, self.scale = as_positive_int(hidden, "hidden"), as_positive(scale, "scale")
        self.adapters, self.heads, self.keys, self.first = [], [], [], []
        self.last_selected: torch.Tensor | None = None

    def learn_task(self, task) -> None:
        x, y, classes = self._check_task(task)
        v, local = _unit(x), y - classes[0]
        torch.manual_seed(int(torch.randint(1 << 30, (1,), generator=self.gen)))
        adapter = _Adapter(self.dim, self.hidden).to(x.device)
        head = nn.Parameter(class_means(v, y, classes))
        self._optimise([*adapter.parameters(), head], len(v), lambda i: nn.functional.cross_entropy(
            self.scale * adapter(v[i]) @ _unit(head).T, local[i]))
        self.adapters.append(adapter.requires_grad_(False))
        self.heads.append(_unit(head.detach()))
        self.keys.append(_unit(v.mean(0, keepdim=True))[0])
        self.first.append(classes[0])
        self._done(classes)

    @torch.no_grad()
    def predict(self, v_raw: torch.Tensor, task_id: torch.Tensor | None = None,
                select: str | None = None) -> torch.Tensor:
        """Global ids, with this learner's selector or ``select``; the selected task of each input
        is kept in ``last_selected``."""
        v = self._check_predict(v_raw)
        select = self.select if select is None else as_choice(select, "select", ("centroid", "confidence", "oracle"))
        logits = [self.scale * a(v) @ h.T for a, h in zip(self.adapters, self.heads)]
        if select == "oracle":
            if task_id is None or len(task_id) != len(v):
                raise ValueError("task_id: the oracle selector needs the true task of every input")
            # ids beyond the tasks learned would index adapters that do not exist
            chosen = as_index_tensor(task_id, "task_id", high=len(self.adapters), empty=True).to(v.device)
        elif select == "centroid":
            chosen = (v @ torch.stack(self.keys).T).argmax(1)
        else:
            chosen = torch.stack([l.softmax(1).amax(1) for l in logits], 1).argmax(1)
        self.last_selected = chosen
        out = torch.empty(len(v), dtype=torch.int64, device=v.device)
        for k, l in enumerate(logits):
            rows = chosen == k
            out[rows] = l[rows].argmax(1) + self.first[k]
        return out

    def num_params(self) -> int:
        per_adapter = sum(p.numel() for p in self.adapters[0].parameters()) if self.adapters else 0
        return per_adapter * len(self.adapters) + sum(h.numel() for h in self.heads) + self.dim * len(self.keys)


class LADALearner(_Learner):
    """The base framework (class vectors t_c, old ones frozen; cross-entropy over all seen classes),
    plus, when asked, LADA's label-specific memory (``use_memory``) and DPT (``use_dpt``):
    logits eq. (lada-logits), loss eq. (lada-loss).

    The defaults are the official ones: lambda_1 = 16, lambda_2 = 4, alpha = beta = 1, eta = 64 and
    CLIP's logit scale s = 100. ``dpt="pooled"`` is DPT's null (:meth:`DPTBank.sample`)."""

    def __init__(self, dim: int, use_memory: bool = True, use_dpt: bool = True, lam1: int = 16, lam2: int = 4,
                 alpha: float = 1.0, beta: float = 1.0, eta: float = 64.0, scale: float = 100.0,
                 dpt: str = "class", **kw):
        super().__init__(dim, **kw)
        self.dpt = as_choice(dpt, "dpt", ("class", "pooled"))
        self.lam1, self.lam2 = as_positive_int(lam1, "lam1"), as_positive_int(lam2, "lam2")
        if np.ndim(alpha) != 0:
            raise ValueError(f"alpha: expected a finite real number, got shape {np.shape(alpha)}")
        self.alpha = float(as_float_array(alpha, "alpha"))
        self.use_memory, self.use_dpt = bool(use_memory), bool(use_dpt)
        self.classifier = CosineClassifier(dim, as_positive(scale, "scale"))
        self.memory = LabelMemory(dim, beta) if use_memory else None
        self.bank = DPTBank(lam2, eta) if use_dpt else None

    def logits(self, v_norm: torch.Tensor) -> torch.Tensor:
        """l = s cos(v, t_c) + alpha l^lada_c(v), eq. (lada-logits), over every class added so far."""
        out = self.classifier(v_norm)
        if self.memory is not None:
            out = out + self.alpha * self.memory.blockwise(v_norm)
        return out

    def learn_task(self, task) -> None:
        x, y, classes = self._check_task(task)
        v = _unit(x)
        self.classifier.add_classes(class_means(v, y, classes))
        params = [self.classifier.current]
        if self.memory is not None:
            self.memory.add_classes(v, y, self.lam1)
            params.append(self.memory.current)
        replay = self.bank is not None and len(self.bank) > 0
        task_seed = int(torch.randint(1 << 30, (1,), generator=self.gen))
        gen = torch.Generator(device=x.device).manual_seed(task_seed)

        def loss(idx):
            feats, labels = v[idx], y[idx]
            weights = torch.ones(len(idx), device=x.device)
            if replay:  # fresh pseudo-features of every old class, at every step
                p, py, pw = self.bank.sample(gen, pooled=self.dpt == "pooled")
                feats = torch.cat([_unit(p), feats])
                labels, weights = torch.cat([py, labels]), torch.cat([pw, weights])
            return _weighted_ce(self.logits(feats), labels, weights)

        self._optimise(params, len(v), loss)
        self.classifier.freeze_current()
        if self.memory is not None:
            self.memory.freeze_current()
        if self.bank is not None:
            self.bank.fit_classes(x, y)
        self._done(classes)

    @torch.no_grad()
    def predict(self, v_raw: torch.Tensor) -> torch.Tensor:
        return self.logits(self._check_predict(v_raw)).argmax(1)

    def num_params(self) -> int:
        return self.classifier.num_params() + (self.memory.num_params() if self.memory is not None else 0)


def step_seconds(enc, images: torch.Tensor, labels: torch.Tensor, mode: str, steps: int = 20,
                 lam1: int = 16, batch: int = 64, seed: int = 0) -> float:
    """Mean wall time of one training step of LADA's heads (class vectors and memory) on a batch of
    ``batch`` images of one task, in one of three regimes:

    * ``"cached"`` -- on features cached once (what LADA does: no encoder in the loop);
    * ``"encoder-forward"`` -- the frozen encoder runs on every batch, without backward;
    * ``"encoder-backward"`` -- gradients also flow into (a copy of) the encoder, as when its
      parameters are adapted (the regime LADA avoids).
    """
    import copy

    mode = as_choice(mode, "mode", ("cached", "encoder-forward", "encoder-backward"))
    steps = as_positive_int(steps, "steps")
    classes = sorted(int(c) for c in torch.unique(labels))
    feats = _unit(torch.cat([enc(images[i: i + 512]) for i in range(0, len(images), 512)]).detach())
    y = torch.searchsorted(torch.tensor(classes, device=labels.device), labels)
    head, memory = CosineClassifier(enc.feat_dim), LabelMemory(enc.feat_dim)
    head.add_classes(class_means(feats, y, list(range(len(classes)))))
    memory.add_classes(feats, y, lam1)
    params = [head.current, memory.current]
    model = enc
    if mode == "encoder-backward":
        model = copy.deepcopy(enc).train().requires_grad_(True)
        params += list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=5e-4)
    gen = torch.Generator().manual_seed(seed)
    start = None
    for step in range(steps + 2):  # two warm-up steps
        if step == 2:
            start = time.perf_counter()
        idx = torch.randint(len(images), (batch,), generator=gen).to(images.device)
        if mode == "cached":
            v = feats[idx]
        elif mode == "encoder-forward":
            with torch.no_grad():
                v = _unit(model(images[idx]))
        else:
            v = _unit(model(images[idx]))
        loss = nn.functional.cross_entropy(head(v) + memory(v), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (time.perf_counter() - start) / steps
