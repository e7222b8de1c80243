"""The hybrid KV cache: each head keeps its own subset of the prompt, stored compactly.

Heads that keep the same number of tokens share one physical tensor [B, H_group, length, D]; for
CateKV this gives exactly two caches per layer, the *adaptive* heads (whole prompt) and the
*consistent* heads (sink + critical chunks + recent window), as in the paper. Every decoded token is
appended to every head (never evicted). :meth:`HybridKVCache.nbytes` counts the bytes of what is kept,
eq. :math:numref:`catekv-bytes`, from the stored lengths.
"""

from __future__ import annotations

import math

import torch

from companion.kernels.sparse_decode_attention import pack_varlen
from companion.validation import as_positive_int

__all__ = ["HybridKVCache", "kv_bytes"]


def kv_bytes(lengths, head_dim: int, bytes_per_element: int = 2) -> int:
    """Bytes of K and V for kept lengths ``lengths`` (any nesting of ints / an int tensor), eq. (catekv-bytes)."""
    def total_of(x) -> int:
        if isinstance(x, (list, tuple)):
            return sum(total_of(y) for y in x)
        t = torch.as_tensor(x)
        if t.dtype.is_floating_point or t.dtype == torch.bool or (t.numel() and int(t.min()) < 0):
            raise ValueError(f"lengths: expected non-negative integer lengths, got {x!r:.60}")
        return int(t.sum())

    head_dim = as_positive_int(head_dim, "head_dim")
    bytes_per_element = as_positive_int(bytes_per_element, "bytes_per_element")
    total = total_of(lengths)
    return 2 * bytes_per_element * head_dim * total


def _check_positions(idx, layer: int, h: int, B: int, n: int) -> None:
    """``keep[layer][h]`` must be an integer tensor [B, l] of distinct positions in [0, n) per row."""
    where = f"keep: layer {layer} head {h}"
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.shape[0] != B:
        raise ValueError(f"{where}: expected an integer tensor [B={B}, l], got {getattr(idx, 'shape', type(idx))}")
    if idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
        raise ValueError(f"{where}: positions must be integers (torch.long), got {idx.dtype}")
    if idx.numel() == 0:
        return
    if int(idx.min()) < 0 or int(idx.max()) >= n:
        raise ValueError(f"{where}: positions must lie in [0, {n})")
    ordered = idx.sort(dim=1).values
    if (ordered[:, 1:] == ordered[:, :-1]).any():
        b = int((ordered[:, 1:] == ordered[:, :-1]).any(1).nonzero()[0])
        raise ValueError(f"{where}: sequence {b} keeps a position twice; each kept position must be distinct "
                         "(it would be counted twice in the bytes and in the attention)")


