"""Checkers for the chapters' exercises (one module per chapter, e.g. :mod:`.best_of_n`).

A checker runs a student's answer on cases chosen to expose the usual mistakes and returns a
:class:`Report`. The report says what is wrong and why, not only pass or fail. Solutions are
not here: they live in the chapter's source (folded in the reader's book, stubbed out in the
student's notebook, see ``notebooks/student/``).

**Grading.** In a notebook a report renders as a short list (its Markdown), while its plain-text
form is its score, a number between 0 and ``points``. nbgrader's autograder reads exactly that
from an autograded cell whose last line is the checker call, so it gives partial credit (0 for a
wrong or unfinished exercise) without the cell having to raise; a student's notebook therefore
runs top to bottom whatever the state of its exercises. An nbgrader release grades through
:func:`.grade.graded` instead: the checker runs in a fresh process that the student's notebook
cannot patch, and a wrong answer fails its cell.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from functools import cache
from importlib import resources
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Report", "NOT_DONE", "eq"]

NOT_DONE = "not done yet"
_ANSWER_DEPTH = [0]  # > 0 while Report.call runs a student's code (read by .grade to spot delegation)


@cache
def _equation_numbers() -> dict[str, int]:
    chapters = json.loads(resources.files("companion.exercises").joinpath("equations.json").read_text())
    return {label: number for numbers in chapters.values() for label, number in numbers.items()}


def eq(label: str) -> str:
    """How the book prints equation ``label``: ``eq("bon-pmf-ties")`` is ``"eq. (3)"``.

    The numbers come from ``equations.json``, written from the chapters by
    ``python -m tools.book notebooks`` and checked against the built HTML, so a checker's message
    cites the number the student sees on the page.
    """
    numbers = _equation_numbers()
    if label not in numbers:
        raise ValueError(f"label: no numbered equation {label!r} in the book's chapters")
    return f"eq. ({numbers[label]})"


@dataclass
class Report:
    """The verdict of a checker: ``passed``, the problems found (each explained) and the score."""

    exercise: str
    points: float = 1.0
    problems: list[str] = field(default_factory=list)
    checks: int = 0
    not_done: bool = False

    @property
    def passed(self) -> bool:
        return self.checks > 0 and not self.problems and not self.not_done

    @property
    def score(self) -> float:
        return float(self.points) if self.passed else 0.0

    def check(self, ok: bool, problem: str) -> bool:
        """Count one check; when it fails, keep ``problem`` (the explanation for the student)."""
        self.checks += 1
        if not ok:
            self.problems.append(problem)
        return bool(ok)

    def call(self, fn: Callable, *args, what: str) -> Any:
        """Call the student's ``fn(*args)`` quietly; on an exception return ``None`` and say why.

        ``NotImplementedError`` (the stub of a student's notebook) marks the exercise as not done;
        any other exception, or an answer of ``None``, becomes a problem naming the call. Numerical warnings the student's code
        raises are silenced here: the report, not a stray stderr line, explains what went wrong.
        """
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                _ANSWER_DEPTH[0] += 1
                try:
                    value = fn(*args)
                finally:
                    _ANSWER_DEPTH[0] -= 1
        except NotImplementedError:
            self.not_done = True
            name = getattr(fn, "__name__", "your function")
            self.problems.append(f"`{name}` still raises NotImplementedError. Replace the stub in the cell above "
                                 "with your implementation, run that cell, then run this one again.")
            return None
        except Exception as err:  # the student's code may raise anything
            message = f": {err}" if str(err) else ""
            self.check(False, f"raised {type(err).__name__}{message} ({what})")
            return None
        if value is None:
            self.check(False, f"returned None ({what}); did you forget `return`?")
        return value

    def call_array(self, fn: Callable, *args, what: str) -> np.ndarray | None:
        """:meth:`call`, with the answer as a float array; ``None`` (and a problem) when it is not one."""
        got = self.call(fn, *args, what=what)
        if got is None:
            return None
        try:
            return np.asarray(got, dtype=float)
        except (TypeError, ValueError):
            self.check(False, f"returned {type(got).__name__}, not an array of numbers ({what})")
            return None

    def call_number(self, fn: Callable, *args, what: str, hint: str = "") -> float | None:
        """:meth:`call`, with the answer as one float (a 0-d tensor counts); ``None`` (and a
        problem, followed by ``hint``) when it is not a single number."""
        got = self.call(fn, *args, what=what)
        if got is None:
            return None
        try:
            return float(got.detach()) if hasattr(got, "detach") else float(got)
        except (TypeError, ValueError, RuntimeError):
            shape = tuple(getattr(got, "shape", ()))
            self.check(False, f"returned {type(got).__name__}" + (f" of shape {shape}" if shape else "")
                       + f", not a single number ({what}){hint}")
            return None

    def __str__(self) -> str:
        if self.passed:
            return f"{self.exercise}: correct ({self.checks} checks passed, {self._points()})."
        if self.not_done:
            return f"{self.exercise}: {NOT_DONE} ({self._points()}). {self.problems[-1]}"
        lines = [f"{self.exercise}: {len(self.problems)} problem(s) in {self.checks} checks ({self._points()}):"]
        return "\n".join(lines + [f"  - {p}" for p in self.problems])

    def __repr__(self) -> str:
        """The score alone: what nbgrader's autograder reads from the cell (partial credit)."""
        return f"{self.score:g}"

    def _points(self) -> str:
        return f"{self.score:g} of {self.points:g} point{'s' if self.points != 1 else ''}"

    def _repr_markdown_(self) -> str:
        if self.passed:
            return f"**{self.exercise}: correct** ({self.checks} checks passed; {self._points()})."
        if self.not_done:
            return f"**{self.exercise}: {NOT_DONE}** ({self._points()}). {self.problems[-1]}"
        items = "\n".join(f"- {p}" for p in self.problems)
        return (f"**{self.exercise}: {len(self.problems)} problem(s)** in {self.checks} checks "
                f"({self._points()}):\n\n{items}")
