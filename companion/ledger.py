"""The reproduction ledger: every claim a chapter checks, its kind, its criterion, its null, its
gates, and what this run measured (contract v3 of BOOK.md, *The ledger*).

A chapter opens one :class:`Ledger`, **pre-registers** its claims before the run, shows them,
and records each measurement when it is made::

    ledger = Ledger("facttest", scale=SCALE, seed=SEED)
    ledger.preregister(
        "type1-controlled", kind="paper", statement="P(Type I > alpha) <= delta",
        paper="Theorem 1", criterion="holds if the violation frequency <= 0.065",
        null="the same frequency for the naive (1 - alpha)-quantile, which has no correction",
        gates={"resolution": "3 Monte-Carlo SE <= 0.015"})
    ledger.departure("delta", official=0.01, source="calibrate.py default", ours=0.05,
                     why="...", ablation="type1-at-official-delta")
    ledger.criteria()                     # the pre-registered table: criterion, null, gates
    ledger.departures()                   # parameter, official value and source, ours, why
    ...                                   # the run
    ledger.record("type1-controlled", measured=freq, holds=freq <= 0.065,
                  null_measured=naive, null_holds=naive <= 0.065,
                  gates={"resolution": (three_se, three_se <= 0.015)},
                  diagnosis=Diagnosis("budget sweep 1k, 2k, 4k steps", "flat at 0.97"))

The verdict of a ``paper`` or ``mechanism`` claim is computed here, never typed:

- **inconclusive** when a gate failed: the test could not discriminate (the baseline did not
  learn, the drift did not happen), whatever the criterion says;
- **vacuous** when the criterion also holds on the null: the absent idea passes too;
- **reproduced** when it holds (and its null does not);
- **not reproduced** when it does not hold and a :class:`Diagnosis` names the experiment of
  this run that rules out our implementation; else **untraced** ("cause untraced"). Whether the
  null holds does not matter then: a failure is a failure.

A claim checked exactly (a theorem against an exact computation) gives ``no_null=`` with the
reason instead of a null. A claim that gives neither is on the old contract: its verdict is
``None`` and it is shown, never counted. Checks and controls read ``holds`` or ``does not hold``;
a ``check`` that fails raises :class:`CheckFailed` right after it is written, so a page with a
broken harness is never built. A claim whose criterion was chosen or changed after a run was
seen is recorded without registration, with everything given and ``post_hoc=True``; it is
counted apart. The headline counts pre-registered claims that are reproduced or (traced) not
reproduced.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from companion.book import glue_text, repo_root

__all__ = ["KINDS", "HEADLINE_KINDS", "VERDICTS", "Claim", "Gate", "Diagnosis", "Departure", "CheckFailed",
           "chapter_headline", "Ledger", "build_dir", "md_escape", "md_text", "ascii_maths",
           "ASCII_MATHS", "verdict_of", "contract_problems", "read_ledgers",
           "headline_counts", "summary_markdown", "ledger_markdown", "claims_table", "departures_table"]

KINDS = {
    "paper": "a result the paper reports, tested at book scale",
    "mechanism": "the book's test of the paper's explanation of why the method works",
    "control": "a negative control the book adds: the effect should vanish",
    "check": "a correctness or harness check (asserted: it can only fail through a bug)",
}
HEADLINE_KINDS = ("paper", "mechanism")
VERDICTS = {  # verdict -> (mark, how the page says it)
    "reproduced": ("✓", "reproduced"),
    "not reproduced": ("✗", "not reproduced"),
    "untraced": ("✗", "not reproduced, cause untraced"),
    "inconclusive": ("?", "inconclusive"),
    "vacuous": ("∅", "vacuous: the null passes too"),
    "holds": ("✓", "holds"),
    "does not hold": ("✗", "does not hold"),
}

_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_MAX_MEASURED_STR = 80
_DEPARTURE_FACTOR = 2.0  # a departure beyond this factor needs an ablation at the official value
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


#: inline TeX in a claim's text: ``$...$``, not empty, no space just inside the dollars (the rule
#: of MyST's dollarmath, so what is kept here is what MathJax typesets)
_TEX = re.compile(r"(?<![\\$])\$(?=[^\s$])([^$\n]*?[^\s$\\])\$(?!\$)")
#: ASCII stand-ins for mathematics that a reader should see typeset: ``<=``, ``x_hat``, ``sqrt(``
ASCII_MATHS = re.compile(r"<=|>=|!=|==|\+/-|\w_hat\b|\bsqrt\(|\w\^[\w({-]|\bmin\{|\bmax\{")


def md_text(value: Any) -> str:
    """``value`` as one line of Markdown that keeps its mathematics: each ``$...$`` span is left
    as TeX for MathJax (its ``|`` written ``\\vert`` so that it cannot split a table row) and the
    text around it is escaped as by :func:`md_escape`."""
    if isinstance(value, float):
        return md_escape(value)
    text = " ".join(str(value).split())
    out, pos = [], 0
    for match in _TEX.finditer(text):
        tex = match.group(1).replace("\\|", "\\Vert ").replace("|", "\\vert ")
        out += [_MD_SPECIAL.sub(r"\\\1", text[pos:match.start()]), f"${tex}$"]
        pos = match.end()
    return "".join(out) + _MD_SPECIAL.sub(r"\\\1", text[pos:])


def ascii_maths(text: str) -> list[str]:
    """The ASCII stand-ins for mathematics (``<=``, ``k_hat``, ``sqrt(``, ``R^2``) that ``text``
    prints outside its ``$...$`` spans: what a claim should write as TeX instead."""
    return ASCII_MATHS.findall(_TEX.sub(" ", " ".join(str(text).split())))


class CheckFailed(AssertionError):
    """A ``check`` claim did not hold: the harness or the implementation is wrong."""


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: expected a non-empty string, got {value!r}")
    return " ".join(value.split())


def _kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {sorted(KINDS)}, got {kind!r}")
    return kind


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: expected a bool computed in this run, got {value!r}")
    return bool(value)


def _clean_measured(measured: Any, name: str = "measured") -> float | int | str:
    if isinstance(measured, (bool, np.bool_)) or measured is None:
        raise ValueError(f"{name}: expected a number or a short string, got {measured!r}")
    if isinstance(measured, numbers.Integral):
        return int(measured)
    if isinstance(measured, numbers.Real):
        value = float(measured)
        if not math.isfinite(value):
            raise ValueError(f"{name}: expected a finite number, got {value}")
        return value
    if isinstance(measured, str):
        if not measured.strip() or len(measured) > _MAX_MEASURED_STR:
            raise ValueError(f"{name}: a string must be 1..{_MAX_MEASURED_STR} characters, got {measured!r}")
        return measured
    raise ValueError(f"{name}: expected a number or a short string, got {type(measured).__name__}")


@dataclass(frozen=True)
class Gate:
    """A condition under which a claim's test can discriminate, measured in the run.

    A gate tests the harness (the baseline learned, the drift happened, the data hold the
    effect, enough seeds for the interval), never the paper's method: a condition only the
    method could fail belongs in the criterion.
    """

    id: str
    criterion: str
    measured: float | int | str
    passed: bool


@dataclass(frozen=True)
class Diagnosis:
    """Why a claim that does not hold is not our implementation's fault: the experiment of this
    run that rules it out (an ablation at the official value, a budget sweep of three or more
    points with its trend, a reference implementation) and what it showed."""

    experiment: str
    result: str

    def __post_init__(self):
        _text("experiment", self.experiment)
        _text("result", self.result)


@dataclass(frozen=True)
class Departure:
    """One row of a chapter's departures table: where our recipe leaves the official one."""

    parameter: str
    official: float | int | str
    source: str
    ours: float | int | str
    why: str
    ablation: str | None = None

    @property
    def factor(self) -> float | None:
        """How far ``ours`` is from ``official`` (>= 1, either direction; inf when one is 0 and the
        other is not), when both are numbers; None for words."""
        a, b = self.official, self.ours
        if isinstance(a, str) or isinstance(b, str):
            return None
        if a == b:
            return 1.0
        if a <= 0 or b <= 0:  # a zero (or a sign change) is no small departure
            return math.inf
        return max(a / b, b / a)


def verdict_of(kind: str, holds: bool, *, legacy: bool = False, null_holds: bool | None = None,
               gates: list | None = None, diagnosis: Any = None) -> str | None:
    """The verdict of a claim from its recorded fields (the rules of the module docstring)."""
    if kind not in HEADLINE_KINDS:
        return "holds" if holds else "does not hold"
    if legacy:
        return None
    if any(not (g.passed if isinstance(g, Gate) else g["passed"]) for g in gates or ()):
        return "inconclusive"
    if holds:
        return "vacuous" if null_holds else "reproduced"
    return "not reproduced" if diagnosis else "untraced"


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
    null: str | None = None
    no_null: str | None = None
    null_measured: float | int | str | None = None
    null_holds: bool | None = None
    gates: tuple[Gate, ...] = ()
    diagnosis: Diagnosis | None = None
    verdict: str | None = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "verdict", verdict_of(
            self.kind, self.holds, legacy=self.legacy, null_holds=self.null_holds, gates=list(self.gates),
            diagnosis=self.diagnosis))

    @property
    def legacy(self) -> bool:
        """A paper/mechanism claim on the old contract: neither a null nor a reason for none."""
        return self.kind in HEADLINE_KINDS and self.null is None and self.no_null is None

    @property
    def counts(self) -> bool:
        """Whether the claim is one of the paper's pre-registered claims (the headline's pool)."""
        return self.kind in HEADLINE_KINDS and not self.post_hoc

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gates"] = [asdict(g) for g in self.gates]
        d["diagnosis"] = asdict(self.diagnosis) if self.diagnosis else None
        if self.kind not in HEADLINE_KINDS:  # checks and controls have no null, gates or diagnosis
            for key in ("null", "no_null", "null_measured", "null_holds", "gates", "diagnosis"):
                d.pop(key)
        elif self.no_null is not None:
            for key in ("null", "null_measured", "null_holds"):
                d.pop(key)
        else:
            d.pop("no_null")
        return d

    def _repr_markdown_(self) -> str:
        d = self.to_dict()
        mark, said = _mark(d), _verdict_phrase(d)
        return (f"{mark} `{self.id}` ({self.kind}{', post hoc' if self.post_hoc else ''}): {said}; "
                f"measured **{md_escape(self.measured)}**; criterion: {md_text(self.criterion)}.")


