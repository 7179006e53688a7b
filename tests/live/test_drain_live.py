"""A node an admin drains lets its jobs finish: the daemon takes no victim there (live).

Four 8-GPU jobs, one per node, fall to queue 1; three of their nodes are drained (``scontrol
update state=drain``: ``mixed+DRAIN``, draining); an 8-GPU job in queue 0 arrives. GPUs freed
on a draining node would start nothing, so the one victim is the job on the node still in
service, the waiter starts there, and the three others run on to their end."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from daemon_helpers import DaemonProc, Jobs, ledger_rows, live_jobs, open_ledger, write_config
from live_helpers import wait_for, wait_state

pytestmark = [pytest.mark.live, pytest.mark.releases]


def _scontrol_nodes(names: list[str], state: str, reason: str | None = None) -> None:
    args = ["scontrol", "update", f"nodename={','.join(names)}", f"state={state}"]
    subprocess.run(args + ([f"reason={reason}"] if reason else []), check=True,
                   capture_output=True, timeout=20)


def test_no_victim_on_a_draining_node(tmp_path: Path) -> None:
    with live_jobs(tmp_path) as jobs:
        _run(jobs, tmp_path)


def _run(jobs: Jobs, tmp_path: Path) -> None:
    nodes = [n.name for n in jobs.client.nodes() if n.gpus_total == 8]
    assert len(nodes) >= 2, "needs nodes of 8 GPUs"
    cfg = write_config(tmp_path / "dlprio.yaml")
    daemon = DaemonProc(cfg).start()
    drained: list[str] = []
    try:
        longs = [jobs.submit(f"long{i}", nodes=1, gpus_per_node=8, steps=90)[0]
                 for i in range(len(nodes))]
        where = {j: wait_state(jobs.client, j, {"RUNNING"}, 60).node_list[0] for j in longs}
        wait_for(lambda: all(ledger_rows(cfg).get(j, {}).get("queue") == 1 for j in longs),
                 30, "the long jobs demoted to queue 1")
        keep = longs[-1]
        drained = [where[j] for j in longs if j != keep]
        _scontrol_nodes(drained, "drain", "dlprio-live-test")
        short, _ = jobs.submit("short", nodes=1, gpus_per_node=8, steps=3)
        started = wait_state(jobs.client, short, {"RUNNING"}, 90)
        assert started.node_list == (where[keep],)
        with open_ledger(cfg) as ledger:
            intents = {j: ledger.intents(j) for j in longs}
        assert [i.waiter for i in intents[keep]] == [short]
        assert all(intents[j] == [] for j in longs if j != keep), intents
        assert all(jobs.client.job(j).state == "RUNNING" and jobs.client.job(j).restart_count == 0
                   for j in longs if j != keep)
    finally:
        if drained:
            _scontrol_nodes(drained, "resume")
        assert daemon.stop() == 0, daemon.text()
