"""One job as the incremental scheduler tracks it (:class:`Tracked`), and the ``JobView``
the rules see of it at a given time. Units: seconds, GPU·seconds. No I/O.
"""

from __future__ import annotations

from typing import Any

from prioritizer.policy.model import JobPhase, JobView, QueueState

PENDING, RUNNING = JobPhase.PENDING, JobPhase.RUNNING


class Tracked:
    """One job as the scheduler tracks it (mutable; owned by the :class:`Scheduler`).

    ``phase`` is ``pending``, ``running`` or ``grace`` (holding GPUs, checkpoint signal
    sent). Service: ``closed_gpu_s``/``closed_s`` over finished runs, plus
    ``gpus × (now - run_start)`` while holding GPUs. ``work_left``: oracle seconds of work
    left at the start of the current run (None without an oracle).
    """

    __slots__ = ("job_id", "shape", "gpus", "submit", "preemptible", "work_left", "phase",
                 "closed_gpu_s", "closed_s", "run_start", "guard", "last_run_s", "last_run_end",
                 "queue", "entry", "base", "eligible", "nodes", "names", "entry_key",
                 "level", "lifted", "where", "epoch", "state", "crossing", "first_start",
                 "preempts")

    def __init__(self, job_id: int, shape: tuple[int, ...], submit: float,
                 work_left: float | None, preemptible: bool, preempts: bool = True) -> None:
        self.job_id, self.shape, self.gpus, self.submit = job_id, shape, sum(shape), submit
        self.preemptible, self.work_left = preemptible, work_left
        #: False: while waiting it preempts no one (``find_preemptions``' ``lifted``)
        self.preempts = preempts
        self.phase = "pending"
        self.closed_gpu_s = self.closed_s = self.run_start = self.last_run_s = 0.0
        #: the current run's ``victims.guard_start``: its ``min_run_s`` guard counts from here
        self.guard = 0.0
        self.last_run_end: float | None = None
        self.queue: int | None = None
        self.entry: float | None = None
        self.base = 0.0
        self.eligible: float | None = None
        self.nodes: tuple[int, ...] = ()
        self.names: tuple[str, ...] = ()
        self.entry_key: tuple[Any, int] | None = None   # (sort key, id) while indexed
        self.level = 0.0                                  # preemption level while pending
        self.lifted = False                               # Policy.lifted while pending
        self.where = ""                                   # "order" | "waiting" | ""
        self.epoch = 0                                    # invalidates stale heap entries
        self.state: QueueState | None = None              # last state (reused while equal)
        #: (epoch, now, next_queue_change) computed by the scheduler while holding GPUs
        self.crossing: tuple[int, float, float | None] | None = None
        self.first_start: float | None = None             # start of the first run

    def service(self, now: float) -> tuple[float, float, float | None]:
        """Attained GPU·s, attained s and oracle duration s at ``now`` (as the simulator has
        always computed them: progress stops during a checkpoint's grace)."""
        if self.phase == "pending":
            duration = None if self.work_left is None else self.closed_s + self.work_left
            return self.closed_gpu_s, self.closed_s, duration
        ran = now - self.run_start
        if self.work_left is None:
            duration = None
        else:
            left = self.work_left if self.phase == "grace" else self.work_left - ran
            duration = self.closed_s + ran + left
        return self.closed_gpu_s + ran * self.gpus, self.closed_s + ran, duration

    def view(self, now: float) -> JobView:
        """The job as ``policy.decide`` sees it at ``now`` (a ``JobView`` equal to the one
        its constructor would build, made without the frozen dataclass ``__init__``: a
        replay makes about a hundred thousand)."""
        gpu_s, run_s, duration = self.service(now)
        view = _new(JobView)
        if self.phase == "pending":
            _set(view, "__dict__", {
                "job_id": self.job_id, "phase": PENDING, "gpus_per_node": self.shape,
                "submit_time": self.submit, "attained_gpu_s": gpu_s, "attained_s": run_s,
                "service_base_gpu_s": self.base, "queue": self.queue,
                "queue_entry_time": self.entry, "run_start": None,
                "last_run_s": self.last_run_s, "last_run_end": self.last_run_end,
                "preemptible": self.preemptible, "duration_s": duration,
                "eligible_time": self.eligible, "nodes": (), "releasing": False,
                "tier": 0, "first_start": self.first_start, "partitions": ()})
        else:
            _set(view, "__dict__", {
                "job_id": self.job_id, "phase": RUNNING, "gpus_per_node": self.shape,
                "submit_time": self.submit, "attained_gpu_s": gpu_s, "attained_s": run_s,
                "service_base_gpu_s": self.base, "queue": self.queue,
                "queue_entry_time": self.entry, "run_start": self.run_start,
                "last_run_s": self.last_run_s, "last_run_end": self.last_run_end,
                "preemptible": self.preemptible, "duration_s": duration,
                "eligible_time": None, "nodes": self.names,
                "releasing": self.phase == "grace", "tier": 0, "first_start": self.first_start,
                "partitions": ()})
        return view

    def restated(self, view: JobView) -> JobView:
        """What :meth:`view` gives once the job's queue state is recorded (``queue``,
        ``entry``, ``base``), at the ``now`` of ``view`` (this job's view from before):
        ``view`` with those three fields replaced."""
        out = _new(JobView)
        _set(out, "__dict__", {**view.__dict__, "queue": self.queue,
                               "queue_entry_time": self.entry,
                               "service_base_gpu_s": self.base})
        return out


_new, _set = object.__new__, object.__setattr__
