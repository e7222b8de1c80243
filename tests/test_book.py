"""The book pipeline of BOOK.md, one test per chapter.

Tests run in file order: each chapter is executed once by papermill (a failing cell fails its
test, named after the chapter), then the ledger page, then ``jupyter-book build -W -n
--keep-going`` renders the executed notebooks without running them again.
"""

import json

import pytest

from companion.ledger import read_ledgers
from tools import book

CHAPTERS = book.chapters()


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_chapter_executes_at_quick_scale(doc):
    seconds = book.execute(doc, scale="quick", seed=0)
    timings = json.loads((book.build_dir() / "timings.json").read_text())
    assert timings[book.slug(doc)] == pytest.approx(seconds, abs=0.01)
    assert seconds <= book.QUICK_BUDGET_S, f"{doc} took {seconds:.0f} s, over the {book.QUICK_BUDGET_S:.0f} s budget"
    ledger = json.loads((book.build_dir() / "ledger" / f"{book.slug(doc)}.json").read_text())
    assert ledger["scale"] == "quick" and ledger["claims"], f"{doc} recorded no claim"


def test_ledger_page_executes_after_the_chapters():
    missing = [d for d in CHAPTERS if not book.executed_path(d).exists()]
    for doc in missing:  # when this test runs alone
        book.execute(doc)
    book.execute(book.LEDGER_DOC)
    assert {led["chapter"] for led in read_ledgers(book.build_dir() / "ledger")} >= set(map(book.slug, CHAPTERS))


def test_book_builds_with_warnings_as_errors():
    if not book.executed_path(book.LEDGER_DOC).exists():
        pytest.fail("run the whole file: the ledger page has not been executed")
    html = book.html(strict=True)
    intro = (html / "book" / "intro.html").read_text()
    assert "ICML 2025, Reproduced" in intro and "Using a chapter in a course" in intro
    ledger_page = (html / "book" / "ledger.html").read_text()
    for led in read_ledgers(book.build_dir() / "ledger"):
        for claim in led["claims"]:
            assert claim["id"] in ledger_page, f"claim {claim['id']} is missing from the ledger page"
    for doc in CHAPTERS:
        page = (html / f"{doc}.html").read_text()
        assert "colab-badge.svg" in page, f"{doc}: no Colab badge"
        assert "<img" in page, f"{doc}: no figure"
        assert 'class="pasted-text"' in page, f"{doc}: no glued number in the prose"