@dataclass(frozen=True)
class _Registration:
    kind: str
    statement: str
    paper: str
    criterion: str
    null: str | None
    no_null: str | None
    gates: dict[str, str]


def _register(kind, statement, paper, criterion, null, no_null, gates) -> _Registration:
    kind = _kind(kind)
    if kind in HEADLINE_KINDS:
        if null is not None and no_null is not None:
            raise ValueError("null: give either the null (the measurement without the paper's idea) or "
                             "no_null (why there is none), not both")
        null = None if null is None else _text("null", null)
        no_null = None if no_null is None else _text("no_null", no_null)
    elif null is not None or no_null is not None or gates:
        raise ValueError(f"kind: a {kind} claim has no null and no gates (they belong to paper and "
                         "mechanism claims)")
    if gates is None:
        gates = {}
    if not isinstance(gates, Mapping):
        raise ValueError(f"gates: expected a dict of gate id -> criterion, got {type(gates).__name__}")
    if kind in HEADLINE_KINDS and (null is None and no_null is None) != (not gates):
        raise ValueError("gates: a paper or mechanism claim gives its null (or no_null) and at least one gate "
                         "together; a claim with neither is on the old contract")
    for gid, crit in gates.items():
        if not isinstance(gid, str) or not _ID.match(gid):
            raise ValueError(f"gates: expected kebab-case gate ids such as 'encoder-learned', got {gid!r}")
        _text(f"gates[{gid!r}]", crit)
    return _Registration(kind, _text("statement", statement), _text("paper", paper), _text("criterion", criterion),
                         null, no_null, {g: " ".join(c.split()) for g, c in gates.items()})


