"""The pure scheduling decision: ``decide(snapshot, config, now) -> Decisions``.

The one place the scheduling rules live (docs/design.md, code rules 1 and 8): ``dlprio run`` calls it
with the wall clock and a cluster snapshot, ``dlprio simulate`` with its own clock. No I/O,
no clock, no Slurm. Rules (Tiresias, NSDI'19, sections 3-4; docs/design.md, "Policy rules
and their sources"): discretised 2D attained service (GPUs × seconds) in K queues by thresholds,
FIFO by queue-entry time inside a queue (or Gittins index first), starvation promotion back
to queue 0 after ``knob ×`` the last run, and node-level preemption: when a job that cannot
start outranks running jobs, victims are taken from the lowest queue upward, most attained
service first, just enough for it to fit on real nodes, sparing jobs inside their first
``min_run_s`` and non-preemptible ones. Partition ``PriorityTier`` (``JobView.tier``) comes
first, as in Slurm's own order (slurm.conf(5) PriorityTier): pending jobs are ordered by tier,
then by the policy; a waiter preempts only jobs of its tier or lower, and none while a job of
a higher tier is blocked ahead of it. Each policy is a small class in :data:`POLICIES`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from heapq import heapify, heappop, heappush, heapreplace
from itertools import islice
from operator import itemgetter
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import (Decisions, JobPhase, JobView, Preemption, QueueState,
                               Snapshot)
from prioritizer.policy.placement import FreeMap, plan_starts

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


def promotable(job: JobView, promotes: bool, starve_knob: float) -> bool:
    """Whether starvation promotion (Tiresias section 3.2.3, PROMOTEKNOB) can apply to ``job``:
    the policy promotes (``promotes``), the knob is on (``starve_knob`` > 0), the job sits
    below queue 0 and has run before (its last run ended and lasted more than 0 s). Only a
    PENDING job is promoted (the callers check the phase), once :func:`starved`."""
    return (promotes and starve_knob > 0 and job.queue is not None and job.queue > 0
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


class _Memo:
    """Per-job results of one decision that the next one may reuse (``Decisions.memo``).

    ``entries[job_id] = (view, state, key, watch)``: reused only for the very same
    ``JobView`` object (frozen, so identical inputs), under the same config and
    distribution, and only for states that do not depend on ``now``; ``watch`` marks a
    pending job in a lower queue whose starvation promotion must be re-checked at ``now``.
    """

    __slots__ = ("config", "distribution", "entries")

    def __init__(self, config: PolicyConfig, distribution: GittinsDistribution | None) -> None:
        self.config, self.distribution = config, distribution
        self.entries: dict[int, tuple[JobView, QueueState, Any, bool]] = {}


def _reusable(memo: Any, config: PolicyConfig,
              distribution: GittinsDistribution | None) -> dict[int, Any]:
    if isinstance(memo, _Memo) and memo.config == config and memo.distribution is distribution:
        return memo.entries
    return {}


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
            result is the same with or without it (tests/test_policy_incremental.py).

    Returns:
        Decisions: pending ids in start order, every job's queue state, preemptions
        (each waiter with just enough victims to fit on real nodes), promotions.

    Raises:
        ValueError: ``tiresias-gittins`` without a distribution, ``srtf`` without
            durations, a running job on a node not in the snapshot. (Policy names are
            validated by ``PolicyConfig``.)
    """
    policy = POLICIES[config.policy](config, distribution)
    old = _reusable(previous.memo if previous is not None else None, config, distribution)
    memo = _Memo(config, distribution)
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
        preemptions = _preempt(policy, snapshot, states, pending, running, now)
    return Decisions(order=order, states=states, preemptions=tuple(preemptions),
                     promotions=tuple(sorted(promotions)), strict_order=policy.strict,
                     changed=tuple(changed), memo=memo)


def _minus_tier(item: tuple[Any, JobView]) -> int:
    return -item[1].tier


def _preempt(policy: Policy, snapshot: Snapshot, states: dict[int, QueueState],
             pending: list[tuple[tuple[Any, ...], JobView]], running: list[JobView],
             now: float) -> list[Preemption]:
    """The snapshot's side of :func:`find_preemptions`: free GPUs per node, where each
    running job sits, the waiters' levels. Returns the preemptions in waiter order."""
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
    min_run = policy.config.min_run_s
    lifted = None
    if policy.promotes and not policy.config.promoted_preempts:
        lifted = {job.job_id for _, job in pending
                  if policy.lifted(job, states[job.job_id])}.__contains__

    def candidates(_floor: float) -> list[Candidate]:
        return [(-policy.level(j, states[j.job_id]), -j.attained_gpu_s, j.job_id,
                 j.gpus_per_node, placed[j.job_id], j.tier)
                for j in running
                if may_be_victim(j.preemptible, j.releasing, j.run_start, now, min_run)
                and len(placed[j.job_id]) == len(j.gpus_per_node)]
    return find_preemptions(policy, free, soon, waiters, candidates, now, tiers=tiers,
                            lifted=lifted)


