"""Preemption as a small state machine over ledger intents: intent → signal → grace → requeue.

Tiresias preempts the jobs the policy names (NSDI'19 section 4; docs/design.md,
"Policy rules and their sources"). Slurm has no "checkpoint then requeue" act for us, so the daemon does it in
steps, each written to the ledger *before* it is done (docs/design.md, code rule 3):

1. ``intent`` written (job, waiter, signal and grace from the job's ``dl:v1`` marker, grace
   capped by ``max_grace_s``, the job's Slurm restart count);
2. job with the marker: ``signal_at``/``deadline`` written, then ``scancel --signal=SIG
   --batch`` (the batch-shell trap; docs/design.md, "Signals, preemption, requeue"); a job without it skips this step
   (an untrapped USR2 would kill it);
3. at the deadline (or at once without a marker): ``requeue_at`` written, the victim
   *lowered first* (its SiteFactor/priority set to its own, lower queue's value on the running
   job; in mode partition ``requeuehold`` → move to its queue's partition → ``release``), so it
   can never come back ahead of the waiter, then ``scontrol requeue
   incomplete`` (hetjobs through their leader id): Slurm requeues only a job that has not
   completed, so a job that ended just before the call is not run again (22.05 scontrol(1),
   "requeue ... Incomplete"). Slurm answers rc 0 either way: the job is read once
   after, and the intent finishes ``requeued`` or ``ended before requeue``.

Slurm may refuse the signal or the requeue (``--no-requeue`` job: "Requested operation is
presently disabled", an interactive allocation, a job gone): the intent finishes ``requeue
refused: <Slurm's text>``, a ``preempt_refused`` event is logged, the preemption is *not*
counted, and the job is never chosen as a victim again during this run of it
(:meth:`prioritizer.daemon.ledger.Ledger.refused_victims`). A signal refused because
the job is already completing is no refusal: the job frees its GPUs by itself. Slurm says so
("Job/step already completing or completed") or, once the batch step is gone, answers
"Invalid job id specified"; on any refused signal the job is read once, and a job Slurm shows
COMPLETING, finished or gone counts as completing. The intent finishes ``ended before signal: <Slurm's
text>``, not counted as a preemption, and until the job runs again the snapshot gives it as
releasing its GPUs (:meth:`prioritizer.daemon.ledger.Ledger.completing_victims`), so the
waiter gets no second victim for them (nor does it while Slurm shows the job COMPLETING,
whatever scancel said: :func:`prioritizer.daemon.observe.build_snapshot`).

A signalled victim whose waiter Slurm shows running when the victim's requeue is due (other
GPUs came free in the grace time) is not requeued: the intent finishes ``waiter started``, not
counted, and the victim runs on (it has written a checkpoint; the contract lets it keep
running); ``waiter ended`` the same when the waiter has ended (it ran and ended, or was
cancelled).
A job that ended, or was requeued by someone else, before its requeue finishes the intent with
no further act: ``ended in grace`` once signalled and ended before its grace deadline
(counted: it was told to checkpoint), ``ended before requeue`` (not counted) when it ended
at or after the deadline, before a requeue Slurm did not answer or a stopped daemon did not
send went out, ``not
running`` when it had stopped running (requeued, completing, ended) before its signal or,
without a marker, its requeue was sent: nothing was sent to it, so it is not counted as a
preemption. A job someone suspended (``scontrol suspend``, or SIGSTOP) before its signal or
its requeue was due finishes ``suspended``, not counted, nothing more sent: suspended jobs
are no victims, and a suspended job requeued stays held (JobHeldAdmin) until someone releases
it. A daemon killed anywhere resumes open intents on restart exactly once: a
requeue whose ``requeue_at`` was written is taken as done when Slurm shows a higher restart
count or the job pending; a signal whose ``signal_at`` was written is never sent twice.

Test-only fault point: ``DLPRIO_FAULT_AFTER=<step>`` (``intent``, ``signal``,
``requeue-mark``, ``requeue``) makes the daemon SIGKILL itself right after that step, so
crash tests are deterministic. It is unset (off) in production; never set it on a real site.
"""

from __future__ import annotations

import logging
import os
import signal as _signal
from collections.abc import Mapping
from typing import Any

