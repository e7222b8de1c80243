"""Per package: its public functions and the bad inputs its tests try.

    python -m tools.bad_input_counts [--out FILE.md]

Public functions are those ``tests/test_bad_input_coverage.py`` checks (``exports``), with its
exempt list. Bad inputs tried are counted in the package's test modules (``tests/test_<package>*.py``,
``tests/test_kernels_*.py`` for ``kernels``, ``test_svg*`` for ``svg`` ...):

- *rows*: the entries of module-level tables whose name contains ``BAD`` (each one call refused
  with a ``ValueError``), and the literal cases of a ``parametrize`` over a test that expects a
  ``ValueError``;
- *raises*: the ``with pytest.raises(ValueError ...)`` blocks outside such parametrized tests
  (each one bad call).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _coverage():
    sys.path.insert(0, str(TESTS))
    import test_bad_input_coverage as cov  # noqa: E402 -- the coverage test's own machinery

    return cov


def _is_raises_value_error(item: ast.withitem) -> bool:
    call = item.context_expr
    return (isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "raises" and bool(call.args)
            and getattr(call.args[0], "id", "") == "ValueError")


def _raises_blocks(node) -> int:
    return sum(1 for w in ast.walk(node) if isinstance(w, ast.With) and any(_is_raises_value_error(i) for i in w.items))


def _parametrize_cases(func: ast.FunctionDef) -> tuple[int, bool]:
    """Literal cases of the function's parametrize decorators, and whether one reads a BAD table."""
    cases, from_table = 0, False
    for d in func.decorator_list:
        if not (isinstance(d, ast.Call) and "parametrize" in ast.unparse(d.func)) or len(d.args) < 2:
            continue
        values = d.args[1]
        if isinstance(values, (ast.List, ast.Tuple)):
            cases = max(cases, 1) * len(values.elts)
        elif isinstance(values, ast.Name) and "BAD" in values.id.upper():
            from_table = True
    return cases, from_table


def count_file(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text())
    rows = raises = 0
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "BAD" in t.id.upper() for t in node.targets):
            value = node.value
            if isinstance(value, (ast.List, ast.Tuple)):
                rows += len(value.elts)
            elif isinstance(value, ast.BinOp):  # TABLE = A + [ ... ]
                rows += sum(len(v.elts) for v in ast.walk(value) if isinstance(v, (ast.List, ast.Tuple))
                            and v in (value.left, value.right))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        blocks = _raises_blocks(node)
        if not blocks:
            continue
        cases, from_table = _parametrize_cases(node)
        if from_table:
            continue  # its rows are counted with the table
        if cases:
            rows += cases * blocks
        else:
            raises += blocks
    return {"rows": rows, "raises": raises}


def test_files(package: str) -> list[Path]:
    stem = {"kernels": "test_kernels_", "svg": "test_svg", "best_of_n": "test_best_of_n"}.get(package, f"test_{package}")
    return sorted(p for p in TESTS.glob(f"{stem}*.py"))


def counts() -> list[dict]:
    cov = _coverage()
    out = []
    for package in cov.PACKAGES:
        exported = cov.exports(package)
        exempt = set(cov.EXEMPT.get(package, {}))
        total = {"rows": 0, "raises": 0}
        files = test_files(package)
        for path in files:
            for k, v in count_file(path).items():
                total[k] += v
        untested = sorted(exported - cov._tested() - exempt)
        out.append(dict(package=package, public=len(exported), exempt=len(exempt), checked=len(exported) - len(exempt),
                        untested=untested, rows=total["rows"], raises=total["raises"],
                        files=[p.name for p in files]))
    return out


def report(rows: list[dict]) -> str:
    lines = ["| package | public names | exempt | with a bad-input test | table rows | pytest.raises blocks | "
             "bad inputs tried |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['package']} | {r['public']} | {r['exempt']} | {r['checked'] - len(r['untested'])} | "
                     f"{r['rows']} | {r['raises']} | {r['rows'] + r['raises']} |")
    tot = {k: sum(r[k] for r in rows) for k in ("public", "exempt", "checked", "rows", "raises")}
    untested = sum(len(r["untested"]) for r in rows)
    lines.append(f"| **all {len(rows)}** | {tot['public']} | {tot['exempt']} | {tot['checked'] - untested} | "
                 f"{tot['rows']} | {tot['raises']} | {tot['rows'] + tot['raises']} |")
    missing = [f"{r['package']}: {', '.join(r['untested'])}" for r in rows if r["untested"]]
    lines += ["", "Public names without a bad-input test: " + ("; ".join(missing) if missing else "none")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    text = report(counts())
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
