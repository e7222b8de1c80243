"""The NGS exercise checkers: a right answer passes, and each classic mistake is named."""

import torch

from companion.exercises import ngs as ex
from companion.ngs import tour_length


def test_tour_length_checker():
    assert ex.check_tour_length(tour_length).passed

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


def test_crossover_mask_checker():
    assert ex.check_crossover_mask(ex.reference_crossover_mask).passed

    def neighbours(tour, current, shifts, by_position=False, wrap=True):
        B, n = tour.shape
        ar = torch.arange(B)
        pos = current if by_position else tour.argsort(-1)[ar, current]
        mask = torch.zeros(B, n, dtype=torch.bool)
        for s in shifts:
            nxt = pos + s
            ok = (nxt >= 0) & (nxt < n) if not wrap else torch.ones(B, dtype=torch.bool)
            mask[ar[ok], tour[ar, nxt % n][ok]] = True
        return mask

    mistakes = {
        "Edges are undirected": lambda a, b, c, v: (neighbours(a, c, (1,)) | neighbours(b, c, (1,))) & ~v,
        "already visited": lambda a, b, c, v: neighbours(a, c, (-1, 1)) | neighbours(b, c, (-1, 1)),
        "inverse permutation": lambda a, b, c, v: (neighbours(a, c, (-1, 1), True) | neighbours(b, c, (-1, 1), True)) & ~v,
        "closing edge": lambda a, b, c, v: (neighbours(a, c, (-1, 1), wrap=False) | neighbours(b, c, (-1, 1), wrap=False)) & ~v,
        "only the first parent": lambda a, b, c, v: neighbours(a, c, (-1, 1)) & ~v,
        "shape": lambda a, b, c, v: ex.reference_crossover_mask(a, b, c, v)[:, :-1],
    }
    for phrase, fn in mistakes.items():
        report = ex.check_crossover_mask(fn)
        assert not report.passed and phrase in str(report), (phrase, str(report))

    def loose(a, b, c, v):  # an unrecognised mistake still gets a concrete counter-example
        out = ex.reference_crossover_mask(a, b, c, v)
        out[3] = ~v[3]
        return out

    assert "child 3" in str(ex.check_crossover_mask(loose))
