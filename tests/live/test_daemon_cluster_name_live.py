"""A daemon cycle on the live cluster stamps its snapshot with Slurm's ClusterName even when
the slurm.conf file cannot be read where the daemon looks (as for a daemon run without
SLURM_CONF on a cluster whose slurm.conf is elsewhere, or configless): the name comes from
``scontrol show config`` through the client. SLURM_CONF itself stays set so that Slurm's
commands reach the test cluster, never the default one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from live_helpers import cluster_name
from prioritizer.daemon import snapshot as public_snapshot
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]


def test_cycle_stamps_slurms_cluster_name_without_the_file(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(public_snapshot, "local_cluster_name", lambda env=None: None)
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s.json"),
                       partitions=("no-such-partition",))   # acts on no job of the cluster
    with Ledger(cfg.ledger_path) as ledger:
        daemon = Daemon(cfg, SlurmClient(timeout_s=20), ledger, CycleAdapter())
        # a partition the cluster lacks, on purpose (manage no job): skip its check
        daemon.names_checked = True
        daemon.cycle()
    written = json.loads((tmp_path / "s.json").read_text())
    assert written["cluster"] == cluster_name().lower() and written["jobs"] == []
