"""Training the chapter's tiny decoder on :func:`~companion.catekv.data.hybrid_recall`, and its checkpoint.

Cross-entropy on the answer positions only (the demo answers of the prompt and the answers of the
stream), full causal attention: the model never sees a compressed cache while it learns.

Entry point (writes ``companion/catekv/checkpoints/decoder.pt`` and ``decoder.json``)::

    python -m companion.catekv.train --scale quick|full [--out DIR] [--seed 0] [--steps N]

``quick`` is the recipe of the shipped checkpoint (a CPU run of about twenty minutes on one core);
``full`` trains a larger model on longer prompts (for a GPU).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from companion.checkpoints import (
    load_checkpoint,
    provenance,
    recipe_from_args,
    save_checkpoint,
    train_from_recipe,
    training_parser,
)

from .data import VOCAB, hybrid_recall
from .model import TinyDecoder

__all__ = ["RECIPES", "DATA", "train_decoder", "answer_accuracy", "load_decoder", "load_or_train", "CHECKPOINTS"]

CHECKPOINTS = Path(__file__).parent / "checkpoints"
VALID_SEED = 10_000  # validation prompts of the training log; the chapter evaluates on other seeds
DATA = {
    "quick": dict(prompt_len=256, n_pairs=16, n_queries=8, n_demos=5),
    "full": dict(prompt_len=1024, n_pairs=48, n_queries=8, n_demos=5),
}
RECIPES = {
    # steps x batch_size fresh examples; AdamW, linear warm-up then cosine to lr/20. A fixed number of
    # steps (never a wall-clock stop). ``curriculum``: (fraction of the steps, data) stages of shorter
    # prompts before the final data, since retrieval is found much sooner among a few tokens.
    "quick": dict(steps=3000, batch_size=32, lr=3e-3, seed=0,
                  curriculum=[[0.3, dict(prompt_len=64, n_pairs=10, n_queries=4, n_demos=5)],
                              [0.5, dict(prompt_len=128, n_pairs=12, n_queries=6, n_demos=5)]],
                  model=dict(dim=64, layers=3, q_heads=4, kv_heads=4, mlp_mult=2)),
    "full": dict(steps=6000, batch_size=32, lr=3e-3, seed=0,
                 curriculum=[[0.2, dict(prompt_len=64, n_pairs=10, n_queries=4, n_demos=5)],
                             [0.4, dict(prompt_len=256, n_pairs=16, n_queries=8, n_demos=5)]],
                 model=dict(dim=128, layers=4, q_heads=8, kv_heads=4, mlp_mult=2)),
}


def answer_loss_and_acc(model: TinyDecoder, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy and accuracy on the answer positions (demos and stream), full attention."""
    device = next(model.parameters()).device
    seq = batch.full_sequence().to(device)
    P = batch.prompt.shape[1]
    logits = model(seq[:, :-1])
    pos = torch.cat([batch.demo_pos, P + batch.answer_pos], dim=1).to(device)  # the key tokens; the answer follows
    target = seq.gather(1, pos + 1)
    picked = logits.gather(1, pos[..., None].expand(-1, -1, logits.shape[-1]))
    loss = F.cross_entropy(picked.flatten(0, 1), target.flatten())
    acc = (picked.argmax(-1) == target).float()[:, batch.demo_pos.shape[1]:].mean()
    return loss, acc


@torch.no_grad()
def answer_accuracy(model: TinyDecoder, batch) -> float:
    """Stream accuracy with the full cache (teacher forcing, one forward pass)."""
    model.eval()
    return float(answer_loss_and_acc(model, batch)[1])


