"""Unit tests of companion.catekv: data, model cache, CV, head mask, selection, bytes, training, checkpoint."""

import math
import os

import pytest
import torch

from companion.catekv import cache as kvcache
from companion.catekv import evaluate as ev
from companion.catekv import heads, policy, train
from companion.catekv.data import VOCAB, hybrid_recall
from companion.catekv.model import TinyDecoder

CFG = policy.CateKVConfig()


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyDecoder(VOCAB.size, dim=64, layers=2, q_heads=4, kv_heads=2).eval()


# --- data ----------------------------------------------------------------------------------------

def test_data_is_seeded_and_answers_follow_the_rule():
    a, b = hybrid_recall(4, seed=3), hybrid_recall(4, seed=3)
    assert torch.equal(a.prompt, b.prompt) and torch.equal(a.stream, b.stream)
    assert a.prompt.shape == (4, 256) and a.stream.shape == (4, 24) and a.demo_pos.shape == (4, 5)
    for i in range(4):
        p = int(a.prompt[i, a.passkey_pos[i]]) - VOCAB.digit0
        assert a.prompt[i, a.passkey_pos[i] - 1] == VOCAB.passkey and 0 <= p < VOCAB.n_digits
        body = a.prompt[i].tolist()
        for j in range(a.answers.shape[1]):
            key = int(a.stream[i, a.answer_pos[i, j]])
            v = body[body.index(key) - 1] - VOCAB.value0
            assert int(a.answers[i, j]) - VOCAB.value0 == (v + p) % VOCAB.n_values
            assert int(a.stream[i, a.answer_pos[i, j] + 1]) == int(a.answers[i, j])
    with pytest.raises(ValueError, match="^n_queries"):
        hybrid_recall(2, n_pairs=4, n_queries=8)


# --- model: the cached decode equals the full forward ---------------------------------------------

def test_decode_with_full_cache_equals_forward(model):
    batch = hybrid_recall(3, seed=1)
    seq = batch.full_sequence()
    full_logits = model(seq)
    P = batch.prompt.shape[1]
    _, ks, vs, _ = model.prefill(batch.prompt)
    cache = kvcache.HybridKVCache.full(ks, vs)
    for t in range(5):
        logits = model.decode_step(seq[:, P + t], seq[:, P + t - 1], cache, P + t)
        torch.testing.assert_close(logits, full_logits[:, P + t], atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
                    reason="Triton runs on CUDA or under TRITON_INTERPRET=1 (set by conftest without a GPU)")
def test_decode_triton_path_equals_torch_path(model):
    batch = hybrid_recall(2, seed=2)
    pre = ev.Prefill(model, batch.prompt, CFG)
    mask = torch.tensor([[True, False], [False, False]])
    keep = ev.policy_keep("catekv", pre, mask)
    c1 = kvcache.HybridKVCache.from_prefill(pre.ks, pre.vs, keep)
    c2 = kvcache.HybridKVCache.from_prefill(pre.ks, pre.vs, keep)
    P = pre.n
    seq = batch.full_sequence()
    with pytest.raises(ValueError, match="^q: requires grad"):  # forward-only: never a silent lost gradient
        model.decode_step(seq[:, P], seq[:, P - 1], kvcache.HybridKVCache.from_prefill(pre.ks, pre.vs, keep), P,
                          backend="triton")
    with torch.no_grad():  # decoding is inference
        for t in range(3):
            a = model.decode_step(seq[:, P + t], seq[:, P + t - 1], c1, P + t, backend="torch")
            b = model.decode_step(seq[:, P + t], seq[:, P + t - 1], c2, P + t, backend="triton")
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_model_creates_its_tensors_on_the_inputs_device():
    # meta tensors carry no data: any tensor the model made on the CPU would clash with them
    m = TinyDecoder(VOCAB.size, dim=32, layers=2, q_heads=4, kv_heads=2).to("meta")
    logits, ks, vs, qs = m.prefill(torch.zeros(2, 40, dtype=torch.long, device="meta"), last_q=8)
    assert logits.device.type == ks[0].device.type == qs[0].device.type == "meta"
    assert ev.causal_attention_probs(qs[0], ks[0].repeat_interleave(2, 1), 32).device.type == "meta"


