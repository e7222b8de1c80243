"""The release as a reader gets it: the wheel built from this tree, installed in a fresh virtual
environment outside the repository, runs a chapter notebook as Colab would and writes its ledger."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import companion
from tools import book

ROOT = book.ROOT


def _run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """(python of a fresh venv with the wheel installed, the wheel's path)."""
    tmp = tmp_path_factory.mktemp("release")
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp / "dist", ROOT)
    (wheel,) = (tmp / "dist").glob("icml2025_companion-*.whl")
    _run(sys.executable, "-m", "venv", tmp / "venv")
    python = tmp / "venv" / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--no-deps", wheel)
    # The dependencies come from this environment's site-packages as a plain path entry (as on
    # Colab, they are installed already); its .pth files, the editable install among them, are
    # not processed, so `companion` can only come from the wheel.
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    (Path(purelib) / "book_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, wheel


def _outside_env():
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_BUILD_DIR", "PYTHONPATH")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_the_wheel_ships_the_checkpoints_and_names_the_version(fresh):
    _, wheel = fresh
    assert wheel.name.startswith(f"icml2025_companion-{companion.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "companion").glob("*/checkpoints/*"))
    assert shipped and set(shipped) <= set(names), set(shipped) - set(names)
    assert "companion/exercises/equations.json" in names
    assert not any(n.startswith(("tests/", "tools/", "book/")) for n in names)


def test_a_chapter_runs_from_the_installed_wheel(fresh, tmp_path):
    python, _ = fresh
    where = _run(python, "-c", "import companion; print(companion.__file__)", cwd=tmp_path, env=_outside_env())
    assert str(ROOT) not in where.stdout and "site-packages" in where.stdout
    check = _run(python, ROOT / "scripts" / "check_wheel.py", cwd=tmp_path, env=_outside_env())
    assert "checkpoints load" in check.stdout
    notebook = tmp_path / "best-of-n.ipynb"
    notebook.write_bytes(book.colab_notebook("book/alignment/best-of-n").read_bytes())
    _run(python, "-m", "papermill", "-k", "python3", "--no-progress-bar", notebook, tmp_path / "out.ipynb",
         cwd=tmp_path, env=_outside_env())
    ledger = json.loads((tmp_path / "_build" / "ledger" / "best-of-n.json").read_text())
    assert ledger["chapter"] == "best-of-n" and ledger["scale"] == "quick"
    recorded = {c["id"] for c in ledger["claims"] if c.get("verdict")}  # run through, every claim judged
    assert {"pmf-equals-enumeration", "estimator-tracks-kl", "monte-carlo-agrees"} <= recorded
