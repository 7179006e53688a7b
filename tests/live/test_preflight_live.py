"""A ``dlprio.yaml`` that the cluster refuses leaves nothing behind: ``dlprio run`` and ``dlprio
once`` check it against the cluster (names_check.preflight) before they take the cluster
lease or open the ledger, so the one-line refusal (exit 2) comes with no lease job submitted,
no ledger file, nothing rebuilt from sacct. The truth is Slurm's own record of jobs of the
test's lease name (squeue with every state, and sacct where slurmdbd runs)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from daemon_helpers import dlprio, write_config
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]


def _lease_jobs(name: str) -> list[str]:
    """Every job of that name Slurm still knows of: squeue (all states), sacct with slurmdbd."""
    out = subprocess.run(["squeue", "-h", "--states=all", "-n", name, "-o", "%i"],
                         capture_output=True, text=True, check=True).stdout.split()
    if "slurmdbd" in SlurmClient(timeout_s=20).show_config().get("AccountingStorageType", ""):
        out += subprocess.run(["sacct", "-n", "-X", "-P", "--name", name, "-S", "now-1hours",
                               "-o", "JobID"], capture_output=True, text=True,
                              check=True).stdout.split()
    return out


@pytest.mark.parametrize("command", ["once", "run"])
@pytest.mark.parametrize("bad", ["partition", "guarantee"])
def test_a_config_the_cluster_refuses_leaves_no_lease_and_no_ledger(
        tmp_path: Path, command: str, bad: str) -> None:
    lease = f"pf-{command}-{bad}-{uuid.uuid4().hex[:8]}"   # no job of an earlier run
    gpus = sum(n.gpus_total for n in SlurmClient(timeout_s=20).nodes())
    extra: dict = ({"partitions": ["no_such_part"]} if bad == "partition" else
                   {"virtual_clusters": {"big": {"account": "root",
                                                 "guaranteed_gpus": gpus + 8}}})
    cfg = write_config(tmp_path / "dlprio.yaml", lease_name=lease, **extra)
    done = subprocess.run(dlprio(command, "--config", str(cfg)), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    line, = done.stderr.splitlines()
    assert ("'no_such_part' is not a partition of the cluster" in line if bad == "partition"
            else f"{gpus + 8}" in line and "guarantee" in line), line
    assert not (tmp_path / "ledger.sqlite").exists()
    assert _lease_jobs(lease) == []