class Ledger:
    """The claims of one chapter at one scale and seed, and its departures from the official recipe."""

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
        self.departure_rows: list[Departure] = []
        self._registered: dict[str, _Registration] = {}

    # --- before the run ---------------------------------------------------------------------------

    def preregister(self, id: str, *, kind: str, statement: str, paper: str, criterion: str,
                    null: str | None = None, no_null: str | None = None,
                    gates: Mapping[str, str] | None = None) -> None:
        """Fix a claim, the criterion of its verdict, its null and its gates before anything is measured.

        ``null`` describes the same measurement on a configuration without the paper's idea and
        why it is the right null; ``no_null`` says why a claim has none (checked exactly);
        ``gates`` maps a gate id to the condition under which the test can discriminate.
        """
        self._check_new_id(id)
        if id in self._registered:
            raise ValueError(f"id: claim {id!r} is already pre-registered in this chapter")
        self._registered[id] = _register(kind, statement, paper, criterion, null, no_null, gates)

    def departure(self, parameter: str, *, official: Any, source: str, ours: Any, why: str,
                  ablation: str | None = None) -> Departure:
        """Record where the chapter's recipe leaves the official one (before the run).

        ``official`` and ``ours`` are numbers or short strings. Unless both are numbers at most
        2x apart, ``ablation`` is required: the id of the claim or gate that runs the official
        value in this chapter (or several, separated by commas), or why that cannot be done.
        """
        row = Departure(_text("parameter", parameter), _clean_measured(official, "official"),
                        _text("source", source), _clean_measured(ours, "ours"), _text("why", why),
                        None if ablation is None else _text("ablation", ablation))
        if any(d.parameter == row.parameter for d in self.departure_rows):
            raise ValueError(f"parameter: {row.parameter!r} is already in the departures table")
        if row.ablation is None and (row.factor is None or row.factor > _DEPARTURE_FACTOR):
            how_far = "cannot be compared as numbers" if row.factor is None else f"departs {row.factor:.3g}x"
            raise ValueError(f"ablation: {row.parameter!r} {how_far} from the official value; name the claim "
                             "that runs the official value here, or say why none can")
        self.departure_rows.append(row)
        self.write()
        return row

    def criteria(self):
        """The pre-registered claims as a Markdown table (kind, statement, criterion, null and
        gates), for the page."""
        from IPython.display import Markdown

        if not self._registered:
            raise ValueError("criteria: no claim is pre-registered yet; call preregister() first")
        rows = ["| claim | kind | statement | holds if | null, and gates |", "|---|---|---|---|---|"]
        for cid, r in self._registered.items():
            rows.append(f"| `{cid}` | {r.kind} | {md_text(r.statement)} | {md_text(r.criterion)} | "
                        f"{_null_and_gates(r.kind, r.null, r.no_null, r.gates)} |")
        return Markdown("\n".join(rows))

    def departures(self):
        """The departures table (parameter, official value and its source, ours, why, ablation)."""
        from IPython.display import Markdown

        if not self.departure_rows:
            raise ValueError("departures: none recorded; call departure() for each parameter first")
        return Markdown(departures_table([asdict(d) for d in self.departure_rows]))

    # --- the run ------------------------------------------------------------------------------------

    def record(self, id: str, *, measured: Any, holds: Any, note: str = "", null_measured: Any = None,
               null_holds: Any = None, gates: Mapping[str, tuple[Any, Any]] | None = None,
               diagnosis: Diagnosis | None = None, kind: str | None = None, statement: str | None = None,
               paper: str | None = None, criterion: str | None = None, post_hoc: bool | None = None,
               null: str | None = None, no_null: str | None = None,
               gate_criteria: Mapping[str, str] | None = None) -> Claim:
        """Record what this run measured for claim ``id`` and rewrite the chapter's ledger file.

        A pre-registered claim takes the measurements only: ``measured`` and ``holds``, its
        null's ``null_measured`` and ``null_holds`` (the criterion applied to the null), each
        gate as ``gates={id: (measured, passed)}``, a ``diagnosis`` when it may not hold, and a
        ``note``. Its kind, statement, criterion, null and gates were fixed before the run and
        cannot change here. Any other claim must give ``kind``, ``statement``, ``paper``,
        ``criterion`` and ``post_hoc`` (and, for a paper/mechanism claim, ``null`` or ``no_null``
        and ``gate_criteria``) explicitly. A ``check`` that does not hold raises
        :class:`CheckFailed` after it is written.
        """
        self._check_new_id(id)
        given = {"kind": kind, "statement": statement, "paper": paper, "criterion": criterion,
                 "post_hoc": post_hoc, "null": null, "no_null": no_null, "gate_criteria": gate_criteria}
        if id in self._registered:
            extra = [k for k, v in given.items() if v is not None and not (k == "post_hoc" and v is False)]
            if extra:
                raise ValueError(f"{extra[0]}: claim {id!r} was pre-registered; its {', '.join(extra)} cannot be "
                                 "changed after the run (record a separate post-hoc claim instead)")
            reg, post = self._registered[id], False
        else:
            required = ("kind", "statement", "paper", "criterion", "post_hoc")
            missing = [k for k in required if given[k] is None]
            if missing:
                raise ValueError(f"{missing[0]}: claim {id!r} was not pre-registered, so record() needs "
                                 f"{', '.join(missing)} (and post_hoc=True if its criterion was chosen after "
                                 "a run was seen)")
            if not isinstance(post_hoc, (bool, np.bool_)):
                raise ValueError(f"post_hoc: expected a bool, got {post_hoc!r}")
            if kind in HEADLINE_KINDS and not post_hoc:
                raise ValueError(f"post_hoc: claim {id!r} is a {kind} claim that was not pre-registered, so its "
                                 "criterion was not fixed before the run: pre-register it, or record it with "
                                 "post_hoc=True")
            reg, post = _register(kind, statement, paper, criterion, null, no_null, gate_criteria), bool(post_hoc)
        if not isinstance(note, str):
            raise ValueError(f"note: expected a string, got {note!r}")
        holds = _bool("holds", holds)
        if reg.null is not None:
            if null_measured is None or null_holds is None:
                raise ValueError(f"null_measured: claim {id!r} pre-registered a null ({reg.null}); record its "
                                 "null_measured and null_holds (the criterion applied to the null)")
            null_measured, null_holds = _clean_measured(null_measured, "null_measured"), _bool("null_holds", null_holds)
        elif null_measured is not None or null_holds is not None:
            raise ValueError(f"null_measured: claim {id!r} has no pre-registered null")
        recorded_gates = self._gates(id, reg, gates)
        if diagnosis is not None and not isinstance(diagnosis, Diagnosis):
            raise ValueError(f"diagnosis: expected a Diagnosis(experiment, result), got {type(diagnosis).__name__}")
        if diagnosis is not None and reg.kind not in HEADLINE_KINDS:
            raise ValueError(f"diagnosis: a {reg.kind} claim has no diagnosis")
        claim = Claim(id, reg.kind, post, reg.statement, reg.paper, _clean_measured(measured), reg.criterion,
                      holds, " ".join(note.split()), reg.null, reg.no_null, null_measured, null_holds,
                      recorded_gates, diagnosis)
        self.claims.append(claim)
        self.write()
        if claim.kind == "check" and not claim.holds:
            raise CheckFailed(f"check {id!r} failed: measured {claim.measured!r}, criterion {claim.criterion!r}; "
                              f"{claim.note}")
        return claim

    @staticmethod
    def _gates(id: str, reg: _Registration, gates: Mapping | None) -> tuple[Gate, ...]:
        if gates is not None and not isinstance(gates, Mapping):
            raise ValueError(f"gates: expected a dict of gate id -> (measured, passed), got {type(gates).__name__}")
        gates = dict(gates or {})
        if set(gates) != set(reg.gates):
            raise ValueError(f"gates: claim {id!r} pre-registered the gates {sorted(reg.gates)}; "
                             f"got {sorted(gates)}")
        out = []
        for gid, crit in reg.gates.items():
            value = gates[gid]
            if not isinstance(value, tuple) or len(value) != 2:
                raise ValueError(f"gates: expected {gid!r}: (measured, passed), got {value!r}")
            out.append(Gate(gid, crit, _clean_measured(value[0], f"gates[{gid!r}]"),
                            _bool(f"gates[{gid!r}] passed", value[1])))
        return tuple(out)

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
        """Glue the word of what claim ``id``'s run shows (its ``holds``) into the prose as
        ``{glue:md}`name```."""
        glue_text(name, yes if self[id].holds else no)

    def say_verdict(self, name: str, id: str) -> None:
        """Glue claim ``id``'s verdict phrase ("reproduced", "inconclusive (gate ...)") as ``name``."""
        glue_text(name, _verdict_phrase(self[id].to_dict()))

    def headline(self) -> str:
        """"k of m decided claims of the paper reproduced at quick scale" (decided: reproduced or
        traced not reproduced), with the undecided ones counted after it."""
        return _headline([c.to_dict() for c in self.claims], self.scale)

    def verdict_markdown(self) -> str:
        """The verdict box (a MyST admonition) of the chapter's opening, filled from the ledger."""
        if self.pending:
            raise ValueError(f"verdict: pre-registered claims never recorded: {self.pending}")
        self._check_ablations()
        counted = [c for c in self.claims if c.counts]
        others = [c for c in self.claims if not c.counts]
        good = [c.verdict == "reproduced" or (c.verdict is None and c.holds) for c in counted]
        style = "tip" if counted and all(good) else "important"
        lines = [f":::{{admonition}} Verdict: {self.headline()}", f":class: {style}", ""]
        for c in counted:
            d = c.to_dict()
            line = f"- {_mark(d)} **{md_escape(_verdict_phrase(d))}**: {md_text(c.statement)} ({c.kind})"
            if c.verdict == "not reproduced":
                line += " " + md_text(f"Traced by {c.diagnosis.experiment}: {c.diagnosis.result}.")
            lines.append(line)
        if others:
            parts = []
            for label, group in (("check", [c for c in others if c.kind == "check"]),
                                 ("control", [c for c in others if c.kind == "control" and not c.post_hoc]),
                                 ("post-hoc claim", [c for c in others if c.post_hoc and c.kind != "check"])):
                if group:
                    held = sum(c.holds for c in group)
                    parts.append(f"{len(group)} {label}{'s' if len(group) > 1 else ''} "
                                 f"({held} hold{'s' if held == 1 else ''})")
            lines += ["", "Counted apart: " + ", ".join(parts) + "."]
        lines += ["", f"Details in {{ref}}`the claims <{self.chapter}-claims>`.", ":::"]
        return "\n".join(lines)

    def _check_ablations(self) -> None:
        ids = {c.id for c in self.claims} | {g.id for c in self.claims for g in c.gates}
        for d in self.departure_rows:
            named = [part.strip() for part in (d.ablation or "").split(",")]
            if not all(_ID.match(part) for part in named):
                continue  # a reason in words, not claim ids
            for part in named:
                if part not in ids:
                    raise ValueError(f"ablation: departure {d.parameter!r} names {part!r}, which no claim or "
                                     "gate of this chapter records")

    def glue_verdict(self) -> None:
        """Glue the verdict box as ``verdict`` (the chapter's opening holds ``{glue:md} verdict``)
        and every claim's mark as ``<id>-mark``."""
        glue_text("verdict", self.verdict_markdown())
        for claim in self.claims:
            glue_text(f"{claim.id}-mark", _mark(claim.to_dict()))

    # --- files and display ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"chapter": self.chapter, "scale": self.scale, "seed": self.seed,
                "claims": [c.to_dict() for c in self.claims],
                "departures": [asdict(d) for d in self.departure_rows]}

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
            far = f"{_mark(other)} {md_escape(other['measured'])}" if other else "not recorded"
            rows.append(f"| {md_escape(c.id)} | {_mark(c.to_dict())} {md_escape(c.measured)} | {far} |")
        where = ", ".join(f"{k} {md_escape(v)}" for k, v in run.items())
        note = ("\n\nA full-scale ledger written before contract v3 records whether each criterion held "
                "(✓/✗), not a verdict." if any("verdict" not in c for c in full["claims"]) else "")
        return Markdown("\n".join(rows) + (f"\n\nThe full-scale run: {where}." if where else "") + note)

    def _repr_markdown_(self) -> str:
        return f"**{md_escape(self.headline())}**\n\n" + claims_table([c.to_dict() for c in self.claims])


