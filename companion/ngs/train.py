"""Training the routing policy: REINFORCE with the POMO shared baseline, and its checkpoint.

For a batch of B random instances, decode one tour from every start city (S = n tours per
instance) and push up the log-probability of the tours shorter than their instance's mean
(eq. (ngs-pomo)):

    grad = -1/(B S) sum_{b,k} (R_bk - mean_k' R_bk') grad log p(tau_bk | x_b),   R = -length.

Entry point (writes ``companion/ngs/checkpoints/tsp<n>.pt`` and ``tsp<n>.json``)::

    python -m companion.ngs.train --scale quick|tsp50|full [--out DIR] [--seed 0]

``quick`` is the recipe of the shipped 20-city policy, ``tsp50`` that of the shipped 50-city
policy (the 20-city weights trained further on 50-city instances for a fixed number of steps;
each record gives its training time); ``full`` trains longer (for a GPU).
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from pathlib import Path

import torch

from companion.checkpoints import (
    load_checkpoint,
    provenance,
    recipe_from_args,
    save_checkpoint,
    train_from_recipe,
    training_parser,
)

from .policy import AttentionPolicy
from .tsp import generate_tsp, tour_length

__all__ = ["RECIPES", "train_pomo", "evaluate_greedy", "load_policy", "load_or_train", "CHECKPOINTS"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
VALID = dict(num=256, n=20, seed=4321)  # validation instances of the training log (never the test set)
RECIPES = {
    # n: cities; steps x batch_size instances, each decoded from all n starts; lr: Adam, cosine to lr/20
    "quick": dict(n=20, steps=1500, batch_size=64, lr=1e-3, seed=0, model=dict(d_model=128, n_layers=3, n_heads=8)),
    # the 50-city policy: starts from the shipped 20-city weights (``init``), then POMO at n = 50
    "tsp50": dict(n=50, steps=300, batch_size=32, lr=5e-4, seed=0, init="tsp20.pt",
                  model=dict(d_model=128, n_layers=3, n_heads=8)),
    "full": dict(n=20, steps=20000, batch_size=128, lr=1e-3, seed=0, model=dict(d_model=128, n_layers=3, n_heads=8)),
}


def pomo_loss(policy: AttentionPolicy, coords: torch.Tensor,
              generator: torch.Generator | None = None):
    """The POMO loss of eq. (ngs-pomo) on one batch, and the mean tour length."""
    B, n, _ = coords.shape
    starts = torch.arange(n, device=coords.device).expand(B, n)
    out = policy.rollout(coords, n, start_nodes=starts, generator=generator)
    reward = -tour_length(coords, out.tours)  # (B, n)
    advantage = reward - reward.mean(1, keepdim=True)
    return -(advantage * out.logp).mean(), -reward.mean()


@torch.no_grad()
def evaluate_greedy(policy: AttentionPolicy, coords: torch.Tensor) -> float:
    """Mean length of the best of the n greedy tours (one per start city)."""
    policy.eval()
    B, n, _ = coords.shape
    out = policy.rollout(coords, n, start_nodes=torch.arange(n, device=coords.device).expand(B, n), greedy=True)
    policy.train()
    return float(tour_length(coords, out.tours).min(1).values.mean())


def train_pomo(policy: AttentionPolicy, *, n: int, steps: int, batch_size: int, lr: float, seed: int = 0,
               init: str | None = None, log_every: int = 100, progress=None, device: str | None = None) -> dict:
    """Train ``policy`` in place on fresh uniform instances; return the training history.

    ``progress``: an optional wrapper of the step range (e.g. :func:`companion.book.progress`).
    Always runs all ``steps`` (never stopped by a clock); the learning rate follows a cosine from
    ``lr`` to ``lr / 20``.
    ``device``: where to train (default: CUDA if available, else CPU); instances are drawn on the
    CPU from the seeded generator, and the policy is returned on the CPU.
    ``init``: a checkpoint file in :data:`CHECKPOINTS` whose weights the policy starts from.
    """
    for name, value in (("n", n), ("steps", steps), ("batch_size", batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (3 if name == "n" else 1):
            raise ValueError(f"{name}: expected an integer >= {3 if name == 'n' else 1}, got {value!r}")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr: expected a finite number > 0, got {lr!r}")
    if init is not None:
        policy.load_state_dict(torch.load(CHECKPOINTS / init, map_location="cpu", weights_only=True))
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    policy.to(device)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * s / steps)))
    valid = generate_tsp(VALID["num"], n, VALID["seed"]).to(device)
    history = {"step": [], "train_len": [], "valid_greedy_len": [], "seconds": []}
    start, running = time.perf_counter(), None
    policy.train()
    steps_iter = range(1, steps + 1)
    for step in (progress(steps_iter) if progress else steps_iter):
        coords = torch.rand(batch_size, n, 2, generator=gen).to(device)
        loss, mean_len = pomo_loss(policy, coords, gen if device.type == "cpu" else None)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        sched.step()
        running = float(mean_len) if running is None else 0.95 * running + 0.05 * float(mean_len)
        if step % log_every == 0 or step == steps:
            history["step"].append(step)
            history["train_len"].append(running)
            history["valid_greedy_len"].append(evaluate_greedy(policy, valid))
            history["seconds"].append(round(time.perf_counter() - start, 1))
    policy.cpu().eval()
    history["device"] = str(device)
    return history


def load_policy(path: str | Path = CHECKPOINTS / "tsp20.pt") -> tuple[AttentionPolicy, dict]:
    """The shipped policy (state_dict + provenance JSON beside it), in eval mode."""
    return load_checkpoint(path, lambda meta: _build(meta["model"]))


def _build(config: dict) -> AttentionPolicy:
    return AttentionPolicy(**config)


def load_or_train(scale: str = "quick", *, n: int = 20, progress=None) -> tuple[AttentionPolicy, dict]:
    """The policy trained on ``n`` = 20 or 50 cities.

    Quick scale: load the shipped checkpoint if present, else train it. Full scale: train
    (the 20-city recipe ``full``; the 50-city policy has one recipe, ``tsp50``).
    """
    if n not in (20, 50):
        raise ValueError(f"n: expected 20 or 50 (the shipped policies), got {n!r}")
    if scale not in ("quick", "full"):
        raise ValueError(f"scale: expected 'quick' or 'full', got {scale!r}")
    name = f"tsp{n}.pt"
    if scale == "quick" and (CHECKPOINTS / name).exists():
        return load_policy(CHECKPOINTS / name)
    recipe = RECIPES["tsp50" if n == 50 else scale]
    policy, history, seconds = train_from_recipe(recipe, _build, train_pomo, progress=progress)
    return policy, {"recipe": recipe, "history": history, "model": recipe["model"],
                    "training_seconds": round(seconds, 1), "source": "trained in this run"}


def _init_record(init: str | None) -> dict | None:
    """The starting checkpoint of a recipe: its file, sha256 and its own record's commit."""
    if init is None:
        return None
    path = CHECKPOINTS / init
    record = json.loads(path.with_suffix(".json").read_text())
    return {"file": init, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "commit": record["commit"],
            "command": record["command"]}


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.ngs.train", __doc__.split("\n\n")[0], RECIPES, CHECKPOINTS)
    args = parser.parse_args(argv)
    recipe = recipe_from_args(RECIPES, args)
    torch.set_num_threads(1)  # a fixed order of floating-point sums: the same weights on any CPU
    policy, history, seconds = train_from_recipe(recipe, _build, train_pomo, log_every=100, progress=None)
    meta = provenance(
        command="python -m companion.ngs.train " + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=seconds, device=history["device"],
        model=recipe["model"],
        parameters=sum(p.numel() for p in policy.parameters()),
        data={"train": f"uniform [0,1]^2, n = {recipe['n']}, torch.rand with a Generator seeded {recipe['seed']}",
              "validation": {**VALID, "n": recipe["n"]}},
        init=_init_record(recipe.get("init")),
        final={"valid_greedy_multistart_len": history["valid_greedy_len"][-1],
               "train_len_running": history["train_len"][-1]},
        history=history,
    )
    save_checkpoint(policy, args.out / f"tsp{recipe['n']}.pt", meta)
    print(json.dumps({k: meta[k] for k in ("training_seconds", "final", "parameters")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
