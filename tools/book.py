"""The book's pipeline: execute each chapter once, then render the HTML from the executed notebooks.

    python -m tools.book execute [DOC ...]   # papermill, quick scale, into _build/executed/
    python -m tools.book html [--strict]     # stage the executed notebooks, jupyter-book build
    python -m tools.book all [--strict]      # every chapter, then the ledger page, then the HTML
                 [--jobs N] [--force]        # N chapters at once; ignore the execution cache
    python -m tools.book notebooks           # regenerate notebooks/ (reader's and student's) and the
                                             # equation numbers the exercise checkers cite
    python -m tools.book nbgrader DIR        # an nbgrader course source: DIR/source/<slug>/<slug>.ipynb
    python -m tools.book full DOC [DOC ...]  # run chapters at full scale; commit book/results/<slug>-full.json

``_toc.yml`` is the single list of pages. A page is a *notebook* when its Markdown file
carries a jupytext header; notebooks are executed by papermill with the parameters
``SCALE`` and ``SEED`` (into ``_build/executed/<doc>.ipynb``, timing written to
``_build/timings.json``), all other pages are copied as they are. The ledger page
(``book/ledger``) is a notebook too, executed after every chapter because it reads
their ledger files. ``jupyter-book build`` then renders the staged tree with execution
off, so nothing runs twice. ``execute`` and ``all`` take a chapter from the execution cache
when nothing its run depends on has changed, and run ``--jobs`` chapters at once
(:mod:`tools.build`); the chapter tests call :func:`execute` directly, so CI always runs cold.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import papermill

from companion.book import EXECUTING_ENV, toc_files
from tools import versions

ROOT = Path(__file__).resolve().parents[1]
LEDGER_DOC = "book/ledger"
QUICK_BUDGET_S = 90.0
COLUMN = 88  # characters of code or text output the page shows at desktop width without scrolling


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


def student_notebook(doc: str) -> Path:
    return ROOT / "notebooks" / "student" / f"{slug(doc)}.ipynb"


EQUATIONS = ROOT / "companion" / "exercises" / "equations.json"
_MATH_LABEL = re.compile(r"^```\{math\}\s*\n:label:\s*(\S+)", re.M)


def source_notebook(doc: str):
    """The chapter's notebook as written in ``book/`` (solutions between nbgrader's delimiters)."""
    return jupytext.read(ROOT / f"{doc}.md")


def equation_numbers(doc: str) -> dict[str, int]:
    """``{label: printed number}`` of the chapter's numbered equations (Sphinx numbers them per page,
    in order of appearance)."""
    labels = _MATH_LABEL.findall((ROOT / f"{doc}.md").read_text())
    return {label: i for i, label in enumerate(labels, start=1)}


def notebook_versions(doc: str) -> list[tuple[Path, object]]:
    """``[(path, notebook)]``: the reader's and the student's notebook of ``doc`` as written to
    ``notebooks/``, their equations numbered as on the page (:func:`versions.number_equations`)."""
    nb, numbers = source_notebook(doc), equation_numbers(doc)
    return [(colab_notebook(doc), versions.number_equations(versions.reader(nb, slug(doc)), numbers)),
            (student_notebook(doc), versions.number_equations(versions.student(nb, slug(doc)), numbers))]


def sync_notebooks() -> list[Path]:
    """Write, for every chapter, the reader's notebook ``notebooks/<slug>.ipynb`` (what Colab opens)
    and the student's ``notebooks/student/<slug>.ipynb``, without outputs; and the equation numbers
    the checkers cite (``companion/exercises/equations.json``)."""
    written = []
    for doc in chapters():
        for path, nb in notebook_versions(doc):
            path.parent.mkdir(parents=True, exist_ok=True)
            jupytext.write(versions.clean(nb), path, fmt="ipynb")
            written.append(path)
    EQUATIONS.write_text(json.dumps({slug(d): equation_numbers(d) for d in chapters()}, indent=1) + "\n")
    written.append(EQUATIONS)
    return written


NBGRADER_CONFIG = '''"""nbgrader's settings for a course made by `python -m tools.book nbgrader` (run nbgrader here)."""
c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.root = "."
c.CourseDirectory.course_id = "icml2025-reproduced"
# A chapter runs its experiments before its exercises: allow it the quick scale's time, and more.
c.ExecutePreprocessor.timeout = 600
'''


def write_nbgrader_source(folder: Path) -> list[Path]:
    """An nbgrader course for every chapter: ``source/<slug>/<slug>.ipynb`` (solutions delimited,
    checkers graded in a fresh process, equations numbered) and its ``nbgrader_config.py``."""
    written = []
    for doc in chapters():
        path = Path(folder) / "source" / slug(doc) / f"{slug(doc)}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nb = versions.nbgrader_source(source_notebook(doc), slug(doc))
        jupytext.write(versions.clean(versions.number_equations(nb, equation_numbers(doc))), path, fmt="ipynb")
        written.append(path)
    config = Path(folder) / "nbgrader_config.py"
    config.write_text(NBGRADER_CONFIG)
    written.append(config)
    return written


def _update_timings(key: str, value) -> None:
    path = build_dir() / "timings.json"
    timings = json.loads(path.read_text()) if path.exists() else {}
    timings[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(timings, indent=2, sort_keys=True) + "\n")


def record_timing(doc: str, seconds: float) -> None:
    """Write a chapter's wall time to ``timings.json`` (``{slug: seconds}``)."""
    _update_timings(slug(doc), round(seconds, 2))


def record_build(seconds: float, **how) -> None:
    """Write the whole build's wall time, and how it ran, under ``"build"`` in ``timings.json``."""
    _update_timings("build", {"seconds": round(seconds, 1), **how})


def execute(doc: str, *, scale: str = "quick", seed: int = 0, timed: bool = True) -> float:
    """Execute one notebook page with papermill; return its wall time in seconds.

    A failing cell raises ``papermill.PapermillExecutionError`` naming the cell. The
    cell papermill injects with the parameters is hidden in the HTML (``remove-cell``).
    ``timed=False`` leaves ``timings.json`` to the caller (a parallel build writes it from one
    process).
    """
    out = executed_path(doc)
    out.parent.mkdir(parents=True, exist_ok=True)
    source = out.with_suffix(".source.ipynb")
    nb = source_notebook(doc)
    jupytext.write(versions.reader(nb, slug(doc)) if doc != LEDGER_DOC else nb, source)
    env_before = {k: os.environ.get(k) for k in ("BOOK_BUILD_DIR", EXECUTING_ENV)}
    os.environ["BOOK_BUILD_DIR"] = str(build_dir())  # the kernel inherits it: ledgers land here
    os.environ[EXECUTING_ENV] = "1"  # progress bars print one summary line instead of a bar
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(source), str(out), parameters={"SCALE": scale, "SEED": seed},
            kernel_name="python3", cwd=str((ROOT / doc).parent), progress_bar=False,
        )
    finally:
        seconds = time.perf_counter() - start
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        source.unlink(missing_ok=True)
    nb = nbformat.read(out, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if "injected-parameters" in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    nbformat.write(nb, out)
    if doc != LEDGER_DOC and timed:
        record_timing(doc, seconds)
    for problem in output_problems(nb):
        print(f"{doc}: {problem}", file=sys.stderr)
    return seconds


def record_full_scale(doc: str, *, seed: int = 0) -> Path:
    """Execute ``doc`` at full scale (in ``_build/full/``, so the quick build is untouched) and
    write its ledger, with how and where it ran, to ``book/results/<slug>-full.json``."""
    import platform
    import torch

    quick_dir = os.environ.get("BOOK_BUILD_DIR")
    os.environ["BOOK_BUILD_DIR"] = str(build_dir() / "full")
    try:
        seconds = execute(doc, scale="full", seed=seed)
        ledger = json.loads((build_dir() / "ledger" / f"{slug(doc)}.json").read_text())
    finally:
        if quick_dir is None:
            os.environ.pop("BOOK_BUILD_DIR")
        else:
            os.environ["BOOK_BUILD_DIR"] = quick_dir
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    ledger["run"] = {"seconds": round(seconds, 1), "device": device, "commit": commit or "unknown"}
    out = ROOT / "book" / "results" / f"{slug(doc)}-full.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(ledger, indent=2, ensure_ascii=False) + "\n")
    return out


_BAR = re.compile(r"\d+%\|[^|]*\||\d+/\d+ \[\d+:\d+")
_PATH = re.compile(r"(/work/|/home/|/tmp/|/root/|/Users/|site-packages|[A-Z]:\\\\)")


_GLUE_REF = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)(?::[^`]*)?`|^```\{glue(?::\w+)?\}\s+(\S+)", re.M)


def output_problems(nb) -> list[str]:
    """What a reader must not see in an executed page: stderr, progress-bar walls, machine paths,
    errors, NaN in a table, printed lines wider than the column, a glued name the prose uses but
    the run never glued; and autograded exercises that do not score full points."""
    problems = []
    glued = {o.metadata["scrapbook"]["name"] for c in nb.cells if c.cell_type == "code"
             for o in c.get("outputs", []) if "scrapbook" in o.get("metadata", {})}
    used = {a or b for c in nb.cells if c.cell_type == "markdown" for a, b in _GLUE_REF.findall(c.source)}
    problems += [f"the prose uses {{glue}} `{name}`, which the run never glued" for name in sorted(used - glued)]
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                problems.append(f"cell {i}: error {out.ename}")
                continue
            texts = [out.text] if out.output_type == "stream" else [
                v if isinstance(v, str) else "" for k, v in out.get("data", {}).items()
                if k.startswith("text/") and k != "text/html"]
            if out.output_type == "stream" and out.name == "stderr":
                problems.append(f"cell {i}: stderr output {out.text[:80]!r}")
            for text in texts:
                if len(_BAR.findall(text)) > 1:
                    problems.append(f"cell {i}: progress-bar lines {text[:80]!r}")
                if _PATH.search(text):
                    problems.append(f"cell {i}: a machine path {_PATH.search(text).group(0)!r} in {text[:80]!r}")
                if re.search(r"\|\s*(nan|NaN)\s*\|", text):
                    problems.append(f"cell {i}: a NaN cell in a table")
            if out.output_type == "stream" or set(out.get("data", {})) == {"text/plain"}:  # shown as text
                wide = [line for text in texts for line in text.splitlines() if len(line) > COLUMN]
                problems += [f"cell {i}: a printed line of {len(line)} characters, wider than the "
                             f"{COLUMN} the column shows: {line[:60]!r}" for line in wide]
        if "autograde" in tags:
            scores = [o.data.get("text/plain") for o in cell.get("outputs", []) if o.output_type == "execute_result"]
            if scores != [f"{cell.metadata['points']:g}"]:
                problems.append(f"cell {i}: the autograded exercise scored {scores}, not {cell.metadata['points']:g} "
                                "points with the chapter's own solution")
    return problems


def stage() -> Path:
    """Lay out ``_build/executed/`` as a book: config, toc, static pages, executed notebooks."""
    site = build_dir() / "executed"
    site.mkdir(parents=True, exist_ok=True)
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, site / name)
    notebooks = {d for d in toc_docs() if is_notebook(d)}
    for doc in notebooks:  # a stale Markdown copy beside an executed notebook would be a second source
        (site / f"{doc}.md").unlink(missing_ok=True)
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


_LAUNCH_MENU = re.compile(r'<div class="dropdown dropdown-launch-buttons">.*?</ul>\s*</div>', re.S)


def _point_launch_buttons_at_the_colab_notebooks(site: Path) -> None:
    """The theme's Colab launch button opens the page's source path (``book/<part>/<slug>.ipynb``,
    which is not in the repository); point it at ``notebooks/<slug>.ipynb``, as the badge does.
    Only the Colab URL changes: the download button keeps the executed notebook in ``_sources/``.
    The ledger page has no notebook a reader could run, so it loses the launch menu."""
    from companion.book import release_tag, repository_url

    _, branch = repository_url(ROOT)
    for doc in chapters():
        page = site / f"{doc}.html"
        if page.exists():
            text = page.read_text()
            page.write_text(text.replace(f"/blob/{branch}/{doc}.ipynb",
                                         f"/blob/{release_tag()}/notebooks/{slug(doc)}.ipynb"))
    ledger = site / f"{LEDGER_DOC}.html"
    if ledger.exists():
        ledger.write_text(_LAUNCH_MENU.sub("", ledger.read_text(), count=1))


def html(*, strict: bool = True, everything: bool = True) -> Path:
    """Render ``_build/html`` from the staged, executed book (no execution).

    ``everything=False`` lets Sphinx re-read only the pages whose files changed since the last
    build (an author's rebuild); the default renders every page afresh, as CI does.
    """
    site = stage()
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(site),
           "--path-output", str(build_dir().parent)] + (["--all"] if everything else [])
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    _point_launch_buttons_at_the_colab_notebooks(build_dir().parent / "_build" / "html")
    out = build_dir() / "html"
    if build_dir().name != "_build":  # jupyter-book always writes <path-output>/_build/html
        shutil.copytree(build_dir().parent / "_build" / "html", out, dirs_exist_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.book", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["execute", "html", "all", "notebooks", "nbgrader", "full"])
    parser.add_argument("docs", nargs="*", help="pages to execute (default: every chapter, then the ledger); "
                        "for nbgrader, the course folder")
    parser.add_argument("--scale", default="quick", choices=["quick", "full"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict", action="store_true", help="warnings are errors (-W -n --keep-going)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="chapters executed at once (default: the number of cores)")
    parser.add_argument("--force", action="store_true",
                        help="re-execute every chapter, whatever the execution cache holds")
    args = parser.parse_args(argv)
    if args.command == "notebooks":
        for path in sync_notebooks():
            print(f"wrote {path.relative_to(ROOT)}")
    if args.command == "nbgrader":
        if len(args.docs) != 1:
            parser.error("nbgrader: give one course folder, e.g. `python -m tools.book nbgrader course`")
        for path in write_nbgrader_source(Path(args.docs[0])):
            print(f"wrote {path}")
        return 0
    if args.command == "full":
        for doc in args.docs or chapters():
            print(f"wrote {record_full_scale(doc, seed=args.seed).relative_to(ROOT)}", flush=True)
        return 0
    built = None
    if args.command in ("execute", "all"):
        from tools.build import build

        docs = [d for d in args.docs if d != LEDGER_DOC]
        if args.docs and not docs:  # the ledger page alone
            print(f"executed {LEDGER_DOC} in {execute(LEDGER_DOC, scale=args.scale, seed=args.seed):.1f} s")
        else:
            built = build(docs or None, jobs=args.jobs, scale=args.scale, seed=args.seed, force=args.force,
                          ledger_page=not args.docs or LEDGER_DOC in args.docs)
            print(f"built in {built.seconds:.1f} s with {built.jobs} job(s): {len(built.executed)} executed, "
                  f"{len(built.cached)} from the cache")
    if args.command in ("html", "all"):
        incremental = built is not None and not args.force and bool(built.cached)
        print(f"HTML written to {html(strict=args.strict, everything=not incremental)}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
