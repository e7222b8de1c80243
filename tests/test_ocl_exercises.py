"""The OCL checkers: the package's own answers pass, and each classic mistake is named."""

import torch
import torch.nn.functional as F

from companion.exercises import ocl as ex
from companion.ocl import keep_count, ocl_loss


def split_right(noise, r):
    K = keep_count(noise.shape[1], r)
    keep = noise.argsort(1)[:, :K]
    return keep[:, : K // 2], keep[:, K // 2:]


def test_split_checker():
    assert ex.check_split(split_right).passed

    def independent(noise, r):
        n = int(noise.shape[1] * (1 - r)) // 2
        other = torch.rand(noise.shape, generator=torch.Generator().manual_seed(0))
        return noise.argsort(1)[:, :n], other.argsort(1)[:, :n]

    assert "share tokens" in str(ex.check_split(independent))

    def odd(noise, r):
        keep = noise.argsort(1)[:, : int(noise.shape[1] * (1 - r))]
        half = keep.shape[1] // 2
        return keep[:, :half], keep[:, half:]

    assert "odd count" in str(ex.check_split(odd))

    def masked_share(noise, r):
        K = int(noise.shape[1] * r) // 2 * 2
        keep = noise.argsort(1)[:, :K]
        return keep[:, : K // 2], keep[:, K // 2:]

    assert "instead of 1 - r" in str(ex.check_split(masked_share))

    def swapped(noise, r):
        a, b = split_right(noise, r)
        return b, a

    assert "swapped" in str(ex.check_split(swapped))

    def largest(noise, r):
        return split_right(-noise, r)

    assert "largest noise" in str(ex.check_split(largest))


def test_loss_checker():
    assert ex.check_loss(lambda a, b, k, t: ocl_loss(a, b, k, t)).passed

    def one_way(a, b, k, t):
        s = F.normalize(a, dim=1) @ F.normalize(b, dim=1).T
        return F.cross_entropy(0.5 * (1 + s) / (1 + k * (1 - s)) / t, torch.arange(len(s)))

    assert "symmetric" in str(ex.check_loss(one_way))

    def plain(a, b, k, t):
        s = F.normalize(a, dim=1) @ F.normalize(b, dim=1).T
        labels = torch.arange(len(s))
        return 0.5 * (F.cross_entropy(s / t, labels) + F.cross_entropy(s.T / t, labels))

    assert "plain InfoNCE" in str(ex.check_loss(plain))

    def unnormalised(a, b, k, t):
        s = a @ b.T
        logits = 0.5 * (1 + s) / (1 + k * (1 - s)) / t
        labels = torch.arange(len(s))
        return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))

    assert "normalise" in str(ex.check_loss(unnormalised))

    def stub(a, b, k, t):
        raise NotImplementedError()

    assert ex.check_loss(stub).score == 0


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
