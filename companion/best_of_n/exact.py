"""Exact rational versions (``fractions.Fraction``) for tests and exercises.

Same conventions as :mod:`.core`: ``tie_break="random"`` shares a tie uniformly
among the tied draws; ``"index"`` gives it to the smallest outcome index.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import groupby, product
from math import prod
from typing import Callable, Iterator, Sequence

from companion.validation import as_choice, as_positive_int

from .core import TIE_BREAKS, TieBreak, Ties

MAX_TUPLES = 10**5  # brute_force_pmf refuses to enumerate more than this many n-tuples


def _fractions(values, name: str) -> list[Fraction]:
    try:
        out = [Fraction(v) for v in values]
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"{name}: expected a 1-D sequence of finite rationals ({err})") from None
    if not out:
        raise ValueError(f"{name}: expected a non-empty sequence, got an empty one")
    return out


def _reference(probs, rewards) -> tuple[list[Fraction], list[Fraction]]:
    p, r = _fractions(probs, "probs"), _fractions(rewards, "rewards")
    if len(r) != len(p):
        raise ValueError(f"rewards: expected the same length as probs ({len(p)}), got {len(r)}")
    negative = [i for i, x in enumerate(p) if x < 0]
    if negative:
        raise ValueError(f"probs: probabilities must be >= 0, got {p[negative[0]]} at index {negative[0]}")
    if sum(p) != 1:
        raise ValueError(f"probs: must sum to exactly 1 (got {sum(p)}); normalise with [x / sum(probs) for x in probs]")
    return p, r


def _rank_key(r: list[Fraction], tie_break: str) -> Callable[[int], object]:
    """Order of outcomes: by reward; for "index", ties ranked so that the smallest index is highest."""
    return (lambda i: r[i]) if tie_break == "random" else (lambda i: (r[i], -i))


def _levels(p, r, n, tie_break) -> Iterator[tuple[list[int], Fraction, Fraction, Fraction]]:
    """Yield (outcomes, pi(l), F^-(l), P_n(l)) for each level l by increasing reward, eq. (bon-pmf)."""
    key = _rank_key(r, tie_break)
    below = Fraction(0)
    for _, group in groupby(sorted(range(len(p)), key=key), key=key):
        group = list(group)
        mass = sum(p[i] for i in group)
        yield group, mass, below, (below + mass) ** n - below**n
        below += mass


def _checked(probs, rewards, n, tie_break):
    p, r = _reference(probs, rewards)
    return p, r, as_positive_int(n, "n"), as_choice(tie_break, "tie_break", TIE_BREAKS)


def best_of_n_pmf_exact(
    probs: Sequence, rewards: Sequence, n: int, *, tie_break: TieBreak = "random"
) -> list[Fraction]:
    """Eq. (bon-pmf-ties) in exact arithmetic: pi^(n)(y) = pi(y) / pi(l(y)) * P_n(l(y))."""
    p, r, n, tie_break = _checked(probs, rewards, n, tie_break)
    pmf = [Fraction(0)] * len(p)
    for group, mass, _, law in _levels(p, r, n, tie_break):
        for i in group:
            pmf[i] = p[i] / mass * law if mass else Fraction(0)
    return pmf


def brute_force_pmf(
    probs: Sequence, rewards: Sequence, n: int, *, tie_break: TieBreak = "random"
) -> list[Fraction]:
    """pi^(n) by enumerating all L**n draws (y_1..y_n) with weight prod_i pi(y_i).

    ``"random"``: each draw tied at the top reward gets an equal share of the weight.
    """
    p, r, n, tie_break = _checked(probs, rewards, n, tie_break)
    if n > MAX_TUPLES or len(p) ** n > MAX_TUPLES:
        raise ValueError(f"n: brute force would enumerate L**n = {len(p)}**{n} tuples, more than {MAX_TUPLES}")
    key = _rank_key(r, tie_break)
    pmf = [Fraction(0)] * len(p)
    for draws in product(range(len(p)), repeat=n):
        best = max(map(key, draws))
        winners = [i for i in draws if key(i) == best]
        weight = prod(p[i] for i in draws) / len(winners)
        for i in winners:
            pmf[i] += weight
    return pmf


def win_rate_exact(probs: Sequence, rewards: Sequence, n: int, *, ties: Ties = "half") -> Fraction:
    """Eq. (bon-winrate) in exact arithmetic: W_n = sum_l P_n(l) [F^-(l) + pi(l)/2] (``"lose"``: no 1/2)."""
    half = Fraction(1, 2) if as_choice(ties, "ties", ("half", "lose")) == "half" else Fraction(0)
    p, r, n, _ = _checked(probs, rewards, n, "random")
    return sum((law * (below + half * mass) for _, mass, below, law in _levels(p, r, n, "random")), Fraction(0))
