"""Local Sphinx extension of the book: page furniture Jupyter Book 1.x gets wrong, and the
citation style.

* Jupyter Book registers sphinx-thebe's and sphinx-togglebutton's inline scripts twice, so every
  page declared ``const THEBE_JS_URL`` twice (a script error in the console): each script is
  kept once.
* The theme draws a search button in the header and a search field in the sidebar: the header
  one goes.
* Citations: the text cites author-year ("Beirami et al. [2025]"), so the bibliography is
  labelled the same way ("[Beirami et al., 2025]") instead of with numbers.
"""

from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle


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


class AuthorYearLabels(BaseLabelStyle):
    """"Yang et al., 2025"; two entries with the same label become "..., 2025a" and "..., 2025b"."""

    def format_labels(self, sorted_entries):
        labels = [_author_year(entry) for entry in sorted_entries]
        seen: dict[str, int] = {}
        for label in labels:
            if labels.count(label) == 1:
                yield label
            else:
                seen[label] = seen.get(label, 0) + 1
                yield f"{label}{chr(ord('a') + seen[label] - 1)}"


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
    context["script_files"] = kept


def setup(app):
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    app.connect("config-inited", _drop_header_search)
    app.connect("html-page-context", _dedupe_scripts, priority=100)  # first: a later handler may end the event
    return {"parallel_read_safe": True, "parallel_write_safe": True}
