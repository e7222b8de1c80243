"""Every exercise checker of the book treats the student's stub as an exercise not done yet.

A student's notebook ships each answer as ``raise NotImplementedError()``; its checker must say
"not done yet", score 0 (what nbgrader reads from the cell) and let the notebook run on.
"""

import importlib
import inspect
import pkgutil

import pytest

import companion.exercises

CHECKERS = [
    (f"{module.name}.{name}", fn)
    for module in pkgutil.iter_modules(companion.exercises.__path__)
    for name, fn in inspect.getmembers(importlib.import_module(f"companion.exercises.{module.name}"),
                                       inspect.isfunction)
    if name.startswith("check_") and fn.__module__ == f"companion.exercises.{module.name}"
]


def test_every_chapter_has_checkers():
    modules = {name.split(".")[0] for name, _ in CHECKERS}
    assert len(modules) >= 12 and len(CHECKERS) >= 24


@pytest.mark.parametrize("checker", [fn for _, fn in CHECKERS], ids=[name for name, _ in CHECKERS])
def test_a_stub_is_not_done_and_scores_zero(checker):
    def stub(*args, **kwargs):
        raise NotImplementedError()

    required = [q for q in inspect.signature(checker).parameters.values()
                if q.default is q.empty and q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
    report = checker(*[stub] * len(required))  # every answer of the exercise is still a stub
    assert report.not_done and not report.passed and repr(report) == "0"
    assert "not done yet" in report._repr_markdown_() and "NotImplementedError" in str(report)
