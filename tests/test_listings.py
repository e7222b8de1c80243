"""Package listings fit the book's column: every line a chapter shows from ``companion/`` by
``literalinclude`` is at most 88 characters, as the page prints it (the Sphinx extension's
rewriting of equation labels and reST markup applied).

No build is needed: each ``literalinclude`` of each page is resolved to its lines by Sphinx's own
reader (``:pyobject:``, ``:lines:``, ``:start-after:``/``:end-before:``...), then rewritten by
``book/_ext/book_html.readable_listing`` with the page's equation numbers.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from sphinx.directives.code import LiteralIncludeReader

from tools import book

sys.path.insert(0, str(book.ROOT / "book" / "_ext"))

from book_html import readable_listing  # noqa: E402

_INCLUDE = re.compile(r"^```\{literalinclude\}\s+(\S+)[ \t]*\n((?::[\w-]+:.*\n)*)```", re.M)

class _Config:
    source_encoding = "utf-8"


def listings() -> list[tuple[str, str, dict[str, str]]]:
    """``(doc, path, options)`` of every ``literalinclude`` of the book's pages."""
    found = []
    for doc in book.toc_docs():
        for match in _INCLUDE.finditer((book.ROOT / f"{doc}.md").read_text()):
            options = {}
            for line in match.group(2).splitlines():
                key, _, value = line[1:].partition(":")
                options[key] = value.strip()
            found.append((doc, match.group(1), options))
    return found


def shown_lines(doc: str, path: str, options: dict[str, str]) -> list[str]:
    """The lines the page shows for one ``literalinclude``, as the reader sees them."""
    text, _ = LiteralIncludeReader(str(book.ROOT / path.lstrip("/")), options, _Config()).read()
    return readable_listing(text, book.equation_numbers(doc)).splitlines()


def _package(path: str) -> str:
    parts = Path(path.lstrip("/")).parts  # companion/<package>/... or companion/<module>.py
    return Path(parts[1]).stem


def _id(doc: str, path: str, options: dict[str, str]) -> str:
    return f"{book.slug(doc)}:{options.get('pyobject', path)}"


def _cases():
    for doc, path, options in listings():
        yield pytest.param(doc, path, options, id=_id(doc, path, options))


def test_every_chapter_listing_is_found():
    found = listings()
    assert len(found) >= 30 and all(path.startswith("/companion/") for _, path, _ in found), found
    assert {_package(path) for _, path, _ in found} >= {"svg", "catekv", "kernels", "ocl", "ngs"}


@pytest.mark.parametrize("doc, path, options", list(_cases()))
def test_a_listing_fits_the_column(doc, path, options):
    lines = shown_lines(doc, path, options)
    assert lines, f"{doc}: {path} {options} shows nothing"
    wide = [f"{len(line)}: {line}" for line in lines if len(line) > book.COLUMN]
    assert not wide, f"{doc}: {path} {options} shows lines over {book.COLUMN} characters:\n" + \
        "\n".join(wide)


def test_the_column_check_can_fail(tmp_path):
    """A listing with a long line is caught; the reader resolves ``:pyobject:`` as Sphinx does."""
    source = tmp_path / "m.py"
    source.write_text("def short():\n    return 1\n\n\n"
                      "def long():\n    return " + "1 + " * 30 + "1\n")
    text, _ = LiteralIncludeReader(str(source), {"pyobject": "long"}, _Config()).read()
    assert max(map(len, text.splitlines())) > book.COLUMN
    text, _ = LiteralIncludeReader(str(source), {"pyobject": "short"}, _Config()).read()
    assert text == "def short():\n    return 1\n"
