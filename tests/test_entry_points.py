"""Every training entry point starts cleanly under ``python -W error -m``."""

import subprocess
import sys

import pytest

from companion.checkpoints import lazy_exports


@pytest.mark.parametrize("package", ["flair", "icl_latents", "ngs", "wormi", "hyperimts", "ocl", "metta_class"])
def test_training_entry_point_has_no_runpy_warning(package):
    run = subprocess.run([sys.executable, "-W", "error", "-m", f"companion.{package}.train", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "usage" in run.stdout and not run.stderr


def test_lazy_exports_import_on_first_use_and_name_what_is_missing():
    getattr_ = lazy_exports("companion", "text", ("HashTextEncoder",))
    assert getattr_("HashTextEncoder").__name__ == "HashTextEncoder"
    with pytest.raises(AttributeError, match="'companion' has no attribute 'nope'"):
        getattr_("nope")