#: A victim candidate: ``(-level, -attained GPU·s, job id, gpus_per_node, node indices,
#: PriorityTier)``; candidates are taken in ascending tuple order (lowest queue, i.e.
#: highest level, first; then most attained service; then job id).
Candidate = tuple[float, float, int, tuple[int, ...], tuple[int, ...], int]
#: ``find_preemptions``' ``one_node`` helper: (level, GPUs, soon, taken ids, GPUs taken
#: per node) -> victims, None or ``DEFER``
OneNode = Callable[[float, int, FreeMap, set[int], dict[int, int]], list[Candidate] | None]


def needs_no_less(need: tuple[int, ...], other: tuple[int, ...]) -> bool:
    """Whether ``need`` (GPUs per node, largest first) asks for at least what ``other``
    (likewise) asks, entry by entry, on at least as many nodes: a waiter of no higher
    priority with such a need fails wherever ``other`` failed (``find_preemptions``'
    ``failed`` shortcut)."""
    return len(need) >= len(other) and all(a >= b for a, b in zip(need, other))


def may_be_victim(preemptible: bool, releasing: bool, run_start: float | None,
                  now: float, min_run_s: float) -> bool:
    """Whether a job holding GPUs may be chosen as a victim at ``now``: preemptible, not
    releasing its GPUs already (``JobView.releasing``), and past its first ``min_run_s`` seconds (the minimum run
    that spares fresh starts; ``PolicyConfig.min_run_s``)."""
    return preemptible and not releasing and now - (
        run_start if run_start is not None else now) >= min_run_s


def _heap_order(entries: list[Candidate]) -> Iterator[Candidate]:
    """``entries`` in ascending order, sorted lazily (a heap popped as far as read)."""
    heapify(entries)
    while entries:
        yield heappop(entries)


class _Victims:
    """The candidates in victim order, read lazily from ``source`` (so a decision that
    needs a few victims does not sort every running job) and kept for the next waiter.
    ``start`` skips the prefix already taken (no later waiter reads it again)."""

    __slots__ = ("source", "items", "start", "taken")

    def __init__(self, found: list[Candidate] | Iterator[Candidate], taken: set[int]) -> None:
        self.source = _heap_order(found) if isinstance(found, list) else found
        self.items: list[Candidate] = []
        self.start, self.taken = 0, taken

    def top(self) -> Candidate | None:
        """The first candidate in victim order (taken or not), or None."""
        if not self.items:
            self.items.extend(islice(self.source, 1))
        return self.items[0] if self.items else None

    def __iter__(self) -> Iterator[Candidate]:
        items, taken, source = self.items, self.taken, self.source
        i = self.start
        while i < len(items) and items[i][2] in taken:
            i += 1
        self.start = i
        yield from islice(items, i, None)   # what is read already (and appended)
        i = len(items)
        while True:
            if i < len(items):
                yield items[i]
            else:
                item = next(source, None)
                if item is None:
                    return
                items.append(item)
                yield item
            i += 1

    def all(self) -> list[Candidate]:
        """Every candidate in victim order."""
        self.items.extend(self.source)
        return self.items


