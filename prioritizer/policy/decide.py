"""The pure scheduling decision: ``decide(snapshot, config, now) -> Decisions``.

The scheduling rules' entry point (docs/design.md, code rules 1 and 8): ``dlprio run`` calls
it with the wall clock and a cluster snapshot; ``dlprio simulate`` replays the same rules
(``prioritizer.policy.fast``). No I/O, no clock, no Slurm. Rules (Tiresias, NSDI'19, sections 3-4; docs/design.md, "Policy rules
and their sources"): discretised 2D attained service (GPUs × seconds) in K queues by thresholds,
FIFO by queue-entry time inside a queue (or Gittins index first), starvation promotion back
to queue 0 after ``knob ×`` the last run, and node-level preemption: when a job that cannot
start outranks running jobs, victims are taken from the lowest queue upward, most attained
service first, just enough for it to fit on real nodes, sparing jobs inside their first
``min_run_s``, runs shorter than ``wait_guard ×`` the wait before them, jobs that lost more
than ``requeue_guard ×`` their run time since their first start (:func:`run_guard`) and
non-preemptible ones. Partition ``PriorityTier`` (``JobView.tier``) comes
first, as in Slurm's own order (slurm.conf(5) PriorityTier): pending jobs are ordered by tier,
then by the policy; a waiter preempts only jobs of its tier or lower, and none while a job of
a higher tier is blocked ahead of it. A job is placed, and preempts, only on nodes of its
partitions (``policy.pools``: pools of nodes apart, and inside one the nodes a waiter may
use; every node where the snapshot names no partitions, as in the paper). Each policy is a small class in :data:`POLICIES`; the
queue states and promotion are here, the preemption rule in ``policy.preemption`` (victims of
one waiter: ``policy.victims``).
"""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter
from typing import Any, Callable, ClassVar, Iterator

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import (Decisions, JobPhase, JobView, Preemption, QueueState,
                               Snapshot)
from prioritizer.policy.memo import Memo
from prioritizer.policy.placement import FreeMap
from prioritizer.policy.pools import allowed_nodes, pools
from prioritizer.policy.preemption import find_preemptions
from prioritizer.policy.victims import (Candidate, gain_test, guard_start, lost_before,
                                        may_be_victim, waited_before)

RUNNING, PENDING = JobPhase.RUNNING, JobPhase.PENDING
PROMOTED = "promoted"   # reason prefix of a promotion (QueueState.reason)


class Policy:
    """Base rule set: one queue, FIFO by submit time, no preemption, no promotion.

    Subclasses override class attributes and the three small methods; ``decide`` is shared.
    """

    name: ClassVar[str] = ""
    preemptive: ClassVar[bool] = False
    strict: ClassVar[bool] = False
    promotes: ClassVar[bool] = False

    def __init__(self, config: PolicyConfig, distribution: GittinsDistribution | None) -> None:
        self.config = config
        self.distribution = distribution
        self.thresholds: tuple[float, ...] = ()

    def service(self, job: JobView) -> float:
        """Service counted for queueing (since the last promotion); unit per subclass."""
        return job.attained_gpu_s - job.service_base_gpu_s

    def whole_service(self, job: JobView) -> float:
        """All the service the job has attained since submission (promotion resets none of
        it); unit as :meth:`service`."""
        return job.attained_gpu_s

    def lifted(self, job: JobView, state: QueueState) -> bool:
        """Whether ``state`` puts the job in a higher queue than its whole attained service
        would: a starvation promotion lifted it (``PolicyConfig.promoted_preempts``)."""
        return state.queue < bisect_right(self.thresholds, self.whole_service(job))

    def rate(self, job: JobView) -> float:
        """Service gained per second of running (GPUs for 2D service)."""
        return float(job.num_gpus)

    def key(self, job: JobView, state: QueueState) -> tuple[Any, ...]:
        """Sort key of a pending job: smaller starts first."""
        return (job.submit_time, job.job_id)

    def level(self, job: JobView, state: QueueState) -> float:
        """Preemption level: a job may preempt only jobs of a strictly greater level."""
        return float(state.queue)


