"""The reproduction ledger: every claim a chapter checks, with the value measured in this run.

A chapter opens one :class:`Ledger` and calls :meth:`Ledger.record` once per claim::

    ledger = Ledger("best-of-n", scale=SCALE, seed=SEED)
    ledger.record("formula-upper-bounds-kl", statement="...", paper="KL <= log n - (n-1)/n",
                  measured=worst_excess, holds=worst_excess <= 0, note="max over 3,500 cases")

Each call rewrites ``<build dir>/ledger/<chapter>.json`` (the format of BOOK.md), so a
chapter that stops half-way still leaves the claims it reached. The build directory is
``$BOOK_BUILD_DIR`` if set, else ``_build/`` at the repository root (found by walking up
from the working directory), else ``./_build``.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from companion.book import repo_root

__all__ = ["Claim", "Ledger", "build_dir", "read_ledgers", "ledger_markdown", "summary_markdown"]

_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MAX_MEASURED_STR = 80


def build_dir() -> Path:
    """Where ledgers and timings go: ``$BOOK_BUILD_DIR``, else ``<repo root>/_build``."""
    env = os.environ.get("BOOK_BUILD_DIR")
    if env:
        return Path(env)
    return (repo_root() or Path.cwd()) / "_build"


@dataclass(frozen=True)
class Claim:
    """One row of the ledger (the JSON keys of BOOK.md)."""

    id: str
    statement: str
    paper: str
    measured: float | int | str
    holds: bool
    note: str = ""

    def _repr_markdown_(self) -> str:
        measured = f"{self.measured:.4g}" if isinstance(self.measured, float) else self.measured
        verdict = "holds" if self.holds else "**does not hold**"
        return f"Claim `{self.id}`: the paper says *{self.paper}*; measured here: **{measured}**, {verdict}."


def _clean_measured(measured: Any) -> float | int | str:
    if isinstance(measured, (bool, np.bool_)) or measured is None:
        raise ValueError(f"measured: expected a number or a short string, got {measured!r}")
    if isinstance(measured, numbers.Integral):
        return int(measured)
    if isinstance(measured, numbers.Real):
        value = float(measured)
        if not math.isfinite(value):
            raise ValueError(f"measured: expected a finite number, got {value}")
        return value
    if isinstance(measured, str):
        if not measured.strip() or len(measured) > _MAX_MEASURED_STR:
            raise ValueError(f"measured: a string must be 1..{_MAX_MEASURED_STR} characters, got {measured!r}")
        return measured
    raise ValueError(f"measured: expected a number or a short string, got {type(measured).__name__}")


class Ledger:
    """The claims of one chapter at one scale and seed."""

    def __init__(self, chapter: str, *, scale: str, seed: int, path: str | Path | None = None):
        if not isinstance(chapter, str) or not _ID.match(chapter):
            raise ValueError(f"chapter: expected the chapter's kebab-case slug, got {chapter!r}")
        if scale not in ("quick", "full"):
            raise ValueError(f"scale: expected 'quick' or 'full', got {scale!r}")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise ValueError(f"seed: expected an integer, got {seed!r}")
        self.chapter, self.scale, self.seed = chapter, scale, int(seed)
        self.path = Path(path) if path is not None else build_dir() / "ledger" / f"{chapter}.json"
        self.claims: list[Claim] = []

    def record(self, id: str, *, statement: str, paper: str, measured: Any, holds: Any,
               note: str = "") -> Claim:
        """Add one claim and rewrite the chapter's ledger file. Returns the recorded :class:`Claim`."""
        if not isinstance(id, str) or not _ID.match(id):
            raise ValueError(f"id: expected a short kebab-case id such as 'kl-upper-bound', got {id!r}")
        if any(c.id == id for c in self.claims):
            raise ValueError(f"id: claim {id!r} is already recorded in this chapter")
        for name, text in (("statement", statement), ("paper", paper)):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"{name}: expected a non-empty string, got {text!r}")
        if not isinstance(note, str):
            raise ValueError(f"note: expected a string, got {note!r}")
        if not isinstance(holds, (bool, np.bool_)):
            raise ValueError(f"holds: expected a bool computed in this run, got {holds!r}")
        claim = Claim(id, statement.strip(), paper.strip(), _clean_measured(measured), bool(holds), note.strip())
        self.claims.append(claim)
        self.write()
        return claim

    def to_dict(self) -> dict[str, Any]:
        return {"chapter": self.chapter, "scale": self.scale, "seed": self.seed,
                "claims": [asdict(c) for c in self.claims]}

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(self.path)
        return self.path

    def summary(self) -> str:
        held = sum(c.holds for c in self.claims)
        return f"{self.chapter}: {held} of {len(self.claims)} claims hold at {self.scale} scale (seed {self.seed})"

    def _repr_markdown_(self) -> str:
        rows = ["| claim | paper | measured | holds |", "|---|---|---|---|"]
        for c in self.claims:
            measured = f"{c.measured:.4g}" if isinstance(c.measured, float) else str(c.measured)
            rows.append(f"| `{c.id}` | {c.paper} | {measured} | {'yes' if c.holds else '**no**'} |")
        return self.summary() + "\n\n" + "\n".join(rows)


def read_ledgers(folder: str | Path | None = None, order: list[str] | None = None) -> list[dict[str, Any]]:
    """Every chapter ledger in ``folder`` (default ``build_dir() / 'ledger'``).

    Sorted by ``order`` (chapter slugs, e.g. the reading order of ``_toc.yml``), chapters
    not in it last, alphabetically.
    """
    folder = Path(folder) if folder is not None else build_dir() / "ledger"
    rank = {slug: i for i, slug in enumerate(order or [])}
    ledgers = []
    for f in sorted(folder.glob("*.json")):
        data = json.loads(f.read_text())
        if not {"chapter", "scale", "seed", "claims"} <= set(data):
            raise ValueError(f"{f}: not a chapter ledger (keys {sorted(data)})")
        ledgers.append(data)
    return sorted(ledgers, key=lambda led: (rank.get(led["chapter"], len(rank)), led["chapter"]))


def _cell(value: Any) -> str:
    if isinstance(value, float):
        value = f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def ledger_markdown(ledgers: list[dict[str, Any]]) -> str:
    """One Markdown table of every claim: chapter, claim, the paper's value beside ours, verdict."""
    rows = ["| chapter | claim | the paper | measured here | holds | how it was measured |",
            "|---|---|---|---|---|---|"]
    for led in ledgers:
        for c in led["claims"]:
            verdict = "yes" if c["holds"] else "**no**"
            rows.append(f"| {led['chapter']} ({led['scale']}) | **{_cell(c['id'])}**: {_cell(c['statement'])} "
                        f"| {_cell(c['paper'])} | {_cell(c['measured'])} | {verdict} | {_cell(c['note'])} |")
    return "\n".join(rows)


def summary_markdown(ledgers: list[dict[str, Any]]) -> str:
    """One row per chapter: how many of its claims hold, at which scale and seed, and the total."""
    rows = ["| chapter | scale (seed) | claims | hold | do not hold |", "|---|---|---|---|---|"]
    for led in ledgers:
        n, held = len(led["claims"]), sum(c["holds"] for c in led["claims"])
        rows.append(f"| {led['chapter']} | {led['scale']} ({led['seed']}) | {n} | {held} | {n - held} |")
    n = sum(len(led["claims"]) for led in ledgers)
    held = sum(c["holds"] for led in ledgers for c in led["claims"])
    rows.append(f"| **all chapters** | | **{n}** | **{held}** | **{n - held}** |")
    return "\n".join(rows)
