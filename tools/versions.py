"""The three versions of a chapter notebook, made from its Markdown source in ``book/``.

A chapter marks its exercises with two cell tags:

* ``solution`` -- a code cell whose answer sits between ``### BEGIN SOLUTION`` and
  ``### END SOLUTION`` (nbgrader's delimiters), inside a function the checker calls;
* ``autograde`` -- the cell that calls the exercise's checker, with a ``points`` metadata
  entry (``:points: 2`` in the cell's options); its last line is the checker call, whose
  plain-text output is the score nbgrader reads.

From these:

* the **reader's** version (the HTML book and ``notebooks/<slug>.ipynb``, what Colab opens): the
  delimiters are removed and the solution cells are folded;
* the **student's** version (``notebooks/student/<slug>.ipynb``): every solution region becomes
  ``raise NotImplementedError()``, as nbgrader's ``generate_assignment`` would write it, and the
  cells carry nbgrader's metadata (solution cells editable, autograded cells locked, points);
* the **nbgrader source** (``python -m tools.book nbgrader DIR``): the reader's version with the
  delimiters kept and nbgrader's metadata, for instructors who run nbgrader themselves.
"""

from __future__ import annotations

import copy
import re

import nbformat

__all__ = ["BEGIN", "END", "STUB", "reader", "student", "nbgrader_source", "exercise_cells", "stub_solutions",
           "number_equations", "strict_grading"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
_BADGE = re.compile(r'colab_badge\("([a-z0-9-]+)"\)')
_MATH = re.compile(r"^```\{math\}[ \t]*\n:label:[ \t]*(\S+)[ \t]*\n((?::.*\n)*)(.*?)\n```[ \t]*$", re.M | re.S)
_EQ_REF = re.compile(r"\{eq\}`([^`<>]+)`")
_FOLDED = re.compile(r"In\s+the\s+student's\s+notebook\s+the\s+function\s+is\s+a\s+stub\s+to\s+fill\s+in;"
                     r"\s+here\s+its\s+solution\s+is\s+folded\.")
_STUB_SAYS = "Each function below is a stub: replace its body with your answer, then run the checker's cell."
_CHECK_CALL = re.compile(r"^(\w+)\.(check_\w+)\((.*)\)[ \t]*$")


def _tags(cell) -> list[str]:
    return cell.metadata.setdefault("tags", [])


def exercise_cells(nb, where: str = "notebook") -> tuple[list[int], list[int]]:
    """Indices of the solution and autograded cells; raises ``ValueError`` on a malformed exercise."""
    solutions, graded = [], []
    for i, cell in enumerate(nb.cells):
        tags, marked = cell.metadata.get("tags", []), BEGIN in cell.source or END in cell.source
        if "solution" in tags:
            if cell.cell_type != "code" or cell.source.count(BEGIN) == 0 or \
                    cell.source.count(BEGIN) != cell.source.count(END):
                raise ValueError(f"{where}, cell {i}: a 'solution' cell needs matching {BEGIN!r}/{END!r} lines")
            solutions.append(i)
        elif marked:
            raise ValueError(f"{where}, cell {i}: solution delimiters in a cell not tagged 'solution'")
        if "autograde" in tags:
            points = cell.metadata.get("points")
            if isinstance(points, bool) or not isinstance(points, (int, float)) or points <= 0:
                raise ValueError(f"{where}, cell {i}: an 'autograde' cell needs positive 'points' metadata, "
                                 f"got {points!r}")
            graded.append(i)
    if len(solutions) != len(graded):
        raise ValueError(f"{where}: {len(solutions)} solution cells but {len(graded)} autograded cells; "
                         "each exercise has one of each")
    return solutions, graded


def stub_solutions(source: str) -> str:
    """Replace every solution region (delimiters included) by the stub, at the delimiter's indentation."""
    out, inside = [], False
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + s for s in STUB]
            inside = True
        elif stripped == END:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def _strip_delimiters(source: str) -> str:
    return "\n".join(line for line in source.split("\n") if line.strip() not in (BEGIN, END))


