import json

import numpy as np
import pytest

from companion.ledger import Ledger, build_dir, ledger_markdown, read_ledgers, summary_markdown


@pytest.fixture
def ledger(tmp_path):
    return Ledger("toy-chapter", scale="quick", seed=0, path=tmp_path / "ledger" / "toy-chapter.json")


def test_record_writes_the_json_of_book_md(ledger):
    ledger.record("kl-bound", statement="KL is bounded", paper="KL <= 1", measured=np.float64(0.5),
                  holds=np.bool_(True), note="exact")
    ledger.record("win-rate", statement="wins", paper="0.9", measured="n/a here", holds=False)
    data = json.loads(ledger.path.read_text())
    assert data == {"chapter": "toy-chapter", "scale": "quick", "seed": 0, "claims": [
        {"id": "kl-bound", "statement": "KL is bounded", "paper": "KL <= 1", "measured": 0.5,
         "holds": True, "note": "exact"},
        {"id": "win-rate", "statement": "wins", "paper": "0.9", "measured": "n/a here",
         "holds": False, "note": ""}]}
    assert type(data["claims"][0]["measured"]) is float


def test_read_ledgers_and_table(ledger):
    ledger.record("a-claim", statement="x | y", paper="1", measured=2, holds=False)
    (ledgers,) = read_ledgers(ledger.path.parent)
    table = ledger_markdown([ledgers])
    assert "x \\| y" in table and "**no**" in table and "toy-chapter (quick)" in table


@pytest.mark.parametrize("kwargs, match", [
    ({"id": "Not Kebab"}, "^id"),
    ({"measured": None}, "^measured"),
    ({"measured": float("nan")}, "^measured"),
    ({"measured": True}, "^measured"),
    ({"measured": "x" * 200}, "^measured"),
    ({"holds": "yes"}, "^holds"),
    ({"statement": ""}, "^statement"),
])
def test_bad_claims_are_refused(ledger, kwargs, match):
    claim = dict(id="ok-id", statement="s", paper="p", measured=1.0, holds=True)
    claim.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ledger.record(claim.pop("id"), **claim)


def test_duplicate_ids_and_bad_ledger_arguments(ledger, tmp_path):
    ledger.record("once", statement="s", paper="p", measured=1, holds=True)
    with pytest.raises(ValueError, match="^id: claim 'once' is already"):
        ledger.record("once", statement="s", paper="p", measured=1, holds=True)
    with pytest.raises(ValueError, match="^chapter"):
        Ledger("Best of N", scale="quick", seed=0)
    with pytest.raises(ValueError, match="^scale"):
        Ledger("x", scale="huge", seed=0)
    with pytest.raises(ValueError, match="^seed"):
        Ledger("x", scale="quick", seed=1.5)


def test_build_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BOOK_BUILD_DIR", str(tmp_path))
    assert build_dir() == tmp_path
    assert Ledger("x", scale="quick", seed=0).path == tmp_path / "ledger" / "x.json"
    monkeypatch.delenv("BOOK_BUILD_DIR")
    monkeypatch.chdir(tmp_path)
    assert build_dir() == tmp_path / "_build"  # no repository above: next to the notebook


def test_glue_takes_plain_numbers_only():
    from companion.book import glue

    with pytest.raises(ValueError, match="^value"):
        glue("x", "0.5")
    glue("x", np.float64(0.5))  # outside a notebook myst-nb glues into nothing; it must not fail


def test_read_ledgers_follows_the_reading_order(tmp_path):
    for slug in ("zeta", "alpha", "mid"):
        Ledger(slug, scale="quick", seed=0, path=tmp_path / f"{slug}.json").record(
            "c", statement="s", paper="p", measured=1, holds=True)
    order = [led["chapter"] for led in read_ledgers(tmp_path, order=["mid", "zeta"])]
    assert order == ["mid", "zeta", "alpha"]


def test_summary_counts_claims_per_chapter(tmp_path):
    led = Ledger("toy", scale="quick", seed=0, path=tmp_path / "toy.json")
    led.record("a", statement="s", paper="p", measured=1, holds=True)
    led.record("b", statement="s", paper="p", measured=2, holds=False)
    table = summary_markdown(read_ledgers(tmp_path))
    assert "| toy | quick (0) | 2 | 1 | 1 |" in table and "| **all chapters** | | **2** | **1** | **1** |" in table
