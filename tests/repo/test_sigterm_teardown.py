"""A SIGTERM to pytest runs the ``finally`` blocks and fixture teardowns (tests/sigterm_teardown.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from prioritizer.cli import main
from prioritizer.daemon import cli as daemon_cli

from live_helpers import wait_for

TESTS = Path(__file__).resolve().parents[1]

# a test holding a child process, with a fixture; the teardown hangs when OUT/slow exists
PROBE = '''
import subprocess, sys, time
from pathlib import Path
import pytest

OUT = Path({out!r})

@pytest.fixture
def marker():
    yield
    (OUT / "fixture-teardown").write_text("done")
    if (OUT / "slow").exists():
        time.sleep(600)

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


def _probe_run(tmp_path: Path) -> subprocess.Popen[str]:
    """pytest on :data:`PROBE` with the plugin, once its test has started."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE.format(out=str(tmp_path)))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "sigterm_teardown", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(probe)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for(tmp_path / "started", proc)
    return proc


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    wait_for(lambda: path.exists() or proc.poll() is not None, 60, f"the probe's {path.name}")
    assert proc.poll() is None, proc.communicate()[0]


def test_sigterm_runs_finally_blocks_and_fixture_teardown(tmp_path: Path) -> None:
    proc = _probe_run(tmp_path)
    child = int((tmp_path / "child.pid").read_text())
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out          # pytest's "interrupted", not killed by the signal
    assert (tmp_path / "finally").read_text() == "done", out
    assert (tmp_path / "fixture-teardown").read_text() == "done", out
    assert not Path(f"/proc/{child}").exists()   # killed and reaped by the finally block
    assert "SIGTERM" in out


def test_a_second_sigterm_kills_pytest_during_the_teardown(tmp_path: Path) -> None:
    (tmp_path / "slow").write_text("")
    proc = _probe_run(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _wait_for(tmp_path / "fixture-teardown", proc)   # the first one started the teardown
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
