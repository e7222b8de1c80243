"""Building the book fast: chapters executed in parallel, and an execution cache keyed by content.

    python -m tools.book all --jobs 2        # every chapter, two at a time, then the ledger page, the HTML
    python -m tools.book all --force         # re-execute everything, whatever the cache holds

A chapter is executed again only when something its run depends on changed: its source, the
companion modules it imports (followed through their own imports, with the data files of each
package it touches: checkpoints, optima, equation numbers), the files it reads by path (its
committed full-scale ledger, the GPU benchmark results), the pinned environment
(``requirements-ci.txt``, the Python version), the code that turns a chapter into the executed
notebook (``tools/versions.py``), or its parameters (``SCALE``, ``SEED``). Imports made with
``importlib`` and files read by other paths are not seen: ``--force`` covers them. The digest of all of
that is the key under which `jupyter-cache <https://jupyter-cache.readthedocs.io>`_ (the cache
Jupyter Book itself uses) stores the executed notebook, its ledger and its wall time, in
``_build/cache/``. The ledger page reads every chapter's ledger, so it always runs, last.

Workers are separate processes, each with its share of the cores as its thread budget
(``OMP_NUM_THREADS`` and friends, inherited by the notebook's kernel); most chapters run on one
thread anyway. The result does not depend on ``--jobs`` (a test compares the ledgers).
"""

from __future__ import annotations

import ast
import hashlib
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat

from tools import book

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
_KEY_FILES = ("requirements-ci.txt", "tools/versions.py")


# --- what a chapter's run depends on ------------------------------------------------------------

