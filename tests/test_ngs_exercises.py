"""The NGS exercise checkers: a right answer passes, each classic mistake is named, a stub is not done."""

import numpy as np
import pytest
import torch

import companion.exercises.ngs as ex
import companion.ngs as ngs
from companion.ngs import tour_length


def test_no_solution_is_exported():
    assert all(name.startswith("check_") for name in ex.__all__)
    assert not hasattr(ex, "reference_crossover_mask")


def test_tour_length_checker():
    report = ex.check_tour_length(tour_length)
    assert report.passed and repr(report) == "1"

    def gather(coords, tours):
        return coords[torch.arange(coords.shape[0])[:, None, None], tours]

    def open_tour(coords, tours):
        xy = gather(coords, tours)
        return (xy[:, :, 1:] - xy[:, :, :-1]).norm(dim=-1).sum(-1)

    def squared(coords, tours):
        xy = gather(coords, tours)
        return ((xy - xy.roll(-1, 2)) ** 2).sum(-1).sum(-1)

    def first_instance(coords, tours):
        xy = coords[0][tours]
        return (xy - xy.roll(-1, 2)).norm(dim=-1).sum(-1)

    def manhattan(coords, tours):
        xy = gather(coords, tours)
        return (xy - xy.roll(-1, 2)).abs().sum(-1).sum(-1)

    def in_place(coords, tours):
        out = tour_length(coords, tours)
        tours.zero_()
        return out

    for fn, phrase in ((open_tour, "closing edge"), (squared, "squared"), (first_instance, "instance 0"),
                       (manhattan, "Manhattan"), (in_place, "in place"),
                       (lambda c, t: tour_length(c, t).sum(1), "shape"), (lambda c, t: 1 / 0, "ZeroDivision")):
        report = ex.check_tour_length(fn)
        assert not report.passed and phrase in str(report), (fn, str(report))
    assert "eq. (" in str(ex.check_tour_length(open_tour)) and "ngs-" not in str(ex.check_tour_length(open_tour))


def _neighbours(tour, current, shifts, by_position=False, wrap=True):
    B, n = tour.shape
    ar = torch.arange(B)
    pos = current if by_position else tour.argsort(-1)[ar, current]
    mask = torch.zeros(B, n, dtype=torch.bool)
    for s in shifts:
        nxt = pos + s
        ok = (nxt >= 0) & (nxt < n) if not wrap else torch.ones(B, dtype=torch.bool)
        mask[ar[ok], tour[ar, nxt % n][ok]] = True
    return mask


def _right_mask(a, b, c, v):
    return (_neighbours(a, c, (-1, 1)) | _neighbours(b, c, (-1, 1))) & ~v


def test_crossover_mask_checker():
    report = ex.check_crossover_mask(_right_mask)
    assert report.passed and repr(report) == "2"
    mistakes = {
        "Edges are undirected": lambda a, b, c, v: (_neighbours(a, c, (1,)) | _neighbours(b, c, (1,))) & ~v,
        "already visited": lambda a, b, c, v: _neighbours(a, c, (-1, 1)) | _neighbours(b, c, (-1, 1)),
        "inverse permutation": lambda a, b, c, v: (_neighbours(a, c, (-1, 1), True)
                                                   | _neighbours(b, c, (-1, 1), True)) & ~v,
        "closing edge": lambda a, b, c, v: (_neighbours(a, c, (-1, 1), wrap=False)
                                            | _neighbours(b, c, (-1, 1), wrap=False)) & ~v,
        "only the first parent": lambda a, b, c, v: _neighbours(a, c, (-1, 1)) & ~v,
        "shape": lambda a, b, c, v: _right_mask(a, b, c, v)[:, :-1],
    }
    for phrase, fn in mistakes.items():
        report = ex.check_crossover_mask(fn)
        assert not report.passed and phrase in str(report), (phrase, str(report))

    def loose(a, b, c, v):  # an unrecognised mistake still gets a concrete counter-example
        out = _right_mask(a, b, c, v)
        out[3] = ~v[3]
        return out

    assert "child 3" in str(ex.check_crossover_mask(loose))


def _p_best(P, kappa):
    w = 1 / (kappa * P + np.arange(P))
    w = w / w.sum()
    return float(w[0] + (w[1:] * w[0] / (1 - w[1:])).sum())


def test_the_selection_pressure_formula_matches_the_package_sampler():
    gen = torch.Generator().manual_seed(0)
    for P, kappa in ((10, 0.5), (20, 0.05)):
        costs = torch.arange(P, dtype=torch.float32)[None]
        parents = ngs.select_parents(costs, torch.arange(P)[None], 40_000, 2, kappa, gen)
        freq = float((parents == 0).any(-1).float().mean())
        assert freq == pytest.approx(_p_best(P, kappa), abs=0.01)


def test_selection_pressure_checker():
    report = ex.check_selection_pressure(_p_best)
    assert report.passed and repr(report) == "1"

    def one_draw(P, kappa):
        w = 1 / (kappa * P + np.arange(P))
        return float(w[0] / w.sum())

    def with_replacement(P, kappa):
        return 1 - (1 - one_draw(P, kappa)) ** 2

    def kappa_alone(P, kappa):
        w = 1 / (kappa + np.arange(P))
        w = w / w.sum()
        return float(w[0] + (w[1:] * w[0] / (1 - w[1:])).sum())

    for fn, phrase in ((one_draw, "first parent"), (with_replacement, "with replacement"),
                       (kappa_alone, "population size"), (lambda P, k: 0.5, "exact probability"),
                       (lambda P, k: "high", "not a single number")):
        report = ex.check_selection_pressure(fn)
        assert not report.passed and phrase in str(report), (fn, str(report))


def _right_weights(lengths, tours, kappa):
    return ngs.parent_weights(lengths, ngs.edge_hash(tours), kappa)


def test_parent_weights_checker():
    report = ex.check_parent_weights(_right_weights)
    assert report.passed and repr(report) == "2"

    def ranked(lengths, drop, kappa):
        rank = lengths.double().masked_fill(drop, float("inf")).argsort(-1).argsort(-1)
        w = (1 / (kappa * lengths.shape[-1] + rank)).masked_fill(drop, 0)
        return w / w.sum(-1, keepdim=True)

    def no_dedupe(lengths, tours, kappa):
        return ranked(lengths, torch.zeros_like(lengths, dtype=torch.bool), kappa)

    def by_sequence(lengths, tours, kappa):
        return ranked(lengths, (tours.unsqueeze(2) == tours.unsqueeze(1)).all(-1).triu(1).any(1), kappa)

    def every_member(lengths, tours, kappa):
        h = ngs.edge_hash(tours)
        return ranked(lengths, (h.unsqueeze(2) == h.unsqueeze(1)).sum(1) > 1, kappa)

    def copies_take_ranks(lengths, tours, kappa):
        h = ngs.edge_hash(tours)
        copy = (h.unsqueeze(2) == h.unsqueeze(1)).triu(1).any(1)
        w = (1 / (kappa * lengths.shape[-1] + lengths.argsort(-1).argsort(-1).double())).masked_fill(copy, 0)
        return w / w.sum(-1, keepdim=True)

    for fn, phrase in ((no_dedupe, "copies still get a weight"), (by_sequence, "rotated or read backwards"),
                       (every_member, "keep the first one"), (copies_take_ranks, "take up ranks"),
                       (lambda l, t, k: _right_weights(l, t, k)[:, :-1], "shape"),
                       (lambda l, t, k: _right_weights(l, t, k) * 2, "population")):
        report = ex.check_parent_weights(fn)
        assert not report.passed and phrase in str(report), (fn, str(report))