def _nbgrader_metadata(nb, slug: str) -> None:
    solutions, graded = exercise_cells(nb, slug)
    for k, (i, j) in enumerate(zip(solutions, graded), start=1):
        nb.cells[i].metadata["nbgrader"] = {"grade": False, "grade_id": f"{slug}-ex{k}-solution", "locked": False,
                                            "schema_version": 3, "solution": True, "task": False}
        nb.cells[j].metadata["nbgrader"] = {"grade": True, "grade_id": f"{slug}-ex{k}-check", "locked": True,
                                            "points": nb.cells[j].metadata["points"], "schema_version": 3,
                                            "solution": False, "task": False}


def number_equations(nb, numbers: dict[str, int]):
    """Equations as Jupyter, Colab and nbgrader's feedback show them: every labelled ``{math}``
    block becomes ``$$ ... \\tag{n} $$`` and every ``{eq}`label``` reference "(n)", with the numbers
    the HTML page prints (``numbers``: ``{label: n}``), so "eq. (6)" in a checker's message can be
    found in the notebook. Raises ``ValueError`` for a label ``numbers`` does not know."""
    nb = copy.deepcopy(nb)

    def number(label: str) -> int:
        if label not in numbers:
            raise ValueError(f"numbers: no number for equation label {label!r}")
        return numbers[label]

    def block(match) -> str:
        return f"$$\n{match[3].strip()}\n\\tag{{{number(match[1])}}}\n$$"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _EQ_REF.sub(lambda m: f"({number(m[1])})", _MATH.sub(block, cell.source))
    return nb


def strict_grading(source: str) -> str:
    """An autograded cell whose checker call ``ex.check_x(answer)`` becomes
    ``graded(ex, "check_x", answer)`` (:mod:`companion.exercises.grade`: a fresh process decides,
    and a wrong answer fails the cell)."""
    lines = source.rstrip().split("\n")
    call = _CHECK_CALL.match(lines[-1])
    if call is None:
        raise ValueError(f"source: an autograded cell must end with a checker call ex.check_*(...), got {lines[-1]!r}")
    args = f", {call[3]}" if call[3].strip() else ""
    lines[-1] = f'graded({call[1]}, "{call[2]}"{args})'
    return "\n".join(["from companion.exercises.grade import graded", *lines])


def _for_students(nb) -> None:
    """What a student's copy says differently: its Colab badge opens the assignment, and the
    exercises' preamble speaks of stubs, not of folded solutions."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = _BADGE.sub(r'colab_badge("\1", student=True)', cell.source)
        else:
            cell.source = _FOLDED.sub(_STUB_SAYS, cell.source)


def reader(nb, slug: str):
    """The reader's version: delimiters removed, solutions folded (a toggle in the HTML, a hidden
    source in Jupyter)."""
    nb = copy.deepcopy(nb)
    solutions, _ = exercise_cells(nb, slug)
    for i in solutions:
        cell = nb.cells[i]
        cell.source = _strip_delimiters(cell.source)
        if not {"hide-input", "hide-cell"} & set(_tags(cell)):
            _tags(cell).append("hide-input")
        cell.metadata["jupyter"] = {"source_hidden": True}
    return nb


def student(nb, slug: str):
    """The student's version: every solution region stubbed, nbgrader metadata, no folding, and the
    Colab badge pointing at the student's notebook."""
    nb = copy.deepcopy(nb)
    _nbgrader_metadata(nb, slug)
    solutions, _ = exercise_cells(nb, slug)
    for i in solutions:
        cell = nb.cells[i]
        cell.source = stub_solutions(cell.source)
        cell.metadata["tags"] = [t for t in _tags(cell) if t not in ("hide-input", "hide-cell")]
    _for_students(nb)
    return nb


def nbgrader_source(nb, slug: str):
    """The instructor's nbgrader source: solutions between nbgrader's delimiters, nbgrader metadata,
    checkers run through :func:`strict_grading`, and the Colab badge pointing at the student's notebook."""
    nb = copy.deepcopy(nb)
    _nbgrader_metadata(nb, slug)
    _, graded = exercise_cells(nb, slug)
    for j in graded:
        nb.cells[j].source = strict_grading(nb.cells[j].source)
    _for_students(nb)
    return nb


def clean(nb):
    """No outputs, no execution counts, stable cell ids (regenerating a notebook changes nothing)."""
    nb.metadata.pop("jupytext", None)
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.validate(nb)
    return nb
