"""A small attention policy for the TSP (the encoder-decoder of Kool et al. / POMO).

The encoder embeds every city once; the decoder builds a tour city by city. At step t, with
current city c, first city f and the set of visited cities, it attends over the cities
(a *glimpse*, one fused attention call) and scores every unvisited one (eq. (ngs-policy)):

    q = W_q [h_mean; h_f; h_c],  g = MHA(q, K, V; unvisited),  u_j = C tanh(g . k_j / sqrt(d)),
    p(j) = softmax_j(u_j / T) over the allowed cities.

:meth:`AttentionPolicy.rollout` decodes S tours per instance in one batch. Its ``allowed``
argument is where NGS plugs in (eq. (ngs-cross)): a table of permitted next cities per
current city (the parents' neighbours); a step whose permitted set is empty, or whose
mutation coin (probability ``mutation_rate``) comes up, falls back to all unvisited cities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .tsp import check_coords

__all__ = ["AttentionPolicy", "Rollout", "allowed_mask", "check_temperature"]


def check_temperature(temperature, B: int | None = None):
    """A sampling temperature: a finite number > 0, or a float tensor ``(B,)`` of them (one per
    instance, so that several temperatures run in one batch)."""
    if torch.is_tensor(temperature):
        if temperature.dtype.is_floating_point and temperature.ndim == 1 and (B is None or len(temperature) == B) \
                and bool(torch.isfinite(temperature).all()) and bool((temperature > 0).all()):
            return temperature.float()
        raise ValueError(f"temperature: expected a float tensor of shape ({B},) of finite values > 0, got "
                         f"shape {tuple(temperature.shape)} {temperature.dtype}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not math.isfinite(temperature) \
            or temperature <= 0:
        raise ValueError(f"temperature: expected a finite number > 0, got {temperature!r}")
    return float(temperature)


@dataclass
class Rollout:
    tours: torch.Tensor  # (B, S, n) long, permutations
    logp: torch.Tensor  # (B, S) log-probability of each tour (start city excluded), at temperature 1
    n_mut: torch.Tensor  # (B, S) number of unrestricted (mutation) steps when ``allowed`` is given


def allowed_mask(allowed: torch.Tensor, current: torch.Tensor, n: int) -> torch.Tensor:
    """Boolean ``(B, S, n)``: the cities listed in ``allowed[b, s, current[b, s], :]`` (-1 = padding)."""
    if not isinstance(allowed, torch.Tensor) or allowed.ndim != 4 or allowed.dtype.is_floating_point:
        raise ValueError(f"allowed: expected an integer (B, S, n, K) neighbour table, got "
                         f"{getattr(allowed, 'shape', type(allowed).__name__)}")
    if not isinstance(current, torch.Tensor) or tuple(current.shape) != tuple(allowed.shape[:2]) or \
            current.dtype.is_floating_point or (current.numel() and (int(current.min()) < 0
                                                                      or int(current.max()) >= allowed.shape[2])):
        raise ValueError(f"current: expected integer cities in 0..{allowed.shape[2] - 1} of shape "
                         f"{tuple(allowed.shape[:2])}, got {getattr(current, 'shape', type(current).__name__)}")
    B, S, _, K = allowed.shape
    rows = allowed.gather(2, current.view(B, S, 1, 1).expand(B, S, 1, K)).squeeze(2)  # (B, S, K)
    mask = torch.zeros(B, S, n + 1, dtype=torch.bool, device=allowed.device)
    mask.scatter_(2, torch.where(rows < 0, n, rows), True)  # padding lands in the extra column
    return mask[..., :n]


class AttentionPolicy(nn.Module):
    """Transformer encoder over the cities + pointer decoder; ~0.6 M parameters by default."""

    def __init__(self, d_model: int = 128, n_layers: int = 3, n_heads: int = 8, ff_mult: int = 4,
                 tanh_clip: float = 10.0):
        super().__init__()
        for name, value in (("d_model", d_model), ("n_layers", n_layers), ("n_heads", n_heads), ("ff_mult", ff_mult)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {value!r}")
        if isinstance(tanh_clip, bool) or not isinstance(tanh_clip, (int, float)) or not math.isfinite(tanh_clip) \
                or tanh_clip <= 0:
            raise ValueError(f"tanh_clip: expected a finite number > 0, got {tanh_clip!r}")
        if d_model % n_heads:
            raise ValueError(f"n_heads: must divide d_model = {d_model}, got {n_heads}")
        self.config = dict(d_model=d_model, n_layers=n_layers, n_heads=n_heads, ff_mult=ff_mult, tanh_clip=tanh_clip)
        self.d, self.h, self.clip = d_model, n_heads, tanh_clip
        self.embed = nn.Linear(2, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, ff_mult * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.kv = nn.Linear(d_model, 3 * d_model, bias=False)  # glimpse keys, values, pointer keys
        self.q = nn.Linear(3 * d_model, d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)
        self.decoded = 0  # tours decoded per instance since creation: the budget counter of the searches

    def encode(self, coords: torch.Tensor):
        """The decoder's per-instance caches, computed once and shared by all S samples.

        Every linear map of the decoder acts on one city embedding at a time, so it is applied
        to all n cities here and only *gathered* at each step: the query W_q [h_mean; h_f; h_c]
        splits into three projected tables, and the output projection W_o folds into the
        pointer keys (u_j = C tanh((W_o a) . k_j / sqrt d) = C tanh(a . (W_o^T k_j) / sqrt d)).
        """
        h = self.encoder(self.embed(coords))  # (B, n, d)
        B, n, d = h.shape
        k, v, ptr = self.kv(h).chunk(3, dim=-1)
        split = lambda x: x.view(B, n, self.h, d // self.h).transpose(1, 2)  # (B, H, n, d/H)
        w_mean, w_first, w_cur = self.q.weight.split(d, dim=1)  # W_q = [W_mean | W_first | W_cur]
        return dict(K=split(k), V=split(v), ptr=ptr @ self.out.weight,  # (B, n, d): W_o^T k_j
                    q_mean=h.mean(1, keepdim=True) @ w_mean.T, q_first=h @ w_first.T, q_cur=h @ w_cur.T)

    def rollout(self, coords, num_samples: int, *, start_nodes: torch.Tensor | None = None,
                temperature: float = 1.0, greedy: bool = False, allowed: torch.Tensor | None = None,
                mutation_rate: float = 0.0, logits: str = "model", edge_logits: torch.Tensor | None = None,
                generator: torch.Generator | None = None) -> Rollout:
        """Decode ``num_samples`` tours for each instance of ``coords`` ``(B, n, 2)``.

        ``start_nodes`` ``(B, S)``: first city of each tour (default: uniform at random).
        ``allowed`` ``(B, S, n, K)``: permitted next cities per current city, -1 = padding
        (the crossover of NGS); a step takes all unvisited cities instead when none of the
        permitted ones is unvisited (forced mutation) or with probability ``mutation_rate``.
        ``logits="uniform"`` replaces the model's scores by zeros (a model-free decoder).
        ``edge_logits`` ``(B, n, n)``: added to the score of every step c -> j (the
        log-pheromone of ACO, eq. (ngs-aco)).
        Each step draws one uniform per city and one for the mutation coin, so with
        ``mutation_rate=1`` the tours equal those of an unrestricted rollout with the same generator.
        """
        coords = check_coords(coords)
        B, n, _ = coords.shape
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(f"num_samples: expected an integer >= 1, got {num_samples!r}")
        S = num_samples
        temperature = check_temperature(temperature, B)
        if isinstance(mutation_rate, bool) or not isinstance(mutation_rate, (int, float)) \
                or not 0.0 <= mutation_rate <= 1.0:
            raise ValueError(f"mutation_rate: expected a probability in [0, 1], got {mutation_rate!r}")
        if logits not in ("model", "uniform"):
            raise ValueError(f"logits: expected 'model' or 'uniform', got {logits!r}")
        if edge_logits is not None:
            if not torch.is_tensor(edge_logits) or tuple(edge_logits.shape) != (B, n, n):
                raise ValueError(f"edge_logits: expected shape ({B}, {n}, {n}), got "
                                 f"{tuple(getattr(edge_logits, 'shape', ()))}")
            if torch.isnan(edge_logits).any() or torch.isposinf(edge_logits).any():
                raise ValueError("edge_logits: expected finite scores or -inf (found nan or +inf)")
        if allowed is not None:
            if not torch.is_tensor(allowed) or allowed.ndim != 4 or tuple(allowed.shape[:3]) != (B, S, n):
                raise ValueError(f"allowed: expected shape ({B}, {S}, {n}, K), got "
                                 f"{tuple(getattr(allowed, 'shape', ()))}")
            if allowed.dtype.is_floating_point or allowed.dtype == torch.bool:
                raise ValueError(f"allowed: expected integer city indices, got dtype {allowed.dtype}")
            if ((allowed < -1) | (allowed >= n)).any():
                raise ValueError(f"allowed: entries must be cities 0..{n - 1} or -1 (padding)")
            allowed = allowed.long()
        dev = coords.device
        if start_nodes is None:
            start_nodes = torch.randint(n, (B, S), generator=generator, device=dev)
        if not torch.is_tensor(start_nodes) or tuple(start_nodes.shape) != (B, S):
            raise ValueError(f"start_nodes: expected shape ({B}, {S}), got {tuple(getattr(start_nodes, 'shape', ()))}")
        if start_nodes.dtype.is_floating_point or start_nodes.dtype == torch.bool:
            raise ValueError(f"start_nodes: expected integer city indices, got dtype {start_nodes.dtype}")
        if ((start_nodes < 0) | (start_nodes >= n)).any():
            raise ValueError(f"start_nodes: cities must lie in 0..{n - 1}")
        start_nodes = start_nodes.long()

        cache = self.encode(coords) if logits == "model" else None
        H, dh = self.h, self.d // self.h
        take = lambda x, idx: x.gather(1, idx.unsqueeze(-1).expand(B, S, x.shape[-1]))  # (B, S, d)
        if cache is not None:
            q_fixed = cache["q_mean"] + take(cache["q_first"], start_nodes)  # (B, S, d)

        visited = torch.zeros(B, S, n, dtype=torch.bool, device=dev)
        visited.scatter_(2, start_nodes.unsqueeze(-1), True)
        current = start_nodes
        tours = [start_nodes]
        logp = torch.zeros(B, S, device=dev)
        n_mut = torch.zeros(B, S, dtype=torch.long, device=dev)
        for _ in range(n - 1):
            u = torch.rand(B, S, n + 1, generator=generator, device=dev)  # Gumbel noise + mutation coin
            if logits == "model":
                q = (q_fixed + take(cache["q_cur"], current)).view(B, S, H, dh).transpose(1, 2)
                g = F.scaled_dot_product_attention(q, cache["K"], cache["V"], attn_mask=~visited.unsqueeze(1))
                a = g.transpose(1, 2).reshape(B, S, self.d)  # the glimpse, (B, S, d)
                score = self.clip * torch.tanh(a @ cache["ptr"].transpose(1, 2) / math.sqrt(self.d))
            else:
                score = torch.zeros(B, S, n, device=dev)
            if edge_logits is not None:  # ACO: log-pheromone of the edges leaving the current city
                score = score + edge_logits.gather(1, current.unsqueeze(-1).expand(B, S, n))
            feasible = ~visited
            if allowed is not None:
                restricted = allowed_mask(allowed, current, n) & feasible
                mutate = (u[..., n] < mutation_rate) | ~restricted.any(-1)
                n_mut += mutate.long()
                feasible = torch.where(mutate.unsqueeze(-1), feasible, restricted)
            score = score.masked_fill(~feasible, float("-inf"))
            if greedy:
                nxt = score.argmax(-1)
            else:  # Gumbel-max: argmax(u_j / T - log(-log U_j)) samples softmax(u / T)
                gumbel = -torch.log(-torch.log(u[..., :n].clamp_min(1e-20)))
                nxt = (score / (temperature.view(B, 1, 1) if torch.is_tensor(temperature) else temperature)
                       + gumbel).argmax(-1)
            logp = logp + score.log_softmax(-1).gather(2, nxt.unsqueeze(-1)).squeeze(-1)
            visited = visited.scatter(2, nxt.unsqueeze(-1), True)
            current = nxt
            tours.append(nxt)
        self.decoded += S
        return Rollout(torch.stack(tours, -1), logp, n_mut)
