"""The runnable specs of examples/specs/ run as they are on the live cluster and complete.

Each is submitted with the installed ``dlsubmit`` from the repository root, as
examples/specs/README.md tells users (the jobs run ``.venv/bin/python examples/trainer.py``
relative to the submission directory); only ``--output`` and ``--checkpoint-root`` point into
the test's temporary directory so the checkout stays clean. The container examples cannot run
here (no pyxis or apptainer on dlcluster); their dry runs are checked in the pure suite
(tests/examples/test_examples_specs.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from live_helpers import wait_cluster_idle, wait_for
from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin.slurm.records import Job

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
DLSUBMIT = Path(sys.executable).parent / "dlsubmit"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}

# spec -> ranks it runs (one trainer each)
RANK_LINE = re.compile(r"\brank (\d+) of (\d+)\b")  # the echo line of every example
RUNNABLE = {"single-gpu.yaml": 1, "ddp-2x2gpu.yaml": 2, "hetjob-chief-workers.yaml": 3}


def test_runnable_examples_complete(tmp_path: Path) -> None:
    client = SlurmClient(timeout_s=20)
    wait_cluster_idle(client, 240)
    submitted: dict[str, int] = {}
    try:
        for name in RUNNABLE:
            proc = subprocess.run(
                [str(DLSUBMIT), f"examples/specs/{name}", "--json",
                 "--output", str(tmp_path / f"{name}-%j.out"), "--checkpoint-root", str(tmp_path / "ckpt")],
                cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr
            submitted[name] = json.loads(proc.stdout)["job_id"]

        def ended(job_id: int) -> Job | None:
            return next((j for j in client.jobs(job_ids=[job_id])
                         if j.job_id == job_id and j.state in ENDED), None)

        for name, job_id in submitted.items():
            job = wait_for(lambda: ended(job_id), 300, f"{name} (job {job_id}) to end", interval_s=1)
            log = (tmp_path / f"{name}-{job_id}.out").read_text()
            assert job.state == "COMPLETED", f"{name}: {job.state}\n{log[-2000:]}"
            ranks = RUNNABLE[name]
            done = [ln for ln in log.splitlines() if ln.startswith("[trainer] end") and "reason=done" in ln]
            assert len(done) == ranks, log[-2000:]
            seen = [(int(m[1]), int(m[2])) for m in RANK_LINE.finditer(log)]
            assert sorted(seen) == [(r, ranks) for r in range(ranks)], log[-2000:]
    finally:
        active = [j.job_id for j in client.jobs(job_ids=list(submitted.values())) if j.is_active]
        if active:
            client.cancel(active)
