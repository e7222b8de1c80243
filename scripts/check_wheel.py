"""Check an installed companion package (a wheel, outside the repository), as the release workflow does.

Every module imports, and every shipped checkpoint loads as a ``state_dict`` beside its JSON
provenance record. Run it with the environment's Python from a folder outside the repository:
``cd /tmp && /path/to/venv/bin/python /path/to/scripts/check_wheel.py``.
"""

import importlib
import json
import pkgutil
import sys
from pathlib import Path

import torch

import companion

package = Path(companion.__file__).parent
if (package.parent / "pyproject.toml").is_file():
    sys.exit(f"check_wheel: {package} is the repository's source, not an installed package")
modules = [m.name for m in pkgutil.walk_packages(companion.__path__, "companion.")]
for name in modules:
    importlib.import_module(name)
checkpoints = sorted(package.glob("*/checkpoints/*.pt"))
for path in checkpoints:
    state = torch.load(path, map_location="cpu", weights_only=True)
    record = json.loads(path.with_suffix(".json").read_text())
    if not state or "command" not in record:
        sys.exit(f"check_wheel: {path.relative_to(package)} is empty or has no provenance record")
if not checkpoints:
    sys.exit("check_wheel: the package ships no checkpoint: the wheel lost its package data")
print(f"companion {companion.__version__}: {len(modules)} modules import, {len(checkpoints)} checkpoints load")