# --- shared by the chapter and the book-wide page ------------------------------------------------------

def _mark(c: dict) -> str:
    """A claim's mark: its verdict's, or (old contract, old files) whether its criterion held."""
    return VERDICTS[c["verdict"]][0] if c.get("verdict") is not None else MARK[c["holds"]]


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _verdict_phrase(c: dict) -> str:
    """How a claim's verdict reads, as plain text: "inconclusive (gate encoder-learned failed: 0.12)"."""
    v = c.get("verdict")
    if v is None:
        return ("holds" if c["holds"] else "does not hold") + (" (old contract)" if c["kind"] in HEADLINE_KINDS else "")
    if v == "inconclusive":
        failed = [g for g in c["gates"] if not g["passed"]]
        return "inconclusive (" + "; ".join(f"gate {g['id']} failed: {_short(g['measured'])}" for g in failed) + ")"
    if v == "vacuous":
        return f"vacuous: the null passes too ({_short(c['null_measured'])})"
    if v == "not reproduced":
        return "not reproduced (traced)"
    return VERDICTS[v][1]


def _null_and_gates(kind: str, null: str | None, no_null: str | None, gates: dict[str, str]) -> str:
    if kind not in HEADLINE_KINDS:
        return "–"
    parts = [f"null: {md_text(null)}" if null else f"no null: {md_text(no_null)}" if no_null
             else "no null (old contract)"]
    parts += [f"gate `{gid}`: {md_text(crit)}" for gid, crit in gates.items()]
    return "; ".join(parts)


