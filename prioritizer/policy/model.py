"""Input and output records of the pure policy (``prioritizer.policy.decide.decide``).

This is the one interface the daemon (``dlprio run``) and the simulator (``dlprio simulate``)
share (docs/design.md, "Architecture"; code rule 1). Everything here is plain, frozen
data: no Slurm, no clock, no I/O. Units: seconds for times and durations (epoch seconds on a
cluster, trace seconds in the simulator), GPU·seconds for attained service.

Shapes
------
* A job asks for ``gpus_per_node``: one entry per node it needs, e.g. ``(8, 8)`` for a
  2-node × 8-GPU gang job, ``(2,)`` for a 2-GPU job, ``(8, 2)`` for a heterogeneous job
  whose components ask 8 and 2 GPUs on distinct nodes. The policy places such a job only
  where every entry fits on a distinct node (gang: all at once or not at all).
* A node has ``gpus_total`` GPUs of which ``gpus_free`` are not allocated to running jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class JobPhase(str, Enum):
    """What the policy needs to know of a job's Slurm state."""

    PENDING = "PENDING"   # waiting to start (including requeued jobs waiting out BeginTime)
    RUNNING = "RUNNING"   # holds its GPUs (also in a checkpoint's grace, and while completing)


@dataclass(frozen=True)
class NodeView:
    """One node: ``gpus_total`` and ``gpus_free`` in GPUs; ``partitions``: the partitions
    it is in (empty: not known, e.g. the simulator's nodes; see ``policy.pools``)."""

    name: str
    gpus_total: int
    gpus_free: int
    partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobView:
    """One schedulable unit (a hetjob is one unit, keyed by its leader's id).

    Attributes:
        job_id: Slurm job id (hetjob leader id); in the simulator the trace row's id.
        phase: PENDING or RUNNING.
        gpus_per_node: GPUs needed on each distinct node (see module doc).
        submit_time: epoch/trace seconds when the job was submitted.
        attained_gpu_s: total attained service, GPU·s, summed over all runs (2D: GPUs × s).
        attained_s: total run time in seconds over all runs (used by the 1D ``las`` policy).
        service_base_gpu_s: attained service at the job's last promotion (0 if never promoted);
            queue thresholds apply to ``attained_gpu_s - service_base_gpu_s`` (Tiresias
            resets the service it counts for queueing when it promotes a starving job).
        queue: the queue level the driver last recorded (0 = highest); None for a new job.
        queue_entry_time: seconds when the job entered ``queue`` (FIFO key inside a queue);
            None for a new job (the policy then uses ``submit_time``).
        run_start: start of the current run if RUNNING, else None.
        last_run_s: length in seconds of the job's last finished run (0 if it never ran).
        last_run_end: end of the last run (None if it never ran); waiting time since the last
            run is ``now - (last_run_end or submit_time)``.
        preemptible: False for jobs the site exempts or that cannot be requeued.
        duration_s: oracle run time in seconds (``srtf`` only; None on a real cluster).
        eligible_time: earliest time a PENDING job may start (Slurm's BeginTime after a
            requeue); None = now. The policy orders such a job but neither fits it nor
            preempts for it before then.
        nodes: names of the nodes a RUNNING job occupies, aligned with ``gpus_per_node``
            (``nodes[i]`` hosts ``gpus_per_node[i]``); empty for PENDING jobs. Preemption
            frees exactly these GPUs, so a running job without it is never a victim.
        releasing: RUNNING job whose GPUs are about to be freed without anyone choosing a
            victim: its preemption is in flight (intent written, checkpoint signal sent,
            grace running, requeue sent) or it is ending on its own (Slurm shows it
            COMPLETING). The policy counts its GPUs as coming free for the waiters (a waiter
            they cover reserves them instead of preempting) and never chooses it as a victim.
        tier: the ``PriorityTier`` of the job's partition (slurm.conf(5); the highest of its
            partitions while pending). Slurm orders pending jobs by tier before priority, so
            the policy orders by tier first, preempts only jobs of the waiter's tier or lower,
            and a waiter preempts nothing while a job of a higher tier is blocked before it
            (that job would take the freed GPUs). 0 in the simulator.
        first_start: start of the job's first run (None if it never ran); with
            ``attained_s`` and ``run_start`` it gives the seconds a job spent without GPUs
            since then (``PolicyConfig.requeue_guard``).
        partitions: the partitions the job may run in (squeue's: the one of a running job,
            the list a pending one was submitted with); it is placed, and preempts, only on
            nodes of its pool (``policy.pools``). Empty: any node (the simulator).
    """

    job_id: int
    phase: JobPhase
    gpus_per_node: tuple[int, ...]
    submit_time: float
    attained_gpu_s: float = 0.0
    attained_s: float = 0.0
    service_base_gpu_s: float = 0.0
    queue: int | None = None
    queue_entry_time: float | None = None
    run_start: float | None = None
    last_run_s: float = 0.0
    last_run_end: float | None = None
    preemptible: bool = True
    duration_s: float | None = None
    eligible_time: float | None = None
    nodes: tuple[str, ...] = ()
    releasing: bool = False
    tier: int = 0
    first_start: float | None = None
    partitions: tuple[str, ...] = ()

    @property
    def num_gpus(self) -> int:
        """Total GPUs of the job (sum over its nodes)."""
        return sum(self.gpus_per_node)

    def with_service(self, attained_gpu_s: float, attained_s: float,
                     duration_s: float | None) -> JobView:
        """This view with new attained service (GPU·s, s) and oracle duration (s): what a
        running job's view changes between decisions. Equal to ``dataclasses.replace`` with
        those fields, built by copying the field dict instead of re-running the frozen
        dataclass ``__init__`` (a replay rebuilds millions: about 4 µs each that way)."""
        fields = dict(self.__dict__)
        fields["attained_gpu_s"], fields["attained_s"] = attained_gpu_s, attained_s
        fields["duration_s"] = duration_s
        other = object.__new__(type(self))
        object.__setattr__(other, "__dict__", fields)
        return other


