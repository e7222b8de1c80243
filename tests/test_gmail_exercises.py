"""The checkers of the GMAIL exercises: a right answer passes, and each classic mistake is named."""

import torch.nn.functional as F

import companion.gmail as gm
from companion.exercises import gmail as ex


def _multi(z_gen, z_real, ids, tau, *, normalise=True, divide=True, rows=True, mean_pos=True):
    zg = F.normalize(z_gen, dim=1) if normalise else z_gen
    zr = F.normalize(z_real, dim=1) if normalise else z_real
    S = zg @ zr.T / (tau if divide else 1.0)
    if not rows:
        S = S.T
    pos = (ids[:, None] == ids[None, :]).to(S.dtype)
    total = (pos * S.log_softmax(1)).sum(1)
    return -(total / pos.sum(1) if mean_pos else total).mean()


def test_alignment_checker_accepts_the_package_and_names_mistakes():
    def package(z_gen, z_real, ids, tau):
        return gm.gen_real_alignment_loss(z_gen, z_real, ids, tau)

    report = ex.check_alignment_loss(package)
    assert report.passed and report.score == 2
    assert ex.check_alignment_loss(lambda *a: _multi(*a)).passed

    def diagonal(z_gen, z_real, ids, tau):
        return gm.gen_real_alignment_loss(z_gen, z_real, None, tau)

    assert "only the diagonal" in str(ex.check_alignment_loss(diagonal))
    assert "normalise z_gen and z_real" in str(ex.check_alignment_loss(lambda *a: _multi(*a, normalise=False)))
    assert "temperature" in str(ex.check_alignment_loss(lambda *a: _multi(*a, divide=False)))
    assert "real -> generated" in str(ex.check_alignment_loss(lambda *a: _multi(*a, rows=False)))
    assert "instead of averaging" in str(ex.check_alignment_loss(lambda *a: _multi(*a, mean_pos=False)))

    def per_row(z_gen, z_real, ids, tau):
        S = F.normalize(z_gen, dim=1) @ F.normalize(z_real, dim=1).T / tau
        return -S.log_softmax(1).diagonal()

    assert "not a single number" in str(ex.check_alignment_loss(per_row))


def test_lora_checker_accepts_the_formula_and_names_mistakes():
    def right(x, W, b, A, B, alpha):
        return x @ W.T + b + alpha / A.shape[0] * (x @ A.T) @ B.T

    assert ex.check_lora(right).passed and ex.check_lora(right).score == 2
    assert "alpha / r" in str(ex.check_lora(lambda x, W, b, A, B, alpha: x @ W.T + b + alpha * (x @ A.T) @ B.T))
    assert "missing its scale" in str(ex.check_lora(lambda x, W, b, A, B, alpha: x @ W.T + b + (x @ A.T) @ B.T))
    assert "base layer only" in str(ex.check_lora(lambda x, W, b, A, B, alpha: x @ W.T + b))
    assert "update only" in str(ex.check_lora(lambda x, W, b, A, B, alpha: alpha / A.shape[0] * (x @ A.T) @ B.T))
    assert "shape" in str(ex.check_lora(lambda x, W, b, A, B, alpha: (x @ W.T).T))


def test_a_stub_is_not_done():
    def stub(*args):
        raise NotImplementedError()

    for check in (ex.check_alignment_loss, ex.check_lora):
        report = check(stub)
        assert report.not_done and report.score == 0


def test_reading_b_checker_accepts_the_answer_and_names_mistakes():
    def right(dual, x, real):
        proj = dual.f_r.proj if real else dual.proj_g
        return F.normalize(proj(dual.backbone_g(x)), dim=-1)

    assert ex.check_reading_b(right).passed and ex.check_reading_b(right).score == 2

    def reading_a(dual, x, real):
        return dual.f_r(x) if real else dual.embed_gen(x)

    assert "Reading A" in str(ex.check_reading_b(reading_a))

    def one_projection(dual, x, real):
        return dual.embed_gen(x)

    assert "wrong projection" in str(ex.check_reading_b(one_projection))

    def raw(dual, x, real):
        return (dual.f_r.proj if real else dual.proj_g)(dual.backbone_g(x))

    assert "unit length" in str(ex.check_reading_b(raw))
    assert "shape" in str(ex.check_reading_b(lambda dual, x, real: dual.embed_gen(x).T))

    def stub(*args):
        raise NotImplementedError()

    report = ex.check_reading_b(stub)
    assert report.not_done and report.score == 0
