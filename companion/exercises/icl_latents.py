"""Checkers for the exercises of the chapter *ICL task latents*.

* :func:`check_bottleneck_mask` -- exercise 1, the mask of a bottleneck model in one
  transformer stack (labels ``icl-context``, ``icl-predict``), 2 points;
* :func:`check_bayes_mean` -- exercise 2, the Bayes-optimal prediction of 1-D linear
  regression (``icl-bayes``), 2 points;
* :func:`check_probe_r2` -- exercise 3, the held-out R^2 of a linear probe (``icl-probe``),
  1 point.

Each compares the student's answer with :mod:`companion.icl_latents` on cases built to expose
one classic mistake each, and explains the mistake it finds, citing the equation as the page
numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from companion import icl_latents as il
from companion.exercises import Report, eq

__all__ = ["check_bottleneck_mask", "check_bayes_mean", "check_probe_r2"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_bottleneck_mask": (),  # the package has no such mask
              "check_bayes_mean": ("companion.icl_latents.bayes_linreg_predict",
                                   "companion.icl_latents.bayes_feature_predict"),
              "check_probe_r2": ("companion.icl_latents.linear_probe_r2",)}


def _bottleneck_want(n: int, m: int) -> torch.Tensor:
    """The reference answer of exercise 1 (private): one stack over ``[c, e_1..e_n, q_1..q_m]``."""
    want = torch.ones(1 + n + m, 1 + n + m, dtype=torch.bool)
    want[: 1 + n, 1: 1 + n] = False  # c and the context read the context
    want[1 + n:, 0] = False  # each query reads c ...
    idx = torch.arange(1 + n, 1 + n + m)
    want[idx, idx] = False  # ... and itself
    return want


def _mask_variants(n: int, m: int) -> dict[str, torch.Tensor]:
    want = _bottleneck_want(n, m)
    c_self = want.clone()
    c_self[0, 0] = False
    ctx_reads_c = want.clone()
    ctx_reads_c[1: 1 + n, 0] = False
    leak = want.clone()
    leak[1 + n:, 1: 1 + n] = False
    no_self = want.clone()
    idx = torch.arange(1 + n, 1 + n + m)
    no_self[idx, idx] = True
    queries = want.clone()
    queries[1 + n:, 1 + n:] = False
    c_reads_q = want.clone()
    c_reads_q[0, 1 + n:] = False
    return {"want": want, "inverted": ~want, "c-self": c_self, "context-reads-c": ctx_reads_c,
            "leak": leak, "no-self": no_self, "queries": queries, "c-reads-queries": c_reads_q,
            "none": torch.zeros_like(want)}


_MASK_MISTAKES = {
    "inverted": "your mask is the *allowed* pattern. PyTorch's boolean attention masks mean "
                "True = blocked: invert it.",
    "c-self": "the summary token reads itself. In {ctx} no token reads c, c included: it only "
              "gathers the context, and its own state carries on through the residual stream.",
    "context-reads-c": "context tokens read the summary token, so the context's states, and "
                       "through them z, depend on c's learned vector at every layer. Block "
                       "column 0 for the context rows, {ctx}.",
    "leak": "your queries read the context directly: the bottleneck is gone, since a query can "
            "reach a context point without passing through c. In {pred} a query reads c and "
            "itself only.",
    "no-self": "your queries read c only. That is allowed by the rules of {pred}, but the "
               "predictor lets each query read itself as well; unblock the diagonal of the "
               "query rows.",
    "queries": "your queries attend to each other, so an answer depends on which other queries "
               "are asked with it. A query reads c and itself only, {pred}.",
    "c-reads-queries": "the summary token reads the queries, so z changes with the questions "
                       "asked, and every query reaches every other through c. Block the query "
                       "columns of row 0, {ctx}.",
    "none": "nothing is blocked: every token reads every other one, and the bottleneck of "
            "{pred} is gone.",
}


def check_bottleneck_mask(bottleneck_mask: Callable) -> Report:
    """Check ``bottleneck_mask(n, m)``: the ``(1+n+m, 1+n+m)`` boolean mask of one transformer
    over ``[c, e_1..e_n, q_1..q_m]`` that keeps the rules of eqs. (icl-context) and
    (icl-predict)."""
    report = Report("Exercise 1 (a bottleneck in one stack)", points=2)
    ctx, pred = eq("icl-context"), eq("icl-predict")
    for n, m in [(3, 2), (1, 1), (5, 4)]:
        what = f"n = {n} context tokens, m = {m} queries"
        got = report.call(bottleneck_mask, n, m, what=what)
        if got is None:
            return report
        if not report.check(isinstance(got, torch.Tensor) and got.dtype == torch.bool,
                            f"{what}: expected a boolean tensor, got "
                            f"{getattr(got, 'dtype', type(got).__name__)}"):
            return report
        size = 1 + n + m
        if not report.check(tuple(got.shape) == (size, size),
                            f"{what}: expected shape {(size, size)} (c, then the context, then "
                            f"the queries), got {tuple(got.shape)}"):
            return report
        variants = _mask_variants(n, m)
        if torch.equal(got, variants["want"]):
            report.check(True, "")
            continue
        name = next((k for k, v in variants.items() if k != "want" and torch.equal(got, v)), None)
        if name:
            msg = _MASK_MISTAKES[name].format(ctx=ctx, pred=pred)
        else:
            i, j = (int(k) for k in (got != variants["want"]).nonzero()[0])
            role = ["c" if k == 0 else "context token" if k <= n else "query" for k in (i, j)]
            should = "blocked" if bool(variants["want"][i, j]) else "allowed"
            msg = (f"{int((got != variants['want']).sum())} entries differ from the rules of "
                   f"{ctx} and {pred} (row i, column j is True when token i must not read "
                   f"token j); the first: row {i} ({role[0]}) reading column {j} "
                   f"({role[1]}) should be {should}.")
        report.check(False, f"{what}: {msg}")
        return report
    return report


def _bayes_cases():
    gen = torch.Generator().manual_seed(0)
    task = il.LinearRegressionTask(noise=0.5)
    return [
        ("two context points, noise 0.5", task.sample(3, 2, 4, generator=gen), 0.5),
        ("one context point, noise 0.5", task.sample(3, 1, 4, generator=gen), 0.5),
        ("twenty points, noise 0.1, wide queries",
         il.LinearRegressionTask(noise=0.1).sample(3, 20, 4, query="wide", generator=gen), 0.1),
    ]


def check_bayes_mean(bayes_mean: Callable) -> Report:
    """Check ``bayes_mean(x_c, y_c, x_q, noise)``: the posterior-mean prediction of eq.
    (icl-bayes) for ``y = [x, 1] w + noise * eps``, ``w ~ N(0, I)``, shape ``(B, m, 1)``."""
    report = Report("Exercise 2 (the Bayes-optimal prediction)", points=2)
    for what, b, noise in _bayes_cases():
        args = [t.clone() for t in (b.x_c, b.y_c, b.x_q)]
        got = report.call(bayes_mean, *args, noise, what=what)
        if got is None:
            return report
        if not report.check(isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(b.y_q.shape),
                            f"{what}: expected a tensor of shape {tuple(b.y_q.shape)}, got "
                            f"{tuple(getattr(got, 'shape', ())) or type(got).__name__}"):
            return report
        got = got.detach().double()
        want = il.bayes_linreg_predict(b.x_c, b.y_c, b.x_q, noise)[0].double()
        if torch.allclose(got, want, atol=1e-4):
            report.check(True, "")
            continue
        phi_c = torch.cat([b.x_c, torch.ones_like(b.x_c)], -1)
        phi_q = torch.cat([b.x_q, torch.ones_like(b.x_q)], -1)

        def ridge(lam):
            return il.bayes_feature_predict(phi_c, b.y_c, phi_q, lam ** 0.5)[0].double()

        no_bias = il.bayes_feature_predict(b.x_c, b.y_c, b.x_q, noise)[0].double()
        lstsq = phi_q.double() @ torch.linalg.pinv(phi_c.double()) @ b.y_c.double()
        if torch.allclose(got, lstsq, atol=1e-4):
            msg = ("this is least squares: it ignores the prior w ~ N(0, I). With few points "
                   f"the posterior mean of {eq('icl-bayes')} shrinks towards 0 by the "
                   "regulariser sigma^2 I.")
        elif torch.allclose(got, no_bias, atol=1e-4):
            msg = (f"you left out the bias feature. The features are phi(x) = [x, 1] "
                   f"({eq('icl-bayes')}): each task has its own intercept.")
        elif torch.allclose(got, ridge(noise), atol=1e-4):
            msg = (f"your regulariser is sigma I, not sigma^2 I ({eq('icl-bayes')}): the ratio "
                   "of the noise variance to the prior variance.")
        elif torch.allclose(got, ridge(1.0), atol=1e-4):
            msg = (f"your regulariser is I whatever the noise; in {eq('icl-bayes')} it is "
                   f"sigma^2 I (here sigma = {noise}).")
        else:
            msg = (f"got predictions that differ from {eq('icl-bayes')} by up to "
                   f"{float((got - want).abs().max()):.3g}.")
        report.check(False, f"{what}: {msg}")
        return report
    return report


def _probe_cases():
    gen = torch.Generator().manual_seed(1)
    Z = torch.randn(400, 3, generator=gen)
    W = Z @ torch.randn(3, 2, generator=gen) + 0.5 * torch.randn(400, 2, generator=gen)
    wide = torch.randn(60, 40, generator=gen)  # 40 features, 45 training rows: overfits
    scales = torch.randn(400, 2, generator=gen) * torch.tensor([10.0, 0.1])
    return [
        ("40 features for 45 training rows", wide,
         wide[:, :2] + 2 * torch.randn(60, 2, generator=gen)),
        ("a linear latent with noise", Z, W),
        ("a latent with an offset of 5", Z, W + 5.0),
        ("coordinates of very different variance", Z, scales + Z[:, :2] * torch.tensor([10.0, 0.1])),
    ]


def check_probe_r2(probe_r2: Callable) -> Report:
    """Check ``probe_r2(Z, W)``: ridge on the first 75% of the rows, R^2 on the others,
    averaged over the columns of ``W``, eq. (icl-probe)."""
    report = Report("Exercise 3 (a held-out probe)", points=1)
    for what, Z, W in _probe_cases():
        got = report.call_number(probe_r2, Z.clone(), W.clone(), what=what)
        if got is None:
            return report
        want = il.linear_probe_r2(Z, W, shuffle=False)
        n_train = int(round(0.75 * len(Z)))
        if abs(got - want) <= 2e-3 or abs(got - _r2_test_mean(Z, W, n_train)) <= 2e-3:
            report.check(True, "")
            continue
        in_sample = _r2_in_sample(Z, W, n_train)
        if abs(got - in_sample) <= 2e-3 or abs(got - _r2_in_sample(Z, W, len(Z))) <= 2e-3:
            msg = (f"you score the probe on the rows it was fitted on (R^2 = {got:.3f}, held out "
                   f"{want:.3f}). {eq('icl-probe')} is a held-out score: an in-sample R^2 rewards a "
                   "probe that fits noise, which many features make easy.")
        elif abs(got - _r2_no_intercept(Z, W, n_train)) <= 2e-3:
            msg = (f"your probe has no intercept, so an offset in W counts as error; centre Z and "
                   f"W on the training rows first ({eq('icl-probe')}).")
        elif abs(got - _r2_pooled(Z, W, n_train)) <= 2e-3:
            msg = (f"you pool the squared errors over the columns of W, so the widest coordinate "
                   f"dominates; {eq('icl-probe')} averages one R^2 per coordinate.")
        else:
            msg = f"got R^2 = {got:.4f}, expected {want:.4f} ({eq('icl-probe')})."
        report.check(False, f"{what}: {msg}")
        return report
    return report


# the mistakes' answers, for the diagnosis (not solutions: each is wrong on purpose)
def _fit(Z, W, n_train, intercept=True):
    Z, W = Z.double(), W.double()
    z_mu = Z[:n_train].mean(0) if intercept else torch.zeros(Z.shape[1], dtype=torch.float64)
    w_mu = W[:n_train].mean(0) if intercept else torch.zeros(W.shape[1], dtype=torch.float64)
    Zc = Z[:n_train] - z_mu
    A = torch.linalg.solve(Zc.T @ Zc + 1e-3 * torch.eye(Z.shape[1], dtype=torch.float64),
                           Zc.T @ (W[:n_train] - w_mu))
    return (Z - z_mu) @ A + w_mu, W


def _r2(W, pred, rows, center):
    return float((1 - ((W[rows] - pred[rows]) ** 2).sum(0)
                  / ((W[rows] - center) ** 2).sum(0)).mean())


def _r2_test_mean(Z, W, n_train):
    pred, W = _fit(Z, W, n_train)
    return _r2(W, pred, slice(n_train, None), W[n_train:].mean(0))


def _r2_in_sample(Z, W, n_train):
    pred, W = _fit(Z, W, n_train)
    return _r2(W, pred, slice(None, n_train), W[:n_train].mean(0))


def _r2_no_intercept(Z, W, n_train):
    pred, W = _fit(Z, W, n_train, intercept=False)
    return _r2(W, pred, slice(n_train, None), W[:n_train].mean(0))


def _r2_pooled(Z, W, n_train):
    pred, W = _fit(Z, W, n_train)
    te = slice(n_train, None)
    return float(1 - ((W[te] - pred[te]) ** 2).sum() / ((W[te] - W[:n_train].mean(0)) ** 2).sum())
