"""companion.book: progress bars, tables, glue and the device, as the chapters use them."""

import numpy as np
import pandas as pd
import pytest

from companion.book import EXECUTING_ENV, device, md_table, progress


def test_progress_prints_nothing_in_a_built_page(monkeypatch, capsys):
    monkeypatch.setenv(EXECUTING_ENV, "1")
    assert list(progress(range(5), desc="fits")) == [0, 1, 2, 3, 4]
    out = capsys.readouterr()
    assert not out.out and not out.err
    assert len(progress([1, 2, 3], desc="x")) == 3


def test_progress_draws_a_bar_elsewhere(monkeypatch, capsys):
    monkeypatch.delenv(EXECUTING_ENV, raising=False)
    assert sum(progress(range(4), desc="bar")) == 6
    captured = capsys.readouterr()
    assert "bar" in captured.out + captured.err  # tqdm's bar, in a terminal


def test_md_table_formats_integers_floats_and_refuses_missing_values():
    df = pd.DataFrame({"n": [1000, 2], "kl": [0.5, 1.25], "name": ["a|b", "c"]}, index=["x", "y"])
    text = md_table(df, formats={"kl": "{:.1f}"}).data
    assert text.splitlines()[2] == "| x | 1,000 | 0.5 | a\\|b |"
    with pytest.raises(ValueError, match="^df: column 'kl' has a missing value"):
        md_table(pd.DataFrame({"kl": [np.nan]}))
    with pytest.raises(ValueError, match="^df"):
        md_table([1, 2])


def test_device_is_cuda_only_with_a_gpu():
    import torch

    assert device().type == ("cuda" if torch.cuda.is_available() else "cpu")
