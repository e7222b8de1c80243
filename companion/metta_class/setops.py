"""Set operations on classes, read through unary nets: a point belongs to class A when A's unary
margin is positive; union is "any net accepts" (eq. (metta-union)), complement is "the net rejects"
(its region goes to the Metta class)."""

from __future__ import annotations

import torch

__all__ = ["membership", "union", "complement", "agreement", "overlap_rate"]


def _as_bool(m, name: str) -> torch.Tensor:
    if not isinstance(m, torch.Tensor) or m.dtype != torch.bool or m.ndim != 1 or m.numel() == 0:
        got = f"{m.dtype}, shape {tuple(m.shape)}" if isinstance(m, torch.Tensor) else type(m).__name__
        raise ValueError(f"{name}: expected a non-empty 1-D bool tensor, got {got}")
    return m


def _same(a: torch.Tensor, b: torch.Tensor, name: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name}: expected shape {tuple(a.shape)}, got {tuple(b.shape)}")


def membership(scores: torch.Tensor, threshold: float = 0.0) -> torch.Tensor:
    """``scores > threshold``: the points a unary net accepts into its class."""
    if not isinstance(scores, torch.Tensor) or scores.ndim != 1 or scores.numel() == 0:
        raise ValueError("scores: expected a non-empty 1-D tensor of margins")
    if not torch.isfinite(scores).all():
        raise ValueError("scores: margins must be finite, got NaN or inf")
    return scores > threshold


def union(*memberships: torch.Tensor) -> torch.Tensor:
    """Points accepted by at least one of the classes."""
    if not memberships:
        raise ValueError("memberships: expected at least one membership tensor")
    first = _as_bool(memberships[0], "memberships")
    out = first.clone()
    for m in memberships[1:]:
        _same(first, _as_bool(m, "memberships"), "memberships")
        out |= m
    return out


def complement(m: torch.Tensor) -> torch.Tensor:
    """Points the class rejects: within U they belong to the Metta class."""
    return ~_as_bool(m, "m")


def agreement(a: torch.Tensor, b: torch.Tensor) -> float:
    """Share of points on which two memberships agree."""
    a, b = _as_bool(a, "a"), _as_bool(b, "b")
    _same(a, b, "b")
    return float((a == b).double().mean())


def overlap_rate(a: torch.Tensor, b: torch.Tensor) -> float:
    """|A and B| / |A or B| (0 for disjoint classes, where union equals symmetric difference)."""
    a, b = _as_bool(a, "a"), _as_bool(b, "b")
    _same(a, b, "b")
    either = int((a | b).sum())
    return float((a & b).sum()) / either if either else 0.0
