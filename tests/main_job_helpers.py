"""Helpers for the main job's tests: import the scripts under ``examples/`` as modules.

``examples/`` is a directory of runnable scripts, not a package; tests load them by path.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

from script_helpers import load_script

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` (once) with ``examples/`` on ``sys.path``."""
    if name in sys.modules:
        return sys.modules[name]
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return load_script(f"examples/{name}.py", register=True)
