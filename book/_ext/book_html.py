"""Local Sphinx extension of the book: page furniture Jupyter Book 1.x gets wrong, and the
citation style.

* Jupyter Book registers sphinx-thebe's and sphinx-togglebutton's inline scripts twice, so every
  page declared ``const THEBE_JS_URL`` twice (a script error in the console): each script is
  kept once.
* The theme draws a search button in the header and a search field in the sidebar: the header
  one goes.
* Part pages show each chapter's verdict: the role ``{verdict}`slug``` writes the headline of
  ``_build/ledger/<slug>.json`` (the page is rebuilt when that ledger changes).
* Listings of the companion package (``literalinclude``) read as the page does: an equation
  label in a docstring (``eq. (bon-pmf)``, ``:math:numref:`bon-pmf```) becomes the number the
  page prints, ``(2)``, and reST markup (````x````, ``:func:`x```) becomes plain text.
* Citations: the text cites author-year ("Beirami et al. [2025]"), so the bibliography is
  labelled the same way ("[Beirami et al., 2025]") instead of with numbers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle

from companion.ledger import build_dir, chapter_headline


def _surname(person) -> str:
    return " ".join(person.prelast_names + person.last_names).replace("{", "").replace("}", "")


def _author_year(entry) -> str:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(p) for p in people]
    if not names:
        who = entry.fields.get("organization", entry.key)
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


#: key -> "a", "b", ... for entries of the whole bibliography that share an author-year label
_SUFFIXES: dict[str, str] = {}


def disambiguate(entries) -> dict[str, str]:
    """The letter each entry needs so that no two entries of ``entries`` share a label.

    Computed over the whole database, not one page's bibliography: sphinxcontrib-bibtex checks
    labels across pages, and a page citing only one of two "Yang et al., 2025" papers must still
    call it 2025a or 2025b, as the bibliography page does. Letters follow title order."""
    groups: dict[str, list] = {}
    for entry in entries:
        groups.setdefault(_author_year(entry), []).append(entry)
    return {entry.key: chr(ord("a") + i)
            for group in groups.values() if len(group) > 1
            for i, entry in enumerate(sorted(group, key=lambda e: (e.fields.get("title", ""), e.key)))}


class AuthorYearLabels(BaseLabelStyle):
    """"Yang et al., 2025"; entries sharing a label become "..., 2025a" and "..., 2025b"."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield _author_year(entry) + _SUFFIXES.get(entry.key, "")


class AuthorYearStyle(UnsrtStyle):
    default_label_style = AuthorYearLabels
    default_sorting_style = "author_year_title"


def _drop_header_search(app, config) -> None:
    options = dict(config.html_theme_options or {})
    options["navbar_persistent"] = []
    config.html_theme_options = options


def _dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    seen, kept = set(), []
    for script in context.get("script_files", []):
        attributes = getattr(script, "attributes", {})
        key = (str(getattr(script, "filename", script) or ""), tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    # in place: Sphinx adds a page's own scripts (MathJax, on a page with math) to this same
    # list in a later handler, so a new list would lose them
    context.get("script_files", [])[:] = kept


def _read_bibliography(app, config) -> None:
    from pybtex.database import parse_file

    entries = [entry for name in config.bibtex_bibfiles
               for entry in parse_file(str(Path(app.srcdir) / name)).entries.values()]
    _SUFFIXES.clear()
    _SUFFIXES.update(disambiguate(entries))


def verdict_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{verdict}`slug```: the chapter's headline, read from its written ledger."""
    env = inliner.document.settings.env
    path = build_dir() / "ledger" / f"{text.strip()}.json"
    if not path.is_file():
        message = inliner.reporter.warning(f"no ledger for {text!r} at {path}: execute the chapter first",
                                           line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    env.note_dependency(str(path))
    return [nodes.inline(rawtext, chapter_headline(json.loads(path.read_text())), classes=["verdict"])], []


_LABEL = r"[a-z0-9]+(?:-[a-z0-9]+)+"
_EQ_FORMS = re.compile(rf"\(({_LABEL})\)|``({_LABEL})``|:math:numref:`({_LABEL})`")
_ROLE = re.compile(r":(?:func|meth|class|data|mod|attr|obj|math|eq):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def readable_listing(text: str, numbers: dict[str, int]) -> str:
    """``text`` of a package listing with the page's equation numbers for its labels (labels of
    other pages are kept) and reST roles and literals as plain text."""
    def number(match):
        label = next(g for g in match.groups() if g)
        return f"({numbers[label]})" if label in numbers else match.group(0)

    text = _EQ_FORMS.sub(number, text)
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~") else m.group(1), text)
    return _LITERAL.sub(r"\1", text)


def _readable_listings(app, doctree, docname) -> None:
    domain = app.env.get_domain("math")
    numbers = {label: number for label, (doc, number) in domain.equations.items() if doc == docname}
    package = str(Path(app.srcdir) / "companion")
    for node in doctree.findall(nodes.literal_block):
        if not str(node.get("source", "")).startswith(package):
            continue
        text = node.astext()
        new = readable_listing(text, numbers)
        if new != text:
            node.children = [nodes.Text(new)]
            node.rawsource = new


def setup(app):
    app.add_role("verdict", verdict_role)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.connect("config-inited", _read_bibliography)
    app.connect("config-inited", _drop_header_search)
    app.connect("doctree-resolved", _readable_listings)
    app.connect("html-page-context", _dedupe_scripts, priority=100)  # first: a later handler may end the event
    return {"parallel_read_safe": True, "parallel_write_safe": True}
