"""Live smoke test of the main job: the short form on the cluster SLURM_CONF names.

Runs ``examples/main_job.py --jobs 6`` (about 3 minutes: six jobs of each workload, the burst of
the Philly dense window with the highest offered load and the jobs from day 50, the
90th-percentile job at 20 s), each twice live: Slurm alone, then under ``dlprio run`` with the
settings ``dlprio tune`` picked. Checks, for the burst, from the jobs' own logs and from
Slurm rather than from the report's numbers, that every job of both runs completed, that no job
of the Slurm-alone run was signalled or restarted, that under dlprio at least one job got the
checkpoint signal, was requeued and resumed from its checkpoint; that three probe jobs measured
the start-up and each run was predicted from its jobs as submitted; that the report printed both
runs and their predictions and wrote its CSV and PNG; and that the closing commands run as
printed (``dlprio explain`` of the most-preempted job, ``dlprio status``); for the mixed workload,
that both runs completed every job and that both workloads were tuned and reported.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from main_job_helpers import EXAMPLES, REPO, load_example
from slurm_plugin.slurm.client import SlurmClient

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


def _job_id(log: Path) -> int:
    return int(log.stem.rsplit("-", 1)[1])


def _events(log: Path) -> tuple[str, list[dict], list[dict]]:
    text = log.read_text()
    events = trainer.parse_log(text)
    return text, events, [e for e in events if e["event"] == "start"]


def test_short_main_job_runs_both_ways_and_its_commands_work(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [sys.executable, str(EXAMPLES / "main_job.py"), "--jobs", "6",
            "--out", str(out), "--watch-interval", "30"]
    client = SlurmClient()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=900,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)
    finally:
        for run in ("slurm", "dlprio", ""):
            _stop_children(out / run)
        ids = [_job_id(p) for p in out.glob("*/logs/*.out")]
        _cancel_leftovers(client, ids)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # The run cleaned up its pid files; the daemon's snapshot is where main_job says: out/dlprio
    # on a private cluster, the path a plain dlqueue reads on the default one (as in CI).
    assert not list(out.glob("**/*.pid"))
    default = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).resolve() == \
        Path("/etc/slurm/slurm.conf").resolve()
    snapshot = load_example("main_job").snapshot_path(out / "dlprio")
    assert snapshot.exists()
    assert (snapshot.parent == out / "dlprio") != default

    # Slurm alone: each job ran once, all its steps, never signalled.
    alone = sorted((out / "slurm" / "logs").glob("slurm*.out"))
    assert len(alone) == 6
    for log in alone:
        text, events, starts = _events(log)
        assert len(starts) == 1 and events[-1]["event"] == "end" and events[-1]["reason"] == "done"
        assert events[-1]["step"] == starts[0]["total_steps"], log.name
        assert "got SIGUSR2" not in text, log.name

    # Under dlprio: each job's own log says it finished all its steps; some job was preempted
    # and resumed at its last checkpoint.
    logs = sorted((out / "dlprio" / "logs").glob("dlprio*.out"))
    assert len(logs) == 6
    preempted = []
    for log in logs:
        text, events, starts = _events(log)
        assert events[-1]["event"] == "end" and events[-1]["reason"] == "done", log.name
        assert events[-1]["step"] == starts[0]["total_steps"], log.name
        signalled = [e for e in events if e["event"] == "checkpoint" and e["reason"] == "signal"]
        if not signalled:
            assert len(starts) == 1, f"{log.name} restarted without a checkpoint signal"
            continue
        assert "got SIGUSR2, forwarded it to the payload" in text      # dlsubmit's trap
        assert len(starts) >= 2, f"{log.name} was signalled but never requeued"
        for before, after in zip(starts, starts[1:]):
            saved = [int(e["step"]) for e in events[events.index(before):events.index(after)]
                     if e["event"] == "checkpoint"]
            # resumed from the last checkpoint this attempt logged: nothing of the old attempt
            # runs on after the requeue (a payload orphaned by its task's shell once did)
            assert saved and int(after["step"]) == saved[-1] > 0, log.name
            assert int(after["restart_count"]) == int(before["restart_count"]) + 1
        preempted.append((log, len(signalled), int(starts[-1]["restart_count"])))
    assert preempted, "no job was preempted"

    # Slurm agrees that the preempted jobs were requeued (restart count), and all completed.
    jobs = {j.job_id: j for j in client.jobs(job_ids=[_job_id(log) for log in logs])}
    for log, _, restarts in preempted:
        job = jobs.get(_job_id(log))
        if job is not None:                   # still within MinJobAge
            assert job.restart_count == restarts and job.state == "COMPLETED"

    # The report: both runs, each beside its prediction; the CSV, the PNG, the JSON.
    lines = proc.stdout.splitlines()
    assert any("[1/2 Slurm alone]" in ln for ln in lines) and any("[2/2 dlprio]" in ln for ln in lines)
    for log in alone:
        row = log.stem.rsplit("-", 1)[0].removeprefix("slurm")           # e.g. 03-u9747
        assert any(ln.startswith(row + " ") for ln in lines), row
    for label in ("avg JCT s", "median JCT s", "p95 JCT s", "avg queueing s", "makespan s",
                  "preemptions", "restarts", "live/sim avg"):
        assert any(ln.startswith(label) for ln in lines), label
    head = next(ln for ln in lines if "Slurm alone (live)" in ln)
    assert head.split() == ["Slurm", "alone", "(live)", "sim", "fifo-fit", "dlprio", "(live)", "sim",
                            "tiresias-las"]
    for run in ("slurm", "dlprio"):           # dlqueue --watch went into a file, not the output
        assert "JOBID" in (out / run / "dlqueue.log").read_text()
    assert "JOBID" not in proc.stdout
    summary = json.loads((out / "main_job.json").read_text())
    for run, count in (("slurm", 0), ("dlprio", sum(n for _, n, _ in preempted))):
        assert {j["state"] for j in summary["runs"][run]["jobs"]} == {"COMPLETED"}
        assert summary["runs"][run]["summary"]["preemptions"] == count

    # The start-up was measured by three probe jobs (each ran once, all its steps, in its own
    # log) and each run was predicted as submitted: arrivals at the dlsubmit calls + dispatch.
    costs = summary["startup"]
    assert costs["probes"] == 3 and costs["dispatch_s"] + costs["launch_s"] > 0
    assert all(0 <= costs[k] < 60 for k in ("dispatch_s", "launch_s", "teardown_s"))
    probes = sorted((out / "probes" / "logs").glob("probe*.out"))
    assert len(probes) == 3
    for log in probes:
        _, events, starts = _events(log)
        assert len(starts) == 1 and events[-1]["reason"] == "done", log.name
    for run in ("slurm", "dlprio"):
        jobs = summary["runs"][run]["jobs"]
        first = min(j["submitted_at"] for j in jobs)
        with open(out / run / "sim-trace.csv") as handle:
            arrivals = {int(r["job_id"]): float(r["submit_time"]) for r in csv.DictReader(handle)}
        assert arrivals == pytest.approx({j["scaled"]["index"]: j["submitted_at"] - first
                                          + costs["dispatch_s"] for j in jobs}, abs=0.002)

    # The mixed workload ran too, both ways, every job completed; both workloads' settings came
    # from dlprio tune (a tuned config beside each) and the last lines give both verdicts.
    mixed = json.loads((out / "mixed" / "main_job.json").read_text())
    for run in ("slurm", "dlprio"):
        assert [j["state"] for j in mixed["runs"][run]["jobs"]] == ["COMPLETED"] * 6
    for where in (out, out / "mixed"):
        assert "thresholds_gpu_s" in (where / "dlprio-tuned.yaml").read_text()
        assert json.loads((where / "workload.json").read_text())["k"] >= 1
    assert any(ln.startswith("[mixed 2/2 dlprio] done") for ln in lines)
    assert sum(ln.startswith("  map check, predicted avg JCT") for ln in lines) == 2
    tail_lines = lines[lines.index("both workloads:") + 1:]
    assert [ln.split(":")[0].strip() for ln in tail_lines[:2]] == ["burst", "mixed"]

    # The closing lines: every command and path works exactly as printed, from where it ran.
    tail = lines[lines.index("look further:") + 1:]
    explain, status = (ln.split("#")[0].strip() for ln in tail[:2])
    top = max(preempted, key=lambda p: p[1])
    assert f" explain {_job_id(top[0])} " in explain or \
        any(f" explain {_job_id(log)} " in explain for log, n, _ in preempted if n == top[1])
    shown = subprocess.run(explain, shell=True, cwd=REPO, capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    assert f"preemptions: {top[1]}" in shown.stdout and "COMPLETED" in shown.stdout.splitlines()[0]
    listed = subprocess.run(status, shell=True, cwd=REPO, capture_output=True, text=True, check=False)
    assert listed.returncode == 0, listed.stderr
    assert all(str(_job_id(log)) in listed.stdout for log in logs)
    paths = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].split()[0] for ln in tail[2:5]}
    assert (REPO / paths["figure"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (REPO / paths["per-job CSV"]).read_text().startswith("index,trace_id,gpus")
    assert (REPO / paths["everything"]).exists()