def _headline(claims: list[dict], scale: str) -> str:
    counts = _verdict_counts(claims)
    pool = [c for c in claims if c["kind"] in HEADLINE_KINDS and not c["post_hoc"]]
    if pool and counts[None] == len(pool):  # a chapter still on the old contract
        held = sum(c["holds"] for c in pool)
        return f"{held} of {len(pool)} of the paper's claims hold at {scale} scale (old contract: no nulls or gates)"
    decided = counts["reproduced"] + counts["not reproduced"]
    text = f"{counts['reproduced']} of {decided} decided claims of the paper reproduced at {scale} scale"
    apart = [f"{counts[v]} {label}" for v, label in (("inconclusive", "inconclusive"), ("vacuous", "vacuous"),
                                                     ("untraced", "not reproduced with the cause untraced"),
                                                     (None, "on the old contract")) if counts[v]]
    return text + ("; not counted: " + ", ".join(apart) if apart else "")


def _verdict_counts(claims: list[dict]) -> dict[str | None, int]:
    counts = {v: 0 for v in ("reproduced", "not reproduced", "untraced", "inconclusive", "vacuous", None)}
    for c in claims:
        if c["kind"] in HEADLINE_KINDS and not c["post_hoc"]:
            counts[c.get("verdict")] += 1
    return counts


