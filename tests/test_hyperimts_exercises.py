"""The HyperIMTS exercise checkers: a right answer passes, and each classic mistake is named."""

import numpy as np
import pytest
import torch

from companion.data.imts import padding_stats
from companion.exercises import hyperimts as ex
from companion.hyperimts import incidence_matrices, segment_softmax


def test_incidence_checker():
    assert ex.check_incidence(lambda t, v, V: incidence_matrices(t, v, V)[:2]).passed

    def per_observation(t, v, V):
        I_V = np.zeros((V, len(t)))
        I_V[v, np.arange(len(t))] = 1
        return np.eye(len(t)), I_V

    assert any("share one temporal hyperedge" in p for p in ex.check_incidence(per_observation).problems)

    def transposed(t, v, V):
        I_T, I_V, _ = incidence_matrices(t, v, V)
        return I_T.T, I_V

    assert any("transpose" in p for p in ex.check_incidence(transposed).problems)

    def first_seen_order(t, v, V):  # hyperedges numbered in order of appearance, not of time
        _, first, inv = np.unique(t, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        I_T = np.zeros((first.size, len(t)))
        I_T[rank[inv], np.arange(len(t))] = 1
        return I_T, incidence_matrices(t, v, V)[1]

    assert any("wrong order" in p for p in ex.check_incidence(first_seen_order).problems)

    def observed_variables_only(t, v, V):
        I_T, I_V, _ = incidence_matrices(t, v, V)
        return I_T, I_V[I_V.sum(1) > 0]

    assert any("keeps its (empty) hyperedge" in p for p in ex.check_incidence(observed_variables_only).problems)


def test_padding_checker():
    assert ex.check_padding_cost(lambda b: padding_stats(b)["cells_per_node"]).passed
    own = ex.check_padding_cost(lambda b: padding_stats(b)["cells_per_sample"] / b.n_nodes)
    assert any("its own length" in p for p in own.problems)
    hist_only = ex.check_padding_cost(lambda b: padding_stats(b)["cells"] / int((~b.is_query).sum()))
    assert any("history observations only" in p for p in hist_only.problems)
    density = ex.check_padding_cost(lambda b: padding_stats(b)["density"])
    assert any("inverse" in p for p in density.problems)
    assert "raised" in str(ex.check_padding_cost(lambda b: 1 / 0))


def test_segment_softmax_checker():
    assert ex.check_segment_softmax(segment_softmax).passed

    def unstable(scores, segment, n):
        w = torch.exp(scores)
        return w / torch.zeros(n, scores.shape[1]).index_add(0, segment, w)[segment]

    assert any("overflows" in p for p in ex.check_segment_softmax(unstable).problems)
    glob = ex.check_segment_softmax(lambda s, seg, n: torch.softmax(s, 0))
    assert any("over all rows" in p for p in glob.problems)
    flat = ex.check_segment_softmax(lambda s, seg, n: segment_softmax(s, seg, n)[:, 0])
    assert any("shape" in p for p in flat.problems)


@pytest.mark.parametrize("checker, points", [(ex.check_incidence, 2), (ex.check_padding_cost, 1),
                                             (ex.check_segment_softmax, 2)])
def test_a_stub_is_not_done_and_scores_zero_and_a_solution_scores_its_points(checker, points):
    def stub(*args):
        raise NotImplementedError()

    report = checker(stub)
    assert report.not_done and not report.passed and repr(report) == "0"
    assert "not done yet" in report._repr_markdown_() and "NotImplementedError" in str(report)
    right = {ex.check_incidence: lambda t, v, V: incidence_matrices(t, v, V)[:2],
             ex.check_padding_cost: lambda b: padding_stats(b)["cells_per_node"],
             ex.check_segment_softmax: segment_softmax}[checker]
    done = checker(right)
    assert done.passed and done.points == points and repr(done) == f"{points}"


def test_checkers_cite_the_printed_equation_numbers():
    per_observation = ex.check_incidence(lambda t, v, V: (np.eye(len(t)), incidence_matrices(t, v, V)[1]))
    assert "eq. (" in str(per_observation) and "hyperimts-" not in str(per_observation)
    over_all_rows = ex.check_segment_softmax(lambda s, seg, n: torch.softmax(s, 0))
    assert "eq. (" in str(over_all_rows) and "hyperimts-" not in str(over_all_rows)
    not_a_number = ex.check_padding_cost(lambda b: "many")
    assert "single number" in str(not_a_number)