def test_decode_backend_auto_picks_triton_for_cuda_and_torch_for_cpu():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from companion.catekv.model import decode_backend

    assert decode_backend(torch.zeros(2, dtype=torch.long), "auto") == "torch"
    with FakeTensorMode():  # what a CUDA host takes, without a GPU
        assert decode_backend(torch.empty(2, dtype=torch.long, device="cuda"), "auto") == "triton"


def test_model_rejects_bad_heads():
    with pytest.raises(ValueError, match="^kv_heads"):
        TinyDecoder(VOCAB.size, dim=32, q_heads=4, kv_heads=3)


# --- CV -----------------------------------------------------------------------------------------

def planted(M=10, W=8, c=4, consistent=True):
    a = torch.full((W, M * c), 0.001)
    for q in range(W):
        j = 2 if consistent else q % M
        a[q, j * c + 1] = 0.9
    return a


def test_cv_orders_planted_heads_and_matches_closed_form():
    cv_cons = heads.head_cv(planted(consistent=True), 4)
    cv_adapt = heads.head_cv(planted(consistent=False), 4)
    assert cv_cons > cv_adapt
    # a fraction p of M chunks hit by every query: CV = sqrt((1 - p) / p * M / (M - 1))
    M, hit = 20, 5
    a = torch.full((6, M * 4), 0.01)
    a[:, torch.arange(hit) * 4 * 3] = 0.5
    p = hit / M
    assert heads.head_cv(a, 4).item() == pytest.approx(math.sqrt((1 - p) / p * M / (M - 1)), rel=1e-6)
    flat = heads.head_cv(torch.full((4, 16), 0.25), 4)  # constant map: no division by zero
    assert torch.isfinite(flat).all()


def test_cv_bad_input():
    with pytest.raises(ValueError, match="^attn_mid"):
        heads.head_cv(torch.full((4, 16), float("nan")), 4)
    with pytest.raises(ValueError, match="^chunk"):
        heads.head_cv(torch.rand(4, 18), 4)
    with pytest.raises(ValueError, match="^top_threshold"):
        heads.head_cv(torch.rand(4, 16), 4, top_threshold=1.5)
    with pytest.raises(ValueError, match="^chunk"):
        heads.middle_region(32, chunk=8, init=4, recent=16)
    with pytest.raises(ValueError, match="^prompts"):
        heads.collect_cv(None, torch.zeros(0, 5, dtype=torch.long), CFG)


def test_static_head_mask_counts_and_prefers_low_cv():
    g = torch.Generator().manual_seed(0)
    cv = torch.rand(8, 3, 4, generator=g) + torch.arange(12).view(1, 3, 4)  # head 0 lowest CV
    for r in (0.0, 0.25, 0.4, 1.0):
        mask = heads.static_head_mask(cv, r)
        assert int(mask.sum()) == math.ceil(r * 12)
    assert heads.static_head_mask(cv, 0.25)[0, :3].all()
    with pytest.raises(ValueError, match="^adaptive_ratio"):
        heads.static_head_mask(cv, 1.2)
    with pytest.raises(ValueError, match="^ranking"):
        heads.static_head_mask(cv, 0.25, ranking="median")
    with pytest.raises(ValueError, match="^cv"):
        heads.static_head_mask(cv[0], 0.2)


# --- selection and bytes ---------------------------------------------------------------------------

def test_mean_ranking_and_vote_can_disagree():
    # head 0 has the lowest mean CV (one very low sample) but head 1 is lowest in most samples
    cv = torch.tensor([[[0.1, 0.5, 2.0, 3.0]], [[2.0, 0.5, 2.1, 3.0]], [[2.0, 0.5, 2.2, 3.0]]])
    assert heads.head_votes(cv, 0.25).tolist() == [[1, 2, 0, 0]]
    assert heads.static_head_mask(cv, 0.25).tolist() == [[False, True, False, False]]
    assert heads.static_head_mask(cv, 0.25, ranking="mean").tolist() == [[False, True, False, False]]
    cv[0, 0, 0] = -5.0  # now head 0's mean is lowest, while the vote still prefers head 1
    assert heads.static_head_mask(cv, 0.25, ranking="mean").tolist() == [[True, False, False, False]]
    assert heads.static_head_mask(cv, 0.25).tolist() == [[False, True, False, False]]


def test_the_default_setting_puts_questions_in_the_observation_window():
    # issue 15: the observation window must hold questions like the decode stream's
    batch = hybrid_recall(3, seed=0)
    window = batch.prompt[:, -CFG.last_q:]
    assert ((window == VOCAB.query).sum(1) >= 5).all()
    assert (batch.demo_pos >= batch.prompt.shape[1] - CFG.last_q).all()