class Fifo(Policy):
    """Strict FIFO (YARN capacity scheduler): the first job that does not fit blocks all."""

    name = "fifo"
    strict = True


class FifoFit(Policy):
    """FIFO order, but later jobs start wherever they fit (Slurm backfill without limits)."""

    name = "fifo-fit"


class TiresiasLas(Policy):
    """Discretised 2D-LAS (paper section 4.1): queues by GPU·s, FIFO by queue entry."""

    name = "tiresias-las"
    preemptive = True
    promotes = True

    def __init__(self, config: PolicyConfig, distribution: GittinsDistribution | None) -> None:
        super().__init__(config, distribution)
        self.thresholds = config.thresholds_gpu_s

    def key(self, job: JobView, state: QueueState) -> tuple[Any, ...]:
        return (state.queue, state.queue_entry_time, job.submit_time, job.job_id)


class Las(TiresiasLas):
    """1D LAS: queues by run time in seconds, ignoring the GPU count."""

    name = "las"

    def __init__(self, config: PolicyConfig, distribution: GittinsDistribution | None) -> None:
        super().__init__(config, distribution)
        self.thresholds = config.thresholds_s

    def service(self, job: JobView) -> float:
        return (job.attained_gpu_s - job.service_base_gpu_s) / max(job.num_gpus, 1)

    def whole_service(self, job: JobView) -> float:
        return job.attained_gpu_s / max(job.num_gpus, 1)

    def rate(self, job: JobView) -> float:
        return 1.0


class TiresiasGittins(TiresiasLas):
    """Discretised 2D-Gittins (paper section 4.2): inside a queue, higher index first."""

    name = "tiresias-gittins"

    def key(self, job: JobView, state: QueueState) -> tuple[Any, ...]:
        if self.distribution is None:
            raise ValueError("tiresias-gittins needs a duration distribution (GPU·s samples)")
        index = self.distribution.index(self.service(job), self.config.gittins_quantum_gpu_s)
        return (state.queue, -index, state.queue_entry_time, job.submit_time, job.job_id)


class Srtf(Policy):
    """Oracle shortest-remaining-time-first (run time in seconds), preemptive."""

    name = "srtf"
    preemptive = True

    def remaining(self, job: JobView) -> float:
        if job.duration_s is None:
            raise ValueError(f"srtf: job {job.job_id} has no duration_s (oracle needed)")
        return job.duration_s - job.attained_s

    def key(self, job: JobView, state: QueueState) -> tuple[Any, ...]:
        return (self.remaining(job), job.submit_time, job.job_id)

    def level(self, job: JobView, state: QueueState) -> float:
        return self.remaining(job)


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (TiresiasLas, TiresiasGittins, Las, Fifo, FifoFit, Srtf)}


def promotion_on(promotes: bool, starve_knob: float) -> bool:
    """Whether starvation promotion applies at all: the policy promotes (``promotes``,
    ``Policy.promotes``) and the knob is on (``starve_knob`` > 0)."""
    return promotes and starve_knob > 0


def promotable(job: JobView, promotes: bool, starve_knob: float) -> bool:
    """Whether starvation promotion (Tiresias section 3.2.3, PROMOTEKNOB) can apply to ``job``:
    it is on (:func:`promotion_on`), the job sits below queue 0 and has run before (its last
    run ended and lasted more than 0 s). Only a PENDING job is promoted (the callers check
    the phase), once :func:`starved`. The one statement of the condition: ``decide``, the
    incremental scheduler and the simulator's promotion events all come through here."""
    return (promotion_on(promotes, starve_knob) and job.queue is not None and job.queue > 0
            and job.last_run_end is not None and job.last_run_s > 0)


