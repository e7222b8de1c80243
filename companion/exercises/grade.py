"""Grades that a student's notebook cannot change: a checker run in a fresh Python process.

An nbgrader release calls :func:`graded` in its locked autograded cells instead of the
checker itself. The student's answers travel to a new interpreter (pickled by value with
``cloudpickle``), which imports the checker afresh from the installed package and runs it there:

* nothing a solution cell patches in the kernel (a checker, :class:`~companion.exercises.Report`
  or its ``__repr__``) reaches the process that decides the grade;
* what the answer writes to stderr (a logging line, a warning) stays in that process, so a
  correct answer never loses its points to nbgrader's rule that stderr means failure;
* a wrong or unfinished answer raises :class:`ExerciseFailed`, so nbgrader's own pass/fail
  decides (0 points, the checker's explanation in the feedback); a right one shows its points;
* an answer that hands the work to the package scores 0: an answer that *is* a ``companion``
  function, or whose code runs one of the functions its checker module declares in
  ``REFERENCES`` (``{checker: (qualified names of the package functions that answer it)}``),
  directly, through an alias or through a wrapper.

What this does not stop: a solution cell can still rewrite this module, ``subprocess`` or the
kernel's display machinery. nbgrader runs the submitted notebook as it is and cannot defend
against code that patches the grader at run time; an instructor who needs that guarantee grades
in a clean kernel that runs only the solution cells.

Run as ``python -m companion.exercises.grade``: reads the pickled ``(module, checker, answers)``
from stdin and writes the report as JSON to stdout.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

__all__ = ["graded", "Graded", "ExerciseFailed"]


class ExerciseFailed(AssertionError):
    """A wrong, unfinished or delegated answer: the cell fails, and nbgrader gives it 0 points."""


class Graded:
    """A passed exercise as the autograded cell shows it: its report, and its points as plain text
    (what nbgrader reads as the score)."""

    def __init__(self, result: dict):
        self.result = result

    def __repr__(self) -> str:
        return f"{self.result['score']:g}"

    def _repr_markdown_(self) -> str:
        return f"**{self.result['exercise']}: correct** ({self.result['checks']} checks passed; " \
               f"{self.result['score']:g} of {self.result['points']:g} points, graded in a fresh process)."


def _message(result: dict) -> str:
    head = f"{result['exercise']}: 0 of {result['points']:g} points."
    return "\n".join([head] + [f"  - {p}" for p in result["problems"]])


def graded(module, checker: str, *answers) -> Graded:
    """Run ``module.checker(*answers)`` in a fresh interpreter; :class:`Graded` when it passes.

    ``module`` is a checker module of :mod:`companion.exercises` (the module or its name) and
    ``checker`` the name of one of its ``check_*`` functions. Raises :class:`ExerciseFailed`
    with the checker's explanation when the answer is wrong, unfinished or delegated to the
    package, and ``ValueError`` for a module or checker that does not exist.
    """
    import cloudpickle

    name = module if isinstance(module, str) else getattr(module, "__name__", None)
    if not isinstance(name, str) or not name.startswith("companion.exercises."):
        raise ValueError(f"module: expected a checker module of companion.exercises, got {module!r}")
    if not isinstance(checker, str) or not checker.startswith("check_"):
        raise ValueError(f"checker: expected the name of a check_* function, got {checker!r}")
    try:
        payload = cloudpickle.dumps((name, checker, answers))
    except Exception as err:  # an answer that holds an open file, a generator, a connection...
        raise ExerciseFailed(f"{checker}: your answer could not be sent to the grader ({type(err).__name__}: "
                             f"{err}); keep the function self-contained.") from None
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-m", "companion.exercises.grade"], input=payload,
                          capture_output=True, env=env, timeout=900)
    try:
        result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise ExerciseFailed(f"{checker}: the grading process ended without a report (exit status "
                             f"{proc.returncode}):\n" + "\n".join(tail)) from None
    if "error" in result:
        raise ValueError(result["error"])
    if not result["passed"]:
        raise ExerciseFailed(_message(result))
    return Graded(result)


def _resolve(qualname: str):
    """The object a dotted name names: the longest importable module prefix, then attributes
    (``companion.gmail.LoRALinear.forward``)."""
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ValueError(f"qualname: {qualname!r} names no importable object")


class _Watch:
    """Which of the checker's declared references (``REFERENCES`` of its module: the package
    functions that answer the exercise) run while the student's code runs, inside
    :meth:`Report.call`, directly or through an alias or a wrapper."""

    def __init__(self, references):
        self.codes = {getattr(fn, "__code__", None): name for name, fn in references.items()} if references else {}
        self.codes.pop(None, None)
        self.hits: set[str] = set()

    def __call__(self, frame, event, arg):
        if event == "call" and frame.f_code in self.codes:
            from companion import exercises

            if exercises._ANSWER_DEPTH[0] > 0:
                self.hits.add(self.codes[frame.f_code])


def _run(payload: bytes) -> dict:
    import cloudpickle

    from companion.exercises import Report

    name, checker, answers = cloudpickle.loads(payload)
    try:
        module = importlib.import_module(name)
        check = getattr(module, checker)
    except (ImportError, AttributeError):
        return {"error": f"checker: no {checker} in {name}"}
    references = {q: _resolve(q) for q in getattr(module, "REFERENCES", {}).get(checker, ())}
    watch = _Watch(references)
    sys.setprofile(watch)
    try:
        report = check(*answers)
    finally:
        sys.setprofile(None)
    if not isinstance(report, Report):
        return {"error": f"checker: {name}.{checker} returned {type(report).__name__}, not a Report"}
    package = [f"{a.__module__}.{a.__qualname__}" for a in answers if callable(a)
               and getattr(a, "__module__", "").startswith("companion.")]
    delegated = sorted(watch.hits or package)
    problems = list(report.problems)
    if delegated:
        problems.append("your answer hands the work to the package (" + ", ".join(f"`{d}`" for d in delegated)
                        + "), whose result the checker compares with: write the computation yourself.")
    passed = report.passed and not delegated
    return {"exercise": report.exercise, "points": float(report.points), "checks": report.checks,
            "passed": passed, "score": float(report.points) if passed else 0.0, "problems": problems}


if __name__ == "__main__":
    result = _run(sys.stdin.buffer.read())
    sys.stdout.write("\n" + json.dumps(result) + "\n")
