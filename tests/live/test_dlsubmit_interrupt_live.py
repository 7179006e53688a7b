"""dlsubmit interrupted on a live cluster: the ids stream out while the batch runs, and after a
SIGINT every job Slurm queued is on stdout under its own spec, and no other (never jobs queued
with no id printed, nor a KeyboardInterrupt traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from live_helpers import wait_cluster_idle
from slurm_plugin.slurm.client import SlurmClient
from submit_helpers import REPO, v2_spec

pytestmark = [pytest.mark.live, pytest.mark.releases]
N = 300


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_batch_reports_exactly_what_slurm_queued(sig: int, tmp_path: Path) -> None:
    client = SlurmClient(timeout_s=20)
    wait_cluster_idle(client, 240)
    prefix = f"dlint{os.getpid()}{sig}-"
    paths = []
    for i in range(N):
        paths.append(tmp_path / f"s{i}.yaml")
        paths[-1].write_text(yaml.safe_dump(v2_spec(f"{prefix}{i}", roles={"main": {
            "instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 100, "gpu": 0},
            "commands": ["sleep 300"]}})))
    proc = subprocess.Popen([sys.executable, "-m", "submit.cli", "--output", "/dev/null",
                             "--checkpoint-root", str(tmp_path / "ck"), *map(str, paths)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        lines = [proc.stdout.readline() for _ in range(10)]  # ids arrive while the batch runs
        proc.send_signal(sig)
        out = proc.stdout.read()  # not communicate(): it would skip what readline buffered
        err = proc.stderr.read()  # small (one line per refused spec, then the summary)
        proc.wait(timeout=120)
        lines = [ln.strip() for ln in lines] + out.splitlines()
        queued = {j.job_id: j.name for j in client.jobs() if j.name.startswith(prefix)}
    finally:
        proc.kill()
        mine = [j.job_id for j in client.jobs() if j.name.startswith(prefix) and j.is_active]
        if mine:
            client.cancel(mine)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert len(lines) == N
    printed = {int(x): f"{prefix}{i}" for i, x in enumerate(lines) if x != "-"}
    assert printed == queued  # every queued job reported under its spec, and nothing else
    assert 10 <= len(printed) < N  # it stopped part-way
    assert err.strip().splitlines()[-1].startswith(
        f"dlsubmit: interrupted by {signal.Signals(sig).name}: {len(printed)} of {N} spec(s) submitted")
