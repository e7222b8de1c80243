"""The built book read in a browser, as a reader on a phone and on a desktop reads it.

Headless Chromium (Debian's ``chromium`` and ``chromium-driver``), driven by Selenium, loads every
page of ``_build/html`` at each width of ``WIDTHS`` and measures what a reader would meet:

* ``page-wider-than-viewport``: the page scrolls sideways;
* ``cut-box``: a display equation, table or code block wider than its column with no scrolling
  box of its own around it (its right part is cut or widens the page);
* ``eqno-overlap``: an equation number drawn on top of its formula;
* ``mathjax-error``: a formula MathJax could not typeset, or MathJax did not load on a page with
  maths;
* ``figure-text-small``: a figure whose smallest text is displayed under ``MIN_FIGURE_TEXT_PX``
  CSS pixels at that width. Text inside a PNG is not in the page: ``companion.plotting`` records,
  when the figure is drawn, the smallest font in pixels of the PNG at its natural size (a PNG
  text chunk), and the displayed size is that times the displayed width over the natural width;
* ``legend-overlap``: a figure whose legend lies over text (tick or axis labels, titles) or data,
  as measured when it was drawn (same record);
* ``figure-unmeasured``: a notebook's PNG without that record (drawn outside the book's style);

and, without a browser, every relative ``href`` and ``src`` of the site (``broken-link``: the file
does not exist; ``broken-anchor``: the ``#fragment`` names no ``id`` of its page).

``python -m tools.browser`` prints the counts per problem and width (the numbers the closing notes
quote) and saves a screenshot of every page with a problem under ``_build/browser/``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (390, 1400)
HEIGHT = 900
SHOTS = ROOT / "_build" / "browser"
#: The smallest figure text a reader should meet, in CSS pixels, at a phone's width and at a
#: desktop's (body text is 16 px).
MIN_FIGURE_TEXT_PX = {390: 7.0, 1400: 9.0}


def min_figure_text_px(width: int) -> float:
    """The smallest legible figure text at viewport ``width`` (the phone's size below 600 px)."""
    return MIN_FIGURE_TEXT_PX[390] if width < 600 else MIN_FIGURE_TEXT_PX[1400]


#: Measured in the page once MathJax has finished. A box is "cut" when what it draws reaches past
#: an ancestor that clips (``overflow-x`` hidden or clip) or past the article, with no scrolling
#: ancestor (``overflow-x`` auto or scroll) in between to reach it by; an equation number
#: "overlaps" when it meets the visible part of its formula.
_MEASURE = r"""
const done = arguments[arguments.length - 1];
const device = arguments[0];  // a phone's layout viewport grows to the content: compare with the device
const hasMath = !!document.querySelector("article .math");
const loaded = () => window.MathJax && MathJax.version && MathJax.startup && MathJax.startup.promise;
const ready = new Promise((resolve) => {
  const t0 = Date.now();
  const poll = () => (loaded() || !hasMath || Date.now() - t0 > 20000)
    ? resolve(loaded() ? MathJax.startup.promise : null) : setTimeout(poll, 50);
  poll();
});
ready.then(() => {
  const out = [];
  const root = document.documentElement;
  if (root.scrollWidth > device + 1)
    out.push({kind: "page-wider-than-viewport", what: `${root.scrollWidth} px wide`});
  const article = document.querySelector("article.bd-article") || document.body || root;
  const ox = (e) => getComputedStyle(e).overflowX;
  const scrolling = (o) => o === "auto" || o === "scroll";
  const cut = (el) => {
    const r = el.getBoundingClientRect();
    let left = r.left, right = scrolling(ox(el)) ? r.right : r.left + Math.max(r.width, el.scrollWidth);
    for (let a = el.parentElement; a; a = a.parentElement) {
      const ar = a.getBoundingClientRect();
      if (right > ar.right + 1 || left < ar.left - 1) {
        const o = ox(a);
        if (scrolling(o)) { left = ar.left; right = ar.right; }
        else if (o === "hidden" || o === "clip" || a === article) return true;
      }
      if (a === article) return false;
    }
    return false;
  };
  const label = (el) => (el.closest("[id]")?.id || el.tagName.toLowerCase());
  const boxes = article.querySelectorAll(
    "mjx-container[display='true'], table, div.highlight pre, div.cell_output pre");
  for (const el of boxes)
    if (el.getBoundingClientRect().width > 0 && cut(el))
      out.push({kind: "cut-box", what: `${el.tagName.toLowerCase()} in #${label(el)}`});
  const visible = (el, stop) => {
    let r = el.getBoundingClientRect(), left = r.left, right = r.right;
    for (let a = el.parentElement; a && a !== stop.parentElement; a = a.parentElement) {
      if (ox(a) === "visible") continue;
      const ar = a.getBoundingClientRect();
      left = Math.max(left, ar.left); right = Math.min(right, ar.right);
    }
    return {left, right, top: r.top, bottom: r.bottom};
  };
  for (const eqno of article.querySelectorAll("div.math span.eqno")) {
    const f = eqno.parentElement.querySelector("mjx-container mjx-math");
    if (!f) continue;
    const a = eqno.getBoundingClientRect(), b = visible(f, eqno.parentElement);
    const wide = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const tall = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (wide > 1 && tall > 1) out.push({kind: "eqno-overlap", what: eqno.textContent.trim()});
  }
  const maths = article.querySelectorAll(".math").length;
  if (maths && !loaded()) out.push({kind: "mathjax-error", what: "MathJax did not load"});
  for (const e of article.querySelectorAll("mjx-merror, [data-mjx-error]"))
    out.push({kind: "mathjax-error",
              what: (e.getAttribute("data-mjx-error") || e.textContent).slice(0, 80)});
  if (maths && loaded() && !article.querySelector("mjx-container"))
    out.push({kind: "mathjax-error", what: "no formula typeset"});
  // figures: where each image is shown and how wide; Python reads what its PNG records
  let n = 0;
  for (const img of article.querySelectorAll("img")) {
    const r = img.getBoundingClientRect();
    if (!r.width || !img.naturalWidth) continue;
    const box = img.closest("figure") || img.closest("div.cell_output") || img;
    box.setAttribute("data-book-figure", String(++n));
    const number = box.querySelector?.(".caption-number")?.textContent.trim().replace(/\s+/g, " ");
    out.push({kind: "_figure", src: img.currentSrc || img.src, natural: img.naturalWidth,
              shown: r.width, output: !!img.closest("div.cell_output"), index: n,
              what: number || `image in #${label(img)}`});
  }
  done(out);
}).catch((err) => done([{kind: "mathjax-error", what: String(err)}]));
"""


def pages(site: Path) -> list[Path]:
    """Every page of the built site a reader can reach (search and index pages included)."""
    return sorted(p for p in site.rglob("*.html") if not {"_static", "_sources", "_images"} & set(p.parts))


def link_problems(site: Path) -> list[dict]:
    """Every relative ``href``/``src`` of every page that points at no file, or at an anchor its
    page does not have."""
    ids: dict[Path, set[str]] = {}

    def anchors(page: Path) -> set[str]:
        if page not in ids:
            soup = BeautifulSoup(page.read_text(errors="replace"), "html.parser")
            ids[page] = {t["id"] for t in soup.select("[id]")} | {t["name"] for t in soup.select("a[name]")}
        return ids[page]

    out = []
    for page in pages(site):
        soup = BeautifulSoup(page.read_text(errors="replace"), "html.parser")
        for tag in soup.select("[href], [src]"):
            url = tag.get("href") or tag.get("src")
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            where = str(page.relative_to(site))
            if not target.is_file():
                out.append({"page": where, "kind": "broken-link", "what": url})
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in anchors(target):
                out.append({"page": where, "kind": "broken-anchor", "what": url})
    return out


def driver(width: int):
    """Headless Chromium at ``width`` CSS pixels (Debian's chromium and chromium-driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--disable-dev-shm-usage", f"--window-size={width},{HEIGHT}", "--force-device-scale-factor=1"):
        options.add_argument(flag)
    binary = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if binary:
        options.binary_location = binary
    chromedriver = shutil.which("chromedriver")
    service = Service(chromedriver) if chromedriver else Service()
    browser = webdriver.Chrome(options=options, service=service)
    # A window is never narrower than 500 px: a phone's viewport is emulated, as DevTools does.
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": width < 600})
    browser.set_script_timeout(60)
    return browser


def png_record(path: Path) -> dict:
    """What ``companion.plotting`` recorded in a figure's PNG (its text chunks), or ``{}``."""
    from PIL import Image

    from companion.plotting import PNG_KEYS

    try:
        with Image.open(path) as image:
            text = dict(getattr(image, "text", {}) or {})
    except (OSError, ValueError):
        return {}
    out = {}
    for key, chunk in PNG_KEYS.items():
        if chunk in text:
            value = text[chunk]
            out[key] = json.loads(value) if key == "legend_overlap" else (
                json.loads(f'"{value}"') if key == "min_font_text" else float(value))
    return out


def figure_problems(figure: dict, width: int) -> list[dict]:
    """``figure-text-small``, ``legend-overlap`` or ``figure-unmeasured`` for one displayed image
    (``src``, ``natural`` and ``shown`` widths in px, ``output``: a notebook's output, ``what``:
    its number), from the record of its PNG."""
    parts = urlsplit(figure["src"])
    record = png_record(Path(unquote(parts.path))) if parts.scheme == "file" else {}
    name = figure["what"]
    if "min_font_px" not in record:
        return [{"kind": "figure-unmeasured", "what": name}] if figure.get("output") else []
    shown = record["min_font_px"] * figure["shown"] / figure["natural"]
    out = []
    if shown < min_figure_text_px(width):
        out.append({"kind": "figure-text-small", "what": f"{name}: {shown:.1f} px "
                    f"({record['min_font_pt']:g} pt {record.get('min_font_text', '')!r}, shown at "
                    f"{figure['shown']:.0f} of {figure['natural']} px)", "px": round(shown, 2)})
    out += [{"kind": "legend-overlap", "what": f"{name}: {o}"} for o in record.get("legend_overlap", [])]
    return out


def measure(site: Path, widths=WIDTHS, *, shots: Path | None = SHOTS, only: list[Path] | None = None) -> list[dict]:
    """The layout problems of every page at every width, one dict per problem
    (``page``, ``width``, ``kind``, ``what``); a screenshot of each page with one goes to ``shots``,
    and of each figure with one, the figure alone."""
    if shots is not None:
        shutil.rmtree(shots, ignore_errors=True)
        shots.mkdir(parents=True)
    out = []
    for width in widths:
        browser = driver(width)
        try:
            for page in only or pages(site):
                browser.get(page.as_uri())
                found = browser.execute_async_script(_MEASURE, width)
                where = str(page.relative_to(site))
                stem = where.replace("/", "__")
                page_found = [f for f in found if f["kind"] != "_figure"]
                for figure in (f for f in found if f["kind"] == "_figure"):
                    problems = figure_problems(figure, width)
                    page_found += problems
                    if problems and shots is not None:
                        _figure_shot(browser, figure["index"], shots / f"{stem}-fig{figure['index']}-{width}.png")
                out += [{"page": where, "width": width, **f} for f in page_found]
                if page_found and shots is not None:
                    browser.save_screenshot(str(shots / f"{stem}-{width}.png"))
        finally:
            browser.quit()
    return out


def _figure_shot(browser, index: int, path: Path) -> None:
    """A screenshot of the ``index``-th figure of the page as it is displayed."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    try:
        browser.find_element(By.CSS_SELECTOR, f"[data-book-figure='{index}']").screenshot(str(path))
    except WebDriverException:  # a figure taller than the window, or gone: the page shot will do
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--json", type=Path, help="write every problem found to this file")
    args = parser.parse_args(argv)
    problems = link_problems(args.site) + measure(args.site)
    counts = Counter((p["kind"], p.get("width", "-")) for p in problems)
    print(f"{len(pages(args.site))} pages")
    for (kind, width), n in sorted(counts.items(), key=str):
        print(f"{kind:28s} {width!s:>5} px  {n}")
    if args.json:
        args.json.write_text(json.dumps(problems, indent=1))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
