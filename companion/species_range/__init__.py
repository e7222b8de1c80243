"""FS-SINR (Lange et al., ICML 2025): species ranges from a few presence points in one forward pass.

A synthetic globe (:class:`SyntheticGlobe`: an area-uniform Fibonacci lattice, random
continents, two covariates, species ranges from a climatic niche with dispersal limits, and
presence-only observations biased towards "towns"), the model (:class:`LocationEncoder`
:math:`f_\\theta`, :class:`FSSINR`, the set encoder :math:`g_\\psi`, and :class:`SINR`, the
per-species embedding table it is initialised from), the assume-negative loss
(:func:`an_full_loss`), the baselines (:func:`fit_sinr_lr`, :func:`kde_scores`) and the metric
(:func:`average_precision`). Locations are ``(lon, lat)`` in degrees, shape ``[N, 2]``; a
context batch is ``[B, K, 2]`` with a boolean padding mask ``[B, K]`` (``True`` = padded).
Equation labels refer to the chapter ``book/graphs/species-range.md``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from companion.checkpoints import lazy_exports
from companion.validation import (as_finite_tensor, as_float_array, as_index_tensor, as_instance, as_nonnegative,
                                  as_positive, as_positive_int, as_probability, as_real)

__all__ = ["EARTH_KM", "fibonacci_sphere", "lonlat_to_unit", "sincos_encode", "SyntheticGlobe",
           "make_globe", "LocationEncoder", "SINR", "FSSINR", "an_full_loss", "sample_background",
           "train_sinr", "train_fssinr", "sample_contexts", "fssinr_scores", "fit_sinr_lr",
           "kde_scores", "covariate_features", "prior_scores", "trend_per_doubling",
           "average_precision", "timed", "real_land", "COV_NAMES"]

EARTH_KM = 6371.0


def _check_ll(ll, name: str = "ll") -> torch.Tensor:
    ll = torch.as_tensor(ll)
    if ll.ndim < 1 or ll.shape[-1] != 2:
        raise ValueError(f"{name}: expected shape [..., 2] of (lon, lat) degrees, got {tuple(ll.shape)}")
    ll = ll.float() if not torch.is_floating_point(ll) else ll
    as_finite_tensor(ll, name, empty=True)
    if (ll[..., 0].abs() > 180).any() or (ll[..., 1].abs() > 90).any():
        raise ValueError(f"{name}: lon must lie in [-180, 180] and lat in [-90, 90] degrees")
    return ll


def fibonacci_sphere(n: int) -> np.ndarray:
    """``n`` area-uniform points on the sphere as ``(lon, lat)`` degrees, shape ``[n, 2]``."""
    n = as_positive_int(n, "n")
    i = np.arange(n) + 0.5
    lat = np.degrees(np.arcsin(1 - 2 * i / n))
    lon = (np.degrees(np.pi * (1 + 5**0.5) * i) + 180) % 360 - 180
    return np.stack([lon, lat], axis=1)


def lonlat_to_unit(ll) -> torch.Tensor:
    """Unit vectors ``[N, 3]`` of locations ``ll`` ``[N, 2]`` (degrees)."""
    lon, lat = torch.deg2rad(_check_ll(ll)).unbind(-1)
    return torch.stack([lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()], dim=-1)


def sincos_encode(ll) -> torch.Tensor:
    """Eq. (fssinr-encoding): ``[sin(pi x), cos(pi x)]`` of ``x = (lon/180, lat/90)``, ``[..., 4]``."""
    ll = _check_ll(ll)
    x = ll / torch.tensor([180.0, 90.0], device=ll.device, dtype=ll.dtype)
    return torch.cat([torch.sin(torch.pi * x), torch.cos(torch.pi * x)], dim=-1)


def sample_background(n: int, gen: torch.Generator, device=None) -> torch.Tensor:
    """``n`` locations uniform on the sphere (not uniform in degrees), ``[n, 2]``."""
    n = as_positive_int(n, "n")
    u = torch.rand(n, 2, generator=gen).to(device)
    return torch.stack([360 * u[:, 0] - 180, torch.rad2deg(torch.asin(2 * u[:, 1] - 1))], dim=1)


# ---------------------------------------------------------------------------------------------
# The synthetic globe


@dataclass
class SyntheticGlobe:
    """Cells, land, covariates, species ranges and presence-only observations of one seeded world.

    ``cells_ll [M, 2]``; ``land [M]`` (the real continents of ``global-land-mask``, Antarctica
    left out); ``cov [M, 4]`` (standardised temperature, moisture, seasonality and relief
    fields); ``coast_km [M]`` (distance of a cell to the nearest sea cell); ``ranges [S, M]``
    boolean (always on land); ``obs`` a list of ``[n_s, 2]`` arrays (the train species'
    observations, the test species' reserve); ``train`` and ``test`` species ids;
    ``towns [J, 2]``; ``effort [M]`` the observer effort.
    """

    cells_ll: np.ndarray
    land: np.ndarray
    cov: np.ndarray
    ranges: np.ndarray
    obs: list
    train: np.ndarray
    test: np.ndarray
    towns: np.ndarray
    coast_km: np.ndarray
    effort: np.ndarray

    def prevalence(self) -> np.ndarray:
        """Fraction of land cells inside each species' range (the expected AP of a random ranking)."""
        return self.ranges[:, self.land].mean(1)


COV_NAMES = ("temperature", "moisture", "seasonality", "relief")


def _smooth_field(unit: np.ndarray, rng: np.random.Generator, n_bumps: int, kappa: float) -> np.ndarray:
    centres = lonlat_to_unit(torch.tensor(fibonacci_sphere(n_bumps))).numpy()
    centres = centres[rng.permutation(n_bumps)]
    return np.exp(kappa * (unit @ centres.T - 1)) @ rng.normal(size=n_bumps)


def real_land(ll: np.ndarray) -> np.ndarray:
    """Land cells of the real Earth (``global-land-mask``, 1 km grid), south of 60 S left out."""
    from global_land_mask import globe

    ll = as_float_array(ll, "ll")
    if ll.ndim != 2 or ll.shape[1] != 2 or np.abs(ll[:, 0]).max() > 180 or np.abs(ll[:, 1]).max() > 90:
        raise ValueError(f"ll: expected (N, 2) (longitude, latitude) in degrees, |lon| <= 180, |lat| <= 90, "
                         f"got shape {ll.shape}")
    lat = np.clip(ll[:, 1], -89.999, 89.999)
    return globe.is_land(lat, np.clip(ll[:, 0], -179.999, 179.999)) & (ll[:, 1] > -60)


def make_globe(n_cells: int = 4000, n_train: int = 300, n_test: int = 60, obs_cap: int = 50,
               reserve: int = 50, n_towns: int = 40, jitter_km: float = 30.0,
               seed: int = 0) -> SyntheticGlobe:
    """Build a seeded world on the real continents (see the chapter's problem section).

    Test species are split off first. Covariates: temperature falls with latitude and relief,
    moisture peaks in the tropics and near coasts, seasonality grows with latitude and
    distance from the sea, relief is a smooth random field. Observer effort peaks around
    ``n_towns`` towns placed preferably near coasts and at populated latitudes.
    """
    n_cells = as_positive_int(n_cells, "n_cells", minimum=200)
    n_train = as_positive_int(n_train, "n_train", minimum=2)
    n_test = as_positive_int(n_test, "n_test", minimum=1)
    obs_cap = as_positive_int(obs_cap, "obs_cap", minimum=2)
    reserve = as_positive_int(reserve, "reserve", minimum=1)
    n_towns = as_positive_int(n_towns, "n_towns", minimum=1)
    as_nonnegative(jitter_km, "jitter_km")  # km
    rng = np.random.default_rng(seed)
    ll = fibonacci_sphere(n_cells)
    unit = lonlat_to_unit(torch.tensor(ll)).numpy()
    land = real_land(ll)
    land_ids = np.flatnonzero(land)
    if len(land_ids) < max(n_towns, 20):
        raise ValueError(f"n_cells: {n_cells} cells give only {len(land_ids)} land cells")
    sea_ids = np.flatnonzero(~real_land(ll) & (ll[:, 1] > -60))
    d_sea = EARTH_KM * np.arccos(np.clip(unit @ unit[sea_ids].T, -1, 1)).min(1)
    coast_km = np.where(land, d_sea, 0.0)
    lat = np.radians(ll[:, 1])
    relief = _smooth_field(unit, rng, 60, 10.0)
    temp = np.cos(lat) ** 2 - 0.25 * relief + 0.15 * _smooth_field(unit, rng, 40, 6.0)
    wet = (np.exp(-(ll[:, 1] / 15) ** 2) + 0.6 * np.exp(-coast_km / 500)
           + 0.25 * _smooth_field(unit, rng, 40, 5.0))
    season = (np.abs(np.sin(lat)) + 0.5 * (1 - np.exp(-coast_km / 1000))
              + 0.15 * _smooth_field(unit, rng, 40, 5.0))
    cov = np.stack([temp, wet, season, relief], 1)
    cov = (cov - cov[land].mean(0)) / cov[land].std(0)
    people = (np.exp(-((ll[:, 1] - 35) / 15) ** 2) + 0.6 * np.exp(-((ll[:, 1] - 10) / 12) ** 2)
              + 0.4 * np.exp(-((ll[:, 1] + 25) / 12) ** 2))
    town_p = (people * np.exp(-coast_km / 300))[land_ids]
    towns = land_ids[rng.choice(len(land_ids), n_towns, replace=False, p=town_p / town_p.sum())]
    d_town = EARTH_KM * np.arccos(np.clip(unit @ unit[towns].T, -1, 1))
    effort = 0.05 + np.exp(-d_town**2 / (2 * 350.0**2)) @ rng.lognormal(0, 1, n_towns)
    n_sp = n_train + n_test
    ranges = np.zeros((n_sp, n_cells), bool)
    obs = []
    for s in range(n_sp):
        o = land_ids[rng.integers(len(land_ids))]
        sigma = rng.uniform(0.5, 1.2, cov.shape[1])
        h = np.exp(-0.5 * (((cov - cov[o]) / sigma) ** 2).sum(1))
        rho = np.exp(rng.uniform(np.log(500), np.log(4000)))
        g = np.exp(-EARTH_KM * np.arccos(np.clip(unit @ unit[o], -1, 1)) / rho)
        score = np.where(land, h * g, -1.0)
        prev = np.exp(rng.uniform(np.log(0.01), np.log(0.15)))
        tau = np.quantile(score[land], 1 - prev)
        ranges[s] = land & (score >= tau)
        ranges[s, o] = True
        n = reserve if s >= n_train else min(obs_cap, int(np.ceil(rng.lognormal(3, 1))))
        p = ranges[s] * np.sqrt(h) * effort
        cells = rng.choice(n_cells, n, p=p / p.sum())
        obs.append(_jitter(ll[cells], rng, jitter_km) if jitter_km > 0 else ll[cells])
    return SyntheticGlobe(ll, land, cov, ranges, obs, np.arange(n_train), np.arange(n_train, n_sp),
                          ll[towns], coast_km, effort)


def _jitter(ll: np.ndarray, rng: np.random.Generator, km: float = 30.0) -> np.ndarray:
    """Move each observation by N(0, km^2) in the local tangent plane, staying in range."""
    dlat = rng.normal(0, km, len(ll)) / 111.2
    dlon = rng.normal(0, km, len(ll)) / (111.2 * np.maximum(np.cos(np.radians(ll[:, 1])), 0.05))
    lon = (ll[:, 0] + dlon + 180) % 360 - 180
    return np.stack([lon, np.clip(ll[:, 1] + dlat, -90, 90)], 1)


# ---------------------------------------------------------------------------------------------
# Models


class _ResBlock(nn.Module):
    def __init__(self, width: int, dropout: float):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(width, width), nn.ReLU())

    def forward(self, h):
        return h + self.net(h)


