"""companion.ocl.train: the bank of encoders, its FLOP budget and the shipped checkpoint."""

import json

import pytest
import torch

from companion.checkpoints import save_checkpoint
from companion.ocl.train import CHECKPOINTS, RECIPES, key, load_bank, train_bank

torch.set_num_threads(1)

TINY = dict(seed=0, pool_variants=1, pool_seed=0, batch=16, base_lr=1e-2, mask_ratio=0.75,
            budget_epochs=2, equal_epochs=("MAE",), sweep_ratios=(0.5,),
            official_lr_runs=("OCL",), mae_norm_pix=True,
            model=dict(img_size=16, patch=2, dim=16, depth=1, heads=2, mlp_ratio=2.0))


def test_bank_trains_every_method_at_equal_flops(tmp_path):
    pool = torch.rand(48, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    bank, record, _ = train_bank(TINY, pool)
    assert {"random", "ocl_b125", "ocl_b1000", "simclr_b1000", "simclr_noaug_b500",
            "mae_b1000", "ocl_r50", "mae_epochs", "ocl_official"} <= set(bank)
    budget = record["budget_flops"]
    for name, run in record["runs"].items():
        if name.endswith("epochs"):
            assert run["steps"] == 2 * 3  # as many epochs as OCL: 2 epochs of 48 // 16 steps
        else:  # the largest whole number of steps inside the budget (at least one)
            assert run["steps"] * run["flops_per_step"] <= budget or run["steps"] == 1
            assert (run["steps"] + 1) * run["flops_per_step"] > budget
    # the learning rates follow the official rule lr = base_lr * batch / 256
    assert record["runs"]["ocl_b1000"]["lr"] == pytest.approx(1e-2 * 16 / 256)
    assert record["runs"]["ocl_official"]["lr"] == pytest.approx(5e-5 * 16 / 256)
    # every run starts from the same encoder; training moved it
    assert not torch.equal(bank["ocl_b1000"].cls, bank["random"].cls)
    path = save_checkpoint(bank, tmp_path / "tiny.pt", {"recipe": TINY, **record})
    loaded, meta = load_bank("quick", path)
    assert torch.equal(loaded["mae_b1000"].cls, bank["mae_b1000"].cls)
    assert meta["budget_flops"] == budget


def test_key_and_scale_refuse_unknown_names():
    assert key("SimCLR, no aug.", "b250") == "simclr_noaug_b250"
    with pytest.raises(ValueError, match="method"):
        key("BYOL", "b1000")
    with pytest.raises(ValueError, match="scale"):
        load_bank("medium")


def test_shipped_checkpoint_is_small_and_has_provenance():
    pt = CHECKPOINTS / "quick.pt"
    assert pt.is_file() and pt.stat().st_size < 5e6
    meta = json.loads(pt.with_suffix(".json").read_text())
    assert meta["recipe"] == json.loads(json.dumps(RECIPES["quick"]))
    assert "uncommitted" not in meta["commit"] and meta["command"].startswith("python -m")
    bank, _ = load_bank("quick")
    assert "ocl_b1000" in bank
