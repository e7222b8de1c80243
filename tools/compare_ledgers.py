"""Compare two folders of chapter ledgers (``_build/ledger/<slug>.json``), claim by claim.

    python -m tools.compare_ledgers BEFORE_DIR AFTER_DIR [--chapters dsda ocl ...] [--out FILE.md]

For every chapter found in either folder it lists the claims whose measured value, null
(``null_measured``, ``null_holds``), gates (measured, passed) or verdict (``holds``, ``verdict``)
differ, claims present on one side only, and whether the departures table changed. A claim or
gate whose id, criterion, statement or note speaks of wall time (seconds, speed-up, latency, ...) is
listed apart, as expected to differ from run to run; so are differences only in the free-text
``note``. The exit status is 1 when a non-timing claim differs, else 0.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

TIMING = re.compile(r"\b(seconds?|secs?|wall[- ]?(time|clock)?|timings?|timed|speed-?ups?|latenc(y|ies)|"
                    r"throughput|ms|milliseconds?|per second|faster|slower|runtime|time per)\b", re.IGNORECASE)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _text(item: dict) -> str:
    return " ".join(str(item.get(k, "")) for k in ("id", "criterion", "statement", "note"))


def is_timing(claim: dict) -> bool:
    """True when the claim itself, or one of its gates, is about wall time."""
    return bool(TIMING.search(_text(claim)))


def claim_differences(before: dict, after: dict) -> tuple[list[str], list[str]]:
    """``(differences, timing_differences)`` of one claim, each a list of ``field: before -> after``."""
    diffs, timing = [], []
    for key in ("measured", "null_measured", "holds", "null_holds", "verdict", "post_hoc"):
        if not _same(before.get(key), after.get(key)):
            diffs.append(f"{key}: {before.get(key)!r} -> {after.get(key)!r}")
    gates_b = {g.get("id"): g for g in before.get("gates") or []}
    gates_a = {g.get("id"): g for g in after.get("gates") or []}
    for gid in sorted(set(gates_b) | set(gates_a), key=str):
        gb, ga = gates_b.get(gid), gates_a.get(gid)
        if gb is None or ga is None:
            diffs.append(f"gate {gid}: {'added' if gb is None else 'removed'}")
            continue
        for key in ("measured", "passed"):
            if not _same(gb.get(key), ga.get(key)):
                line = f"gate {gid} {key}: {gb.get(key)!r} -> {ga.get(key)!r}"
                (timing if TIMING.search(_text(gb)) and key == "measured" else diffs).append(line)
    if is_timing(before):
        return [], diffs + timing
    return diffs, timing


def compare_chapter(before: dict | None, after: dict | None) -> dict:
    """The differences of one chapter's ledgers (either may be missing)."""
    out = {"missing": None, "claims": {}, "timing": {}, "notes": {}, "only_before": [], "only_after": [],
           "departures_changed": False, "n_claims": 0}
    if before is None or after is None:
        out["missing"] = "before" if before is None else "after"
        return out
    cb = {c["id"]: c for c in before.get("claims", [])}
    ca = {c["id"]: c for c in after.get("claims", [])}
    out["n_claims"] = len(set(cb) & set(ca))
    out["only_before"] = sorted(set(cb) - set(ca))
    out["only_after"] = sorted(set(ca) - set(cb))
    for cid in sorted(set(cb) & set(ca)):
        diffs, timing = claim_differences(cb[cid], ca[cid])
        if diffs:
            out["claims"][cid] = diffs
        if timing:
            out["timing"][cid] = timing
        if cb[cid].get("note") != ca[cid].get("note") and not diffs and not timing:
            out["notes"][cid] = [f"note: {cb[cid].get('note')!r}", f"   -> {ca[cid].get('note')!r}"]
    out["departures_changed"] = before.get("departures") != after.get("departures")
    return out


def compare(before_dir: Path, after_dir: Path, chapters: list[str] | None = None) -> dict[str, dict]:
    names = chapters or sorted({p.stem for p in before_dir.glob("*.json")} | {p.stem for p in after_dir.glob("*.json")})

    def load(folder, name):
        path = folder / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    return {name: compare_chapter(load(before_dir, name), load(after_dir, name)) for name in names}


def report(result: dict[str, dict], before_dir: Path, after_dir: Path) -> str:
    lines = [f"Ledgers compared: `{before_dir}` (before) against `{after_dir}` (after).", ""]
    lines.append("| chapter | claims compared | differ | timing only | note only | one side only | departures |")
    lines.append("|---|---|---|---|---|---|---|")
    for name, r in result.items():
        if r["missing"]:
            lines.append(f"| {name} | ledger missing {r['missing']} | | | | | |")
            continue
        one_side = ", ".join([f"-{c}" for c in r["only_before"]] + [f"+{c}" for c in r["only_after"]]) or "0"
        lines.append(f"| {name} | {r['n_claims']} | {len(r['claims'])} | {len(r['timing'])} | {len(r['notes'])} | "
                     f"{one_side} | {'changed' if r['departures_changed'] else 'same'} |")
    for title, key in (("Claims that differ", "claims"), ("Timing-based (expected to differ)", "timing"),
                       ("Free-text notes that differ (no number of the claim moved)", "notes")):
        blocks = [(name, cid, d) for name, r in result.items() for cid, d in r.get(key, {}).items()]
        lines += ["", f"## {title}", ""]
        if not blocks:
            lines.append("none")
        for name, cid, d in blocks:
            lines.append(f"- **{name} / {cid}**")
            lines += [f"  - {x}" for x in d]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--chapters", nargs="*", help="slugs to compare (default: every ledger found)")
    parser.add_argument("--out", type=Path, help="write the markdown report here as well")
    args = parser.parse_args(argv)
    for folder in (args.before, args.after):
        if not folder.is_dir():
            parser.error(f"{folder}: not a folder of ledgers")
    result = compare(args.before, args.after, args.chapters)
    text = report(result, args.before, args.after)
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return int(any(r["claims"] or r["only_before"] or r["only_after"] or r["missing"] for r in result.values()))


if __name__ == "__main__":
    sys.exit(main())
