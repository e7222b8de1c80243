"""The chapter sources, their Colab notebooks (reader's and student's) and the chapter contract's cells."""

import json
import os
import re
import subprocess
import sys

import nbformat
import pytest

from companion import __version__
from companion.book import colab_url, repo_root, repository_url
from tools import book, versions

CHAPTERS = book.chapters()
ROOT = book.ROOT
HIDDEN = {"hide-input", "remove-input", "remove-cell", "hide-cell"}
MAX_CODE_LINE = book.COLUMN  # what the book's code column shows at desktop width without scrolling


def _cells(nb):
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_colab_notebooks_are_in_sync_with_the_chapter(doc):
    for path, version in book.notebook_versions(doc):
        assert path.exists(), f"{path.name} is missing: run `python -m tools.book notebooks`"
        committed = nbformat.read(path, as_version=4)
        assert _cells(committed) == _cells(version), (
            f"{path.relative_to(ROOT)} has drifted from {doc}.md: run `python -m tools.book notebooks`")
        assert all(not c.get("outputs") for c in committed.cells), f"{path.name} must hold no outputs"


def test_no_stray_notebooks():
    for folder, path_of in (("notebooks", book.colab_notebook), ("notebooks/student", book.student_notebook)):
        expected = {path_of(d).name for d in CHAPTERS}
        assert {p.name for p in (ROOT / folder).glob("*.ipynb")} == expected, folder


def test_equation_numbers_for_the_checkers_are_in_sync():
    committed = json.loads(book.EQUATIONS.read_text())
    assert committed == {book.slug(d): book.equation_numbers(d) for d in CHAPTERS}, (
        "companion/exercises/equations.json has drifted: run `python -m tools.book notebooks`")


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_chapter_set_up_follows_the_contract(doc):
    text = (ROOT / f"{doc}.md").read_text()
    cells = [c for c in book.source_notebook(doc).cells if c.cell_type == "code"]
    setup, badge, params = cells[:3]
    url, _ = repository_url(ROOT)
    assert "remove-cell" in setup.metadata.get("tags", [])
    assert '"google.colab" in sys.modules' in setup.source and url in setup.source
    assert f'colab_badge("{book.slug(doc)}")' in badge.source
    assert "parameters" in params.metadata.get("tags", [])
    assert 'SCALE = "quick"' in params.source and "SEED = 0" in params.source
    assert "```{glue:md} verdict" in text, f"{doc}: no verdict box (a glue:md directive named 'verdict')"
    assert f"({book.slug(doc)}-claims)=\n## Claims" in text, f"{doc}: no '({book.slug(doc)}-claims)=' label"
    assert "ledger.glue_verdict()" in text
    assert "Pre-registered criteria" in text, f"{doc}: no 'Pre-registered criteria' paragraph"


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_exercises_follow_nbgrader_conventions(doc):
    source = book.source_notebook(doc)
    solutions, graded = versions.exercise_cells(source, doc)
    assert len(solutions) >= 2, f"{doc}: a chapter has two or three exercises, each with a checker"
    student = versions.student(source, book.slug(doc))
    for i, j in zip(solutions, graded):
        stubbed = student.cells[i].source
        assert versions.BEGIN not in stubbed and "raise NotImplementedError()" in stubbed
        assert student.cells[i].metadata["nbgrader"]["solution"] is True
        assert student.cells[j].metadata["nbgrader"]["points"] == source.cells[j].metadata["points"]
        assert "companion.exercises" not in source.cells[i].source, "a solution must not come from the package"
    # outside its delimited region a solution cell holds only the signature: no answer can leak
    for i in solutions:
        outside = versions.stub_solutions(source.cells[i].source).split("\n")
        code = [line for line in outside if line.strip() and not re.match(
            r"\s*(def |@|#|\"\"\"|raise NotImplementedError\(\))", line)]
        assert not code, f"{doc}, cell {i}: code outside the solution region: {code[:3]}"
    reader = versions.reader(source, book.slug(doc))
    assert all(versions.BEGIN not in c.source for c in reader.cells)


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_visible_code_fits_the_column(doc):
    long = [(i, line) for i, c in enumerate(book.source_notebook(doc).cells)
            if c.cell_type == "code" and not HIDDEN & set(c.metadata.get("tags", []))
            for line in c.source.split("\n") if len(line) > MAX_CODE_LINE]
    assert not long, f"{doc}: visible code lines over {MAX_CODE_LINE} characters (cut at the column): {long[:3]}"


