"""The models: an implicit transformer, and explicit models with a latent bottleneck ``z``.

**Implicit** (eq. (icl-implicit)): context tokens ``Lin([x_i, y_i])`` and query tokens
``Lin([x'_j, 0]) + p`` go through one post-LN transformer encoder with the mask of
:func:`implicit_mask` -- no token attends to a query token, so the context is read
bidirectionally and every query reads the context only (not itself, not other queries).
There is no positional encoding: the context is a set.

**Explicit** (eqs. (icl-context), (icl-predict)): :class:`ContextEncoder` summarises the
context into ``z`` through a learned summary token ``c`` that no token attends to, not even
``c`` itself (:func:`context_mask`, as the official ``TransformerContext``); a predictor ``g(z, x')`` then answers each query from ``z`` alone:
:class:`TransformerPredictor` (mask :func:`predictor_mask`), :class:`MLPPredictor`, or a
known-form readout (:class:`LinearReadoutPredictor`, :class:`SinusoidReadoutPredictor`).
``ExplicitModel(None, predictor)`` is the *known-latent* model: ``z := w``, the true latent
(officially read by a :class:`TransformerPredictor`, as the chapter's suite does).

Masks are boolean with PyTorch's convention: **True = blocked**.
"""

from __future__ import annotations

import torch
from torch import nn

from companion.validation import as_positive_int

__all__ = ["implicit_mask", "context_mask", "predictor_mask", "ImplicitTransformer",
           "ContextEncoder", "TransformerPredictor", "MLPPredictor", "LinearReadoutPredictor",
           "SinusoidReadoutPredictor", "ExplicitModel"]


# ----------------------------------------------------------------------------- masks
def implicit_mask(n: int, m: int, device=None) -> torch.Tensor:
    """``(n+m, n+m)`` mask of the implicit model: every query column is blocked (``n >= 1``:
    with no context a row would have nothing to read)."""
    n, m = as_positive_int(n, "n", minimum=1), as_positive_int(m, "m", minimum=0)
    mask = torch.zeros(n + m, n + m, dtype=torch.bool, device=device)
    mask[:, n:] = True
    return mask


def context_mask(n: int, device=None) -> torch.Tensor:
    """``(1+n, 1+n)`` mask of the context encoder: no token attends to the summary token ``c``
    (position 0), not even ``c`` itself, so ``c`` only gathers the context (the official mask;
    ``n >= 1``)."""
    n = as_positive_int(n, "n", minimum=1)
    mask = torch.zeros(1 + n, 1 + n, dtype=torch.bool, device=device)
    mask[:, 0] = True
    return mask


def predictor_mask(m: int, device=None) -> torch.Tensor:
    """``(1+m, 1+m)`` mask of the transformer predictor: the ``z`` token (position 0) sees
    itself only; each query sees ``z`` and itself."""
    m = as_positive_int(m, "m", minimum=0)
    mask = ~torch.eye(1 + m, dtype=torch.bool, device=device)
    mask[1:, 0] = False
    return mask


# ----------------------------------------------------------------------------- pieces
def _encoder(d_model: int, n_heads: int, d_ff: int, n_layers: int) -> nn.TransformerEncoder:
    """Post-LN, ReLU, no dropout, batch-first; Xavier-uniform weight matrices."""
    layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
    for p in encoder.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return encoder


def _check_set(name: str, t, last: int | None) -> None:
    """``t``: a finite ``(B, k, last)`` tensor with ``k >= 1``, or a ValueError naming ``name``."""
    if not isinstance(t, torch.Tensor) or t.ndim != 3 or (last is not None and t.shape[-1] != last):
        raise ValueError(f"{name}: expected a (B, k, {last if last is not None else 'd'}) tensor, got "
                         f"{tuple(getattr(t, 'shape', ())) or type(t).__name__}")
    if t.shape[1] == 0:
        what = "an empty context (n = 0)" if name in ("x_c", "y_c") else "no query (m = 0)"
        raise ValueError(f"{name}: expected at least one point (k >= 1), got {what}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name}: contains NaN or infinite values")


def _check_z(z, x_q, z_dim: int) -> None:
    """A predictor's inputs: a finite ``z (B, z_dim)`` and queries ``x_q (B, m, dx)``."""
    if not isinstance(z, torch.Tensor) or z.ndim != 2 or z.shape[1] != z_dim:
        raise ValueError(f"z: expected a (B, {z_dim}) tensor, got "
                         f"{tuple(getattr(z, 'shape', ())) or type(z).__name__}")
    if not bool(torch.isfinite(z).all()):
        raise ValueError("z: contains NaN or infinite values")
    _check_set("x_q", x_q, None)
    if x_q.shape[0] != z.shape[0]:
        raise ValueError(f"x_q: expected the batch size of z ({z.shape[0]}), got {tuple(x_q.shape)}")