def starved(job: JobView, starve_knob: float, now: float) -> bool:
    """Whether a :func:`promotable` job has waited ``starve_knob ×`` its last run time (s)
    since that run ended, at ``now`` (s): it goes back to queue 0. Due at
    :func:`promotion_time`."""
    assert job.last_run_end is not None   # promotable
    return now - job.last_run_end >= starve_knob * job.last_run_s


def queue_state(policy: Policy, job: JobView, now: float,
                reuse: QueueState | None = None) -> QueueState:
    """Queue level of ``job`` at ``now``: demotion by thresholds, promotion by starvation.

    ``reuse``: an earlier state of this job, returned as is when the result equals it
    (saves building an equal frozen object; the result is the same either way)."""
    cfg = policy.config
    level = bisect_right(policy.thresholds, policy.service(job))
    entry = job.queue_entry_time if job.queue_entry_time is not None else job.submit_time
    if job.queue is None:
        return QueueState(job.job_id, level, entry, job.service_base_gpu_s, True, "new")
    if (job.phase is PENDING and promotable(job, policy.promotes, cfg.starve_knob)
            and starved(job, cfg.starve_knob, now)):
        waited = now - job.last_run_end  # type: ignore[operator]  # promotable: it ended
        return QueueState(job.job_id, 0, now, job.attained_gpu_s, True,
                          f"{PROMOTED}: waited {waited:.0f} s >= {cfg.starve_knob:g} x "
                          f"{job.last_run_s:.0f} s")
    if level > job.queue:
        return QueueState(job.job_id, level, now, job.service_base_gpu_s, True,
                          f"demoted: {policy.service(job):.0f} >= "
                          f"{policy.thresholds[level - 1]:g}")
    if level < job.queue:   # only when thresholds were changed between decisions
        return QueueState(job.job_id, level, now, job.service_base_gpu_s, True,
                          "thresholds changed")
    if (reuse is not None and not reuse.changed and reuse.job_id == job.job_id
            and reuse.queue == job.queue and reuse.queue_entry_time == entry
            and reuse.service_base_gpu_s == job.service_base_gpu_s):
        return reuse
    return QueueState(job.job_id, job.queue, entry, job.service_base_gpu_s, False,
                      f"queue {job.queue}")


def _watch(policy: Policy, job: JobView, state: QueueState) -> bool | None:
    """None if ``state`` depends on ``now`` (not reusable); else whether a later ``now``
    could promote the job (see :func:`queue_state`)."""
    if job.queue is None:
        return False
    if state.changed:
        return None
    return job.phase is PENDING and promotable(job, policy.promotes, policy.config.starve_knob)


