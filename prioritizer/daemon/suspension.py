"""Time suspended: the seconds a run holds its allocation without running, which are no service.

Part of the observe step: :func:`prioritizer.daemon.observe.record_units` asks
:func:`suspension` of each open run it sees, and stores the answer in the run's ledger row
(:class:`prioritizer.daemon.ledger.Run`: ``suspended_s``, ``suspended_at``, ``stopped_s``).
A job suspended by ``scontrol suspend`` (state SUSPENDED) or stopped by SIGSTOP (STOPPED:
"execution has been stopped with SIGSTOP signal. CPUS have been retained", squeue(1)) keeps its
allocation, so its run stays open, but it does not run: Tiresias' attained service (NSDI'19
section 3, GPUs × seconds run) counts none of that time.

Slurm's own figure comes first. squeue's ``TimeUsed``
(:attr:`slurm_plugin.slurm.records.Job.time_used_s`, the same field on 22.05, 24.11 and 26.05) is
the run's seconds less the seconds suspended: the run time before the last suspension
(scontrol(1) ``PreSusTime``), plus the time since the last resume (``SuspendTime``) unless the
job is suspended now. So the seconds suspended are ``now - start - TimeUsed`` (whole seconds, as
Slurm counts them), and a suspension the daemon did not see (it was down, or the job was
suspended and resumed between two cycles) is still left out. Slurm counts the time of a
STOPPED job as used: that time is the daemon's own sighting, from the first cycle that shows
the job STOPPED to the last that does (``stopped_s``, added to Slurm's figure): less than the
stop by under two cycles, never more, however long the daemon was down when it ended.
Where Slurm gives no time used (``INVALID``), the daemon's sightings stand for both.
Times are epoch seconds, durations seconds.
"""

from __future__ import annotations

import math

from prioritizer.daemon.ledger import Run

#: States of a unit that holds its allocation but does not run (squeue(1) "JOB STATE CODES").
SUSPENDED_STATES = frozenset({"SUSPENDED", "STOPPED"})

#: ``(suspended_s, suspended_at, stopped_s)`` of a run, as :class:`Run` holds them.
Suspension = tuple[float, float | None, float]


def suspension(run: Run, state: str, was: str, time_used: float | None,
               now: float) -> Suspension:
    """The time suspended of the open ``run`` of a unit that squeue shows in ``state`` at
    ``now`` (or that ended at ``now``, in its final state), with Slurm's ``time_used`` seconds
    of this run (None: Slurm gives none); ``was``: the unit's state the ledger recorded at the
    previous cycle. Returns the run's values unchanged when nothing changed (no write)."""
    s, at, stopped = run.suspended_s, run.suspended_at, run.stopped_s
    # While a run is suspended or stopped, ``s`` holds the seconds it lost before that and
    # ``at`` when it began; otherwise ``s`` is the whole and ``at`` None.
    if state == "STOPPED":   # a stop: the daemon's own sighting, from its first cycle on
        return (s, now if at is None else at, stopped)
    if at is not None and (was == "STOPPED" or (time_used is None and state != "SUSPENDED")):
        # a sighting that has ended (a stop, or a suspension while Slurm gives no time used):
        # it lasted to the last cycle that saw it (``run.last_seen``), never to ``now``: after
        # a daemon outage the job may have run again for hours
        seen = max(run.last_seen - at, 0.0)
        s, at = s + seen, None
        if was == "STOPPED":
            stopped += seen
    if time_used is None:    # no figure from Slurm: the daemon's sightings alone
        return (s, now if state == "SUSPENDED" and at is None else at, stopped)
    # Slurm's figure: the seconds suspended in all (stops count as used there, so add them)
    lost = max(math.floor(now) - run.start - time_used, 0.0) + stopped
    if state != "SUSPENDED":
        return (lost, None, stopped)
    # suspended now: Slurm's time used stands still at the seconds this run has run, plus the
    # stops, so the suspension began once the run had run them and lost ``s`` before
    s = min(s, lost)
    return (s, run.start + (time_used - stopped) + s, stopped)
