"""The reproduction ledger: every claim a chapter checks, its kind, its criterion and what this run measured.

A chapter opens one :class:`Ledger`, **pre-registers** its claims before the run (kind,
statement, the paper's value, and the criterion that decides the verdict), shows them, and
records each measurement when it is made::

    ledger = Ledger("best-of-n", scale=SCALE, seed=SEED)
    ledger.preregister("formula-upper-bounds-kl", kind="paper",
                       statement="log n - (n-1)/n upper-bounds the KL of best-of-n",
                       paper="Theorem 3.1", criterion="holds if max(KL - formula) <= 1e-9")
    ledger.criteria()                               # the "pre-registered criteria" table
    ...                                             # the run
    ledger.record("formula-upper-bounds-kl", measured=worst, holds=worst <= 1e-9, note="...")

A claim whose criterion was chosen or changed after a run was seen is recorded without
registration, with everything given and ``post_hoc=True``; the chapter says why.

Kinds (BOOK.md, *The ledger*): ``paper`` (a result the paper reports, tested at book scale),
``mechanism`` (the book's test of the paper's explanation), ``control`` (a negative control the
book adds) and ``check`` (a correctness or harness check). Only pre-registered ``paper`` and
``mechanism`` claims count in a chapter's headline; a ``check`` that fails raises
:class:`CheckFailed` right after it is written, so a page with a broken harness is never built,
while the paper's claims are recorded and never asserted, so a failure shows.

Each call rewrites ``<build dir>/ledger/<chapter>.json`` (the format of BOOK.md), so a chapter
that stops half-way still leaves the claims it reached. The build directory is
``$BOOK_BUILD_DIR`` if set, else ``_build/`` at the repository root (found by walking up from
the working directory), else ``./_build``.
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

from companion.book import glue_text, repo_root

__all__ = ["KINDS", "HEADLINE_KINDS", "Claim", "CheckFailed", "Ledger", "build_dir", "md_escape",
           "read_ledgers", "headline_counts", "summary_markdown", "ledger_markdown"]

KINDS = {
    "paper": "a result the paper reports, tested at book scale",
    "mechanism": "the book's test of the paper's explanation of why the method works",
    "control": "a negative control the book adds: the effect should vanish",
    "check": "a correctness or harness check (asserted: it can only fail through a bug)",
}
HEADLINE_KINDS = ("paper", "mechanism")

_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MAX_MEASURED_STR = 80
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|$~#])")
MARK = {True: "✓", False: "✗"}


def build_dir() -> Path:
    """Where ledgers and timings go: ``$BOOK_BUILD_DIR``, else ``<repo root>/_build``."""
    env = os.environ.get("BOOK_BUILD_DIR")
    if env:
        return Path(env)
    return (repo_root() or Path.cwd()) / "_build"


def md_escape(value: Any) -> str:
    """``value`` as one line of literal Markdown text: ``| * _ $ ...`` are escaped, so a claim's
    ``O(|E|)`` cannot split a table row and ``p*`` cannot open italics."""
    if isinstance(value, float):
        value = f"{value:.4g}"
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(value).split()))


class CheckFailed(AssertionError):
    """A ``check`` claim did not hold: the harness or the implementation is wrong."""


@dataclass(frozen=True)
class Claim:
    """One row of the ledger (the JSON keys of BOOK.md)."""

    id: str
    kind: str
    post_hoc: bool
    statement: str
    paper: str
    measured: float | int | str
    criterion: str
    holds: bool
    note: str = ""

    @property
    def counts(self) -> bool:
        """Whether the claim counts in the headline: a pre-registered paper or mechanism claim."""
        return self.kind in HEADLINE_KINDS and not self.post_hoc

    def _repr_markdown_(self) -> str:
        return (f"{MARK[self.holds]} `{self.id}` ({self.kind}{', post hoc' if self.post_hoc else ''}): "
                f"measured **{md_escape(self.measured)}**; criterion: {md_escape(self.criterion)}.")


@dataclass(frozen=True)
class _Registration:
    kind: str
    statement: str
    paper: str
    criterion: str


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: expected a non-empty string, got {value!r}")
    return " ".join(value.split())


def _kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {sorted(KINDS)}, got {kind!r}")
    return kind


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
        self._registered: dict[str, _Registration] = {}

    # --- before the run ---------------------------------------------------------------------------

    def preregister(self, id: str, *, kind: str, statement: str, paper: str, criterion: str) -> None:
        """Fix a claim and the criterion of its verdict before anything is measured."""
        self._check_new_id(id)
        if id in self._registered:
            raise ValueError(f"id: claim {id!r} is already pre-registered in this chapter")
        self._registered[id] = _Registration(_kind(kind), _text("statement", statement), _text("paper", paper),
                                             _text("criterion", criterion))

    def criteria(self):
        """The pre-registered claims as a Markdown table (kind, statement, criterion), for the page."""
        from IPython.display import Markdown

        if not self._registered:
            raise ValueError("criteria: no claim is pre-registered yet; call preregister() first")
        rows = ["| claim | kind | statement | holds if |", "|---|---|---|---|"]
        rows += [f"| `{cid}` | {r.kind} | {md_escape(r.statement)} | {md_escape(r.criterion)} |"
                 for cid, r in self._registered.items()]
        return Markdown("\n".join(rows))

    # --- the run ------------------------------------------------------------------------------------

    def record(self, id: str, *, measured: Any, holds: Any, note: str = "", kind: str | None = None,
               statement: str | None = None, paper: str | None = None, criterion: str | None = None,
               post_hoc: bool | None = None) -> Claim:
        """Record what this run measured for claim ``id`` and rewrite the chapter's ledger file.

        A pre-registered claim takes only ``measured``, ``holds`` and ``note``: its kind,
        statement and criterion were fixed before the run and cannot change here. Any other claim
        must give ``kind``, ``statement``, ``paper``, ``criterion`` and ``post_hoc`` explicitly.
        A ``check`` that does not hold raises :class:`CheckFailed` after it is written.
        """
        self._check_new_id(id)
        given = {"kind": kind, "statement": statement, "paper": paper, "criterion": criterion, "post_hoc": post_hoc}
        if id in self._registered:
            extra = [k for k, v in given.items() if v is not None and not (k == "post_hoc" and v is False)]
            if extra:
                raise ValueError(f"{extra[0]}: claim {id!r} was pre-registered; its {', '.join(extra)} cannot be "
                                 "changed after the run (record a separate post-hoc claim instead)")
            reg, post = self._registered[id], False
        else:
            missing = [k for k, v in given.items() if v is None]
            if missing:
                raise ValueError(f"{missing[0]}: claim {id!r} was not pre-registered, so record() needs "
                                 f"{', '.join(missing)} (and post_hoc=True if its criterion was chosen after "
                                 "a run was seen)")
            if not isinstance(post_hoc, (bool, np.bool_)):
                raise ValueError(f"post_hoc: expected a bool, got {post_hoc!r}")
            reg = _Registration(_kind(kind), _text("statement", statement), _text("paper", paper),
                                _text("criterion", criterion))
            post = bool(post_hoc)
        if not isinstance(note, str):
            raise ValueError(f"note: expected a string, got {note!r}")
        if not isinstance(holds, (bool, np.bool_)):
            raise ValueError(f"holds: expected a bool computed in this run, got {holds!r}")
        claim = Claim(id, reg.kind, post, reg.statement, reg.paper, _clean_measured(measured), reg.criterion,
                      bool(holds), " ".join(note.split()))
        self.claims.append(claim)
        self.write()
        if claim.kind == "check" and not claim.holds:
            raise CheckFailed(f"check {id!r} failed: measured {claim.measured!r}, criterion {claim.criterion!r}; "
                              f"{claim.note}")
        return claim

    def _check_new_id(self, id: Any) -> None:
        if not isinstance(id, str) or not _ID.match(id):
            raise ValueError(f"id: expected a short kebab-case id such as 'kl-upper-bound', got {id!r}")
        if any(c.id == id for c in self.claims):
            raise ValueError(f"id: claim {id!r} is already recorded in this chapter")

    def __getitem__(self, id: str) -> Claim:
        for claim in self.claims:
            if claim.id == id:
                return claim
        where = "pre-registered but not recorded yet" if id in self._registered else "unknown"
        raise KeyError(f"id: claim {id!r} is {where}")

    @property
    def pending(self) -> list[str]:
        """Pre-registered claims not recorded yet."""
        recorded = {c.id for c in self.claims}
        return [cid for cid in self._registered if cid not in recorded]

    # --- verdicts built from the ledger ---------------------------------------------------------------

    def say(self, name: str, id: str, yes: str = "holds", no: str = "does not hold") -> None:
        """Glue the verdict word of claim ``id`` into the prose as ``{glue:md}`name```."""
        glue_text(name, yes if self[id].holds else no)

    def headline(self) -> str:
        """"k of n of the paper's claims hold at quick scale" (pre-registered paper/mechanism claims)."""
        counted = [c for c in self.claims if c.counts]
        held = sum(c.holds for c in counted)
        return f"{held} of {len(counted)} of the paper's claims hold at {self.scale} scale"

    def verdict_markdown(self) -> str:
        """The verdict box (a MyST admonition) of the chapter's opening, filled from the ledger."""
        if self.pending:
            raise ValueError(f"verdict: pre-registered claims never recorded: {self.pending}")
        counted = [c for c in self.claims if c.counts]
        others = [c for c in self.claims if not c.counts]
        style = "tip" if counted and all(c.holds for c in counted) else "important"
        lines = [f":::{{admonition}} Verdict: {self.headline()}", f":class: {style}", ""]
        lines += [f"- {MARK[c.holds]} {md_escape(c.statement)} ({c.kind})" for c in counted]
        if others:
            parts = []
            for label, group in (("check", [c for c in others if c.kind == "check"]),
                                 ("control", [c for c in others if c.kind == "control" and not c.post_hoc]),
                                 ("post-hoc claim", [c for c in others if c.post_hoc and c.kind != "check"])):
                if group:
                    held = sum(c.holds for c in group)
                    parts.append(f"{len(group)} {label}{'s' if len(group) > 1 else ''} ({held} hold)")
            lines += ["", "Counted apart: " + ", ".join(parts) + f". Details in {{ref}}`the claims <{self.chapter}-claims>`."]
        lines += [":::"]
        return "\n".join(lines)

    def glue_verdict(self) -> None:
        """Glue the verdict box as ``verdict`` (the chapter's opening holds ``{glue:md} verdict``)
        and every claim's mark as ``<id>-mark``."""
        glue_text("verdict", self.verdict_markdown())
        for claim in self.claims:
            glue_text(f"{claim.id}-mark", MARK[claim.holds])

    # --- files and display ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"chapter": self.chapter, "scale": self.scale, "seed": self.seed,
                "claims": [asdict(c) for c in self.claims]}

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")
        tmp.replace(self.path)
        return self.path

    def full_scale(self):
        """This run's verdicts beside the committed full-scale run (``book/results/<slug>-full.json``),
        or a sentence saying that no full-scale run has been recorded."""
        from IPython.display import Markdown

        root = repo_root()
        path = root / "book" / "results" / f"{self.chapter}-full.json" if root else None
        if path is None or not path.is_file():
            return Markdown("No full-scale run of this chapter has been recorded yet, so the book claims "
                            "nothing about that scale.")
        full = json.loads(path.read_text())
        by_id = {c["id"]: c for c in full["claims"]}
        run = full.get("run", {})
        rows = [f"| claim | {self.scale} scale (this run) | full scale |", "|---|---|---|"]
        for c in self.claims:
            other = by_id.get(c.id)
            far = f"{MARK[other['holds']]} {md_escape(other['measured'])}" if other else "not recorded"
            rows.append(f"| {md_escape(c.id)} | {MARK[c.holds]} {md_escape(c.measured)} | {far} |")
        where = ", ".join(f"{k} {md_escape(v)}" for k, v in run.items())
        return Markdown("\n".join(rows) + (f"\n\nThe full-scale run: {where}." if where else ""))

    def summary(self) -> str:
        return f"{self.chapter}: {self.headline()} (seed {self.seed})"

    def _repr_markdown_(self) -> str:
        return f"**{md_escape(self.headline())}**\n\n" + claims_table(self.claims)