class LocationEncoder(nn.Module):
    """Eq. (fssinr-encoder), :math:`f_\\theta`: ``Linear -> ReLU -> depth x ResBlock`` on the
    encoding of eq. (fssinr-encoding); ``forward(ll [N, 2]) -> [N, width]``."""

    def __init__(self, width: int = 64, depth: int = 2, dropout: float = 0.1):
        super().__init__()
        self.width = as_positive_int(width, "width")
        as_positive_int(depth, "depth", minimum=0)
        as_probability(dropout, "dropout", low_open=False)
        self.net = nn.Sequential(nn.Linear(4, width), nn.ReLU(),
                                 *[_ResBlock(width, dropout) for _ in range(depth)])

    def forward(self, ll):
        return self.net(sincos_encode(ll))


class SINR(nn.Module):
    """The per-species model: :math:`\\sigma(f_\\theta(x)^\\top w_s)`, ``w_s`` looked up in a table."""

    def __init__(self, enc: LocationEncoder, n_species: int):
        super().__init__()
        as_instance(enc, "enc", LocationEncoder)
        n_species = as_positive_int(n_species, "n_species")
        self.enc = enc
        self.table = nn.Embedding(n_species, enc.width)


class FSSINR(nn.Module):
    """Eq. (fssinr-set): the set encoder :math:`g_\\psi` over ``[class, register, f(x_1)+e_loc, ...]``.

    A post-norm transformer without positional encoding, so the embedding is a function of the
    context *set*; padded slots are masked, and the class and register tokens are never masked,
    so an empty context gives the context-free embedding.
    """

    def __init__(self, enc: LocationEncoder, n_layers: int = 2, n_heads: int = 2, ffn: int = 128,
                 dropout: float = 0.1):
        super().__init__()
        d = enc.width
        if d % n_heads:
            raise ValueError(f"n_heads: must divide the width {d}, got {n_heads}")
        self.enc = enc
        self.cls = nn.Parameter(0.02 * torch.randn(d))
        self.reg = nn.Parameter(0.02 * torch.randn(d))
        self.e_loc = nn.Parameter(0.02 * torch.randn(d))
        self.norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, n_heads, ffn, dropout, batch_first=True)
        self.transformer = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, d)

    def species_embedding(self, ctx_ll, ctx_mask) -> torch.Tensor:
        """``ctx_ll [B, K, 2]``, ``ctx_mask [B, K]`` (True = padded) -> ``w [B, d]``."""
        ctx_ll = _check_ll(ctx_ll, "ctx_ll")
        if ctx_ll.ndim != 3 or ctx_mask.shape != ctx_ll.shape[:2]:
            raise ValueError(f"ctx_mask: expected shape {tuple(ctx_ll.shape[:2])} "
                             f"matching ctx_ll [B, K, 2], got {tuple(ctx_mask.shape)}")
        B = ctx_ll.shape[0]
        tokens = self.enc(ctx_ll) + self.e_loc
        special = torch.stack([self.cls, self.reg]).expand(B, 2, -1)
        seq = self.norm(torch.cat([special, tokens], dim=1))
        mask = torch.cat([torch.zeros(B, 2, dtype=torch.bool, device=ctx_mask.device),
                          ctx_mask.bool()], dim=1)
        return self.out(self.transformer(seq, src_key_padding_mask=mask)[:, 0])


