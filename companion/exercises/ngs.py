"""Checkers for the exercises of the chapter *Neural Genetic Search*.

* :func:`check_tour_length` -- exercise 1, the batched length of closed tours (``ngs-length``), 1 point;
* :func:`check_crossover_mask` -- exercise 2, the cities a child may visit next (``ngs-cross``), 2 points;
* :func:`check_selection_pressure` -- exercise 3, how often the best tour is a parent (``ngs-rank``), 1 point;
* :func:`check_parent_weights` -- exercise 4, selection with deduplication (``ngs-rank``), 2 points.

Each runs the student's function on cases built to expose one mistake each, compares it with
:mod:`companion.ngs` (or, for exercise 3, with a private exact formula that the tests check
against the package's own sampler), and names the mistake it recognises.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from companion.exercises import Report, eq
from companion.ngs.policy import allowed_mask
from companion.ngs.search import edge_hash, parent_neighbours, parent_weights
from companion.ngs.tsp import generate_tsp, tour_length

__all__ = ["check_tour_length", "check_crossover_mask", "check_selection_pressure", "check_parent_weights"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_tour_length": ("companion.ngs.tsp.tour_length",),
              "check_crossover_mask": ("companion.ngs.policy.allowed_mask", "companion.ngs.search.parent_neighbours"),
              "check_selection_pressure": (),
              "check_parent_weights": ("companion.ngs.search.parent_weights",)}


def _tensor(report: Report, fn: Callable, *args, what: str):
    """The student's ``fn(*args)`` as a tensor, or ``None`` (the report says why)."""
    out = report.call(fn, *args, what=what)
    if out is None:
        return None
    try:
        return torch.as_tensor(out)
    except (TypeError, ValueError, RuntimeError):
        report.check(False, f"returned {type(out).__name__}, not a tensor ({what})")
        return None


