"""The live cluster's start-up costs, measured before the runs, and the prediction that counts them.

``dlprio simulate`` starts a job the moment the policy gives it GPUs and frees them the moment its
work is done. On a real cluster a job costs time around its work, measured here in three parts
on the idle cluster, before the runs (:func:`measure`):

* ``dispatch_s``: from the call of ``dlsubmit`` to Slurm showing the job RUNNING (the submit
  RPC, the scheduler's pass, the allocation); no GPU is held yet;
* ``launch_s``: from RUNNING to the trainer's ``start`` line (the batch script, the ``srun``
  step, the Python start-up); the GPUs are held, no step is made;
* ``teardown_s``: from the trainer's ``end`` line to Slurm no longer showing the job (the step
  and the job ending, the epilog); the GPUs are still held.

The prediction of a live run (:func:`write_trace`, :func:`shift_summary`) replays its jobs as
they were submitted (each at its own ``dlsubmit`` call, seconds after the run's first one:
``dlsubmit`` takes 0.1 s on an idle machine and far more on a loaded one, so a burst reaches
Slurm over seconds, not at once), each
arriving ``dispatch_s`` later and holding its GPUs ``launch_s + teardown_s`` longer than its
work; a JCT counted as the live run counts it (``dlsubmit`` called to the trainer's ``end``
line) is then the simulated one plus ``dispatch_s - teardown_s``. What stays unmodeled: the
start-up of a restart after a requeue (each costs ``launch_s`` again; the checkpoint overhead
and requeue delay of the config are modeled) and start-up slowing down while many jobs start at
once on a small machine.

Probes: :data:`PROBES` jobs of 1 GPU and :data:`PROBE_S` seconds of the same trainer, submitted
with ``dlsubmit`` one after the other; Slurm is polled every :data:`POLL_S` seconds (each
time the midpoint of the ``squeue`` call counts), and each part is the median over the probes.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import replay
import report
from prioritizer.sim.workload import ScaledJob, write_tiresias_csv
from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin.slurm.records import ACTIVE_STATES

PROBES, PROBE_S, POLL_S = 3, 2.0, 0.1
PROBE_PREFIX = "probe"
HOLDING = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})


@dataclass(frozen=True)
class Startup:
    """The start-up costs (seconds, medians over ``probes`` probe jobs; module doc)."""

    dispatch_s: float = 0.0
    launch_s: float = 0.0
    teardown_s: float = 0.0
    probes: int = 0

    @property
    def jct_shift_s(self) -> float:
        """What a simulated JCT (arrival to GPUs freed) lacks of a live one (``dlsubmit``
        called to the trainer's ``end`` line)."""
        return self.dispatch_s - self.teardown_s

    def as_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        return (f"dispatch {self.dispatch_s:.1f} s (dlsubmit to RUNNING), launch "
                f"{self.launch_s:.1f} s (RUNNING to the trainer's first step), teardown "
                f"{self.teardown_s:.1f} s (its last step to the job's end); medians of "
                f"{self.probes} probe jobs")


class ProbeError(RuntimeError):
    """A probe job did not run as expected (one line)."""


def _state(client: SlurmClient, job_id: int) -> tuple[str | None, float]:
    """The job's state (None: Slurm no longer shows it) and the moment it was read (epoch s,
    the midpoint of the ``squeue`` call)."""
    before = time.time()
    jobs = client.jobs(job_ids=[job_id])
    return (jobs[0].state if jobs else None), (before + time.time()) / 2


def probe_once(client: SlurmClient, out: Path, grace_s: int, index: int,
               timeout_s: float = 120.0) -> tuple[float, float, float]:
    """One probe job: ``(dispatch_s, launch_s, teardown_s)``.

    Raises:
        ProbeError: it did not run once to the end within ``timeout_s``.
        replay.ReplayError: ``dlsubmit`` failed; SlurmError: Slurm did not answer.
    """
    job = ScaledJob(index, "probe", 1, 0.0, PROBE_S, 1, 0.0, PROBE_S)
    sub = replay.submit(job, out, grace_s, PROBE_PREFIX)
    deadline = time.monotonic() + timeout_s
    running_at = gone_at = None
    try:
        while gone_at is None:
            if time.monotonic() > deadline:
                raise ProbeError(f"probe job {sub.job_id} did not end within {timeout_s:g} s")
            state, at = _state(client, sub.job_id)
            if running_at is None and state in HOLDING:
                running_at = at
            if state is None or state not in ACTIVE_STATES:
                gone_at = at
                break
            time.sleep(POLL_S)
    finally:
        if gone_at is None:
            client.cancel([sub.job_id])
    attempts = report.outcomes([sub], {}, {})[0].attempts
    if running_at is None or len(attempts) != 1 or attempts[0].end_reason != "done" or \
            attempts[0].end is None:
        raise ProbeError(f"probe job {sub.job_id} did not run its {PROBE_S:g} s once to the end "
                         f"(see {sub.log_path})")
    start, end = attempts[0].start, attempts[0].end
    return (max(running_at - sub.submitted_at, 0.0), max(start - running_at, 0.0),
            max(gone_at - end, 0.0))


def measure(client: SlurmClient, out: Path, grace_s: int, say: Callable[[str], None],
            probes: int = PROBES) -> Startup:
    """The cluster's :class:`Startup`, from ``probes`` probe jobs run one after the other on the
    idle cluster (their specs and logs in ``out``)."""
    parts = [probe_once(client, out, grace_s, i) for i in range(probes)]
    found = Startup(*(statistics.median(p[k] for p in parts) for k in range(3)), probes)
    say(f"  start-up, measured on the idle cluster: {found.line()}")
    return found


def write_trace(subs: Sequence[replay.Submitted], startup: Startup, path: Path) -> None:
    """The jobs of one live run as the simulator replays them (Tiresias CSV, ``job_id`` the
    scaled job's index): each arriving at its ``dlsubmit`` call, seconds after the run's first
    one, plus ``dispatch_s``, and running its work plus ``launch_s + teardown_s``."""
    t0 = min(s.submitted_at for s in subs)
    write_tiresias_csv([dataclasses.replace(
        s.job, submit_s=round(s.submitted_at - t0 + startup.dispatch_s, 3),
        duration_s=round(s.job.duration_s + startup.launch_s + startup.teardown_s, 3))
        for s in sorted(subs, key=lambda s: s.submitted_at)], path)


#: summary keys that a constant shift of every JCT moves by that shift
SHIFTED = ("avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s")


def shift_summary(summary: dict, startup: Startup) -> dict:
    """A ``dlprio simulate --json`` summary of :func:`write_trace`'s trace as the live run
    counts it: JCTs and makespan plus ``jct_shift_s``; the queueing delay (JCT less the work)
    plus ``dispatch_s + launch_s``."""
    out = dict(summary)
    for key in SHIFTED:
        if isinstance(out.get(key), (int, float)):
            out[key] += startup.jct_shift_s
    if isinstance(out.get("avg_queueing_delay_s"), (int, float)):
        out["avg_queueing_delay_s"] += startup.dispatch_s + startup.launch_s
    return out
