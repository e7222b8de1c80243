"""Test-time search with a trained policy, at an equal budget of decoded tours.

The unit of cost is one complete tour decoded by the policy (n decoder steps); every method
gets the same number per instance, counted by the policy itself (``policy.decoded``).

* :func:`sample_search` -- best of ``budget`` sampled tours (random start cities);
* :func:`greedy_multistart` -- POMO's greedy tour from every start city, on the 8 symmetries
  of the unit square (n x 8 tours);
* :func:`ngs_search` -- the genetic search: a population of tours, parents drawn by rank
  among the distinct tours (eq. (ngs-rank)), children decoded by the policy restricted to the
  parents' edges, with mutation (eq. (ngs-cross)), survivors drawn by rank among the distinct tours;
* :func:`aco_search` -- ant colony optimisation on top of the same policy: ants decode with the
  policy's scores plus a log-pheromone per edge (eq. (ngs-aco)), the Ant System update of rl4co.

All functions are batched over instances; randomness comes from an explicit ``torch.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import math

import torch

from companion.validation import as_positive, as_positive_int, as_real

from .policy import AttentionPolicy, check_temperature
from .tsp import check_coords, is_permutation, tour_length

__all__ = [
    "NGSConfig",
    "SearchResult",
    "neighbour_table",
    "parent_neighbours",
    "edge_hash",
    "parent_weights",
    "select_parents",
    "select_survivors",
    "ACOConfig",
    "aco_search",
    "sample_search",
    "greedy_multistart",
    "ngs_search",
    "tune_temperature",
]

MAX_ROLLOUTS = 16_384  # tours decoded per policy call (B x S), to bound memory


@dataclass
class NGSConfig:
    """Settings of :func:`ngs_search`; the defaults are those of the paper's routing runs
    (``routing-nar/run.py`` and ``ga.py`` of the official code): population 100, 100 offspring
    per generation, 2 parents, mutation 0.01, rank coefficient 0.001, temperature 1."""

    pop_size: int = 100
    n_offspring: int = 100
    n_parents: int = 2
    mutation_rate: float = 0.01  # probability, per decoding step of a child, of an unrestricted step
    rank_coef: float = 0.001  # kappa of eq. (ngs-rank): small = greedy selection, large = uniform
    temperature: float = 1.0
    logits: str = "model"  # "uniform": children decoded without the model (ablation); generation 0 always uses it
    parents: str = "population"  # "random": restrict to the edges of random tours instead (ablation)


@dataclass
class SearchResult:
    best_len: torch.Tensor  # (B,) shortest tour found per instance
    best_tours: torch.Tensor  # (B, n)
    curve: torch.Tensor  # (B, G) best length after each block of tours
    decoded: list[int]  # (G,) tours decoded per instance at each point of the curve
    n_decoded: int  # tours decoded per instance in total, counted by the policy
    all_valid: bool  # every decoded tour (not only the best) is a permutation of the cities
    history: dict = field(default_factory=dict)


def _check_tour_tensor(tours, name: str = "tours", ndim: int = 3) -> torch.Tensor:
    """An integer tensor of ``ndim`` dimensions whose last one holds the cities 0..n-1."""
    if not isinstance(tours, torch.Tensor) or tours.dtype.is_floating_point or tours.dtype == torch.bool:
        raise ValueError(f"{name}: expected an integer tensor of city indices, got "
                         f"{getattr(tours, 'dtype', type(tours).__name__)}")
    if tours.ndim != ndim or tours.shape[-1] < 3 or tours.numel() == 0:
        raise ValueError(f"{name}: expected {ndim} dimensions with at least 3 cities, got shape {tuple(tours.shape)}")
    n = tours.shape[-1]
    if not is_permutation(tours.long(), n).all():
        raise ValueError(f"{name}: every row must be a permutation of the cities 0..{n - 1}")
    return tours.long()


def _check_costs(costs, hashes, name: str = "costs") -> None:
    """``costs`` a finite float ``(B, P)`` with P >= 1, ``hashes`` an integer tensor of the same shape."""
    if not isinstance(costs, torch.Tensor) or not costs.dtype.is_floating_point or costs.ndim != 2 or costs.shape[1] < 1:
        raise ValueError(f"{name}: expected a float tensor of shape (B, P) with P >= 1, got "
                         f"{tuple(getattr(costs, 'shape', ()))} {getattr(costs, 'dtype', type(costs).__name__)}")
    if not torch.isfinite(costs).all():
        raise ValueError(f"{name}: tour lengths must be finite (found nan or inf)")
    if (not isinstance(hashes, torch.Tensor) or hashes.dtype.is_floating_point or hashes.dtype == torch.bool
            or hashes.shape != costs.shape):
        raise ValueError(f"hashes: expected an integer tensor of shape {tuple(costs.shape)}, got "
                         f"{tuple(getattr(hashes, 'shape', ()))} {getattr(hashes, 'dtype', type(hashes).__name__)}")


def _gumbel_topk(log_w: torch.Tensor, k: int, generator) -> torch.Tensor:
    """k indices drawn without replacement with probabilities prop. to exp(log_w) (Gumbel top-k)."""
    u = torch.rand(log_w.shape, generator=generator).clamp_min(1e-20)
    return (log_w - torch.log(-torch.log(u))).topk(k, dim=-1).indices


def neighbour_table(tours: torch.Tensor) -> torch.Tensor:
    """``(B, P, n) -> (B, P, n, 2)``: for each city, its predecessor and successor in each tour."""
    tours = _check_tour_tensor(tours)
    B, P, n = tours.shape
    table = torch.empty(B, P, n, 2, dtype=tours.dtype)
    table.scatter_(2, tours.unsqueeze(-1).expand(B, P, n, 2),
                   torch.stack([tours.roll(1, -1), tours.roll(-1, -1)], -1))
    return table


def parent_neighbours(tours: torch.Tensor, parents: torch.Tensor) -> torch.Tensor:
    """The crossover's allowed next cities: ``tours (B, P, n)``, ``parents (B, S, m)`` indices into P
    -> ``(B, S, n, 2m)``, the neighbours of every city in any of the child's m parents (undirected)."""
    tours = _check_tour_tensor(tours)
    B, P, n = tours.shape
    if (not isinstance(parents, torch.Tensor) or parents.dtype.is_floating_point or parents.dtype == torch.bool
            or parents.ndim != 3 or parents.shape[0] != B or parents.shape[2] < 1):
        raise ValueError(f"parents: expected an integer tensor of shape ({B}, S, m), got "
                         f"{tuple(getattr(parents, 'shape', ()))} {getattr(parents, 'dtype', type(parents).__name__)}")
    if ((parents < 0) | (parents >= P)).any():
        raise ValueError(f"parents: indices into the population must lie in 0..{P - 1}")
    parents = parents.long()
    S, m = parents.shape[1:]
    table = neighbour_table(tours)  # (B, P, n, 2)
    rows = table.gather(1, parents.reshape(B, S * m, 1, 1).expand(B, S * m, n, 2))  # (B, S m, n, 2)
    return rows.view(B, S, m, n, 2).permute(0, 1, 3, 2, 4).reshape(B, S, n, 2 * m)


