import os
import sys
from pathlib import Path

# Triton kernels run on the CPU through Triton's interpreter when no GPU is present. The
# variable must be set before any kernel is defined, so it is set here, before the tests
# import the package.
try:
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:  # pragma: no cover - torch is a dependency
    pass

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `tools` (the book pipeline) lives at the repository root
    sys.path.insert(0, str(ROOT))
