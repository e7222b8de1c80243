"""A student's notebook runs top to bottom as shipped (every exercise reported as not done, with
its explanation) and, with the instructor's solutions filled in, passes every checker."""

import jupytext
import nbformat
import papermill
import pytest

from tools import book, versions

DOC = "book/alignment/best-of-n"  # the template chapter: seconds to run


def _graded_outputs(nb):
    graded = [c for c in nb.cells if "autograde" in c.metadata.get("tags", [])]
    assert graded, "no autograded cell"
    results = []
    for cell in graded:
        (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
        results.append((cell.metadata["points"], result.data["text/plain"], result.data.get("text/markdown", "")))
    return results


@pytest.mark.parametrize("filled_in", [False, True], ids=["as-shipped", "filled-in"])
def test_student_notebook_runs_and_grades(tmp_path, monkeypatch, filled_in):
    monkeypatch.setenv("BOOK_BUILD_DIR", str(tmp_path))
    source = book.source_notebook(DOC)
    nb = versions.nbgrader_source(source, "best-of-n") if filled_in else versions.student(source, "best-of-n")
    if not filled_in:  # what is shipped in notebooks/student/ is exactly this notebook
        shipped = nbformat.read(book.student_notebook(DOC), as_version=4)
        _, numbered = book.notebook_versions(DOC)[1]  # the student's, equations numbered
        assert [c.source for c in shipped.cells] == [c.source for c in numbered.cells]
    path = tmp_path / "student.ipynb"
    jupytext.write(versions.clean(nb), path, fmt="ipynb")
    papermill.execute_notebook(str(path), str(tmp_path / "out.ipynb"), kernel_name="python3",
                               cwd=str(book.ROOT / "book" / "alignment"), progress_bar=False)
    for points, score, markdown in _graded_outputs(nbformat.read(tmp_path / "out.ipynb", as_version=4)):
        if filled_in:
            assert score == f"{points:g}" and "correct" in markdown
        else:  # nbgrader reads the score from text/plain: 0 for an exercise not done
            assert score == "0" and "not done yet" in markdown and "NotImplementedError" in markdown
