"""The live state a forecast starts from, as plain frozen records (pure; no Slurm, no clock).

A driver (the daemon, ``dlprio history check --forecasts``, a test) builds a :class:`World`:
the moment ``now``, the nodes, and every job the scheduler manages with its service so far.
Units: seconds (epoch seconds on a cluster, trace seconds in a replay), GPU·s for service.
"""

from __future__ import annotations

from dataclasses import dataclass

PHASES = ("pending", "running", "grace")


@dataclass(frozen=True)
class ForecastJob:
    """One job at the forecast moment.

    Attributes:
        job_id: the job's id as the driver shows it (Slurm id, trace name).
        phase: ``pending`` (waiting, including requeued jobs waiting out BeginTime),
            ``running`` (holds its GPUs and progresses) or ``grace`` (holds its GPUs, checkpoint
            signal sent, no progress; its GPUs come free at ``grace_end``).
        gpus_per_node: GPUs on each distinct node (``policy.model`` shapes).
        submit: submit (eligible) time, s.
        attained_gpu_s: service over every run so far, GPU·s (the current run included).
        attained_s: run time over every run so far, s (the current run included).
        run_start: start of the current run (running/grace), else None.
        nodes: names of the nodes a running/grace job holds, aligned with ``gpus_per_node``.
        queue, queue_entry_time, service_base_gpu_s: the queue state the driver recorded
            (``policy.model.JobView``); None/None/0 for a job never decided.
        last_run_s, last_run_end: the last finished run (promotion input; 0/None if none).
        eligible: a pending job's BeginTime (None = now).
        time_limit_s: Slurm's time limit of one run (None: none known); a run ends at
            ``run start + time_limit_s`` at the latest, so it bounds the remaining work drawn.
        remaining_s: the remaining run time when known (tests, oracle traces): then it is
            used in every draw instead of one drawn from the distribution.
        preemptible: False for jobs the site exempts.
        preempts: False for a job that preempts no one while it waits: a shard job (Slurm
            starts it where shards are free; dlprio preempts nothing for it, docs/dlprio.md).
        grace_end: when a ``grace`` job's GPUs come free (s).
        first_start: start of the job's first run (None if it never ran): the requeue
            guard's input (``policy.model.JobView.first_start``).
    """

    job_id: str
    phase: str
    gpus_per_node: tuple[int, ...]
    submit: float
    attained_gpu_s: float = 0.0
    attained_s: float = 0.0
    run_start: float | None = None
    nodes: tuple[str, ...] = ()
    queue: int | None = None
    queue_entry_time: float | None = None
    service_base_gpu_s: float = 0.0
    last_run_s: float = 0.0
    last_run_end: float | None = None
    eligible: float | None = None
    time_limit_s: float | None = None
    remaining_s: float | None = None
    preemptible: bool = True
    preempts: bool = True
    grace_end: float | None = None
    first_start: float | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"job {self.job_id}: phase {self.phase!r}; valid: {', '.join(PHASES)}")
        if not self.gpus_per_node or min(self.gpus_per_node) < 0 or sum(self.gpus_per_node) <= 0:
            raise ValueError(f"job {self.job_id}: gpus_per_node must hold GPU counts >= 0 "
                             f"summing to > 0 (got {self.gpus_per_node})")
        if self.phase != "pending":
            if self.run_start is None or len(self.nodes) != len(self.gpus_per_node):
                raise ValueError(f"job {self.job_id}: a {self.phase} job needs run_start and "
                                 "one node per gpus_per_node entry")

    @property
    def gpus(self) -> int:
        return sum(self.gpus_per_node)


@dataclass(frozen=True)
class World:
    """The state a forecast replays from.

    Attributes:
        now: the forecast moment, s.
        nodes: ``(name, GPUs)`` of every node the managed jobs may use.
        jobs: the managed jobs (pending and holding GPUs), any order; the policy orders them.
    """

    now: float
    nodes: tuple[tuple[str, int], ...]
    jobs: tuple[ForecastJob, ...]

    def __post_init__(self) -> None:
        names = {name for name, _ in self.nodes}
        if len(names) != len(self.nodes):
            raise ValueError("world: node names must be distinct")
        seen: set[str] = set()
        for job in self.jobs:
            if job.job_id in seen:
                raise ValueError(f"world: job {job.job_id} appears twice")
            seen.add(job.job_id)
            missing = [n for n in job.nodes if n not in names]
            if missing:
                raise ValueError(f"job {job.job_id}: holds unknown node(s) {', '.join(missing)}")
