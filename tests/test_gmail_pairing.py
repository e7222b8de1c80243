"""companion.gmail, issue 40: the paper's fixed partner pairing, the learnable temperature, the
equal-size generated set (60:1 as an ablation), the P-vs-T diagnostic, and the input checks on
images (0-1 grey levels) and digit labels."""

import pytest
import torch

import companion.gmail as gm
from companion.text import HashTextEncoder


@pytest.fixture(scope="module")
def bank():
    return torch.tensor(HashTextEncoder().encode(gm.caption_strings()))


@pytest.fixture(scope="module")
def ex(bank):
    budget = gm.Budget(fr_epochs=2, lora_steps=4, head_steps=3, max_ratio=3)
    return gm.Experiment(0, bank, budget)


def test_equal_sizes_by_default_and_each_generated_image_comes_from_a_real_one(ex):
    D = ex.splits.D
    assert len(ex.generated(0.0)) == len(D.x) == len(ex.gen_caps())  # the paper: one per real
    assert len(ex.generated(0.0, 3)) == 3 * len(D.x)
    # the k:1 set is nested in the (k+1):1 set, and every generated image has its source's caption
    assert torch.equal(ex.generated(1.5, 3)[: len(D.x)], ex.generated(1.5))
    assert torch.equal(ex.cap_gen, D.cap[ex.src_gen])
    for bad in (0, 4, 1.5):
        with pytest.raises(ValueError, match="ratio"):
            ex.generated(0.0, bad)


def _first_step_pairs(monkeypatch, ex, x_g, x_pool, cap_pool, **kw):
    """(drawn generated index, real target row) of the first alignment step: at step 0 f_g = f_r,
    so a row of the generated batch identifies the generated image it came from."""
    seen = []
    real = gm.train._alignment

    def spy(z_gen, z_real, ids, tau):
        seen.append((z_gen.detach().clone(), z_real.detach().clone()))
        return real(z_gen, z_real, ids, tau)

    monkeypatch.setattr(gm.train, "_alignment", spy)
    gm.train_gmail(ex.f_r, x_g, ex.gen_caps(), x_pool, cap_pool, steps=1, batch=64, **kw)
    with torch.no_grad():
        z_all = ex.f_r(x_g)
    z_gen, z_real = seen[0]
    return torch.cdist(z_gen, z_all).argmin(1), z_real


def test_fixed_partners_are_the_source_images(monkeypatch, ex):
    """Each generated image is paired with the real image of D whose caption made it; the earlier
    recipe drew a random same-caption image of P and D instead (and had no ``partners``)."""
    D = ex.splits.D
    x_g = ex.generated(0.0)
    with torch.no_grad():
        z_d, z_pool = ex.f_r(D.x), ex.f_r(ex.pool.x)
    for seed in range(3):
        i, z_real = _first_step_pairs(monkeypatch, ex, x_g, D.x, D.cap, partners=ex.src_gen[: len(x_g)],
                                      seed=seed)
        assert torch.allclose(z_real, z_d[ex.src_gen[i]], atol=1e-6)
    i, z_real = _first_step_pairs(monkeypatch, ex, x_g, ex.pool.x, ex.pool.cap, seed=0)
    match = torch.cdist(z_real, z_pool).argmin(1)
    assert torch.equal(ex.pool.cap[match], ex.gen_caps()[i])  # same caption ...
    assert not torch.allclose(z_real, z_d[ex.src_gen[i]], atol=1e-6)  # ... but not the source


def test_fixed_partner_is_the_source_image(ex):
    """With one generated image per real one, generated image i is paired with D[i]."""
    D = ex.splits.D
    n = len(D.x)
    assert torch.equal(ex.src_gen[:n], torch.arange(n))
    assert torch.equal(ex.src_gen[n: 2 * n], torch.arange(n))