def find_preemptions(policy: Policy, free: FreeMap, soon: FreeMap | None,
                     waiters: Iterable[tuple[int, tuple[int, ...], float]],
                     running: Callable[[float], list[Candidate] | Iterator[Candidate]],
                     now: float,
                     first_only: bool = False,
                     above: Callable[[float], int] | None = None,
                     tiers: Mapping[int, int] | None = None,
                     may_fit: Callable[[float, tuple[int, ...], int, FreeMap], bool] | None = None,
                     due: Callable[[float, tuple[int, ...], FreeMap], bool] | None = None,
                     one_node: OneNode | None = None,
                     failed_one: list[int] | None = None,
                     lifted: Callable[[int], bool] | None = None
                     ) -> list[Preemption]:
    """Run the start model over the eligible pending jobs; for each job that can neither
    start nor reserve, pick victims (see module doc). The one preemption rule, used by
    :func:`decide` and by the incremental scheduler (``policy.fast.incremental``).

    Args:
        free: free GPUs per node now; mutated.
        soon: free GPUs once the releasing jobs (``JobView.releasing``: being preempted or
            completing) have freed theirs, or None when none is; mutated.
        waiters: ``(job_id, gpus_per_node, level)`` of the eligible pending jobs in start
            order. Levels never decrease along the order (every policy's sort key starts
            with its level), so the walk stops at the first waiter whose level is not below
            the highest candidate's: no later waiter may preempt anyone.
        running: called once, when a first waiter is blocked, with that waiter's level:
            the victim candidates (:data:`Candidate`: a list in any order, or an
            iterator in victim order) among the jobs holding GPUs, i.e. those :func:`may_be_victim` admits and placed on as many nodes as
            their shape has entries. It may leave out jobs whose level is not above the one
            given: no later waiter (of no smaller level) may preempt them.
        now: seconds.
        first_only: stop at the first preemption found (a driver that only needs to know
            whether one is due).
        above: optional upper bound on the GPUs held by preemptible running jobs (not being
            preempted) of a level strictly greater than the one given. A blocked waiter for
            whom it is 0 finds no victim, one for whom it is too small to make room finds
            no victim set: both are decided without building the candidate list (the same
            result, cheaper; the incremental scheduler keeps such totals).
        tiers: ``{job id: PriorityTier}`` of the waiters when any job has a tier above 0
            (None: every job is tier 0).
            Waiters are then in tier order first, so levels may decrease along it and the
            walk does not stop early.
        may_fit: optional per-node bound (one tier only): ``may_fit(level, need, extra,
            soon)`` (``need``: GPUs per node, largest first) False means that for some
            j, fewer than j nodes have ``soon``'s free GPUs plus those of the victim
            candidates of a level strictly greater than ``level`` there reaching the j-th
            largest entry of ``need``, so that no victim set makes it fit (``extra``: the
            most GPUs that victims taken earlier in this decision added to one node of
            ``soon``, for a bound kept from the decision's start). The waiter is then
            decided without a search (the same result, cheaper; the incremental scheduler
            keeps such a bound per node).
        due: optional exact test (one tier, ``first_only``): ``due(level, need, soon)``
            True proves that a victim set exists for the blocked waiter that got past every
            check above, i.e. that the search would succeed (the counting rule of the
            victim search, over candidates the caller keeps per node). The walk then
            ends with ``Preemption(job_id, ())``: the first waiter that preempts, its
            victims not chosen (a driver that only needs to know whether one is due).
        one_node: optional (one tier): ``one_node(level, gpus, soon, taken, taken_on)``
            gives the victims of a blocked one-node waiter exactly as the walk over the
            candidates would (a list, or None: no victim set), or :data:`DEFER` to leave
            it to that walk (``taken_on``: GPUs of the victims taken so far per node).
        failed_one: optional empty list, shared with the caller (one tier): the walk
            keeps in it the smallest one-node need it found no victims for (``[g]``,
            ``[]``: none yet). A one-node waiter needing at least that many GPUs ends at
            the ``failed`` shortcut (below) as soon as it is blocked, so a caller's
            ``waiters`` may leave out such a waiter that fits nowhere in ``soon``.
        lifted: optional ``lifted(job_id)``, True for a waiter that preempts no one: it
            starts on free GPUs (or reserves GPUs being freed) in its turn, but no victim
            is chosen for it (:meth:`Policy.lifted`, ``PolicyConfig.promoted_preempts``).
            Nothing is recorded for such a waiter, so later ones are searched as before.

    Returns:
        the preemptions in waiter order.
    """
    taken: set[int] = set()
    victims: list[_Victims] = []     # built at the first blocked waiter (often none is)
    top: list[float] = []            # the highest candidate level, once built (none: -inf)
    result: list[Preemption] = []
    # (level, need largest first) of waiters no victim set could serve. A later waiter of
    # no higher priority whose need is as large entry by entry has fewer candidates and a
    # harder fit, so it is not searched again: a shortcut that can only skip a preemption
    # (rarely, when spare GPUs of earlier victims would have helped), never add a wrong one.
    failed: list[tuple[float, tuple[int, ...]]] = []
    if failed_one is None:   # the smallest one-node need in ``failed`` (one tier)
        failed_one = []

    def fail(mine: float, shape: tuple[int, ...]) -> None:
        failed.append((mine, shape))
        if len(shape) == 1 and (not failed_one or shape[0] < failed_one[0]):
            failed_one[:] = [shape[0]]
    # PriorityTier (JobView.tier; ``tiers``): the highest tier of a waiter left blocked so far;
    # a waiter of a lower tier preempts nothing, since Slurm would give the freed GPUs to that one.
    blocked_tier: list[int] = []
    top_tier: list[int] = []   # highest tier among the candidates, once built (tiers only)
    # (level, ``above`` of it or -1) of the waiter the walk gave last: plan_starts asks
    # ``on_blocked`` about that one, before it takes the next
    walked: list[float] = [0.0, -1]
    scans: list[_PrefixScan] = []   # one tier: the resumable one-node walk
    index: list[_NodeIndex] = []     # one tier, after _INDEX_AFTER searches: per-node index
    searches = [0]                   # victim searches so far (one tier)
    taken_on: dict[int, int] = {}   # GPUs of the victims taken per node (may_fit, one_node)

    def on_blocked(job_id: int, need: tuple[int, ...], soon_map: FreeMap) -> bool:
        tier = tiers.get(job_id, 0) if tiers else 0
        if blocked_tier and tier < blocked_tier[0]:
            return False
        if _serve(job_id, need, soon_map, tier):
            return True
        blocked_tier[:] = [max(blocked_tier + [tier])]
        return False

    def _serve(job_id: int, need: tuple[int, ...], soon_map: FreeMap, tier: int) -> bool:
        if lifted is not None and lifted(job_id):
            return False   # a promoted job takes free GPUs only
        if failed_one and len(need) == 1 and need[0] >= failed_one[0] and not tiers:
            return False   # the shortcut below, taken first: most blocked waiters end here
        mine, room = walked
        if above is not None:
            if room == 0:
                return False   # no running job of a strictly greater level
            if room < sum(need) and soon_map.total + room < sum(need):
                # even every such job would not free enough GPUs: no victim set exists
                fail(mine, tuple(sorted(need, reverse=True)))
                return False
        shape = tuple(sorted(need, reverse=True))
        if len(shape) == 1 and not tiers:
            # one tier: levels never decrease along the walk, so every failed entry has
            # lv <= mine; a one-node need is covered by the smallest failed one-node need
            if failed_one and shape[0] >= failed_one[0]:
                return False
        elif any(mine >= lv and needs_no_less(shape, f) for lv, f in failed):
            return False
        if may_fit is not None and not tiers and not may_fit(
                mine, shape, max(taken_on.values(), default=0), soon_map):
            fail(mine, shape)   # what the search would conclude
            return False
        if due is not None and first_only and not tiers and due(mine, shape, soon_map):
            result.append(Preemption(job_id, ()))   # the search would succeed here
            return True
        # (the checks above need no candidates: most blocked waiters end there. Had the
        # level check below come first, it would have ended this waiter and, levels never
        # decreasing in one tier, every later one: a failure recorded above changes nothing)
        if not victims:
            victims.append(_Victims(running(mine), taken))
            first = victims[0].top()
            top.append(-first[0] if first is not None else float("-inf"))
            if tiers:
                top_tier.append(max((c[5] for c in victims[0].all()), default=0))
        if mine >= top[0]:
            return False   # no running job of a strictly greater level: no victim exists
        if not tiers:
            searches[0] += 1
            if not index and searches[0] > _INDEX_AFTER:
                index.append(_NodeIndex(victims[0], soon_map.free, taken))
            if index:
                chosen = index[0].search(need, soon_map, -mine)
                if chosen is _FAR:   # (not expected) the index defers to the walk
                    chosen = _choose_victims(need, soon_map, mine, victims[0], taken)
            elif len(need) == 1:
                chosen = DEFER if one_node is None else one_node(
                    mine, need[0], soon_map, taken, taken_on)
                if chosen is DEFER:
                    if not scans:
                        scans.append(_PrefixScan(victims[0]))
                    chosen = scans[0].one_node(need[0], soon_map, -mine, taken)
            else:
                chosen = _victims_for_gang(need, soon_map, -mine, victims[0], taken)
        else:
            pool: Iterable[Candidate] = (victims[0] if top_tier[0] <= tier
                                         else [c for c in victims[0].all() if c[5] <= tier])
            chosen = _choose_victims(need, soon_map, mine, pool, taken)
        if chosen is None:
            fail(mine, shape)
            return False
        ids = [cand[2] for cand in chosen]
        taken.update(ids)
        if may_fit is not None or one_node is not None:   # both read it
            for cand in chosen:
                for node, g in zip(cand[4], cand[3]):
                    taken_on[node] = taken_on.get(node, 0) + g
        if index:
            index[0].taken(chosen)
        elif scans:
            scans[0].taken(chosen, soon_map)
        result.append(Preemption(job_id, tuple(ids)))
        return True

    def walk() -> Iterator[tuple[int, tuple[int, ...]]]:
        for job_id, need, mine in waiters:
            if first_only and result:
                return
            room = above(mine) if above is not None else -1
            if not tiers and (victims and mine >= top[0] or room == 0):
                return   # levels never decrease (one tier): no later waiter may preempt
            walked[0], walked[1] = mine, room
            yield job_id, need

    plan_starts(walk(), free, soon, strict=policy.strict, on_blocked=on_blocked)
    return result


