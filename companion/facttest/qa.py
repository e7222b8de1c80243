"""A small "language model" that knows some facts: a synthetic knowledge-QA task on the CPU.

The world has entities x relations with one true object each (``truth``). A training corpus
mentions facts with Zipf-distributed entity popularity, so popular facts are seen often and rare
ones never. A tenth of the entities carry a *misconception*: most of their mentions state a
fixed wrong object, so the model learns to be confidently wrong about them (the hallucinations
a certainty score cannot catch). A small MLP over entity and relation embeddings is trained on
the corpus; its greedy answer is the argmax, and certainty scores come from its output
distribution or from K answers sampled at temperature 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from companion.validation import as_generator, as_instance, as_positive_int, as_probability

from .scores import max_prob_score, predictive_entropy_score, vanilla_entropy_score
from .shift import logistic_regression

__all__ = ["KnowledgeWorld", "FactMLP", "train_fact_model", "answer_questions", "learned_abstention"]


@dataclass
class KnowledgeWorld:
    """Facts (entity, relation) -> object, with misconceptions; built from ``seed``."""

    n_entities: int = 3000
    n_relations: int = 5
    n_objects: int = 40
    misconception_frac: float = 0.10
    misconception_rate: float = 0.80
    noise: float = 0.05
    seed: int = 0
    truth: np.ndarray = field(init=False, repr=False)
    wrong: np.ndarray = field(init=False, repr=False)
    misconceived: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        as_positive_int(self.n_entities, "n_entities")
        as_positive_int(self.n_relations, "n_relations")
        as_positive_int(self.n_objects, "n_objects", minimum=2)
        for name in ("misconception_frac", "misconception_rate", "noise"):
            as_probability(getattr(self, name), name, low_open=False, high_open=False)
        rng = np.random.default_rng(self.seed)
        shape = (self.n_entities, self.n_relations)
        self.truth = rng.integers(self.n_objects, size=shape)
        self.wrong = (self.truth + rng.integers(1, self.n_objects, size=shape)) % self.n_objects
        self.misconceived = rng.random(self.n_entities) < self.misconception_frac

    def law(self, exponent: float) -> np.ndarray:
        """Entity popularity p(e) proportional to (e + 1)^(-exponent)."""
        p = (np.arange(self.n_entities) + 1.0) ** (-float(exponent))
        return p / p.sum()

    def questions(self, n: int, exponent: float, rng) -> tuple[np.ndarray, np.ndarray]:
        """n questions (entity, relation), entity ~ law(exponent), relation uniform."""
        rng = as_generator(rng)
        n = as_positive_int(n, "n")
        return rng.choice(self.n_entities, size=n, p=self.law(exponent)), rng.integers(self.n_relations, size=n)

    def corpus(self, n: int, rng, exponent: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """n training mentions (entity, relation, stated object): misconceptions and label noise included."""
        rng = as_generator(rng)
        e, r = self.questions(n, exponent, rng)
        obj = self.truth[e, r].copy()
        lie = self.misconceived[e] & (rng.random(n) < self.misconception_rate)
        obj[lie] = self.wrong[e, r][lie]
        noisy = rng.random(n) < self.noise
        obj[noisy] = rng.integers(self.n_objects, size=int(noisy.sum()))
        return e, r, obj


class FactMLP(nn.Module):
    """Entity embedding (32) + relation embedding (16) -> 128 ReLU units -> logits over objects."""

    def __init__(self, n_entities: int, n_relations: int, n_objects: int, d_entity: int = 32,
                 d_relation: int = 16, hidden: int = 128):
        super().__init__()
        for name, value in (("n_entities", n_entities), ("n_relations", n_relations), ("n_objects", n_objects),
                            ("d_entity", d_entity), ("d_relation", d_relation), ("hidden", hidden)):
            as_positive_int(value, name)
        self.entity = nn.Embedding(n_entities, d_entity)
        self.relation = nn.Embedding(n_relations, d_relation)
        self.hidden = nn.Sequential(nn.Linear(d_entity + d_relation, hidden), nn.ReLU())
        self.out = nn.Linear(hidden, n_objects)

    def features(self, e: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.hidden(torch.cat([self.entity(e), self.relation(r)], dim=-1))

    def forward(self, e: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.out(self.features(e, r))


def train_fact_model(world: KnowledgeWorld, corpus, *, epochs: int = 5, lr: float = 3e-3, batch: int = 256,
                     seed: int = 0, progress=None) -> tuple[FactMLP, list[float]]:
    """Train a :class:`FactMLP` on ``corpus`` = (e, r, object) with Adam; returns (model, epoch losses).

    ``progress`` wraps the epoch iterator (e.g. ``companion.book.progress``).
    """
    as_instance(world, "world", KnowledgeWorld)
    torch.manual_seed(seed)
    model = FactMLP(world.n_entities, world.n_relations, world.n_objects)
    e, r, o = (torch.as_tensor(np.asarray(a), dtype=torch.long) for a in corpus)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    losses = []
    epochs_iter = range(as_positive_int(epochs, "epochs"))
    for _ in progress(epochs_iter) if progress else epochs_iter:
        perm, total = torch.randperm(len(e), generator=gen), 0.0
        for start in range(0, len(e), batch):
            idx = perm[start:start + batch]
            loss = nn.functional.cross_entropy(model(e[idx], r[idx]), o[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(e))
    return model.eval(), losses


@torch.no_grad()
def answer_questions(model: FactMLP, world: KnowledgeWorld, e, r, rng, *, K: int = 15,
                     temperature: float = 1.0) -> dict:
    """The greedy answer, its correctness and certainty scores of each question.

    Keys: ``answer``, ``correct``, ``ve`` (minus the entropy of K answers sampled at
    ``temperature``; the paper's default score), ``pe`` (minus the predictive entropy),
    ``maxp`` (top probability), ``hidden`` (the 128 hidden activations, for a learned detector).
    """
    as_instance(model, "model", FactMLP), as_instance(world, "world", KnowledgeWorld)
    rng = as_generator(rng)
    et, rt = torch.as_tensor(e, dtype=torch.long), torch.as_tensor(r, dtype=torch.long)
    hidden = model.features(et, rt)
    logits = model.out(hidden)
    probs = torch.softmax(logits, dim=-1).numpy().astype(float)
    sample_probs = torch.softmax(logits / temperature, dim=-1).numpy().astype(float)
    answer = probs.argmax(axis=1)
    cdf = np.cumsum(sample_probs, axis=1)
    u = rng.random((len(answer), as_positive_int(K, "K"), 1))
    samples = (u > cdf[:, None, :-1]).sum(axis=2)
    return dict(answer=answer, correct=answer == world.truth[e, r], ve=vanilla_entropy_score(samples),
                pe=predictive_entropy_score(probs), maxp=max_prob_score(probs), hidden=hidden.numpy().astype(float))


def _detector_features(answers: dict) -> np.ndarray:
    return np.column_stack([answers["ve"], answers["pe"], answers["maxp"], answers["hidden"]])


def learned_abstention(cal: dict, test: dict, *, l2: float = 1e-3) -> np.ndarray:
    """A learned detector without a guarantee (a stand-in for probing and refusal-tuning baselines).

    A logistic regression of correctness on [ve, pe, maxp, hidden activations] (standardised),
    fitted on the calibration answers ``cal``; answers a ``test`` question (``True``) iff it
    predicts P(correct) >= 1/2. ``cal`` and ``test`` are outputs of :func:`answer_questions`.
    """
    keys = {"ve", "pe", "maxp", "hidden"}
    for name, d, need in (("cal", cal, keys | {"correct"}), ("test", test, keys)):
        missing = need - set(d)
        if missing:
            raise ValueError(f"{name}: expected the dict of answer_questions, missing {sorted(missing)}")
    x_cal, x_test = _detector_features(cal), _detector_features(test)
    mu, sd = x_cal.mean(axis=0), x_cal.std(axis=0) + 1e-9
    beta = logistic_regression((x_cal - mu) / sd, cal["correct"], l2=l2)
    return beta[0] + ((x_test - mu) / sd) @ beta[1:] >= 0
