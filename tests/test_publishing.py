"""Publishing: the Pages workflow is valid, and a published chapter installs a released companion."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import companion
from tools import book

ROOT = book.ROOT
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
RELEASE = ROOT / ".github" / "workflows" / "release.yml"


@pytest.mark.parametrize("workflow", [WORKFLOW, RELEASE], ids=lambda p: p.name)
def test_the_workflows_pass_actionlint(workflow):
    exe = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    assert Path(exe).exists(), "actionlint is missing: it is pinned in requirements-ci.txt"
    run = subprocess.run([exe, "-color=false", str(workflow)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_workflow_builds_as_the_build_script_does():
    text = WORKFLOW.read_text()
    assert "bash scripts/build.sh --strict" in text and "path: _build/html" in text
    assert "actions/deploy-pages" in text and "branches: [main]" in text


def test_actionlint_catches_a_broken_workflow(tmp_path):
    exe = shutil.which("actionlint") or str(Path(sys.executable).parent / "actionlint")
    bad = tmp_path / "bad.yml"
    bad.write_text(WORKFLOW.read_text().replace("runs-on: ubuntu-latest", "runs-on: [", 1))
    assert subprocess.run([exe, str(bad)], capture_output=True).returncode != 0


def test_the_package_version_is_one_everywhere():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == companion.__version__


@pytest.mark.parametrize("doc", book.chapters(), ids=book.slug)
def test_colab_installs_the_release_from_pypi(doc):
    from tools.release import distribution

    setup = book.source_notebook(doc).cells
    install = next(c for c in setup if c.cell_type == "code").source
    pins = re.findall(r'"([A-Za-z0-9_.\-]+)==([0-9.]+)"', install)
    tags = re.findall(r"@v([0-9.]+)", install)
    assert pins == [(distribution(), companion.__version__)], (
        f"{doc}: the Colab cell must pip install {distribution()}=={companion.__version__} "
        "(python -m tools.release)")
    assert tags == [companion.__version__], f"{doc}: the git fallback must name the tag v{companion.__version__}"


def test_a_release_rewrites_every_install_cell():
    from tools.release import set_version

    assert set_version(companion.__version__) == []  # every cell found, nothing to change
    with pytest.raises(ValueError, match="^version"):
        set_version("1.0")


def test_the_release_workflow_builds_checks_and_publishes():
    text = RELEASE.read_text()
    assert 'tags: ["v*"]' in text and "python -m build" in text and "twine check" in text
    assert "scripts/check_wheel.py" in text and "pypa/gh-action-pypi-publish" in text
    assert "id-token: write" in text and "password" not in text  # trusted publishing, no token


def test_every_reference_links_to_its_source():
    import re

    text = (ROOT / "book" / "references.bib").read_text()
    entries = re.split(r"(?=^@)", text, flags=re.M)
    unlinked = [re.match(r"@\w+\{([^,]+),", e).group(1) for e in entries if e.startswith("@")
                and not re.search(r"^\s*(doi|url|eprint)\s*=", e, re.M)]
    assert not unlinked, f"references without a doi, url or arXiv eprint: {unlinked}"


def test_bibliography_labels_are_distinct():
    """Two papers by "Yang et al., 2025" get 2025a and 2025b (the build treats a shared label as an error)."""
    import importlib.util

    from pybtex.database import parse_file

    spec = importlib.util.spec_from_file_location("book_html", ROOT / "book" / "_ext" / "book_html.py")
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    entries = list(parse_file(ROOT / "book" / "references.bib").entries.values())
    ext._SUFFIXES.update(ext.disambiguate(entries))
    labels = list(ext.AuthorYearLabels().format_labels(entries))
    assert len(labels) == len(set(labels)), sorted(label for label in labels if labels.count(label) > 1)
    assert {"Yang et al., 2025a", "Yang et al., 2025b"} <= set(labels)
    one_page = [e for e in entries if e.key == "yang2025ocl"]  # a page that cites one of the two
    assert list(ext.AuthorYearLabels().format_labels(one_page))[0] in {"Yang et al., 2025a", "Yang et al., 2025b"}
