"""Act: persist the policy's decisions and tell Slurm only what changed, batched.

Last step of the daemon cycle (docs/design.md, code rules 2-3). ``decide`` (prioritizer.policy.decide) said each
job's queue level and queue-entry time; this module

* records the queue states in the ledger and logs each change with the policy's reason;
* **mode priority**: turns (queue, queue-entry time) into one integer per pending job, given to
  Slurm as the job's ``SiteFactor`` (added to the multifactor sum, keeps the site's other
  factors; docs/design.md, "Changing state") or, by config, its absolute priority.
  ``value = (K-1-queue) × step + inqueue + 1`` where ``inqueue = span-1-clamp(entry-ref)`` gives
  older entries more points (1 per second over ``inqueue_span_s``) and
  ``step = span + W + 1``, W being the sum of the site's other ``PriorityWeight*`` settings
  (``scontrol show config``; each factor is weight × [0, 1], priority/multifactor(5)): the
  lowest job of a queue outranks the highest of the next queue whatever the other factors add;
* **mode partition**: moves pending jobs to ``queue_partitions[queue]``.

Only differences are sent: a job's value changes only when its queue or queue-entry time does
(the last value sent is kept in the ledger), one ``scontrol update jobid=a,b,c`` per value (in
pieces of at most :data:`PIECE_IDS` ids, :data:`SEND_WORKERS` calls at a time). scontrol sends
one request per id (seen with strace on 22.05: one connection to slurmctld per job id), about
1 ms each on a small controller, so at most ``update_budget`` jobs are sent per cycle, head of
the policy's start order first (:func:`plan`); the rest wait for the next cycles.
After an update, the next cycle compares what squeue shows with what was asked and logs a
mismatch. Preemptions are handed to :mod:`prioritizer.daemon.preempt`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.log import CycleAdapter, event
from prioritizer.daemon.ledger import Ledger
from prioritizer.policy.model import Decisions, JobPhase
from prioritizer.daemon.observe import Observation
from slurm_plugin.slurm.client import SlurmClient, SlurmRefused, SlurmUnreachable, JobUnknown

WEIGHT_KEYS = ("PriorityWeightAge", "PriorityWeightAssoc", "PriorityWeightFairShare",
               "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS")
REF_SLACK_S = 86400
MAX_VALUE = 2**31 - 1
#: Most job ids in one ``scontrol update`` call, and how many such calls run at once: scontrol
#: sends one request per id and slurmctld serves requests in parallel threads (only the job
#: update itself holds its job write lock), so four calls at once take about half the time of
#: one call with every id (measured: 1,000 ids 1.37 s in one call, 0.69 s in four).
PIECE_IDS = 250
SEND_WORKERS = 4


class OrderError(ValueError):
    """The priority encoding does not fit Slurm's 32-bit priority (names the settings)."""


def other_weights(show_config: Mapping[str, str]) -> int:
    """Sum of the site's ``PriorityWeight*`` settings (incl. each ``PriorityWeightTRES`` entry).

    ``show_config``: ``scontrol show config`` as a mapping. Missing or ``(null)`` values count 0.
    """
    total = 0
    for key in WEIGHT_KEYS:
        m = re.match(r"\s*(\d+)", show_config.get(key, "") or "")
        total += int(m.group(1)) if m else 0
    for part in (show_config.get("PriorityWeightTRES", "") or "").split(","):
        m = re.search(r"=\s*(\d+)", part)
        total += int(m.group(1)) if m else 0
    return total


@dataclass(frozen=True)
class Encoding:
    """How (queue, entry time) becomes one integer (see module doc). Times are epoch s."""

    queues: int
    span: int
    weights: int
    ref: float

    @property
    def step(self) -> int:
        return self.span + self.weights + 1

    def check(self) -> None:
        """Raise :class:`OrderError` when the top value would overflow 2**31-1."""
        top = (self.queues - 1) * self.step + self.span
        if top > MAX_VALUE:
            raise OrderError(
                f"inqueue_span_s={self.span} with {self.queues} queues and PriorityWeight* sum "
                f"{self.weights} needs values up to {top} > {MAX_VALUE}; lower inqueue_span_s")

    def value(self, queue: int, entry: float) -> int:
        """The SiteFactor/priority of a pending job in ``queue`` entered at ``entry``."""
        age = min(max(int(entry - self.ref), 0), self.span - 1)
        return (self.queues - 1 - min(queue, self.queues - 1)) * self.step + (self.span - 1 - age) + 1


