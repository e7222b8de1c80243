"""Checkers for the exercises of the chapter *Neural Genetic Search*.

* :func:`check_tour_length` -- exercise 1, the batched length of closed tours, eq. (ngs-length);
* :func:`check_crossover_mask` -- exercise 2, the cities a child may visit next, eq. (ngs-cross).

Each runs the student's function on cases built to expose one mistake each, compares it with
:mod:`companion.ngs`, and names the mistake it recognises.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from companion.exercises import Report
from companion.ngs.tsp import generate_tsp, tour_length

__all__ = ["check_tour_length", "check_crossover_mask", "reference_crossover_mask"]


def _call(report: Report, fn: Callable, *args, what: str):
    try:
        out = fn(*args)
        return torch.as_tensor(out)
    except Exception as err:  # the student's code may raise anything
        report.check(False, f"raised {type(err).__name__}: {err} ({what})")
        return None


def _random_tours(B: int, S: int, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(B, S, n, generator=gen).argsort(-1)


def check_tour_length(length_fn: Callable) -> Report:
    """Check ``length_fn(coords (B, n, 2), tours (B, S, n)) -> (B, S)``."""
    report = Report("Exercise 1 (tour lengths, batched)")
    coords = generate_tsp(3, 6, seed=7)
    tours = _random_tours(3, 4, 6, seed=8)
    before = (coords.clone(), tours.clone())
    got = _call(report, length_fn, coords, tours, what="coords (3, 6, 2), tours (3, 4, 6)")
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
                 "you leave out the closing edge from the last city back to the first: a tour is a cycle "
                 "(pi_{n+1} = pi_1 in eq. (ngs-length)); rolling the tour by one position handles it."),
        "squared": (((xy - xy.roll(-1, 2)) ** 2).sum(-1).sum(-1),
                    "you sum squared distances; take the square root of each edge's squared length first."),
        "instance0": (tour_length(coords[:1].expand(3, 6, 2), tours).double(),
                      "every instance is measured with the cities of instance 0: index the coordinates of "
                      "instance b with the tours of instance b (gather along the city axis)."),
        "manhattan": ((xy - xy.roll(-1, 2)).abs().sum(-1).sum(-1),
                      "you use the Manhattan (L1) distance; the TSP here is Euclidean."),
    }
    if torch.allclose(got, want, atol=1e-5):
        report.check(True, "")
    else:
        named = [msg for v, msg in variants.values() if torch.allclose(got, v.double(), atol=1e-5)]
        report.check(False, named[0] if named else
                     f"wrong lengths: got {got[0].tolist()} for instance 0, expected {want[0].tolist()}.")
        return report
    # one tour per instance, and a tour given in another rotation and direction: same length
    t = tours[:, :1]
    rotated = t.roll(2, -1).flip(-1)
    a = _call(report, length_fn, coords, t, what="S = 1")
    b = _call(report, length_fn, coords, rotated, what="a rotated, reversed tour")
    if a is not None and b is not None:
        report.check(tuple(a.shape) == (3, 1) and torch.allclose(a.double(), b.double(), atol=1e-5),
                     "the length of a tour must not depend on where it starts or its direction, and S = 1 must "
                     "give shape (B, 1).")
    return report


def reference_crossover_mask(tour_a: torch.Tensor, tour_b: torch.Tensor, current: torch.Tensor,
                             visited: torch.Tensor) -> torch.Tensor:
    """Cities j with {current, j} an edge of parent a or b (in either direction), not yet visited."""
    B, n = tour_a.shape
    mask = torch.zeros(B, n, dtype=torch.bool)
    for tour in (tour_a, tour_b):
        pos = tour.argsort(-1).gather(1, current[:, None]).squeeze(1)  # position of the current city
        for shift in (-1, 1):
            mask[torch.arange(B), tour.gather(1, ((pos + shift) % n)[:, None]).squeeze(1)] = True
    return mask & ~visited


def _variants(tour_a, tour_b, current, visited) -> dict:
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
                      "your mask allows cities that are already visited. AND the parents' neighbours with the "
                      "unvisited cities; if nothing is left, that step becomes a (forced) mutation."),
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
    report = Report("Exercise 2 (the crossover mask)")
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
    got = _call(report, mask_fn, *args, what=f"B = {B} children, n = {n}")
    if got is None:
        return report
    if not report.check(all(torch.equal(x, y) for x, y in zip(args, (tour_a, tour_b, current, visited))),
                        "your function changed its inputs in place."):
        return report
    if not report.check(tuple(got.shape) == (B, n), f"returned shape {tuple(got.shape)}; expected (B, n) = ({B}, {n})."):
        return report
    got = got.bool()
    want = reference_crossover_mask(tour_a, tour_b, current, visited)
    if torch.equal(got, want):
        report.check(True, "")
    else:
        named = [msg for v, msg in _variants(tour_a, tour_b, current, visited).values() if torch.equal(got, v)]
        wrong = int((got != want).any(1).nonzero()[0])
        report.check(False, named[0] if named else
                     f"child {wrong}: current city {int(current[wrong])}, parents {tour_a[wrong].tolist()} and "
                     f"{tour_b[wrong].tolist()}, visited {visited[wrong].nonzero().flatten().tolist()}: you allow "
                     f"{got[wrong].nonzero().flatten().tolist()}, expected {want[wrong].nonzero().flatten().tolist()}.")
        return report
    # a child whose parents are the same tour: at most 2 allowed cities
    same = _call(report, mask_fn, tour_a, tour_a, current, visited, what="both parents equal")
    if same is not None:
        report.check(torch.equal(same.bool(), reference_crossover_mask(tour_a, tour_a, current, visited)),
                     "with two equal parents the child may only follow that parent's edges (2 neighbours).")
    return report
