"""The three networks of WorMI: the frozen reasoning policy, a domain world model, and the
world-wise compound attention that implants retrieved world models into the policy."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as fn

from ..validation import as_positive_int
from .minihome import A, F

TOKENS = 4  # tokens of the reasoning policy: goal, state, previous action, previous effect


class Block(nn.Module):
    """A pre-norm Transformer block: ``H + MHA(LN H)``, then ``+ FFN(LN H)``."""

    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d, ffn), nn.GELU(), nn.Linear(ffn, d))

    def forward(self, h: torch.Tensor, pad: torch.Tensor | None = None) -> torch.Tensor:
        x = self.ln1(h)
        h = h + self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        return h + self.ffn(self.ln2(h))


class ReasoningPolicy(nn.Module):
    """``pi_R(a | g, s, a_prev, effect_prev)``: the stand-in for the paper's language model.

    Four tokens (goal, state, previous action, whether it changed the state) pass through
    ``layers`` Transformer blocks; the action is read from the goal token. ``inject(H, layer)``
    is the implant hook: it may rewrite the token states after a block (eq. (wormi-gate)).
    """

    def __init__(self, d: int = 64, layers: int = 2, heads: int = 4, ffn: int = 128):
        super().__init__()
        self.d = d
        self.goal, self.state = nn.Linear(F, d), nn.Linear(F, d)
        self.prev_action, self.prev_effect = nn.Embedding(A + 1, d), nn.Embedding(2, d)
        self.kind = nn.Parameter(0.02 * torch.randn(TOKENS, d))
        self.blocks = nn.ModuleList(Block(d, heads, ffn) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, A)

    def tokens(self, g, s, prev_a, prev_eff) -> torch.Tensor:
        """``H^(0)`` ``(B, 4, d)``; ``prev_a = -1`` marks the first step."""
        parts = [self.goal(g), self.state(s), self.prev_action(prev_a + 1), self.prev_effect(prev_eff)]
        return torch.stack(parts, 1) + self.kind

    def forward(self, g, s, prev_a, prev_eff, inject: Callable | None = None) -> torch.Tensor:
        """Action logits ``(B, A)``."""
        h = self.tokens(g, s, prev_a, prev_eff)
        for layer, block in enumerate(self.blocks):
            h = block(h)
            if inject is not None:
                h = inject(h, layer)
        return self.head(self.ln(h[:, 0]))


class WorldModel(nn.Module):
    """``M_j``: an encoder of ``(s, g)`` with three heads (eq. (wormi-world-loss)).

    ``forward`` returns the intermediate features ``h1, h2`` ``(B, W)``, the affordance logits
    ``aff`` (does action ``a`` change the state here?) and the behaviour-cloning logits ``bc``
    ``(B, A)``; :meth:`dynamics` predicts the next facts from ``h2`` and the action.
    """

    def __init__(self, width: int = 64):
        super().__init__()
        self.width = as_positive_int(width, "width")
        self.enc1, self.enc2 = nn.Linear(2 * F, width), nn.Linear(width, width)
        self.aff, self.bc = nn.Linear(width, A), nn.Linear(width, A)
        self.dyn = nn.Linear(width + A, F)

    def forward(self, s, g) -> dict[str, torch.Tensor]:
        h1 = fn.relu(self.enc1(torch.cat([s, g], -1)))
        h2 = fn.relu(self.enc2(h1))
        return {"h1": h1, "h2": h2, "aff": self.aff(h2), "bc": self.bc(h2)}

    def dynamics(self, h2, a) -> torch.Tensor:
        """Logits of the next facts ``(B, F)`` after action ``a`` ``(B,)``."""
        return self.dyn(torch.cat([h2, fn.one_hot(a, A).to(h2.dtype)], -1))

    def loss(self, s, g, a, s_next, afforded, expert) -> dict[str, torch.Tensor]:
        """``L_dyn + L_aff + L_bc`` on a batch of the world's own transitions."""
        out = self(s, g)
        parts = {
            "dyn": fn.binary_cross_entropy_with_logits(self.dynamics(out["h2"], a), s_next),
            "aff": fn.binary_cross_entropy_with_logits(out["aff"], afforded),
            "bc": fn.cross_entropy(out["bc"], expert),
        }
        parts["total"] = sum(parts.values())
        return parts


