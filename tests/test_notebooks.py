"""The Colab notebooks and the chapter contract's set-up cells."""

import os
import subprocess
import sys

import jupytext
import nbformat
import pytest

from companion.book import colab_url, repo_root, repository_url
from tools import book

CHAPTERS = book.chapters()
ROOT = book.ROOT


def _cells(nb):
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_colab_notebook_is_in_sync_with_the_chapter(doc):
    path = book.colab_notebook(doc)
    assert path.exists(), f"{path.name} is missing: run `python -m tools.book notebooks`"
    committed = nbformat.read(path, as_version=4)
    assert _cells(committed) == _cells(jupytext.read(ROOT / f"{doc}.md")), (
        f"{path.name} has drifted from {doc}.md: run `python -m tools.book notebooks`")
    assert all(not c.get("outputs") for c in committed.cells), f"{path.name} must hold no outputs"


def test_no_stray_colab_notebooks():
    expected = {book.colab_notebook(d).name for d in CHAPTERS}
    assert {p.name for p in (ROOT / "notebooks").glob("*.ipynb")} == expected


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_chapter_set_up_follows_the_contract(doc):
    cells = [c for c in jupytext.read(ROOT / f"{doc}.md").cells if c.cell_type == "code"]
    setup, badge, params = cells[:3]
    url, _ = repository_url(ROOT)
    assert "remove-cell" in setup.metadata.get("tags", [])
    assert '"google.colab" in sys.modules' in setup.source and url in setup.source
    assert f'colab_badge("{book.slug(doc)}")' in badge.source
    assert "parameters" in params.metadata.get("tags", [])
    assert 'SCALE = "quick"' in params.source and "SEED = 0" in params.source


def test_colab_url_is_built_from_the_config():
    url, branch = repository_url(ROOT)
    assert colab_url("best-of-n", ROOT) == (
        f"https://colab.research.google.com/github/{url.removeprefix('https://github.com/')}"
        f"/blob/{branch}/notebooks/best-of-n.ipynb")
    with pytest.raises(ValueError, match="^slug"):
        colab_url("no-such-chapter", ROOT)
    assert repo_root(ROOT / "book" / "alignment") == ROOT


def test_an_instructor_can_run_a_chapter_with_nbval(tmp_path):
    env = {**os.environ, "BOOK_BUILD_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q",
                          "notebooks/best-of-n.ipynb"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and "failed" not in run.stdout
    assert (tmp_path / "ledger" / "best-of-n.json").exists()