def train_decoder(model: TinyDecoder, *, data: dict, steps: int, batch_size: int, lr: float, seed: int = 0,
                  curriculum: list | tuple = (), log_every: int = 100, progress=None, verbose: bool = False,
                  device: str | torch.device | None = None) -> dict:
    """Train ``model`` in place on fresh seeded batches for ``steps`` steps; return the training history.

    Batches are drawn on the CPU from seeded generators and moved to ``device`` (default: CUDA when
    available); the model is returned on the CPU, in eval mode. ``curriculum`` lists ``(until, data)``
    stages: the steps up to the fraction ``until`` of ``steps`` use that (shorter) data, in order.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps: expected steps >= 1 and batch_size >= 1, got {steps}, {batch_size}")
    stages = [(float(until), dict(d)) for until, d in curriculum]
    if any(not 0 < u <= 1 for u, _ in stages) or [u for u, _ in stages] != sorted(u for u, _ in stages):
        raise ValueError(f"curriculum: expected increasing fractions in (0, 1], got {[u for u, _ in stages]}")
    torch.manual_seed(seed)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))))
    valid = hybrid_recall(256, seed=VALID_SEED, **data)
    history = {"step": [], "train_loss": [], "train_acc": [], "valid_acc": [], "seconds": []}
    start, run_loss, run_acc = time.perf_counter(), None, None
    steps_iter = range(1, steps + 1)
    for step in (progress(steps_iter) if progress else steps_iter):
        model.train()
        stage = next((d for until, d in stages if step <= until * steps), data)
        batch = hybrid_recall(batch_size, seed=seed * 1_000_003 + step, **stage)
        loss, acc = answer_loss_and_acc(model, batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        run_loss = float(loss.detach()) if run_loss is None else 0.95 * run_loss + 0.05 * float(loss.detach())
        run_acc = float(acc) if run_acc is None else 0.95 * run_acc + 0.05 * float(acc)
        if step % log_every == 0 or step == steps:
            history["step"].append(step)
            history["train_loss"].append(round(run_loss, 4))
            history["train_acc"].append(round(run_acc, 4))
            history["valid_acc"].append(answer_accuracy(model, valid))
            history["seconds"].append(round(time.perf_counter() - start, 1))
            if verbose:
                print({k: v[-1] for k, v in history.items()}, flush=True)
    model.cpu().eval()
    history["device"] = str(device)
    return history


def _build(config: dict) -> TinyDecoder:
    return TinyDecoder(VOCAB.size, **config)


def load_decoder(path: str | Path = CHECKPOINTS / "decoder.pt") -> tuple[TinyDecoder, dict]:
    """The shipped decoder (state_dict + provenance JSON beside it), in eval mode."""
    return load_checkpoint(path, lambda meta: TinyDecoder(**meta["model_config"]))


def load_or_train(scale: str = "quick", *, progress=None) -> tuple[TinyDecoder, dict]:
    """Quick scale: load the shipped checkpoint if present, else train it. Full scale: train."""
    if scale not in RECIPES:
        raise ValueError(f"scale: expected 'quick' or 'full', got {scale!r}")
    if scale == "quick" and (CHECKPOINTS / "decoder.pt").exists():
        model, meta = load_decoder()
        return model, {**meta, "source": "shipped checkpoint"}
    recipe = RECIPES[scale]
    model, history, seconds = train_from_recipe(recipe, _build, train_decoder, data=DATA[scale], progress=progress)
    return model, {"recipe": recipe, "data": DATA[scale], "history": history, "model_config": model.config,
                   "training_seconds": round(seconds, 1), "source": "trained in this run"}


def main(argv: list[str] | None = None) -> int:
    parser = training_parser("python -m companion.catekv.train", __doc__.split("\n\n")[0], RECIPES, CHECKPOINTS)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    recipe = recipe_from_args(RECIPES, args)
    model, history, seconds = train_from_recipe(recipe, _build, train_decoder, data=DATA[args.scale],
                                                log_every=100 if recipe["steps"] >= 100 else 1, verbose=True)
    meta = provenance(
        command="python -m companion.catekv.train " + " ".join(argv if argv is not None else sys.argv[1:]),
        recipe=recipe, seconds=seconds, device=history["device"],
        model_config=model.config,
        parameters=sum(p.numel() for p in model.parameters()),
        data={"generator": "companion.catekv.data.hybrid_recall", **DATA[args.scale],
              "train_seeds": f"seed * 1000003 + step (seed {recipe['seed']})",
              "validation": {"n": 256, "seed": VALID_SEED}},
        final={"valid_acc_full_cache": history["valid_acc"][-1], "train_loss_running": history["train_loss"][-1],
               "steps_done": history["step"][-1]},
        history=history,
    )
    save_checkpoint(model, args.out / "decoder.pt", meta)
    print(json.dumps({k: meta[k] for k in ("training_seconds", "final", "parameters")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