from prioritizer.daemon import act
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.log import CycleAdapter, event
from prioritizer.daemon.ledger import Intent, Ledger
from prioritizer.policy.model import JobPhase, Preemption
from prioritizer.daemon.observe import NO_SIGNAL_STATES, Observation, Unit
from slurm_plugin.slurm.client import JobUnknown, SlurmClient, SlurmError, SlurmRefused, SlurmUnreachable

FAULT_ENV = "DLPRIO_FAULT_AFTER"
#: Slurm's text (lower case) when ``scancel --signal`` finds the job completing or completed
#: (ESLURM_ALREADY_DONE: "Job/step already completing or completed").
ALREADY_COMPLETING = "already completing"
FAULT_STEPS = ("intent", "signal", "requeue-mark", "requeue")
#: The outcome of an intent whose victim was no longer running when its first act was due.
NOT_RUNNING = "not running"
#: The outcome of an intent whose victim Slurm shows suspended or stopped when an act is due.
SUSPENDED_VICTIM = "suspended"
#: The outcome of an intent whose waiter started elsewhere before its victim's requeue was due.
WAITER_STARTED = "waiter started"
#: The outcome of an intent whose waiter has ended when its victim's requeue is due (it
#: started elsewhere and ended, or was cancelled): squeue shows it ended, or no longer lists it.
WAITER_ENDED = "waiter ended"


def fault_point(step: str) -> None:
    """TEST ONLY: SIGKILL this process when ``$DLPRIO_FAULT_AFTER`` names ``step``."""
    if os.environ.get(FAULT_ENV) == step:
        os.kill(os.getpid(), _signal.SIGKILL)


