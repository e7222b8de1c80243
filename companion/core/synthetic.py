"""Two synthetic cities that share one latent socio-economic world (the chapter's data).

Each region ``i`` has a latent profile ``z_i`` (k numbers) drawn around the centroid of its
functional type. Mobility, POI counts and the three labels are functions of ``z`` that are the
same in both cities; what differs between the cities is the mix of types, the layout, the
spatial friction of trips and the trip totals. No region is shared, and nothing tells a model
which region of one city corresponds to which region of the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from companion.validation import as_choice, as_positive_int

INDICATORS = ("gdp", "pop", "co2")
INTERACTIONS = ("similarity", "signed")


@dataclass
class CityData:
    """One city: ``od`` (N, N) trip counts (zero diagonal), ``adj`` (N, N) graph weights with
    self-loops, ``coords`` (N, 2), ground truth ``z`` (N, k) and ``types`` (N,), ``poi`` (N, P)
    counts, ``labels`` {indicator: (N,) positive} and ``gamma`` (k, k), the interaction
    matrix of the trip model (shared by both cities of a pair)."""

    name: str
    od: np.ndarray
    adj: np.ndarray
    coords: np.ndarray
    z: np.ndarray
    types: np.ndarray
    poi: np.ndarray
    labels: dict
    gamma: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.types)


def _world(rng: np.random.Generator, k: int, n_types: int, interaction: str) -> dict:
    mu = rng.normal(0.0, 1.5, (n_types, k))
    alpha, beta = rng.normal(0.0, 0.5, k), rng.normal(0.0, 0.5, k)
    g = rng.normal(0.0, 1.0, (k, k))  # one draw for both kinds: the other world draws agree
    if interaction == "signed":  # the first passes' generator: an indefinite interaction
        gamma = 0.3 * g
    else:  # similarity: 0.15 (G G' + I) with G = g / 2 ~ N(0, 1/4), positive definite
        G = 0.5 * g
        gamma = 0.15 * (G @ G.T + np.eye(k))
    return dict(
        mu=mu, alpha=alpha, beta=beta, gamma=gamma,
        w={m: rng.normal(0.0, 0.4, k) for m in INDICATORS},
        B=rng.normal(0.0, 0.5, (12, k)),
    )


def _city(rng, world, name, n, mix, friction, trips, topk) -> CityData:
    n_types, k = world["mu"].shape
    types = np.sort(rng.choice(n_types, size=n, p=mix))
    z = world["mu"][types] + 0.4 * rng.normal(size=(n, k))
    anchors = rng.uniform(0.2, 0.8, (n_types, 2))
    anchors[0] = 0.5  # type 0 is the centre (the "CBD")
    coords = np.clip(anchors[types] + rng.normal(0.0, 0.12, (n, 2)), 0.0, 1.0)
    dist = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    eta = (z @ world["alpha"])[:, None] + (z @ world["beta"])[None] + z @ world["gamma"] @ z.T
    eta = eta - dist / friction
    np.fill_diagonal(eta, -np.inf)
    p = np.exp(eta - eta[np.isfinite(eta)].max())
    od = rng.multinomial(trips, (p / p.sum()).ravel()).reshape(n, n).astype(float)
    top = np.argsort(-od, axis=1)[:, :topk]
    adj = np.zeros((n, n))
    rows = np.repeat(np.arange(n), topk)
    adj[rows, top.ravel()] = od[rows, top.ravel()] / od.max()
    adj = np.maximum(adj, adj.T)
    np.fill_diagonal(adj, 1.0)
    popularity = rng.lognormal(0.0, 0.5, len(world["B"]))
    poi = rng.poisson(popularity * np.exp(z @ world["B"].T + np.log(5.0))).astype(float)
    labels = {m: 100.0 * np.exp(z @ w + 0.3 * rng.normal(size=n)) for m, w in world["w"].items()}
    return CityData(name, od, adj, coords, z, types, poi, labels, world["gamma"].copy())


def make_city_pair(n_a: int = 300, n_b: int = 240, k: int = 4, n_types: int = 5, topk: int = 10,
                   seed: int = 0, interaction: str = "similarity") -> tuple[CityData, CityData]:
    """Cities A (source) and B (target) of one seeded world.

    Type mixes (.30, .25, .20, .15, .10) and (.15, .20, .25, .25, .15) (five types), spatial
    friction 0.25 and 0.15, trip totals 2e5 and 1e5. Trips: OD ~ Multinomial(T, softmax(eta))
    with eta_ij = alpha'z_i + beta'z_j + z_i' Gamma z_j - |x_i - x_j| / friction. Labels:
    y = 100 exp(w_m'z + 0.3 xi), log-normal tails.

    ``interaction`` is the kind of Gamma: "similarity" (the default) draws the positive-definite
    Gamma = 0.15 (G G' + I), G ~ N(0, 1/4) entrywise, so that regions with similar profiles
    exchange more trips, which an inner-product model of trips (eq. (core-mob)) can express;
    "signed" draws the first passes' Gamma = 0.3 N(0, 1), whose symmetric part has eigenvalues
    of both signs, a part of the trips no inner product h_i'h_j can fit. Both kinds make the
    same random draws for the world (type centroids, trip, label and POI weights) and for city
    A's types, profiles and layout; the draws after city A's trips differ.
    """
    for name, value, low in [("n_a", n_a, 2), ("n_b", n_b, 2), ("k", k, 1), ("topk", topk, 1)]:
        as_positive_int(value, name, minimum=low)
    if n_types != 5:
        raise ValueError(f"n_types: the type mixes are defined for 5 types, got {n_types!r}")
    if topk >= min(n_a, n_b):
        raise ValueError(f"topk: expected fewer than {min(n_a, n_b)} neighbours, got {topk}")
    as_choice(interaction, "interaction", INTERACTIONS)
    rng = np.random.default_rng(seed)
    world = _world(rng, k, n_types, interaction)
    a = _city(rng, world, "A", n_a, (0.30, 0.25, 0.20, 0.15, 0.10), 0.25, 200_000, topk)
    b = _city(rng, world, "B", n_b, (0.15, 0.20, 0.25, 0.25, 0.15), 0.15, 100_000, topk)
    return a, b
