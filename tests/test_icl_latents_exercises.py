"""The checkers of the ICL-task-latents exercises: a right answer passes, and each classic
mistake is named."""

import torch

import companion.icl_latents as il
from companion.exercises import icl_latents as ex


def test_mask_checker_accepts_the_package_and_names_mistakes():
    assert ex.check_query_mask(il.implicit_mask).score == 2
    variants = {
        "PyTorch's boolean": lambda n, m: ~il.implicit_mask(n, m),
        "autoregressive": lambda n, m: torch.triu(torch.ones(n + m, n + m, dtype=torch.bool), 1),
        "attend to themselves": lambda n, m: ex._mask_variants(n, m)["self"],
        "attend to each other": lambda n, m: ex._mask_variants(n, m)["queries"],
        "context tokens can read": lambda n, m: ex._mask_variants(n, m)["context"],
    }
    for phrase, fn in variants.items():
        report = ex.check_query_mask(fn)
        assert report.score == 0 and phrase in str(report), (phrase, str(report))
    assert "boolean tensor" in str(ex.check_query_mask(lambda n, m: il.implicit_mask(n, m).float()))
    assert "shape" in str(ex.check_query_mask(lambda n, m: il.implicit_mask(n, m)[:-1]))


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