def claims_table(claims: list[Claim] | list[dict]) -> str:
    """The claims of one chapter as a Markdown table: verdict, claim, measured (and its null),
    criterion, then kind and the paper (what a phone shows first is what decides the verdict)."""
    rows = ["| | claim | measured (null) | holds if | kind | the paper |", "|---|---|---|---|---|---|"]
    for c in claims:
        c = c if isinstance(c, dict) else c.to_dict()
        kind = c["kind"] + (", post hoc" if c["post_hoc"] else "")
        measured = md_escape(c["measured"])
        if c.get("null_measured") is not None:
            measured += f" (null {md_escape(c['null_measured'])})"
        verdict = f"{_mark(c)} {md_escape(_verdict_phrase(c))}"
        rows.append(f"| {verdict} | **{md_escape(c['id'])}**: {md_text(c['statement'])} | {measured} "
                    f"| {md_text(c['criterion'])} | {kind} | {md_text(c['paper'])} |")
    return "\n".join(rows)


def departures_table(departures: list[dict]) -> str:
    """A chapter's departures from the official recipe as a Markdown table."""
    rows = ["| parameter | official (source) | ours | why | run at the official value |", "|---|---|---|---|---|"]
    for d in departures:
        rows.append(f"| {md_text(d['parameter'])} | {md_text(d['official'])} ({md_text(d['source'])}) "
                    f"| {md_text(d['ours'])} | {md_text(d['why'])} | {md_escape(d['ablation'] or '–')} |")
    return "\n".join(rows)