def test_no_page_says_brief():
    pages = [p for p in (ROOT / "book").rglob("*.md")]
    said = [p.relative_to(ROOT) for p in pages if re.search(r"\bbrief\b", p.read_text(), re.I)]
    assert not said, f"pages that mention the brief: {said}"


def test_stubbing_keeps_indentation_and_code_around_the_solution():
    src = f"def f(x):\n    y = 1\n    {versions.BEGIN}\n    return x + y\n    {versions.END}\n"
    assert versions.stub_solutions(src) == "def f(x):\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src, metadata={"tags": ["solution"]})])
    with pytest.raises(ValueError, match="autograded"):
        versions.exercise_cells(nb)
    nb.cells.append(nbformat.v4.new_code_cell("check(f)", metadata={"tags": ["autograde"]}))
    with pytest.raises(ValueError, match="points"):
        versions.exercise_cells(nb)
    nb.cells[1].metadata["points"] = 2
    assert versions.exercise_cells(nb) == ([0], [1])
    nb.cells.append(nbformat.v4.new_code_cell(f"{versions.BEGIN}\nx\n{versions.END}"))
    with pytest.raises(ValueError, match="not tagged 'solution'"):
        versions.exercise_cells(nb)


def test_colab_url_is_built_from_the_config_at_the_release_tag():
    """The badge opens the notebook of the release whose package the set-up cell installs."""
    url, _ = repository_url(ROOT)
    base = f"https://colab.research.google.com/github/{url.removeprefix('https://github.com/')}/blob/v{__version__}"
    assert colab_url("best-of-n", ROOT) == f"{base}/notebooks/best-of-n.ipynb"
    assert colab_url("best-of-n", ROOT, student=True) == f"{base}/notebooks/student/best-of-n.ipynb"
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


@pytest.mark.parametrize("doc", CHAPTERS)
def test_equation_labels_are_lowercase(doc):
    """Sphinx lower-cases labels, so a checker citing ``eq("x-J")`` would miss the printed number."""
    import re

    labels = re.findall(r"^:label:\s*(\S+)", (ROOT / f"{doc}.md").read_text(), flags=re.M)
    assert all(label == label.lower() for label in labels), [l for l in labels if l != l.lower()]


def test_printed_lines_wider_than_the_column_are_problems():
    wide, narrow = "x" * (book.COLUMN + 1), "x" * book.COLUMN
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{narrow}\n{wide}\n"),
                    nbformat.v4.new_output("execute_result", data={"text/plain": wide, "text/html": "<table/>"}),
                    nbformat.v4.new_output("execute_result", data={"text/plain": wide})]
    problems = book.output_problems(nbformat.v4.new_notebook(cells=[cell]))
    # the stdout line and the plain-text result; a table shown as HTML is not printed text
    assert len(problems) == 2 and all(f"{book.COLUMN + 1} characters" in p for p in problems)


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_notebooks_number_equations_as_the_page_does(doc):
    """In Jupyter, Colab and nbgrader's feedback a checker's "eq. (6)" must be findable: every
    labelled equation carries its page number as a \\tag, every {eq} reference reads "(n)"."""
    numbers = book.equation_numbers(doc)
    for path, nb in book.notebook_versions(doc):
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert "```{math}" not in text and "{eq}`" not in text, f"{path.name}: raw MyST maths left"
        assert sorted(int(n) for n in re.findall(r"\\tag\{(\d+)\}", text)) == sorted(numbers.values()), path.name
        if "student" in path.parts:
            assert "here its solution is folded" not in " ".join(text.split()), f"{path.name}: it is a stub"


def test_number_equations_refuses_an_unknown_label():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("see {eq}`nowhere`")])
    with pytest.raises(ValueError, match="numbers"):
        versions.number_equations(nb, {})
    block = nbformat.v4.new_markdown_cell("```{math}\n:label: a\n:nowrap:\nx = 1\n```\nand {eq}`a`.")
    out = versions.number_equations(nbformat.v4.new_notebook(cells=[block]), {"a": 4})
    assert out.cells[0].source == "$$\nx = 1\n\\tag{4}\n$$\nand (4)."


def test_strict_grading_rewrites_the_checker_call():
    assert versions.strict_grading("# note\nex.check_pmf(pmf)") == (
        'from companion.exercises.grade import graded\n# note\ngraded(ex, "check_pmf", pmf)')
    assert versions.strict_grading("ex.check_ties(decide, tie_counterexample)").endswith(
        'graded(ex, "check_ties", decide, tie_counterexample)')
    with pytest.raises(ValueError, match="source"):
        versions.strict_grading("print(1)")
