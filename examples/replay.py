"""The live half of the main job: specs for ``dlsubmit``, the helper processes, arrivals in real time.

``examples/main_job.py`` calls this module to turn each scaled trace job
(:class:`prioritizer.sim.workload.ScaledJob`) into a PAI v2 spec whose command runs
``examples/trainer.py``, submit it with ``dlsubmit`` at its scaled arrival time, run ``dlprio
run`` and ``dlqueue --watch`` beside it, and wait until Slurm has finished every job. Slurm is
read only through :class:`slurm_plugin.slurm.client.SlurmClient` (the one module that runs Slurm
commands); the project's commands (``dlsubmit``, ``dlprio``, ``dlqueue``) run as child
processes, exactly as a user runs them. Times are epoch seconds (``time.time``) for records
and ``time.monotonic`` for waiting.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from prioritizer.sim.workload import ScaledJob
from slurm_plugin.slurm.client import SlurmClient, SlurmError
from slurm_plugin.slurm.records import ACTIVE_STATES
from trainer import parse_log

BIN = Path(sys.executable).parent            # the virtualenv's bin/: dlsubmit, dlprio, dlqueue
TRAINER = Path(__file__).resolve().parent / "trainer.py"
CPUS_PER_GPU, MEM_MIB_PER_GPU = 2, 8000      # a dlcluster node: 16 cores, 64000 MiB, 8 GPUs
JOB_PREFIX = "mj"


class ReplayError(RuntimeError):
    """The live run cannot go on (a command failed, the daemon died, a timeout); one line."""


@dataclass
class Submitted:
    """One submitted job: its scaled trace job, Slurm id, submit time (epoch s) and log file."""

    job: ScaledJob
    job_id: int
    submitted_at: float
    log_path: Path
    name: str


class Progress:
    """Progress lines of one live run, each starting with ``tag`` (``[1/2 Slurm alone]``):
    one per submission, and while jobs run one every ``interval_s`` seconds with how far the run
    is (submitted, pending, running, finished of ``total``)."""

    def __init__(self, say: Callable[[str], None], tag: str, total: int, interval_s: float = 15.0) -> None:
        self.say, self.tag, self.total, self.interval_s = say, tag, total, interval_s
        self.t0 = time.monotonic()
        self.last = self.t0

    def __call__(self, line: str) -> None:
        self.say(f"{self.tag} t={time.monotonic() - self.t0:5.0f}s  {line}")

    def states(self, submitted: int, states: dict[int, str], force: bool = False) -> None:
        """A line with the counts of ``states`` (``{job_id: Slurm state}``) if ``interval_s``
        passed since the last one (or ``force``)."""
        now = time.monotonic()
        if not force and now - self.last < self.interval_s:
            return
        self.last = now
        running = sum(s in ("RUNNING", "COMPLETING") for s in states.values())
        done = sum(s not in ACTIVE_STATES for s in states.values())
        self(f"{submitted}/{self.total} submitted, {submitted - running - done} waiting, "
             f"{running} running, {done}/{self.total} finished")


def job_name(job: ScaledJob, prefix: str = JOB_PREFIX) -> str:
    """Slurm job name of a scaled job, e.g. ``mj03-u1665`` (prefix, index and Philly u_id);
    the main job's two runs use the prefixes ``slurm`` and ``dlprio``."""
    return f"{prefix}{job.index:02d}-u{job.name}"


def spec_for(job: ScaledJob, grace_s: int, step_s: float = 1.0, prefix: str = JOB_PREFIX) -> dict:
    """The PAI v2 spec (as a mapping) of one job: one instance with ``job.gpus`` GPUs, CPUs and
    memory in the node's proportion, the trainer for ``job.duration_s`` seconds as its command,
    and the checkpoint contract (USR2, ``grace_s`` seconds) in ``extras.checkpoint``."""
    command = shlex.join([sys.executable, str(TRAINER), "--total-s", f"{job.duration_s:g}",
                          "--step-s", f"{step_s:g}", "--seed", str(job.index)])
    return {
        "protocolVersion": 2,
        "name": job_name(job, prefix),
        "type": "job",
        "jobRetryCount": 0,
        "prerequisites": [{"type": "dockerimage", "name": "image", "uri": "python:3.11-slim"}],
        "taskRoles": {"train": {
            "instances": 1,
            "dockerImage": "image",
            "resourcePerInstance": {"gpu": job.gpus, "cpu": CPUS_PER_GPU * job.gpus,
                                    "memoryMB": MEM_MIB_PER_GPU * job.gpus},
            "commands": [command],
        }},
        "extras": {"checkpoint": {"signal": "USR2", "grace": grace_s}},
    }