class Preemptor:
    """Starts and advances preemptions; one per daemon (see module doc)."""

    def __init__(self, client: SlurmClient, ledger: Ledger, cfg: DaemonConfig,
                 log: CycleAdapter) -> None:
        self.client = client
        self.ledger = ledger
        self.cfg = cfg
        self.log = log

    def start(self, preemptions: tuple[Preemption, ...], obs: Observation,
              rules: Mapping[int, str] | None = None) -> list[int]:
        """Write an intent for each victim that has none open (``rules``: per waiter, the
        tenant rule that chose its victims, kept with the intent and logged). Returns the new
        victims' ids."""
        rules = rules or {}
        busy = {i.job_id for i in self.ledger.open_intents()}
        started = []
        for p in preemptions:
            for victim in p.victims:
                unit = obs.units.get(victim)
                if victim in busy or unit is None or unit.phase is not JobPhase.RUNNING:
                    continue
                contract = unit.contract
                grace = min(float(contract.grace_s), self.cfg.max_grace_s) if contract else 0.0
                rule = rules.get(p.waiter)
                self.ledger.add_intent(victim, p.waiter, contract.signal if contract else None,
                                       grace, unit.restart_count, obs.now, rule)
                busy.add(victim)
                started.append(victim)
                fields: dict[str, Any] = {"waiter": p.waiter,
                                          "signal": contract.signal if contract else "none",
                                          "grace_s": grace}
                if rule:
                    fields["rule"] = rule
                event(self.log, "preempt_intent", victim, **fields)
                fault_point("intent")
        return started

    def progress(self, obs: Observation, lowered: Mapping[int, str] | None = None) -> list[int]:
        """Advance every open intent by what is due at ``obs.now``. Returns requeued ids.

        ``lowered``: per victim, the value (``site_factor:N``, ``priority:N``,
        ``partition:P``; :func:`prioritizer.daemon.act.victim_values`) it is given before its
        requeue; a victim without one is requeued as it is.
        Raises SlurmUnreachable (the step is rolled back in the ledger and retried later).
        """
        self._lowered = lowered or {}
        self._units = obs.units
        requeued = []
        for intent in self.ledger.open_intents():
            if self._step(intent, obs):
                requeued.append(intent.job_id)
        return requeued

    _lowered: Mapping[int, str] = {}
    _units: Mapping[int, Unit] = {}

    def _named(self, job_id: int) -> int | str:
        """What Slurm's commands name for the victim (:attr:`Unit.update_target`: the array
        task that carries its array's id as ``ARRAYID_TASKID``, since the id alone names the
        whole array); its id when this cycle did not see it."""
        unit = self._units.get(job_id)
        return job_id if unit is None else unit.update_target

    def next_due(self) -> float | None:
        """When (epoch s) the next act of an open intent is due: the earliest end of a
        signalled victim's grace not yet requeued; None when none is. The daemon's loop wakes
        for it, so a grace lasts what the marker gives (at most ``max_grace_s``), not up to a
        whole cycle more."""
        return min((i.deadline for i in self.ledger.open_intents()
                    if i.deadline is not None and i.requeue_at is None), default=None)

    def _step(self, i: Intent, obs: Observation) -> bool:
        unit = obs.units.get(i.job_id)
        gone = unit is None or unit.restart_count > i.restart_count or unit.phase is not JobPhase.RUNNING
        if i.requeue_at is not None and gone:
            self._finish(i, obs.now, "requeued", recovered=True)
            return False
        if gone and i.signal_at is not None:
            if self._ended_after_grace(i, unit):
                # the requeue was due (Slurm did not answer, the daemon was down) and the job
                # finished by itself before it went out: as if just before the requeue
                self._finish(i, obs.now, "ended before requeue", uncount=True)
            else:
                self._finish(i, obs.now, "ended in grace")
            return False
        if gone:   # nothing was sent: requeued by someone else, completing or ended before
            self._finish(i, obs.now, NOT_RUNNING, uncount=True)
            return False
        if unit is not None and unit.state in NO_SIGNAL_STATES:
            # suspended (or stopped) by someone else before its signal or requeue: no victim
            # (a requeue would leave it held, JobHeldAdmin, with no one to release it)
            self._finish(i, obs.now, SUSPENDED_VICTIM, uncount=True)
            return False
        if i.signal is not None and i.signal_at is None:
            self._signal(i, obs.now)
            return False
        if i.signal is None or (i.deadline is not None and obs.now >= i.deadline):
            if i.waiter is not None and i.signal_at is not None:
                waiter = obs.units.get(i.waiter)
                phase = None if waiter is None else waiter.phase
                # GPUs came free elsewhere in the grace time (a job ended) and the waiter
                # started on them, or it ended (it ran, or was cancelled): the requeue would
                # only idle the victim's GPUs and lose its work since the checkpoint; it runs on
                if phase is not JobPhase.PENDING:
                    self._finish(i, obs.now, WAITER_STARTED if phase is JobPhase.RUNNING
                                 else WAITER_ENDED, uncount=True)
                    return False
            return self._requeue(i, obs.now)
        return False

    def _signal(self, i: Intent, now: float) -> None:
        assert i.signal is not None
        self.ledger.mark_signal(i.id, now, now + i.grace_s)
        try:
            self.client.signal(self._named(i.job_id), i.signal, batch_only=True)
        except SlurmUnreachable:
            self.ledger.mark_signal(i.id, None, None)
            raise
        except (JobUnknown, SlurmRefused) as exc:
            if ALREADY_COMPLETING in exc.message.lower() or self._ending(i):
                # it frees its GPUs by itself
                self._finish(i, now, f"ended before signal: {exc.message}", uncount=True)
                return
            self._refused(i, now, f"signal refused: {exc.message}")
            return
        event(self.log, "preempt_signal", i.job_id, signal=i.signal, deadline=now + i.grace_s)
        fault_point("signal")

    def _requeue(self, i: Intent, now: float) -> bool:
        self.ledger.mark_requeue(i.id, now)
        fault_point("requeue-mark")
        field, _, arg = self._lowered.get(i.job_id, "").partition(":")
        try:
            if field and field != "partition":
                self._lower(i.job_id, field, arg)
            self.client.requeue(self._named(i.job_id), incomplete=True, hold=field == "partition")
        except SlurmUnreachable:
            self.ledger.mark_requeue(i.id, None)
            raise
        except (JobUnknown, SlurmRefused) as exc:
            self._refused(i, now, f"requeue refused: {exc.message}")
            return False
        if field == "partition":
            try:
                self._move_and_release(i.job_id, arg)
            except SlurmUnreachable as exc:   # requeued all the same; the next cycle moves it
                event(self.log, "lower_refused", i.job_id, logging.WARNING,
                      value=f"partition:{arg}", slurm=exc.message)
        fault_point("requeue")
        if self._ended_before(i):
            self._finish(i, now, "ended before requeue", uncount=True)
            return False
        self._finish(i, now, "requeued")
        return True

    def _move_and_release(self, job_id: int, partition: str) -> None:
        """Mode partition, after ``requeuehold``: move the held victim, then release it. If
        Slurm stops answering in between, the release is still tried; a job left held is
        logged (``victim_left_held``) for the operator (``scontrol release JOB``)."""
        try:
            self._lower(job_id, "partition", partition)
        finally:
            try:
                self.client.release([self._named(job_id)])
            except SlurmError as exc:
                event(self.log, "victim_left_held", job_id, logging.ERROR, slurm=exc.message,
                      fix=f"scontrol release {self._named(job_id)}")

    def _lower(self, job_id: int, field: str, arg: str) -> None:
        """Give the victim its lowered value; a refusal is logged, the requeue goes on."""
        try:
            act.send(self.client, field, [self._named(job_id)], arg)
        except (JobUnknown, SlurmRefused) as exc:
            event(self.log, "lower_refused", job_id, logging.WARNING, value=f"{field}:{arg}",
                  slurm=exc.message)
            return
        with self.ledger.transaction():
            self.ledger.set_applied([job_id], f"{field}:{arg}")
        event(self.log, "victim_lowered", job_id, value=f"{field}:{arg}")

    def _ending(self, i: Intent) -> bool:
        """After a refused signal: True when Slurm shows the job (its leader) of the same
        run COMPLETING or finished, or no longer knows it. ``scancel --signal --batch`` on a
        job that is completing answers "already completing" or, once the batch step is gone,
        "Invalid job id specified", by release and by moment: the job's state decides, not the
        wording."""
        try:
            jobs = [j for j in self.client.jobs(job_ids=[i.job_id]) if j.unit_id == i.job_id]
        except SlurmError:
            return False    # unknown: refused, as Slurm said
        lead = min(jobs, key=lambda j: j.het_job_offset, default=None)
        return (lead is None or lead.restart_count > i.restart_count
                or lead.state == "COMPLETING" or not lead.is_active)

    def _ended_after_grace(self, i: Intent, unit: Unit | None) -> bool:
        """A signalled victim no longer running: True when it ended with the restart count
        it had and at or after its grace deadline (Slurm's end time while squeue shows the
        job, else the end of the ledger's run of it that holds the signal); False when it
        ended in grace, was requeued by someone else, or its end is not known."""
        if i.deadline is None:
            return False
        if unit is not None:
            if unit.restart_count > i.restart_count or unit.phase is not None:
                return False
            end = unit.end_time
        else:
            ends = [r.end for r in self.ledger.runs(i.job_id)
                    if r.start <= (i.signal_at or 0.0) and r.end is not None
                    and r.end_source != "requeue"]
            end = max(ends, default=None)
        return end is not None and end >= i.deadline

    def _ended_before(self, i: Intent) -> bool:
        """After ``requeue incomplete``: True when Slurm shows the job finished with the
        restart count it had (the requeue found it completed and did nothing)."""
        try:
            jobs = [j for j in self.client.jobs(job_ids=[i.job_id]) if j.unit_id == i.job_id]
        except SlurmError:
            return False    # unknown: the next cycle's observe sees what happened
        lead = min(jobs, key=lambda j: j.het_job_offset, default=None)
        return (lead is not None and lead.restart_count <= i.restart_count
                and not lead.is_active)

    def _refused(self, i: Intent, now: float, outcome: str) -> None:
        """Slurm refused the act: an event with its reason, not a preemption (module doc)."""
        event(self.log, "preempt_refused", i.job_id, logging.WARNING, reason=outcome,
              waiter=i.waiter)
        self._finish(i, now, outcome, uncount=True)

    def _finish(self, i: Intent, now: float, outcome: str, recovered: bool = False,
                uncount: bool = False) -> None:
        self.ledger.finish_intent(i.id, now, outcome, uncount=uncount)
        event(self.log, "preempt_done", i.job_id, outcome=outcome, waiter=i.waiter,
              **({"recovered": True} if recovered else {}))