def an_full_loss(loc_feat, bg_feat, w, species, pos_weight: float = 2048.0,
                 eps: float = 1e-5) -> torch.Tensor:
    """Eq. (fssinr-loss), the "assume negative, full" loss with in-batch species.

    ``loc_feat [B, d]`` = f(x_a) of the observed locations, ``bg_feat [B, d]`` of random
    background locations, ``w [B, d]`` the species embeddings of the examples and
    ``species [B]`` their ids. Entry ``(a, b)`` scores location ``a`` for species ``b``.
    """
    as_finite_tensor(loc_feat, "loc_feat", ndim=2, floating=True)  # B >= 1 examples
    as_finite_tensor(bg_feat, "bg_feat", shape=tuple(loc_feat.shape), floating=True)
    as_finite_tensor(w, "w", shape=tuple(loc_feat.shape), floating=True)
    if not isinstance(species, torch.Tensor):
        raise ValueError(f"species: expected a tensor of {loc_feat.shape[0]} species ids, got "
                         f"{type(species).__name__}")
    as_index_tensor(species, "species", n=loc_feat.shape[0])
    as_positive(pos_weight, "pos_weight")
    as_positive(eps, "eps")
    P, Q = torch.sigmoid(loc_feat @ w.T), torch.sigmoid(bg_feat @ w.T)
    eye = torch.eye(len(species), dtype=torch.bool, device=species.device)
    other = species[:, None] != species[None, :]
    loss_loc = torch.where(eye, -pos_weight * torch.log(P + eps),
                           other * -torch.log(1 - P + eps))
    return loss_loc.mean() + (-torch.log(1 - Q + eps)).mean()


