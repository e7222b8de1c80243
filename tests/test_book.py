"""The book pipeline of BOOK.md, one test per chapter, then the HTML a reader gets.

Tests run in file order: each chapter is executed once by papermill (a failing cell fails its
test, named after the chapter), then the ledger page, then ``jupyter-book build -W -n
--keep-going`` renders the executed notebooks without running them again, and the built pages
are checked for what a published book must not show.
"""

import json
import re

import nbformat
import pytest
from bs4 import BeautifulSoup

from companion.book import release_tag
from companion.ledger import HEADLINE_KINDS, ascii_maths, contract_problems, read_ledgers
from tools import book

CHAPTERS = book.chapters()
# A chapter may not give "time" as the reason for a missing ablation while it runs in under 60 s
# ("seconds" only in the plural: "a second suite" is an ordinal).
TIME_WORDS = re.compile(r"\b(time|budget|seconds|minutes?|too slow)\b", re.IGNORECASE)


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_chapter_executes_at_quick_scale(doc):
    seconds = book.execute(doc, scale="quick", seed=0)
    timings = json.loads((book.build_dir() / "timings.json").read_text())
    assert timings[book.slug(doc)] == pytest.approx(seconds, abs=0.01)
    assert seconds <= book.QUICK_BUDGET_S, f"{doc} took {seconds:.0f} s, over the {book.QUICK_BUDGET_S:.0f} s budget"
    ledger = json.loads((book.build_dir() / "ledger" / f"{book.slug(doc)}.json").read_text())
    assert ledger["scale"] == "quick" and ledger["claims"], f"{doc} recorded no claim"
    counted = [c for c in ledger["claims"] if c["kind"] in HEADLINE_KINDS and not c["post_hoc"]]
    assert len(counted) >= 3, f"{doc}: {len(counted)} pre-registered paper/mechanism claims, the contract asks for 3"
    problems = book.output_problems(nbformat.read(book.executed_path(doc), as_version=4))
    assert not problems, f"{doc}: " + "; ".join(problems)
    off_contract = contract_problems(ledger)  # every chapter keeps contract v3 (BOOK.md, The ledger)
    assert not off_contract, f"{doc}: " + "; ".join(off_contract)
    timed = [d["parameter"] for d in ledger["departures"]
             if TIME_WORDS.search(f"{d['why']} {d['ablation'] or ''}")]
    assert seconds >= 60 or not timed, (f"{doc} runs in {seconds:.0f} s but cites time for {timed}: "
                                        "spend the budget on the ablation instead")


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_claims_write_their_mathematics_as_tex(doc):
    """A claim's statement, criterion and paper column print no ASCII stand-in for mathematics
    ("<=", "k_hat", "sqrt(", "R^2") outside $...$: the claims table and the verdict box typeset
    its TeX with MathJax."""
    path = book.build_dir() / "ledger" / f"{book.slug(doc)}.json"
    if not path.exists():
        pytest.fail(f"{doc} has not been executed: run test_chapter_executes_at_quick_scale first")
    found = [f"{c['id']} ({key}): {ascii_maths(c[key])} in {c[key]!r}"
             for c in json.loads(path.read_text())["claims"] for key in ("statement", "criterion", "paper")
             if ascii_maths(c[key])]
    assert not found, f"{doc}: ASCII maths in claims (write it as $TeX$):\n" + "\n".join(found)


def test_ledger_page_executes_after_the_chapters():
    missing = [d for d in CHAPTERS if not book.executed_path(d).exists()]
    for doc in missing:  # when this test runs alone
        book.execute(doc)
    book.execute(book.LEDGER_DOC)
    assert {led["chapter"] for led in read_ledgers(book.build_dir() / "ledger")} >= set(map(book.slug, CHAPTERS))


@pytest.fixture(scope="module")
def html():
    if not book.executed_path(book.LEDGER_DOC).exists():
        pytest.fail("run the whole file: the ledger page has not been executed")
    return book.html(strict=True)


def _page(html, doc) -> BeautifulSoup:
    return BeautifulSoup((html / f"{doc}.html").read_text(), "html.parser")


def test_book_builds_with_warnings_as_errors(html):
    intro = (html / "book" / "intro.html").read_text()
    assert "ICML 2025, Reproduced" in intro and "Using this book in a course" in intro
    ledger_page = _page(html, book.LEDGER_DOC)
    links = {a["href"].split("#")[0] for a in ledger_page.select("article a.reference.internal")}
    for led in read_ledgers(book.build_dir() / "ledger"):
        for claim in led["claims"]:
            assert claim["id"] in ledger_page.text, f"claim {claim['id']} is missing from the ledger page"
    for doc in CHAPTERS:
        assert any(link.endswith(f"{book.slug(doc)}.html") for link in links), f"the ledger page does not link {doc}"
        page = (html / f"{doc}.html").read_text()
        assert "colab-badge.svg" in page, f"{doc}: no Colab badge"
        assert 'class="pasted-text"' in page, f"{doc}: no glued number in the prose"
        assert "Verdict:" in page, f"{doc}: no verdict box"


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_every_figure_has_a_numbered_caption_and_alt_text(html, doc):
    page = _page(html, doc)
    images = [img for img in page.select("article img") if "_images/" in img.get("src", "")]
    assert images, f"{doc}: no figure"
    for img in images:
        figure = img.find_parent("figure")
        assert figure is not None and figure.find("figcaption") is not None, (
            f"{doc}: a figure without a caption ({img['src']}): give its cell mystnb.figure.caption")
        assert "Fig." in figure.find("figcaption").text
        alt = img.get("alt", "")
        assert len(alt) > 20 and not re.fullmatch(r"[0-9a-f]{20,}\.png", alt), f"{doc}: no real alt text: {alt!r}"