def targets(decisions: Decisions, obs: Observation, cfg: DaemonConfig,
            enc: Encoding | None) -> dict[int, str]:
    """The value each managed pending job should carry, as the ledger stores it.

    ``site_factor:N`` / ``priority:N`` (mode priority; ``enc`` required) or ``partition:P``.
    """
    out: dict[int, str] = {}
    memo: dict[tuple[int, float], str] = {}   # many jobs share (queue, entry): 10,000 a cycle
    states, units = decisions.states, obs.units
    ranked = cfg.virtual_clusters is not None and enc is not None
    for rank, job_id in enumerate(decisions.order):
        state = states.get(job_id)
        unit = units.get(job_id)
        if (state is None or unit is None or unit.phase is not JobPhase.PENDING
                or unit.held):   # Slurm refuses updates of held jobs
            continue
        # with tenants the order crosses queues (policy.tenants): one point per rank in
        # the top band carries it
        key = (0, enc.ref + rank) if ranked else (state.queue, state.queue_entry_time)  # type: ignore[union-attr]
        value = memo.get(key)
        if value is None:
            if cfg.mode == "partition":
                value = f"partition:{cfg.queue_partitions[min(key[0], len(cfg.queue_partitions) - 1)]}"
            else:
                assert enc is not None
                value = f"{cfg.priority_field}:{enc.value(*key)}"
            memo[key] = value
        out[job_id] = value
    return out


def victim_values(decisions: Decisions, obs: Observation, cfg: DaemonConfig,
                  enc: Encoding | None, victims: list[int]) -> dict[int, str]:
    """The value each victim (a RUNNING job about to be requeued) gets *before* its requeue:
    the one :func:`targets` will give it once pending, from its own queue state (a victim's
    queue is below its waiter's, so the waiter outranks it at once); with tenants the
    lowest value of the last queue (:func:`targets` ranks it at the next cycle)."""
    out: dict[int, str] = {}
    for job_id in victims:
        state = decisions.states.get(job_id)
        if state is None:
            continue
        if cfg.mode == "partition":
            out[job_id] = f"partition:{cfg.queue_partitions[min(state.queue, len(cfg.queue_partitions) - 1)]}"
        elif enc is not None and cfg.virtual_clusters is not None:
            # tenants: a reclaim's victim may sit in queue 0 beside its waiter; the lowest
            # band keeps it behind every job of the order until the next cycle ranks it
            out[job_id] = f"{cfg.priority_field}:{enc.value(enc.queues - 1, obs.now)}"
        elif enc is not None:
            out[job_id] = f"{cfg.priority_field}:{enc.value(state.queue, state.queue_entry_time)}"
    return out


def diff(wanted: Mapping[int, str], current: Mapping[int, str | None]) -> dict[str, list[int]]:
    """Jobs whose value must change, grouped by value (one Slurm call per key), ids sorted."""
    batches: dict[str, list[int]] = {}
    for job_id in sorted(wanted):
        if current.get(job_id) != wanted[job_id]:
            batches.setdefault(wanted[job_id], []).append(job_id)
    return batches


@dataclass(frozen=True)
class Plan:
    """What one cycle sends: ``batches`` (value → job ids, as :func:`diff`) and ``left``, the
    number of jobs whose value differs but waits for a later cycle (the budget was spent)."""

    batches: dict[str, list[int]]
    left: int


