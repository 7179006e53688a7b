"""One acting daemon per cluster, live: two daemons with two ledgers.

The lease is a held job that slurmctld arbitrates (prioritizer/daemon/lease.py): a second
daemon with another ledger is refused while the holder's heartbeat is fresh, takes over once
it is stale (the holder was SIGKILLed), and a holder whose lease job is taken away stops
before acting (fencing)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import DaemonProc, Jobs, dlprio, live_jobs, write_config
from live_helpers import wait_for

pytestmark = [pytest.mark.live, pytest.mark.releases]
NAME = "dlprio-lease-test"


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j
        stale = [x.job_id for x in j.client.jobs() if x.name == NAME and x.is_active]
        if stale:
            j.client.cancel(stale)


def _cfg(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    return write_config(d / "dlprio.yaml", interval_s=2, backoff_max_s=4, lease_name=NAME,
                        lease_ttl_s=8, slurm_timeout_s=1.5)


def _lease_jobs(jobs: Jobs) -> list:
    return sorted((x for x in jobs.client.jobs() if x.name == NAME and x.is_active),
                  key=lambda x: x.job_id)


def test_two_daemons_two_ledgers_one_acts(jobs: Jobs, tmp_path: Path) -> None:
    a_cfg, b_cfg = _cfg(tmp_path, "a"), _cfg(tmp_path, "b")
    a = DaemonProc(a_cfg).start()
    b = DaemonProc(b_cfg)
    try:
        a.wait_log("lease_acquired", 60)
        time.sleep(5)                           # a few cycles (heartbeats)
        (held,) = _lease_jobs(jobs)
        assert held.state == "PENDING" and held.reason in ("JobHeldUser", "JobHeldAdmin")
        # another ledger, same cluster: refused while A's heartbeat is fresh
        refused = subprocess.run(dlprio("run", "--config", str(b_cfg)), capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode == 6, refused.stderr   # Exit.HELD
        assert a.proc is not None and f":{a.proc.pid} (lease job {held.job_id}" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "b" / "ledger.sqlite").exists()   # the lease before the ledger
        # `once` refused by the lease leaves no ledger behind either
        c_cfg = _cfg(tmp_path, "c")
        refused = subprocess.run(dlprio("once", "--config", str(c_cfg)), capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode == 6, refused.stderr   # Exit.HELD
        assert not (tmp_path / "c" / "ledger.sqlite").exists()
        # A dies without releasing; B is refused until the heartbeat is older than the TTL
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        killed = time.time()
        tries = []
        while True:   # what a restarting service does: try again until the lease is stale
            once = subprocess.run(dlprio("once", "--config", str(b_cfg)), capture_output=True,
                                  text=True, timeout=60)
            tries.append((time.time() - killed, once.returncode))
            if once.returncode != 6:   # Exit.HELD
                break
            assert time.time() - killed < 60, tries
            time.sleep(1)
        assert once.returncode == 0 and "lease_taken_over" in once.stderr, once.stderr
        assert tries[0][1] == 6                  # refused right after the kill
        # taken over only once the heartbeat (renewed at most every 2 cycles) is > TTL old
        assert tries[-1][0] >= 8 - 2 * 2, tries
        b.start()
        b.wait_log("lease_acquired", 30)
        assert "lease_taken_over" not in b.text()   # `once` released it cleanly
        (now_held,) = _lease_jobs(jobs)
        assert now_held.job_id > held.job_id and f"{b.proc.pid}" in now_held.comment  # type: ignore[union-attr]
        # fencing: B's lease job is taken away; B stops at its next cycle, exit 6
        jobs.client.cancel([now_held.job_id])
        b.wait_log("lease_lost", 30)
        wait_for(lambda: not b.alive(), 30, "daemon B to exit after losing the lease")
        assert b.proc is not None and b.proc.returncode == 6
    finally:
        a.stop()
        b.stop()


def test_clean_stop_releases_the_lease(jobs: Jobs, tmp_path: Path) -> None:
    a = DaemonProc(_cfg(tmp_path, "a")).start()
    try:
        a.wait_log("lease_acquired", 60)
        assert len(_lease_jobs(jobs)) == 1
    finally:
        assert a.stop() == 0, a.text()
    assert _lease_jobs(jobs) == []
    b = DaemonProc(_cfg(tmp_path, "b")).start()     # the next daemon starts at once
    try:
        b.wait_log("lease_acquired", 60)
    finally:
        assert b.stop() == 0, b.text()
