"""The fast build (tools.build): what a chapter's run depends on, the cache, and parallel workers."""

import json

import pytest

from tools import book
from tools.build import build, cache_key, dependencies

CHAPTER = """---
jupytext:
  formats: md:myst
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A chapter

```{code-cell} ipython3
:tags: [hide-input]
%matplotlib inline
import companion.a as a
from companion.pkg import thing
```
"""


@pytest.fixture
def tree(tmp_path):
    files = {
        "book/part/ch.md": CHAPTER,
        "companion/__init__.py": "",
        "companion/a.py": "from . import b\nimport numpy\n",
        "companion/b.py": "X = 1\n",
        "companion/d.py": "Y = 2\n",  # imported by nobody
        "companion/pkg/__init__.py": "from .core import thing\n",
        "companion/pkg/core.py": "thing = 3\n",
        "companion/pkg/checkpoints/w.pt": "weights",
        "companion/pkg/sub/__init__.py": "",
        "companion/pkg/sub/data.bin": "not pkg's: sub is a package of its own",
        "requirements-ci.txt": "numpy==2.0\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_dependencies_follow_the_imports_and_the_packages_data(tree):
    found = {p.relative_to(tree).as_posix() for p in dependencies("book/part/ch", tree)}
    assert found == {"book/part/ch.md", "companion/__init__.py", "companion/a.py", "companion/b.py",
                     "companion/pkg/__init__.py", "companion/pkg/core.py", "companion/pkg/checkpoints/w.pt",
                     "requirements-ci.txt"}


def test_the_key_changes_with_what_the_run_depends_on_and_nothing_else(tree):
    def key(**kw):
        return cache_key("book/part/ch", root=tree, **({"scale": "quick", "seed": 0} | kw))

    before = key()
    (tree / "companion/d.py").write_text("Y = 3\n")
    (tree / "companion/pkg/sub/data.bin").write_text("changed")
    assert key() == before
    assert key(seed=1) != before and key(scale="full") != before
    for rel in ("companion/b.py", "companion/pkg/checkpoints/w.pt", "requirements-ci.txt", "book/part/ch.md"):
        path = tree / rel
        text = path.read_text()
        path.write_text(text + "\n# edited")
        assert key() != before, rel
        path.write_text(text)
        assert key() == before, rel


def test_a_parallel_build_equals_a_sequential_one_and_the_cache_reruns_nothing(tmp_path, monkeypatch):
    docs = ["book/alignment/best-of-n", "book/alignment/facttest"]
    ledgers = {}
    for name, jobs, cache in (("sequential", 1, False), ("parallel", 2, True)):
        monkeypatch.setenv("BOOK_BUILD_DIR", str(tmp_path / name))
        done = build(docs, jobs=jobs, cache=cache)
        assert sorted(done.executed) == docs and not done.cached
        ledgers[name] = {d: (tmp_path / name / "ledger" / f"{book.slug(d)}.json").read_text() for d in docs}
    assert ledgers["parallel"] == ledgers["sequential"]
    executed = {d: book.executed_path(d).stat().st_mtime_ns for d in docs}
    again = build(docs, jobs=2)
    assert not again.executed and sorted(again.cached) == docs
    assert {d: book.executed_path(d).stat().st_mtime_ns for d in docs} == executed  # nothing rewritten
    timings = json.loads((tmp_path / "parallel" / "timings.json").read_text())
    assert timings["build"]["cached"] == 2 and timings["build"]["jobs"] == 2
    assert set(timings) == {"build", "best-of-n", "facttest"}
    forced = build(docs[:1], jobs=1, force=True)
    assert list(forced.executed) == docs[:1]
