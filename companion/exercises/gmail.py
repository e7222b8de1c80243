"""Checkers for the exercises of the chapter *GMAIL: generated images as a modality of their own*.

* :func:`check_alignment_loss` -- exercise 1, the multi-positive alignment loss (label ``gmail-multi``), 2 points;
* :func:`check_lora` -- exercise 2, the forward pass of a LoRA layer (``gmail-lora``), 2 points;
* :func:`check_reading_b` -- exercise 3, the dual-projection reading of inference, 2 points.

Each compares the student's answer with :mod:`companion.gmail` on cases built to expose one mistake
each, and explains the mistake it finds, citing the equation as the page numbers it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from companion import gmail as gm
from companion.exercises import Report, eq

__all__ = ["check_alignment_loss", "check_lora", "check_reading_b"]

# The package functions that answer an exercise (a graded answer may not call them, see .grade).
REFERENCES = {"check_alignment_loss": ("companion.gmail.losses.gen_real_alignment_loss",),
              "check_lora": ("companion.gmail.models.LoRALinear.forward",),
              "check_reading_b": ()}  # composes the encoders, which nothing in the package does this way




def _alignment_cases() -> list[tuple[str, torch.Tensor, torch.Tensor, torch.Tensor, float]]:
    g = torch.Generator().manual_seed(0)
    out = []
    for name, B, D, ids, tau in [
        ("8 pairs with unique captions", 8, 5, torch.arange(8), 0.07),
        ("12 pairs, captions repeated", 12, 6, torch.tensor([0, 1, 0, 2, 1, 0, 3, 3, 2, 4, 0, 1]), 0.07),
        ("64 pairs of 30 captions, tau = 0.5", 64, 16, torch.randint(0, 30, (64,), generator=g), 0.5),
    ]:
        scale = torch.rand(B, 1, generator=g) * 3 + 0.5  # not unit vectors: the loss must normalise
        out.append((name, torch.randn(B, D, generator=g) * scale, torch.randn(B, D, generator=g) * 2, ids, tau))
    return out


def _variants(z_gen, z_real, ids, tau) -> dict[str, float]:
    """What common mistakes compute, to name the one a wrong answer matches."""
    zg, zr = F.normalize(z_gen, dim=1), F.normalize(z_real, dim=1)
    S = zg @ zr.T / tau
    pos = (ids[:, None] == ids[None, :]).double()
    def multi(S, pos):
        return float(-((pos * S.double().log_softmax(1)).sum(1) / pos.sum(1)).mean())
    raw = z_gen @ z_real.T / tau
    return {
        "diagonal": float(F.cross_entropy(S, torch.arange(len(S)))),
        "unnormalised": multi(raw, pos),
        "no_tau": multi(S * tau, pos),
        "real_to_gen": multi(S.T, pos.T),
        "sum_pos": float(-(pos * S.double().log_softmax(1)).sum(1).mean()),
        "pool_pos": float(-(torch.logsumexp(S.double().masked_fill(pos == 0, -torch.inf), 1)
                            - torch.logsumexp(S.double(), 1)).mean()),
    }


def check_alignment_loss(loss_fn: Callable) -> Report:
    """Check ``loss_fn(z_gen, z_real, ids, tau)``: eq. (gmail-multi), which is eq. (gmail-align) for unique ids."""
    report = Report("Exercise 1 (the alignment loss with repeated captions)", points=2)
    for name, z_gen, z_real, ids, tau in _alignment_cases():
        args = (z_gen.clone(), z_real.clone(), ids.clone(), tau)
        got = report.call_number(loss_fn, *args, what=name, hint=": average over the batch")
        if got is None:
            return report
        want = float(gm.gen_real_alignment_loss(z_gen, z_real, ids, tau))
        if abs(got - want) <= 1e-4 * max(1.0, abs(want)):
            report.check(True, "")
            continue
        v = _variants(z_gen, z_real, ids, tau)
        close = {k: abs(got - x) <= 1e-4 * max(1.0, abs(x)) for k, x in v.items()}
        if close["diagonal"]:
            problem = (f"{name}: you take only the diagonal as the positive, which is {eq('gmail-align')}. "
                       "When two pairs share a caption, the other pair's real image is a true positive too; "
                       f"treating it as a negative pushes apart images of the same caption. Use every j with "
                       f"ids[j] == ids[i], {eq('gmail-multi')}.")
        elif close["unnormalised"]:
            problem = (f"{name}: S must hold *cosines* divided by tau; normalise z_gen and z_real first "
                       "(the inputs here are not unit vectors).")
        elif close["no_tau"]:
            problem = f"{name}: you forgot to divide the cosines by the temperature tau ({eq('gmail-multi')})."
        elif close["real_to_gen"]:
            problem = (f"{name}: your softmax runs over generated images for each real one (real -> generated). "
                       f"The paper's loss is generated -> real: normalise over the real images of the batch, "
                       "row i of S over j.")
        elif close["sum_pos"]:
            problem = (f"{name}: you sum -log p over the positives instead of averaging; a pair whose caption "
                       f"is frequent in the batch would then weigh more. Divide by |P(i)| ({eq('gmail-multi')}).")
        elif close["pool_pos"]:
            problem = (f"{name}: you put all positives in one numerator (log of a summed probability). That is "
                       f"another multi-positive loss; {eq('gmail-multi')} averages log p over the positives.")
        else:
            problem = f"{name}: got {got:.6f}, expected {want:.6f} ({eq('gmail-multi')})."
        report.check(False, problem)
        return report
    return report


def check_lora(lora_forward: Callable) -> Report:
    """Check ``lora_forward(x, W, b, A, B, alpha)``: W x + b + (alpha / r) B A x, eq. (gmail-lora)."""
    report = Report("Exercise 2 (a LoRA layer)", points=2)
    g = torch.Generator().manual_seed(1)
    for name, d_in, d_out, r, alpha, zero_B in [("B = 0 at initialisation", 7, 5, 4, 8.0, True),
                                                 ("rank 4, alpha 8", 7, 5, 4, 8.0, False),
                                                 ("rank 2, alpha 3", 6, 9, 2, 3.0, False)]:
        base = nn.Linear(d_in, d_out)
        with torch.no_grad():
            base.weight.copy_(torch.randn(d_out, d_in, generator=g))
            base.bias.copy_(torch.randn(d_out, generator=g))
        layer = gm.LoRALinear(base, rank=r, alpha=alpha)
        with torch.no_grad():
            layer.A.copy_(torch.randn(r, d_in, generator=g))
            if not zero_B:
                layer.B.copy_(torch.randn(d_out, r, generator=g))
        x = torch.randn(10, d_in, generator=g)
        W, b, A, B = (t.detach().clone() for t in (base.weight, base.bias, layer.A, layer.B))
        got = report.call(lora_forward, x.clone(), W, b, A, B, alpha, what=name)
        if got is None:
            return report
        got = torch.as_tensor(got, dtype=torch.float32).detach()
        if not report.check(tuple(got.shape) == (10, d_out), f"{name}: returned shape {tuple(got.shape)}, "
                                                              f"expected (N, d_out) = (10, {d_out})."):
            return report
        with torch.no_grad():
            want = layer(x)
            update = (x @ A.T) @ B.T
            base_out = base(x)
        if torch.allclose(got, want, atol=1e-4):
            report.check(True, "")
            continue
        if torch.allclose(got, base_out + alpha * update, atol=1e-4):
            problem = (f"{name}: you scale the update by alpha; {eq('gmail-lora')} scales it by alpha / r, so that "
                       "the size of the update does not depend on the rank you choose.")
        elif torch.allclose(got, base_out + update, atol=1e-4):
            problem = f"{name}: the update B A x is missing its scale alpha / r ({eq('gmail-lora')})."
        elif torch.allclose(got, alpha / r * update, atol=1e-4):
            problem = f"{name}: you return the update only; LoRA adds it to the frozen base layer W x + b."
        elif torch.allclose(got, base_out, atol=1e-4):
            problem = f"{name}: you return the base layer only; add (alpha / r) B A x ({eq('gmail-lora')})."
        else:
            problem = f"{name}: your output differs from {eq('gmail-lora')} by up to {float((got - want).abs().max()):.3g}."
        report.check(False, problem)
        return report
    return report


def _reading_b_dual(seed: int) -> gm.DualEncoder:
    """A small dual encoder whose LoRA factors and generated projection have moved (B != 0)."""
    torch.manual_seed(seed)
    dual = gm.DualEncoder(gm.ImageEncoder(dim=16, hidden=12, feat=8).requires_grad_(False).eval())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in dual.trainable():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
    return dual.eval()


def check_reading_b(embed: Callable) -> Report:
    """Check ``embed(dual, x, real)``: Reading B of inference, one LoRA-adapted backbone for every
    image and two projections, normalize(P_r(E'(x))) for real images and normalize(P_g(E'(x)))
    for generated ones."""
    report = Report("Exercise 3 (Reading B: one adapted backbone, two projections)", points=2)
    for seed, real in [(0, True), (1, False), (2, True)]:
        dual = _reading_b_dual(seed)
        x = torch.rand(6, 64, generator=torch.Generator().manual_seed(10 + seed))
        name = f"{'real' if real else 'generated'} images, encoder {seed}"
        got = report.call(embed, dual, x.clone(), real, what=name)
        if got is None:
            return report
        got = torch.as_tensor(got, dtype=torch.float32).detach()
        if not report.check(tuple(got.shape) == (6, 16), f"{name}: returned shape {tuple(got.shape)}, "
                                                         "expected (N, 16), one embedding per image."):
            return report
        with torch.no_grad():
            h_g, h_r = dual.backbone_g(x), dual.f_r.backbone(x)
            proj = dual.f_r.proj if real else dual.proj_g
            want = F.normalize(proj(h_g), dim=-1)
            reading_a = dual.f_r(x) if real else dual.embed_gen(x)
            other_proj = F.normalize((dual.proj_g if real else dual.f_r.proj)(h_g), dim=-1)
            raw = proj(h_g)
        if torch.allclose(got, want, atol=1e-5):
            report.check(True, "")
            continue
        if real and torch.allclose(got, reading_a, atol=1e-5):
            problem = (f"{name}: you send real images through the unchanged f_r, which is Reading A "
                       "(Algorithm 1). In Reading B every image goes through the LoRA-adapted backbone; "
                       "only the projection differs.")
        elif torch.allclose(got, other_proj, atol=1e-5):
            problem = (f"{name}: you use the wrong projection: real images take the projection for real "
                       "(dual.f_r.proj), generated ones the projection for generated (dual.proj_g).")
        elif torch.allclose(got, raw, atol=1e-5):
            problem = f"{name}: normalise the embedding to unit length, as f_r and f_g do."
        elif torch.allclose(got, F.normalize(dual.f_r.proj(h_r) if not real else proj(h_r), dim=-1), atol=1e-5):
            problem = (f"{name}: you use f_r's backbone without LoRA; Reading B adapts the one backbone that "
                       "both kinds of image share (dual.backbone_g).")
        else:
            problem = f"{name}: your embedding differs from normalize(P(E'(x))) by up to " \
                      f"{float((got - want).abs().max()):.3g}."
        report.check(False, problem)
        return report
    return report
