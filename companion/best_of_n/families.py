"""Reference distributions of the chapter (brief §4): uniform, cherry-picked, random, Markov LM."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import xlogy

from companion.validation import as_1d_float_array, as_float_array, as_generator, as_positive_int

MAX_SEQUENCES = 1 << 24  # markov_lm enumerates vocab**length sequences


class Reference(NamedTuple):
    probs: np.ndarray  # (L,) pi
    rewards: np.ndarray  # (L,) r, float64


class MarkovLM(NamedTuple):
    probs: np.ndarray  # (V**T,) reference probability of every sequence
    sequences: np.ndarray  # (V**T, T) int64 tokens, in lexicographic order
    loglik: np.ndarray  # (V**T,) log pi(sequence): bit-identical for equal (first token, transition counts)
    count0: np.ndarray  # (V**T,) number of tokens equal to 0, float64


def uniform(L: int) -> Reference:
    """pi = 1/L on L outcomes with rewards 0, 1, ..., L - 1."""
    L = as_positive_int(L, "L")
    return Reference(np.full(L, 1.0 / L), np.arange(L, dtype=np.float64))


def cherry_picked(eps: float = 1e-4) -> Reference:
    """The staircase reference: masses (1/2, 1/2 - eps, eps) with increasing rewards (0, 1, 2)."""
    eps = float(as_float_array(eps, "eps", low=0.0, high=0.5, low_open=True))
    return Reference(np.array([0.5, 0.5 - eps, eps]), np.arange(3, dtype=np.float64))


def random_reference(rng: np.random.Generator, L_max: int = 200) -> Reference:
    """L ~ U{2..L_max}, pi ~ Dirichlet(alpha 1) with log10 alpha ~ U(-2, 1), rewards 0..L-1.

    The Dirichlet is exchangeable, so fixed increasing rewards lose no generality
    (a random permutation of them would give the same law of (pi, ranks)).
    """
    rng = as_generator(rng)
    L = int(rng.integers(2, as_positive_int(L_max, "L_max", minimum=2) + 1))
    alpha = 10.0 ** rng.uniform(-2.0, 1.0)
    return Reference(rng.dirichlet(np.full(L, alpha)), np.arange(L, dtype=np.float64))


def rounded_rewards(rewards, k: int) -> np.ndarray:
    """Rewards rounded to k equally spaced levels 0..k-1 over [min r, max r] (creates ties)."""
    r = as_1d_float_array(rewards, "rewards")
    k = as_positive_int(k, "k")
    span = r.max() - r.min()
    if span == 0:
        return np.zeros_like(r)
    return np.minimum(np.floor(k * (r - r.min()) / span), k - 1)


def markov_lm(alpha: float, *, vocab: int = 4, length: int = 6, rng: np.random.Generator) -> MarkovLM:
    """A first-order Markov "language model" over all vocab**length sequences.

    First-token law and each transition row ~ Dirichlet(alpha 1) (alpha = 0.1: low
    entropy, 10: high entropy).  log pi(s) = log p0(s_1) + sum_{a,b} c_ab(s) log T_ab,
    summed over transitions (a, b) in a fixed order, so sequences with equal first
    token and transition counts c(s) have *exactly* equal log-likelihoods (ties).
    """
    alpha = float(as_float_array(alpha, "alpha", low=0.0, low_open=True))
    V = as_positive_int(vocab, "vocab", minimum=2)
    T = as_positive_int(length, "length")
    if V**T > MAX_SEQUENCES:
        raise ValueError(f"length: vocab**length = {V}**{T} sequences, more than {MAX_SEQUENCES}")
    rng = as_generator(rng)
    first = rng.dirichlet(np.full(V, alpha))
    transition = rng.dirichlet(np.full(V, alpha), size=V).ravel()  # index a * V + b
    sequences = np.indices((V,) * T).reshape(T, -1).T.astype(np.int64)
    N = sequences.shape[0]
    pairs = sequences[:, :-1] * V + sequences[:, 1:]
    counts = np.bincount((np.arange(N)[:, None] * V * V + pairs).ravel(), minlength=N * V * V).reshape(N, V * V)
    loglik = np.log(first[sequences[:, 0]])
    for ab in range(V * V):  # fixed summation order => equal counts give bit-identical sums
        loglik = loglik + xlogy(counts[:, ab], transition[ab])
    return MarkovLM(np.exp(loglik), sequences, loglik, (sequences == 0).sum(axis=1).astype(np.float64))