def _check_sets(x_c, y_c, x_q, dx: int, dy: int) -> None:
    for name, t, last in (("x_c", x_c, dx), ("y_c", y_c, dy), ("x_q", x_q, dx)):
        _check_set(name, t, last)
    if x_c.shape[:2] != y_c.shape[:2]:
        raise ValueError(f"y_c: expected the (B, n) of x_c {tuple(x_c.shape[:2])}, got {tuple(y_c.shape)}")
    if x_q.shape[0] != x_c.shape[0]:
        raise ValueError(f"x_q: expected the batch size of x_c ({x_c.shape[0]}), got {tuple(x_q.shape)}")


class ImplicitTransformer(nn.Module):
    """The standard transformer for ICL, eq. (icl-implicit): ``(x_c, y_c, x_q) -> y_hat``."""

    def __init__(self, dx: int, dy: int, d_model: int = 256, n_heads: int = 4, d_ff: int = 512,
                 n_layers: int = 8):
        super().__init__()
        dx, dy, n_layers = as_positive_int(dx, "dx"), as_positive_int(dy, "dy"), as_positive_int(n_layers, "n_layers")
        d_model, n_heads, d_ff = as_positive_int(d_model, "d_model"), as_positive_int(n_heads, "n_heads"), as_positive_int(d_ff, "d_ff")
        if d_model % n_heads:
            raise ValueError(f"d_model: expected a multiple of n_heads = {n_heads}, got {d_model}")
        self.dx, self.dy = dx, dy
        self.embed = nn.Linear(dx + dy, d_model)
        self.query_flag = nn.Parameter(torch.randn(d_model) / d_model ** 0.5)
        self.encoder = _encoder(d_model, n_heads, d_ff, n_layers)
        self.head = nn.Linear(d_model, dy)

    def states(self, x_c, y_c, x_q) -> torch.Tensor:
        """Final hidden states ``(B, n+m, d_model)``: context tokens first, then the queries."""
        _check_sets(x_c, y_c, x_q, self.dx, self.dy)
        n, m = x_c.shape[1], x_q.shape[1]
        tokens = self.embed(torch.cat([torch.cat([x_c, y_c], -1),
                                       torch.cat([x_q, x_q.new_zeros(*x_q.shape[:2], self.dy)],
                                                 -1)], 1))
        tokens = torch.cat([tokens[:, :n], tokens[:, n:] + self.query_flag], 1)
        return self.encoder(tokens, mask=implicit_mask(n, m, x_c.device))

    def forward(self, x_c, y_c, x_q) -> tuple[torch.Tensor, None]:
        return self.head(self.states(x_c, y_c, x_q)[:, x_c.shape[1]:]), None


class ContextEncoder(nn.Module):
    """``z = h_c^{(L)}``, eq. (icl-context): the summary token's final state (then ``Lin`` to
    ``z_dim`` if given)."""

    def __init__(self, dx: int, dy: int, d_model: int = 256, n_heads: int = 4, d_ff: int = 512,
                 n_layers: int = 4, z_dim: int | None = None):
        super().__init__()
        self.dx, self.dy = dx, dy
        self.z_dim = z_dim or d_model
        self.embed = nn.Linear(dx + dy, d_model)
        self.summary = nn.Parameter(torch.randn(d_model))
        self.encoder = _encoder(d_model, n_heads, d_ff, n_layers)
        self.to_z = nn.Linear(d_model, z_dim) if z_dim and z_dim != d_model else nn.Identity()

    def forward(self, x_c, y_c) -> torch.Tensor:
        _check_sets(x_c, y_c, x_c, self.dx, self.dy)
        B, n, _ = x_c.shape
        tokens = torch.cat([self.summary.expand(B, 1, -1),
                            self.embed(torch.cat([x_c, y_c], -1))], 1)
        return self.to_z(self.encoder(tokens, mask=context_mask(n, x_c.device))[:, 0])


class TransformerPredictor(nn.Module):
    """``g(z, x')`` as a transformer over ``[Lin(z), Lin(x'_1), ..., Lin(x'_m)]``, eq.
    (icl-predict), with :func:`predictor_mask` so queries stay independent given ``z``."""

    def __init__(self, dx: int, dy: int, z_dim: int, d_model: int = 256, n_heads: int = 4,
                 d_ff: int = 512, n_layers: int = 4):
        super().__init__()
        self.z_dim = z_dim
        self.z_in = nn.Linear(z_dim, d_model) if z_dim != d_model else nn.Identity()
        self.x_in = nn.Linear(dx, d_model)
        self.encoder = _encoder(d_model, n_heads, d_ff, n_layers)
        self.head = nn.Linear(d_model, dy)

    def forward(self, z, x_q) -> torch.Tensor:
        _check_z(z, x_q, self.z_dim)
        m = x_q.shape[1]
        tokens = torch.cat([self.z_in(z)[:, None], self.x_in(x_q)], 1)
        return self.head(self.encoder(tokens, mask=predictor_mask(m, x_q.device))[:, 1:])


