"""Import the repository's runnable scripts (``examples/``, ``benchmarks/``) as modules.

They are scripts, not packages, so tests load them by path (importlib's
``spec_from_file_location``), each as a module named after its file.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent


def load_script(relative: str, *, register: bool = False) -> ModuleType:
    """Import ``REPO/relative`` (e.g. ``"benchmarks/bench_sharing.py"``) and return it;
    ``register``: also enter it in ``sys.modules`` under its name first (what dataclasses,
    pickling and later imports of the same name need)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, f"no such script: {path}"
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