# --- the book-wide ledger page ----------------------------------------------------------------------

def claims_table(claims: list[Claim] | list[dict]) -> str:
    """The claims of one chapter as a Markdown table: verdict, claim, kind, measured, criterion."""
    rows = ["| | claim | kind | the paper | measured | holds if |", "|---|---|---|---|---|---|"]
    for c in claims:
        c = c if isinstance(c, dict) else asdict(c)
        kind = c["kind"] + (", post hoc" if c["post_hoc"] else "")
        rows.append(f"| {MARK[c['holds']]} | **{md_escape(c['id'])}**: {md_escape(c['statement'])} | {kind} "
                    f"| {md_escape(c['paper'])} | {md_escape(c['measured'])} | {md_escape(c['criterion'])} |")
    return "\n".join(rows)


def read_ledgers(folder: str | Path | None = None, order: list[str] | None = None) -> list[dict[str, Any]]:
    """Every chapter ledger in ``folder`` (default ``build_dir() / 'ledger'``).

    Sorted by ``order`` (chapter slugs, e.g. the reading order of ``_toc.yml``), chapters
    not in it last, alphabetically. A file without the keys of BOOK.md raises ``ValueError``.
    """
    folder = Path(folder) if folder is not None else build_dir() / "ledger"
    rank = {slug: i for i, slug in enumerate(order or [])}
    keys = {"id", "kind", "post_hoc", "statement", "paper", "measured", "criterion", "holds", "note"}
    ledgers = []
    for f in sorted(folder.glob("*.json")):
        data = json.loads(f.read_text())
        if not {"chapter", "scale", "seed", "claims"} <= set(data):
            raise ValueError(f"{f.name}: not a chapter ledger (keys {sorted(data)})")
        for claim in data["claims"]:
            if not keys <= set(claim):
                raise ValueError(f"{f.name}: claim {claim.get('id')!r} lacks {sorted(keys - set(claim))}")
        ledgers.append(data)
    return sorted(ledgers, key=lambda led: (rank.get(led["chapter"], len(rank)), led["chapter"]))