def _imported_modules(source: str, package: str | None = None) -> set[str]:
    """Dotted names of the ``companion`` modules that Python ``source`` imports (absolute, or
    relative to ``package``, the importing module's package)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell that is not plain Python: nothing importable to follow
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level and package:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            names.add(stem)
            names |= {f"{stem}.{alias.name}" for alias in node.names}  # `from pkg import module`
    return {n for n in names if n == "companion" or n.startswith("companion.")}


def _module_file(name: str, root: Path) -> Path | None:
    """The file of module ``name`` under ``root`` (``a/b.py`` or ``a/b/__init__.py``), if any."""
    path = root.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _code_cells(path: Path) -> list[str]:
    """The code cells of a MyST-Markdown notebook, without IPython's magics and shell lines."""
    nb = jupytext.read(path)
    return ["\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for cell in nb.cells if cell.cell_type == "code"]


def _owning_package(path: Path) -> Path:
    """The innermost package folder (one with an ``__init__.py``) that holds ``path``."""
    folder = path.parent
    while not (folder / "__init__.py").is_file() and folder != folder.parent:
        folder = folder.parent
    return folder


def dependencies(doc: str, root: Path = book.ROOT) -> list[Path]:
    """Every file whose content the execution of ``doc`` depends on, sorted: the chapter, the
    companion modules it imports (transitively), each touched package's data files, and the
    environment and conversion files of ``_KEY_FILES``."""
    todo = set().union(*(_imported_modules(c) for c in _code_cells(root / f"{doc}.md")))
    seen, files = set(), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _module_file(name, root)
        if path is None:  # `from companion.x import a_function`: not a module
            continue
        files.add(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        if path.name == "__init__.py":  # a package: its own data files (checkpoints, optima) count too
            files |= {p for p in path.parent.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
                      and "__pycache__" not in p.parts and _owning_package(p) == path.parent}
        parent = package.rpartition(".")[0]
        if parent:
            todo.add(parent)  # importing a.b.c runs a/__init__.py and a/b/__init__.py first
        todo |= _imported_modules(path.read_text(), package)
    files |= {root / f"{doc}.md"} | {root / f for f in _KEY_FILES if (root / f).is_file()}
    # what a chapter reads by path: its committed full-scale ledger, the GPU benchmark results
    files |= {p for p in [root / "book" / "results" / f"{book.slug(doc)}-full.json"] if p.is_file()}
    files |= {p for p in (root / "benchmarks" / "results").glob("*.json")}
    return sorted(files)


def cache_key(doc: str, *, scale: str, seed: int, root: Path = book.ROOT) -> str:
    """The digest of everything ``doc``'s run depends on (see :func:`dependencies`)."""
    digest = hashlib.sha256(f"{doc}\n{scale}\n{seed}\n{sys.version}\n".encode())
    for path in dependencies(doc, root):
        digest.update(f"{path.relative_to(root).as_posix()}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# --- the cache (jupyter-cache) ---------------------------------------------------------------------

def _key_notebook(doc: str, key: str) -> nbformat.NotebookNode:
    """The notebook jupyter-cache hashes to find a run: one code cell holding the key."""
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
    cell = nbformat.v4.new_code_cell(f"# {doc}: {key}")
    cell.execution_count = 1
    nb.cells = [cell]
    return nb


def _cache():
    from jupyter_cache import get_cache

    return get_cache(book.build_dir() / "cache")


def _artifacts(doc: str) -> list[Path]:
    return [book.executed_path(doc), book.build_dir() / "ledger" / f"{book.slug(doc)}.json"]


def _restore(doc: str, key: str) -> float | None:
    """Copy a cached run of ``doc`` back into the build; its wall time, or None on a miss."""
    cache = _cache()
    try:
        record = cache.match_cache_notebook(_key_notebook(doc, key))
    except KeyError:
        return None
    bundle = cache.get_cache_bundle(record.pk)
    for rel, handle in bundle.artifacts:
        target = book.build_dir() / rel
        data = handle.read()
        if not target.is_file() or target.read_bytes() != data:  # unchanged files keep their mtime
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return float(record.data["seconds"])


def _store(doc: str, key: str, seconds: float) -> None:
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.cache.main import NbArtifacts

    bundle = CacheBundleIn(_key_notebook(doc, key), uri=doc, data={"seconds": round(seconds, 2)},
                           artifacts=NbArtifacts(_artifacts(doc), in_folder=book.build_dir()))
    _cache().cache_notebook_bundle(bundle, overwrite=True)


# --- the build -------------------------------------------------------------------------------------

def _worker(doc: str, scale: str, seed: int, threads: int) -> float:
    for var in THREAD_VARIABLES:  # the kernel papermill starts inherits them
        os.environ[var] = str(threads)
    return book.execute(doc, scale=scale, seed=seed, timed=False)


@dataclass
class Build:
    """What a build did: the chapters it executed and those it took from the cache, with times."""

    jobs: int
    executed: dict[str, float] = field(default_factory=dict)
    cached: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


def build(docs: list[str] | None = None, *, jobs: int | None = None, scale: str = "quick", seed: int = 0,
          force: bool = False, cache: bool = True, ledger_page: bool | None = None) -> Build:
    """Execute ``docs`` (default: every chapter), ``jobs`` at a time, re-using cached runs unless
    ``force`` or not ``cache``; then the ledger page (default: when every chapter was built).

    Chapter wall times go to ``timings.json`` as before, and the build's own under ``"build"``.
    """
    jobs = max(1, jobs or os.cpu_count() or 1)
    docs = list(docs or book.chapters())
    if ledger_page is None:
        ledger_page = set(docs) >= set(book.chapters())
    report, start = Build(jobs), time.perf_counter()
    keys = {doc: cache_key(doc, scale=scale, seed=seed) for doc in docs} if cache else {}
    todo = []
    for doc in docs:
        seconds = None if force or not cache else _restore(doc, keys[doc])
        if seconds is None:
            todo.append(doc)
        else:
            report.cached[doc] = seconds
            book.record_timing(doc, seconds)
            print(f"cached {doc} ({seconds:.1f} s when it ran)", flush=True)
    threads = max(1, (os.cpu_count() or 1) // min(jobs, max(1, len(todo))))
    spawn = multiprocessing.get_context("spawn")  # no fork of a parent that holds threads
    with ProcessPoolExecutor(max_workers=min(jobs, max(1, len(todo))), mp_context=spawn) as pool:
        futures = {pool.submit(_worker, doc, scale, seed, threads): doc for doc in todo}
        for future in as_completed(futures):
            doc = futures[future]
            seconds = future.result()  # a failing chapter raises here, naming its cell
            report.executed[doc] = seconds
            book.record_timing(doc, seconds)
            if cache:
                _store(doc, keys[doc], seconds)
            over = " (over the quick budget!)" if scale == "quick" and seconds > book.QUICK_BUDGET_S else ""
            print(f"executed {doc} in {seconds:.1f} s{over}", flush=True)
    if ledger_page:
        book.execute(book.LEDGER_DOC, scale=scale, seed=seed)
    report.seconds = time.perf_counter() - start
    book.record_build(report.seconds, jobs=jobs, executed=len(report.executed), cached=len(report.cached))
    return report
