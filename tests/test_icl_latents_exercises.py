"""The checkers of the ICL-task-latents exercises: a right answer passes, and each classic
mistake is named."""

import torch

import companion.icl_latents as il
from companion.exercises import icl_latents as ex


def _bottleneck_by_hand(n, m):
    # built from the package's two masks: c and the context as in the context encoder, the
    # queries as the predictor's query rows (z's column becomes c's)
    size = 1 + n + m
    mask = torch.ones(size, size, dtype=torch.bool)
    mask[: 1 + n, : 1 + n] = il.context_mask(n)
    pm = il.predictor_mask(m)
    mask[1 + n:, 0] = pm[1:, 0]
    mask[1 + n:, 1 + n:] = pm[1:, 1:]
    return mask


def test_bottleneck_checker_accepts_an_answer_built_from_the_package_and_names_mistakes():
    assert ex.check_bottleneck_mask(_bottleneck_by_hand).score == 2
    v = ex._mask_variants
    variants = {
        "PyTorch's boolean": lambda n, m: ~_bottleneck_by_hand(n, m),
        "reads itself": lambda n, m: v(n, m)["c-self"],
        "context tokens read the summary": lambda n, m: v(n, m)["context-reads-c"],
        "bottleneck is gone": lambda n, m: v(n, m)["leak"],
        "read c only": lambda n, m: v(n, m)["no-self"],
        "attend to each other": lambda n, m: v(n, m)["queries"],
        "reads the queries": lambda n, m: v(n, m)["c-reads-queries"],
    }
    for phrase, fn in variants.items():
        report = ex.check_bottleneck_mask(fn)
        assert report.score == 0 and phrase in str(report), (phrase, str(report))
    assert "boolean tensor" in str(ex.check_bottleneck_mask(lambda n, m: _bottleneck_by_hand(n, m).float()))
    assert "shape" in str(ex.check_bottleneck_mask(lambda n, m: _bottleneck_by_hand(n, m)[:-1]))
    other = _bottleneck_by_hand(3, 2)
    other[0, 4] = False
    other[2, 5] = False
    assert "entries differ" in str(ex.check_bottleneck_mask(lambda n, m: other if n == 3 else None))


def test_bayes_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_bayes_mean(lambda a, b, c, s: il.bayes_linreg_predict(a, b, c, s)[0]).score == 2

    def phis(x_c, x_q):
        return (torch.cat([x_c, torch.ones_like(x_c)], -1),
                torch.cat([x_q, torch.ones_like(x_q)], -1))

    def lstsq(x_c, y_c, x_q, noise):
        phi_c, phi_q = phis(x_c, x_q)
        return phi_q @ torch.linalg.pinv(phi_c) @ y_c

    def sigma_not_squared(x_c, y_c, x_q, noise):
        phi_c, phi_q = phis(x_c, x_q)
        return il.bayes_feature_predict(phi_c, y_c, phi_q, noise ** 0.5)[0]

    def unit_ridge(x_c, y_c, x_q, noise):
        phi_c, phi_q = phis(x_c, x_q)
        return il.bayes_feature_predict(phi_c, y_c, phi_q, 1.0)[0]

    def no_bias(x_c, y_c, x_q, noise):
        return il.bayes_feature_predict(x_c, y_c, x_q, noise)[0]

    for phrase, fn in [("least squares", lstsq), ("sigma I, not sigma^2", sigma_not_squared),
                       ("whatever the noise", unit_ridge), ("bias feature", no_bias)]:
        report = ex.check_bayes_mean(fn)
        assert report.score == 0 and phrase in str(report), (phrase, str(report))

    def stub(*args):
        raise NotImplementedError()

    report = ex.check_bayes_mean(stub)
    assert report.not_done and report.score == 0


def test_probe_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_probe_r2(lambda Z, W: il.linear_probe_r2(Z, W, shuffle=False)).score == 1
    k = lambda Z: int(round(0.75 * len(Z)))  # noqa: E731
    assert ex.check_probe_r2(lambda Z, W: ex._r2_test_mean(Z, W, k(Z))).score == 1
    for phrase, fn in [("rows it was fitted on", lambda Z, W: ex._r2_in_sample(Z, W, k(Z))),
                       ("no intercept", lambda Z, W: ex._r2_no_intercept(Z, W, k(Z))),
                       ("pool the squared errors", lambda Z, W: ex._r2_pooled(Z, W, k(Z)))]:
        report = ex.check_probe_r2(fn)
        assert report.score == 0 and phrase in str(report), (phrase, str(report))
    # a shuffled split is a different probe: it is caught, not silently accepted
    assert ex.check_probe_r2(lambda Z, W: il.linear_probe_r2(Z, W)).score == 0
