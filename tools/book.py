"""The book's pipeline: execute each chapter once, then render the HTML from the executed notebooks.

    python -m tools.book execute [DOC ...]   # papermill, quick scale, into _build/executed/
    python -m tools.book html [--strict]     # stage the executed notebooks, jupyter-book build
    python -m tools.book all [--strict]      # every chapter, then the ledger page, then the HTML
    python -m tools.book notebooks           # regenerate notebooks/<slug>.ipynb (what Colab opens)

``_toc.yml`` is the single list of pages. A page is a *notebook* when its Markdown file
carries a jupytext header; notebooks are executed by papermill with the parameters
``SCALE`` and ``SEED`` (into ``_build/executed/<doc>.ipynb``, timing written to
``_build/timings.json``), all other pages are copied as they are. The ledger page
(``book/ledger``) is a notebook too, executed after every chapter because it reads
their ledger files. ``jupyter-book build`` then renders the staged tree with execution
off, so nothing runs twice.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import papermill

from companion.book import toc_files

ROOT = Path(__file__).resolve().parents[1]
LEDGER_DOC = "book/ledger"
QUICK_BUDGET_S = 90.0


def build_dir() -> Path:
    return Path(os.environ.get("BOOK_BUILD_DIR", ROOT / "_build"))


def toc_docs() -> list[str]:
    """Every page of ``_toc.yml`` in reading order, as paths without suffix (``book/intro``)."""
    return toc_files(ROOT)


def is_notebook(doc: str) -> bool:
    text = (ROOT / f"{doc}.md").read_text()
    return text.startswith("---") and "jupytext:" in text.split("\n---", 1)[0]


def chapters() -> list[str]:
    """The executable chapters, in reading order (the ledger page excluded)."""
    return [d for d in toc_docs() if d != LEDGER_DOC and is_notebook(d)]


def slug(doc: str) -> str:
    return Path(doc).name


def executed_path(doc: str) -> Path:
    return build_dir() / "executed" / f"{doc}.ipynb"


def colab_notebook(doc: str) -> Path:
    return ROOT / "notebooks" / f"{slug(doc)}.ipynb"


def sync_notebooks() -> list[Path]:
    """Write ``notebooks/<slug>.ipynb`` for every chapter from its Markdown source, without outputs."""
    written = []
    for doc in chapters():
        nb = jupytext.read(ROOT / f"{doc}.md")
        nb.metadata.pop("jupytext", None)
        for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes nothing
            cell.id = f"cell-{i}"
        jupytext.write(nb, colab_notebook(doc), fmt="ipynb")
        written.append(colab_notebook(doc))
    return written


def _record_timing(doc: str, seconds: float) -> None:
    path = build_dir() / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    timings[slug(doc)] = round(seconds, 2)
    path.write_text(json.dumps(timings, indent=2, sort_keys=True) + "\n")


def execute(doc: str, *, scale: str = "quick", seed: int = 0) -> float:
    """Execute one notebook page with papermill; return its wall time in seconds.

    A failing cell raises ``papermill.PapermillExecutionError`` naming the cell. The
    cell papermill injects with the parameters is hidden in the HTML (``remove-cell``).
    """
    out = executed_path(doc)
    out.parent.mkdir(parents=True, exist_ok=True)
    source = out.with_suffix(".source.ipynb")
    jupytext.write(jupytext.read(ROOT / f"{doc}.md"), source)
    env_before = os.environ.get("BOOK_BUILD_DIR")
    os.environ["BOOK_BUILD_DIR"] = str(build_dir())  # the kernel inherits it: ledgers land here
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(source), str(out), parameters={"SCALE": scale, "SEED": seed},
            kernel_name="python3", cwd=str((ROOT / doc).parent), progress_bar=False,
        )
    finally:
        seconds = time.perf_counter() - start
        if env_before is None:
            os.environ.pop("BOOK_BUILD_DIR")
        source.unlink(missing_ok=True)
    nb = nbformat.read(out, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, out)
    if doc != LEDGER_DOC:
        _record_timing(doc, seconds)
    return seconds


def stage() -> Path:
    """Lay out ``_build/executed/`` as a book: config, toc, static pages, executed notebooks."""
    site = build_dir() / "executed"
    site.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, site / name)
    notebooks = {d for d in toc_docs() if is_notebook(d)}
    for path in (ROOT / "book").rglob("*"):
        rel = path.relative_to(ROOT)
        if path.is_dir() or str(rel.with_suffix("")) in notebooks or ".ipynb_checkpoints" in rel.parts:
            continue
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, site / rel)
    # literalinclude shows code from the package: `/companion/...` resolves inside the site
    shutil.copytree(ROOT / "companion", site / "companion", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    missing = [d for d in notebooks if not executed_path(d).exists()]
    if missing:
        raise FileNotFoundError(f"not executed yet: {missing}; run `python -m tools.book execute` first")
    return site


def html(*, strict: bool = True) -> Path:
    """Render ``_build/html`` from the staged, executed book (no execution)."""
    site = stage()
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(site),
           "--path-output", str(build_dir().parent), "--all"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    out = build_dir() / "html"
    if build_dir().name != "_build":  # jupyter-book always writes <path-output>/_build/html
        shutil.copytree(build_dir().parent / "_build" / "html", out, dirs_exist_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.book", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["execute", "html", "all", "notebooks"])
    parser.add_argument("docs", nargs="*", help="pages to execute (default: every chapter, then the ledger)")
    parser.add_argument("--scale", default="quick", choices=["quick", "full"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    args = parser.parse_args(argv)
    if args.command == "notebooks":
        for path in sync_notebooks():
            print(f"wrote {path.relative_to(ROOT)}")
    if args.command in ("execute", "all"):
        for doc in args.docs or [*chapters(), LEDGER_DOC]:
            seconds = execute(doc, scale=args.scale, seed=args.seed)
            over = " (over the quick budget!)" if args.scale == "quick" and seconds > QUICK_BUDGET_S else ""
            print(f"executed {doc} in {seconds:.1f} s{over}", flush=True)
    if args.command in ("html", "all"):
        print(f"HTML written to {html(strict=args.strict)}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
