"""The course kit under nbgrader itself: a course made by ``python -m tools.book nbgrader``,
``generate_assignment``, simulated students' submissions, ``autograde`` and ``generate_feedback``.

Students, on three chapters: one hands in the release untouched (0 points), one the instructor's
solutions (every point), one gets exercise 1 wrong (its points lost, the checker's explanation in
the feedback), one hands exercise 1 to the package function that answers it (0 for that
exercise). On the first chapter, two more try to fake the grade from a solution cell: one patches
``Report.__repr__`` to print full marks, one replaces the chapter's checkers by ones that always
pass; both get 0, because the grade is decided in a fresh process (:mod:`companion.exercises.grade`).
A last one answers correctly with a function that also logs to stderr: every point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools import book, versions

pytest.importorskip("nbgrader")

# Exercise 1 of each chapter, answered wrongly and by delegation to the package.
CHAPTERS = {
    "best-of-n": dict(
        wrong="def kl_hat(eps, n):\n    return np.zeros_like(np.asarray(eps, dtype=float))",
        explanation="gives 0.193147",
        delegate="from companion.best_of_n import kl_estimator\n\n\ndef kl_hat(eps, n):\n"
                 "    return kl_estimator(eps, n)"),
    "facttest": dict(
        wrong="def index(n0, alpha, delta):\n    return int(np.ceil((n0 + 1) * (1 - alpha)))",
        explanation="expected",
        delegate="from companion.facttest import order_statistic_index as index"),
    "catekv": dict(
        wrong="def cv(attn_mid, chunk, top_threshold):\n    return torch.zeros(attn_mid.shape[0])",
        explanation="Exercise 1",
        delegate="from companion.catekv.heads import head_cv\n\n\ndef cv(attn_mid, chunk, top_threshold):\n"
                 "    return head_cv(attn_mid, chunk, top_threshold)"),
}
REPR_PATCH = ("from companion.exercises import Report\n"
              "Report.__repr__ = lambda self: f'{self.points:g}'\n")
STDERR_TOO = ("\n\n_kl_hat = kl_hat\n\n\ndef kl_hat(eps, n):\n    import logging\n\n"
              "    logging.warning('a line on stderr does not cost points')\n    return _kl_hat(eps, n)")
CHECKER_PATCH = ("import companion.exercises as _exercises\n"
                 "for _name in [n for n in dir(ex) if n.startswith('check_')]:\n"
                 "    setattr(ex, _name, lambda *a, **k: _exercises.Report('faked', points=3, checks=1))\n")


def _nbgrader(course: Path, *args: str) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--force"], cwd=course, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"nbgrader {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def _solutions(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution")]


def _submissions(course: Path, slug: str) -> dict[str, float]:
    """Write every simulated student's submission of ``slug``; return the points each must get."""
    release = nbformat.read(course / "release" / slug / f"{slug}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / slug / f"{slug}.ipynb", as_version=4)
    stubs, answers = _solutions(release), _solutions(source)
    points = [c.metadata["nbgrader"]["points"] for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")]
    correct = [versions._strip_delimiters(source.cells[i].source) for i in answers]
    case = CHAPTERS[slug]
    students = {
        "untouched": (list(release.cells[i].source for i in stubs), 0.0),
        "correct": (correct, float(sum(points))),
        "wrong": ([case["wrong"], *correct[1:]], float(sum(points[1:]))),
        "delegates": ([case["delegate"], *correct[1:]], float(sum(points[1:]))),
    }
    if slug == "best-of-n":
        stubbed = [release.cells[i].source for i in stubs]
        students["repr-patch"] = ([REPR_PATCH + stubbed[0], *stubbed[1:]], 0.0)
        students["checker-patch"] = ([CHECKER_PATCH + stubbed[0], *stubbed[1:]], 0.0)
        students["stderr"] = ([correct[0] + STDERR_TOO, *correct[1:]], float(sum(points)))
    expected = {}
    for student, (cells, score) in students.items():
        nb = nbformat.read(course / "release" / slug / f"{slug}.ipynb", as_version=4)
        for i, text in zip(stubs, cells, strict=True):
            nb.cells[i].source = text
        folder = course / "submitted" / student / slug
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{slug}.ipynb")
        expected[student] = score
    return expected


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    book.write_nbgrader_source(course)
    for folder in (course / "source").iterdir():  # only the three chapters of this test
        if folder.name not in CHAPTERS:
            shutil.rmtree(folder)
    expected = {}
    for slug in CHAPTERS:
        _nbgrader(course, "generate_assignment", slug)
        expected[slug] = _submissions(course, slug)
        _nbgrader(course, "autograde", slug)
        _nbgrader(course, "generate_feedback", slug)
    return course, expected


def test_the_course_has_its_nbgrader_config(graded_course):
    course, _ = graded_course
    assert "CourseDirectory.root" in (course / "nbgrader_config.py").read_text()


@pytest.mark.parametrize("slug", list(CHAPTERS))
def test_grades_reward_answers_and_nothing_else(graded_course, slug):
    from nbgrader.api import Gradebook

    course, expected = graded_course
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        got = {student: gb.find_submission(slug, student).score for student in expected[slug]}
    assert got == pytest.approx(expected[slug]), got


@pytest.mark.parametrize("slug", list(CHAPTERS))
def test_the_feedback_explains_the_wrong_answer(graded_course, slug):
    course, _ = graded_course
    feedback = (course / "feedback" / "wrong" / slug / f"{slug}.html").read_text()
    assert "ExerciseFailed" in feedback and CHAPTERS[slug]["explanation"] in feedback
    delegated = (course / "feedback" / "delegates" / slug / f"{slug}.html").read_text()
    assert "hands the work to the package" in delegated


def test_the_release_badge_opens_the_assignment(graded_course):
    course, _ = graded_course
    release = nbformat.read(course / "release" / "best-of-n" / "best-of-n.ipynb", as_version=4)
    assert any('colab_badge("best-of-n", student=True)' in c.source for c in release.cells)
    assert not any('colab_badge("best-of-n")' in c.source for c in release.cells)
