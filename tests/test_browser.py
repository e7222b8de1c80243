"""The built book in a browser, at a phone's width and a desktop's (``tools/browser.py``).

Runs after ``tests/test_book.py`` has built ``_build/html`` (file order); alone, it builds the
site from the executed chapters first. Every page is loaded in headless Chromium at 390 and
1400 px; screenshots of the pages with a problem go to ``_build/browser/``.
"""

from __future__ import annotations

import shutil

import pytest

from tools import book, browser

SITE = book.ROOT / "_build" / "html"


@pytest.fixture(scope="module")
def site():
    if not (SITE / "book" / "intro.html").exists():
        missing = [d for d in book.chapters() if not book.executed_path(d).exists()]
        if missing:
            pytest.fail("run tests/test_book.py first: the chapters have not been executed")
        book.html(strict=True)
    return SITE


def test_every_relative_link_and_anchor_resolves(site):
    problems = browser.link_problems(site)
    assert not problems, "\n".join(f"{p['page']}: {p['kind']} {p['what']}" for p in problems[:30])


def test_the_book_serves_its_own_mathjax(site):
    """The book reads offline: MathJax is copied into the site, not fetched from a CDN."""
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    intro = (site / "book" / "intro.html").read_text()
    assert "cdn.jsdelivr.net" not in intro and "_static/mathjax/tex-chtml.js" in intro


@pytest.fixture(scope="module")
def layout(site):
    if not (shutil.which("chromedriver") and (shutil.which("chromium") or shutil.which("google-chrome"))):
        pytest.fail("no Chromium: scripts/setup.sh installs it (apt-get install chromium chromium-driver)")
    return browser.measure(site)


def _report(problems):
    return "\n".join(f"{p['page']} at {p['width']} px: {p['what']}" for p in problems[:30])


@pytest.mark.parametrize("kind", ["page-wider-than-viewport", "cut-box", "eqno-overlap", "mathjax-error",
                                  "figure-text-small", "legend-overlap", "figure-unmeasured"])
def test_no_page_has(layout, kind):
    found = [p for p in layout if p["kind"] == kind]
    assert not found, f"{len(found)} x {kind} (screenshots in _build/browser/):\n" + _report(found)


def test_the_measurement_catches_what_it_looks_for(tmp_path):
    """The browser test can fail: a page with each defect is caught, and its fixed twin is not."""
    if not shutil.which("chromedriver"):
        pytest.fail("no Chromium: scripts/setup.sh installs it")
    wide = "x" * 400
    formula = ("<div class='math' style='display:flex;flex-direction:row-reverse;overflow:hidden'>"
               "<span class='eqno' style='flex-shrink:0{eqno}'>(1)</span>"
               "<mjx-container display='true' style='display:block;flex-grow:1;overflow:{overflow}'>"
               "<mjx-math style='display:inline-block;width:600px;height:20px'></mjx-math>"
               "</mjx-container></div>")
    head = ("<html><head><meta name='viewport' content='width=device-width, initial-scale=1'><script>"
            "window.MathJax = {version: 'test', startup: {promise: Promise.resolve()}}</script></head>")
    table = f"<table><tr><td style='white-space:nowrap'>{wide}</td></tr></table>"

    def page(name, table, pre_overflow, eqno, overflow, links):
        path = tmp_path / f"{name}.html"
        path.write_text(head + "<body><article class='bd-article' style='width:300px'>" + table
                        + f"<div class='highlight'><pre style='overflow:{pre_overflow}'>{wide}</pre></div>"
                        + formula.format(eqno=eqno, overflow=overflow) + links + "</article></body></html>")
        return path

    bad = page("bad", table, "visible", ";position:relative;left:-100px", "visible",
               "<a href='missing.html'>x</a><a href='#nowhere'>y</a>")
    good = page("good", f"<div style='overflow-x:auto'>{table}</div>", "auto", "", "auto",
                "<a id='here' href='#here'>y</a>")
    found = browser.measure(tmp_path, widths=(390,), shots=None, only=[bad, good])
    on_bad = [p for p in found if p["page"] == "bad.html"]
    assert {p["kind"] for p in on_bad} == {"page-wider-than-viewport", "cut-box", "eqno-overlap"}, found
    assert len([p for p in on_bad if p["kind"] == "cut-box"]) == 3, on_bad
    assert not [p for p in found if p["page"] == "good.html"], found
    links = browser.link_problems(tmp_path)
    assert {(p["page"], p["kind"]) for p in links} == {("bad.html", "broken-link"), ("bad.html", "broken-anchor")}


def _figure_png(path, *, width_in, font_pt, legend_loc):
    """A PNG drawn as a chapter's figure is, carrying companion.plotting's record."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from companion import plotting

    plotting.use_book_style()
    fig, ax = plt.subplots(figsize=(width_in, 3), layout="constrained")
    ax.plot([0, 1, 2, 3], [0, 1, 2, 3], label="rising")
    ax.plot([0, 3], [3, 0], label="falling")
    ax.tick_params(labelsize=font_pt)
    ax.set_xlabel("x", fontsize=font_pt)
    if legend_loc == "center":
        ax.legend(loc="center", fontsize=font_pt)
    else:
        fig.legend(loc="outside lower center", ncols=2, fontsize=font_pt)
    fig.savefig(path, format="png", metadata=plotting.png_metadata(plotting.figure_text(fig)))
    plt.close(fig)


def test_the_figure_measurement_catches_small_text_and_legends_over_data(tmp_path):
    """A wide figure with 6 pt text shown in a phone's column is caught, and so is a legend over
    its lines; a narrow one with 12 pt text and its legend below the axes is not; a notebook's PNG
    without the record is reported as unmeasured."""
    if not shutil.which("chromedriver"):
        pytest.fail("no Chromium: scripts/setup.sh installs it")
    _figure_png(tmp_path / "tiny.png", width_in=10, font_pt=6, legend_loc="center")
    _figure_png(tmp_path / "legible.png", width_in=4.5, font_pt=12, legend_loc="below")
    from PIL import Image

    Image.new("RGB", (200, 100), "white").save(tmp_path / "plain.png")
    head = "<html><head><meta name='viewport' content='width=device-width, initial-scale=1'></head>"

    def page(name, image, caption, output=True):
        body = (f"<figure><img src='{image}' style='max-width:100%;height:auto'><figcaption><p>"
                f"<span class='caption-number'>{caption} </span>text</p></figcaption></figure>")
        if output:
            body = f"<div class='cell_output'>{body}</div>"
        path = tmp_path / f"{name}.html"
        path.write_text(head + "<body><article class='bd-article' style='width:340px'>" + body
                        + "</article></body></html>")
        return path

    pages = [page("bad", "tiny.png", "Fig. 7"), page("good", "legible.png", "Fig. 8"),
             page("plain", "plain.png", "Fig. 9"), page("static", "plain.png", "Fig. 10", output=False)]
    found = browser.measure(tmp_path, widths=(390,), shots=None, only=pages)
    by_page = {}
    for p in found:
        by_page.setdefault(p["page"], []).append(p)
    bad = by_page.get("bad.html", [])
    assert {p["kind"] for p in bad} == {"figure-text-small", "legend-overlap"}, found
    small = next(p for p in bad if p["kind"] == "figure-text-small")
    assert small["what"].startswith("Fig. 7:") and small["px"] < browser.min_figure_text_px(390), small
    assert "good.html" not in by_page, found
    assert [p["kind"] for p in by_page.get("plain.html", [])] == ["figure-unmeasured"], found
    assert "static.html" not in by_page, found