def world_features(out: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The four features of a world that become its tokens: ``h1, h2, sigma(aff), softmax(bc)``."""
    if not isinstance(out, dict) or not {"h1", "h2", "aff", "bc"} <= set(out):
        raise ValueError("out: expected a world model's output, a dict with h1, h2, aff and bc")
    return [out["h1"], out["h2"], torch.sigmoid(out["aff"]), torch.softmax(out["bc"], -1)]


class CompoundAttention(nn.Module):
    """World-wise compound attention ``C_theta`` (eqs. (wormi-tokens)-(wormi-gate)).

    ``forward(H, worlds, mask)`` takes the policy's token states ``H`` ``(B, n, d)``, the four
    features of ``K`` retrieved worlds (a list of four tensors ``(B, K, .)``) and a mask
    ``(B, K)`` of worlds actually present; it returns ``H'`` and the world weights ``beta``
    ``(B, n, K)``. Absent worlds get ``beta = 0``; with no world, or with the output projection
    ``W_O`` at zero (an untrained module: it is initialised at zero), ``H' = H``.
    """

    def __init__(self, d: int = 64, width: int = 64, heads: int = 4):
        super().__init__()
        for name, value in (("d", d), ("width", width), ("heads", heads)):
            as_positive_int(value, name)
        if d % heads:
            raise ValueError(f"heads: expected a divisor of d = {d}, got {heads}")
        self.d, self.heads = d, heads
        self.proj = nn.ModuleList([nn.Linear(width, d), nn.Linear(width, d), nn.Linear(A, d), nn.Linear(A, d)])
        self.kind = nn.Parameter(0.02 * torch.randn(TOKENS, d))
        self.integrate = Block(d, heads, 2 * d)
        self.ln = nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.q_beta, self.k_beta = nn.Linear(d, d), nn.Linear(d, d)
        self.out = nn.Linear(d, d)  # W_O, zero at initialisation: an untrained module is the identity
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def world_tokens(self, worlds: list[torch.Tensor]) -> torch.Tensor:
        """``U`` ``(B, K, 4, d)``: shared projections of each world's features, eq. (wormi-tokens)."""
        return torch.stack([p(x) for p, x in zip(self.proj, worlds)], -2) + self.kind

    def forward(self, h: torch.Tensor, worlds: list[torch.Tensor],
                mask: torch.Tensor | None = None):
        B, n, d = h.shape
        K = worlds[0].shape[1] if worlds else 0
        if mask is None:
            mask = torch.ones(B, K, dtype=torch.bool, device=h.device)
        if K == 0 or not bool(mask.any()):
            return h, h.new_zeros(B, n, K)
        u = self.world_tokens(worlds)  # (B, K, 4, d)
        # world-to-world integration: one attention block over every present world's
        # tokens; rows with no world attend to themselves (their output is unused)
        pad = ~mask.repeat_interleave(TOKENS, 1)
        empty = mask.sum(1) == 0
        pad = pad & ~empty[:, None]
        u = self.integrate(u.reshape(B, K * TOKENS, d), pad)
        u = self.ln(u).reshape(B, K, TOKENS, d)
        # world-to-reasoning alignment, one world at a time (eq. (wormi-align))
        hd = d // self.heads
        q = self.q(h).view(B, n, self.heads, hd)
        k = self.k(u).view(B, K, TOKENS, self.heads, hd)
        v = self.v(u).view(B, K, TOKENS, self.heads, hd)
        att = torch.einsum("bnhe,bkrhe->bnkhr", q, k) / math.sqrt(hd)
        att = att.softmax(-1)
        # (B, n, K, 4): which world tokens each query reads
        self.token_attention = att.detach().mean(3)
        o = torch.einsum("bnkhr,bkrhe->bnkhe", att, v).reshape(B, n, K, d)
        # world weights beta: which world each reasoning token listens to (eq. (wormi-beta))
        logits = torch.einsum("bnd,bkd->bnk", self.q_beta(h), self.k_beta(u.mean(2))) / math.sqrt(d)
        beta = logits.masked_fill(~mask[:, None, :], -1e9).softmax(-1)  # finite: no NaN on empty rows
        beta = beta * mask[:, None, :]
        mixed = torch.einsum("bnk,bnkd->bnd", beta, o)
        return h + self.out(mixed), beta


class Implant(nn.Module):
    """One compound-attention module per connection: ``at[i]`` rewrites the policy's token states
    after block ``layers[i]`` (the official code hooks a module onto several layers of the base
    model, spread over its depth; here both blocks of ``pi_R``)."""

    def __init__(self, d: int = 64, width: int = 64, heads: int = 4, layers: tuple[int, ...] = (0, 1)):
        super().__init__()
        layers = tuple(as_positive_int(x, "layers", minimum=0) for x in layers)  # 0.5 is not block 0
        if not layers or len(set(layers)) != len(layers) or min(layers) < 0:
            raise ValueError(f"layers: expected distinct block indices >= 0, got {layers}")
        self.layers = layers
        self.at = nn.ModuleList(CompoundAttention(d, width, heads) for _ in layers)

    def module(self, layer: int) -> CompoundAttention | None:
        return self.at[self.layers.index(layer)] if layer in self.layers else None