@pytest.mark.parametrize("doc", CHAPTERS + [book.LEDGER_DOC], ids=book.slug)
def test_a_published_page_shows_no_stderr_bars_or_machine_paths(html, doc):
    page = _page(html, doc)
    assert not page.select("div.output.stderr"), f"{doc}: a stderr output is shown"
    outputs = "\n".join(o.get_text() for o in page.select("div.cell_output, div.output"))
    assert len(book._BAR.findall(outputs)) <= 1, f"{doc}: progress-bar lines in the page"
    assert not book._PATH.search(outputs), f"{doc}: a machine path: {book._PATH.search(outputs).group(0)!r}"
    assert not re.search(r"<td[^>]*>\s*(nan|NaN)\s*</td>", str(page)), f"{doc}: a NaN table cell"


def test_pages_have_distinct_titles(html):
    titles = {}
    for path in html.rglob("*.html"):
        if path.name in ("genindex.html", "search.html", "index.html") or "_static" in path.parts:
            continue
        title = BeautifulSoup(path.read_text(), "html.parser").title.text.strip()
        titles.setdefault(title, []).append(path.relative_to(html))
    shared = {t: p for t, p in titles.items() if len(p) > 1}
    assert not shared, f"pages sharing a title: {shared}"


@pytest.mark.parametrize("doc", CHAPTERS, ids=book.slug)
def test_equation_numbers_match_what_the_checkers_cite(html, doc):
    page = _page(html, doc)
    printed = {}
    for div in page.select("div.math[id^=equation-]"):
        number = div.select_one("span.eqno")
        printed[div["id"].removeprefix("equation-")] = int(number.text.strip("()#"))
    assert printed == book.equation_numbers(doc)


def test_page_furniture(html):
    for doc in CHAPTERS:
        text = (html / f"{doc}.html").read_text()
        assert text.count("const THEBE_JS_URL") == 1, f"{doc}: thebe's script is injected twice"
        assert 'rel="icon"' in text, f"{doc}: no favicon"
        launch = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', text)
        tag = f"/blob/{release_tag()}/notebooks/"
        reader, student = f"{tag}{book.slug(doc)}.ipynb", f"{tag}student/{book.slug(doc)}.ipynb"
        assert {url[url.index("/blob/"):] for url in launch} == {reader, student}, (
            f"{doc}: Colab links {launch}: the reader's and the assignment's, at the release tag")
    assert (html / "_static" / "favicon.png").exists()
    ledger = (html / f"{book.LEDGER_DOC}.html").read_text()
    assert "colab.research.google.com" not in ledger, "the ledger page has no notebook to launch"


def test_every_notebook_link_resolves(html):
    """The download button of a chapter fetches its executed notebook (a blanket rewrite of the
    Colab link once pointed it at a file that does not exist)."""
    for doc in [*CHAPTERS, book.LEDGER_DOC]:
        page = html / f"{doc}.html"
        for href in re.findall(r'href="([^":#]+\.ipynb)"', page.read_text()):
            assert (page.parent / href).resolve().is_file(), f"{doc}: {href} does not exist"


def test_every_page_with_math_loads_mathjax(html):
    """A page whose math MathJax must typeset loads MathJax (the script-dedupe hook once dropped it
    from every page, and the formulas showed as raw LaTeX)."""
    pages = [p for p in html.rglob("*.html") if "_static" not in p.parts]
    with_math = [p for p in pages if BeautifulSoup(p.read_text(), "html.parser").select(".math")]
    assert len(with_math) >= len(CHAPTERS) // 2
    missing = [str(p.relative_to(html)) for p in with_math if not re.search(r"<script[^>]+mathjax", p.read_text())]
    assert not missing, f"pages with math but no MathJax script: {missing}"


def test_package_listings_show_the_page_numbers_not_labels_or_markup(html):
    """A docstring's eq. (label) shows as the number the page prints; reST roles and literals as
    plain text (book/_ext/book_html.py)."""
    for doc in CHAPTERS:
        soup = BeautifulSoup((html / f"{doc}.html").read_text(), "html.parser")
        listings = [div.get_text() for div in soup.select("div.highlight-python div.highlight")]
        labels = book.equation_numbers(doc)
        left = sorted({label for label in labels for text in listings
                       if f"({label})" in text or f"``{label}``" in text or f"numref:`{label}`" in text})
        assert not left, f"{doc}: equation labels printed in package listings: {left}"
        markup = [m for text in listings for m in re.findall(r":(?:func|meth|class|data|mod):`[^`]+`", text)]
        assert not markup, f"{doc}: reST roles printed in package listings: {markup[:3]}"
