"""companion.gmail: the data, the generator, LoRA and the dual encoder, the losses (against an
independent reference), the metrics, f_r frozen after training, and bad input."""

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import companion.gmail as gm
from companion.text import HashTextEncoder


@pytest.fixture(scope="module")
def splits():
    return gm.load_digits_splits(0)


@pytest.fixture(scope="module")
def bank():
    return torch.tensor(HashTextEncoder().encode(gm.caption_strings()))


@pytest.fixture(scope="module")
def f_r(splits, bank):
    return gm.pretrain_real_encoder(splits.P, bank, epochs=2, seed=0)


def test_splits_are_stratified_disjoint_and_captioned(splits):
    assert [len(s.x) for s in splits[:4]] == [500, 600, 30, 1797 - 1130]
    for s in splits[:4]:
        assert s.x.dtype == torch.float32 and s.x.shape[1] == 64 and 0 <= s.x.min() and s.x.max() <= 1
        assert s.cap.dtype == torch.int64 and torch.equal(s.cap // 3, s.y)
    rows = {tuple(r) for s in splits[:4] for r in s.x.numpy().round(4).tolist()}
    assert len(rows) >= 1797 - 20  # a few digits are duplicated pixel for pixel in the data set
    # the terciles split the pool P u G u D into thirds within each digit
    pool = torch.cat([splits.P.cap, splits.G.cap, splits.D.cap])
    thirds = torch.bincount(pool % 3 + 3 * (pool // 3), minlength=30).reshape(10, 3).double()
    assert (thirds / thirds.sum(1, keepdim=True) - 1 / 3).abs().max() < 0.05
    assert len(gm.caption_strings()) == 30 and gm.caption_strings()[5] == "a bold handwritten digit one"


def test_n_down_zero_runs_and_real_then_says_why(bank):
    s = gm.load_digits_splits(1, n_down=0)
    assert len(s.D.x) == 0 and s.D.x.shape == (0, 64)
    ex = gm.Experiment.__new__(gm.Experiment)  # only the pieces head_data needs
    ex.splits, ex.f_r = s, gm.ImageEncoder()
    with pytest.raises(ValueError, match="no real downstream data"):
        ex.head_data("real", 0.0)


def test_generator_range_determinism_and_class_means(splits):
    G = splits.G
    gen = gm.PCAGaussGenerator().fit(G.x, G.y, G.cap, splits.thresholds)
    cap = torch.arange(30).repeat_interleave(5)
    a, b = gen.sample(cap, gamma=1.5, seed=3), gen.sample(cap, gamma=1.5, seed=3)
    assert a.shape == (150, 64) and a.dtype == torch.float32 and torch.equal(a, b)
    assert a.min() >= 0 and a.max() <= 1
    assert not torch.equal(a, gen.sample(cap, gamma=1.5, seed=4))
    # at gamma = 0 the empirical latent means of 5,000 draws of a caption match the fitted mean
    # (clipping to [0, 1] and rejection move them a little: compare in latent space, loosely)
    c = 3 * 4 + 1
    x = gen.sample_clean(torch.full((5000,), c), seed=0, retries=0).double().numpy()
    z = (x - gen.mu) @ gen.U
    spread = np.sqrt(np.diag(gen.chol[c] @ gen.chol[c].T))
    assert np.all(np.abs(z.mean(0) - gen.means[c]) < 0.25 * spread + 0.05)
    # the fingerprint: the same for the same digit, different across digits, 0 at gamma = 0
    assert torch.equal(gm.fingerprint(3, 1.0), gm.fingerprint(3, 1.0))
    fps = torch.stack([gm.fingerprint(c, 1.0) for c in range(10)])
    assert all(not torch.equal(fps[i], fps[j]) for i, j in itertools.combinations(range(10), 2))
    assert fps.abs().max() == pytest.approx(gm.FINGERPRINT_SCALE)
    assert torch.equal(gm.fingerprint(7, 0.0), torch.zeros(64))
    clean = gen.sample_clean(cap, seed=3)
    assert torch.equal(gen.stamp(clean, cap, 0.0), clean)


def test_rejection_matches_the_thickness_of_the_caption(splits):
    G = splits.G
    gen = gm.PCAGaussGenerator().fit(G.x, G.y, G.cap, splits.thresholds)
    cap = torch.arange(30).repeat_interleave(40)
    x = gen.sample_clean(cap, seed=0)
    agree = (gm.thickness(x, cap // 3, splits.thresholds) == cap % 3).double().mean()
    assert agree > 0.9


def test_lora_is_the_base_layer_at_init_and_follows_its_formula():
    torch.manual_seed(0)
    base = torch.nn.Linear(7, 5)
    layer = gm.LoRALinear(base, rank=4, alpha=8.0)
    x = torch.randn(11, 7)
    assert torch.equal(layer(x), base(x))
    assert not base.weight.requires_grad and layer.A.requires_grad and layer.B.requires_grad
    assert layer.A.std().item() == pytest.approx(1 / math.sqrt(4), rel=0.5)
    with torch.no_grad():
        layer.B.normal_()
    manual = x @ base.weight.T + base.bias + 2.0 * (x @ layer.A.T) @ layer.B.T
    assert torch.allclose(layer(x), manual, atol=1e-6)


def test_dual_encoder_equals_f_r_at_init_and_trains_only_lora_and_projection(f_r):
    dual = gm.DualEncoder(f_r, rank=4)
    x = torch.rand(20, 64)
    assert torch.equal(dual.embed_gen(x), dual.embed_real(x))
    names = {n for n, p in dual.named_parameters() if p.requires_grad}
    assert names and all((".A" in n or ".B" in n or n.startswith("proj_g")) for n in names)
    assert all(not p.requires_grad for p in dual.f_r.parameters())


def test_f_r_is_bit_identical_after_every_kind_of_training(splits, bank, f_r):
    before = gm.checksum(f_r)
    snapshot = [p.detach().clone() for p in f_r.parameters()]
    x, cap = splits.G.x[:200], splits.G.cap[:200]
    dual = gm.train_gmail(f_r, x, cap, splits.P.x, splits.P.cap, text_bank=bank, lam_txt=1.0, steps=5)
    gm.finetune_naive(f_r, x, cap, bank, steps=5)
    for mode in gm.ALIGN_MODES:
        gm.train_gmail(f_r, x, cap, splits.P.x, splits.P.cap, mode=mode, steps=3)
    assert gm.checksum(f_r) == before
    assert all(torch.equal(p, q) for p, q in zip(snapshot, f_r.parameters()))
    # and the generated side did move
    assert not torch.equal(dual.embed_gen(x[:5]), dual.embed_real(x[:5]))


def _reference_multi_positive(zg, zr, ids, tau):
    """Brute force: a loop over rows and positives, in float64."""
    zg = zg.double() / zg.double().norm(dim=1, keepdim=True)
    zr = zr.double() / zr.double().norm(dim=1, keepdim=True)
    total = 0.0
    for i in range(len(zg)):
        logits = [float(zg[i] @ zr[j]) / tau for j in range(len(zr))]
        lse = math.log(sum(math.exp(v) for v in logits))
        pos = [j for j in range(len(zr)) if ids[j] == ids[i]]
        total += -sum(logits[j] - lse for j in pos) / len(pos)
    return total / len(zg)


def test_alignment_loss_matches_eq1_and_a_brute_force_reference():
    g = torch.Generator().manual_seed(0)
    zg, zr = torch.randn(9, 4, generator=g, dtype=torch.float64), torch.randn(9, 4, generator=g, dtype=torch.float64)
    S = F.normalize(zg, dim=1) @ F.normalize(zr, dim=1).T / 0.07
    eq1 = F.cross_entropy(S, torch.arange(9))
    assert torch.allclose(gm.gen_real_alignment_loss(zg, zr, None), eq1)
    assert torch.allclose(gm.gen_real_alignment_loss(zg, zr, torch.arange(9)), eq1)
    ids = torch.tensor([0, 1, 0, 2, 1, 0, 3, 3, 2])
    for tau in (0.07, 0.5):
        assert float(gm.gen_real_alignment_loss(zg, zr, ids, tau)) == pytest.approx(
            _reference_multi_positive(zg, zr, ids.tolist(), tau), rel=1e-10)
    # a 2 x 2 case by hand: orthogonal pairs with one caption, so S = I / tau, both entries of a
    # row are positives, and the loss is -(log p_11 + log p_12) / 2 = 1 / (2 tau) + log(1 + e^(-1/tau))
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    hand = 1 / (2 * 0.07) + math.log1p(math.exp(-1 / 0.07))
    assert float(gm.gen_real_alignment_loss(a, a, torch.tensor([5, 5]))) == pytest.approx(hand, rel=1e-12)
    assert float(gm.gen_real_alignment_loss(a, a, None)) == pytest.approx(math.log1p(math.exp(-1 / 0.07)))


def test_alignment_loss_is_scale_invariant_and_pulls_toward_the_partner():
    g = torch.Generator().manual_seed(1)
    zg, zr = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    ids = torch.tensor([0, 1, 1, 2, 3, 3])
    base = gm.gen_real_alignment_loss(zg, zr, ids)
    assert torch.allclose(gm.gen_real_alignment_loss(3.7 * zg, 0.2 * zr, ids), base, atol=1e-5)
    assert gm.gen_real_alignment_loss(zr.clone(), zr, None) < gm.gen_real_alignment_loss(zg, zr, None)


def test_metrics():
    g = torch.Generator().manual_seed(2)
    a = torch.randn(300, 10, generator=g)
    b = torch.randn(300, 10, generator=g)
    assert gm.paired_cosine(a, a) == pytest.approx(1.0) and gm.paired_cosine(a, -a) == pytest.approx(-1.0)
    assert abs(gm.domain_classifier_accuracy(a, b) - 0.5) < 0.1
    assert gm.domain_classifier_accuracy(a, b + 3.0) > 0.95
    assert gm.concentration(a[:1].repeat(5, 1)) == pytest.approx(1.0)
    assert gm.concentration(torch.cat([a, -a])) == pytest.approx(0.0, abs=1e-6)
    cap = torch.arange(30).repeat(10)
    centres = F.normalize(torch.randn(30, 10, generator=g), dim=1)
    noisy = centres[cap] + 0.01 * torch.randn(300, 10, generator=g)
    assert gm.caption_retrieval(noisy, cap, centres[cap], cap) == 1.0
    assert gm.caption_retrieval(torch.eye(3), torch.arange(3), torch.eye(3), torch.tensor([2, 1, 0])) == 1 / 3
    bank = F.normalize(torch.randn(30, 10, generator=g), dim=1)
    cap = torch.randint(0, 30, (50,), generator=g)
    assert gm.caption_accuracy(None, bank[cap], cap, bank) == 1.0


def test_pairing_is_by_caption(splits):
    gen = torch.Generator().manual_seed(0)
    cap = torch.randint(0, 30, (500,), generator=gen)
    j = gm.pair_partners(cap, splits.P.cap, gen)
    assert torch.equal(splits.P.cap[j], cap)


def test_bad_input_raises_value_errors_naming_the_argument(splits, bank, f_r):
    z = torch.randn(4, 8)
    with pytest.raises(ValueError, match="z_gen, z_real"):
        gm.gen_real_alignment_loss(z, torch.randn(5, 8))
    with pytest.raises(ValueError, match="z_gen"):
        gm.gen_real_alignment_loss(torch.full((4, 8), float("nan")), z)
    with pytest.raises(ValueError, match="z_gen: expected at least one element"):
        gm.gen_real_alignment_loss(torch.zeros(0, 8), torch.zeros(0, 8))
    with pytest.raises(ValueError, match="tau"):
        gm.gen_real_alignment_loss(z, z, None, tau=0.0)
    with pytest.raises(ValueError, match="gamma"):
        gm.fingerprint(2, -0.5)
    with pytest.raises(ValueError, match="cap"):
        gm.PCAGaussGenerator().fit(splits.G.x, splits.G.y, splits.G.cap + 30, splits.thresholds)
    with pytest.raises(ValueError, match="x: expected shape"):
        gm.PCAGaussGenerator().fit(splits.G.x.reshape(-1, 1, 8, 8), splits.G.y, splits.G.cap, splits.thresholds)
    with pytest.raises(ValueError, match="x: contains NaN"):
        bad = splits.G.x.clone()
        bad[0, 0] = float("nan")
        gm.PCAGaussGenerator().fit(bad, splits.G.y, splits.G.cap, splits.thresholds)
    with pytest.raises(ValueError, match="generator"):
        gm.PCAGaussGenerator().sample(torch.tensor([0]))
    with pytest.raises(ValueError, match="ids"):
        gm.caption_ce_loss(z, torch.randn(30, 8), torch.tensor([0, 1, 2, 30]), 0.0)
    with pytest.raises(ValueError, match="mode"):
        gm.train_gmail(f_r, splits.G.x, splits.G.cap, splits.P.x, splits.P.cap, mode="both")
    with pytest.raises(ValueError, match="text_bank"):
        gm.train_gmail(f_r, splits.G.x, splits.G.cap, splits.P.x, splits.P.cap, lam_txt=1.0)
    with pytest.raises(ValueError, match="rank"):
        gm.LoRALinear(torch.nn.Linear(3, 3), rank=0)
    with pytest.raises(ValueError, match="n_pretrain"):
        gm.load_digits_splits(0, n_pretrain=200)
    with pytest.raises(ValueError, match="text_bank"):
        gm.Experiment(0, bank[:10])


def test_hash_text_encoder_is_deterministic_across_processes():
    code = ("from companion.text import HashTextEncoder; "
            "print(HashTextEncoder().encode(['a bold handwritten digit one', 'a thin handwritten digit four']).sum())")
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
           for _ in range(2)}
    assert len(out) == 1


# --- issue 49: the table of bad inputs ------------------------------------------------------------

_Z = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
_ZERO_ROW = torch.cat([torch.zeros(1, 8), _Z[1:]])
_BANK = torch.randn(30, 8, generator=torch.Generator().manual_seed(1))
_IDS = torch.tensor([0, 1, 2, 3])

GMAIL_BAD_INPUTS = [
    (lambda **kw: gm.gen_real_alignment_loss(z_real=_Z, **kw), dict(z_gen=_ZERO_ROW), "z_gen"),
    (lambda **kw: gm.gen_real_alignment_loss(_Z, **kw), dict(z_real=_ZERO_ROW), "z_real"),
    (lambda **kw: gm.gen_real_alignment_loss(_Z, **kw), dict(z_real=torch.full((4, 8), float("inf"))), "z_real"),
    (lambda **kw: gm.gen_real_alignment_loss(_Z, _Z, **kw), dict(tau=float("nan")), "tau"),
    (lambda **kw: gm.gen_real_alignment_loss(_Z, _Z, **kw), dict(caption_ids=torch.tensor([0, 1, -1, 2])),
     "caption_ids"),
    (lambda **kw: gm.gen_real_alignment_loss(_Z, _Z, **kw), dict(caption_ids=torch.tensor([0.0, 1.0, 2.0, 3.0])),
     "caption_ids"),
    (lambda **kw: gm.caption_logits(_Z, _BANK, **kw), dict(logit_scale=float("nan")), "logit_scale"),
    (lambda **kw: gm.caption_logits(_Z, _BANK, **kw), dict(logit_scale=torch.tensor(float("inf"))), "logit_scale"),
    (lambda **kw: gm.caption_logits(_Z, _BANK, **kw), dict(logit_scale=torch.zeros(2)), "logit_scale"),
    (lambda **kw: gm.caption_logits(_Z, _BANK, **kw), dict(logit_scale="2"), "logit_scale"),
    (lambda **kw: gm.caption_logits(_Z, **kw), dict(text_bank=torch.randn(30, 7), logit_scale=0.0), "text_bank"),
    (lambda **kw: gm.caption_ce_loss(_Z, _BANK, _IDS, **kw), dict(logit_scale=float("nan")), "logit_scale"),
    (lambda **kw: gm.caption_ce_loss(_Z, _BANK, logit_scale=0.0, **kw), dict(ids=torch.tensor([0, 1, 2, 30])), "ids"),
    (lambda **kw: gm.caption_ce_loss(text_bank=_BANK, ids=_IDS, logit_scale=0.0, **kw),
     dict(z=torch.full((4, 8), float("nan"))), "z"),
    (lambda **kw: gm.paired_cosine(_Z, **kw), dict(b=torch.randn(3, 8)), "a, b"),
    (lambda **kw: gm.concentration(**kw), dict(z=torch.zeros(0, 8)), "z"),
    (lambda **kw: gm.caption_retrieval(_Z, z_ref=_Z, cap_ref=_IDS, **kw), dict(cap=torch.tensor([0, 1])), "cap"),
    (lambda **kw: gm.domain_classifier_accuracy(_Z, _Z, **kw), dict(folds=1), "folds"),
    (lambda **kw: gm.caption_accuracy(None, _Z, text_bank=_BANK, **kw), dict(cap=torch.tensor([0, 1, 2, 99])), "cap"),
    (lambda **kw: gm.fingerprint(2, **kw), dict(gamma=float("nan")), "gamma"),
    (lambda **kw: gm.fingerprint(gamma=1.0, **kw), dict(c=10), "c"),
    (lambda **kw: gm.LoRALinear(torch.nn.Linear(3, 3), **kw), dict(alpha=float("nan")), "alpha"),
    (lambda **kw: gm.add_lora(torch.nn.Sequential(torch.nn.Linear(3, 3)), **kw), dict(rank=0), "rank"),
    (lambda **kw: gm.ImageEncoder(**kw), dict(dim=0), "dim"),
    (lambda **kw: gm.thickness_terciles(y=torch.zeros(2, dtype=torch.long), **kw),
     dict(x=torch.full((2, 64), float("nan"))), "x"),
    # issue 49, the shared helpers: bool ids, integer embeddings, a list where a tensor goes
    (lambda **kw: gm.caption_ce_loss(_Z, _BANK, logit_scale=0.0, **kw),
     dict(ids=torch.tensor([True, False, True, False])), "ids: expected integer indices"),
    (lambda **kw: gm.concentration(**kw), dict(z=torch.ones(4, 8, dtype=torch.long)),
     "z: expected a floating-point tensor"),
    (lambda **kw: gm.paired_cosine(_Z, **kw), dict(b=_Z.tolist()), "b: expected a torch.Tensor"),
    (lambda **kw: gm.thickness_terciles(x=torch.rand(2, 64), **kw), dict(y=torch.tensor([0.0, 1.0])),
     "y: expected integer indices"),
    (lambda **kw: gm.fingerprint(gamma=1.0, **kw), dict(c=2.0), "c: expected an integer"),
]


@pytest.mark.parametrize("fn, kwargs, name", GMAIL_BAD_INPUTS)
def test_bad_input_is_refused_naming_the_argument(fn, kwargs, name):
    with pytest.raises(ValueError, match=name):
        fn(**kwargs)


def test_a_learned_logit_scale_parameter_is_still_accepted():
    s = torch.nn.Parameter(torch.tensor(2.0))
    assert gm.caption_logits(_Z, _BANK, s).shape == (4, 30)


from companion.gmail import data as _gmd, experiment as _gme, models as _gmm, train as _gmt

_NAN = float("nan")
GMAIL_MORE_BAD_INPUTS = [  # the rest of the package's public functions
    (lambda: _gme.Budget(lr=_NAN), "lr"),
    (lambda: _gme.Budget(align_lr=-1e-4), "align_lr"),
    (lambda: _gme.Budget(batch=0), "batch"),
    (lambda: _gmm.CaptionHead(dim=0), "dim"),
    (lambda: _gmm.DualEncoder(gm.ImageEncoder(), rank=0), "rank"),
    (lambda: _gmm.DualEncoder(gm.ImageEncoder(), alpha=_NAN), "alpha"),
    (lambda: _gmd.caption_ids(torch.tensor([0, 11]), torch.tensor([0, 1])), "y"),
    (lambda: _gmd.caption_ids(torch.tensor([0, 1]), torch.tensor([0, 5])), "thick"),
    (lambda: _gmm.checksum("model"), "module"),
    (lambda: _gmt.pair_partners(torch.tensor([0, 1]), torch.tensor([0, 0]), torch.Generator()), "cap_pool"),
    (lambda: _gmt.train_head(torch.full((4, 8), _NAN), torch.zeros(4, dtype=torch.long), torch.randn(30, 8)), "z"),
    (lambda: _gmt.train_head(torch.randn(4, 8), torch.zeros(4, dtype=torch.long), torch.randn(30, 8), steps=0), "steps"),
]


@pytest.mark.parametrize("call, name", GMAIL_MORE_BAD_INPUTS)
def test_gmail_package_refuses_bad_input_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
