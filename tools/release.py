"""Cut a release of the companion package, which the published chapters install in Colab.

    python -m tools.release 0.4.0          # set the version everywhere, regenerate the notebooks
    python -m tools.release 0.4.0 --tag    # ... then commit and tag v0.4.0 (push the tag to publish)

The version is written to ``pyproject.toml`` and ``companion/__init__.py``, and every chapter's
Colab set-up cell is pointed at that release on PyPI (``pip install icml2025-companion==0.4.0``),
with the tagged git URL as a commented fallback for forks that do not publish. Pushing the tag
runs ``.github/workflows/release.yml``, which builds, checks and publishes the wheel, so a
chapter read on the published site keeps installing the package it was built with after
``main`` moves on.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib

from companion.book import repository_url
from tools import book

ROOT = book.ROOT
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")


def distribution() -> str:
    """The package's name on PyPI (``[project] name`` of ``pyproject.toml``)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]


def set_version(version: str) -> list[str]:
    """Write ``version`` to the package and to every chapter's install cell; return the files changed."""
    if not _VERSION.match(version):
        raise ValueError(f"version: expected MAJOR.MINOR.PATCH such as 0.2.0, got {version!r}")
    url, _ = repository_url(ROOT)
    name = distribution()
    changed = []
    edits = [(ROOT / "pyproject.toml", re.compile(r'^version = "[^"]+"', re.M), f'version = "{version}"'),
             (ROOT / "companion" / "__init__.py", re.compile(r'^__version__ = "[^"]+"', re.M),
              f'__version__ = "{version}"')]
    pin = re.compile(r'"-q", "[A-Za-z0-9_.\-]+==[0-9.]+"')
    fallback = re.compile(rf'@ git\+{re.escape(url)}(@v[0-9.]+)?"')
    for doc in book.chapters():
        edits += [(ROOT / f"{doc}.md", pin, f'"-q", "{name}=={version}"'),
                  (ROOT / f"{doc}.md", fallback, f'@ git+{url}@v{version}"')]
    for path, pattern, new in edits:
        text = path.read_text()
        if not pattern.search(text):
            raise ValueError(f"{path.relative_to(ROOT)}: no version line to update ({pattern.pattern})")
        updated = pattern.sub(new, text, count=1)
        if updated != text:
            path.write_text(updated)
            if str(path.relative_to(ROOT)) not in changed:
                changed.append(str(path.relative_to(ROOT)))
    book.sync_notebooks()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release", description=__doc__.split("\n\n")[0])
    parser.add_argument("version")
    parser.add_argument("--tag", action="store_true", help="commit the change and tag v<version>")
    args = parser.parse_args(argv)
    for path in set_version(args.version):
        print(f"updated {path}")
    if args.tag:
        subprocess.run(["git", "commit", "-qam", f"Release v{args.version}"], cwd=ROOT, check=True)
        subprocess.run(["git", "tag", f"v{args.version}"], cwd=ROOT, check=True)
        print(f"tagged v{args.version}: publish with `git push origin main v{args.version}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
