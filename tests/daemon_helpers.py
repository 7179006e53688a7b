"""Helpers for the daemon's live tests: checkpointing batch jobs, their stamps, a daemon process.

The batch script below is the test's independent truth: each attempt writes ``start <epoch>``
and ``end <epoch>`` stamps to its own log (``--open-mode=append``), traps USR2 to write a
checkpoint and keeps running, as the checkpoint contract says (docs/dlsubmit.md: the steps
after the checkpoint are lost at the requeue; Slurm's SIGTERM on requeue writes the end
stamp), and resumes from the checkpoint after a requeue. Steps are 1 s of ``sleep`` each.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from live_helpers import wait_cluster_idle, wait_for
from prioritizer.daemon.ledger import Ledger
from slurm_plugin.slurm.client import SlurmClient

REPO = Path(__file__).resolve().parents[1]

CKPT_SCRIPT = r"""#!/bin/bash
CK="$CK_DIR/ckpt-$SLURM_JOB_ID"
step=0
[ -f "$CK" ] && step=$(cat "$CK")
echo "start $(date +%s.%N) restart=${SLURM_RESTART_COUNT:-0} step=$step"
on_usr2() { echo "$step" > "$CK"; echo "checkpoint $(date +%s.%N) step=$step"; }
on_term() { echo "end $(date +%s.%N) reason=killed step=$step"; exit 143; }
trap on_usr2 USR2
trap on_term TERM
while [ "$step" -lt "$STEPS" ]; do
  sleep 1 & wait $!
  step=$((step+1))
done
echo "end $(date +%s.%N) reason=done step=$step"
"""


@dataclass(frozen=True)
class Attempt:
    """One attempt from a job log: start/end epoch s (end None if killed without a stamp)."""

    start: float
    end: float | None
    start_step: int
    end_reason: str | None


def attempts(log: Path) -> list[Attempt]:
    """Parse the stamps of every attempt in ``log``."""
    out: list[Attempt] = []
    cur: dict | None = None
    for line in log.read_text().splitlines():
        if m := re.match(r"^start (\S+) restart=\d+ step=(\d+)", line):
            if cur:
                out.append(Attempt(cur["start"], None, cur["step"], None))
            cur = {"start": float(m.group(1)), "step": int(m.group(2))}
        elif (m := re.match(r"^end (\S+) reason=(\w+)", line)) and cur:
            out.append(Attempt(cur["start"], float(m.group(1)), cur["step"], m.group(2)))
            cur = None
    if cur:
        out.append(Attempt(cur["start"], None, cur["step"], None))
    return out


def stamp_service(log: Path, gpus: int) -> float:
    """GPU·s from the log's stamps: Σ (end − start) × gpus over finished attempts."""
    return sum((a.end - a.start) * gpus for a in attempts(log) if a.end is not None)


@dataclass
class Jobs:
    """Submits test jobs and cancels the active ones at the end."""

    client: SlurmClient
    workdir: Path
    ids: list[int] = field(default_factory=list)

    def submit(self, name: str, *, nodes: int, gpus_per_node: int, steps: int,
               marker: bool = True, extra: tuple[str, ...] = ()) -> tuple[int, Path]:
        """Submit the checkpointing script; returns (job id, log path)."""
        log = self.workdir / f"{name}.log"
        args = [f"--job-name=dae-{name}", f"--output={log}", "--open-mode=append", "--requeue",
                f"--nodes={nodes}", f"--gres=gpu:{gpus_per_node}", "--ntasks-per-node=1",
                f"--export=ALL,CK_DIR={self.workdir},STEPS={steps}", *extra]
        if marker:
            args.append("--comment=dl:v1;signal=USR2;grace=5")
        job_id = self.client.submit(CKPT_SCRIPT, args)
        self.ids.append(job_id)
        return job_id, log

    def cleanup(self) -> None:
        active = [j.job_id for j in self.client.jobs(job_ids=self.ids) if j.is_active]
        if active:
            self.client.cancel(active)



@contextmanager
def live_jobs(workdir: Path) -> Iterator[Jobs]:
    """Jobs on the live cluster, once it has no active job; the test's jobs are cancelled after
    (waiting for slurmctld first, in case the test stopped it)."""
    client = SlurmClient(timeout_s=20)
    wait_cluster_idle(client, 240)
    jobs = Jobs(client, workdir)
    try:
        yield jobs
    finally:
        wait_for(client.ping, 60, "slurmctld to answer for cleanup")
        jobs.cleanup()

def write_config(path: Path, **overrides: object) -> Path:
    """A fast daemon config (5 s cycle, 5 s grace, thresholds of tens of GPU·s) at ``path``."""
    policy = {"thresholds_gpu_s": [40, 100000], "starve_knob": 0, "min_run_s": 5}
    policy.update(overrides.pop("policy", {}))  # type: ignore[arg-type]
    cfg = {"policy": policy, "interval_s": 5, "backoff_max_s": 10, "max_grace_s": 5,
           "slurm_timeout_s": 4, "metrics_port": 0,
           "ledger_path": str(path.parent / "ledger.sqlite"),
           "snapshot_path": str(path.parent / "snapshot.json")}
    cfg.update(overrides)
    path.write_text(yaml.safe_dump(cfg))
    return path


class DaemonProc:
    """``dlprio run --config CFG`` as a child process, its log lines in ``<cfg>.log``."""

    def __init__(self, config: Path, env: dict[str, str] | None = None,
                 log_name: str = "daemon.log", session: bool = False) -> None:
        self.config = config
        self.log = config.parent / log_name
        self.env = {**os.environ, **(env or {})}
        #: run it in a session (and process group) of its own, as systemd does
        self.session = session
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> DaemonProc:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(dlprio("run", "--config", str(self.config)),
                                         stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                         cwd=REPO, start_new_session=self.session)
        return self

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def wait_log(self, pattern: str, timeout_s: float = 60) -> str:
        rx = re.compile(pattern, re.M)
        return wait_for(lambda: rx.search(self.text()) and self.text(), timeout_s,
                        f"daemon log to match {pattern!r}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, group: bool = False) -> int:
        """SIGTERM (``group``: to its whole process group, as systemd's stop sends it to every
        process of the unit; needs ``session``), wait up to 30 s (then SIGKILL); returns the
        exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            if group:
                assert self.session, "a group stop needs a daemon started in its own session"
                os.killpg(self.proc.pid, signal.SIGTERM)
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def dlprio(*args: str) -> list[str]:
    """argv of the dlprio command running from this checkout."""
    return [sys.executable, "-m", "prioritizer.cli", *args]


def ledger_rows(config: Path) -> dict[int, dict]:
    """``dlprio status`` rows by job id, read directly from the ledger (read-only)."""
    from prioritizer.daemon.explain import status_rows
    path = yaml.safe_load(config.read_text())["ledger_path"]
    try:
        with Ledger(path, readonly=True) as ledger:
            return {r["job_id"]: r for r in status_rows(ledger, time.time())}
    except FileNotFoundError:
        return {}


def open_ledger(config: Path) -> Ledger:
    return Ledger(yaml.safe_load(config.read_text())["ledger_path"], readonly=True)
