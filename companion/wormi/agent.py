"""Rollouts, data sets, training and evaluation of WorMI on MiniHome.

Everything runs in lockstep batches: ``B`` episodes of one domain advance together, the
retrieval score of every episode is updated from its own transitions, and the policy acts on
all of them at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as fn

from ..validation import as_finite_tensor, as_positive_int, as_real
from .minihome import TASKS, A, Domain, blocked_by, goal_vectors, reached
from .models import CompoundAttention, Implant, ReasoningPolicy, WorldModel, world_features
from .retrieval import PrototypeIndex, abstract_transition, retrieve

H = 30  # horizon: the goal must hold within 30 actions
MODES = ("none", "retrieve", "random", "all", "average", "oracle")


@dataclass
class Episodes:
    """The state of ``B`` lockstep episodes in one domain (numpy, bool facts)."""

    domain: Domain
    tasks: list[str]
    s: np.ndarray
    g: np.ndarray
    prev_a: np.ndarray
    prev_eff: np.ndarray
    done: np.ndarray
    steps: np.ndarray
    dists: list = field(default_factory=list)  # per step (B, N): distance to each world's prototypes
    excluded: np.ndarray | None = None  # (B, N) bool: worlds this episode may not retrieve
    random_pick: np.ndarray | None = None  # (B, K): the worlds of random retrieval
    t: int = 0

    def __post_init__(self):
        if not isinstance(self.domain, Domain):
            raise ValueError(f"domain: expected a minihome Domain, got {type(self.domain).__name__}")

    @classmethod
    def start(cls, domain: Domain, n: int, seed: int) -> "Episodes":
        """``n`` episodes with tasks in turn and random start states (same ``seed``, same episodes)."""
        rng = np.random.default_rng(seed)
        tasks = [list(TASKS)[i % len(TASKS)] for i in range(n)]
        s = domain.initial_states(n, rng)
        g = goal_vectors(tasks)
        return cls(domain, tasks, s, g, np.full(n, -1), np.zeros(n, dtype=np.int64),
                   reached(s, g), np.zeros(n, dtype=np.int64))


def _tensors(ep: Episodes, device) -> tuple[torch.Tensor, ...]:
    as_f = lambda x: torch.as_tensor(x, dtype=torch.float32, device=device)  # noqa: E731
    as_l = lambda x: torch.as_tensor(x, dtype=torch.long, device=device)  # noqa: E731
    return as_f(ep.g), as_f(ep.s), as_l(ep.prev_a), as_l(ep.prev_eff)


def run(ep: Episodes, choose: Callable[[Episodes], np.ndarray], index: PrototypeIndex | None = None,
        record: Callable[[Episodes, np.ndarray, np.ndarray, np.ndarray], None] | None = None) -> Episodes:
    """Advance every episode until its goal holds or ``H`` actions are spent.

    ``choose(ep) -> (B,)`` actions; ``record(ep, a, s_next, changed)`` sees every step before it is
    applied; with an ``index`` each episode's retrieval score is updated from its transitions.
    """
    while ep.t < H and not ep.done.all():
        a = choose(ep)
        s_next, changed = ep.domain.step(ep.s, a)
        if record is not None:
            record(ep, a, s_next, changed)
        live = ~ep.done
        if index is not None:
            ep.dists.append(index.distances(abstract_transition(ep.s, a, s_next)))
        ep.s = np.where(live[:, None], s_next, ep.s)
        ep.prev_a = np.where(live, a, ep.prev_a)
        ep.prev_eff = np.where(live, changed.astype(np.int64), ep.prev_eff)
        ep.steps += live
        ep.done = ep.done | reached(ep.s, ep.g)
        ep.t += 1
    return ep


# --- the policies ----------------------------------------------------------------------------------


def _check_data(data) -> None:
    if not isinstance(data, dict) or not data:
        raise ValueError(f"data: expected demonstrations, a dict of arrays from expert_data, got {type(data).__name__}")


def library_features(library: list[WorldModel], s: torch.Tensor, g: torch.Tensor) -> list[torch.Tensor]:
    """Each world's four token features, stacked over the library: four tensors ``(B, N, .)``."""
    if not isinstance(library, (list, tuple)) or not all(isinstance(m, WorldModel) for m in library):
        raise ValueError("library: expected a list of WorldModel")
    outs = [world_features(m(s, g)) for m in library]
    return [torch.stack([o[i] for o in outs], 1) for i in range(4)]