_EDGE_KEYS: dict[int, torch.Tensor] = {}


def edge_hash(tours: torch.Tensor) -> torch.Tensor:
    """``(..., n) -> (...)`` int64: equal for two tours with the same undirected edge set.

    Sum (wrapping in int64) of a fixed random 62-bit key per edge {i, j}; rotations and
    reversals of a tour get the same value, different tours collide with probability ~2^-62.
    """
    if not isinstance(tours, torch.Tensor) or tours.ndim < 1:
        raise ValueError(f"tours: expected an integer tensor (..., n), got {type(tours).__name__}")
    tours = _check_tour_tensor(tours, ndim=tours.ndim)
    n = tours.shape[-1]
    if n not in _EDGE_KEYS:
        _EDGE_KEYS[n] = torch.randint(-(2**62), 2**62, (n * n,), generator=torch.Generator().manual_seed(n))
    a, b = tours, tours.roll(-1, -1)
    return _EDGE_KEYS[n][torch.minimum(a, b) * n + torch.maximum(a, b)].sum(-1)


def _later_copy(hashes: torch.Tensor) -> torch.Tensor:
    """``(B, M) -> (B, M)`` bool: the tour repeats the edge set of an earlier one in its row."""
    return (hashes.unsqueeze(2) == hashes.unsqueeze(1)).triu(1).any(1)


