"""Helpers for the book's pages: the repository, the Colab badge, glued numbers and words, progress bars."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

__all__ = ["repo_root", "repository_url", "toc_files", "reading_order", "chapter_titles", "release_tag",
           "colab_url", "colab_badge", "glue", "glue_text", "glue_choice", "md_table", "progress", "device", "EXECUTING_ENV"]

EXECUTING_ENV = "BOOK_EXECUTING"  # set by tools/book.py while papermill executes a page for the HTML

_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def repo_root(start: str | Path | None = None) -> Path | None:
    """The repository holding the book (a folder with ``_toc.yml`` and ``companion/``), or None."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file() and (folder / "companion").is_dir():
            return folder
    return None


def repository_url(root: Path) -> tuple[str, str]:
    """``(url, branch)`` of ``repository`` in ``<root>/_config.yml``."""
    repo = yaml.safe_load((root / "_config.yml").read_text())["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def toc_files(root: Path) -> list[str]:
    """Every page of ``<root>/_toc.yml`` in reading order, without suffix (``book/intro``)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            files.extend([entry["file"]] if "file" in entry else [])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files


def reading_order(root: Path) -> list[str]:
    """The page names of ``_toc.yml`` (``best-of-n``, ...) in reading order."""
    return [Path(f).name for f in toc_files(root)]


def chapter_titles(root: Path) -> dict[str, str]:
    """``{slug: title}`` of every page of ``_toc.yml``, the title being its first ``# `` heading."""
    titles = {}
    for doc in toc_files(root):
        path = root / f"{doc}.md"
        if path.is_file():
            heading = next((line[2:].strip() for line in path.read_text().splitlines() if line.startswith("# ")), None)
            titles[Path(doc).name] = heading or Path(doc).name
    return titles


def release_tag() -> str:
    """The git tag of this release (``v0.3.0``): what the Colab badges open and the install cell pins."""
    from companion import __version__

    return f"v{__version__}"


def colab_url(slug: str, root: Path, student: bool = False) -> str:
    """The Colab address of ``notebooks/<slug>.ipynb`` (the student's ``notebooks/student/<slug>.ipynb``)
    at this release's tag, so that the notebook Colab opens and the package its set-up cell
    installs are the same version."""
    url, _ = repository_url(root)
    prefix = "https://github.com/"
    if not url.startswith(prefix):
        raise ValueError(f"repository.url: expected a GitHub URL for Colab, got {url!r}")
    rel = f"notebooks/{'student/' if student else ''}{slug}.ipynb"
    if not (root / rel).is_file():
        raise ValueError(f"slug: no {rel} in {root}")
    return f"https://colab.research.google.com/github/{url[len(prefix):]}/blob/{release_tag()}/{rel}"


def colab_badge(slug: str, student: bool = False):
    """A chapter's Colab badges, built from ``_config.yml``: *Open in Colab* (the reader's notebook)
    beside *Open the assignment in Colab* (the student's); in the student's notebook, only the latter.

    Outside a clone of the repository (in Colab itself) there is nothing to link from,
    and the badges are left out.
    """
    from IPython.display import Markdown

    root = repo_root()
    if root is None:
        return Markdown("")
    assignment = f"[![Open the assignment in Colab]({_BADGE})]({colab_url(slug, root, student=True)}) " \
                 "**Open the assignment in Colab** (the exercises without their solutions)"
    if student:
        return Markdown(assignment)
    return Markdown(f"[![Open in Colab]({_BADGE})]({colab_url(slug, root)}) **Open in Colab**  \n{assignment}")


def device():
    """The chapter's ``DEVICE``, picked once: CUDA when a GPU is visible, else the CPU."""
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def glue(name: str, value) -> None:
    """Glue a number into the prose (``{glue:text}`name:.3f```) without displaying it.

    numpy scalars become plain Python ``int``/``float``, so the page shows ``0.693``, not
    ``np.float64(0.693)``. Where myst-nb is not installed (Colab) nothing needs gluing.
    """
    import numbers

    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(f"value: expected a number to glue as {name!r}, got a bool; glue a word with glue_choice")
    if isinstance(value, numbers.Integral):
        value = int(value)
    elif isinstance(value, numbers.Real):
        value = float(value)
    else:
        raise ValueError(f"value: expected a number to glue as {name!r}, got {type(value).__name__}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    myst_glue(name, value, display=False)


def glue_text(name: str, text: str) -> None:
    """Glue a word or a Markdown block into the prose (``{glue:md}`name``` or the ``glue:md``
    directive) without displaying it; a no-op where myst-nb is not installed (Colab)."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"text: expected a non-empty string to glue as {name!r}, got {text!r}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        return
    from IPython.display import Markdown

    myst_glue(name, Markdown(text), display=False)


def glue_choice(name: str, condition, yes: str, no: str) -> None:
    """Glue ``yes`` or ``no`` as ``name`` after a condition computed in this run.

    The prose's verdict words are built this way ("{glue:md}`beats`"), never typed, so a change of
    seed or scale cannot make the text contradict the numbers.
    """
    import numpy as np

    if not isinstance(condition, (bool, np.bool_)):
        raise ValueError(f"condition: expected a bool computed in this run, got {condition!r}")
    glue_text(name, yes if condition else no)


def md_table(df, formats: dict | None = None, float_format: str = "{:.3f}", index: bool = True):
    """A DataFrame as the book's one table style: a Markdown table (MyST renders ``$...$`` in its
    headers and cells), integers as integers, floats through ``formats[column]`` or
    ``float_format``. A missing value is refused (``ValueError`` naming the column): a published
    table has no NaN cell; fill it with a word that says why it is empty.
    """
    import numbers

    import pandas as pd
    from IPython.display import Markdown

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"df: expected a pandas DataFrame, got {type(df).__name__}")
    formats = formats or {}
    frame = df.reset_index() if index else df
    if index and frame.columns[0] == "index":
        frame = frame.rename(columns={"index": ""})

    def cell(column, value) -> str:
        if value is None or (isinstance(value, float) and value != value):
            raise ValueError(f"df: column {column!r} has a missing value; fill it with text that says why")
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            return "yes" if value else "no"
        if column in formats:
            return formats[column].format(value)
        if isinstance(value, numbers.Integral):
            return f"{int(value):,}"
        if isinstance(value, numbers.Real):
            return float_format.format(float(value))
        return str(value).replace("|", "\\|")

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(c, v) for c, v in zip(frame.columns, row)) + " |"
            for row in frame.itertuples(index=False)]
    return Markdown("\n".join([header, rule, *body]))


class progress:
    """Iterate with a progress bar in a terminal or a live notebook; silently in a built page.

    While ``tools/book.py`` executes a page for the HTML (``$BOOK_EXECUTING`` is set) nothing is
    drawn or printed: a reader of the page has no use for a bar, nor for how long a loop took on
    the build machine (the chapter's wall time is in ``_build/timings.json``). Elsewhere it is
    ``tqdm.auto`` (a widget in Jupyter and Colab, a text bar in a terminal).
    """

    def __init__(self, iterable, desc: str, total: int | None = None, **kwargs):
        self.iterable, self.desc = iterable, desc
        self.total = total if total is not None else (len(iterable) if hasattr(iterable, "__len__") else None)
        self.kwargs = kwargs

    def __len__(self):
        if self.total is None:
            raise TypeError("progress: the iterable has no length")
        return self.total

    def __iter__(self):
        if not os.environ.get(EXECUTING_ENV):
            try:  # a widget where Jupyter can draw one, else a text bar
                import ipywidgets  # noqa: F401
                from tqdm.auto import tqdm
            except ImportError:
                from tqdm.std import tqdm
            yield from tqdm(self.iterable, desc=self.desc, total=self.total, **self.kwargs)
            return
        yield from self.iterable
