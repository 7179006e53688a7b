"""conf/dlprio.service: it runs the dlprio the README installs, systemd accepts it, and the exit
statuses it refuses to restart are exactly the daemon's configuration errors.

``systemd-analyze verify`` (systemd 252, Debian 12's ``systemd`` package; ./test.sh installs it
when missing) checks the unit's syntax, every key and value, and that ExecStart's binary
exists and is executable. It runs with ``--root`` on a temporary tree holding the unit, an
executable at the README's install path and a copy of the system's unit directory (for
``sysinit.target`` and the other units the default dependencies name), so the check needs no
running systemd and changes nothing on this machine. Any warning it prints counts as a failure.
"""

from __future__ import annotations

import configparser
import errno
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml

from prioritizer.cli import main
from prioritizer.daemon import cli as daemon_cli
from slurm_plugin.common.exits import Exit

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "conf" / "dlprio.service"
SYSTEM_UNITS = Path("/usr/lib/systemd/system")


def unit_service() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    return parser["Service"]


def readme_prefix() -> str:
    """The venv the README's admin section installs into (``python3 -m venv PREFIX && ...``)."""
    m = re.search(r"^python3 -m venv (\S+) && \1/bin/pip install ", (ROOT / "README.md").read_text(), re.M)
    assert m, "README: no 'python3 -m venv PREFIX && PREFIX/bin/pip install' line"
    return m.group(1)


def verify(tmp_path: Path, unit_text: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing: apt-get install systemd (./test.sh does)"
    root = tmp_path / "root"
    exe = root / readme_prefix().lstrip("/") / "bin" / "dlprio"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    shutil.copytree(SYSTEM_UNITS, root / SYSTEM_UNITS.relative_to("/"), symlinks=True)
    etc = root / "etc" / "systemd" / "system"
    etc.mkdir(parents=True)
    (etc / "dlprio.service").write_text(unit_text)
    return subprocess.run([tool, "verify", f"--root={root}", "--man=no", "/etc/systemd/system/dlprio.service"],
                          capture_output=True, text=True, timeout=60)


def test_exec_start_is_the_readme_install() -> None:
    assert unit_service()["ExecStart"] == f"{readme_prefix()}/bin/dlprio run --config /etc/dlprio/dlprio.yaml"


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    proc = verify(tmp_path, UNIT.read_text())
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_systemd_analyze_verify_catches_a_wrong_binary_and_a_bad_key(tmp_path: Path) -> None:
    # the check can fail: the old /usr/local/bin path, then a misspelt key
    wrong = UNIT.read_text().replace(f"{readme_prefix()}/bin/dlprio", "/usr/local/bin/dlprio")
    proc = verify(tmp_path / "a", wrong)
    assert proc.returncode != 0 and "/usr/local/bin/dlprio is not executable" in proc.stderr
    typo = UNIT.read_text().replace("RestartSec=", "RestartSek=")
    proc = verify(tmp_path / "b", typo)
    assert "Unknown key 'RestartSek'" in proc.stderr


def test_restart_prevented_only_for_config_and_lock_errors() -> None:
    prevented = {int(s) for s in unit_service()["RestartPreventExitStatus"].split()}
    assert prevented == {2, 6} == {Exit.BAD_INPUT, Exit.HELD}
    assert Exit.STORAGE not in prevented and unit_service()["Restart"] == "on-failure"


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EROFS, "Read-only file system"),
    sqlite3.OperationalError("database or disk is full"),
    sqlite3.OperationalError("attempt to write a readonly database"),
], ids=["ENOSPC", "EROFS", "sqlite-full", "sqlite-readonly"])
def test_storage_error_in_run_exits_7_which_systemd_restarts(
        error: Exception, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    class FailingDaemon:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def run(self, stop: object) -> None:
            raise error

    monkeypatch.setattr(daemon_cli, "Daemon", FailingDaemon)
    cfg = tmp_path / "dlprio.yaml"
    cfg.write_text(yaml.safe_dump({"metrics_port": 0, "lease_name": "", "ledger_path": str(tmp_path / "ledger.sqlite"),
                                   "snapshot_path": str(tmp_path / "snapshot.json")}))
    rc = main(["run", "--config", str(cfg)])
    err = capsys.readouterr().err
    assert rc == Exit.STORAGE == 7
    assert err.splitlines()[-1] == f"dlprio: ledger: {error}"  # after the log's "started" line