def _distinct_rank(costs: torch.Tensor, copy: torch.Tensor) -> torch.Tensor:
    """Rank 0, 1, ... of the distinct tours by cost; the copies after all of them, also by cost."""
    by_cost = costs.argsort(dim=-1, stable=True)
    order = by_cost.gather(1, copy.gather(1, by_cost).long().argsort(dim=-1, stable=True))
    return order.argsort(-1)


def parent_weights(costs: torch.Tensor, hashes: torch.Tensor, kappa: float) -> torch.Tensor:
    """Parent-selection probabilities ``(B, P)`` of a population ``costs``/``hashes`` ``(B, P)``.

    The distinct tours get w(r) = 1 / (kappa P + r), r their rank by cost among the distinct
    tours (eq. (ngs-rank)); a tour that repeats the edge set of an earlier one gets 0, so copies
    never breed (the official code gives them a reward of -1e5 for the same purpose).
    """
    kappa = as_positive(kappa, "rank_coef")
    _check_costs(costs, hashes)
    copy = _later_copy(hashes)
    w = (1.0 / (kappa * costs.shape[-1] + _distinct_rank(costs, copy).double())).masked_fill(copy, 0.0)
    return (w / w.sum(-1, keepdim=True)).to(costs.dtype)


def select_parents(costs: torch.Tensor, hashes: torch.Tensor, n_children: int, n_parents: int, kappa: float,
                   generator) -> torch.Tensor:
    """Parents ``(B, S, m)`` (indices into the population) of ``S`` children, m per child.

    Each child draws m parents without replacement with :func:`parent_weights`, so its parents
    are distinct tours whenever the population holds at least m of them.
    """
    B, P = costs.shape
    as_positive_int(n_children, "n_children")
    n_parents = as_positive_int(n_parents, "n_parents")
    if n_parents > P:
        raise ValueError(f"n_parents: cannot draw {n_parents} distinct parents from a population of {P}")
    log_w = parent_weights(costs, hashes, kappa).log().unsqueeze(1).expand(B, n_children, P)
    return _gumbel_topk(log_w, n_parents, generator)


def select_survivors(costs: torch.Tensor, hashes: torch.Tensor, k: int, kappa: float, generator) -> torch.Tensor:
    """Indices ``(B, k)`` of the survivors among ``M`` candidates ``(B, M)``.

    Distinct tours (first copy of each edge set) are drawn without replacement with rank
    weights 1 / (kappa M + rank); copies get weight zero, and fill the remaining places, best
    first, only if there are fewer than k distinct tours.
    """
    _check_costs(costs, hashes)
    kappa = as_positive(kappa, "rank_coef")
    B, M = costs.shape
    k = as_positive_int(k, "k")
    if k > M:
        raise ValueError(f"k: cannot keep {k} survivors out of {M} candidates")
    copy = _later_copy(hashes)
    rank = _distinct_rank(costs, copy)
    u = torch.rand(B, M, generator=generator).clamp_min(1e-20)
    key = -torch.log(kappa * M + rank.double()) - torch.log(-torch.log(u.double()))  # Gumbel top-k keys
    # distinct tours by decreasing key, then the copies by increasing rank (an exact order: no float ties)
    order = torch.where(copy, rank.double(), -key).argsort(dim=-1, stable=True)
    order = order.gather(1, copy.gather(1, order).long().argsort(dim=-1, stable=True))
    return order[:, :k]


