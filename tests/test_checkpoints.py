import json
import re
from pathlib import Path

import pytest
import torch

from companion.checkpoints import load_checkpoint, provenance, recipe_from_args, save_checkpoint, training_parser


def test_save_and_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    meta = provenance(command="python -m x.train", recipe={"seed": 0}, seconds=1.234, device="cpu",
                      model={"in_features": 3, "out_features": 2})
    path = save_checkpoint(model, tmp_path / "lin.pt", meta)
    record = json.loads(path.with_suffix(".json").read_text())
    assert record["training_seconds"] == 1.2 and record["commit"] and "torch" in record["device"]
    loaded, meta2 = load_checkpoint(path, lambda m: torch.nn.Linear(**m["model"]))
    assert not loaded.training and meta2 == record
    assert torch.equal(loaded.weight, model.weight)


def test_bad_paths_are_named(tmp_path):
    with pytest.raises(ValueError, match="^path"):
        save_checkpoint(torch.nn.Linear(1, 1), tmp_path / "model.bin", {})
    with pytest.raises(ValueError, match="^path"):
        load_checkpoint(tmp_path / "missing.pt", lambda m: torch.nn.Linear(1, 1))


def test_command_line_overrides_the_recipe(tmp_path):
    recipes = {"quick": {"seed": 0, "steps": 100, "lr": 1e-3}, "full": {"seed": 0, "steps": 1000, "lr": 1e-3}}
    parser = training_parser("prog", "demo", recipes, tmp_path)
    args = parser.parse_args(["--scale", "full", "--steps", "7"])
    assert recipe_from_args(recipes, args) == {"seed": 0, "steps": 7, "lr": 1e-3}
    assert recipes["full"]["steps"] == 1000  # the recipe table is not modified


def test_train_from_recipe_seeds_builds_and_trains():
    from companion.checkpoints import train_from_recipe

    def train(model, *, seed, steps, lr):
        return {"steps": steps, "lr": lr, "first_weight": model.weight.detach().flatten()[0].item()}

    recipe = {"seed": 3, "steps": 5, "lr": 0.1, "model": {"in_features": 2, "out_features": 1}}
    m1, h1, s1 = train_from_recipe(recipe, lambda c: torch.nn.Linear(**c), train)
    m2, h2, _ = train_from_recipe(recipe, lambda c: torch.nn.Linear(**c), train)
    assert h1 == h2 and h1["steps"] == 5 and s1 >= 0  # seeded: the same initial weights twice
    assert isinstance(m1, torch.nn.Linear) and m1.in_features == 2


def _shipped_records():
    root = Path(__file__).resolve().parents[1]
    return sorted(p for p in (root / "companion").glob("*/checkpoints/*.json") if p.with_suffix(".pt").is_file())


@pytest.mark.parametrize("record", _shipped_records(), ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_every_shipped_checkpoint_comes_from_a_clean_commit_and_a_fixed_budget(record):
    """BOOK.md, "Scales": trained from a clean commit, for a fixed budget, never by a clock."""
    meta = json.loads(record.read_text())
    assert re.fullmatch(r"[0-9a-f]{40}", meta["commit"]), f"{record}: commit {meta['commit']!r} is not a clean commit"
    assert meta["command"].startswith(f"python -m companion.{record.parts[-3]}.train"), meta["command"]
    assert meta["training_seconds"] > 0
    clock = [k for k in _keys(meta["recipe"]) if "time_limit" in k or "seconds" in k]
    assert not clock, f"{record}: the recipe stops on a clock: {clock}"


def _keys(tree):
    """Every key of a nested dict."""
    for key, value in tree.items() if isinstance(tree, dict) else ():
        yield key
        yield from _keys(value)
