"""Helpers for the book's pages: the repository, the Colab badge, glued numbers, progress bars."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from tqdm.std import tqdm

__all__ = ["repo_root", "repository_url", "toc_files", "reading_order", "colab_url", "colab_badge", "glue", "progress"]

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


def colab_url(slug: str, root: Path) -> str:
    """The Colab address of ``notebooks/<slug>.ipynb`` on the repository's default branch."""
    url, branch = repository_url(root)
    prefix = "https://github.com/"
    if not url.startswith(prefix):
        raise ValueError(f"repository.url: expected a GitHub URL for Colab, got {url!r}")
    if not (root / "notebooks" / f"{slug}.ipynb").is_file():
        raise ValueError(f"slug: no notebooks/{slug}.ipynb in {root}")
    return f"https://colab.research.google.com/github/{url[len(prefix):]}/blob/{branch}/notebooks/{slug}.ipynb"


def colab_badge(slug: str):
    """The *Open in Colab* badge of a chapter, built from ``_config.yml``.

    Outside a clone of the repository (in Colab itself) there is nothing to link from,
    and the badge is left out.
    """
    from IPython.display import Markdown

    root = repo_root()
    if root is None:
        return Markdown("")
    return Markdown(f"[![Open in Colab]({_BADGE})]({colab_url(slug, root)})")


def glue(name: str, value) -> None:
    """Glue a number into the prose (``{glue:text}`name:.3f```) without displaying it.

    numpy scalars become plain Python ``int``/``float``, so the page shows ``0.693``, not
    ``np.float64(0.693)``. Where myst-nb is not installed (Colab) nothing needs gluing.
    """
    import numbers

    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
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


def progress(iterable, desc: str, **kwargs):
    """A text progress bar that reads well in a notebook, in Colab and in the rendered HTML.

    It writes to stdout and refreshes at most every few seconds, so an executed page keeps
    a short record (start, end, rate) rather than hundreds of partial lines.
    """
    return tqdm(iterable, desc=desc, file=sys.stdout, mininterval=5.0, ncols=80, **kwargs)