def headline_counts(ledger: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """``(held, total)`` per column of the ledger page: the paper's claims, checks, controls, post hoc."""
    claims = ledger["claims"]
    groups = {
        "paper": [c for c in claims if c["kind"] in HEADLINE_KINDS and not c["post_hoc"]],
        "check": [c for c in claims if c["kind"] == "check"],
        "control": [c for c in claims if c["kind"] == "control" and not c["post_hoc"]],
        "post_hoc": [c for c in claims if c["post_hoc"] and c["kind"] != "check"],
    }
    return {k: (sum(c["holds"] for c in g), len(g)) for k, g in groups.items()}


def _frac(held: int, total: int) -> str:
    return f"{held}/{total}" if total else "–"


def summary_markdown(ledgers: list[dict[str, Any]], titles: dict[str, str] | None = None) -> str:
    """One row per chapter, linked to its Claims section: the paper's claims that hold (the
    headline), then checks, controls and post-hoc claims counted apart; a total row."""
    titles = titles or {}
    rows = ["| chapter | paper claims | checks | controls | post hoc |", "|---|---|---|---|---|"]
    total = {k: [0, 0] for k in ("paper", "check", "control", "post_hoc")}
    for led in ledgers:
        counts = headline_counts(led)
        for k, (h, n) in counts.items():
            total[k][0] += h
            total[k][1] += n
        name = md_escape(titles.get(led["chapter"], led["chapter"]))
        scale = "" if led["scale"] == "quick" else f" ({led['scale']})"
        rows.append(f"| {{ref}}`{name} <{led['chapter']}-claims>`{scale} | "
                    + " | ".join(_frac(*counts[k]) for k in total) + " |")
    rows.append("| **all chapters** | " + " | ".join(f"**{_frac(*total[k])}**" for k in total) + " |")
    return "\n".join(rows)


def ledger_markdown(ledgers: list[dict[str, Any]], titles: dict[str, str] | None = None) -> str:
    """Every claim, grouped by chapter: a linked heading line, the claims table, and the
    measurement notes folded in a dropdown so the table fits a phone."""
    titles = titles or {}
    blocks = []
    for led in ledgers:
        held, n = headline_counts(led)["paper"]
        name = md_escape(titles.get(led["chapter"], led["chapter"]))
        blocks.append(f"**{{ref}}`{name} <{led['chapter']}-claims>`**: {held} of {n} of the paper's claims hold "
                      f"at {led['scale']} scale (seed {led['seed']}).")
        blocks.append(claims_table(led["claims"]))
        notes = "\n".join(f"- **{md_escape(c['id'])}**: {md_escape(c['note'])}" for c in led["claims"] if c["note"])
        if notes:
            blocks.append(f":::{{admonition}} How each claim was measured\n:class: dropdown\n\n{notes}\n:::")
    return "\n\n".join(blocks)
