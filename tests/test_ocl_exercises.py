"""The OCL checkers: the package's own answers pass, and each classic mistake is named."""

import math
from fractions import Fraction

import torch
import torch.nn.functional as F

from companion.exercises import ocl as ex
from companion.ocl import nt_xent, ocl_loss


def split_right(noise, r, n):
    L = noise.shape[1]
    K = math.floor(L * (1 - Fraction(repr(r)))) // n * n
    keep = noise.argsort(1)[:, :K]
    return tuple(keep[:, j * K // n:(j + 1) * K // n] for j in range(n))


def test_split_checker():
    assert ex.check_split(split_right).passed

    def independent(noise, r, n):
        K = len(split_right(noise, r, n)[0][0])
        g = torch.Generator().manual_seed(0)
        return tuple(torch.rand(noise.shape, generator=g).argsort(1)[:, :K] for _ in range(n))

    assert "share a token" in str(ex.check_split(independent))

    def even(noise, r, n):  # the two-view rounding, reused for n views
        L = noise.shape[1]
        K = math.floor(L * (1 - Fraction(repr(r)))) // 2 * 2
        keep = noise.argsort(1)[:, :K // n * n]
        return tuple(keep[:, j * (K // n):(j + 1) * (K // n)] for j in range(n))

    assert "multiple of 3" in str(ex.check_split(even))

    def float_floor(noise, r, n):
        K = int(noise.shape[1] * (1 - r)) // n * n
        keep = noise.argsort(1)[:, :K]
        return tuple(keep[:, j * K // n:(j + 1) * K // n] for j in range(n))

    assert "exact arithmetic" in str(ex.check_split(float_floor))

    def reversed_views(noise, r, n):
        return split_right(noise, r, n)[::-1]

    assert "reverse order" in str(ex.check_split(reversed_views))

    def largest(noise, r, n):
        return split_right(-noise, r, n)

    assert "largest noise" in str(ex.check_split(largest))
    assert "tuple of 2" in str(ex.check_split(lambda noise, r, n: noise))


def tsp_nt_xent_right(a, b, kappa, tau):
    z = F.normalize(torch.cat([a, b]), dim=1)
    s = z @ z.T
    logits = 0.5 * (1 + s) / (1 + kappa * (1 - s)) / tau
    logits = logits.masked_fill(torch.eye(len(z), dtype=torch.bool), -math.inf)
    B = len(a)
    return F.cross_entropy(logits, torch.cat([torch.arange(B, 2 * B), torch.arange(B)]))


def test_loss_checker():
    assert ex.check_loss(tsp_nt_xent_right).passed
    assert "other side only" in str(ex.check_loss(lambda a, b, k, t: ocl_loss(a, b, k, t)))

    def with_self(a, b, kappa, tau):
        z = F.normalize(torch.cat([a, b]), dim=1)
        s = z @ z.T
        B = len(a)
        return F.cross_entropy(0.5 * (1 + s) / (1 + kappa * (1 - s)) / tau,
                               torch.cat([torch.arange(B, 2 * B), torch.arange(B)]))

    assert "mask the diagonal" in str(ex.check_loss(with_self))
    assert "NT-Xent on the cosine" in str(ex.check_loss(lambda a, b, k, t: nt_xent(a, b, t)))

    assert "unit length" in str(ex.check_loss(_raw))


def _raw(a, b, kappa, tau):
    z = torch.cat([a, b])
    s = z @ z.T
    logits = (0.5 * (1 + s) / (1 + kappa * (1 - s)) / tau).masked_fill(
        torch.eye(len(z), dtype=torch.bool), -math.inf)
    B = len(a)
    return F.cross_entropy(logits, torch.cat([torch.arange(B, 2 * B), torch.arange(B)]))


def test_flops_checker():
    def right(n, d, depth, ratio):
        h = int(d * ratio)
        return depth * (2 * (n + 1) * (4 * d * d + 2 * d * h) + 4 * (n + 1) ** 2 * d)

    assert ex.check_flops(right).passed
    assert "multiply-add is 2 FLOPs" in str(ex.check_flops(lambda *a: right(*a) / 2))

    def no_attention(n, d, depth, ratio):
        return depth * 2 * (n + 1) * (4 * d * d + 2 * d * int(d * ratio))

    assert "left out attention" in str(ex.check_flops(no_attention))
    assert "CLS token" in str(ex.check_flops(lambda n, d, depth, r: right(n - 1, d, depth, r)))