def implanted_logits(pi_r: ReasoningPolicy, compose: CompoundAttention | Implant | None, g, s, prev_a, prev_eff,
                     worlds: list[torch.Tensor] | None, mask: torch.Tensor | None, layer: int = 0):
    """``pi_theta``: the policy's logits with the worlds implanted (eq. (wormi-gate)), and the world
    weights of the goal token ``(B, K)`` at the last connection.

    A :class:`CompoundAttention` is implanted after block ``layer``; an :class:`Implant` after each
    of its blocks."""
    if not isinstance(pi_r, ReasoningPolicy):
        raise ValueError(f"pi_r: expected a ReasoningPolicy, got {type(pi_r).__name__}")
    kept = {}
    if isinstance(compose, Implant):
        at = {b: compose.module(b) for b in compose.layers}
    else:
        at = {layer: compose}

    def inject(h, block):
        module = at.get(block)
        if module is None or worlds is None:
            return h
        h, beta = module(h, worlds, mask)
        kept["beta"] = beta[:, 0]
        return h

    logits = pi_r(g, s, prev_a, prev_eff, inject=inject)
    return logits, kept.get("beta")


class ImplantedPolicy:
    """The agent: a frozen ``pi_R``, a library of world models and a composition module.

    ``mode`` says which worlds are implanted at each step: ``"retrieve"`` (the top-``K`` of the
    prototype retrieval, eq. (wormi-retrieve), nothing before the first transition), ``"random"``
    (``K`` random worlds per episode, from the first transition on), ``"all"`` (every world),
    ``"average"`` (the mean of every world's features as one world), ``"oracle"`` (the library
    holds the test domain's own world model alone) or ``"none"`` (``pi_R`` alone).
    World models can be implanted and removed without touching the others (:meth:`implant`,
    :meth:`remove`).
    """

    def __init__(self, pi_r: ReasoningPolicy, compose: CompoundAttention | None, library: list[WorldModel],
                 prototypes: list[np.ndarray], K: int = 2, mode: str = "retrieve", seed: int = 0,
                 cover: bool = False):
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
        if len(library) != len(prototypes):
            raise ValueError(f"prototypes: expected one prototype set per world model ({len(library)}), "
                             f"got {len(prototypes)}")
        self.pi_r, self.compose, self.mode, self.K, self.cover = pi_r, compose, mode, K, cover
        self.library, self.prototypes = list(library), list(prototypes)
        self.index = PrototypeIndex(self.prototypes) if self.prototypes else None
        self.rng = np.random.default_rng(seed)
        self.trace: list[dict] = []

    def implant(self, world: WorldModel, prototypes: np.ndarray) -> int:
        """Add a world model (and its prototypes) to the library; returns its index."""
        index = PrototypeIndex(self.prototypes + [prototypes])  # checks them before the library changes
        self.library.append(world)
        self.prototypes.append(prototypes)
        self.index = index
        return len(self.library) - 1

    def remove(self, j: int) -> WorldModel:
        """Take world model ``j`` out of the library; the others are untouched."""
        world = self.library.pop(j)
        self.prototypes.pop(j)
        self.index = PrototypeIndex(self.prototypes) if self.prototypes else None
        return world

    def chosen(self, ep: Episodes) -> tuple[np.ndarray, np.ndarray]:
        """The implanted worlds ``(B, K')`` and which are present ``(B, K')`` at this step."""
        B, N = len(ep.s), len(self.library)
        if self.mode in ("all", "oracle", "average"):
            return np.tile(np.arange(N), (B, 1)), np.ones((B, N), dtype=bool)
        K = min(self.K, N)
        present = np.full((B, K), ep.t > 0)
        if self.mode == "random":
            if ep.random_pick is None:
                ep.random_pick = np.stack([self.rng.choice(N, K, replace=False) for _ in range(B)])
            return ep.random_pick, present
        if ep.t == 0:
            return np.tile(np.arange(K), (B, 1)), present
        return retrieve(np.stack(ep.dists, 1), K, ep.excluded, cover=self.cover), present

    @torch.no_grad()
    def __call__(self, ep: Episodes) -> np.ndarray:
        device = next(self.pi_r.parameters()).device
        g, s, prev_a, prev_eff = _tensors(ep, device)
        if self.mode == "none":
            logits, beta, idx = self.pi_r(g, s, prev_a, prev_eff), None, None
        else:
            idx, present = self.chosen(ep)
            worlds, mask = select_worlds(library_features(self.library, s, g), idx, present,
                                         average=self.mode == "average")
            logits, beta = implanted_logits(self.pi_r, self.compose, g, s, prev_a, prev_eff, worlds, mask)
        self.trace.append({"t": ep.t, "live": ~ep.done, "chosen": idx,
                           "present": None if idx is None else mask.cpu().numpy(),
                           "beta": None if beta is None else beta.cpu().numpy()})
        return logits.argmax(-1).cpu().numpy()