def decide(snapshot: Snapshot, config: PolicyConfig, now: float, *,
           distribution: GittinsDistribution | None = None,
           previous: Decisions | None = None) -> Decisions:
    """One scheduling decision.

    Args:
        snapshot: nodes (free GPUs) and every managed job; RUNNING jobs list their
            ``nodes`` (aligned with ``gpus_per_node``) so that victims free real nodes.
        config: the policy and its settings (``config.policy`` selects from POLICIES).
        now: seconds (epoch on a cluster, trace time in the simulator).
        distribution: GPU·s samples for ``tiresias-gittins`` (required there).
        previous: an earlier result of ``decide``; its ``memo`` lets jobs whose ``JobView``
            is the very same object skip recomputing their queue state and sort key. The
            result is the same with or without it (tests/prioritizer/policy/test_policy_incremental.py).

    Returns:
        Decisions: pending ids in start order, every job's queue state, preemptions
        (each waiter with just enough victims to fit on real nodes), promotions.

    Raises:
        ValueError: ``tiresias-gittins`` without a distribution, ``srtf`` without
            durations, a running job on a node not in the snapshot. (Policy names are
            validated by ``PolicyConfig``.)
    """
    policy = POLICIES[config.policy](config, distribution)
    old = Memo.reusable(previous.memo if previous is not None else None, config, distribution)
    memo = Memo(config, distribution)
    entries, knob = memo.entries, config.starve_knob
    states: dict[int, QueueState] = {}
    pending: list[tuple[tuple[Any, ...], JobView]] = []
    running: list[JobView] = []
    changed: list[int] = []
    promotions: list[int] = []
    for job in snapshot.jobs:
        job_id = job.job_id
        hit = old.get(job_id)
        if hit is not None and hit[0] is job and not (hit[3] and starved(job, knob, now)):
            entries[job_id] = hit
            state, key = hit[1], hit[2]
        else:
            state = queue_state(policy, job, now, hit[1] if hit is not None else None)
            key = policy.key(job, state) if job.phase is PENDING else None
            watch = _watch(policy, job, state)
            if watch is not None:
                entries[job_id] = (job, state, key, watch)
            elif state.reason.startswith(PROMOTED):
                promotions.append(job_id)
        states[job_id] = state
        if state.changed:
            changed.append(job_id)
        if key is not None:
            pending.append((key, job))
        else:
            running.append(job)
    pending.sort(key=itemgetter(0))
    if any(job.tier for _, job in pending):   # Slurm: partition PriorityTier before priority
        pending.sort(key=_minus_tier)
    order = tuple(job.job_id for _, job in pending)
    preemptions: list[Preemption] = []
    if config.preemption and policy.preemptive and pending and running:
        split = pools(snapshot.nodes, snapshot.jobs)
        if split is None:
            preemptions = _preempt(policy, snapshot, states, pending, running, now)
        else:   # each pool of nodes on its own, as a cluster (policy.pools)
            for nodes, ids in split:
                mine = [item for item in pending if item[1].job_id in ids]
                theirs = [job for job in running if job.job_id in ids]
                if not (mine and theirs and nodes):
                    continue
                part = Snapshot(tuple(snapshot.nodes[i] for i in nodes), ())
                masks = allowed_nodes(part.nodes, [job for _, job in mine])
                if len(nodes) == len(snapshot.nodes) and not masks:
                    part = snapshot   # every node, no job held to some: the plain case
                preemptions += _preempt(policy, part, states, mine, theirs, now,
                                        masks.get if masks else None)
            rank = {job_id: i for i, job_id in enumerate(order)}
            preemptions.sort(key=lambda p: rank[p.waiter])
    return Decisions(order=order, states=states, preemptions=tuple(preemptions),
                     promotions=tuple(sorted(promotions)), strict_order=policy.strict,
                     changed=tuple(changed), memo=memo)


def _minus_tier(item: tuple[Any, JobView]) -> int:
    return -item[1].tier