class _PrefixScan:
    """The one-node victim walk of :func:`_victims_for_one_node`, kept across the waiters
    of one decision instead of restarted from the first candidate (the same victims).

    That walk stops at the first candidate after which some node's free GPUs plus those
    of the untaken candidates walked so far on it reach the waiter's ``g``. The scan keeps,
    over the candidates read so far (``victims.items[:p]``), the untaken ones per node with
    their positions (``on``), their GPUs per node (``acc``) and per node an upper bound of
    ``free + acc`` (``soon``'s free GPUs only drop between waiters, except where victims
    are taken, which the scan is told of). Only nodes whose bound reaches ``g`` can hold
    the first hit inside the prefix: their hit positions are computed exactly; if none
    lies before the waiter's level break, the walk goes on from ``p``. A blocked waiter
    fits on no node with ``soon``'s free GPUs alone, so a node without scanned candidates
    never reaches ``g`` inside the prefix.
    """

    __slots__ = ("victims", "p", "acc", "on", "scanned", "bound", "at")

    def __init__(self, victims: _Victims) -> None:
        self.victims = victims
        self.p = 0
        self.acc: dict[int, int] = {}
        self.on: dict[int, list[tuple[int, Candidate, int]]] = {}   # (position, cand, GPUs)
        self.scanned: set[int] = set()
        self.bound: dict[int, int] = {}
        self.at: dict[int, set[int]] = {}   # bound value -> nodes

    def _bound(self, node: int, value: int) -> None:
        old = self.bound.get(node)
        if old == value:
            return
        if old is not None:
            self.at[old].discard(node)
        self.bound[node] = value
        self.at.setdefault(value, set()).add(node)

    def one_node(self, gpus: int, soon: FreeMap, floor: float, taken: set[int]
                 ) -> list[Candidate] | None:
        """:func:`_victims_for_one_node` of the scan's candidates (same victims)."""
        items, free, acc, on = self.victims.items, soon.free, self.acc, self.on
        if self.p:   # a first hit near the front (small needs) is found fastest by walking
            near = _victims_for_one_node(gpus, soon, floor, self.victims, taken, limit=48)
            if near is not _FAR:
                return near
        # level break inside the prefix (candidates are in ascending (-level, ...) order)
        stop = bisect_left(items, floor, 0, self.p, key=itemgetter(0))
        best: tuple[int, int] | None = None   # (hit position, -place among its nodes)
        hit = -1
        for value in [v for v in self.at if v >= gpus]:
            for node in list(self.at[value]):
                have = free[node] + acc[node]
                self._bound(node, have)   # exact again
                if have < gpus:
                    continue
                run = free[node]
                for pos, cand, g in on[node]:
                    if pos >= stop:
                        break
                    run += g
                    if run >= gpus:
                        rank = (pos, -cand[4].index(node))
                        if best is None or rank < best:
                            best, hit = rank, node
                        break
        if best is None:
            if stop < self.p:
                return None   # no hit before the level break
            hit = self._extend(gpus, free, floor, taken)
            if hit < 0:
                return None
            last = self.p - 1
        else:
            last = best[0]
        mine = [(cand, g) for pos, cand, g in on[hit] if pos <= last]
        return keep_needed(mine, free[hit], gpus, soon)

    def _extend(self, gpus: int, free: list[int], floor: float, taken: set[int]) -> int:
        """Read on from ``p`` until some node reaches ``gpus`` (returns it; the hit
        candidate is the last read) or the level break or the end (returns -1)."""
        items, source, acc, on = self.victims.items, self.victims.source, self.acc, self.on
        i, hit = self.p, -1
        while hit < 0:
            if i == len(items):
                item = next(source, None)
                if item is None:
                    break
                items.append(item)
            cand = items[i]
            if cand[0] >= floor:
                break
            i += 1
            if cand[2] in taken:
                continue
            self.scanned.add(cand[2])
            for node, g in zip(cand[4], cand[3]):
                have = acc.get(node, 0) + g
                acc[node] = have
                on.setdefault(node, []).append((i - 1, cand, g))
                self._bound(node, free[node] + have)
                if free[node] + have >= gpus:
                    hit = node
        self.p = i
        return hit

    def taken(self, victims: list[Candidate], soon: FreeMap) -> None:
        """``victims`` were taken and their GPUs added to ``soon``: keep ``acc``, ``on``
        and the bounds true."""
        acc, free = self.acc, soon.free
        for cand in victims:
            scanned = cand[2] in self.scanned
            for node, g in zip(cand[4], cand[3]):
                if scanned:
                    acc[node] -= g
                    self.on[node] = [e for e in self.on[node] if e[1][2] != cand[2]]
                if node in acc:
                    self._bound(node, free[node] + acc[node])