def test_the_default_budget_holds_several_critical_chunks_at_256_tokens():
    assert CFG.budget == 48 and CFG.n_critical_chunks == 7
    assert CFG.consistent_length(256) == 56
    assert train.DATA["quick"]["prompt_len"] == 256


def test_snapkv_with_an_even_pool_never_keeps_a_position_twice():
    n, recent, budget = 40, 8, 16
    attn = torch.full((1, 2, 4, n), 1e-3)
    attn[..., n - recent - 2: n - recent] = 1.0  # the last positions before the window score highest
    for pool in (1, 2, 3, 4, 6):
        for idx in policy.snapkv_select(attn, budget, recent, pool=pool):
            assert idx.shape == (1, budget)
            assert len(set(idx[0].tolist())) == budget, f"pool {pool}: a position is kept twice"
    x = torch.rand(2, 3, 20)
    ref = torch.nn.functional.avg_pool1d(x.reshape(6, 1, 20), 3, stride=1, padding=1, count_include_pad=False)
    torch.testing.assert_close(policy.smooth_scores(x, 3), ref.view(2, 3, 20))
    assert policy.smooth_scores(x, 4).shape == x.shape


def test_duo_select_keeps_retrieval_heads_whole_at_catekv_bytes(model):
    batch = hybrid_recall(2, seed=6)
    pre = ev.Prefill(model, batch.prompt, CFG)
    mask = torch.tensor([[True, False], [False, False]])
    retrieval = torch.tensor([[False, False], [True, False]])
    keep = ev.policy_keep("duo", pre, mask, retrieval=retrieval)
    assert keep[1][0].shape == (2, pre.n) and keep[0][0].shape == (2, CFG.consistent_length(pre.n))
    cate = ev.policy_keep("catekv", pre, mask)
    assert sum(i.shape[1] for l in keep for i in l) == sum(i.shape[1] for l in cate for i in l)
    with pytest.raises(ValueError, match="^retrieval"):
        ev.policy_keep("duo", pre, mask)
    gate = ev.duo_gates(model, batch, pre)
    assert gate.shape == (2, 2) and ((gate >= -1e-6) & (gate <= 1)).all()
    top = ev.retrieval_heads(gate, 1)
    assert int(top.sum()) == 1 and gate[top] == gate.max()


def test_catekv_select_keeps_sink_recent_top_chunks():
    n, H, B = 128, 3, 2
    start, end, M = heads.middle_region(n, CFG.chunk, CFG.init, CFG.recent, CFG.tail_reserve)
    attn = torch.rand(B, H, CFG.last_q, end - start) * 0.01
    attn[:, :, :, 40] = 1.0  # chunk 10 of the middle
    keep = policy.catekv_select(attn, n, torch.tensor([True, False, False]), CFG)
    assert keep[0].shape == (B, n)
    for idx in keep[1:]:
        assert idx.shape == (B, CFG.consistent_length(n)) == (B, CFG.budget + CFG.tail_reserve)
        for row in idx.tolist():
            s = set(row)
            assert len(s) == len(row) and min(s) >= 0 and max(s) < n
            assert set(range(CFG.init)) <= s and set(range(end, n)) <= s and start + 40 in s
    with pytest.raises(ValueError, match="^n"):
        policy.catekv_select(torch.rand(1, 1, 16, 4), 30, torch.tensor([False]), CFG)


def test_config_bad_input():
    with pytest.raises(ValueError, match="^budget"):
        policy.CateKVConfig(budget=10)
    with pytest.raises(ValueError, match="^budget"):
        policy.CateKVConfig(budget=26)
    with pytest.raises(ValueError, match="^adaptive_ratio"):
        policy.CateKVConfig(adaptive_ratio=-0.1)


