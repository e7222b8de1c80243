"""CateKV, second pass: the official tie rule of the head vote, the fast path of the threshold, the
CV from a prefill's window, the random-chunks null, and bad input to the public functions."""

import numpy as np
import pytest
import torch

from companion.catekv import evaluate as ev
from companion.catekv import heads, policy
from companion.catekv.data import VOCAB, hybrid_recall
from companion.catekv.model import TinyDecoder

CFG = policy.CateKVConfig()


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyDecoder(VOCAB.size, dim=64, layers=2, q_heads=4, kv_heads=2).eval()


def _static_py_rule(cv: np.ndarray, alpha: float) -> np.ndarray:
    """The vote of the official select_headmask/static.py, restated: per sample the heads at or
    below that sample's alpha-quantile are marked, the marks are summed, and every head with at
    least the ceil(alpha * size)-th largest sum is adaptive (ties kept)."""
    marks = sum((m <= np.quantile(m, alpha)).astype(int) for m in cv)
    flat = marks.flatten()
    top = int(np.ceil(alpha * flat.size))
    return marks >= np.partition(flat, -top)[-top]


def test_vote_keeps_every_tied_head_as_the_official_static_py():
    # heads 0-2 are voted in both samples, heads 3 and 4 in one each, head 5 never
    cv = torch.tensor([[[0.1, 0.2, 0.3, 0.5, 0.9, 2.0]], [[0.1, 0.2, 0.3, 1.0, 0.5, 2.0]]])
    assert heads.head_votes(cv, 0.6).tolist() == [[2, 2, 2, 1, 1, 0]]
    # ceil(0.6 * 6) = 4 heads to pick; the 4th-most-voted head ties with the 5th: both are kept
    kept = heads.static_head_mask(cv, 0.6)
    assert kept.tolist() == [[True, True, True, True, True, False]]
    assert (kept.numpy() == _static_py_rule(cv.numpy(), 0.6)).all()
    # the ablation breaks the tie by the lower mean CV (head 4: 0.70, head 3: 0.75)
    broken = heads.static_head_mask(cv, 0.6, ties="mean-cv")
    assert broken.tolist() == [[True, True, True, False, True, False]]


def test_vote_matches_a_restatement_of_static_py_on_tied_random_cvs():
    g = torch.Generator().manual_seed(1)
    for trial in range(20):
        cv = torch.randint(0, 4, (7, 3, 4), generator=g).double()  # many ties
        for r in (0.1, 0.25, 0.4, 0.5):
            ours = heads.static_head_mask(cv, r).numpy()
            assert (ours == _static_py_rule(cv.numpy(), r)).all(), (trial, r)


def test_threshold_fast_path_equals_the_quantile_definition():
    g = torch.Generator().manual_seed(2)
    a = torch.rand(3, 4, 16, 40, generator=g).softmax(-1)
    flat = a.flatten(-2)
    for k in (0.5, 0.99):
        tau = (flat.quantile(0.0, dim=-1) + k * (flat.quantile(1.0, dim=-1) - flat.quantile(0.0, dim=-1)))
        chunk_max = a.view(3, 4, 16, 10, 4).amax(-1)
        expected = (chunk_max > tau[..., None, None]).sum(-2).float()
        assert torch.equal(heads.chunk_hits(a, 4, k, 1.0), expected)


def test_cv_from_window_equals_collect_cv(model):
    batch = hybrid_recall(3, seed=5)
    cfg = policy.CateKVConfig(top_threshold=0.99)
    pre = ev.Prefill(model, batch.prompt, cfg)
    assert torch.allclose(heads.cv_from_window(pre.attn_mid, cfg.chunk, 0.99), heads.collect_cv(model, batch.prompt, cfg))


def test_random_chunks_keep_catekv_bytes_but_other_chunks(model):
    batch = hybrid_recall(2, seed=6)
    pre = ev.Prefill(model, batch.prompt, CFG)
    mask = torch.tensor([[True, False], [False, False]])
    cate = ev.policy_keep("catekv", pre, mask)
    rand = ev.policy_keep("random-chunks", pre, mask, generator=torch.Generator().manual_seed(0))
    assert [[k.shape for k in layer] for layer in cate] == [[k.shape for k in layer] for layer in rand]
    assert torch.equal(cate[0][0], rand[0][0])  # the adaptive head keeps everything either way
    assert not torch.equal(cate[1][1].sort().values, rand[1][1].sort().values)
    out = ev.accuracy(model, [batch], [pre], "random-chunks", mask, draws=2)
    assert 0 <= out["acc"] <= 1 and out["ratio"] > 1