@dataclass(frozen=True)
class Snapshot:
    """Everything the policy sees at one decision: nodes and managed jobs."""

    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...]


@dataclass(frozen=True)
class QueueState:
    """A job's place after a decision; the driver persists it (ledger or simulator state).

    ``reason`` is a short human string (``"new"``, ``"demoted: 3300 GPU·s >= 3250"``,
    ``"promoted: waited 900 s >= 8 x 100 s"``) that feeds logs and ``dlprio explain``.
    """

    job_id: int
    queue: int
    queue_entry_time: float
    service_base_gpu_s: float
    changed: bool
    reason: str


@dataclass(frozen=True)
class Preemption:
    """Victims (RUNNING jobs) whose GPUs, once freed, let ``waiter`` start."""

    waiter: int
    victims: tuple[int, ...]


@dataclass(frozen=True)
class Decisions:
    """Output of one decision.

    Attributes:
        order: ids of PENDING jobs in the order they should start (highest priority first).
        states: per job id (pending and running), its queue state after this decision.
        preemptions: preemptions to start now.
        promotions: ids promoted back to queue 0 by this decision.
        strict_order: True when jobs must start strictly in ``order`` (strict FIFO: the
            first job that does not fit blocks all behind it); False lets later jobs start
            wherever they fit (Slurm's main scheduler + backfill).
        changed: ids whose state has ``changed`` True, in snapshot order (a shortcut for
            drivers that persist only changes; derived from ``states``, not compared).
        memo: opaque per-job cache a driver may pass back as ``decide(..., previous=)`` to
            make the next decision cheaper; it never changes the result (not compared).
    """

    order: tuple[int, ...]
    states: dict[int, QueueState] = field(default_factory=dict)
    preemptions: tuple[Preemption, ...] = ()
    promotions: tuple[int, ...] = ()
    strict_order: bool = False
    changed: tuple[int, ...] = field(default=(), compare=False)
    memo: Any = field(default=None, compare=False, repr=False)