# ---------------------------------------------------------------------------------------------
# Training


def _obs_table(globe: SyntheticGlobe, species: np.ndarray):
    ll = np.concatenate([globe.obs[s] for s in species])
    sp = np.concatenate([np.full(len(globe.obs[s]), s) for s in species])
    return torch.tensor(ll, dtype=torch.float32), torch.tensor(sp)


def _schedule(opt, steps: int, warmup: int, decay: float, decay_epochs: int):
    """Linear warm-up over ``warmup`` steps, then ``decay`` per ``steps / decay_epochs`` steps:
    the official per-epoch decay, with the official number of epochs spread over the run."""
    def factor(step):
        return min(1.0, (step + 1) / warmup) * decay ** (decay_epochs * step // steps)
    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _check_recipe(steps, batch, lr, warmup, decay, pos_weight):
    steps = as_positive_int(steps, "steps")
    batch = as_positive_int(batch, "batch")
    warmup = as_positive_int(warmup, "warmup")
    as_positive(lr, "lr")
    as_real(decay, "decay", low=0, high=1, low_open=True)  # a per-epoch factor
    as_positive(pos_weight, "pos_weight")
    return steps, batch, warmup


def _batches(n: int, batch: int, steps: int, gen: torch.Generator):
    """``steps`` index batches from shuffled passes over ``n`` examples (the last batch of a
    pass may be short)."""
    done = 0
    while True:
        for idx in torch.randperm(n, generator=gen).split(batch):
            if done == steps:
                return
            done += 1
            yield done, idx


def train_sinr(globe: SyntheticGlobe, width: int = 64, depth: int = 2, steps: int = 3000,
               batch: int = 256, lr: float = 5e-4, decay: float = 0.98, decay_epochs: int = 10,
               warmup: int = 100, pos_weight: float = 2048.0, seed: int = 0,
               dropout: float = 0.1) -> SINR:
    """Fit f_theta and one embedding per training species with eq. (fssinr-loss) (W looked up).

    Adam at ``lr`` (the official SINR optimiser), a linear warm-up over ``warmup`` steps, and
    the official decay ``decay`` applied ``decay_epochs`` times over the ``steps`` (shuffled
    passes over the training observations). ``dropout`` is that of the residual blocks
    (0.1 is FS-SINR's official value, 0.5 SINR's own). The loss of every step is kept in
    ``model.history["loss"]``.
    """
    steps, batch, warmup = _check_recipe(steps, batch, lr, warmup, decay, pos_weight)
    decay_epochs = as_positive_int(decay_epochs, "decay_epochs")
    dropout = as_probability(dropout, "dropout", low_open=False)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    ll, sp = _obs_table(globe, globe.train)
    model = SINR(LocationEncoder(width, depth, dropout), len(globe.train))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = _schedule(opt, steps, warmup, decay, decay_epochs)
    losses = []
    model.train()
    for _, idx in _batches(len(ll), batch, steps, gen):
        loss = an_full_loss(model.enc(ll[idx]), model.enc(sample_background(len(idx), gen)),
                            model.table(sp[idx]), sp[idx], pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.history = {"loss": losses}
    return model.eval()


def _episodes(counts, starts, idx, max_ctx, fixed, rng):
    """Contexts for the targets ``idx``: up to ``max_ctx`` of the *other* observations of the
    target's species (all of them when fewer; none for a species seen once, as in the
    official data loader). ``fixed=False`` draws the size uniformly in ``[1, max_ctx]``."""
    ctx = np.zeros((len(idx), max_ctx), dtype=np.int64)
    mask = np.ones((len(idx), max_ctx), dtype=bool)
    for b, (i, s) in enumerate(idx):
        others = np.delete(np.arange(starts[s], starts[s] + counts[s]), i - starts[s])
        k = min(len(others), max_ctx if fixed else int(rng.integers(1, max_ctx + 1)))
        ctx[b, :k] = rng.choice(others, k, replace=False)
        mask[b, :k] = False
    return torch.tensor(ctx), torch.tensor(mask)


def train_fssinr(globe: SyntheticGlobe, sinr: SINR, steps: int = 6000, batch: int = 64,
                 max_ctx: int = 20, fixed_ctx: bool = True, lr: float = 5e-4,
                 decay: float = 0.98, decay_epochs: int = 20, warmup: int = 200,
                 pos_weight: float = 2048.0, seed: int = 0, snapshots=(),
                 log_every: int = 0, **arch) -> FSSINR:
    """Train the set encoder (and fine-tune f_theta, initialised from ``sinr``) on episodes.

    Each example is one training observation (shuffled passes, batches of ``batch``), its
    context drawn from the other observations of its species: ``max_ctx`` of them
    (``fixed_ctx=True``, the official ``loc:20``) or a size uniform in ``[1, max_ctx]``.
    Adam at ``lr``, linear warm-up, the official decay spread as in :func:`train_sinr`.
    Keeps the per-step loss in ``model.history["loss"]`` and the state dict after each step
    listed in ``snapshots`` in ``model.history["snapshots"]``; ``log_every > 0`` prints the
    step and the mean loss of the last ``log_every`` steps to stderr (progress only).
    """
    as_instance(globe, "globe", SyntheticGlobe), as_instance(sinr, "sinr", SINR)
    steps, batch, warmup = _check_recipe(steps, batch, lr, warmup, decay, pos_weight)
    max_ctx = as_positive_int(max_ctx, "max_ctx")
    log_every = as_positive_int(log_every, "log_every", minimum=0)
    decay_epochs = as_positive_int(decay_epochs, "decay_epochs")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    enc = LocationEncoder(sinr.enc.width, len(sinr.enc.net) - 2)
    enc.load_state_dict(sinr.enc.state_dict())
    model = FSSINR(enc, **arch)
    ll, sp = _obs_table(globe, globe.train)
    counts = np.bincount(sp.numpy(), minlength=len(globe.train))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = _schedule(opt, steps, warmup, decay, decay_epochs)
    losses, snaps = [], {}
    model.train()
    for step, idx in _batches(len(ll), batch, steps, gen):
        pairs = list(zip(idx.tolist(), sp[idx].tolist()))
        ctx, mask = _episodes(counts, starts, pairs, max_ctx, fixed_ctx, rng)
        w = model.species_embedding(ll[ctx], mask)
        present = model.enc(ll[idx])
        background = model.enc(sample_background(len(idx), gen))
        loss = an_full_loss(present, background, w, sp[idx], pos_weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step in snapshots:
            snaps[step] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if log_every and step % log_every == 0:
            recent = np.mean(losses[-log_every:])
            print(f"FS-SINR step {step}/{steps}: loss {recent:.4f}",
                  file=sys.stderr, flush=True)
    model.history = {"loss": losses, "snapshots": snaps}
    return model.eval()


# ---------------------------------------------------------------------------------------------
# Evaluation and baselines


def sample_contexts(globe: SyntheticGlobe, species: np.ndarray, k: int, rng: np.random.Generator):
    """``[S, k, 2]`` contexts of ``k`` distinct observations from each test species' reserve."""
    as_instance(globe, "globe", SyntheticGlobe)
    k = as_positive_int(k, "k", minimum=0)
    if k < 0 or any(k > len(globe.obs[s]) for s in species):
        raise ValueError(f"k: expected 0 <= k <= the reserve size, got {k}")
    return np.stack([globe.obs[s][rng.choice(len(globe.obs[s]), k, replace=False)] for s in species])


@torch.no_grad()
def fssinr_scores(model: FSSINR, ctx_ll, cells_ll) -> torch.Tensor:
    """Eq. (fssinr-predict): ``sigma(f(x)' w(S))`` for every cell and every context, ``[S, M]``."""
    as_instance(model, "model", FSSINR)
    ctx_ll = torch.as_tensor(ctx_ll, dtype=torch.float32)
    mask = torch.zeros(ctx_ll.shape[:2], dtype=torch.bool, device=ctx_ll.device)
    w = model.species_embedding(ctx_ll, mask)
    return torch.sigmoid(w @ model.enc(torch.as_tensor(cells_ll, dtype=torch.float32)).T)


def fit_sinr_lr(feat_ctx: np.ndarray, feat_bg: np.ndarray, C: float = 1.0, iters: int = 25):
    """Eq. (fssinr-lr): L2 logistic regression of ``k`` presences against background features,
    classes balanced, bias unpenalised (scikit-learn's objective), by Newton's method;
    returns ``(w [d], b)``."""
    feat_ctx, feat_bg = np.asarray(feat_ctx, float), np.asarray(feat_bg, float)
    if feat_ctx.ndim != 2 or feat_bg.ndim != 2 or feat_ctx.shape[1] != feat_bg.shape[1] or not len(feat_ctx):
        raise ValueError("feat_ctx, feat_bg: expected [k >= 1, d] and [n, d] feature arrays, got "
                         f"{feat_ctx.shape}, {feat_bg.shape}")
    if not len(feat_bg):
        raise ValueError(f"feat_bg: expected at least one background feature row, got shape {feat_bg.shape}")
    as_float_array(feat_ctx, "feat_ctx")
    as_float_array(feat_bg, "feat_bg")
    as_positive(C, "C")  # the inverse regularisation
    iters = as_positive_int(iters, "iters")
    X = np.concatenate([feat_ctx, feat_bg])
    X = np.concatenate([X, np.ones((len(X), 1))], 1)
    y = np.r_[np.ones(len(feat_ctx)), np.zeros(len(feat_bg))]
    n = len(y)
    weight = np.where(y == 1, n / (2 * len(feat_ctx)), n / (2 * len(feat_bg)))
    reg = np.r_[np.ones(X.shape[1] - 1), 0.0] / C
    beta = np.zeros(X.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(X @ beta, -30, 30)))
        grad = X.T @ (weight * (p - y)) + reg * beta
        hess = (X.T * (weight * p * (1 - p))) @ X + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def kde_scores(ctx_ll, cells_ll, bw_km: float) -> torch.Tensor:
    """Eq. (fssinr-kde): von Mises-Fisher kernel density of the context, ``[..., M]``."""
    as_positive(bw_km, "bw_km")  # the bandwidth in km
    kappa = (EARTH_KM / bw_km) ** 2
    u_ctx, u_cell = lonlat_to_unit(ctx_ll), lonlat_to_unit(cells_ll)
    return torch.exp(kappa * (u_ctx @ u_cell.T - 1)).sum(-2)


def covariate_features(cov) -> np.ndarray:
    """Eq. (fssinr-cov): ``[c, c^2]`` of the covariates ``cov [M, C]``, columns standardised, ``[M, 2C]``."""
    cov = as_float_array(cov, "cov")
    if cov.ndim != 2 or len(cov) < 2:
        raise ValueError(f"cov: expected an [M >= 2, C] array of covariates, got shape {cov.shape}")
    f = np.concatenate([cov, cov**2], 1)
    sd = f.std(0)
    return (f - f.mean(0)) / np.where(sd > 0, sd, 1.0)


def prior_scores(ranges) -> np.ndarray:
    """The context-free prior: the fraction of the given (training) species whose range holds
    each cell, ``ranges [S, M]`` boolean -> ``[M]``."""
    r = np.asarray(ranges)
    if r.ndim != 2 or not r.size or r.dtype != bool:
        raise ValueError(f"ranges: expected a non-empty boolean [S, M] array, got {r.dtype} {r.shape}")
    return r.mean(0)


def trend_per_doubling(ks, aps, n_boot: int = 2000, seed: int = 0):
    """Slope of AP against ``log2 k`` (least squares per species, averaged over species) and its
    95% bootstrap interval over species: ``(slope, low, high)``. ``ks [K]`` positive context
    sizes, ``aps [K, S]`` the AP of each species at each ``k``."""
    ks = as_float_array(ks, "ks", low=0, low_open=True)
    aps = as_float_array(aps, "aps", low=0, high=1)
    if ks.ndim != 1 or len(ks) < 3 or len(np.unique(ks)) != len(ks):
        raise ValueError(f"ks: expected at least 3 distinct context sizes, got {ks}")
    if aps.ndim != 2 or aps.shape[0] != len(ks) or aps.shape[1] < 2:
        raise ValueError(f"aps: expected shape [{len(ks)}, S >= 2], got {aps.shape}")
    n_boot = as_positive_int(n_boot, "n_boot")
    x = np.log2(ks) - np.log2(ks).mean()
    per_species = x @ (aps - aps.mean(0)) / (x @ x)
    rng = np.random.default_rng(seed)
    boot = per_species[rng.integers(len(per_species), size=(n_boot, len(per_species)))].mean(1)
    low, high = np.quantile(boot, [0.025, 0.975])
    return float(per_species.mean()), float(low), float(high)


def average_precision(y_true, scores) -> float:
    """Eq. (fssinr-ap): ``sum_k (R_k - R_{k-1}) P_k`` over thresholds at the distinct scores."""
    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(scores, dtype=float)
    if y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"scores: expected shape {y.shape} matching y_true, got {s.shape}")
    if not y.any():
        raise ValueError("y_true: needs at least one positive")
    if np.isnan(s).any():
        raise ValueError("scores: contains NaN")
    if y.size and np.asarray(y_true).dtype != bool and not np.isin(np.asarray(y_true), (0, 1)).all():
        raise ValueError("y_true: expected 0/1 or boolean labels")
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # last index of each run of tied scores
    tp = np.cumsum(y)[last]
    precision, recall = tp / (last + 1), tp / y.sum()
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def timed(fn, *args, repeats: int = 1):
    """``(result, seconds per call)`` of ``fn(*args)``, after one warm-up call."""
    if not callable(fn):
        raise ValueError(f"fn: expected a callable, got {type(fn).__name__}")
    repeats = as_positive_int(repeats, "repeats")
    fn(*args)
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    return out, (time.perf_counter() - t0) / repeats


# the training entry point is imported on first use (see companion.checkpoints.lazy_exports)
__getattr__ = lazy_exports(__name__, "train", ("load_or_train", "load_ablation", "RECIPES"))
