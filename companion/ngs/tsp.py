"""The travelling salesman problem: instances, tour lengths, validity, exact optima.

Shapes: ``B`` instances, ``S`` tours per instance, ``n`` nodes. Coordinates are float32
``(B, n, 2)`` in the unit square; a tour is a ``LongTensor`` permutation of ``0..n-1``
(``(B, S, n)``), visited in order and closed back to its first node.

Exact optima come from three solvers: :func:`held_karp`, the textbook dynamic programme
(eq. (ngs-held-karp) of the chapter; our own, for teaching, n <= 16 or so);
:func:`solve_exact`, OR-Tools' CP-SAT with a circuit constraint (n = 20 in a second);
and :func:`solve_mip`, the edge formulation with subtour cuts added until the solution is
one tour, solved by HiGHS through :func:`scipy.optimize.milp` (n = 100 in seconds to a
minute). The tests check them against each other. The optima of the chapter's fixed test
sets are shipped in ``companion/ngs/data/`` (see :func:`reference_solutions`), computed once by
``python -m companion.ngs.tsp <test set>``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from companion.validation import as_positive

__all__ = [
    "generate_tsp",
    "check_coords",
    "tour_length",
    "is_permutation",
    "check_tours",
    "held_karp",
    "solve_exact",
    "solve_mip",
    "reference_solutions",
    "TEST_SETS",
]

DATA = Path(__file__).parent / "data"
# The fixed test sets of the chapter: name -> (number of instances, nodes, generator seed, solver)
TEST_SETS = {
    "tsp20_seed1234": (32, 20, 1234, "cp-sat"),
    "tsp50_seed1234": (32, 50, 1234, "mip"),
}


def generate_tsp(num: int, n: int, seed: int) -> torch.Tensor:
    """``num`` instances of ``n`` cities drawn uniformly in the unit square, float32 ``(num, n, 2)``."""
    for name, value, low in (("num", num, 1), ("n", n, 3)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name}: expected an integer >= {low}, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    gen = torch.Generator().manual_seed(int(seed))
    return torch.rand(int(num), int(n), 2, generator=gen)


def check_coords(coords, name: str = "coords") -> torch.Tensor:
    """Return ``coords`` as a float32 tensor of shape ``(B, n, 2)`` with n >= 3 and finite entries."""
    if not isinstance(coords, torch.Tensor):
        try:
            coords = torch.as_tensor(np.asarray(coords, dtype=np.float32))
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a (B, n, 2) array of coordinates, got {type(coords).__name__}") from None
    if coords.ndim != 3 or coords.shape[-1] != 2:
        raise ValueError(f"{name}: expected shape (B, n, 2) (a batch of 2-D cities), got {tuple(coords.shape)}")
    if coords.shape[0] < 1 or coords.shape[1] < 3:
        raise ValueError(f"{name}: need at least one instance of at least 3 cities, got shape {tuple(coords.shape)}")
    if not torch.isfinite(coords).all():
        raise ValueError(f"{name}: coordinates must be finite (found nan or inf)")
    return coords.float()


def _as_tours(tours) -> torch.Tensor:
    """``tours`` as an int64 tensor: torch or numpy integer arrays are accepted, anything else refused."""
    if isinstance(tours, np.ndarray):
        if not np.issubdtype(tours.dtype, np.integer):
            raise ValueError(f"tours: expected integer city indices, got a numpy array of dtype {tours.dtype}")
        return torch.from_numpy(tours.astype(np.int64))
    if not isinstance(tours, torch.Tensor):
        raise ValueError(f"tours: expected a (B, S, n) integer tensor or numpy array, got {type(tours).__name__}")
    if tours.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise ValueError(f"tours: expected integer city indices, got a tensor of dtype {tours.dtype}")
    return tours.long()


def tour_length(coords: torch.Tensor, tours: torch.Tensor) -> torch.Tensor:
    """Length of closed tours: coords ``(B, n, 2)``, tours ``(B, S, n)`` -> ``(B, S)``.

    L(pi) = sum_t || x_{pi_t} - x_{pi_{t+1}} ||, with pi_{n+1} = pi_1 (eq. (ngs-length)).
    Every row of ``tours`` must be a permutation of ``0..n-1`` (a repeated city would make a
    "tour" shorter than any real one); torch and numpy integer arrays are accepted.
    """
    coords = check_coords(coords)
    tours = _as_tours(tours).to(coords.device)
    if tours.ndim != 3 or tours.shape[0] != coords.shape[0] or tours.shape[2] != coords.shape[1]:
        raise ValueError(f"tours: expected shape (B, S, n) = ({coords.shape[0]}, S, {coords.shape[1]}), "
                         f"got {tuple(tours.shape)}")
    check_tours(tours, coords.shape[1])
    B, S, n = tours.shape
    idx = tours.reshape(B, S * n, 1).expand(B, S * n, 2)
    xy = coords.gather(1, idx).reshape(B, S, n, 2)
    return (xy - xy.roll(-1, dims=2)).norm(dim=-1).sum(-1)


def is_permutation(tours: torch.Tensor, n: int) -> torch.Tensor:
    """Boolean ``tours.shape[:-1]``: does each row visit every node of ``0..n-1`` exactly once?"""
    if not isinstance(tours, torch.Tensor) or tours.dtype.is_floating_point or tours.dtype == torch.bool:
        raise ValueError(f"tours: expected an integer tensor of city indices, got "
                         f"{getattr(tours, 'dtype', type(tours).__name__)}")
    if tours.shape[-1] != n:
        return torch.zeros(tours.shape[:-1], dtype=torch.bool)
    in_range = ((tours >= 0) & (tours < n)).all(-1)
    sorted_ = tours.clamp(0, n - 1).sort(-1).values
    return in_range & (sorted_ == torch.arange(n, device=tours.device)).all(-1)


def check_tours(tours: torch.Tensor, n: int) -> None:
    """Raise ``ValueError`` unless every row of ``tours`` is a permutation of ``0..n-1``."""
    tours = _as_tours(tours)
    ok = is_permutation(tours, n)
    if not ok.all():
        bad = tuple(int(i) for i in (~ok).nonzero()[0])
        raise ValueError(f"tours: row {bad} is not a permutation of 0..{n - 1}: {tours[bad].tolist()}")


def _distances(coords) -> np.ndarray:
    xy = np.asarray(coords, dtype=np.float64)
    if xy.ndim != 2 or xy.shape[1] != 2 or xy.shape[0] < 3 or not np.isfinite(xy).all():
        raise ValueError(f"coords: expected one instance, a finite (n, 2) array with n >= 3, got shape {xy.shape}")
    return np.sqrt(((xy[:, None, :] - xy[None, :, :]) ** 2).sum(-1))


def held_karp(coords, *, max_n: int = 20) -> tuple[float, np.ndarray]:
    """Exact shortest tour of one instance ``(n, 2)`` by dynamic programming over subsets.

    Fix city 0 as the start. C(S, j) is the shortest path that leaves 0, visits the set S of
    other cities and ends at j in S:  C(S, j) = min_{k in S \\ {j}} C(S \\ {j}, k) + d_kj,
    C({j}, j) = d_0j; the tour is min_j C(all, j) + d_j0 (eq. (ngs-held-karp)).
    Time O(2^n n^2), memory O(2^n n): fine to n ~ 16, slow beyond 20. Returns (length, tour).
    """
    d = _distances(coords)
    n = d.shape[0]
    if n > max_n:
        raise ValueError(f"coords: Held-Karp needs 2^(n-1) (n-1) memory; n = {n} > max_n = {max_n}")
    m = n - 1  # cities 1..n-1 are bits 0..m-1
    full = (1 << m) - 1
    cost = np.full((1 << m, m), np.inf)
    back = np.zeros((1 << m, m), dtype=np.int8)
    cost[1 << np.arange(m), np.arange(m)] = d[0, 1:]
    masks = np.arange(1 << m)
    popcount = np.array([bin(s).count("1") for s in range(1 << m)]) if m <= 12 else \
        np.unpackbits(masks.astype(">u4").view(np.uint8).reshape(-1, 4), axis=1).sum(1)
    dm = d[1:, 1:]
    for size in range(2, m + 1):
        level = masks[popcount == size]
        for j in range(m):
            sets = level[(level >> j) & 1 == 1]
            prev = cost[sets ^ (1 << j)] + dm[:, j]  # (|sets|, m): arrive at j from k
            back[sets, j] = prev.argmin(1)
            cost[sets, j] = prev.min(1)
    last = int(np.argmin(cost[full] + d[1:, 0]))
    length = float(cost[full, last] + d[last + 1, 0])
    tour, s, j = [], full, last
    while s:
        tour.append(j + 1)
        s, j = s ^ (1 << j), int(back[s, j])
    return length, np.array([0] + tour[::-1])


def solve_exact(coords, *, scale: float = 1e6, time_limit_s: float = 60.0, workers: int = 2) -> tuple[float, np.ndarray]:
    """Optimal tour of one instance ``(n, 2)`` with OR-Tools CP-SAT (``AddCircuit``).

    Distances are rounded to integers after multiplying by ``scale``; the solver proves the
    tour optimal for the rounded distances, which makes it optimal for the true ones up to
    n / scale (2e-5 for n = 20). Returns (true length of the tour, tour starting at 0).
    Raises ``RuntimeError`` if optimality is not proved within ``time_limit_s``.
    """
    from ortools.sat.python import cp_model

    as_positive(time_limit_s, "time_limit_s"), as_positive(scale, "scale")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers: expected an integer >= 1, got {workers!r}")
    d = _distances(coords)
    n = d.shape[0]
    model = cp_model.CpModel()
    arcs, x = [], {}
    for i in range(n):
        for j in range(n):
            if i != j:
                x[i, j] = model.NewBoolVar(f"x{i}_{j}")
                arcs.append((i, j, x[i, j]))
    model.AddCircuit(arcs)
    model.Minimize(sum(int(round(d[i, j] * scale)) * v for (i, j), v in x.items()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.random_seed = 0
    status = solver.Solve(model)
    if status != cp_model.OPTIMAL:
        raise RuntimeError(f"CP-SAT did not prove optimality within {time_limit_s} s (status {solver.StatusName(status)})")
    succ = {i: j for (i, j), v in x.items() if solver.BooleanValue(v)}
    tour = [0]
    while len(tour) < n:
        tour.append(succ[tour[-1]])
    tour = np.array(tour)
    return float(d[tour, np.roll(tour, -1)].sum()), tour


def _components(n: int, edges: np.ndarray) -> list[np.ndarray]:
    """The connected components of the graph on ``0..n-1`` with the given edges ``(m, 2)``."""
    label = np.arange(n)
    changed = True
    while changed:  # propagate the smallest label along the edges until nothing changes
        low = np.minimum(label[edges[:, 0]], label[edges[:, 1]])
        new = label.copy()
        np.minimum.at(new, edges[:, 0], low)
        np.minimum.at(new, edges[:, 1], low)
        changed = not np.array_equal(new, label)
        label = new
    return [np.flatnonzero(label == c) for c in np.unique(label)]


def solve_mip(coords, *, time_limit_s: float = 600.0) -> tuple[float, np.ndarray]:
    """Optimal tour of one instance ``(n, 2)``: an integer programme with subtour cuts.

    One binary x_e per undirected edge e = {i, j}; minimise sum_e d_e x_e subject to every city
    having degree 2. A solution may split into several cycles; for each cycle's city set S add
    sum_{e inside S} x_e <= |S| - 1 and solve again, until the solution is one tour (the
    Dantzig-Fulkerson-Johnson formulation, with cuts added lazily). HiGHS solves each
    programme to a relative gap of 1e-9 on the float64 distances. Returns (length, tour from 0);
    raises ``RuntimeError`` if a programme is not solved to optimality within ``time_limit_s``.
    """
    as_positive(time_limit_s, "time_limit_s")
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix, csr_matrix

    d = _distances(coords)
    n = d.shape[0]
    i, j = np.triu_indices(n, 1)
    m = i.size
    degree = coo_matrix((np.ones(2 * m), (np.r_[i, j], np.r_[np.arange(m), np.arange(m)])), shape=(n, m))
    constraints = [LinearConstraint(degree.tocsr(), 2.0, 2.0)]
    start = time.perf_counter()
    while True:
        left = time_limit_s - (time.perf_counter() - start)
        res = milp(d[i, j], constraints=constraints, integrality=np.ones(m), bounds=Bounds(0, 1),
                   options={"mip_rel_gap": 1e-9, "time_limit": max(left, 1.0)})
        if res.status != 0:
            raise RuntimeError(f"coords: HiGHS stopped without an optimal solution ({res.message})")
        chosen = res.x > 0.5
        cycles = _components(n, np.stack([i[chosen], j[chosen]], 1))
        if len(cycles) == 1:
            break
        for S in cycles:
            inside = np.zeros(n, dtype=bool)
            inside[S] = True
            row = csr_matrix((inside[i] & inside[j]).astype(float)[None])
            constraints.append(LinearConstraint(row, -np.inf, len(S) - 1.0))
    nbrs = [[] for _ in range(n)]
    for a, b in zip(i[chosen], j[chosen]):
        nbrs[a].append(b)
        nbrs[b].append(a)
    tour = [0, nbrs[0][0]]
    while len(tour) < n:
        a, b = nbrs[tour[-1]]
        tour.append(a if a != tour[-2] else b)
    tour = np.array(tour)
    return float(d[tour, np.roll(tour, -1)].sum()), tour


def reference_solutions(name: str = "tsp20_seed1234") -> dict:
    """The shipped optima of a fixed test set: ``coords`` (float32), ``length``, ``tour``, ``provenance``.

    The coordinates are regenerated with :func:`generate_tsp` and compared with the stored
    ones, so a change of the generator cannot silently pair instances with wrong optima.
    """
    if name not in TEST_SETS:
        raise ValueError(f"name: expected one of {sorted(TEST_SETS)}, got {name!r}")
    num, n, seed, _ = TEST_SETS[name]
    if not (DATA / f"{name}_opt.npz").is_file():
        raise ValueError(f"name: the optima of {name} are not shipped; compute them with "
                         f"python -m companion.ngs.tsp {name}")
    data = np.load(DATA / f"{name}_opt.npz")
    coords = generate_tsp(num, n, seed)
    if not np.array_equal(coords.numpy(), data["coords"]):
        raise RuntimeError(f"{name}: regenerated coordinates differ from the stored ones; recompute the optima")
    provenance = json.loads((DATA / f"{name}_opt.json").read_text())
    return {"coords": coords, "length": data["length"], "tour": data["tour"], "provenance": provenance}


def write_reference(name: str, out: Path = DATA) -> dict:
    """Solve every instance of test set ``name`` exactly and write ``<name>_opt.npz`` and ``.json``."""
    import ortools
    import scipy

    from companion.checkpoints import git_commit

    num, n, seed, solver = TEST_SETS[name]
    coords = generate_tsp(num, n, seed)
    lengths, tours, seconds = [], [], []
    for c in coords.numpy():
        t0 = time.perf_counter()
        length, tour = solve_exact(c) if solver == "cp-sat" else solve_mip(c)
        seconds.append(time.perf_counter() - t0)
        lengths.append(length)
        tours.append(tour)
        print(f"{name}: {len(lengths)}/{num} solved, {seconds[-1]:.1f} s", flush=True)
    method = {"cp-sat": f"OR-Tools {ortools.__version__} CP-SAT, AddCircuit on distances x 1e6 rounded to "
                        "integers, status OPTIMAL for every instance",
              "mip": f"edge formulation with lazily added subtour cuts, each integer programme solved to "
                     f"optimality by HiGHS (scipy {scipy.__version__} optimize.milp, mip_rel_gap 1e-9) "
                     "on float64 distances, until the solution is one tour"}[solver]
    provenance = {"instances": f"companion.ngs.tsp.generate_tsp(num={num}, n={n}, seed={seed})",
                  "solver": method, "function": f"companion.ngs.tsp.{'solve_exact' if solver == 'cp-sat' else 'solve_mip'}",
                  "command": f"python -m companion.ngs.tsp {name}", "commit": git_commit(),
                  "solve_seconds_total": round(sum(seconds), 1), "solve_seconds_max": round(max(seconds), 2),
                  "mean_length": float(np.mean(lengths))}
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / f"{name}_opt.npz", coords=coords.numpy(), length=np.array(lengths),
                        tour=np.array(tours, dtype=np.int16 if n < 2**15 else np.int64))
    (out / f"{name}_opt.json").write_text(json.dumps(provenance, indent=1) + "\n")
    return provenance


if __name__ == "__main__":  # python -m companion.ngs.tsp tsp50_seed1234 [...]
    for arg in sys.argv[1:]:
        print(json.dumps(write_reference(arg)))
