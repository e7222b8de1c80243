"""MiniHome: a symbolic household whose dynamics can be changed by rule modifiers.

A state is a vector of ``F`` binary facts, an action one of ``A`` symbolic actions with
preconditions and effects (STRIPS style); an action whose preconditions fail leaves the state
unchanged. A *modifier* adds one precondition to one action (``lock``: the fridge needs the key),
so a domain is the base rules plus a set of modifiers. The expert is a goal-regression planner
that works from any state, so every visited state gets a label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FACTS = (
    "at_kitchen", "at_living", "at_bedroom", "hold_food", "hold_key", "hold_plate", "hold_remote",
    "fridge_open", "food_in_fridge", "microwave_open", "food_in_microwave", "food_hot",
    "cabinet_open", "plate_in_cabinet", "plate_clean", "food_on_plate", "drawer_open",
    "key_in_drawer", "wall_switch_on", "light_on", "tv_on", "remote_on_sofa",
    "bedroom_door_open", "microwave_wiped",
)
ROOMS = ("at_kitchen", "at_living", "at_bedroom")
# name: (preconditions that must hold, facts that must be false, facts added, facts deleted);
# every action changes the state when it applies, so "afforded" means "changes the state"
_BASE = {
    "walk_kitchen": ((), ("at_kitchen",), ("at_kitchen",), ("at_living", "at_bedroom")),
    "walk_living": ((), ("at_living",), ("at_living",), ("at_kitchen", "at_bedroom")),
    "walk_bedroom": ((), ("at_bedroom",), ("at_bedroom",), ("at_kitchen", "at_living")),
    "open_fridge": (("at_kitchen",), ("fridge_open",), ("fridge_open",), ()),
    "close_fridge": (("at_kitchen", "fridge_open"), (), (), ("fridge_open",)),
    "grab_food": (("fridge_open", "food_in_fridge", "at_kitchen"), (), ("hold_food",),
                  ("food_in_fridge",)),
    "open_microwave": (("at_kitchen",), ("microwave_open",), ("microwave_open",), ()),
    "close_microwave": (("at_kitchen", "microwave_open"), (), (), ("microwave_open",)),
    "put_food_microwave": (("microwave_open", "hold_food", "at_kitchen"), (),
                           ("food_in_microwave",), ("hold_food",)),
    "switch_on_microwave": (("food_in_microwave", "at_kitchen"), ("microwave_open", "food_hot"),
                            ("food_hot",), ()),
    "take_food_microwave": (("microwave_open", "food_in_microwave", "at_kitchen"), (),
                            ("hold_food",), ("food_in_microwave",)),
    "open_cabinet": (("at_kitchen",), ("cabinet_open",), ("cabinet_open",), ()),
    "grab_plate": (("cabinet_open", "plate_in_cabinet", "at_kitchen"), (), ("hold_plate",),
                   ("plate_in_cabinet",)),
    "put_food_plate": (("hold_plate", "hold_food", "at_kitchen"), ("food_on_plate",),
                       ("food_on_plate",), ("hold_food",)),
    "wash_plate": (("hold_plate", "at_kitchen"), ("plate_clean", "food_on_plate"),
                   ("plate_clean",), ()),
    "open_drawer": (("at_bedroom",), ("drawer_open",), ("drawer_open",), ()),
    "grab_key": (("drawer_open", "key_in_drawer", "at_bedroom"), (), ("hold_key",),
                 ("key_in_drawer",)),
    "flip_wall_switch": (("at_kitchen",), ("wall_switch_on",), ("wall_switch_on",), ()),
    "turn_on_light": (("at_kitchen",), ("light_on",), ("light_on",), ()),
    "grab_remote": (("remote_on_sofa", "at_living"), (), ("hold_remote",), ("remote_on_sofa",)),
    "turn_on_tv": (("at_living",), ("tv_on",), ("tv_on",), ()),
    "open_bedroom_door": (("at_living",), ("bedroom_door_open",), ("bedroom_door_open",), ()),
    "wipe_microwave": (("at_kitchen",), ("microwave_wiped",), ("microwave_wiped",), ()),
}
ACTIONS = tuple(_BASE)
F, A = len(FACTS), len(ACTIONS)
FACT, ACTION = {f: i for i, f in enumerate(FACTS)}, {a: i for i, a in enumerate(ACTIONS)}
# modifier: (action, the precondition it adds)
MODIFIERS = {
    "lock": ("open_fridge", "hold_key"),
    "power": ("switch_on_microwave", "wall_switch_on"),
    "dirty": ("put_food_plate", "plate_clean"),
    "dark": ("grab_food", "light_on"),
    "remote": ("turn_on_tv", "hold_remote"),
    "door": ("walk_bedroom", "bedroom_door_open"),
    "wipe": ("put_food_microwave", "microwave_wiped"),
}
_DARK_TOO = ("grab_plate", "light_on")  # "dark" hides the plate as well as the food
# goal facts, in the order the expert achieves them
TASKS = {
    "heat_food": ("food_hot",),
    "serve_food": ("food_on_plate",),
    "serve_hot": ("food_hot", "food_on_plate"),
    "watch_tv": ("tv_on", "at_living"),
}
_OPENABLE = ("fridge_open", "microwave_open", "cabinet_open", "drawer_open")


def _mask(names) -> np.ndarray:
    m = np.zeros(F, dtype=bool)
    m[[FACT[n] for n in names]] = True
    return m


@dataclass(frozen=True)
class Domain:
    """The base rules of MiniHome plus a set of modifiers (``Domain({"lock", "power"})``)."""

    modifiers: frozenset = field(default_factory=frozenset)

    def __post_init__(self):
        mods = frozenset(self.modifiers)
        unknown = sorted(mods - set(MODIFIERS))
        if unknown:
            raise ValueError(f"modifiers: unknown {unknown}; expected a subset of {sorted(MODIFIERS)}")
        object.__setattr__(self, "modifiers", mods)
        rules = {a: [list(r) for r in rule] for a, rule in _BASE.items()}
        for m in mods:
            for action, fact in _rules_of(m):
                rules[action][0].insert(0, fact)  # a non-location precondition, achieved first
        self._set("rules", {a: tuple(tuple(x) for x in r) for a, r in rules.items()})
        self._set("pre", np.stack([_mask(rules[a][0]) for a in ACTIONS]))
        self._set("pre_false", np.stack([_mask(rules[a][1]) for a in ACTIONS]))
        self._set("add", np.stack([_mask(rules[a][2]) for a in ACTIONS]))
        self._set("delete", np.stack([_mask(rules[a][3]) for a in ACTIONS]))
        self._set("_plans", {})

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    @property
    def name(self) -> str:
        return "+".join(sorted(self.modifiers)) or "base"

    # --- dynamics ------------------------------------------------------------------------------

    def afforded(self, s: np.ndarray) -> np.ndarray:
        """``(B, A)`` bool: which actions change each state ``s`` ``(B, F)``."""
        s = check_states(s)
        return (s[:, None, :] | ~self.pre).all(-1) & ~(s[:, None, :] & self.pre_false).any(-1)

    def step(self, s: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Next states ``(B, F)`` and whether each action changed its state ``(B,)``."""
        s = check_states(s)
        a = check_actions(a, len(s))
        changed = self.afforded(s)[np.arange(len(s)), a]
        nxt = (s | self.add[a]) & ~self.delete[a]
        return np.where(changed[:, None], nxt, s), changed

    def initial_states(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` random start states: a random room, each container open w.p. 1/4, the plate dirty
        (the same start distribution in every domain: only the rules differ)."""
        s = np.zeros((n, F), dtype=bool)
        s[np.arange(n), rng.integers(0, 3, n)] = True
        for name in ("food_in_fridge", "plate_in_cabinet", "key_in_drawer", "remote_on_sofa"):
            s[:, FACT[name]] = True
        for name in _OPENABLE:
            s[:, FACT[name]] = rng.random(n) < 0.25
        return s

    # --- the expert ------------------------------------------------------------------------------

    def expert(self, s: np.ndarray, tasks) -> np.ndarray:
        """The expert's action for each state and task, ``(B,)``; -1 where no plan exists."""
        s = check_states(s)
        tasks = list(tasks) if not isinstance(tasks, str) else [tasks]
        if len(tasks) != len(s):
            raise ValueError(f"tasks: expected one task per state ({len(s)} states), got {len(tasks)}")
        unknown = sorted(set(tasks) - set(TASKS))
        if unknown:
            raise ValueError(f"tasks: unknown {unknown}; expected names from {sorted(TASKS)}")
        out = np.empty(len(s), dtype=np.int64)
        for i, (row, task) in enumerate(zip(s, tasks)):
            key = (task, row.tobytes())
            if key not in self._plans:
                self._plans[key] = self._plan(row, TASKS[task])
            out[i] = self._plans[key]
        return out

    def _plan(self, s: np.ndarray, goal: tuple[str, ...]) -> int:
        for fact in goal:
            if not s[FACT[fact]]:
                a = self._achieve(s, fact, True, frozenset())
                return -1 if a is None else a
        return -1  # the goal holds: nothing to do

    def _achieve(self, s, fact: str, value: bool, stack: frozenset):
        """First action of a plan that makes ``fact == value`` (goal regression), or None."""
        if (fact, value) in stack:
            return None
        stack = stack | {(fact, value)}
        producers = [a for a in ACTIONS if fact in self.rules[a][2 if value else 3]]
        for a in producers:
            pre, pre_false = self.rules[a][0], self.rules[a][1]
            unmet = [(f, True) for f in pre if not s[FACT[f]] and f not in ROOMS]
            unmet += [(f, False) for f in pre_false if s[FACT[f]]]
            unmet += [(f, True) for f in pre if not s[FACT[f]] and f in ROOMS]  # walk last
            if any(v and not _producible(f) for f, v in unmet):
                continue  # e.g. grab_food once the food has left the fridge
            if not unmet:
                return ACTION[a]
            return self._achieve(s, *unmet[0], stack)
        return None


def _producible(fact: str) -> bool:
    return any(fact in rule[2] for rule in _BASE.values())


BASE = Domain()


def goal_vectors(tasks) -> np.ndarray:
    """``(B, F)`` bool: the goal facts of each task."""
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown:
        raise ValueError(f"tasks: unknown {unknown}; expected names from {sorted(TASKS)}")
    return np.stack([_mask(TASKS[t]) for t in tasks])


def reached(s: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``(B,)`` bool: every goal fact holds (a strict conjunction)."""
    s, g = check_states(s), np.asarray(g)
    if g.shape != s.shape or g.dtype != bool:
        raise ValueError(f"g: expected bool goals of the states' shape {s.shape}, got {g.dtype} {g.shape}")
    return (s | ~g).all(-1)


def blocked_by(domain: Domain, s: np.ndarray, a: np.ndarray) -> list[frozenset]:
    """For each transition, the modifiers of ``domain`` that blocked an action the base rules
    allow (the informative failures that reveal a modifier)."""
    s, a = check_states(s), check_actions(a, len(s))
    base_ok = BASE.afforded(s)[np.arange(len(s)), a]
    out = []
    for row, act, ok in zip(s, a, base_ok):
        out.append(frozenset(m for m in domain.modifiers if ok and any(
            act == ACTION[x] and not row[FACT[f]] for x, f in _rules_of(m))))
    return out


def _rules_of(modifier: str):
    return (MODIFIERS[modifier], _DARK_TOO) if modifier == "dark" else (MODIFIERS[modifier],)


def check_states(s) -> np.ndarray:
    """``s`` as a ``(B, F)`` bool array of 0/1 facts, or ``ValueError``."""
    arr = np.asarray(s)
    if arr.ndim != 2 or arr.shape[1] != F:
        raise ValueError(f"s: expected shape (B, {F}) of 0/1 facts, got {arr.shape}")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.isin(arr, (0, 1)).all():
            raise ValueError("s: facts must be 0 or 1 (no NaN, no other values)")
        arr = arr.astype(bool)
    return arr


def check_actions(a, batch: int) -> np.ndarray:
    """``a`` as ``(B,)`` int64 action indices in ``[0, A)``, or ``ValueError``."""
    arr = np.asarray(a)
    if arr.shape != (batch,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"a: expected {batch} integer actions (shape ({batch},)), got "
                         f"{arr.dtype} of shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= A):
        raise ValueError(f"a: action indices must lie in [0, {A}), got {arr.min()}..{arr.max()}")
    return arr.astype(np.int64)