class HybridKVCache:
    """Per layer, groups of KV heads with equal kept lengths, each one tensor [B, H_group, length, D]."""

    def __init__(self, groups: list[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]], n_kv_heads: int):
        self.groups = groups  # groups[layer] = [(head_index [Hg], k [B,Hg,L,D], v [B,Hg,L,D]), ...]
        self.n_kv_heads = n_kv_heads

    @classmethod
    def from_prefill(cls, ks: list[torch.Tensor], vs: list[torch.Tensor], keep: list[list[torch.Tensor]]):
        """``ks``/``vs``: per layer [B, Hkv, n, D] (post-RoPE), one shape for every layer and for K and V;
        ``keep[layer][h]``: an integer tensor [B, l_h] of the distinct prompt positions head ``h`` keeps
        (order free: keys carry their rotation already). Raises ``ValueError`` naming the argument."""
        if not isinstance(ks, (list, tuple)) or not ks or len(vs) != len(ks):
            raise ValueError(f"vs: expected one [B, Hkv, n, D] tensor per layer in ks and vs, got "
                             f"{len(ks) if isinstance(ks, (list, tuple)) else type(ks).__name__} and {len(vs)}")
        shape = tuple(ks[0].shape)
        for layer, (k, v) in enumerate(zip(ks, vs)):
            if k.dim() != 4 or tuple(k.shape) != shape:
                raise ValueError(f"ks: layer {layer} has shape {tuple(k.shape)}; every layer needs the shape "
                                 f"[B, Hkv, n, D] = {shape} (one head dim for the whole cache)")
            if tuple(v.shape) != shape:
                raise ValueError(f"vs: layer {layer} has shape {tuple(v.shape)}, expected the keys' {shape}")
        if len(keep) != len(ks):
            raise ValueError(f"keep: expected one entry per layer ({len(ks)}), got {len(keep)}")
        B, H, n, D = shape
        groups = []
        for layer, (k, v) in enumerate(zip(ks, vs)):
            if len(keep[layer]) != H:
                raise ValueError(f"keep: layer {layer} needs one index tensor per KV head ({H}), got {len(keep[layer])}")
            by_len: dict[int, list[int]] = {}
            for h, idx in enumerate(keep[layer]):
                _check_positions(idx, layer, h, B, n)
                by_len.setdefault(idx.shape[1], []).append(h)
            layer_groups = []
            for length, heads in sorted(by_len.items(), reverse=True):
                idx = torch.stack([keep[layer][h].to(k.device) for h in heads], 1)  # [B, Hg, l]
                hi = torch.tensor(heads, device=k.device)
                gk = k[:, hi].gather(2, idx[..., None].expand(-1, -1, -1, D))
                gv = v[:, hi].gather(2, idx[..., None].expand(-1, -1, -1, D))
                layer_groups.append((hi, gk, gv))
            groups.append(layer_groups)
        return cls(groups, H)

    @classmethod
    def full(cls, ks, vs):
        """The full cache: every head keeps every prompt position, in order."""
        B, H, n, _ = ks[0].shape
        keep = [[torch.arange(n, device=ks[0].device).expand(B, n)] * H for _ in ks]
        return cls.from_prefill(ks, vs, keep)

    def append(self, layer: int, k_new: torch.Tensor, v_new: torch.Tensor) -> None:
        """Append the new token's K/V [B, Hkv, D] to every head of ``layer``."""
        self.groups[layer] = [(hi, torch.cat([k, k_new[:, hi, None]], 2),
                               torch.cat([v, v_new[:, hi, None]], 2))
                              for hi, k, v in self.groups[layer]]

    def lengths(self, layer: int) -> torch.Tensor:
        """Kept length of every (sequence, KV head) of ``layer``: [B, Hkv]."""
        B = self.groups[layer][0][1].shape[0]
        out = torch.zeros(B, self.n_kv_heads, dtype=torch.long, device=self.groups[layer][0][1].device)
        for hi, k, _ in self.groups[layer]:
            out[:, hi] = k.shape[2]
        return out

    def nbytes(self, bytes_per_element: int = 2) -> int:
        """Bytes of everything kept (K and V, all layers), at ``bytes_per_element`` (2: fp16/bf16)."""
        return sum(2 * bytes_per_element * k.numel() for layer in self.groups for _, k, _ in layer)

    def packed(self, layer: int):
        """The packed layout of :mod:`companion.kernels.sparse_decode_attention` for ``layer``."""
        B = self.groups[layer][0][1].shape[0]
        k_heads = [[None] * self.n_kv_heads for _ in range(B)]
        v_heads = [[None] * self.n_kv_heads for _ in range(B)]
        for hi, k, v in self.groups[layer]:
            for j, h in enumerate(hi.tolist()):
                for b in range(B):
                    k_heads[b][h], v_heads[b][h] = k[b, j], v[b, j]
        return pack_varlen(k_heads, v_heads)

    def attend(self, layer: int, q: torch.Tensor, return_probs: bool = False):
        """Decode attention of ``q`` [B, Hq, D] over each group (torch path), scattered back to head order.

        With ``return_probs`` (only for a single group, e.g. the full cache) also the attention
        probabilities averaged over each KV head's query group, [B, Hkv, length]."""
        B, Hq, D = q.shape
        G = Hq // self.n_kv_heads
        out = torch.empty_like(q)
        probs = None
        for hi, k, v in self.groups[layer]:
            qh = (hi[:, None] * G + torch.arange(G, device=q.device)).flatten()
            qg = q[:, qh].view(B, len(hi), G, D)
            s = qg @ k.transpose(-1, -2) / math.sqrt(D)  # [B, Hg, G, L]
            p = s.softmax(-1)
            out[:, qh] = (p @ v).view(B, len(hi) * G, D)
            if return_probs:
                if len(self.groups[layer]) != 1:
                    raise ValueError("return_probs: only available when every head keeps the same tokens")
                probs = p.mean(2)
        return out, probs