def _keep_best(best_len, best_tours, tours, lengths):
    """The best tour so far per instance, updated with a new block ``tours (B, S, n)``, ``lengths (B, S)``."""
    i = lengths.argmin(1, keepdim=True)
    new = lengths.gather(1, i).squeeze(1)
    better = new < best_len
    pick = tours.gather(1, i.unsqueeze(-1).expand(-1, 1, tours.shape[-1])).squeeze(1)
    return torch.where(better, new, best_len), torch.where(better[:, None], pick, best_tours)


def _policy_decode(policy: AttentionPolicy, coords, S: int, valid: list, **kw):
    """One batched policy call; records whether every tour it decoded is a permutation."""
    out = policy.rollout(coords, S, **kw)
    valid.append(bool(is_permutation(out.tours, coords.shape[1]).all()))
    return out


@torch.no_grad()
def sample_search(policy: AttentionPolicy, coords, budget: int, *, temperature: float = 1.0, block: int = 50,
                  generator: torch.Generator | None = None) -> SearchResult:
    """Best of ``budget`` tours sampled at ``temperature``; the curve has one point per ``block`` tours."""
    coords = check_coords(coords)
    budget, block = as_positive_int(budget, "budget"), as_positive_int(block, "block")
    temperature = check_temperature(temperature, coords.shape[0])
    if budget % block:
        raise ValueError(f"budget: must be a multiple of block = {block}, got {budget}")
    B, n, _ = coords.shape
    start = policy.decoded
    per_call = max(block, (MAX_ROLLOUTS // B) // block * block)
    tours, lengths, valid = [], [], []
    done = 0
    while done < budget:
        S = min(per_call, budget - done)
        out = _policy_decode(policy, coords, S, valid, temperature=temperature, generator=generator)
        tours.append(out.tours)
        lengths.append(tour_length(coords, out.tours))
        done += S
    tours, lengths = torch.cat(tours, 1), torch.cat(lengths, 1)
    best = lengths.argmin(1)
    curve = lengths.view(B, budget // block, block).min(-1).values.cummin(-1).values
    return SearchResult(lengths.gather(1, best[:, None]).squeeze(1), tours[torch.arange(B), best], curve,
                        list(range(block, budget + 1, block)), policy.decoded - start, all(valid))


SYMMETRIES = 8


def _augment(coords: torch.Tensor) -> torch.Tensor:
    """The 8 symmetries of the unit square (POMO's augmentation): ``(B, n, 2) -> (8 B, n, 2)``."""
    x, y = coords[..., :1], coords[..., 1:]
    views = [(x, y), (y, x), (1 - x, y), (x, 1 - y), (1 - x, 1 - y), (y, 1 - x), (1 - y, x), (1 - y, 1 - x)]
    return torch.cat([torch.cat(v, -1) for v in views], 0)


@torch.no_grad()
def greedy_multistart(policy: AttentionPolicy, coords, *, augment: bool = True) -> SearchResult:
    """POMO inference: the greedy tour from every start city (on 8 symmetric copies if ``augment``)."""
    coords = check_coords(coords)
    if not isinstance(augment, bool):
        raise ValueError(f"augment: expected True or False, got {augment!r}")
    B, n, _ = coords.shape
    views = _augment(coords) if augment else coords
    V = views.shape[0] // B
    start, valid = policy.decoded, []
    out = _policy_decode(policy, views, n, valid, start_nodes=torch.arange(n).expand(V * B, n), greedy=True)
    tours = out.tours.view(V, B, n, n).transpose(0, 1).reshape(B, V * n, n)  # tours are valid in every view
    lengths = tour_length(coords, tours)
    best = lengths.argmin(1)
    decoded = (policy.decoded - start) * V  # n tours per view, V views of every instance
    return SearchResult(lengths.min(1).values, tours[torch.arange(B), best], lengths.min(1).values[:, None],
                        [decoded], decoded, all(valid))


@torch.no_grad()
def ngs_search(policy: AttentionPolicy, coords, budget: int, config: NGSConfig = NGSConfig(),
               generator: torch.Generator | None = None) -> SearchResult:
    """Neural genetic search with ``budget`` decoded tours per instance.

    Generation 0 samples ``n_offspring`` tours from the policy without restriction (repeated
    until the population is full); every later generation draws ``n_parents`` distinct tours
    as parents of each child by rank (copies never breed, :func:`parent_weights`), decodes the
    child restricted to the parents' edges (eq. (ngs-cross)), and draws the next population from
    population + children by rank among distinct tours (eq. (ngs-rank)). The best tour ever
    decoded is kept apart (survival is random). ``history`` records, per generation, the
    population's median length and number of distinct tours, the share of children that are
    new tours, of decoding steps that follow a parent edge, and of children whose two parents
    are the same tour (zero whenever two distinct tours exist).
    """
    coords = check_coords(coords)
    budget = as_positive_int(budget, "budget")
    if not isinstance(config, NGSConfig):
        raise ValueError(f"config: expected an NGSConfig, got {type(config).__name__}")
    P = as_positive_int(config.pop_size, "pop_size")
    S = as_positive_int(config.n_offspring, "n_offspring")
    m = as_positive_int(config.n_parents, "n_parents")
    if P > budget:
        raise ValueError(f"pop_size: the population ({P}) cannot be larger than the budget of decoded tours ({budget})")
    if budget % S:
        raise ValueError(f"budget: must be a multiple of n_offspring = {S} (whole generations), got {budget}")
    if m > P:
        raise ValueError(f"n_parents: needs at least n_parents individuals in the population; {m} > pop_size = {P}")
    as_real(config.mutation_rate, "mutation_rate", low=0, high=1)
    as_positive(config.rank_coef, "rank_coef")
    check_temperature(config.temperature, coords.shape[0])
    if config.logits not in ("model", "uniform"):
        raise ValueError(f"logits: expected 'model' or 'uniform', got {config.logits!r}")
    if config.parents not in ("population", "random"):
        raise ValueError(f"parents: expected 'population' or 'random', got {config.parents!r}")
    B, n, _ = coords.shape
    start = policy.decoded
    pop_tours = torch.empty(B, 0, n, dtype=torch.long)
    pop_len, pop_hash = torch.empty(B, 0), torch.empty(B, 0, dtype=torch.long)
    best_len, best_tours = torch.full((B,), float("inf")), torch.empty(B, n, dtype=torch.long)
    curve, decoded, valid = [], [], []
    history = {"pop_median": [], "restricted_share": [], "new_share": [], "twin_parents": [], "distinct": []}
    while policy.decoded - start < budget:
        if pop_tours.shape[1] < P:  # filling the population: plain samples from the policy
            out = _policy_decode(policy, coords, S, valid, temperature=config.temperature, generator=generator)
        else:
            if config.parents == "population":
                parents = select_parents(pop_len, pop_hash, S, m, config.rank_coef, generator)  # (B, S, m)
                h = pop_hash.gather(1, parents.view(B, S * m)).view(B, S, m)
                twins = (h.unsqueeze(-1) == h.unsqueeze(-2)).triu(1).flatten(-2).any(-1)  # (B, S)
                history["twin_parents"].append(float(twins.float().mean()))
                allowed = parent_neighbours(pop_tours, parents)
            else:  # ablation: the edges of m random tours, unrelated to the population
                rnd = torch.rand(B, S * m, n, generator=generator).argsort(-1)
                allowed = parent_neighbours(rnd, torch.arange(S * m).view(1, S, m).expand(B, S, m))
            out = _policy_decode(policy, coords, S, valid, allowed=allowed, mutation_rate=config.mutation_rate,
                                 temperature=config.temperature, logits=config.logits, generator=generator)
            history["restricted_share"].append(1 - float(out.n_mut.float().mean()) / (n - 1))
        lengths = tour_length(coords, out.tours)
        best_len, best_tours = _keep_best(best_len, best_tours, out.tours, lengths)
        curve.append(best_len.clone())
        decoded.append(policy.decoded - start)
        pool_tours, pool_len = torch.cat([pop_tours, out.tours], 1), torch.cat([pop_len, lengths], 1)
        hashes = edge_hash(pool_tours)
        history["new_share"].append(1 - float(_later_copy(hashes)[:, -S:].float().mean()))  # children not seen
        keep = select_survivors(pool_len, hashes, min(P, pool_len.shape[1]), config.rank_coef, generator)
        pop_tours = pool_tours.gather(1, keep.unsqueeze(-1).expand(-1, -1, n))
        pop_len, pop_hash = pool_len.gather(1, keep), hashes.gather(1, keep)
        history["pop_median"].append(float(pop_len.median(1).values.mean()))
        history["distinct"].append(float((~_later_copy(pop_hash)).sum(1).float().mean()))
    return SearchResult(best_len, best_tours, torch.stack(curve, 1), decoded, policy.decoded - start, all(valid),
                        history)


@dataclass
class ACOConfig:
    """Settings of :func:`aco_search`: the Ant System of the official code's rl4co copy
    (``routing-nar/rl4co/models/zoo/deepaco/antsystem.py``, the GFACS/DeepACO baseline of the
    paper) with its defaults, the policy's scores playing the heatmap; 100 ants per iteration as
    in the paper's test runs (``run.py``: as many ants as NGS has offspring)."""

    n_ants: int = 100  # tours per iteration
    alpha: float = 1.0  # weight of the log-pheromone
    decay: float = 0.95  # tau <- decay tau + deposit
    tau0: float = 1.0  # initial pheromone on every edge (official: torch.ones_like)
    Q: float | None = None  # deposit scale; None = 1 / (n_ants decay), the official default
    temperature: float = 1.0  # divides the policy's scores, not the pheromone (as the official heatmap)


@torch.no_grad()
def aco_search(policy: AttentionPolicy, coords, budget: int, config: ACOConfig = ACOConfig(),
               generator: torch.Generator | None = None) -> SearchResult:
    """Ant colony optimisation with the policy as heuristic, ``budget`` decoded tours per instance.

    Each iteration, ``n_ants`` ants decode with scores u_j / T + alpha log tau_cj, u the
    policy's (eq. (ngs-aco)); then every edge decays, tau <- decay tau, and each ant k deposits
    Q ((R_k - min R) / (max R - min R))^2 on the directed edges of its path, first city to last
    (R = -length; the official update, which skips the closing edge): the best ant of the
    iteration deposits Q, the worst nothing.
    """
    coords = check_coords(coords)
    budget = as_positive_int(budget, "budget")
    if not isinstance(config, ACOConfig):
        raise ValueError(f"config: expected an ACOConfig, got {type(config).__name__}")
    A = as_positive_int(config.n_ants, "n_ants")
    if budget % A:
        raise ValueError(f"budget: must be a multiple of n_ants = {A} (whole iterations), got {budget}")
    if isinstance(config.decay, bool) or not isinstance(config.decay, (int, float)) or not 0.0 < config.decay <= 1.0:
        raise ValueError(f"decay: expected 0 < decay <= 1, got {config.decay!r}")
    tau0 = as_positive(config.tau0, "tau0")
    T = check_temperature(config.temperature, coords.shape[0])
    if isinstance(config.alpha, bool) or not isinstance(config.alpha, (int, float)) or not math.isfinite(config.alpha) \
            or config.alpha < 0:
        raise ValueError(f"alpha: expected a finite number >= 0, got {config.alpha!r}")
    Q = 1.0 / (A * config.decay) if config.Q is None else as_positive(config.Q, "Q")
    B, n, _ = coords.shape
    tau = torch.full((B, n * n), tau0, dtype=torch.float64)
    best_len, best_tours = torch.full((B,), float("inf")), torch.empty(B, n, dtype=torch.long)
    curve, decoded, valid, start = [], [], [], policy.decoded
    while policy.decoded - start < budget:
        # the decoder divides every score by T; the pheromone term is multiplied by T to stay undivided
        scale = T.double().view(B, 1) if torch.is_tensor(T) else T
        log_tau = (scale * config.alpha * tau.log()).float().view(B, n, n)
        out = _policy_decode(policy, coords, A, valid, temperature=T, edge_logits=log_tau, generator=generator)
        lengths = tour_length(coords, out.tours)
        best_len, best_tours = _keep_best(best_len, best_tours, out.tours, lengths)
        curve.append(best_len.clone())
        decoded.append(policy.decoded - start)
        low, high = lengths.min(1, keepdim=True).values, lengths.max(1, keepdim=True).values
        deposit = ((high - lengths) / (high - low).clamp_min(1e-12)).double() ** 2 * Q  # (B, A)
        edges = (out.tours[..., :-1] * n + out.tours[..., 1:]).reshape(B, -1)  # directed path edges
        per_edge = deposit.repeat_interleave(n - 1, 1)  # (B, A (n - 1)), aligned with edges
        tau = config.decay * tau + torch.zeros_like(tau).scatter_add_(1, edges, per_edge)
    return SearchResult(best_len, best_tours, torch.stack(curve, 1), decoded, policy.decoded - start, all(valid))


@torch.no_grad()
def tune_temperature(policy: AttentionPolicy, coords, budget: int, temperatures, *, seed: int = 0,
                     method: str = "sampling", config: NGSConfig | ACOConfig | None = None) -> dict:
    """Mean best-of-``budget`` length per temperature (lower is better) of one search on ``coords``.

    ``method``: ``"sampling"`` (one block of ``budget`` tours), ``"ngs"`` or ``"aco"`` (with
    ``config``, whose temperature is replaced; default: the official settings). All the
    temperatures run in one batch (the instances repeated once per temperature, each copy
    with its own temperature) from one seed, so each method gets the same tuning effort.
    """
    coords = check_coords(coords)
    budget = as_positive_int(budget, "budget")
    if method not in ("sampling", "ngs", "aco"):
        raise ValueError(f"method: expected 'sampling', 'ngs' or 'aco', got {method!r}")
    try:
        temps = [float(t) for t in temperatures]
    except (TypeError, ValueError):
        raise ValueError(f"temperatures: expected a sequence of numbers > 0, got {temperatures!r}") from None
    if not temps or len(set(temps)) != len(temps):
        raise ValueError(f"temperatures: expected at least one number and no repeats, got {temperatures!r}")
    for t in temps:
        as_positive(t, "temperatures")
    if config is not None and not isinstance(config, {"ngs": NGSConfig, "aco": ACOConfig}.get(method, type(None))):
        raise ValueError(f"config: expected {'an NGSConfig' if method == 'ngs' else 'an ACOConfig' if method == 'aco' else 'None'} "
                         f"for method {method!r}, got {type(config).__name__}")
    # every temperature in one batch: the instances repeated once per temperature
    B, k = coords.shape[0], len(temps)
    many, t = coords.repeat(k, 1, 1), torch.tensor(temps).repeat_interleave(B)
    gen = torch.Generator().manual_seed(seed)
    if method == "sampling":
        res = sample_search(policy, many, budget, temperature=t, block=budget, generator=gen)
    elif method == "ngs":
        res = ngs_search(policy, many, budget, replace(config or NGSConfig(), temperature=t), gen)
    else:
        res = aco_search(policy, many, budget, replace(config or ACOConfig(), temperature=t), gen)
    out = dict(zip(temps, res.best_len.view(k, B).mean(1).tolist()))
    return out
