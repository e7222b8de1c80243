import os
import sys
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models are fastest on one thread, and immune to a busy machine; restored afterwards.

    Use it in a test module with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