#: Victim searches of one decision (one tier) made by walking the candidates before
#: :class:`_NodeIndex` is built (building it reads and sorts every candidate: worth it
#: only for decisions with many blocked waiters, such as a storm of promotions).
_INDEX_AFTER = 16


class _NodeIndex:
    """The victim searches of :func:`_victims_for_one_node` and :func:`_victims_for_gang`
    answered from a per-node index of the candidates instead of a walk (the same victims).

    Both walks take the untaken candidates in victim order until some node (one-node
    need) or enough nodes (gang: for each GPU count ``v`` of the need, as many nodes as it
    has entries of at least ``v``) have reached ``v`` free GPUs, counting those of the
    candidates walked on them. So what decides a search is, per node and ``v``, its
    *reach*: the position (in victim order) of the candidate at which the node's free GPUs
    in ``soon`` plus those of its untaken candidates up to there first reach ``v`` (-1 if
    its free GPUs already do; none if never). Per ``v`` a heap holds a lower bound of each
    node's reach: ``soon`` only loses free GPUs between searches (starts, reservations),
    which only delays a reach, except on the nodes of taken victims (their GPUs are added
    to ``soon``), whose exact reach the next search pushes (:meth:`taken`). A search pops
    entries, recomputes each popped node's reach from its few candidates and pushes it
    back if it moved, until the smallest reaches are exact; the walk's stopping position
    is then known without reading the candidates before it. Candidates of a level not
    above the waiter's (victim order position ``>=`` the level break) are never taken.
    """

    __slots__ = ("items", "on", "taken_ids", "free", "heaps", "stops", "dirty")

    def __init__(self, victims: _Victims, free: list[int], taken: set[int]) -> None:
        self.items = victims.all()
        # per node, its untaken candidates: (position, cand, GPUs there), in victim order
        self.on: dict[int, list[tuple[int, Candidate, int]]] = {}
        for pos, cand in enumerate(self.items):
            if cand[2] not in taken:
                for node, g in zip(cand[4], cand[3]):
                    self.on.setdefault(node, []).append((pos, cand, g))
        self.taken_ids, self.free = taken, free
        self.heaps: dict[int, list[tuple[int, int]]] = {}   # v -> [(reach bound, node)]
        self.stops: dict[float, int] = {}   # floor -> level break position
        self.dirty: set[int] = set()   # nodes of victims taken since the last search

    def _reach(self, node: int, v: int) -> int | None:
        have = self.free[node]
        if have >= v:
            return -1
        for pos, _, g in self.on.get(node, ()):
            have += g
            if have >= v:
                return pos
        return None

    def _heap(self, v: int) -> list[tuple[int, int]]:
        heap = self.heaps.get(v)
        if heap is None:
            reach = self._reach
            heap = [(r, node) for node in range(len(self.free))
                    if (r := reach(node, v)) is not None]
            heapify(heap)
            self.heaps[v] = heap
        return heap

    def _pop(self, heap: list[tuple[int, int]], v: int, got: dict[int, int]
             ) -> tuple[int, int] | None:
        """The next smallest exact reach ``(position, node)`` of a node not in ``got``
        (recorded there and off the heap until :meth:`_restore`), or None."""
        while heap:
            bound, node = heap[0]
            if node in got:
                heappop(heap)   # a duplicate: the node's exact entry is in ``got``
                continue
            exact = self._reach(node, v)
            if exact is None:
                heappop(heap)
            elif exact == bound:
                heappop(heap)
                got[node] = exact
                return exact, node
            else:
                heapreplace(heap, (exact, node))
        return None

    @staticmethod
    def _restore(heap: list[tuple[int, int]], got: dict[int, int]) -> None:
        for node, exact in got.items():
            heappush(heap, (exact, node))

    def _stop(self, floor: float) -> int:
        stop = self.stops.get(floor)
        if stop is None:
            stop = bisect_left(self.items, floor, key=itemgetter(0))
            self.stops[floor] = stop
        return stop

    def _mine(self, node: int, last: int) -> list[tuple[Candidate, int]]:
        """The untaken candidates on ``node`` up to position ``last``, with their GPUs
        there, in victim order."""
        return [(cand, g) for pos, cand, g in self.on.get(node, ()) if pos <= last]

    def search(self, need: tuple[int, ...], soon: FreeMap, floor: float
               ) -> list[Candidate] | None:
        """The victims :func:`_choose_victims` would choose for a waiter of level ``-floor``
        (None: none; ``_FAR``: a case left to the walk). ``soon`` changes as there."""
        self.free = soon.free
        if self.dirty:
            self._flush()
        stop = self._stop(floor)
        if len(need) == 1:
            gpus = need[0]
            heap = self._heap(gpus)
            got: dict[int, int] = {}
            first = self._pop(heap, gpus, got)
            hit = -1
            if first is not None and 0 <= first[0] < stop:
                hit = first[1]
                nodes = self.items[first[0]][4]
                if len(nodes) > 1:   # other nodes of the candidate may reach there too:
                    hits = [hit]     # the walk keeps the last of them
                    while (more := self._pop(heap, gpus, got)) is not None \
                            and more[0] == first[0]:
                        hits.append(more[1])
                    hit = max(hits, key=nodes.index)
            self._restore(heap, got)
            if first is None or first[0] >= stop:
                return None
            if hit < 0:
                return _FAR
            return keep_needed(self._mine(hit, first[0]), soon.free[hit], gpus, soon)
        order = sorted((max(n, 1) for n in need), reverse=True)
        last = -1
        for j, v in enumerate(order):
            if j + 1 < len(order) and order[j + 1] == v:
                continue   # v's count is where its last entry stands
            heap, got = self._heap(v), {}
            found = None
            for _ in range(j + 1):
                found = self._pop(heap, v, got)
                if found is None or found[0] >= stop:
                    break
            self._restore(heap, got)
            if found is None or found[0] >= stop:
                return None
            last = max(last, found[0])
        if last < 0:
            return _FAR
        # nodes whose free GPUs plus the candidates' up to ``last`` reach the smallest entry
        # (only those can host an entry; the others place_with cannot pick either)
        v = order[-1]
        heap, got = self._heap(v), {}
        while (found := self._pop(heap, v, got)) is not None and found[0] <= last:
            pass
        self._restore(heap, got)
        extra: dict[int, int] = {}
        for node, exact in got.items():
            if exact <= last:
                extra[node] = sum(g for _, g in self._mine(node, last))
        hosts = soon.place_with(extra, need)
        if hosts is None:
            return _FAR
        keep: dict[int, tuple[int, Candidate]] = {}
        for node in set(hosts):
            for pos, cand, _ in self.on.get(node, ()):
                if pos <= last:
                    keep[cand[2]] = (pos, cand)
        return _drop_unneeded([cand for _, cand in sorted(keep.values(), key=itemgetter(0))],
                              need, soon)

    def taken(self, victims: list[Candidate]) -> None:
        """``victims`` were taken and their GPUs added to ``soon``: their nodes' reach may
        have come earlier; the next search pushes it (once the waiter's reservation,
        which follows, has been made: fewer entries to correct)."""
        for cand in victims:
            self.dirty.update(cand[4])

    def _flush(self) -> None:
        taken = self.taken_ids
        for node in self.dirty:
            self.on[node] = [e for e in self.on[node] if e[1][2] not in taken]
            for v, heap in self.heaps.items():
                r = self._reach(node, v)
                if r is not None:
                    heappush(heap, (r, node))
        self.dirty.clear()


