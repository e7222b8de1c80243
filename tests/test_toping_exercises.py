"""The checkers of the TopInG chapter: the reference solutions pass, the usual mistakes fail with
an explanation, a stub is reported as not done."""

import numpy as np
import torch

import companion.toping as tp
from companion.exercises import toping as ex


def _stub(*args):
    raise NotImplementedError()


def test_h0_deaths_checker():
    def reference(n, edges, times):
        d = tp.edge_persistence(n, torch.as_tensor(edges), torch.as_tensor(times), 1.0)
        return d.h0[d.h0_edge >= 0, 1].numpy()

    good = ex.check_h0_deaths(reference)
    assert good.passed and good.points == 2 and repr(good) == "2"
    bad = ex.check_h0_deaths(lambda n, e, t: ex._kruskal_deaths(n, e, t, range(len(e))))
    assert not bad.passed and repr(bad) == "0" and "order they are listed" in str(bad)
    assert "for every edge" in str(ex.check_h0_deaths(lambda n, e, t: np.sort(t)))
    assert "latest time" in str(ex.check_h0_deaths(lambda n, e, t: ex._kruskal_deaths(n, e, t, np.argsort(-t))))
    assert "essential component" in str(ex.check_h0_deaths(lambda n, e, t: np.r_[reference(n, e, t), 1.0]))
    assert ex.check_h0_deaths(_stub).not_done


def test_topo_discrepancy_checker():
    good = ex.check_topo_discrepancy(tp.topo_discrepancy)
    assert good.passed and repr(good) == "2"
    per_graph = ex.check_topo_discrepancy(lambda a, b, k: torch.topk((a - b).abs().mean(0), k).values.sum())
    assert not per_graph.passed and "expectations" in str(per_graph)
    signed = ex.check_topo_discrepancy(lambda a, b, k: torch.topk(a.mean(0) - b.mean(0), k).values.sum())
    assert "absolute value is missing" in str(signed)
    assert "only the largest" in str(ex.check_topo_discrepancy(lambda a, b, k: (a.mean(0) - b.mean(0)).abs().max()))
    assert "every element" in str(ex.check_topo_discrepancy(lambda a, b, k: (a.mean(0) - b.mean(0)).abs().sum()))
    assert "not a single number" in str(ex.check_topo_discrepancy(lambda a, b, k: "x"))
    assert ex.check_topo_discrepancy(_stub).not_done
