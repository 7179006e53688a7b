"""The reconcile loop of ``dlprio run`` / ``dlprio once``: observe → decide → act, every interval.

The imperative shell around the pure policy (docs/design.md, "Ledger and daemon"; code rules 1-3,
after kopf's reconcile loop): :meth:`Daemon.cycle` reads Slurm once (:mod:`prioritizer.daemon.observe`),
calls ``prioritizer.policy.decide.decide`` with the wall clock, and applies only the differences
(:mod:`prioritizer.daemon.act`, :mod:`prioritizer.daemon.preempt`), then writes the public snapshot for
``dlqueue`` and updates the metrics. :meth:`Daemon.run` repeats it; when Slurm does not answer
it logs, backs off (interval doubling up to ``backoff_max_s``) and resumes with the ledger
intact. ``dry_run`` changes nothing in Slurm (no update, signal or requeue) and prints the
decisions; the ledger it is given still records what was observed (``dlprio once --dry-run``
gives it an in-memory copy: :class:`prioritizer.daemon.ledger.Ledger` ``scratch``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from prioritizer import tables
from prioritizer.daemon import act
from prioritizer.daemon.auto_tune import AutoTuner, dropped, in_force
from prioritizer.daemon.act import Encoding
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.log import CycleAdapter, event
from prioritizer.daemon.forecasts import Forecaster
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.config_file import LEARNED_SAMPLES
from prioritizer.daemon.learned_gittins import HistoryDistribution
from prioritizer.samplesfile import load_distribution
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.lease import ClusterLease
from prioritizer.daemon.metrics import Metrics
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.model import Decisions
from prioritizer.policy.tenant_decide import TenantDecisions, decide_tenants
from prioritizer.policy.tenants import Resources
from prioritizer.daemon import tenants_view
from prioritizer.daemon.names_check import preflight
from prioritizer.policy.validation import ConfigError
from slurm_plugin.common.cli import visible
from prioritizer.daemon.observe import Observation, UnitCache, observe
from prioritizer.policy.sharing import decide_shared
from prioritizer.daemon.preempt import Preemptor
from prioritizer.daemon.snapshot import PublicJob, PublicSnapshot, PublicTenant, write_snapshot
from slurm_plugin.slurm.client import SlurmClient, SlurmError, SlurmUnreachable
from slurm_plugin.slurm.records import requeue_delay_s

#: ``--dry-run`` decisions table: RANK is the start order ("-": running, not ranked), QUEUE as
#: in dlqueue and dlprio status, attained service in GPU·s, TARGET the value sent to Slurm.
DECISION_HEADERS = ("RANK", "JOBID", "STATE", "QUEUE", "ATTAINED(GPU·s)", "TARGET", "REASON")
_DECISION_RIGHT = frozenset({"RANK", "JOBID", "ATTAINED(GPU·s)"})
PRUNE_EVERY_S = 3600.0   # how often the ledger's retention runs (seconds)
#: The least wait (seconds) before a cycle woken early for a victim's grace end: a deadline
#: just passed (its requeue refused, or Slurm slow) never makes the loop spin.
MIN_WAKE_S = 1.0


def retry_wait(cfg: DaemonConfig, failures: int, elapsed: float) -> float:
    """Seconds to wait after the ``failures``-th failed try in a row at Slurm (a cycle, or
    ``run`` taking its lease) whose call blocked ``elapsed`` s: tries *start*
    ``interval_s × 2^(failures-1)`` apart, at most ``backoff_max_s``."""
    gap = min(cfg.backoff_max_s, cfg.interval_s * 2 ** min(failures - 1, 16))
    return max(gap - elapsed, 0.0)


class Daemon:
    """One daemon bound to a ledger (the caller holds its lock) and a Slurm client.

    Args:
        cfg: the daemon configuration.
        client, ledger, log: collaborators (a test may pass its own).
        metrics: series to update (None: a private, unserved set).
        clock: epoch seconds (docs/design.md, code rule 10).
        dry_run: decide and print, change nothing in Slurm.
        out: where ``dry_run`` prints.
        lease: the cluster lease this daemon holds (checked every cycle before acting).
        distribution: ``tiresias-gittins``'s samples when already read (the commands read
            ``gittins_samples`` with the config, before the ledger is opened:
            :func:`prioritizer.daemon.cli.gittins_samples`); None: read here.
        auto_tune: run ``auto_tune``'s replays when the config enables it (``dlprio run``;
            ``dlprio once`` decides with the settings in force and starts no replay).
        checked: the config was checked against the cluster already
            (:func:`prioritizer.daemon.names_check.preflight`); False: the first cycle does.
        source: the config file, named in the first cycle's check's lines (None: unnamed).

    Raises:
        ValueError: ``gittins_samples`` names a file that cannot be read or parsed.
    """

    def __init__(self, cfg: DaemonConfig, client: SlurmClient, ledger: Ledger, log: CycleAdapter,
                 metrics: Metrics | None = None, clock: Callable[[], float] = time.time,
                 dry_run: bool = False, out: TextIO | None = None,
                 lease: ClusterLease | None = None,
                 distribution: GittinsDistribution | None = None,
                 auto_tune: bool = False, checked: bool = False,
                 source: str | None = None) -> None:
        self.cfg, self.client, self.ledger, self.log = cfg, client, ledger, log
        self.lease = lease
        self.metrics = metrics or Metrics()
        policy, adopted = in_force(cfg, ledger)   # auto_tune's adopted settings, if any
        if adopted is not None:
            self.cfg = dataclasses.replace(cfg, policy=policy)
            event(log, "auto_tune_in_force", settings=adopted["label"], since=adopted["at"])
        elif (gone := dropped(cfg, ledger)) is not None:
            event(log, "auto_tune_dropped", settings=gone.get("label"), since=gone.get("at"),
                  reason="the config's policy: section changed since it was tuned; its own "
                  "settings are in force")
        self.tuner = (AutoTuner(cfg, ledger, log, self.metrics, cfg.call_timeout_s)
                      if auto_tune and cfg.auto_tune.enabled and not dry_run else None)
        self.clock = clock
        self.dry_run = dry_run
        self.out = out or sys.stdout
        self.preemptor = Preemptor(client, ledger, self.cfg, log)
        uses = cfg.policy.uses_distribution   # tiresias-gittins, or preempt_gain
        self.learner = (HistoryDistribution(cfg.gittins_min_samples, cfg.gittins_refresh_s)
                        if uses and cfg.gittins_samples == LEARNED_SAMPLES else None)
        self.distribution: GittinsDistribution | None = (
            (distribution or load_distribution(cfg.gittins_samples))
            if uses and self.learner is None else None)
        self._encoding: act.Encoding | None = None
        self._units: UnitCache = {}   # observe's units of the last cycle
        self._slurm_config_read = False
        self.cluster: str | None = None   # Slurm's ClusterName (read_slurm_config)
        #: jobs Slurm keeps at a priority set under ``priority_field: priority`` once the
        #: daemon writes SiteFactors instead (:meth:`note_priority_field`): no update for them
        self.fixed_priority: frozenset[int] = frozenset()
        self.pushed = act.PushResult([], [])   # the last cycle's updates (``dlprio once``)
        self.backlog = 0   # jobs whose value the last cycle left for later (update_budget)
        self.forecaster = Forecaster(cfg.forecast, cfg.interval_s, log,
                                     None if dry_run else self.ledger)
        #: forecasts are made while :meth:`run` loops (``dlprio once`` makes none)
        self.forecasting = False
        #: the forecasts' duration distribution when the policy learns none
        self.forecast_learner = (HistoryDistribution(cfg.gittins_min_samples,
                                                     cfg.gittins_refresh_s)
                                 if self.forecaster.enabled and not uses else None)
        self.tenancy = cfg.tenancy
        # the config checked against the cluster (names_check.preflight, ``checked``), else
        # at the first cycle: the virtual clusters, and partitions, exempt_partitions,
        # exempt_accounts
        self.names_checked, self.source = checked, source
        #: the last cycle's tenant decision (None without virtual_clusters)
        self.tenant_decisions: TenantDecisions | None = None
        self.tenant_usage: dict[str, Resources] | None = None   # decayed, with a half-life

    # ------------------------------------------------------------------ one cycle
    def cycle(self) -> Decisions:
        """Run one observe → decide → act cycle. Raises SlurmError (e.g. SlurmUnreachable)."""
        started = time.monotonic()
        now = self.clock()
        self.log.cycle = self.ledger.next_cycle()
        if not self._slurm_config_read:
            self.read_slurm_config()
        if not self.names_checked:   # a typo there would go unseen: ConfigError, nothing sent
            preflight(self.cfg, self.client, self.source, self.log)
            self.names_checked = True
        obs = observe(self.client, self.ledger, self.cfg, now, self.log, self._units)
        if self.lease is not None:
            self.lease.check(obs.lease_jobs, now)    # fencing: raises LeaseLost, acts on nothing
        if self.learner is not None:   # gittins_samples: history
            self.distribution = self.learner.current(self.client, self.ledger, now, self.log)
        if self.tenancy is None:
            decisions = decide_shared(obs.snapshot, self.cfg.policy, now, obs.shares,
                                      distribution=self.distribution)
        else:
            decisions = self.decide_tenants(obs, now)
        if self.dry_run:
            self.print_decisions(decisions, obs)
        else:
            self.forecast(decisions, obs)
            self.act(decisions, obs)
            self.prune(now)
        if self.tuner is not None:   # never waits: starts or collects the replay child
            adopted = self.tuner.poll(now, self.cfg.policy)
            if adopted is not None:
                self.adopt(adopted)
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.last_cycle.set(now)
        return decisions

    def forecast(self, decisions: Decisions, obs: Observation) -> None:
        """Start-time forecasts (:mod:`prioritizer.daemon.forecasts`): take a ready one, start
        one when due; the work is a child process's, never this cycle's."""
        if not (self.forecasting and self.forecaster.enabled):
            return
        try:
            if self.forecast_learner is not None:
                distribution = self.forecast_learner.current(self.client, self.ledger,
                                                             obs.now, self.log)
            else:
                distribution = self.distribution or load_distribution(self.cfg.gittins_samples)
            learner = self.forecast_learner or self.learner
            self.forecaster.tick(self.log.cycle, obs, decisions, self.cfg.policy,
                                 distribution, self._units,
                                 learned=learner is not None and learner.learned,
                                 tenants=self.tenancy is not None)
        except (ValueError, OSError, SlurmError) as exc:   # a forecast never stops a cycle
            event(self.log, "forecast_failed", level=logging.ERROR, error=str(exc))

    def adopt(self, policy: PolicyConfig) -> None:
        """Decide with ``policy`` from the next cycle on (an ``auto_tune`` switch)."""
        self.cfg = dataclasses.replace(self.cfg, policy=policy)
        self.preemptor.cfg = self.cfg

    def decide_tenants(self, obs: Observation, now: float) -> Decisions:
        """The decision with tenants (``policy.tenant_decide``; the virtual clusters were
        checked against the cluster before, :func:`prioritizer.daemon.names_check.preflight`),
        the decayed usage kept in the ledger (meta ``tenant_usage``)."""
        assert self.tenancy is not None
        usage = tenants_view.advance_usage(self.ledger, self.tenancy, obs, now)
        found = decide_tenants(obs.snapshot, self.cfg.policy, now, self.tenancy,
                               tenants_view.owners(self.tenancy, obs), usage=usage,
                               distribution=self.distribution, awaiting=obs.awaiting)
        self.tenant_decisions, self.tenant_usage = found, usage
        self.metrics_tenants(obs, found)
        return found.decisions

    def metrics_tenants(self, obs: Observation, found: TenantDecisions) -> None:
        """Per tenant: GPUs guaranteed, held, borrowed, waiting (``dlprio_tenant_gpus``),
        kept in the ledger for ``dlprio status`` and ``explain`` too."""
        assert self.tenancy is not None
        table = tenants_view.rows(self.tenancy, obs, self.tenant_usage)
        if not self.dry_run:
            tenants_view.record(self.ledger, table, found)
        self.metrics.set_tenants((r.name, r.guaranteed, r.used, r.borrowed, r.waiting)
                                 for r in table)

    def prune(self, now: float) -> int:
        """Once an hour: drop jobs that ended more than ``retention_days`` ago (0: never).
        Returns the number of jobs dropped (logged when any)."""
        if not self.cfg.retention_days:
            return 0
        last = float(self.ledger.meta("pruned_at") or 0)
        if now - last < PRUNE_EVERY_S:
            return 0
        dropped = self.ledger.prune(now - self.cfg.retention_days * 86400)
        self.ledger.set_meta("pruned_at", repr(now))
        if dropped:
            event(self.log, "ledger_pruned", jobs=dropped, retention_days=self.cfg.retention_days)
        return dropped

    def read_slurm_config(self) -> None:
        """Once per daemon, from ``scontrol show config`` (one call): the cluster's
        ``ClusterName`` (:attr:`cluster`, lower-cased as Slurm stores it; the snapshot carries
        it, so ``dlqueue`` on a host with several clusters can tell whose it is: Slurm's own
        answer, right whichever slurm.conf or configless source Slurm read, where the file
        ``SLURM_CONF`` names may be unset; the ledger keeps the first one it was written for
        and refuses another, :class:`ConfigError`, since job ids repeat across clusters), and
        a warning when Slurm preempts by itself too (``PreemptType`` other than
        ``preempt/none``): Slurm then requeues/cancels jobs of lower tiers for higher ones on
        its own, and both may act on the same job (docs/dlprio.md, "Failure modes"); and one
        when virtual clusters are ordered through the SiteFactor while Slurm's other
        ``PriorityWeight*`` settings are above 0: their factors, added to ranks one point
        apart, reorder jobs across tenants (``priority_field: priority`` avoids it)."""
        conf = self.client.show_config()
        self._slurm_config_read = True
        name = conf.get("ClusterName", "").strip().lower()
        self.cluster = name if name not in ("", "(null)") else None
        if self.cluster is not None:   # a ledger holds one cluster's job ids
            kept = self.ledger.meta("cluster")
            if kept is None:
                self.ledger.set_meta("cluster", self.cluster)
            elif kept != self.cluster:
                raise ConfigError(
                    f"ledger_path {visible(str(self.ledger.path))}: the ledger of Slurm cluster "
                    f"{visible(kept)}, but Slurm answers as cluster {visible(self.cluster)}: give "
                    "each cluster its own ledger_path (and snapshot_path), or point SLURM_CONF "
                    f"at {visible(kept)}")
        self.note_priority_field()
        self.note_requeue_delay(requeue_delay_s(conf))
        kind = conf.get("PreemptType", "preempt/none")
        if kind not in ("preempt/none", "(null)", ""):
            event(self.log, "slurm_preempts_too", level=logging.WARNING, preempt_type=kind,
                  preempt_mode=conf.get("PreemptMode", ""))
        weights = act.other_weights(conf)
        if (self.cfg.virtual_clusters is not None and self.cfg.mode == "priority"
                and self.cfg.priority_field != "priority" and weights > 0):
            event(self.log, "tenant_order_weak", level=logging.WARNING,
                  priority_field=self.cfg.priority_field, other_weights=weights,
                  fix="set priority_field: priority in dlprio.yaml: ranks across tenants are "
                      "one point apart, and Slurm's other PriorityWeight* factors added to "
                      "the SiteFactor reorder them (docs/admins.md, 'With Slurm's own limits')")

    def note_requeue_delay(self, delay_s: float) -> None:
        """The cluster's requeue delay (``cred_expire`` + 1 s,
        :func:`slurm_plugin.slurm.records.requeue_delay_s`) in the policy the daemon's own
        replays use (forecasts, ``auto_tune``), by the rule of
        :meth:`~prioritizer.policy.config.PolicyConfig.with_cluster_requeue_delay`: where
        ``policy.requeue_delay_s`` is left at its default (121 s); a value set in dlprio.yaml
        other than the default is kept."""
        policy = self.cfg.policy.with_cluster_requeue_delay(delay_s)
        if policy is not self.cfg.policy:
            self.adopt(policy)
            event(self.log, "requeue_delay_from_slurm", requeue_delay_s=delay_s)

    def note_priority_field(self) -> None:
        """Once per daemon: the ledger keeps the field the order was last written to (meta
        ``priority_field``: ``priority``, ``site_factor`` or ``partition`` for mode partition).
        A priority set with ``scontrol update priority=`` stays fixed until the job ends
        (multifactor no longer computes it; Slurm has no way to hand it back): when the
        daemon stops writing absolute priorities, the jobs that carry one (their last value
        sent) keep it, get no further update and are not read back (:attr:`fixed_priority`,
        meta ``fixed_priority_jobs``), and ``priority_field_changed`` says how many."""
        now_field = self.cfg.priority_field if self.cfg.mode == "priority" else "partition"
        kept = self.ledger.meta("priority_field")
        fixed = set(json.loads(self.ledger.meta("fixed_priority_jobs") or "[]"))
        if kept == "priority" and now_field != "priority":
            carry = {r.job_id for r in self.ledger.jobs(active_only=True)
                     if (r.applied or "").startswith("priority:")}
            fixed |= carry
            event(self.log, "priority_field_changed", level=logging.WARNING, was=kept,
                  now=now_field, fixed_jobs=len(carry),
                  note="Slurm keeps a priority set by scontrol until the job ends: those "
                       "jobs keep theirs and get no update (docs/admins.md)")
        if now_field == "priority":
            fixed = set()   # every job gets an absolute priority again
        if kept != now_field:
            self.ledger.set_meta("priority_field", now_field)
        self.ledger.set_meta("fixed_priority_jobs", json.dumps(sorted(fixed)))
        self.fixed_priority = frozenset(fixed)

    def act(self, decisions: Decisions, obs: Observation) -> None:
        """Persist states, send order differences, run preemptions, publish snapshot."""
        fixed = self.fixed_priority
        if fixed and not fixed <= obs.units.keys():   # ended: forgotten
            self.fixed_priority = fixed = fixed & obs.units.keys()
            if not self.dry_run:
                self.ledger.set_meta("fixed_priority_jobs", json.dumps(sorted(fixed)))
        act.readback(self.ledger, obs, self.cfg, self.log, skip=fixed)
        act.record_states(decisions, self.ledger, obs, self.log, obs.now)
        self.metrics.promotions.inc(len(decisions.promotions))
        targets = act.targets(decisions, obs, self.cfg, self.encoding(obs.now))
        for job_id in fixed & targets.keys():
            del targets[job_id]
        wanted = act.without_backoff(targets, self.ledger, obs.now)
        todo = act.plan(wanted, act.current_values(self.ledger, obs, self.cfg),
                        self.cfg.update_budget, {p.waiter for p in decisions.preemptions})
        self.note_backlog(todo.left)
        self.pushed = act.push(self.client, self.ledger, todo.batches, self.log, now=obs.now,
                               backoff_s=self.cfg.interval_s,
                               backoff_max_s=self.cfg.backoff_max_s,
                               targets={j: u.update_target for j, u in obs.units.items()
                                        if u.array_record or u.element})
        self.metrics.slurm_errors.labels(kind="refused").inc(len(self.pushed.refused))
        self.metrics.update_backoff.set(len(self.ledger.backing_off(obs.now)))
        rules = (self.tenant_decisions.preempt_reasons
                 if self.tenancy is not None and self.tenant_decisions is not None else None)
        self.metrics.preemptions.inc(len(self.preemptor.start(decisions.preemptions, obs, rules)))
        lowered = act.victim_values(decisions, obs, self.cfg, self.encoding(obs.now),
                                    [i.job_id for i in self.ledger.open_intents()
                                     if i.job_id not in fixed])
        self.metrics.requeues.inc(len(self.preemptor.progress(obs, lowered)))
        self.publish(decisions, obs)

    def note_backlog(self, left: int) -> None:
        """Say how many pending jobs' values wait for a later cycle (``update_budget``): the
        ``dlprio_order_backlog_jobs`` gauge, the ledger's ``order_backlog`` (``dlprio status``
        prints it) and an ``order_backlog`` event while any wait and once when none is left."""
        before = int(self.ledger.meta("order_backlog") or 0)
        self.backlog = left
        self.metrics.order_backlog.set(left)
        if left or before:
            self.ledger.set_meta("order_backlog", str(left))
            event(self.log, "order_backlog", left=left, budget=self.cfg.update_budget)

    def encoding(self, now: float) -> Encoding | None:
        """The priority encoding (mode priority), reading PriorityWeight* once per daemon."""
        if self.cfg.mode != "priority":
            return None
        span = self.cfg.inqueue_span_s
        slack = min(act.REF_SLACK_S, span // 2)
        ref = float(self.ledger.meta("order_ref") or 0) or None
        if ref is None or now - ref > span - slack:
            ref = now - slack
            self.ledger.set_meta("order_ref", repr(ref))
            self._encoding = None
            event(self.log, "order_reference", ref=ref)
        if self._encoding is None or self._encoding.ref != ref:
            weights = (0 if self.cfg.priority_field == "priority"
                       else act.other_weights(self.client.show_config()))
            self._encoding = act.Encoding(self.cfg.queues, span, weights, ref)
            self._encoding.check()
        return self._encoding

    def publish(self, decisions: Decisions, obs: Observation) -> None:
        """Write the public snapshot and the queue metrics for the managed jobs."""
        rank = {job_id: i for i, job_id in enumerate(decisions.order)}
        rows = {r.job_id: r for r in self.ledger.jobs(active_only=True)}
        jobs = []
        for view in obs.snapshot.jobs:
            row, st = rows.get(view.job_id), decisions.states.get(view.job_id)
            if row is None or st is None:
                continue
            jobs.append(PublicJob(view.job_id, row.user, obs.units[view.job_id].state, st.queue,
                                  round(view.attained_gpu_s, 1), row.preemptions,
                                  row.promotions, row.restart_count, rank.get(view.job_id),
                                  row.reason))
        self.metrics.set_queues(((j.queue, "PENDING" if j.rank is not None else "RUNNING",
                                  j.attained_gpu_s) for j in jobs), self.cfg.queues)
        tenants: tuple[PublicTenant, ...] = ()
        if self.tenancy is not None:
            tenants = tuple(PublicTenant(r.name, r.guaranteed, r.used, r.borrowed, r.waiting,
                                         round(r.fair_share, 3))
                            for r in tenants_view.rows(self.tenancy, obs, self.tenant_usage))
        try:
            write_snapshot(self.cfg.snapshot_path, PublicSnapshot(
                obs.now, self.log.cycle, self.cfg.mode, self.cfg.policy.thresholds_gpu_s,
                tuple(jobs), cluster=self.cluster, forecast=self.forecaster.latest,
                tenants=tenants, interval_s=self.cfg.interval_s))
        except OSError as exc:   # dlqueue loses its columns; scheduling goes on
            event(self.log, "snapshot_failed", level=logging.ERROR, path=self.cfg.snapshot_path,
                  error=str(exc))

    def print_decisions(self, decisions: Decisions, obs: Observation) -> None:
        """``--dry-run`` output: the :data:`DECISION_HEADERS` table (pending jobs in start order
        with their target values, then running jobs), then preemptions."""
        enc = self.encoding(obs.now) if self.cfg.mode == "priority" else None
        wanted = act.targets(decisions, obs, self.cfg, enc)
        views = {v.job_id: v for v in obs.snapshot.jobs}
        ordered = list(decisions.order) + sorted(set(decisions.states) - set(decisions.order))
        rows = []
        for i, job_id in enumerate(ordered):
            st, view = decisions.states[job_id], views[job_id]
            unit = obs.units.get(job_id)
            state = ("COMPLETING" if unit is not None and unit.state == "COMPLETING"
                     else view.phase.value)   # the policy sees it RUNNING, releasing
            rows.append([str(i) if job_id in wanted else "-", str(job_id), state,
                         f"Q{st.queue}", f"{view.attained_gpu_s:.0f}",
                         str(wanted.get(job_id, "-")), st.reason])
        tables.write(DECISION_HEADERS, rows, _DECISION_RIGHT, stream=self.out)
        w = self.out.write
        for p in decisions.preemptions:
            w(f"preempt {','.join(map(str, p.victims))} for {p.waiter}\n")
        w("dry run: nothing sent to Slurm\n")

    # ------------------------------------------------------------------ the loop
    def retry_delay(self, failures: int, elapsed: float) -> float:
        """Seconds to wait after the ``failures``-th failed cycle in a row that took
        ``elapsed`` s: tries *start* ``interval_s × 2^(failures-1)`` apart (at most
        ``backoff_max_s``), so the wait is that minus the time the failed call blocked. The
        log's ``retry_in_s`` is this wait, the real one."""
        return retry_wait(self.cfg, failures, elapsed)

    def run(self, stop: threading.Event) -> None:
        """Cycle every ``interval_s`` until ``stop`` is set; back off while Slurm is away.
        A running ``auto_tune`` replay is stopped on the way out."""
        try:
            self._loop(stop)
        finally:
            if self.tuner is not None:
                self.tuner.close()

    def next_delay(self, elapsed: float) -> float:
        """Seconds to wait after a cycle that took ``elapsed`` s: the rest of ``interval_s``,
        or less when a victim's grace ends sooner (:meth:`Preemptor.next_due`; at least
        :data:`MIN_WAKE_S`)."""
        delay = self.cfg.interval_s - elapsed
        due = self.preemptor.next_due()
        if due is not None:
            delay = min(delay, max(due - self.clock(), MIN_WAKE_S))
        return delay

    def _loop(self, stop: threading.Event) -> None:
        failures = 0
        self.forecasting = True
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.cycle()
                if failures:
                    event(self.log, "slurm_back", failures=failures)
                failures = 0
                delay = self.next_delay(time.monotonic() - started)
            except SlurmUnreachable as exc:
                failures += 1
                self.metrics.slurm_errors.labels(kind="unreachable").inc()
                delay = self.retry_delay(failures, time.monotonic() - started)
                event(self.log, "slurm_unreachable", level=logging.WARNING, error=exc.message,
                      failed_after_s=round(time.monotonic() - started, 1),
                      retry_in_s=round(delay, 1))
            except SlurmError as exc:
                self.metrics.slurm_errors.labels(kind="refused").inc()
                event(self.log, "slurm_error", level=logging.ERROR, error=str(exc))
                delay = self.cfg.interval_s
            except ConfigError:   # names refused against the cluster (first cycle)
                raise
            except ValueError as exc:   # decide() refused its input: keep the loop, say why
                event(self.log, "decide_error", level=logging.ERROR, error=str(exc))
                delay = self.cfg.interval_s
            stop.wait(max(delay, 0.0))
        self.forecaster.close()
