"""pytest plugin (loaded by conftest.py): SIGTERM stops the run as Ctrl-C does.

By default SIGTERM kills pytest at once, so no ``finally`` block and no fixture teardown
runs: a live test's ``main_job.py``, daemon or Slurm jobs outlive a CI run that was stopped
(``.ci/run`` passes its SIGTERM on to pytest). This handler raises ``KeyboardInterrupt`` in
the test that is running instead; pytest then unwinds it (``subprocess.run`` kills its child,
``finally`` blocks run), tears the fixtures down and exits with status 2 (interrupted). A
second SIGTERM kills pytest at once, as before (the teardown it would interrupt is not
waited for twice).
"""

from __future__ import annotations

import signal
from types import FrameType

import pytest


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt(f"signal {signum} (SIGTERM): stopping the test run")


def pytest_configure(config: pytest.Config) -> None:
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:   # not under a runner of its own
        signal.signal(signal.SIGTERM, _interrupt)