def write_spec(job: ScaledJob, directory: Path, grace_s: int, prefix: str = JOB_PREFIX) -> Path:
    """Write the job's spec as ``directory/<name>.yaml``; return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{job_name(job, prefix)}.yaml"
    path.write_text(f"# Philly u_id {job.name}: {job.trace_gpus} GPUs, {job.trace_duration_s:g} s "
                    f"in the trace; scaled by prioritizer/sim/workload.py\n"
                    + yaml.safe_dump(spec_for(job, grace_s, prefix=prefix), sort_keys=False))
    return path


def submit(job: ScaledJob, out: Path, grace_s: int, prefix: str = JOB_PREFIX) -> Submitted:
    """Submit one job with ``dlsubmit --json``; its output goes to ``out/logs/<name>-<id>.out``.

    Raises:
        ReplayError: dlsubmit failed (its message is included).
    """
    name = job_name(job, prefix)
    spec = write_spec(job, out / "specs", grace_s, prefix)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    argv = [str(BIN / "dlsubmit"), "--json", "--checkpoint-root", str(out / "checkpoints"),
            "--output", str(out / "logs" / f"{name}-%j.out"), str(spec)]
    submitted_at = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ReplayError(f"dlsubmit {spec.name} exited {proc.returncode}: "
                          f"{(proc.stderr or proc.stdout).strip()}")
    try:
        job_id = int(json.loads(proc.stdout)["job_id"])
    except (ValueError, KeyError, TypeError):
        raise ReplayError(f"dlsubmit {spec.name}: no job id in its output {proc.stdout[:200]!r}") from None
    log = out / "logs" / f"{name}-{job_id}.out"
    return Submitted(job, job_id, submitted_at, log, name)


def daemon_config(template: Path, out: Path, snapshot: Path | None = None) -> Path:
    """Copy the demo daemon config into ``out/dlprio.yaml`` with the ledger in ``out`` and the
    public snapshot at ``snapshot`` (default ``out/snapshot.json``)."""
    data = yaml.safe_load(template.read_text()) or {}
    data["ledger_path"] = str(out / "ledger.sqlite")
    data["snapshot_path"] = str(snapshot or out / "snapshot.json")
    path = out / "dlprio.yaml"
    path.write_text(f"# written by examples/main_job.py from {template}\n"
                    + yaml.safe_dump(data, sort_keys=False))
    return path


class Child:
    """A child process in its own session (Ctrl-C reaches it only through :meth:`stop`); its
    pid is written to ``pid_path`` and removed by :meth:`stop`."""

    def __init__(self, argv: Sequence[str], log_path: Path | None, pid_path: Path) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        out = open(log_path, "ab") if log_path else None
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT if out else None,
                                     start_new_session=True)
        if out:
            out.close()
        # If this process is killed outright, whoever started it can stop the child by its pid.
        self.pid_path = pid_path
        pid_path.write_text(f"{self.proc.pid}\n")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> int | None:
        """Send ``sig``, wait up to ``timeout_s``, then kill; remove the pid file; return the
        exit status."""
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.pid_path.unlink(missing_ok=True)
        return self.proc.returncode

    def tail(self, lines: int = 5) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])


def start_daemon(config: Path, out: Path) -> Child:
    """``dlprio run --config CONFIG`` with its log in ``out/dlprio.log`` and pid in
    ``out/dlprio.pid``; raises :class:`ReplayError` if it exits at once."""
    child = Child([str(BIN / "dlprio"), "run", "--config", str(config)], out / "dlprio.log",
                  out / "dlprio.pid")
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and child.alive():
        time.sleep(0.2)
    if not child.alive():
        raise ReplayError(f"dlprio run exited {child.proc.returncode} at once: {child.tail()}")
    return child


def start_queue_view(snapshot: Path, interval_s: float, out: Path,
                     log_path: Path | None = None) -> Child:
    """``dlqueue --watch`` reading ``snapshot``: on the terminal (``log_path`` None) or into
    ``log_path`` (then it prints into a file, not over the progress lines); pid in
    ``out/dlqueue.pid``."""
    return Child([str(BIN / "dlqueue"), "--watch", "--interval", f"{interval_s:g}",
                  "--snapshot", str(snapshot)], log_path, out / "dlqueue.pid")


def wait_idle(client: SlurmClient, timeout_s: float, say: Callable[[str], None]) -> None:
    """Wait until the cluster runs no job (the replay measures an empty cluster).

    Raises:
        ReplayError: jobs are still there after ``timeout_s`` (names their ids).
    """
    deadline, told = time.monotonic() + timeout_s, False
    while True:
        busy = [j.job_id for j in client.jobs() if j.is_active]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise ReplayError(f"the cluster still has jobs {busy} after {timeout_s:g} s; "
                              "cancel them (scancel) or wait, then run again")
        if not told:
            say(f"waiting for the cluster to be idle (jobs {busy})")
            told = True
        time.sleep(2.0)


def replay(jobs: Sequence[ScaledJob], out: Path, grace_s: int, daemon: Child | None,
           say: Callable[[str], None], done: list[Submitted], prefix: str = JOB_PREFIX) -> list[Submitted]:
    """Submit every job at its scaled arrival time (relative to now), appending each to ``done``
    as soon as it is submitted (so that a caller interrupted midway can cancel them); returns
    ``done``. ``daemon`` None: a run without dlprio.

    Raises:
        ReplayError: a submission failed or the daemon died.
    """
    t0 = time.monotonic()
    for job in jobs:
        while (left := t0 + job.submit_s - time.monotonic()) > 0:
            _check_daemon(daemon)
            time.sleep(min(left, 1.0))
        sub = submit(job, out, grace_s, prefix)
        done.append(sub)
        say(f"submitted {sub.name} as job {sub.job_id}: {job.gpus} GPU(s), {job.duration_s:g} s "
            f"({len(done)}/{len(jobs)})")
    return done


def wait_finished(client: SlurmClient, subs: Sequence[Submitted], daemon: Child | None,
                  timeout_s: float, progress: Progress | None = None) -> dict[int, str]:
    """Wait until Slurm shows every job finished; return ``{job_id: final state}``. ``daemon``
    None: a run without dlprio; ``progress`` gets the states every poll.

    A job that drops out of ``squeue`` (purged after MinJobAge) counts as ``COMPLETED`` only if
    its trainer log ends with ``end reason=done``; otherwise ``GONE``.

    Raises:
        ReplayError: ``timeout_s`` passed or the daemon died.
    """
    ids = {s.job_id: s for s in subs}
    deadline = time.monotonic() + timeout_s
    while True:
        _check_daemon(daemon)
        try:
            seen = {j.job_id: j.state for j in client.jobs(job_ids=list(ids))}
        except SlurmError as exc:
            seen = None
            if time.monotonic() > deadline:
                raise ReplayError(f"Slurm does not answer: {exc}") from None
        if seen is not None:
            states = {i: seen.get(i, _gone_state(ids[i])) for i in ids}
            finished = all(s not in ACTIVE_STATES for s in states.values())
            if progress:
                progress.states(len(subs), states, force=finished)
            if finished:
                return states
        if time.monotonic() > deadline:
            running = sorted(i for i, s in (seen or {}).items() if s in ACTIVE_STATES)
            raise ReplayError(f"jobs {running} still unfinished after {timeout_s:g} s")
        time.sleep(2.0)


def _gone_state(sub: Submitted) -> str:
    events = parse_log(sub.log_path.read_text(errors="replace")) if sub.log_path.exists() else []
    done = bool(events) and events[-1]["event"] == "end" and events[-1].get("reason") == "done"
    return "COMPLETED" if done else "GONE"


def _check_daemon(daemon: Child | None) -> None:
    if daemon is not None and not daemon.alive():
        raise ReplayError(f"dlprio run died (exit {daemon.proc.returncode}): {daemon.tail()}")


def cancel(client: SlurmClient, subs: Sequence[Submitted]) -> None:
    """Cancel the given jobs (cleanup after a failure or Ctrl-C); never raises."""
    try:
        client.cancel([s.job_id for s in subs])
    except SlurmError:
        pass


def env_for_cluster(name: str | None) -> None:
    """Point ``SLURM_CONF`` at ``/etc/slurm-NAME/slurm.conf`` (``dlcluster up --name NAME``)."""
    if name and name != "dlcluster":
        os.environ["SLURM_CONF"] = f"/etc/slurm-{name}/slurm.conf"