def test_partners_must_share_the_caption(ex):
    D = ex.splits.D
    x_g, cap = ex.generated(1.5), ex.gen_caps()
    wrong = torch.roll(ex.src_gen[: len(x_g)], 1)
    if bool((D.cap[wrong] == cap).all()):
        pytest.skip("the roll kept every caption")
    with pytest.raises(ValueError, match="partners"):
        gm.train_gmail(ex.f_r, x_g, cap, D.x, D.cap, partners=wrong, steps=1)
    with pytest.raises(ValueError, match="partners"):
        gm.train_gmail(ex.f_r, x_g, cap, D.x, D.cap, partners=torch.full((len(x_g),), len(D.x)),
                       steps=1)


def test_learnable_temperature_moves_and_is_kept(ex):
    D = ex.splits.D
    x_g, cap = ex.generated(1.5), ex.gen_caps()
    kw = dict(partners=ex.src_gen[: len(x_g)], steps=20, lr=1e-2, seed=0)
    fixed = gm.train_gmail(ex.f_r, x_g, cap, D.x, D.cap, **kw)
    learned = gm.train_gmail(ex.f_r, x_g, cap, D.x, D.cap, learn_tau=True, **kw)
    assert fixed.tau == 0.07
    assert learned.tau != pytest.approx(0.07, abs=1e-4) and 0.01 <= learned.tau  # clamp: scale <= 100
    with pytest.raises(ValueError, match="learn_tau"):
        gm.train_gmail(ex.f_r, x_g, cap, D.x, D.cap, learn_tau=1, steps=1)


def test_experiment_pairings_ratio_and_diagnostics(ex):
    a = ex.encoder("gmail", 1.5)
    assert ex.encoder("gmail", 1.5) is a  # cached
    b = ex.encoder("gmail", 1.5, pairing="random-pool")
    c = ex.encoder("gmail", 1.5, ratio=3)
    assert len({id(a), id(b), id(c)}) == 3
    with pytest.raises(ValueError, match="pairing"):
        ex.encoder("gmail", 1.5, pairing="nearest")
    assert 0 <= ex.zero_shot() <= 1 and 0 <= ex.train_test_domain() <= 1
    acc = ex.run("mix-frozen", 1.5, head_seed=5)
    assert 0 <= acc <= 1 and ex.run("mix-frozen", 1.5, head_seed=5) == acc


def test_images_on_the_0_16_scale_and_bad_labels_are_refused(ex, bank):
    P, G = ex.splits.P, ex.splits.G
    raw = P._replace(x=P.x * 16) if hasattr(P, "_replace") else gm.Split(P.x * 16, P.y, P.cap)
    with pytest.raises(ValueError, match=r"P\.x.*0-16"):
        gm.pretrain_real_encoder(raw, bank, epochs=1)
    with pytest.raises(ValueError, match="x_gen"):
        gm.train_gmail(ex.f_r, G.x * 16, G.cap, P.x, P.cap, steps=1)
    with pytest.raises(ValueError, match="x_pool"):
        gm.train_gmail(ex.f_r, G.x, G.cap, P.x - 1, P.cap, steps=1)
    with pytest.raises(ValueError, match="x"):
        gm.finetune_naive(ex.f_r, G.x * 16, G.cap, bank, steps=1)
    gen = gm.PCAGaussGenerator()
    with pytest.raises(ValueError, match="x"):
        gen.fit(G.x * 16, G.y, G.cap, ex.splits.thresholds)
    with pytest.raises(ValueError, match="y"):
        gen.fit(G.x, G.y.double(), G.cap, ex.splits.thresholds)
    with pytest.raises(ValueError, match="y"):
        gen.fit(G.x, -G.y, G.cap, ex.splits.thresholds)
    with pytest.raises(ValueError, match="cap"):
        gen.fit(G.x, (G.y + 1) % 10, G.cap, ex.splits.thresholds)
    with pytest.raises(ValueError, match="y"):
        gm.thickness_terciles(G.x, G.y.float())
    with pytest.raises(ValueError, match="y"):
        gm.thickness(G.x, G.y - 20, ex.splits.thresholds)
    with pytest.raises(ValueError, match="thresholds"):
        gm.thickness(G.x, G.y, ex.splits.thresholds[:5])
