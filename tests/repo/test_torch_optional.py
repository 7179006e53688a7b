"""A venv without PyTorch still collects every test: the ``torch`` modules import it only where
it is installed, and their tests fail naming the fix (tests/conftest.py, tests/torch_check.py).
PyTorch is hidden from a child pytest by ``sys.modules["torch"] = None``, which makes
``importlib.util.find_spec("torch")`` answer None and ``import torch`` fail, as in a venv without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TORCH_MODULES = ["tests/examples/test_ddp_example.py", "tests/live/test_ddp_live.py"]


def pytest_without_torch(*args: str) -> subprocess.CompletedProcess[str]:
    code = ("import sys; sys.modules['torch'] = None; import pytest; "
            "sys.exit(pytest.main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_every_test_collects_without_torch() -> None:
    run = pytest_without_torch("--collect-only", "-q", *TORCH_MODULES)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "8 tests collected" in run.stdout


def test_a_torch_test_without_torch_fails_naming_the_fix() -> None:
    run = pytest_without_torch("-q", TORCH_MODULES[0])
    assert run.returncode == 1
    assert "6 errors" in run.stdout
    assert ("PyTorch is not installed in this venv: run scripts/install-torch.sh (./test.sh runs "
            "it), or `pytest -m 'not torch'`") in run.stdout