def _choose_victims(need: tuple[int, ...], soon: FreeMap, waiter_level: float,
                    candidates: Iterable[Candidate], taken: set[int]
                    ) -> list[Candidate] | None:
    """Victims for one waiter (see :func:`_victims_for_gang`); a one-node waiter takes the
    arithmetic shortcut :func:`_victims_for_one_node`, which gives the same victims."""
    if len(need) == 1:
        return _victims_for_one_node(need[0], soon, -waiter_level, candidates, taken)
    return _victims_for_gang(need, soon, -waiter_level, candidates, taken)


_FAR: list[Candidate] = []   # _victims_for_one_node's "no hit within ``limit``"
#: what a ``one_node`` helper of :func:`find_preemptions` returns to leave a search to the
#: walk over the candidates
DEFER: list[Candidate] = []


def _victims_for_one_node(gpus: int, soon: FreeMap, floor: float,
                          candidates: Iterable[Candidate], taken: set[int],
                          limit: int = 0) -> list[Candidate] | None:
    """Same rule as :func:`_victims_for_gang` for a waiter needing ``gpus`` on one node:
    the first node whose free GPUs plus those of the victims taken so far reach ``gpus``
    hosts it; only victims on that node are kept, newest dropped first while it fits.
    ``floor``: minus the waiter's level (candidates from there on are not below it).
    ``limit`` > 0: give up (returning ``_FAR``, ``soon`` unchanged) once that many untaken
    candidates were walked without a hit."""
    extra: dict[int, int] = {}
    chosen: list[Candidate] = []
    hit = -1
    free = soon.free
    for cand in candidates:
        if cand[0] >= floor:
            break
        if cand[2] in taken:
            continue
        if len(chosen) == limit and limit:
            return _FAR
        chosen.append(cand)
        nodes = cand[4]
        if len(nodes) == 1:
            node = nodes[0]
            have = extra.get(node, 0) + cand[3][0]
            extra[node] = have
            if free[node] + have >= gpus:
                hit = node
                break
            continue
        for node, g in zip(nodes, cand[3]):
            have = extra.get(node, 0) + g
            extra[node] = have
            if free[node] + have >= gpus:
                hit = node
        if hit >= 0:
            break
    if hit < 0:
        return None
    mine = [(cand, g) for cand in chosen for node, g in zip(cand[4], cand[3]) if node == hit]
    return keep_needed(mine, free[hit], gpus, soon)


