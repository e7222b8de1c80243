"""Checkers for the chapters' exercises (one module per chapter, e.g. :mod:`.best_of_n`).

A checker runs a student's answer on cases chosen to expose the usual mistakes and returns a
:class:`Report`. The report says what is wrong and why, not only pass or fail; in a notebook it
renders as a short list, and ``report.passed`` is what an autograder reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Report"]


@dataclass
class Report:
    """The verdict of a checker: ``passed`` and the problems found, each explained."""

    exercise: str
    problems: list[str] = field(default_factory=list)
    checks: int = 0

    @property
    def passed(self) -> bool:
        return self.checks > 0 and not self.problems

    def check(self, ok: bool, problem: str) -> bool:
        """Count one check; when it fails, keep ``problem`` (the explanation for the student)."""
        self.checks += 1
        if not ok:
            self.problems.append(problem)
        return ok

    def __str__(self) -> str:
        if self.passed:
            return f"{self.exercise}: correct ({self.checks} checks passed)."
        lines = [f"{self.exercise}: {len(self.problems)} problem(s) in {self.checks} checks:"]
        return "\n".join(lines + [f"  - {p}" for p in self.problems])

    def _repr_markdown_(self) -> str:
        if self.passed:
            return f"**{self.exercise}: correct** ({self.checks} checks passed)."
        items = "\n".join(f"- {p}" for p in self.problems)
        return f"**{self.exercise}: {len(self.problems)} problem(s)** in {self.checks} checks:\n\n{items}"