def test_equal_bytes_and_cache_accounting(model):
    batch = hybrid_recall(2, seed=4)
    pre = ev.Prefill(model, batch.prompt, CFG)
    mask = torch.tensor([[True, False], [False, False]])
    keeps = {m: ev.policy_keep(m, pre, mask, generator=torch.Generator().manual_seed(0), retrieval=mask)
             for m in ev.METHODS}
    cate_len = sum(i.shape[1] for layer in keeps["catekv"] for i in layer)
    for m in ("streaming", "snapkv", "duo", "random-heads", "no-critical"):
        n_heads = sum(len(layer) for layer in keeps[m])
        other = sum(i.shape[1] for layer in keeps[m] for i in layer)
        assert abs(other - cate_len) <= n_heads  # equal bytes to +-1 token per head
    cache = kvcache.HybridKVCache.from_prefill(pre.ks, pre.vs, keeps["catekv"])
    D = model.head_dim
    expect = lambda g: 2 * 2 * D * 2 * (1 * (pre.n + g) + 3 * (CFG.consistent_length(pre.n) + g))  # B=2, 1 adaptive
    assert cache.nbytes() == expect(0)
    assert len(cache.groups[0]) == 2 and len(cache.groups[1]) == 1  # two physical caches where heads differ
    model.decode_step(batch.stream[:, 0], batch.prompt[:, -1], cache, pre.n)
    assert cache.nbytes() == expect(1) == kvcache.kv_bytes([cache.lengths(l) for l in range(2)], D)


def test_from_prefill_refuses_duplicate_float_and_mixed_inputs():
    B, H, n, D = 2, 2, 12, 4
    ks = [torch.randn(B, H, n, D) for _ in range(2)]
    vs = [torch.randn(B, H, n, D) for _ in range(2)]
    ok = [[torch.arange(n).expand(B, n), torch.tensor([[0, 1, 5], [0, 2, 3]])] for _ in range(2)]
    assert kvcache.HybridKVCache.from_prefill(ks, vs, ok).nbytes() == 2 * 2 * D * B * 2 * (n + 3)
    dup = [ok[0], [ok[1][0], torch.tensor([[0, 1, 5], [0, 3, 3]])]]
    with pytest.raises(ValueError, match="^keep: layer 1 head 1.*twice"):
        kvcache.HybridKVCache.from_prefill(ks, vs, dup)
    flt = [ok[0], [ok[1][0], torch.tensor([[0.0, 1.0, 5.0], [0.0, 2.0, 3.0]])]]
    with pytest.raises(ValueError, match="^keep: layer 1 head 1.*integers"):
        kvcache.HybridKVCache.from_prefill(ks, vs, flt)
    with pytest.raises(ValueError, match="^ks"):
        kvcache.HybridKVCache.from_prefill([ks[0], torch.randn(B, H, n, 2 * D)], vs, ok)
    with pytest.raises(ValueError, match="^vs"):
        kvcache.HybridKVCache.from_prefill(ks, [vs[0], torch.randn(B, H, n, 2 * D)], ok)


def test_accuracy_concat_and_amdahl(model):
    a, b = hybrid_recall(2, seed=1), hybrid_recall(3, seed=2)
    both = ev.concat([a, b])
    assert both.prompt.shape[0] == 5 and torch.equal(both[2:].prompt, b.prompt)
    pre = ev.Prefill(model, both.prompt, CFG)
    mask = torch.tensor([[True, False], [False, False]])
    out = ev.accuracy(model, [both], [pre], "catekv", mask)
    assert 0 <= out["acc"] <= 1 and out["ratio"] == pytest.approx(pre.n / ((pre.n + 3 * 56) / 4))
    assert ev.amdahl(0.5, 2.0) == pytest.approx(4 / 3) and ev.amdahl(0.0, 5.0) == 1.0
    with pytest.raises(ValueError, match="^fraction"):
        ev.amdahl(1.5, 2.0)
    rec = [{"device": "H200", "context": 131072, "batch": 1, "smoke": False,
            "speedup": {"sdpa_full": 2.3, "kernel_full": 2.1}},
           {"device": "H200", "context": 32768, "batch": 1, "smoke": False, "speedup": {"kernel_full": 2.0}},
           {"device": "H200", "context": 131072, "batch": 8, "smoke": False, "speedup": {"sdpa_full": 2.4}},
           {"device": "cpu", "context": 262144, "batch": 1, "smoke": True, "speedup": {"sdpa_full": 9.0}}]
    assert ev.measured_attention_speedup(rec) == {"speedup": 2.3, "context": 131072, "device": "H200"}
    assert ev.measured_attention_speedup([]) is None


def test_llama_projection():
    p = ev.llama_kv_projection(131_072, 0.4, 2048)
    assert p["full_gib"] == pytest.approx(16.0)
    assert p["ratio"] == pytest.approx(131072 / (0.4 * 131072 + 0.6 * 2080), rel=1e-12)
    assert 2.4 < p["ratio"] < 2.5


