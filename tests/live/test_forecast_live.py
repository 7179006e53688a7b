"""Start-time forecasts of ``dlprio run`` on the live cluster: a job waiting behind a job that
holds every GPU gets a forecast in the snapshot, ``dlqueue`` shows it (START column, ``-j``
lines), and it is plausible: the blocker's 2-minute time limit bounds its remaining run time,
so the waiter starts by the blocker's start + 120 s in every draw. A SIGTERM to the daemon's
whole process group (systemd's stop) ends it cleanly, forecast child and all."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import DaemonProc, Jobs, live_jobs, write_config
from live_helpers import wait_for, wait_state
from submit import queue_cli

pytestmark = [pytest.mark.live, pytest.mark.releases]
LIMIT_S = 120


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j


def test_a_waiting_job_gets_a_plausible_forecast(jobs: Jobs, tmp_path: Path, capsys) -> None:
    nodes = [n for n in jobs.client.nodes() if n.gpus_total > 0]
    per_node = min(n.gpus_total for n in nodes)
    cfg = write_config(tmp_path / "dlprio.yaml", policy={"policy": "fifo"},
                       forecast={"every_cycles": 1, "cpu_budget_s": 2, "draws": 5,
                                 "horizon_s": 3600})
    snapshot = tmp_path / "snapshot.json"
    daemon = DaemonProc(cfg, session=True).start()
    try:
        blocker, _ = jobs.submit("blocker", nodes=len(nodes), gpus_per_node=per_node,
                                 steps=600, extra=("--time=2",))
        began = wait_state(jobs.client, blocker, {"RUNNING"}, 60).start_time
        waiter, _ = jobs.submit("waiter", nodes=1, gpus_per_node=per_node, steps=3)

        def made() -> dict | None:
            data = json.loads(snapshot.read_text()) if snapshot.exists() else {}
            found = data.get("forecast", {}).get("jobs", {}).get(str(waiter))
            return found if found and data["forecast"]["made_at"] > began else None

        got = wait_for(made, 60, "a forecast of the waiting job")
        assert queue_cli.main(["--snapshot", str(snapshot), "-j", str(waiter)]) == 0
        out = capsys.readouterr().out
    finally:
        # SIGTERM to the whole process group, forecast child included (systemd's stop): the
        # daemon still ends its cycle, gives the lease back and exits 0
        assert daemon.stop(group=True) == 0, daemon.text()
    assert "event=lease_released" in daemon.text() and "event=stopped" in daemon.text()
    assert began is not None
    p10, p50, p90 = got["start"]
    assert time.time() - 120 <= p10 <= p50 <= p90 <= began + LIMIT_S + 1
    assert got["ahead"] == 0 and got["finish"][0] >= p10
    lines = out.splitlines()
    assert lines[0].split()[-3:] == ["START", "PREEMPTS", "REASON"]
    start_cell = lines[1].split()[lines[0].split().index("START")]
    assert start_cell == "now" or start_cell.startswith("~"), out
    assert "  start: " in out and "jobs ahead in the start order: 0" in out
    assert "forecast_ready" in daemon.text()
