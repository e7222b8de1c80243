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


def test_registered_alignment_runs_at_the_papers_rate_and_others_keep_theirs():
    b = gm.Budget()
    assert b.align_lr == 1e-4 and b.lr == 1e-3  # App. A for the alignment; ours elsewhere


def test_domain_probe_real_side_holds_distinct_test_images_caption_for_caption(ex):
    T = ex.splits.T
    rows = {tuple(r) for r in ex.held_real.tolist()}
    assert len(ex.held_real) == len(ex.cap_held)
    # no image twice (the partners of the paired cosine are drawn with replacement)
    index = {tuple(r): i for i, r in enumerate(T.x.tolist())}
    picked = [index[tuple(r)] for r in ex.held_real.tolist()]
    assert len(set(picked)) == len(picked) == len(rows)
    assert torch.equal(T.cap[torch.tensor(picked)], ex.cap_held)


def _eq1_reference(g, r, tau):
    """Eq. 1 written out in float64 numpy, apart from the package: -mean_i log softmax_j(S)_ii."""
    import numpy as np

    g = g / np.linalg.norm(g, axis=1, keepdims=True)
    r = r / np.linalg.norm(r, axis=1, keepdims=True)
    S = g @ r.T / tau
    S = S - S.max(1, keepdims=True)
    return float(-(np.diag(S) - np.log(np.exp(S).sum(1))).mean())


def test_eq1_is_blind_to_a_direction_outside_the_real_targets():
    """By construction: a generated set moved along a direction orthogonal to every real target
    keeps its loss at a rescaled temperature, and a linear probe then separates it perfectly."""
    import numpy as np

    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.normal(size=(64, 40)))[0]  # the real targets live in 40 dims
    r = rng.normal(size=(30, 40)) @ basis.T
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    g = r + 0.3 * rng.normal(size=(30, 40)) @ basis.T  # well-aligned pairs, same span
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    u = rng.normal(size=64)
    u -= basis @ (basis.T @ u)  # orthogonal to the span of the targets
    u /= np.linalg.norm(u)
    s = 0.8
    g_off = np.sqrt(1 - s**2) * g + s * u  # still unit vectors
    tau = 0.07
    ref = _eq1_reference(g_off, r, tau)
    assert ref == pytest.approx(_eq1_reference(g, r, tau / np.sqrt(1 - s**2)), abs=1e-9)
    pkg = gm.gen_real_alignment_loss(torch.tensor(g_off), torch.tensor(r), tau=tau)
    assert float(pkg) == pytest.approx(ref, abs=1e-9)  # the package's loss is Eq. 1
    # the same pairs without the offset are not separable along u, with it perfectly
    assert gm.domain_classifier_accuracy(torch.tensor(r), torch.tensor(g_off)) == 1.0
    assert np.allclose(r @ u, 0) and np.allclose(g_off @ u, s)