def test_captured_mass_in_unit_interval(model):
    batch = hybrid_recall(2, seed=5, n_queries=2)
    pre = ev.Prefill(model, batch.prompt, CFG)
    m = ev.captured_mass(model, batch, pre)
    assert m.shape == (2, 2, 2) and (m > 0).all() and (m <= 1 + 1e-5).all()


# --- training and the shipped checkpoint ----------------------------------------------------------

def test_a_few_training_steps_run_with_finite_losses():
    torch.manual_seed(0)
    m = TinyDecoder(VOCAB.size, dim=32, layers=2, q_heads=2, kv_heads=2)
    hist = train.train_decoder(m, data=dict(prompt_len=64, n_pairs=6, n_queries=4, n_demos=2), steps=6,
                               batch_size=8, lr=3e-3, log_every=3)
    assert hist["step"] == [3, 6] and all(math.isfinite(x) for x in hist["train_loss"])


def test_shipped_checkpoint_loads_into_the_current_model():
    if not (train.CHECKPOINTS / "decoder.pt").exists():
        pytest.skip("no shipped checkpoint")
    m, meta = train.load_decoder()
    assert {"command", "commit", "recipe", "training_seconds", "device", "final", "data"} <= set(meta)
    assert sum(p.numel() for p in m.parameters()) == meta["parameters"]
    assert meta["recipe"] == train.RECIPES["quick"]  # the shipped weights come from the current recipe
    assert (train.CHECKPOINTS / "decoder.pt").stat().st_size < 4_000_000
    batch = hybrid_recall(2, seed=0, **train.DATA["quick"])
    assert m(batch.full_sequence()).shape == (2, 280, VOCAB.size)
    assert meta["final"]["valid_acc_full_cache"] >= 0.95


from companion.catekv import cache as _cc, data as _cd, evaluate as _ce, heads as _ch, model as _cmod
from companion.catekv import policy as _cp

_NAN = float("nan")
CATEKV_BAD_INPUTS = [  # one row per public function at least; each refused naming its argument
    (lambda: _ce.Prefill("model", torch.zeros(1, 4, dtype=torch.long), None), "model"),
    (lambda: _ce.captured_mass("model", None, None), "model"),
    (lambda: _ce.decode_accuracy("model", None, None, None), "model"),
    (lambda: _ce.duo_gates("model", None, None), "model"),
    (lambda: _ce.solo_compression("model", None, None), "model"),
    (lambda: _ce.kernel_errors("cache", 0, 2, "torch", torch.Generator()), "cache"),
    (lambda: _cd.Vocab(n_keys=0), "n_keys"),
    (lambda: _cmod.causal_attention_probs(torch.full((1, 1, 2, 4), _NAN), torch.zeros(1, 1, 4, 4), 2), "q"),
    (lambda: _cp.chunk_scores(torch.ones(2, 3, 8), 3), "chunk"),
    (lambda: _ce.concat([]), "batches"),
    (lambda: _cmod.decode_backend(torch.zeros(1), "gpu"), "backend"),
    (lambda: _cp.duo_select(torch.ones(2, 3), 8, 1, 2, 1), "is_retrieval"),
    (lambda: _cp.equal_bytes_per_head([]), "keep_per_layer"),
    (lambda: _ch.head_votes(torch.ones(4), 1.5), "adaptive_ratio"),
    (lambda: _cc.kv_bytes([3, -1], 16), "lengths"),
    (lambda: _cc.kv_bytes([3, 1], 0), "head_dim"),
    (lambda: _ce.measured_attention_speedup("records"), "records"),
    (lambda: _ch.middle_attention(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 8, 4), 5, 3), "end"),
    (lambda: _cp.smooth_scores(torch.ones(2, 8), 0), "pool"),
    (lambda: _cp.snapkv_select(torch.ones(1, 2, 4, 8), 0, 2), "budget"),
    (lambda: _cp.streaming_select(8, -1, 2, 2, 1), "sink"),
    # issue 49: a fractional or bool end of the middle keys, through as_positive_int
    (lambda: _ch.middle_attention(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 8, 4), 1, 3.5), "end: expected an integer"),
    (lambda: _ch.middle_attention(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 8, 4), 0, True), "end: expected an integer"),
]


@pytest.mark.parametrize("call, name", CATEKV_BAD_INPUTS)
def test_catekv_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
