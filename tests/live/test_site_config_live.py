"""The read-only commands and dlsubmit on a Slurm that dlcluster did not configure.

A site's slurm.conf is not dlcluster's: other partition names (two of them, the default not
called ``gpu``), typed GRES of another type, other priority weights, no job_submit plugin. A
throw-away slurmctld runs such a config, made from the live cluster's (the same release: the
test runs on every release ``./test.sh`` brings up), and ``dlqueue --json``, ``dlprio once
--dry-run``, ``dlprio explain`` and ``dlsubmit`` must work on it. Its nodes never register (no
slurmd): Slurm holds the jobs pending, which is all a read-only command and a submit need.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conf_helpers import controller
from live_helpers import slurm_conf, wait_for

from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def site_conf(stock: str) -> str:
    """The live slurm.conf made into another site's: partitions ``batch`` (default) and
    ``train``, GRES type ``h100``, other priority weights, no job_submit plugin."""
    drop = ("PartitionName=", "JobSubmitPlugins=", "PriorityWeight")
    lines = [line for line in stock.splitlines() if not line.startswith(drop)]
    lines = [re.sub(r"\bGres=gpu:a100:", "Gres=gpu:h100:", line) for line in lines]
    return "\n".join([*lines,
                      "PriorityWeightAge=5000", "PriorityWeightFairshare=0",
                      "PriorityWeightPartition=0", "PriorityWeightJobSize=20000",
                      "PartitionName=batch Nodes=ALL Default=YES MaxTime=2-00:00:00 State=UP",
                      "PartitionName=train Nodes=ALL PriorityTier=5 MaxTime=INFINITE State=UP"]) + "\n"


def test_read_only_commands_and_dlsubmit_on_a_site_config(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    stock = slurm_conf()
    site = tmp_path / "site"
    site.mkdir()
    (site / "slurm.conf").write_text(site_conf(stock.read_text()))
    gres = (stock.parent / "gres.conf").read_text()
    assert "Type=a100" in gres     # the live cluster's own type, renamed below
    (site / "gres.conf").write_text(gres.replace("Type=a100", "Type=h100"))
    if (stock.parent / "cgroup.conf").exists():
        (site / "cgroup.conf").write_text((stock.parent / "cgroup.conf").read_text())
    run = tmp_path / "run"
    run.mkdir()
    with controller(site / "slurm.conf", [], run) as conf:
        monkeypatch.setenv("SLURM_CONF", str(conf))
        client = SlurmClient(timeout_s=10)
        wait_for(client.ping, 60, "the site's slurmctld to answer")
        nodes = client.nodes()
        assert {frozenset(n.partitions) for n in nodes} == {frozenset({"batch", "train"})}
        assert {n.gpu_type for n in nodes} == {"h100"}

        env = {"SLURM_CONF": str(conf)}
        sub = subprocess.run([str(BIN / "dlsubmit"), "examples/specs/single-gpu.yaml",
                              "--partition", "train", "--output", "/dev/null"],
                             cwd=REPO, capture_output=True, text=True, timeout=60,
                             env={**_env(), **env})
        assert sub.returncode == 0, sub.stderr
        job_id = int(sub.stdout.strip())
        job = client.job(job_id)
        assert (job.state, job.partition, job.gpus) == ("PENDING", "train", 1)

        queue = subprocess.run([str(BIN / "dlqueue"), "--json"], capture_output=True, text=True,
                               timeout=60, env={**_env(), **env})
        assert queue.returncode == 0, queue.stderr
        rows = json.loads(queue.stdout)
        listed = rows["jobs"] if isinstance(rows, dict) else rows
        assert [r["job_id"] for r in listed if r["job_id"] == job_id] == [job_id]

        cfg = tmp_path / "dlprio.yaml"
        cfg.write_text(f"ledger_path: {tmp_path}/ledger.sqlite\nsnapshot_path: {tmp_path}/snap.json\n"
                       "partitions: [batch, train]\nmetrics_port: 0\n")
        once = subprocess.run([str(BIN / "dlprio"), "once", "--dry-run", "--config", str(cfg)],
                              capture_output=True, text=True, timeout=60, env={**_env(), **env})
        assert once.returncode == 0, once.stderr
        assert any(line.split()[1:3] == [str(job_id), "PENDING"]
                   for line in once.stdout.splitlines()[1:] if len(line.split()) > 2)
        # explain reads the ledger that a cycle writes (a dry run writes none)
        real = subprocess.run([str(BIN / "dlprio"), "once", "--config", str(cfg)],
                              capture_output=True, text=True, timeout=60, env={**_env(), **env})
        assert real.returncode == 0, real.stderr
        explain = subprocess.run([str(BIN / "dlprio"), "explain", str(job_id), "--config", str(cfg)],
                                 capture_output=True, text=True, timeout=60, env={**_env(), **env})
        assert explain.returncode == 0, explain.stderr
        lines = explain.stdout.splitlines()
        assert lines[0].startswith(f"job {job_id} (") and lines[0].endswith(", train): PENDING")
        assert any(line.startswith("queue: 0 of 0..2") for line in lines)   # new: the top queue
        client.cancel([job_id])


def _env() -> dict[str, str]:
    import os
    return dict(os.environ)