class WorldModelPolicy:
    """A world model acting alone on its behaviour-cloning head (a diagnostic: what it knows)."""

    def __init__(self, world: WorldModel):
        self.world = world

    @torch.no_grad()
    def __call__(self, ep: Episodes) -> np.ndarray:
        device = next(self.world.parameters()).device
        g, s, _, _ = _tensors(ep, device)
        return self.world(s, g)["bc"].argmax(-1).cpu().numpy()


def select_worlds(features: list[torch.Tensor], idx: np.ndarray, present: np.ndarray,
                  average: bool = False) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The features of the chosen worlds ``(B, K, .)`` and their mask; ``average`` makes the mean
    over the whole library a single world (the naive-fusion baseline)."""
    for i, f in enumerate(features):
        as_finite_tensor(f, f"features[{i}]", ndim=3)
    device = features[0].device
    if average:
        return [f.mean(1, keepdim=True) for f in features], torch.ones(len(idx), 1, dtype=torch.bool,
                                                                         device=device)
    index = torch.as_tensor(idx, dtype=torch.long, device=device)
    picked = [f.gather(1, index[..., None].expand(-1, -1, f.shape[-1])) for f in features]
    return picked, torch.as_tensor(present, dtype=torch.bool, device=device)


# --- data --------------------------------------------------------------------------------------------


def collect(domain: Domain, episodes: int, seed: int, mix: tuple[float, float] = (0.7, 0.0),
            agent: Callable | None = None, index: PrototypeIndex | None = None, own: int | None = None,
            K: int = 2, drop: float = 0.3, subset: int | None = None) -> dict[str, np.ndarray]:
    """Visited states of a mixture policy, labelled by the expert of ``domain``.

    Per step the expert acts with probability ``mix[0]``, ``agent(ep)`` with probability
    ``mix[1]`` and a random action otherwise. Each step also stores the ``K`` worlds the
    composition module will see there (all but the first are dropped with probability ``drop``,
    so the module also learns to use fewer worlds):

    - with ``subset = N`` (the library's size), the official recipe: world ``own`` (this domain's
      world model) and ``K - 1`` other worlds drawn at random per episode;
    - with an ``index``, the worlds retrieved from the trajectory so far, world ``own`` excluded
      from retrieval in half of the episodes (the first pass of the chapter).
    """
    if len(mix) != 2 or sum(as_real(p, "mix", low=0, high=1) for p in mix) > 1:
        raise ValueError(f"mix: expected (p_expert, p_agent) >= 0 with a sum <= 1, got {mix}")
    as_real(drop, "drop", low=0, high=1)
    if mix[1] > 0 and agent is None:
        raise ValueError("agent: mix gives the agent a share of the steps, so an agent is needed")
    if subset is not None and (own is None or not 0 <= own < subset or not 1 <= K <= subset):
        raise ValueError(f"subset: expected the library size N > own and >= K, got N={subset}, own={own}, K={K}")
    rng = np.random.default_rng(seed)
    ep = Episodes.start(domain, episodes, seed)
    picks = None
    if subset is not None:
        others = [j for j in range(subset) if j != own]
        picks = np.stack([np.r_[own, rng.choice(others, K - 1, replace=False)] for _ in range(episodes)])
    if index is not None and own is not None:
        ep.excluded = np.zeros((episodes, len(index)), dtype=bool)
        ep.excluded[:, own] = rng.random(episodes) < 0.5
    rows: dict[str, list] = {k: [] for k in ("g", "s", "prev_a", "prev_eff", "a", "s_next", "afforded",
                                             "expert", "chosen", "present")}

    def choose(ep):
        expert = ep.domain.expert(ep.s, ep.tasks)
        ep.cache = expert
        u = rng.random(len(ep.s))
        a = np.where(u < mix[0] + mix[1], agent(ep) if mix[1] > 0 else 0, rng.integers(0, A, len(ep.s)))
        return np.where((u < mix[0]) & (expert >= 0), expert, a)

    def keep(ep, a, s_next, changed):
        live = ~ep.done & (ep.cache >= 0)
        for key, value in (("g", ep.g), ("s", ep.s), ("prev_a", ep.prev_a), ("prev_eff", ep.prev_eff),
                           ("a", a), ("s_next", s_next), ("afforded", ep.domain.afforded(ep.s)),
                           ("expert", ep.cache)):
            rows[key].append(value[live])
        if index is not None or picks is not None:
            if picks is not None:
                chosen = picks
            else:
                chosen = retrieve(np.stack(ep.dists, 1), K, ep.excluded) if ep.t else np.zeros((len(live), K), int)
            present = np.full((len(live), K), ep.t > 0)
            present[:, 1:] &= rng.random((len(live), K - 1)) >= drop  # world dropout: K' < K too
            rows["chosen"].append(chosen[live])
            rows["present"].append(present[live])

    run(ep, choose, index, keep)
    return {k: np.concatenate(v) for k, v in rows.items() if v}


def _batches(n: int, batch: int, epochs: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        yield from (perm[i:i + batch] for i in range(0, n, batch))


def _torch(data: dict[str, np.ndarray], keys, device) -> dict[str, torch.Tensor]:
    out = {}
    for k in keys:
        x = torch.as_tensor(data[k], device=device)
        out[k] = x.float() if x.dtype == torch.bool and k not in ("present",) else x
    return out


def train_reasoning(data: dict[str, np.ndarray], epochs: int = 30, batch: int = 128, seed: int = 0,
                    device="cpu") -> ReasoningPolicy:
    """Behaviour cloning of ``pi_R`` on the base domain; returned frozen (eval mode, no grad)."""
    _check_data(data)
    for name, value in (("epochs", epochs), ("batch", batch)):
        as_positive_int(value, name)
    torch.manual_seed(seed)
    pi_r = ReasoningPolicy().to(device)
    t = _torch(data, ("g", "s", "prev_a", "prev_eff", "expert"), device)
    opt = torch.optim.Adam(pi_r.parameters(), lr=1e-3)
    for i in _batches(len(t["s"]), batch, epochs, seed):
        loss = fn.cross_entropy(pi_r(t["g"][i], t["s"][i], t["prev_a"][i], t["prev_eff"][i]), t["expert"][i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return pi_r.eval().requires_grad_(False)


def train_world_model(data: dict[str, np.ndarray], epochs: int = 40, batch: int = 128, seed: int = 0,
                      width: int = 64, device="cpu", init: WorldModel | None = None) -> WorldModel:
    """Train ``M_j`` on its own domain's transitions with eq. (wormi-world-loss); returned frozen.

    ``init``: start from this world model's weights (the shared pretrained world model, so that
    every world's hidden features live in one space, as fine-tunes of one language model do)."""
    torch.manual_seed(seed)
    model = WorldModel(width).to(device)
    if init is not None:
        if init.width != width:
            raise ValueError(f"init: expected a world model of width {width}, got {init.width}")
        model.load_state_dict(init.state_dict())
        model.requires_grad_(True)
    t = _torch(data, ("s", "g", "a", "s_next", "afforded", "expert"), device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for i in _batches(len(t["s"]), batch, epochs, seed):
        loss = model.loss(t["s"][i], t["g"][i], t["a"][i], t["s_next"][i], t["afforded"][i], t["expert"][i])
        opt.zero_grad()
        loss["total"].backward()
        opt.step()
    return model.eval().requires_grad_(False)


def train_composition(pi_r: ReasoningPolicy, library: list[WorldModel], data: dict[str, np.ndarray],
                      average: bool = False, epochs: int = 3, batch: int = 64, lr: float = 1e-3,
                      seed: int = 0, device="cpu", layers: tuple[int, ...] = (0,)
                      ) -> tuple[Implant, list[float]]:
    """Behaviour cloning of ``C_theta`` with ``pi_R`` and the world models frozen; each sample
    implants the worlds its own trajectory retrieved (or, with ``average``, the library's mean),
    after each block in ``layers``."""
    if not isinstance(pi_r, ReasoningPolicy):
        raise ValueError(f"pi_r: expected a ReasoningPolicy, got {type(pi_r).__name__}")
    if not isinstance(library, (list, tuple)) or not library or not all(isinstance(m, WorldModel) for m in library):
        raise ValueError("library: expected a non-empty list of WorldModel")
    _check_data(data)
    torch.manual_seed(seed)
    compose = Implant(pi_r.d, library[0].width, layers=layers).to(device)
    t = _torch(data, ("g", "s", "prev_a", "prev_eff", "expert", "chosen", "present"), device)
    with torch.no_grad():  # the world models are frozen: their features are computed once
        parts = [library_features(library, t["s"][j:j + 4096], t["g"][j:j + 4096])
                 for j in range(0, len(t["s"]), 4096)]
        every = [torch.cat([p[k] for p in parts]) for k in range(4)]
    opt = torch.optim.Adam(compose.parameters(), lr=lr)
    losses = []
    for i in _batches(len(t["s"]), batch, epochs, seed):
        feats = [f[i] for f in every]
        worlds, mask = select_worlds(feats, t["chosen"][i].cpu().numpy(), t["present"][i].cpu().numpy(),
                                     average=average)
        logits, _ = implanted_logits(pi_r, compose, t["g"][i], t["s"][i], t["prev_a"][i], t["prev_eff"][i],
                                     worlds, mask)
        loss = fn.cross_entropy(logits, t["expert"][i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return compose.eval().requires_grad_(False), losses


# --- evaluation ----------------------------------------------------------------------------------------


def evaluate(policy, domain: Domain, n: int = 60, seed: int = 0) -> tuple[pd.DataFrame, Episodes]:
    """Run ``n`` episodes (the same ones for every policy given the same ``seed``).

    Returns one row per episode (task, success, steps) and the finished episodes, which keep
    every step's states, actions, effects and blocking modifiers (``states``, ``actions``,
    ``changed``, ``blocked``).
    """
    as_positive_int(n, "n")
    ep = Episodes.start(domain, n, seed)
    index = getattr(policy, "index", None)
    if getattr(policy, "trace", None) is not None:
        policy.trace = []
    ep.blocked, ep.states, ep.actions, ep.changed, ep.inputs = [], [], [], [], []

    def keep(e, a, s_next, changed):
        e.inputs.append((e.prev_a.copy(), e.prev_eff.copy(), ~e.done))
        e.blocked.append(blocked_by(e.domain, e.s, a))
        e.states.append(e.s.copy())
        e.actions.append(a)
        e.changed.append(changed)

    run(ep, policy, index, keep)
    frame = pd.DataFrame({"task": ep.tasks, "success": ep.done, "steps": ep.steps})
    return frame, ep


def retrieval_precision(policy: ImplantedPolicy, ep: Episodes, carries: list[frozenset]) -> float:
    """Share of steps, after a modifier first blocked an action, at which a retrieved world carries it.

    Averaged over every (episode, modifier) pair whose modifier was revealed before the episode
    ended; ``carries[j]`` is the set of modifiers of world ``j``'s training domain.
    """
    if not isinstance(policy, ImplantedPolicy):
        raise ValueError(f"policy: expected an ImplantedPolicy, got {type(policy).__name__}")
    if not isinstance(ep, Episodes):
        raise ValueError(f"ep: expected the Episodes the policy ran, got {type(ep).__name__}")
    hits = []
    for b in range(len(ep.s)):
        for m in ep.domain.modifiers:
            seen = [t for t, blocked in enumerate(ep.blocked) if m in blocked[b]]
            if not seen:
                continue
            steps = [tr for tr in policy.trace if tr["t"] > seen[0] and tr["live"][b]]
            hits += [any(m in carries[j] for j, p in zip(tr["chosen"][b], tr["present"][b]) if p)
                     for tr in steps]
    return float(np.mean(hits)) if hits else float("nan")


def revealed_rules(ep: Episodes) -> int:
    """How many (episode, modifier) pairs saw the modifier block an action the base rules allow
    (the pairs over which :func:`retrieval_precision` can be measured)."""
    if not hasattr(ep, "blocked"):
        raise ValueError("ep: expected finished episodes from evaluate() (they keep what blocked each step)")
    return int(sum(any(m in blocked[b] for blocked in ep.blocked)
                   for b in range(len(ep.s)) for m in ep.domain.modifiers))


@torch.no_grad()
def composition_report(pi_r: ReasoningPolicy, compose: Implant, world: WorldModel, ep: Episodes) -> dict:
    """What one implanted world model passes into the policy, over the live steps of ``ep``.

    ``follow``: at the steps where the world's behaviour-cloning head and ``pi_R`` alone disagree,
    the share at which the implanted policy takes the world's action (``disagree`` such steps);
    ``residual``: per connection, ``|H' - H| / |H|`` of the goal token; ``attention``: the share of
    the goal token's attention on each of the world's four tokens (h1, h2, affordance, action)
    at the last connection.
    """
    if not getattr(ep, "inputs", None):
        raise ValueError("ep: expected finished episodes from evaluate() (they keep every step's inputs)")
    device = next(pi_r.parameters()).device
    rows = [(st[live], ep.g[live], pa[live], pe[live]) for st, (pa, pe, live) in zip(ep.states, ep.inputs)]
    s, g, prev_a, prev_eff = (np.concatenate(x) for x in zip(*rows))
    as_f = lambda x: torch.as_tensor(x, dtype=torch.float32, device=device)  # noqa: E731
    s, g = as_f(s), as_f(g)
    prev_a, prev_eff = (torch.as_tensor(x, dtype=torch.long, device=device) for x in (prev_a, prev_eff))
    worlds, mask = select_worlds(library_features([world], s, g), np.zeros((len(s), 1), dtype=int),
                                 np.ones((len(s), 1), dtype=bool))
    residual, attention = {}, None

    def inject(h, block):
        nonlocal attention
        module = compose.module(block)
        if module is None:
            return h
        out, _ = module(h, worlds, mask)
        residual[block] = float(((out - h)[:, 0].norm(dim=-1) / h[:, 0].norm(dim=-1)).mean())
        attention = module.token_attention[:, 0, 0].mean(0).cpu().numpy()
        return out

    implanted = pi_r(g, s, prev_a, prev_eff, inject=inject).argmax(-1)
    plain = pi_r(g, s, prev_a, prev_eff).argmax(-1)
    own = world(s, g)["bc"].argmax(-1)
    disagree = own != plain
    follow = float((implanted == own)[disagree].float().mean()) if bool(disagree.any()) else float("nan")
    return {"follow": follow, "disagree": int(disagree.sum()), "steps": len(s), "residual": residual,
            "attention": attention}