def _measurement_notes(c: dict) -> str:
    """What the dropdown of the ledger page says of a claim: note, null, gates, diagnosis."""
    parts = [md_text(c["note"])] if c["note"] else []
    if c.get("null"):
        parts.append(f"null: {md_text(c['null'])}, measured {md_escape(c['null_measured'])}")
    elif c.get("no_null"):
        parts.append(f"no null: {md_text(c['no_null'])}")
    for g in c.get("gates") or []:
        parts.append(f"gate {md_escape(g['id'])} ({md_text(g['criterion'])}): {md_escape(g['measured'])} "
                     f"{'passed' if g['passed'] else 'failed'}")
    if c.get("diagnosis"):
        parts.append(f"traced by {md_text(c['diagnosis']['experiment'])}: {md_text(c['diagnosis']['result'])}")
    return "; ".join(parts)


def contract_problems(ledger: dict[str, Any]) -> list[str]:
    """What keeps a chapter ledger (a dict read from its JSON) off contract v3; empty when none.

    Every paper/mechanism claim has a null (with null_measured and null_holds) or a reason for
    none, at least one gate, and a verdict equal to the one its fields give (so no verdict is
    typed); the chapter has a departures table.
    """
    problems = []
    if not ledger.get("departures"):
        problems.append("no departures table (departure())")
    for c in ledger["claims"]:
        if c["kind"] not in HEADLINE_KINDS:
            continue
        name = f"claim {c['id']!r}"
        has_null = bool(c.get("null")) and c.get("null_measured") is not None and c.get("null_holds") is not None
        if not has_null and not c.get("no_null"):
            problems.append(f"{name} has no null and no reason for none")
            continue
        if not c.get("gates"):
            problems.append(f"{name} has no gate")
        expected = verdict_of(c["kind"], c["holds"], null_holds=c.get("null_holds"), gates=c.get("gates"),
                              diagnosis=c.get("diagnosis"))
        if c.get("verdict") != expected:
            problems.append(f"{name} reads {c.get('verdict')!r}, its fields give {expected!r}")
    return problems


# --- the book-wide ledger page ----------------------------------------------------------------------

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


def chapter_headline(ledger: dict[str, Any]) -> str:
    """The headline of one written ledger (what its chapter's verdict box opens with)."""
    return _headline(ledger["claims"], ledger["scale"])


