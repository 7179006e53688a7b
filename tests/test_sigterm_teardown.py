"""A SIGTERM to pytest runs the ``finally`` blocks and fixture teardowns (tests/sigterm_teardown.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from prioritizer.cli import main
from prioritizer.daemon import cli as daemon_cli

TESTS = Path(__file__).resolve().parent

PROBE = '''
import subprocess, sys, time
from pathlib import Path
import pytest

OUT = Path({out!r})

@pytest.fixture
def marker():
    yield
    (OUT / "fixture-teardown").write_text("done")

def test_waits(marker):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (OUT / "child.pid").write_text(str(child.pid))
    try:
        (OUT / "started").write_text("yes")
        time.sleep(600)
    finally:
        child.kill()
        child.wait()
        (OUT / "finally").write_text("done")
'''


SLOW_TEARDOWN = '''
import time
from pathlib import Path
import pytest

OUT = Path({out!r})

@pytest.fixture
def slow():
    yield
    (OUT / "teardown").write_text("started")
    time.sleep(600)

def test_waits(slow):
    (OUT / "started").write_text("yes")
    time.sleep(600)
'''


def _pytest(tmp_path: Path, probe_text: str) -> subprocess.Popen[str]:
    probe = tmp_path / "test_probe.py"
    probe.write_text(probe_text.format(out=str(tmp_path)))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "sigterm_teardown", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(probe)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_sigterm_runs_finally_blocks_and_fixture_teardown(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, PROBE)
    _wait_for(tmp_path / "started", proc)
    child = int((tmp_path / "child.pid").read_text())
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out          # pytest's "interrupted", not killed by the signal
    assert (tmp_path / "finally").read_text() == "done", out
    assert (tmp_path / "fixture-teardown").read_text() == "done", out
    assert not _alive(child)
    assert "SIGTERM" in out


def test_a_second_sigterm_kills_pytest_during_the_teardown(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, SLOW_TEARDOWN)
    _wait_for(tmp_path / "started", proc)
    proc.send_signal(signal.SIGTERM)
    _wait_for(tmp_path / "teardown", proc)       # the first one started the teardown
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM


def test_this_suite_runs_under_the_handler() -> None:
    import sigterm_teardown

    assert signal.getsignal(signal.SIGTERM) is sigterm_teardown._interrupt


def test_dlprio_run_in_process_gives_back_the_signal_handlers_it_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dlprio run`` stops on SIGTERM/SIGINT through handlers of its own; called in-process
    (tests, an embedding program) it puts the caller's back when it returns, so this
    session's SIGTERM handler (above) is not lost after a test that runs the daemon loop."""
    seen: list[object] = []

    class OneCycle:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def run(self, stop: object) -> None:
            seen.append(signal.getsignal(signal.SIGTERM))

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    monkeypatch.setattr(daemon_cli, "Daemon", OneCycle)
    cfg = tmp_path / "dlprio.yaml"
    cfg.write_text(yaml.safe_dump({"metrics_port": 0, "lease_name": "",
                                   "ledger_path": str(tmp_path / "ledger.sqlite"),
                                   "snapshot_path": str(tmp_path / "snapshot.json")}))
    before = {sig: signal.signal(sig, mine) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert main(["run", "--config", str(cfg)]) == 0
        assert seen and seen[0] is not mine          # the loop ran under the daemon's handler
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
