"""Answers that hand an exercise to the package: every checker module names, in ``REFERENCES``,
the package functions that answer each of its exercises, and the strict grader
(:mod:`companion.exercises.grade`) gives an answer that runs one of them 0 points."""

import importlib
import re
import pkgutil

import numpy as np
import pytest

import companion.exercises as exercises
from companion.exercises.grade import ExerciseFailed, _resolve, graded

MODULES = sorted(m.name for m in pkgutil.iter_modules(exercises.__path__) if m.name != "grade")
@pytest.mark.parametrize("name", MODULES)
def test_every_checker_names_the_package_functions_that_answer_it(name):
    module = importlib.import_module(f"companion.exercises.{name}")
    checkers = {n for n in module.__all__ if n.startswith("check_")}
    assert set(module.REFERENCES) == checkers, f"{name}: REFERENCES must have one entry per checker"
    for qualnames in module.REFERENCES.values():
        for q in qualnames:
            assert q.startswith("companion.") and not q.startswith("companion.exercises"), q
            assert callable(_resolve(q)), q


def test_the_strict_grader_refuses_aliases_wrappers_and_wrong_answers_and_passes_a_right_one():
    import companion.best_of_n as bon
    from companion.exercises import best_of_n as ex

    def kl_hat(eps, n):  # the chapter's solution, written out
        eps = np.asarray(eps, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_stay = n * np.log1p(-eps)
            stay, pick = np.exp(log_stay), -np.expm1(log_stay)
            rest = stay * (np.log(n) + (n - 1) * np.log1p(-eps) - (n - 1) / n)
        return np.where(eps < 1, rest, 0.0) + pick * np.log(pick / eps)

    def wrapper(eps, n):
        return bon.kl_estimator(eps, n)

    assert repr(graded(ex, "check_estimator", kl_hat)) == "2"
    for answer, says in ((bon.kl_estimator, "hands the work to the package"),
                         (wrapper, "hands the work to the package"),
                         (lambda eps, n: np.zeros_like(eps), "eq. (6) gives")):
        with pytest.raises(ExerciseFailed, match=re.escape(says)):
            graded(ex, "check_estimator", answer)


def test_the_strict_grader_ignores_patches_in_the_calling_process(monkeypatch):
    from companion.exercises import Report
    from companion.exercises import best_of_n as ex

    monkeypatch.setattr(ex, "check_estimator", lambda fn: Report("faked", points=2, checks=1))
    monkeypatch.setattr(Report, "__repr__", lambda self: "2")
    with pytest.raises(ExerciseFailed, match="0 of 2 points"):
        graded(ex, "check_estimator", lambda eps, n: eps)


def test_the_strict_grader_refuses_bad_arguments():
    with pytest.raises(ValueError, match="module"):
        graded("numpy", "check_estimator", None)
    with pytest.raises(ValueError, match="checker"):
        graded("companion.exercises.best_of_n", "kl_estimator", None)
    with pytest.raises(ValueError, match="checker"):
        graded("companion.exercises.best_of_n", "check_nothing", None)


def _chapter_of(name: str):
    from tools import book

    line = f"from companion.exercises import {name} as ex"
    (doc,) = [d for d in book.chapters() if line in (book.ROOT / f"{d}.md").read_text()]
    return (book.ROOT / f"{doc}.md").read_text()


@pytest.mark.parametrize("name", MODULES)
def test_no_chapter_prints_the_code_that_answers_its_exercises(name):
    module = importlib.import_module(f"companion.exercises.{name}")
    shown = set(re.findall(r"^:pyobject:\s*(\S+)", _chapter_of(name), re.M))
    answers = {".".join(q.split(".")[-k:]) for qualnames in module.REFERENCES.values() for q in qualnames
               for k in (1, 2)}  # a function's name, or a method's Class.name
    assert not shown & answers, f"{name}: the chapter literalincludes the answer to an exercise: {shown & answers}"
