"""Whether PyTorch is installed (:data:`TORCH`): the ``torch`` test modules import it only then,
and tests/conftest.py fails their tests with the fix otherwise."""

from __future__ import annotations

import importlib.util

TORCH = importlib.util.find_spec("torch") is not None
