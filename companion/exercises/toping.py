"""Checkers for the exercises of the chapter *TopInG: persistent rationale filtration*.

* :func:`check_h0_deaths` -- exercise 1, the 0-dimensional persistence of an edge filtration by
  union-find (label ``toping-pairing``), 2 points;
* :func:`check_topo_discrepancy` -- exercise 2, the dual bound of the topological discrepancy
  (``toping-dual``), 2 points.

Each compares the student's answer with :mod:`companion.toping` on cases built to expose one
mistake each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np
import torch

from companion import toping as tp
from companion.exercises import Report, eq

__all__ = ["check_h0_deaths", "check_topo_discrepancy"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_h0_deaths": ("companion.toping.persistence.edge_persistence",
                                  "companion.toping.persistence._pairing"),
              "check_topo_discrepancy": ("companion.toping.losses.topo_discrepancy",)}


def _h0_cases():
    rng = np.random.default_rng(5)
    g = nx.gnp_random_graph(10, 0.35, seed=3)
    edges = np.array(list(g.edges))
    return [
        ("a triangle and a pendant edge", 4, np.array([[0, 1], [1, 2], [0, 2], [2, 3]]),
         np.array([0.4, 0.1, 0.2, 0.3])),
        ("a 4-cycle whose last edge comes first in the list", 4, np.array([[0, 3], [0, 1], [1, 2], [2, 3]]),
         np.array([0.9, 0.1, 0.2, 0.3])),
        ("a random graph of 10 nodes (two components or more)", 10, edges, rng.random(len(edges))),
    ]


def _kruskal_deaths(n: int, edges, times, order) -> np.ndarray:
    """The sorted times of the edges that join two components when the edges are added in
    ``order``: the finite 0-dimensional deaths when ``order`` sorts the times (eq. toping-pairing),
    and a usual mistake otherwise."""
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    out = []
    for e in order:
        ru, rv = find(int(edges[e][0])), find(int(edges[e][1]))
        if ru != rv:
            parent[ru] = rv
            out.append(float(times[e]))
    return np.sort(np.asarray(out, dtype=float))


def _h0_variants(n, edges, times) -> dict[str, np.ndarray]:
    """Answers of the usual mistakes, to recognise them."""
    return {
        "unsorted": _kruskal_deaths(n, edges, times, range(len(edges))),
        "descending": _kruskal_deaths(n, edges, times, np.argsort(-times)),
        "every_edge": np.sort(times),
    }


def check_h0_deaths(h0_deaths: Callable) -> Report:
    """Check ``h0_deaths(num_nodes, edges, times)``: the sorted finite deaths of eq. (toping-pairing)."""
    report = Report("Exercise 1 (0-dimensional persistence)", points=2)
    for name, n, edges, times in _h0_cases():
        got = report.call_array(h0_deaths, n, edges.copy(), times.copy(), what=name)
        if got is None:
            continue
        d = tp.edge_persistence(n, torch.as_tensor(edges), torch.as_tensor(times), 1.0)
        want = np.sort(d.h0[d.h0_edge >= 0, 1].numpy())
        got = np.sort(got.ravel())
        if report.check(got.shape == want.shape and np.allclose(got, want, atol=1e-12), ""):
            continue
        report.problems.pop()
        wrong = _h0_variants(n, edges, times)
        same = lambda key: got.shape == wrong[key].shape and np.allclose(got, wrong[key])
        if same("every_edge"):
            why = (f"you return a death for every edge. In {eq('toping-pairing')} an edge whose two ends "
                   "are already connected kills nothing: it creates a 1-dimensional class (a cycle). "
                   f"A graph with {n} nodes has at most {n - 1} finite 0-dimensional deaths.")
        elif same("unsorted"):
            why = (f"you process the edges in the order they are listed. The filtration of {eq('toping-pairing')} "
                   "adds edges in increasing time, so sort them by `times` first; otherwise the edge that "
                   "closes a cycle is the wrong one.")
        elif same("descending"):
            why = ("you add the edges from the latest time to the earliest. Components merge as time grows: "
                   f"sort by increasing `times` ({eq('toping-pairing')}).")
        elif len(got) != len(want):
            why = (f"expected {len(want)} finite deaths (nodes minus connected components), got {len(got)}; "
                   "an essential component (never merged) has no finite death.")
        else:
            why = f"got deaths {np.round(got, 4)}, expected {np.round(want, 4)} ({eq('toping-pairing')})."
        report.problems.append(f"{name}: {why}")
    return report


def _disc_cases():
    gen = torch.Generator().manual_seed(2)
    vx = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    ve = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    signs = torch.tensor([[1.0, -1.0, 2.0, 0.0], [-1.0, 1.0, 2.0, 0.0]], dtype=torch.float64)
    return [
        ("6 graphs, 5 elements, top 2", vx, ve, 2),
        ("2 graphs whose differences cancel in the mean", signs, torch.zeros_like(signs), 2),
        ("6 graphs, top 3", vx, ve, 3),
    ]


def check_topo_discrepancy(topo_discrepancy: Callable) -> Report:
    """Check ``topo_discrepancy(vx, veps, top)``: eq. (toping-dual) on ``[B, k]`` features."""
    report = Report("Exercise 2 (topological discrepancy)", points=2)
    for name, vx, ve, top in _disc_cases():
        got = report.call_number(topo_discrepancy, vx.clone(), ve.clone(), top, what=name)
        if got is None:
            continue
        want = float(tp.topo_discrepancy(vx, ve, top))
        if report.check(np.isclose(got, want, rtol=1e-9), ""):
            continue
        report.problems.pop()
        diff = vx.mean(0) - ve.mean(0)
        variants = {
            "per_graph": torch.topk((vx - ve).abs().mean(0), top).values.sum(),
            "signed": torch.topk(diff, top).values.sum(),
            "max": diff.abs().max(),
            "all": diff.abs().sum(),
        }
        close = lambda key: np.isclose(got, float(variants[key]), rtol=1e-9)
        if close("per_graph"):
            why = (f"you average |psi(T_X) - psi(T_eps)| over the graphs. The bound of {eq('toping-dual')} takes the "
                   "difference of the two *expectations* first, then its absolute value: it compares the "
                   "distributions of diagrams over graphs, not each graph with itself (the second case shows "
                   "the difference).")
        elif close("signed"):
            why = (f"the absolute value is missing: {eq('toping-dual')} uses |E psi(T_X) - E psi(T_eps)|, so a "
                   "structure element that is larger on the complement counts as much as one larger on the rationale.")
        elif close("max"):
            why = (f"you keep only the largest difference; the chapter's bound sums the `top` largest "
                   f"({eq('toping-dual')}).")
        elif close("all"):
            why = f"you sum every element's difference instead of the `top` largest ({eq('toping-dual')})."
        else:
            why = f"got {got:.6g}, expected {want:.6g} ({eq('toping-dual')})."
        report.problems.append(f"{name}: {why}")
    return report
