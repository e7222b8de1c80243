import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `tools` (the book pipeline) lives at the repository root
    sys.path.insert(0, str(ROOT))
