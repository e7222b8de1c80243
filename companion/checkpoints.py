"""Shipped checkpoints: a ``state_dict`` beside a JSON provenance record (BOOK.md, "Checkpoints").

Every chapter whose model takes longer than the quick budget to train has a training entry
point ``python -m companion.<module>.train --scale quick|full`` built from these pieces:
:func:`training_parser` and :func:`recipe_from_args` for the command line,
:func:`train_from_recipe` to seed, build and train, :func:`provenance` for the record (command, commit, device, time), :func:`save_checkpoint`
to write ``<name>.pt`` and ``<name>.json`` together, and :func:`load_checkpoint` to read them
back into the current model code.
"""

from __future__ import annotations

import importlib

import argparse
import json
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = ["lazy_exports", "git_commit", "provenance", "save_checkpoint", "load_checkpoint", "train_from_recipe",
           "training_parser", "recipe_from_args"]

_ROOT = Path(__file__).resolve().parents[1]


def lazy_exports(package: str, module: str, names) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that imports ``package.module`` on the first use of one
    of ``names``. A package whose ``train`` module is also its ``python -m`` entry point exports
    it this way: imported eagerly, runpy would warn that the module is already loaded."""
    names = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def git_commit() -> str:
    """The repository's HEAD, marked when the working tree has uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=_ROOT, capture_output=True, text=True).stdout
        return sha.stdout.strip() + ("+uncommitted changes" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _device(device: str) -> str:
    name = (torch.cuda.get_device_name() if device.startswith("cuda") else
            f"cpu ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads")
    return f"{name}, torch {torch.__version__}"


def provenance(*, command: str, recipe: dict, seconds: float, device: str, **fields: Any) -> dict:
    """The provenance record: command, recipe, commit, training time, device, then ``fields``."""
    return {"command": command, "recipe": recipe, "commit": git_commit(), "training_seconds": round(seconds, 1),
            "device": _device(device), **fields}


def save_checkpoint(model: torch.nn.Module, path: str | Path, meta: dict) -> Path:
    """Write ``path`` (the state_dict, ``.pt``) and its record ``path.with_suffix('.json')``."""
    path = Path(path)
    if path.suffix != ".pt":
        raise ValueError(f"path: expected a .pt file, got {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    return path


def load_checkpoint(path: str | Path, build: Callable[[dict], torch.nn.Module]) -> tuple[torch.nn.Module, dict]:
    """Read a checkpoint: ``build(meta)`` makes the model, the weights load into it; eval mode."""
    path = Path(path)
    if not path.is_file() or not path.with_suffix(".json").is_file():
        raise ValueError(f"path: expected {path} and its provenance record {path.with_suffix('.json').name}")
    meta = json.loads(path.with_suffix(".json").read_text())
    model = build(meta)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval(), meta


def train_from_recipe(recipe: dict, build: Callable[[dict], torch.nn.Module], train: Callable[..., dict],
                      **kwargs: Any) -> tuple[torch.nn.Module, dict, float]:
    """Seed with ``recipe['seed']``, build the model from ``recipe['model']`` and train it.

    ``train(model, **recipe-without-'model', **kwargs)`` returns its history; the result is
    ``(model, history, seconds)``.
    """
    torch.manual_seed(recipe["seed"])
    model = build(recipe["model"])
    start = time.perf_counter()
    history = train(model, **{k: v for k, v in recipe.items() if k != "model"}, **kwargs)
    return model, history, time.perf_counter() - start


def training_parser(prog: str, description: str, recipes: dict, out: Path) -> argparse.ArgumentParser:
    """The shared command line of a training entry point: --scale, --seed, --steps, --out."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--scale", choices=sorted(recipes), default="quick")
    parser.add_argument("--seed", type=int, default=None, help="override the recipe's seed")
    parser.add_argument("--steps", type=int, default=None, help="override the recipe's number of steps")
    parser.add_argument("--out", type=Path, default=out, help="folder for the checkpoint and its record")
    return parser


def recipe_from_args(recipes: dict, args: argparse.Namespace) -> dict:
    """The recipe of ``args.scale`` with the command line's overrides applied (a copy)."""
    recipe = dict(recipes[args.scale])
    for key in ("seed", "steps"):
        if getattr(args, key) is not None:
            recipe[key] = getattr(args, key)
    return recipe