def _random_tours(B: int, S: int, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(B, S, n, generator=gen).argsort(-1)


def check_tour_length(length_fn: Callable) -> Report:
    """Check ``length_fn(coords (B, n, 2), tours (B, S, n)) -> (B, S)``, eq. (ngs-length)."""
    report = Report("Exercise 1 (tour lengths, batched)", points=1)
    coords = generate_tsp(3, 6, seed=7)
    tours = _random_tours(3, 4, 6, seed=8)
    before = (coords.clone(), tours.clone())
    got = _tensor(report, length_fn, coords, tours, what="coords (3, 6, 2), tours (3, 4, 6)")
    if got is None:
        return report
    if not report.check(torch.equal(coords, before[0]) and torch.equal(tours, before[1]),
                        "your function changed its inputs (coords or tours) in place."):
        return report
    if not report.check(tuple(got.shape) == (3, 4), f"returned shape {tuple(got.shape)}; expected (B, S) = (3, 4), "
                        "one length per tour of every instance."):
        return report
    got = got.double()
    want = tour_length(coords, tours).double()
    xy = coords[torch.arange(3)[:, None, None], tours]  # (B, S, n, 2)
    steps = xy[:, :, 1:] - xy[:, :, :-1]
    variants = {
        "open": (steps.norm(dim=-1).sum(-1),
                 f"you leave out the closing edge from the last city back to the first: a tour is a cycle "
                 f"(pi_(n+1) = pi_1 in {eq('ngs-length')}); rolling the tour by one position handles it."),
        "squared": (((xy - xy.roll(-1, 2)) ** 2).sum(-1).sum(-1),
                    "you sum squared distances; take the square root of each edge's squared length first."),
        "instance0": (tour_length(coords[:1].expand(3, 6, 2), tours).double(),
                      "every instance is measured with the cities of instance 0: index the coordinates of "
                      "instance b with the tours of instance b (gather along the city axis)."),
        "manhattan": ((xy - xy.roll(-1, 2)).abs().sum(-1).sum(-1),
                      "you use the Manhattan (L1) distance; the TSP here is Euclidean."),
    }
    if not torch.allclose(got, want, atol=1e-5):
        named = [msg for v, msg in variants.values() if torch.allclose(got, v.double(), atol=1e-5)]
        report.check(False, named[0] if named else
                     f"wrong lengths: got {got[0].tolist()} for instance 0, expected {want[0].tolist()}.")
        return report
    report.check(True, "")
    # one tour per instance, and a tour given in another rotation and direction: same length
    t = tours[:, :1]
    a = _tensor(report, length_fn, coords, t, what="S = 1")
    b = _tensor(report, length_fn, coords, t.roll(2, -1).flip(-1), what="a rotated, reversed tour")
    if a is not None and b is not None:
        report.check(tuple(a.shape) == (3, 1) and torch.allclose(a.double(), b.double(), atol=1e-5),
                     "the length of a tour must not depend on where it starts or its direction, and S = 1 must "
                     "give shape (B, 1).")
    return report


def _package_mask(tour_a, tour_b, current, visited) -> torch.Tensor:
    """The package's own crossover restriction for one child per row (m_t = 1)."""
    B, n = tour_a.shape
    allowed = parent_neighbours(torch.stack([tour_a, tour_b], 1), torch.tensor([0, 1]).expand(B, 1, 2))
    return allowed_mask(allowed, current[:, None], n)[:, 0] & ~visited


def _mask_variants(tour_a, tour_b, current, visited) -> dict:
    B, n = tour_a.shape
    ar = torch.arange(B)

    def by(tours, shifts, wrap=True, by_position=False):
        mask = torch.zeros(B, n, dtype=torch.bool)
        for tour in tours:
            pos = current if by_position else tour.argsort(-1)[ar, current]
            for s in shifts:
                nxt = pos + s
                ok = torch.ones(B, dtype=torch.bool) if wrap else (nxt >= 0) & (nxt < n)
                mask[ar[ok], tour[ar, nxt % n][ok]] = True
        return mask

    both = (tour_a, tour_b)
    return {
        "directed": (by(both, (1,)) & ~visited,
                     "you only allow the successor of the current city in each parent. Edges are undirected: "
                     "a tour read backwards is the same tour, so the predecessor counts too (up to 4 cities)."),
        "unvisited": (by(both, (-1, 1)),
                      f"your mask allows cities that are already visited. AND the parents' neighbours with the "
                      f"unvisited cities ({eq('ngs-cross')}); if nothing is left, that step becomes a (forced) "
                      "mutation."),
        "position": (by(both, (-1, 1), by_position=True) & ~visited,
                     "you take the cities at positions current-1 and current+1 of each parent, i.e. you treat the "
                     "city's number as its position in the tour. Find where the current city sits in each parent "
                     "(its inverse permutation) and take the cities beside it."),
        "nowrap": (by(both, (-1, 1), wrap=False) & ~visited,
                   "you miss the closing edge: the first and last cities of a parent tour are neighbours "
                   "(index modulo n)."),
        "one parent": (by((tour_a,), (-1, 1)) & ~visited,
                       "you use only the first parent; crossover allows the edges of both."),
    }


def check_crossover_mask(mask_fn: Callable) -> Report:
    """Check ``mask_fn(tour_a (B, n), tour_b (B, n), current (B,), visited (B, n) bool) -> (B, n) bool``."""
    report = Report("Exercise 2 (the crossover mask)", points=2)
    n, B = 9, 64
    tours = _random_tours(B, 2, n, seed=3)
    tour_a, tour_b = tours[:, 0], tours[:, 1]
    gen = torch.Generator().manual_seed(4)
    current = torch.randint(n, (B,), generator=gen)
    current[:8] = tour_a[:8, 0]  # the first or last city of parent a: catches a missing wrap-around
    current[8:16] = tour_a[8:16, -1]
    visited = torch.rand(B, n, generator=gen) < 0.3
    visited[torch.arange(B), current] = True
    args = (tour_a.clone(), tour_b.clone(), current.clone(), visited.clone())
    got = _tensor(report, mask_fn, *args, what=f"B = {B} children, n = {n}")
    if got is None:
        return report
    if not report.check(all(torch.equal(x, y) for x, y in zip(args, (tour_a, tour_b, current, visited))),
                        "your function changed its inputs in place."):
        return report
    if not report.check(tuple(got.shape) == (B, n), f"returned shape {tuple(got.shape)}; expected (B, n) = ({B}, {n})."):
        return report
    got = got.bool()
    want = _package_mask(tour_a, tour_b, current, visited)
    if not torch.equal(got, want):
        named = [msg for v, msg in _mask_variants(tour_a, tour_b, current, visited).values() if torch.equal(got, v)]
        wrong = int((got != want).any(1).nonzero()[0])
        report.check(False, named[0] if named else
                     f"child {wrong}: current city {int(current[wrong])}, parents {tour_a[wrong].tolist()} and "
                     f"{tour_b[wrong].tolist()}, visited {visited[wrong].nonzero().flatten().tolist()}: you allow "
                     f"{got[wrong].nonzero().flatten().tolist()}, expected {want[wrong].nonzero().flatten().tolist()}.")
        return report
    report.check(True, "")
    same = _tensor(report, mask_fn, tour_a, tour_a, current, visited, what="both parents equal")
    if same is not None:
        report.check(torch.equal(same.bool(), _package_mask(tour_a, tour_a, current, visited)),
                     "with two equal parents the child may only follow that parent's edges (2 neighbours).")
    return report


def _rank_w(P: int, kappa: float) -> np.ndarray:
    w = 1.0 / (kappa * P + np.arange(P))
    return w / w.sum()


def _p_best_parent(P: int, kappa: float) -> float:
    """P(rank 0 is one of 2 parents drawn without replacement with the weights of eq. (ngs-rank))."""
    w = _rank_w(P, kappa)
    return float(w[0] + (w[1:] * w[0] / (1 - w[1:])).sum())


def check_selection_pressure(p_fn: Callable) -> Report:
    """Check ``p_fn(P, kappa) -> float``: the probability that the shortest of P distinct tours is
    one of the two parents of a child (two draws without replacement, eq. (ngs-rank))."""
    report = Report("Exercise 3 (selection pressure)", points=1)
    cases = [(50, 0.001), (50, 0.1), (50, 10.0), (100, 0.001), (2, 1.0), (10, 0.5)]
    for P, kappa in cases:
        got = report.call_number(p_fn, P, kappa, what=f"P = {P}, kappa = {kappa}")
        if got is None:
            return report
        want = _p_best_parent(P, kappa)
        if abs(got - want) <= 1e-9:
            report.check(True, "")
            continue
        w = _rank_w(P, kappa)
        raw = 1.0 / (kappa * P + np.arange(P))
        named = {
            "one draw": (w[0], "you give the probability that the first parent is the best tour; the child has "
                               "two parents, and the best can also be drawn second, after another tour."),
            "with replacement": (1 - (1 - w[0]) ** 2,
                                 "you draw the two parents with replacement; they are drawn without it (two "
                                 "distinct tours), so after a first pick j the best has probability w_0 / (1 - w_j)."),
            "unnormalised": (raw[0] + (raw[1:] * raw[0] / np.clip(1 - raw[1:], 1e-12, None)).sum(),
                             f"your weights do not sum to one: normalise the w(r) of {eq('ngs-rank')} first."),
            "kappa alone": (_p_best_parent_kappa(P, kappa),
                            f"you use 1 / (kappa + r); {eq('ngs-rank')} scales kappa by the population size P."),
        }
        msg = next((m for v, m in named.values() if abs(v - got) <= 1e-9), None)
        report.check(False, msg or f"for P = {P}, kappa = {kappa} you return {got:.6g}; the exact probability is "
                                   f"{want:.6g}.")
        return report
    return report


def _p_best_parent_kappa(P: int, kappa: float) -> float:
    w = 1.0 / (kappa + np.arange(P))
    w = w / w.sum()
    return float(w[0] + (w[1:] * w[0] / (1 - w[1:])).sum())


def _population(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Populations ``(B, P, n)`` holding rotated, reversed and exact copies, with their lengths."""
    gen = torch.Generator().manual_seed(seed)
    B, P, n = 6, 8, 7
    coords = generate_tsp(B, n, seed=seed)
    tours = torch.rand(B, P, n, generator=gen).argsort(-1)
    tours[:, 3] = tours[:, 0].roll(2, -1)  # a rotation of tour 0
    tours[:, 5] = tours[:, 0].flip(-1)  # tour 0 read backwards
    tours[:, 6] = tours[:, 2]  # an exact copy of tour 2
    return tour_length(coords, tours), tours


def _weights(lengths: torch.Tensor, drop: torch.Tensor, kappa: float) -> torch.Tensor:
    """Rank weights among the tours not in ``drop`` (by length), zero for ``drop``, normalised."""
    P = lengths.shape[-1]
    rank = lengths.double().masked_fill(drop, float("inf")).argsort(-1).argsort(-1)
    w = (1.0 / (kappa * P + rank)).masked_fill(drop, 0)
    return w / w.sum(-1, keepdim=True)


def check_parent_weights(weights_fn: Callable) -> Report:
    """Check ``weights_fn(lengths (B, P), tours (B, P, n), kappa) -> (B, P)``: the parent-selection
    probabilities of eq. (ngs-rank) among distinct tours, copies at zero."""
    report = Report("Exercise 4 (selection and deduplication)", points=2)
    lengths, tours = _population(seed=11)
    kappa = 0.1
    args = (lengths.clone(), tours.clone(), kappa)
    got = _tensor(report, weights_fn, *args, what="B = 6 populations of P = 8 tours")
    if got is None:
        return report
    if not report.check(torch.equal(args[0], lengths) and torch.equal(args[1], tours),
                        "your function changed its inputs in place."):
        return report
    if not report.check(tuple(got.shape) == tuple(lengths.shape),
                        f"returned shape {tuple(got.shape)}; expected (B, P) = {tuple(lengths.shape)}."):
        return report
    got = got.double()
    hashes = edge_hash(tours)
    want = parent_weights(lengths.double(), hashes, kappa)
    if torch.allclose(got, want, atol=1e-9):
        report.check(True, "")
    else:
        same = hashes.unsqueeze(2) == hashes.unsqueeze(1)  # (B, P, P): equal edge sets
        copy, grouped = same.triu(1).any(1), same.sum(1) > 1
        seq = (tours.unsqueeze(2) == tours.unsqueeze(1)).all(-1).triu(1).any(1)  # repeats of the sequence
        rank_all = lengths.double().argsort(-1).argsort(-1)
        by_all = (1.0 / (kappa * 8 + rank_all)).masked_fill(copy, 0)
        variants = {
            "no dedupe": (_weights(lengths, torch.zeros_like(copy), kappa),
                          "copies still get a weight. A tour whose edge set repeats an earlier one's must get "
                          "weight 0, or the population breeds its best tour with itself."),
            "sequence": (_weights(lengths, seq, kappa),
                         "you only remove exact repeats of the city sequence. A tour rotated or read backwards "
                         "is the same tour (the same edges): compare edge sets, e.g. with ngs.edge_hash."),
            "all copies": (_weights(lengths, grouped, kappa),
                           "you remove every member of a group of identical tours; keep the first one (it is "
                           "still a good parent) and zero only the later copies."),
            "ranks with copies": (by_all / by_all.sum(-1, keepdim=True),
                                  "copies still take up ranks: rank only the distinct tours 0, 1, 2, ... by length, "
                                  f"so that r in {eq('ngs-rank')} counts the distinct tours ahead of this one."),
        }
        named = [msg for v, msg in variants.values() if torch.allclose(got, v.double(), atol=1e-9)]
        b = int((~torch.isclose(got, want, atol=1e-9)).any(1).nonzero()[0])
        report.check(False, named[0] if named else
                     f"population {b}: you return {np.round(got[b].numpy(), 4).tolist()}, expected "
                     f"{np.round(want[b].numpy(), 4).tolist()} (tours 3 and 5 repeat tour 0, tour 6 repeats tour 2).")
        return report
    sums = got.sum(-1)
    report.check(bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-9)), "each row must sum to one.")
    # kappa large: uniform over the distinct tours
    flat = _tensor(report, weights_fn, lengths, tours, 1e9, what="kappa = 1e9")
    if flat is not None:
        report.check(bool(torch.allclose(flat.double(), parent_weights(lengths.double(), hashes, 1e9), atol=1e-6)),
                     "with a very large kappa the weights must be uniform over the distinct tours.")
    return report