def headline_counts(ledger: dict[str, Any]) -> dict[str, Any]:
    """The ledger page's counts for one chapter: the five verdicts of its pre-registered paper and
    mechanism claims (and those on the old contract), then ``(held, total)`` for checks, controls
    and post-hoc claims."""
    claims = ledger["claims"]
    verdicts = _verdict_counts(claims)
    old = [c for c in claims if c["kind"] in HEADLINE_KINDS and not c["post_hoc"] and c.get("verdict") is None]
    groups = {
        "check": [c for c in claims if c["kind"] == "check"],
        "control": [c for c in claims if c["kind"] == "control" and not c["post_hoc"]],
        "post_hoc": [c for c in claims if c["post_hoc"] and c["kind"] != "check"],
    }
    counts = {v.replace(" ", "_"): n for v, n in verdicts.items() if v is not None}
    counts["old_contract"] = (sum(c["holds"] for c in old), len(old))
    counts.update({k: (sum(c["holds"] for c in g), len(g)) for k, g in groups.items()})
    return counts


def _frac(held: int, total: int) -> str:
    return f"{held}/{total}" if total else "–"


_VERDICT_COLUMNS = ("reproduced", "not_reproduced", "untraced", "inconclusive", "vacuous")
_APART_COLUMNS = ("check", "control", "post_hoc")


def _apart(counts: dict[str, Any]) -> str:
    """Checks, controls and post-hoc claims of one chapter in one cell: "2/2 checks, 0/1 controls"."""
    names = {"check": "checks", "control": "controls", "post_hoc": "post hoc"}
    cells = [f"{_frac(*counts[k])} {names[k]}" for k in _APART_COLUMNS if counts[k][1]]
    return ", ".join(cells) or "–"


def summary_markdown(ledgers: list[dict[str, Any]], titles: dict[str, str] | None = None) -> str:
    """One row per chapter, linked to its Claims section: its paper's claims by verdict
    (reproduced, not reproduced and traced, untraced, inconclusive, vacuous), then checks, controls
    and post-hoc claims ("held/recorded") counted apart; a total row. Chapters still on the old
    contract follow in a table of their own, whose verdicts count nowhere."""
    titles = titles or {}
    old = [led for led in ledgers if headline_counts(led)["old_contract"][1]]
    new = [led for led in ledgers if led not in old]

    def link(led):
        name = md_escape(titles.get(led["chapter"], led["chapter"]))
        scale = "" if led["scale"] == "quick" else f" ({led['scale']})"
        return f"{{ref}}`{name} <{led['chapter']}-claims>`{scale}"

    blocks = []
    if new:
        rows = ["| chapter | reproduced | not reproduced | untraced | inconclusive | vacuous | counted apart |",
                "|---|---|---|---|---|---|---|"]
        total = {k: 0 for k in _VERDICT_COLUMNS} | {k: [0, 0] for k in _APART_COLUMNS}
        for led in new:
            counts = headline_counts(led)
            for k in _VERDICT_COLUMNS:
                total[k] += counts[k]
            for k in _APART_COLUMNS:
                total[k] = [total[k][0] + counts[k][0], total[k][1] + counts[k][1]]
            rows.append(f"| {link(led)} | " + " | ".join(str(counts[k]) for k in _VERDICT_COLUMNS)
                        + f" | {_apart(counts)} |")
        rows.append("| **all chapters** | " + " | ".join(f"**{total[k]}**" for k in _VERDICT_COLUMNS)
                    + f" | **{_apart(total)}** |")
        blocks.append("\n".join(rows))
    if old:
        rows = ["| chapter (old contract) | paper's claims that hold | counted apart |", "|---|---|---|"]
        for led in old:
            counts = headline_counts(led)
            rows.append(f"| {link(led)} | {_frac(*counts['old_contract'])} | {_apart(counts)} |")
        blocks.append("\n".join(rows))
    return "\n\n".join(blocks)


def ledger_markdown(ledgers: list[dict[str, Any]], titles: dict[str, str] | None = None) -> str:
    """Every claim, grouped by chapter: a linked heading line, the claims table, and the
    measurement notes (null, gates, diagnosis) folded in a dropdown so the table fits a phone."""
    titles = titles or {}
    blocks = []
    for led in ledgers:
        name = md_escape(titles.get(led["chapter"], led["chapter"]))
        head = md_escape(_headline(led["claims"], led["scale"]))
        blocks.append(f"**{{ref}}`{name} <{led['chapter']}-claims>`**: {head} (seed {led['seed']}).")
        blocks.append(claims_table(led["claims"]))
        notes = "\n".join(f"- **{md_escape(c['id'])}**: {_measurement_notes(c)}" for c in led["claims"]
                          if _measurement_notes(c))
        if notes:
            blocks.append(f":::{{admonition}} How each claim was measured\n:class: dropdown\n\n{notes}\n:::")
    return "\n\n".join(blocks)
