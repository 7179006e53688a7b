"""Live smoke test of the main job (issue 7): the short form on the cluster SLURM_CONF names.

Runs ``examples/main_job.py --jobs 6`` (about 2 minutes, durations 20-90 s: the first six
jobs of the default Philly sample ask for 34 of the 32 GPUs, so the 8-GPU job that arrived
first is preempted when the last one arrives), then checks, from the jobs' own logs and from
Slurm rather than from the report's numbers, that every job completed, that at least one job
got the checkpoint signal, was requeued and resumed from its checkpoint, and that the report
printed its tables and wrote its PNG. Needs ``dlprio run`` and ``dlprio simulate``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from main_job_helpers import EXAMPLES, REPO, load_example
from slurm_plugin.client import SlurmClient

trainer = load_example("trainer")

pytestmark = pytest.mark.live


def _cancel_leftovers(client: SlurmClient, ids: list[int]) -> None:
    active = [j.job_id for j in client.jobs(job_ids=ids) if j.is_active] if ids else []
    if active:
        client.cancel(active)


def _stop_children(out: Path) -> None:
    """If main_job.py was killed (timeout), stop the daemon and dlqueue it started, by pid."""
    for name in ("dlprio.pid", "dlqueue.pid"):
        path = out / name
        if not path.exists():
            continue
        pid = int(path.read_text())
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(out).encode() in cmdline:          # still our child, not a reused pid
            os.kill(pid, signal.SIGTERM)


def test_short_main_job_preempts_requeues_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, str(EXAMPLES / "main_job.py"), "--jobs", "6",
            "--out", str(out), "--watch-interval", "30"]
    client = SlurmClient()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=900,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)
    finally:
        _stop_children(out)
        ids = [int(p.name.rsplit("-", 1)[1].split(".")[0]) for p in (out / "logs").glob("*.out")]
        _cancel_leftovers(client, ids)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The run cleaned up its pid files; the daemon's snapshot is where main_job says: out/ on a
    # private cluster, the path a plain dlqueue reads on the default one (as in CI).
    assert not [n for n in ("main_job.pid", "dlprio.pid", "dlqueue.pid") if (out / n).exists()]
    default = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).resolve() == \
        Path("/etc/slurm/slurm.conf").resolve()
    snapshot = load_example("main_job").snapshot_path(out)
    assert snapshot.exists()
    assert (snapshot.parent == out) != default

    # Each job's own log: the trainer finished all its steps; some job was preempted and resumed.
    logs = sorted((out / "logs").glob("mj*.out"))
    assert len(logs) == 6
    preempted = []
    for log in logs:
        text = log.read_text()
        events = trainer.parse_log(text)
        starts = [e for e in events if e["event"] == "start"]
        assert events[-1]["event"] == "end" and events[-1]["reason"] == "done", log.name
        assert events[-1]["step"] == starts[0]["total_steps"], log.name
        signalled = [e for e in events if e["event"] == "checkpoint" and e["reason"] == "signal"]
        if not signalled:
            assert len(starts) == 1, f"{log.name} restarted without a checkpoint signal"
            continue
        assert "got SIGUSR2, forwarding it to the payload" in text      # dlsubmit's trap
        assert len(starts) >= 2, f"{log.name} was signalled but never requeued"
        for before, after in zip(starts, starts[1:]):
            saved = [int(e["step"]) for e in events[events.index(before):events.index(after)]
                     if e["event"] == "checkpoint"]
            assert saved and int(after["step"]) == saved[-1] > 0, log.name
            assert int(after["restart_count"]) == int(before["restart_count"]) + 1
        preempted.append((log, int(starts[-1]["restart_count"])))
    assert preempted, "no job was preempted"

    # Slurm agrees that the preempted jobs were requeued (restart count), and all completed.
    ids = [int(log.stem.rsplit("-", 1)[1]) for log in logs]
    jobs = {j.job_id: j for j in client.jobs(job_ids=ids)}
    for log, restarts in preempted:
        job = jobs.get(int(log.stem.rsplit("-", 1)[1]))
        if job is not None:                   # still within MinJobAge
            assert job.restart_count == restarts and job.state == "COMPLETED"

    # The report: the tables, the PNG, the JSON.
    stdout = proc.stdout
    assert "per job (times in s" in stdout
    for log in logs:
        assert any(line.startswith(log.stem.rsplit("-", 1)[0] + " ") for line in stdout.splitlines())
    for label in ("avg JCT s", "p95 JCT s", "preemptions", "real/sim avg"):
        assert any(line.startswith(label) for line in stdout.splitlines()), label
    assert "sim tiresias-las" in stdout and "real (live)" in stdout
    assert "JOBID" in stdout                  # a dlqueue --watch frame
    assert (out / "main_job.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "main_job.json").read_text())
    assert summary["real"]["jobs"] == 6
    assert {j["state"] for j in summary["jobs"]} == {"COMPLETED"}