def test_bad_input_names_the_argument(model):
    cv = torch.rand(4, 2, 2)
    with pytest.raises(ValueError, match="^ties"):
        heads.static_head_mask(cv, 0.5, ties="random")
    with pytest.raises(ValueError, match="^cv"):
        heads.static_head_mask(torch.full((4, 2, 2), float("nan")), 0.5)
    with pytest.raises(ValueError, match="^cv"):
        heads.static_head_mask(torch.rand(0, 2, 2), 0.5)
    with pytest.raises(ValueError, match="^adaptive_ratio"):
        heads.static_head_mask(cv, -0.1)
    with pytest.raises(ValueError, match="^attn_mid"):
        heads.cv_from_window([], 4)
    with pytest.raises(ValueError, match="^attn_mid"):
        heads.cv_from_window([torch.rand(2, 16, 40)], 4)
    with pytest.raises(ValueError, match="^attn_mid"):
        heads.cv_from_window([torch.full((1, 2, 16, 40), float("inf"))], 4)
    with pytest.raises(ValueError, match="^top_fraction"):
        heads.chunk_hits(torch.rand(2, 16, 40), 4, 0.9, top_fraction=0.3)
    gate = torch.rand(2, 2)
    with pytest.raises(ValueError, match="^n_retrieval"):
        ev.retrieval_heads(gate, 5)
    with pytest.raises(ValueError, match="^n_retrieval"):
        ev.retrieval_heads(gate, 1.5)
    with pytest.raises(ValueError, match="^gate"):
        ev.retrieval_heads(torch.tensor([[float("nan"), 0.0]]), 1)
    with pytest.raises(ValueError, match="^gate"):
        ev.retrieval_heads(torch.rand(4), 1)
    batch = hybrid_recall(2, seed=7)
    pre = ev.Prefill(model, batch.prompt, CFG)
    mask = torch.zeros(2, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="^draws"):
        ev.accuracy(model, [batch], [pre], "random-heads", mask, draws=0)
    with pytest.raises(ValueError, match="^draws"):
        ev.accuracy(model, [batch], [pre], "random-heads", mask, draws=2.5)
    with pytest.raises(ValueError, match="^method"):
        ev.accuracy(model, [batch], [pre], "h2o", mask)
    with pytest.raises(ValueError, match="^tests"):
        ev.accuracy(model, [], [], "catekv", mask)
    with pytest.raises(ValueError, match="^n"):
        hybrid_recall(2.5)
    with pytest.raises(ValueError, match="^n"):
        hybrid_recall(0)
    with pytest.raises(ValueError, match="^n"):
        ev.llama_kv_projection(0)
    with pytest.raises(ValueError, match="^adaptive_ratio"):
        ev.llama_kv_projection(adaptive_ratio=1.5)
    with pytest.raises(ValueError, match="^budget"):
        ev.llama_kv_projection(budget=2048.5)


def test_cv_from_window_at_several_levels_equals_one_level_at_a_time():
    g = torch.Generator().manual_seed(3)
    attn = [torch.rand(3, 2, 16, 40, generator=g).softmax(-1) for _ in range(2)]
    for f in (1.0, 0.8):
        levels = [0.5, 0.9, 0.99]
        many = heads.cv_from_window(attn, 4, levels, f)
        assert many.shape == (3, 3, 2, 2)
        for k, cv in zip(levels, many):
            assert torch.allclose(cv, heads.cv_from_window(attn, 4, k, f))
            assert torch.allclose(cv[:, 0], heads.head_cv(attn[0], 4, k, f))
    with pytest.raises(ValueError, match="^top_threshold"):
        heads.cv_from_window(attn, 4, [])
    with pytest.raises(ValueError, match="^top_threshold"):
        heads.cv_from_window(attn, 4, [0.5, 1.5])