def plan(wanted: Mapping[int, str], current: Mapping[int, str | None], budget: int,
         urgent: Collection[int] = ()) -> Plan:
    """The jobs to update this cycle: those whose value differs, in ``wanted``'s order (the
    policy's start order: :func:`targets` follows ``decisions.order``), at most ``budget`` of
    them (0 = no limit), the ``urgent`` ones (a preemption's waiter) always and first.

    The head of the start order is what Slurm may start next (its main scheduler looks at the
    first ``default_queue_depth`` jobs, backfill at ``bf_max_job_test``; slurm.conf(5)), so it
    gets its value first; a job not sent yet keeps the value it had (docs/dlprio.md, "Scale").
    """
    changed = [j for j, v in wanted.items() if current.get(j) != v]
    first = [j for j in changed if j in urgent]
    rest = [j for j in changed if j not in urgent]
    take = first + (rest if budget <= 0 else rest[:max(budget - len(first), 0)])
    return Plan(diff({j: wanted[j] for j in take}, current), len(changed) - len(take))


def current_values(ledger: Ledger, obs: Observation, cfg: DaemonConfig) -> dict[int, str | None]:
    """What each job carries now: the ledger's last sent value, or Slurm's partition."""
    if cfg.mode == "partition":
        return {j: f"partition:{u.partition}" for j, u in obs.units.items()}
    return {r.job_id: r.applied for r in ledger.jobs(active_only=True)}


@dataclass
class PushResult:
    """What :func:`push` sent: job ids Slurm accepted and refused (with its text)."""

    accepted: list[int]
    refused: list[tuple[int, str]]


def push(client: SlurmClient, ledger: Ledger, batches: Mapping[str, list[int]],
         log: CycleAdapter, *, now: float = 0.0, backoff_s: float = 0.0,
         backoff_max_s: float = 0.0, workers: int = SEND_WORKERS,
         targets: Mapping[int, int | str] | None = None) -> PushResult:
    """Send each batch as ``scontrol update`` calls of at most :data:`PIECE_IDS` ids, up to
    ``workers`` at a time; on a refusal retry that piece's jobs one by one (Slurm updates the
    valid ids of a list anyway) so a single ended job costs nothing else. Records what was
    accepted (one transaction, in this thread: the ledger is not thread-safe); a refused job
    backs off (next try after ``backoff_s``, doubling per refusal in a row up to
    ``backoff_max_s``; see :func:`without_backoff`) instead of being re-sent every cycle.
    ``targets``: what ``scontrol update`` names for a job, where not its id
    (:attr:`~prioritizer.daemon.observe.Unit.update_target`: an array's pending tasks).
    Raises SlurmUnreachable after recording what went through."""
    pieces = [(value, ids[k:k + PIECE_IDS]) for value, ids in batches.items()
              for k in range(0, len(ids), PIECE_IDS)]
    named = targets or {}
    if len(pieces) > 1 and workers > 1:
        with ThreadPoolExecutor(min(workers, len(pieces))) as pool:
            outcomes = list(pool.map(lambda p: _send_piece(client, p[0], p[1], named), pieces))
    else:
        outcomes = [_send_piece(client, value, ids, named) for value, ids in pieces]
    result = PushResult([], [])
    with ledger.transaction():
        for (value, _), (accepted, refused, _) in zip(pieces, outcomes):
            ledger.set_applied(accepted, value)
            ledger.clear_refused(accepted)
            ledger.note_refused(refused, now, backoff_s, backoff_max_s)
    for (value, _), (accepted, refused, _) in zip(pieces, outcomes):
        for job_id, text in refused:
            event(log, "update_refused", job_id, logging.WARNING, value=value, slurm=text)
        for job_id in accepted:
            event(log, "order_set", job_id, value=value)
        result.accepted.extend(accepted)
        result.refused.extend(refused)
    lost = next((o[2] for o in outcomes if o[2] is not None), None)
    if lost is not None:
        raise lost
    return result


def _send_piece(client: SlurmClient, value: str, ids: list[int],
                targets: Mapping[int, int | str]
                ) -> tuple[list[int], list[tuple[int, str]], SlurmUnreachable | None]:
    """One piece (see :func:`push`): (accepted ids, refused (id, Slurm's text), the
    SlurmUnreachable that stopped it or None). Runs in a worker thread: no ledger, no log."""
    field, _, arg = value.partition(":")
    accepted: list[int] = []
    refused: list[tuple[int, str]] = []
    try:
        try:
            send(client, field, [targets.get(j, j) for j in ids], arg)
            return list(ids), [], None
        except (SlurmRefused, JobUnknown):
            for job_id in ids:
                try:
                    send(client, field, [targets.get(job_id, job_id)], arg)
                    accepted.append(job_id)
                except (SlurmRefused, JobUnknown) as exc:
                    refused.append((job_id, exc.message))
    except SlurmUnreachable as exc:
        return accepted, refused, exc
    return accepted, refused, None