class MLPPredictor(nn.Module):
    """``g(z, x') = MLP([z, x'])``, ReLU hidden layers, applied to each query on its own."""

    def __init__(self, dx: int, dy: int, z_dim: int, hidden: int = 512, n_hidden: int = 3):
        super().__init__()
        self.z_dim = z_dim
        sizes = [z_dim + dx] + [hidden] * n_hidden
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*layers, nn.Linear(sizes[-1], dy))

    def forward(self, z, x_q) -> torch.Tensor:
        _check_z(z, x_q, self.z_dim)
        return self.mlp(torch.cat([z[:, None].expand(-1, x_q.shape[1], -1), x_q], -1))


class LinearReadoutPredictor(nn.Module):
    """The known form of linear regression, eq. (icl-known): ``W_hat = reshape(A z + b)``,
    ``y_hat = [x', 1] W_hat``. With ``z_dim = (dx+1) dy`` and ``linear=False``, ``W_hat = z``."""

    def __init__(self, dx: int, dy: int, z_dim: int, linear: bool = True):
        super().__init__()
        self.dx, self.dy = dx, dy
        if not linear and z_dim != (dx + 1) * dy:
            raise ValueError(f"z_dim: without the linear map z must hold (dx+1)*dy = "
                             f"{(dx + 1) * dy} numbers, got {z_dim}")
        self.z_dim = z_dim
        self.to_w = nn.Linear(z_dim, (dx + 1) * dy) if linear else nn.Identity()

    def forward(self, z, x_q) -> torch.Tensor:
        _check_z(z, x_q, self.z_dim)
        _check_set("x_q", x_q, self.dx)
        W = self.to_w(z).reshape(-1, self.dx + 1, self.dy)
        return torch.cat([x_q, torch.ones_like(x_q[..., :1])], -1) @ W


class SinusoidReadoutPredictor(nn.Module):
    """The known form of the sinusoid family: ``a_hat = A z + b``,
    ``y_hat = sum_{d,f} a_hat_df sin(phi_df x'_d)`` with the task's fixed frequencies."""

    def __init__(self, freqs: torch.Tensor, z_dim: int):
        super().__init__()
        freqs = torch.as_tensor(freqs, dtype=torch.float32)
        if freqs.numel() == 0 or not bool(torch.isfinite(freqs).all()):
            raise ValueError(f"freqs: expected a non-empty tensor of finite frequencies, got {freqs}")
        as_positive_int(z_dim, "z_dim")
        self.register_buffer("freqs", freqs)
        self.to_a = nn.Linear(z_dim, self.freqs.numel())

    def forward(self, z, x_q) -> torch.Tensor:
        _check_z(z, x_q, self.to_a.in_features)
        _check_set("x_q", x_q, self.freqs.shape[0] if self.freqs.ndim == 2 else 1)
        phi = torch.sin(x_q[..., :, None] * self.freqs).flatten(-2)
        return phi @ self.to_a(z)[..., None]


class ExplicitModel(nn.Module):
    """``y_hat = g(z, x')`` with ``z = context(x_c, y_c)``; ``context=None``: ``z := w``."""

    def __init__(self, context: nn.Module | None, predictor: nn.Module):
        super().__init__()
        if context is not None and not callable(context):
            raise ValueError(f"context: expected a context encoder (a module or callable) or None, got "
                             f"{type(context).__name__}")
        if not callable(predictor):
            raise ValueError(f"predictor: expected a module or callable, got {type(predictor).__name__}")
        self.context, self.predictor = context, predictor

    def latent(self, x_c, y_c, w=None) -> torch.Tensor:
        if self.context is not None:
            return self.context(x_c, y_c)
        if w is None:
            raise ValueError("w: a known-latent model (context=None) needs the true latent w")
        if not isinstance(w, torch.Tensor) or w.ndim != 2:
            raise ValueError(f"w: expected a (B, P) tensor, got {tuple(getattr(w, 'shape', ())) or type(w).__name__}")
        if not bool(torch.isfinite(w).all()):
            raise ValueError("w: contains NaN or infinite values")
        return w.detach().float()

    def forward(self, x_c, y_c, x_q, w=None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.context is not None:
            dx = getattr(self.context, "dx", None)
            _check_sets(x_c, y_c, x_q, dx if dx is not None else x_c.shape[-1],
                        getattr(self.context, "dy", None) or y_c.shape[-1])
        else:
            _check_set("x_q", x_q, None)
        z = self.latent(x_c, y_c, w)
        if z.shape[0] != x_q.shape[0]:
            name = "x_q" if self.context is not None else "w"
            raise ValueError(f"{name}: batch sizes do not match: z {tuple(z.shape)}, x_q {tuple(x_q.shape)}")
        return self.predictor(z, x_q), z
