"""Helpers for the main job's tests: import the scripts under ``examples/`` as modules.

``examples/`` is a directory of runnable scripts, not a package; tests load them by path.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (once) with ``examples/`` on ``sys.path``."""
    if name in sys.modules:
        return sys.modules[name]
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