def keep_needed(mine: list[tuple[Candidate, int]], free_gpus: int, gpus: int,
                soon: FreeMap) -> list[Candidate]:
    """The victims a one-node need of ``gpus`` GPUs keeps of ``mine`` (candidates in victim
    order with the GPUs each frees on the chosen node, which has ``free_gpus`` free): the last
    one always (it made the need fit), an earlier one only if the need no longer fits without
    it, so no job is preempted for nothing. The kept victims' GPUs are added to ``soon``."""
    have = free_gpus + sum(g for _, g in mine)
    keep = [True] * len(mine)
    for i in range(len(mine) - 2, -1, -1):
        if have - mine[i][1] >= gpus:
            have -= mine[i][1]
            keep[i] = False
    kept = [cand for (cand, _), k in zip(mine, keep) if k]
    for cand in kept:
        soon.add(cand[4], cand[3])
    return kept


def _victims_for_gang(need: tuple[int, ...], soon: FreeMap, floor: float,
                      candidates: Iterable[Candidate], taken: set[int]
                      ) -> list[Candidate] | None:
    """Victims for one waiter: take ``candidates`` in order (strictly lower priority than
    the waiter, i.e. ``-level < floor``, not yet taken) until ``need`` fits, then keep only
    those on the nodes the waiter will use and drop, newest first, any of those it can do
    without. On success the victims' GPUs stay added to ``soon``; on failure ``soon`` is
    left unchanged."""
    chosen: list[Candidate] = []
    nodes = None
    free = soon.free
    # ``need`` fits iff, for its j-th largest entry n_j, at least j nodes have n_j GPUs
    # free (entries on distinct nodes; FreeMap.place finds a placement whenever one
    # exists, and puts an entry of 0 GPUs, a GPU-less hetjob component, only on a node
    # with a free GPU, so it counts as 1): count such nodes as victims are added, place
    # only once that holds
    order = sorted((max(n, 1) for n in need), reverse=True)
    sizes = sorted(set(order))
    have = {v: soon.count_at_least(v) for v in sizes}
    extra: dict[int, int] = {}   # GPUs of the chosen victims per node (not yet in soon)
    for cand in candidates:
        if cand[0] >= floor:
            break
        if cand[2] in taken:
            continue
        rose = False
        for node, g in zip(cand[4], cand[3]):
            added = extra.get(node, 0)
            before = free[node] + added
            extra[node] = added + g
            for v in sizes:
                if before < v <= before + g:
                    have[v] += 1
                    rose = True
        chosen.append(cand)
        if rose and all(have[n] >= j for j, n in enumerate(order, 1)):
            nodes = soon.place_with(extra, need)
            if nodes is not None:
                break
    if nodes is None:
        return None
    used = set(nodes)
    return _drop_unneeded([cand for cand in chosen if not used.isdisjoint(cand[4])], need, soon)


def _drop_unneeded(keep: list[Candidate], need: tuple[int, ...], soon: FreeMap
                   ) -> list[Candidate]:
    """The tail of :func:`_victims_for_gang`: ``keep`` (the chosen victims on the nodes the
    waiter will use, in victim order) are added to ``soon``, then each but the last is
    dropped again, newest first, if ``need`` still fits without it. Returns those kept."""
    for cand in keep:
        soon.add(cand[4], cand[3])
    needed = [True] * len(keep)
    for i in range(len(keep) - 2, -1, -1):
        cand = keep[i]
        soon.add(cand[4], [-g for g in cand[3]])
        if soon.place(need) is None:
            soon.add(cand[4], cand[3])
        else:
            needed[i] = False
    return [cand for cand, keep_it in zip(keep, needed) if keep_it]


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
    last run + ``starve_knob ×`` that run's length), or None when it is not
    :func:`promotable`."""
    if not promotable(job, POLICIES[config.policy].promotes, config.starve_knob):
        return None
    assert job.last_run_end is not None   # promotable
    return job.last_run_end + config.starve_knob * job.last_run_s