def without_backoff(wanted: Mapping[int, str], ledger: Ledger, now: float) -> dict[int, str]:
    """``wanted`` less the jobs whose refused update may not be re-sent before a later time."""
    waiting = ledger.backing_off(now)
    return {j: v for j, v in wanted.items() if j not in waiting}


def send(client: SlurmClient, field: str, ids: Sequence[int | str], arg: str) -> None:
    """One ``scontrol update`` of ``field`` (``partition``, ``priority``, ``site_factor``) of
    the jobs ``ids`` names (job ids, or an array's tasks ``40_[5-9]``)."""
    if field == "partition":
        client.set_partition(ids, arg)
    elif field == "priority":
        client.set_priority(ids, int(arg))
    else:
        client.set_site_factor(ids, int(arg))


def readback(ledger: Ledger, obs: Observation, cfg: DaemonConfig, log: CycleAdapter,
             skip: Collection[int] = ()) -> int:
    """Compare squeue with what was sent before; log mismatches and forget the value sent, so
    that this cycle sends it again. Returns the number of mismatches.

    Absolute priority must equal the value; a SiteFactor is part of the sum, so priority must
    be at least the value. (Mode partition compares Slurm's partition directly each cycle.) A
    held job (:attr:`~prioritizer.daemon.observe.Unit.held`) is compared with nothing: a hold
    sets its priority to 0 and it gets no update while held; its value is kept, so that once
    released a priority Slurm did not keep is a mismatch again. Nor are the jobs of ``skip``
    (a priority Slurm keeps fixed: ``Daemon.note_priority_field``).
    """
    if cfg.mode == "partition":
        return 0
    bad: list[int] = []
    asked: dict[str, int | None] = {}   # parsed applied values: many jobs share one
    exact = cfg.priority_field == "priority"
    for row in ledger.jobs(active_only=True):
        if not row.applied:
            continue
        unit = obs.units.get(row.job_id)
        if unit is None or unit.phase is not JobPhase.PENDING or unit.held or row.job_id in skip:
            continue
        if row.applied not in asked:
            field, _, arg = row.applied.partition(":")
            asked[row.applied] = int(arg) if field == cfg.priority_field else None
        want = asked[row.applied]
        if want is None:
            continue
        if (unit.priority != want) if exact else (unit.priority < want):
            bad.append(row.job_id)
            event(log, "readback_mismatch", row.job_id, logging.WARNING, asked=row.applied,
                  slurm_priority=unit.priority)
    with ledger.transaction():
        ledger.set_applied(bad, None)
    return len(bad)


def record_states(decisions: Decisions, ledger: Ledger, obs: Observation, log: CycleAdapter,
                  now: float) -> list[tuple[int, int | None, int, str]]:
    """Persist every decided queue state; log changes. Returns (job, from, to, reason) changes."""
    rows = {r.job_id: r for r in ledger.jobs(active_only=True)}
    promoted = set(decisions.promotions)
    changes = []
    with ledger.transaction():
        for job_id, st in sorted(decisions.states.items()):
            before = rows.get(job_id)
            old = before.queue if before else None
            if (before is not None and not st.changed and job_id not in promoted
                    and (before.queue, before.queue_entry_time, before.service_base_gpu_s)
                    == (st.queue, st.queue_entry_time, st.service_base_gpu_s)):
                continue   # nothing to write (no statement per unchanged job)
            ledger.set_queue(job_id, st.queue, st.queue_entry_time, st.service_base_gpu_s,
                             st.reason if st.changed else None, now, job_id in promoted)
            if st.changed:
                changes.append((job_id, old, st.queue, st.reason))
    for job_id, old, new, reason in changes:
        name = "promoted" if job_id in promoted else ("new" if old is None else "queue_changed")
        fields: dict[str, Any] = {"from": old, "to": new, "reason": reason}
        event(log, name, job_id, **fields)
    return changes
