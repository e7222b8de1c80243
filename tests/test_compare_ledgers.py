"""tools.compare_ledgers: a moved number is reported, a timing claim apart, identical ledgers pass."""

import json

from tools import compare_ledgers as cl


def _ledger(measured=0.5, seconds=1.0, note="n"):
    return {"chapter": "x", "scale": "quick", "seed": 0, "departures": [],
            "claims": [{"id": "acc", "statement": "accuracy", "criterion": "acc >= 0.4", "measured": measured,
                        "null_measured": 0.1, "holds": True, "null_holds": False, "verdict": "reproduced",
                        "gates": [{"id": "g", "criterion": "learned", "measured": 0.9, "passed": True}], "note": note},
                       {"id": "speed", "statement": "faster", "criterion": "wall seconds ratio <= 0.5",
                        "measured": seconds, "holds": True, "verdict": "reproduced", "gates": []}]}


def _write(folder, ledger):
    folder.mkdir()
    (folder / "x.json").write_text(json.dumps(ledger))
    return folder


def test_identical_ledgers_pass_and_a_timing_claim_is_listed_apart(tmp_path):
    a = _write(tmp_path / "a", _ledger())
    b = _write(tmp_path / "b", _ledger(seconds=2.0, note="other"))
    result = cl.compare(a, b)
    assert result["x"]["claims"] == {} and "speed" in result["x"]["timing"] and "acc" in result["x"]["notes"]
    assert cl.main([str(a), str(b)]) == 0


def test_a_moved_measurement_is_reported(tmp_path, capsys):
    a = _write(tmp_path / "a", _ledger())
    b = _write(tmp_path / "b", _ledger(measured=0.51))
    assert cl.main([str(a), str(b)]) == 1
    assert "measured: 0.5 -> 0.51" in capsys.readouterr().out
