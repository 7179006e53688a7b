"""Accounting that does not track GPUs, on a real slurmdbd of every release: a throw-away
one-node cluster of the live cluster's release is brought up with slurmdbd and restarted
without ``AccountingStorageTRES=gres/gpu`` (slurm.conf(5): GPUs are then not stored). sacct
then names no GPUs for a 2-GPU job, ``scontrol show config`` says accounting does not track
them, and ``dlprio history export`` takes the job's GPU count from squeue (slurmctld still
knows the job) and says what is missing and how to turn it on. tests/prioritizer/history/test_gpu_untracked.py
checks the same rules on captures with the GPU TRES removed."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import per_release_port, wait_for, wait_state
from prioritizer.cli import main as dlprio
from prioritizer.history.trace import read_rows
from slurm_plugin.slurm.accounting import GPU_TRES_FIX, tracks_gpus
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]

REPO = Path(__file__).resolve().parents[2]
DLCLUSTER = str(REPO / ".venv" / "bin" / "dlcluster")
PORT = 9000  # per_release_port of it


def _name(release: tuple[int, int]) -> str:
    """One cluster name per release: slurmdbd keeps each cluster's database, and a release
    cannot take over a database an older one made more than two releases before."""
    return "nogpu%d%02d" % release


def _dlcluster(release: tuple[int, int], *args: str) -> str:
    done = subprocess.run([DLCLUSTER, *args, "--name", _name(release),
                           "--port-base", str(per_release_port(PORT, release))],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def untracked(slurm_release: tuple[int, int]) -> Iterator[dict[str, str]]:
    """The throw-away cluster's environment (SLURM_CONF, PATH), GPUs untracked."""
    release = "%d.%02d" % slurm_release
    _dlcluster(slurm_release, "up", "--slurm", release, "--nodes", "1", "--gpus-per-node", "2",
               "--with-dbd", "--clear", "--no-install")
    try:
        env: dict[str, str] = {}
        for line in _dlcluster(slurm_release, "env").splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            env[key] = subprocess.run(["bash", "-c", f"printf %s {value}"], text=True,
                                      capture_output=True, check=True).stdout
        conf = Path(env["SLURM_CONF"])
        _dlcluster(slurm_release, "ctl", "stop")
        text = conf.read_text()
        assert "AccountingStorageTRES=gres/gpu\n" in text
        conf.write_text(text.replace("AccountingStorageTRES=gres/gpu\n", ""))
        _dlcluster(slurm_release, "ctl", "start")
        yield env
    finally:
        _dlcluster(slurm_release, "down")


def test_sacct_and_export_without_gres_gpu_accounting(
        untracked: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for key, value in untracked.items():
        monkeypatch.setenv(key, value)
    client = SlurmClient(timeout_s=20)
    wait_for(client.ping, 60, "the throw-away slurmctld to answer")
    assert tracks_gpus(client.show_config()) is False
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 60))
    job = client.submit("#!/bin/bash\nsleep 2\n", ["--job-name=untracked", "--gres=gpu:2",
                                                   f"--output={tmp_path}/untracked.out"])
    wait_state(client, job, {"COMPLETED"}, 90)
    [record] = wait_for(lambda: [r for r in client.accounting(since) if r.job_id == job
                                 and r.end] or None, 60, "sacct to show the job ended")
    assert record.gpus == 0 and not record.gpu_tres      # slurmdbd stored no GPU TRES
    assert client.job(job).gpus == 2                     # slurmctld still knows the request

    out = tmp_path / "history.csv"
    assert dlprio(["history", "export", "--since", since, "-o", str(out)]) == 0
    [row] = [r for r in read_rows(str(out)) if int(r.job_id) == job]
    assert row.num_gpu == 2
    err = capsys.readouterr().err
    assert "Slurm accounting does not track GPUs (no gres/gpu in AccountingStorageTRES)" in err
    assert "1 with GPU counts from squeue or the dlprio ledger" in err
    assert GPU_TRES_FIX in err
    assert os.environ["SLURM_CONF"] == untracked["SLURM_CONF"]