def _preempt(policy: Policy, snapshot: Snapshot, states: dict[int, QueueState],
             pending: list[tuple[tuple[Any, ...], JobView]], running: list[JobView],
             now: float, allowed: Callable[[int], frozenset[int] | None] | None = None
             ) -> list[Preemption]:
    """The snapshot's side of :func:`find_preemptions`: free GPUs per node, where each
    running job sits, the waiters' levels (``allowed``: the nodes of ``snapshot`` a waiter
    may use, ``policy.pools.allowed_nodes``; None: every node). Returns the preemptions in
    waiter order."""
    index = {node.name: i for i, node in enumerate(snapshot.nodes)}
    free = FreeMap([node.gpus_free for node in snapshot.nodes])
    placed: dict[int, tuple[int, ...]] = {}
    for job in running:
        try:
            placed[job.job_id] = tuple(index[name] for name in job.nodes)
        except KeyError as exc:
            raise ValueError(f"job {job.job_id}: node {exc.args[0]} not in snapshot") from None
    soon: FreeMap | None = None
    for job in running:
        if job.releasing:
            soon = soon or free.copy()
            soon.add(placed[job.job_id], job.gpus_per_node)
            for node in placed[job.job_id]:
                # a driver reads jobs and nodes apart: a node may show a completing job's
                # GPUs free already and still list the job on it; never count them twice
                soon.cap(node, snapshot.nodes[node].gpus_total)

    def eligible() -> Iterator[tuple[int, tuple[int, ...], float]]:
        # read lazily, as far as the victim search goes (a generator function: mypyc turns
        # a generator expression into a list)
        for _, job in pending:
            if job.eligible_time is None or job.eligible_time <= now:
                yield job.job_id, job.gpus_per_node, policy.level(job, states[job.job_id])

    waiters = eligible()
    tiered = any(job.tier for _, job in pending) or any(job.tier for job in running)
    tiers = {job.job_id: job.tier for _, job in pending} if tiered else None
    config, min_run = policy.config, policy.config.min_run_s
    lifted = None
    if policy.promotes and not policy.config.promoted_preempts:
        lifted = {job.job_id for _, job in pending
                  if policy.lifted(job, states[job.job_id])}.__contains__

    def candidates(_floor: float) -> list[Candidate]:
        return [(-policy.level(j, states[j.job_id]), -j.attained_gpu_s, j.job_id,
                 j.gpus_per_node, placed[j.job_id], j.tier)
                for j in running
                if may_be_victim(j.preemptible, j.releasing, run_guard(j, config, now), now,
                                 min_run)
                and len(placed[j.job_id]) == len(j.gpus_per_node)]
    pays = None
    if config.preempt_gain:
        views = {job.job_id: job for _, job in pending}
        pays = gain_test(config, policy.distribution,
                         lambda job_id: (views[job_id].attained_gpu_s, views[job_id].num_gpus))
    return find_preemptions(policy.strict, free, soon, waiters, candidates, now, tiers=tiers,
                            lifted=lifted, pays=pays, allowed=allowed)


def run_guard(job: JobView, config: PolicyConfig, now: float) -> float | None:
    """:func:`~prioritizer.policy.victims.guard_start` of a job holding GPUs at ``now`` (its
    run start when ``wait_guard`` and ``requeue_guard`` are 0 or it has none). Its run time
    before this run is ``attained_s`` less this run's ``now - run_start``."""
    start = job.run_start
    if start is None or not (config.wait_guard or config.requeue_guard):
        return start
    ran = job.attained_s - (now - start)
    return guard_start(start, waited_before(start, job.last_run_end, job.submit_time),
                       config.min_run_s, config.wait_guard,
                       lost_before(start, job.first_start, ran), ran, config.requeue_guard)


def next_queue_change(job: JobView, config: PolicyConfig, now: float,
                      rules: Policy | None = None) -> float | None:
    """When a job RUNNING at ``now`` reaches its next queue threshold if it keeps running
    (seconds), or None (last queue, or a policy without queues). ``job`` carries the
    attained service at ``now``. The simulator schedules its threshold events here.
    ``rules``: the ``config.policy`` rule set if the caller holds one (built otherwise)."""
    if rules is None:
        rules = POLICIES[config.policy](config, None)
    service = rules.service(job)
    i = bisect_right(rules.thresholds, service)
    if i == len(rules.thresholds):
        return None
    return now + (rules.thresholds[i] - service) / rules.rate(job)


def promotion_time(job: JobView, config: PolicyConfig) -> float | None:
    """When a PENDING job in queue > 0 becomes due for starvation promotion (s: the end of its
    last run + ``starve_knob ×`` that run's length, from which :func:`starved` holds up to
    rounding; a driver re-checks with :func:`queue_state` then), or None when it is not
    :func:`promotable`."""
    if not promotable(job, POLICIES[config.policy].promotes, config.starve_knob):
        return None
    assert job.last_run_end is not None   # promotable
    return job.last_run_end + config.starve_knob * job.last_run_s
