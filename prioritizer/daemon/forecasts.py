"""Start-time forecasts in the daemon: made every ``forecast.every_cycles`` cycles in a child
process, never in a cycle, and published in the snapshot (``dlqueue``'s START column,
``dlqueue -j``, ``dlprio explain``).

A cycle that is due builds the :class:`prioritizer.forecast.world.World` from what it observed
(:func:`world_of`: the policy's snapshot with the queue states just decided, time limits from
squeue's records) and hands it to a child process (:class:`ForecastChild`, ``spawn``: it shares
no lock or thread with the daemon), cut into one world per node pool (:func:`pool_worlds`: a job runs
only on nodes of its partitions). The child (:func:`run_forecasts`, :func:`run_forecast`
per pool) makes seeded draws until
``forecast.draws`` are made or the next would overrun ``forecast.cpu_budget_s`` CPU seconds
(:class:`DrawBudget`; one draw at least, ended where it is if it alone spends the budget)
and returns the forecast. The next cycles only look whether it is ready; one still
running when the next is due is left to finish. Remaining run times are drawn from the learned
distribution (the Gittins policy's when it learns one, else one learned the same way:
:class:`prioritizer.daemon.learned_gittins.HistoryDistribution`), with the managed jobs'
attained service as censored observations once it is learned from this cluster's ended jobs
(:mod:`prioritizer.forecast.draws`; not while the packaged samples or a file stand in). With ``forecast.arrivals:
none`` no arrival is invented; with ``history`` each draw draws later submissions
(:mod:`prioritizer.forecast.arrivals`) at the rate and of the sizes of the managed jobs
submitted in the last ``forecast.arrival_window_s`` (jobs of that window that already ended are
not among them, so the rate is a lower bound).

A waiting job's start band is calibrated (:mod:`prioritizer.forecast.calibrate`) with the
outcomes of the daemon's own earlier forecasts: the forecaster remembers the raw median start of
each waiting job (one per job per :data:`~prioritizer.forecast.calibrate.RECORD_GAP_S` at most)
and, as cycles see the job run, its actual start; a forecast whose job still waits counts as
censored (its job waits at least as long as so far). The remembered forecasts a later
calibration can use (:func:`prioritizer.forecast.calibrate.remember`), known and still
waiting, are kept in the ledger's ``meta`` table under :data:`META_KEY`, so a restart keeps
both: a restart that forgot the waiting ones would never learn their (long) outcomes. A job
that starts and ends while the daemon is stopped is never seen to start: its forecasts are
dropped, as are those of a job cancelled while it waits. Until
:data:`~prioritizer.forecast.calibrate.MIN_KNOWN` outcomes are known the draws' raw band is
published (``calibrated`` 0).

Snapshot field ``forecast`` (absent until the first forecast is ready)::

    {"made_at": <epoch s>, "draws": int, "horizon_s": float, "horizon_cut": bool,
     "stale_after_s": float,
     "cpu_s": float, "arrivals": "none" | "history", "known_outcomes": int,
     "sharing_jobs": int, ["tenants_not_modeled": true],
     "jobs": {"<job id>": {"start": [p10, p50, p90], "raw_start": [p10, p50, p90],
                           "calibrated": int, "finish": [p10, p50, p90],
                           "preempt_chance": 0-1, "ahead": int, "first_ahead": [int, ...],
                           ["restart": [p10, p50, p90] | null],
                           ["sharing": "shard" | "opportunistic" | "opportunistic shard"],
                           ["waits_for": "<squeue REASON>"]}}}

``tenants_not_modeled`` (only with ``virtual_clusters``): the replay orders jobs by the policy
alone, not by the tenant rules (guarantees, fair share, ``max_gpus``, user limits) that order
them in the daemon, so a job those rules hold back or put first may start later or sooner than
forecast, and its jobs ahead are the policy's; the views say so.

``waits_for`` (only for a pending job that waits for something no GPU freed gives it: a hold,
a dependency, its array's throttle ``%N`` (``JobArrayTaskLimit``), a QOS or association limit;
:data:`prioritizer.daemon.observe.STARTABLE_REASONS`): its start is not forecast (``start``
null, as ``finish``): the replay starts jobs when GPUs are free and knows none of those ends.

``restart`` (only for a job running when the forecast was made): its next start after a
preemption, over the draws that preempted it (null: none did). A job running then and waiting
now (preempted and requeued since) is shown that band as its start, never its old run's start.

GPU sharing is not modeled: a shard job is forecast as a job of one whole GPU per node (Slurm
may start it sooner, on the free shards of a busy GPU; a running one progresses as one GPU), an
opportunistic job as a production job (production jobs take its GPUs first, so it may start
later and be preempted more often). Such a job's entry has ``"sharing": "shard"`` or
``"opportunistic"``; ``sharing_jobs`` counts them, and the views say so.

``start`` is the calibrated band, ``raw_start`` the draws' own, ``calibrated`` the count of
past forecasts the band rests on, started or still waiting (0: ``start`` is the raw band); a
calibrated p90 (or p50, p10) the past outcomes do not reach yet, too many of those forecasts'
jobs still waiting, is ``null`` as beyond the horizon; ``finish`` the draws' finish band, each
quantile moved by as much as the start's calibration moved it (``null`` where the start's is);
``known_outcomes``: outcomes known when the forecast was made.

``horizon_s``: how far ahead the forecast reaches: ``forecast.horizon_s``, or less with
``horizon_cut`` true, when ``forecast.cpu_budget_s`` ended its one draw before it got there.
Times are epoch seconds; ``null`` in ``start``/``finish`` is beyond the horizon; ``"start":
null`` alone: the job fits on no node. A reader calls the forecast stale once ``made_at`` is
more than ``stale_after_s`` old (three refresh periods).
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any, Protocol

from prioritizer.config_file import ForecastConfig
from prioritizer.daemon.log import event
from prioritizer.daemon.observe import STARTABLE_REASONS, Observation, UnitCache
from prioritizer.forecast.arrivals import ArrivalModel, recent
from prioritizer.forecast.calibrate import (Calibration, Past, calibration, note_starts,
                                            remember)
from prioritizer.forecast.forecast import Forecast, JobForecast, forecast
from prioritizer.forecast.world import ForecastJob, World
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Decisions, JobPhase, Snapshot
from prioritizer.policy.pools import pools
from prioritizer.policy.sharing import Share


def world_of(obs: Observation, decisions: Decisions, config: PolicyConfig,
             units: UnitCache | None = None) -> World:
    """The forecast's world at ``obs.now``: every managed job with the queue state
    ``decisions`` gave it. A node offers the GPUs free on it plus those the managed jobs hold
    (GPUs of jobs the daemon does not manage stay theirs), at most its GPUs: shard units
    count one GPU each, and Slurm counts a GPU holding shards as free, so two units sharing a
    GPU would otherwise add a GPU the node does not have. A waiting shard job preempts no one
    (dlprio preempts nothing for it). A job being preempted (an open
    intent, ``obs.preempting``) is in ``grace`` until ``checkpoint_overhead_s`` from now, or
    until now once Slurm shows it COMPLETING (its requeue under way), then waits out the
    requeue delay: its forecast start is its next one. A job releasing its GPUs otherwise
    (COMPLETING, or its checkpoint signal refused as completing) ends on its own and has no
    run time left. ``units`` (the daemon's cache of squeue records)
    gives each job's time limit. A running job whose nodes Slurm did not name is left out
    (its GPUs are not free, so they stay taken)."""
    now = obs.now
    held: dict[str, int] = {}
    jobs = []
    for view in obs.snapshot.jobs:
        st = decisions.states.get(view.job_id)
        unit = obs.units.get(view.job_id)
        records = (units or {}).get(view.job_id)
        limit = records[0][0].time_limit_s if records and records[0] else None
        running = view.phase is JobPhase.RUNNING
        if running and (view.run_start is None or len(view.nodes) != len(view.gpus_per_node)):
            continue   # where it runs is not known: its GPUs count as taken, it is left out
        preempted = running and view.job_id in obs.preempting
        completing = unit is not None and unit.state == "COMPLETING"
        ending = running and not preempted and (view.releasing or completing)
        phase = "grace" if preempted else ("running" if running else "pending")
        for node, g in zip(view.nodes, view.gpus_per_node):
            held[node] = held.get(node, 0) + g
        jobs.append(ForecastJob(
            str(view.job_id), phase, view.gpus_per_node, view.submit_time,
            attained_gpu_s=view.attained_gpu_s, attained_s=view.attained_s,
            run_start=view.run_start if running else None,
            nodes=view.nodes if running else (),
            queue=st.queue if st else view.queue,
            queue_entry_time=st.queue_entry_time if st else view.queue_entry_time,
            service_base_gpu_s=st.service_base_gpu_s if st else view.service_base_gpu_s,
            last_run_s=view.last_run_s, last_run_end=view.last_run_end,
            eligible=None if running else view.eligible_time,
            time_limit_s=float(limit) if limit else None,
            remaining_s=0.0 if ending else None, preemptible=view.preemptible,
            preempts=not (view.job_id in obs.shares and obs.shares[view.job_id].share > 0),
            grace_end=(now if completing else now + config.checkpoint_overhead_s)
            if preempted else None, first_start=view.first_start))
    nodes = tuple((n.name, min(n.gpus_free + held.get(n.name, 0), n.gpus_total))
                  for n in obs.snapshot.nodes)
    return World(now, nodes, tuple(j for j in jobs if on_known_nodes(j, nodes)))


def on_known_nodes(job: ForecastJob, nodes: tuple[tuple[str, int], ...]) -> bool:
    """Whether a job holding GPUs holds them on nodes the world knows (a node Slurm no longer
    reports, e.g. one just removed, leaves its jobs out of the forecast)."""
    names = {name for name, _ in nodes}
    return all(n in names for n in job.nodes)


#: the share of ``forecast.cpu_budget_s`` kept for ending a draw the budget ends (its outcomes,
#: freeing the replay) and the summary of the draws: about 0.15-0.2 CPU s at 1,000 nodes ×
#: 10,000 pending jobs, of a 2 s budget (``benchmarks/forecast_refresh.py``)
END_SHARE = 0.15


class DrawBudget:
    """When a forecast's draws stop (``forecast.cpu_budget_s``, less :data:`END_SHARE` of it
    kept for ending a draw and the summary): asked after each draw, it says stop once the next
    draw would overrun that at the mean CPU of the draws made so far; asked during a draw
    (:meth:`over`), it ends a draw that spends it where it is. A first draw so ended is kept,
    and the forecast reaches less far than its horizon; a later one is dropped
    (:func:`prioritizer.forecast.forecast.forecast`). ``clock``: CPU seconds of this process
    (``time.process_time``)."""

    def __init__(self, cpu_budget_s: float, clock: Callable[[], float] = time.process_time
                 ) -> None:
        self.cpu_budget_s, self.clock = cpu_budget_s, clock
        self.started, self.made = clock(), 0

    def spent(self) -> float:
        """CPU seconds since the budget was made."""
        return self.clock() - self.started

    def __call__(self) -> bool:
        self.made += 1
        spent = self.spent()
        return spent + spent / self.made > self.cpu_budget_s * (1 - END_SHARE)

    def over(self) -> bool:
        """Whether the budget is spent but for :data:`END_SHARE` of it, kept for ending the
        draw and summarizing the draws (asked during a draw, which then ends where it is)."""
        return self.spent() > self.cpu_budget_s * (1 - END_SHARE)


def run_forecast(world: World, config: PolicyConfig, samples: tuple[float, ...],
                 draws: int, cpu_budget_s: float, horizon_s: float,
                 seed: int = 0, arrivals: ArrivalModel | None = None, learned: bool = False
                 ) -> tuple[Forecast, float]:
    """The child's work: draws until ``draws`` are made or the next one would overrun
    ``cpu_budget_s`` of this process's CPU time (:class:`DrawBudget`; one at least, ended
    where it is once it spends the budget: the forecast's ``reached_s``); the forecast and
    the CPU seconds it took. ``arrivals``: the recent arrivals later ones are drawn from
    (None: none drawn); ``learned``: ``samples`` are this cluster's ended jobs
    (:func:`prioritizer.forecast.forecast.forecast`)."""
    budget = DrawBudget(cpu_budget_s)
    made = forecast(world, config, GittinsDistribution(samples), draws, seed, horizon_s,
                    arrivals, enough=budget, out_of_time=budget.over, learned=learned)
    return made, budget.spent()


def pool_worlds(world: World, snapshot: Snapshot) -> list[World]:
    """``world`` cut into the node pools of the policy's ``snapshot``
    (:func:`prioritizer.policy.pools.pools`: a job runs only on nodes of its partitions), each
    replayed as a cluster of its own; ``[world]`` where partitions are not known. Inside a
    pool the replay places every job on every node of it: a job whose partitions hold only
    some of them (``policy.pools.allowed_nodes``) may be forecast to start sooner than it
    can."""
    split = pools(snapshot.nodes, snapshot.jobs)
    if not split:
        return [world]
    out = []
    for nodes, ids in split:
        names = {snapshot.nodes[i].name for i in nodes}
        mine = {str(job_id) for job_id in ids}
        out.append(World(world.now, tuple(n for n in world.nodes if n[0] in names),
                         tuple(j for j in world.jobs if j.job_id in mine)))
    return out


def run_forecasts(worlds: Sequence[tuple[World, ArrivalModel | None]], config: PolicyConfig,
                  samples: tuple[float, ...], draws: int, cpu_budget_s: float,
                  horizon_s: float, seed: int = 0, learned: bool = False
                  ) -> tuple[Forecast, float]:
    """The child's work over the pools' worlds (:func:`pool_worlds`, each with its recent
    arrivals or None): :func:`run_forecast` of each, with the share of ``cpu_budget_s`` of
    its jobs, merged into one forecast (the fewest draws of any pool, the shortest reach)
    and the CPU seconds they took. A pool with no node (its jobs' partitions hold none here)
    is not replayed: its jobs fit on no node. With ``learned``, each pool's jobs are its
    censored observations."""
    total = sum(len(w.jobs) for w, _ in worlds) or 1
    parts, spent = [], 0.0
    for world, arrivals in worlds:
        if not world.nodes:
            parts.append(Forecast(world.now, draws, tuple(
                JobForecast(j.job_id, None, None, 0.0, 0, ()) for j in world.jobs)))
            continue
        made, cpu_s = run_forecast(world, config, samples, draws,
                                   cpu_budget_s * max(len(world.jobs), 1) / total, horizon_s,
                                   seed, arrivals, learned)
        parts.append(made)
        spent += cpu_s
    if len(parts) == 1:
        return parts[0], spent
    reached = [p.reached_s for p in parts if p.reached_s is not None]
    return Forecast(parts[0].now, min(p.draws for p in parts),
                    tuple(j for p in parts for j in p.jobs),
                    min(reached) if reached else None), spent


def _when(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 1)


#: the ledger ``meta`` key of the remembered forecasts (JSON list of
#: ``[job id, made_at, raw p50 start, actual start or null while the job waits]``, epoch s)
META_KEY = "forecast_outcomes"


class MetaStore(Protocol):
    """Where the remembered forecasts are kept (the ledger: :class:`prioritizer.daemon.ledger.Ledger`)."""

    def meta(self, key: str, default: str | None = None) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


def sharing_of(shares: Mapping[int, Share], world: World) -> dict[str, str]:
    """The jobs of ``world`` that use GPU sharing, by id: ``shard`` (a fraction of one GPU),
    ``opportunistic``, or ``opportunistic shard`` (both); the forecast counts each as a
    whole-GPU production job."""
    ids = {j.job_id for j in world.jobs}
    return {str(job_id): " ".join(kind for kind, on in (("opportunistic", share.opportunistic),
                                                        ("shard", share.share > 0)) if on)
            for job_id, share in shares.items()
            if str(job_id) in ids and (share.share > 0 or share.opportunistic)}


def unforecast(obs: Observation) -> dict[str, str]:
    """The pending jobs whose start the forecast cannot give, by id, with what each waits
    for in words (squeue's REASON, or a hold): those the snapshot makes eligible never
    (:func:`prioritizer.daemon.observe._eligible`: freed GPUs would not start them)."""
    out = {}
    for view in obs.snapshot.jobs:
        unit = obs.units.get(view.job_id)
        if view.phase is not JobPhase.PENDING or not math.isinf(view.eligible_time or 0.0):
            continue
        if unit is not None and unit.held:
            out[str(view.job_id)] = f"a hold ({unit.reason})"
        elif unit is not None and unit.reason not in STARTABLE_REASONS:
            out[str(view.job_id)] = unit.reason
        else:   # observe.stuck: victims were requeued for it and it did not start
            out[str(view.job_id)] = "what Slurm does not name: GPUs freed for it did not start it"
    return out


def public(made: Forecast, horizon_s: float, stale_after_s: float,
           cpu_s: float, arrivals: str = "none", calibrated: Calibration | None = None,
           waiting: frozenset[str] = frozenset(),
           sharing: Mapping[str, str] | None = None,
           running: frozenset[str] = frozenset(),
           waits_for: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The snapshot's ``forecast`` object of ``made`` (see module doc): the start bands of the
    ``waiting`` jobs calibrated with ``calibrated`` (None: raw bands); ``sharing``: the jobs
    forecast as whole-GPU production jobs though they share GPUs (:func:`sharing_of`);
    ``running``: the jobs running at the forecast, whose entries get ``restart``;
    ``waits_for``: the pending jobs not forecast, with what they wait for
    (:func:`unforecast`)."""
    sharing, waits_for = sharing or {}, waits_for or {}
    jobs: dict[str, Any] = {}
    for job in made.jobs:
        if job.job_id in waits_for:
            jobs[job.job_id] = {"start": None, "raw_start": None, "calibrated": 0,
                                "finish": None, "preempt_chance": 0.0, "ahead": 0,
                                "first_ahead": [], "waits_for": waits_for[job.job_id]}
            continue
        if job.start is None or job.finish is None:
            jobs[job.job_id] = {"start": None, "raw_start": None, "calibrated": 0,
                                "finish": None, "preempt_chance": 0.0, "ahead": 0,
                                "first_ahead": []}
            continue
        start, used = job.start, 0
        if calibrated is not None and job.job_id in waiting:
            start, used = calibrated.start_band(made.now, job.start)
        # the finish moves with the start, each quantile by as much (the run time is the
        # draws'): a start calibrated later never shows after the finish
        finish = [f + (s - r) if math.isfinite(s) and math.isfinite(r) else max(f, s)
                  for f, s, r in zip(job.finish, start, job.start)]
        jobs[job.job_id] = {"start": [_when(v) for v in start],
                            "raw_start": [_when(v) for v in job.start],
                            "calibrated": used,
                            "finish": [_when(v) for v in finish],
                            "preempt_chance": round(job.preempt_chance, 3),
                            "ahead": job.ahead,
                            "first_ahead": [int(j) for j in job.first_ahead]}
    for job in made.jobs:
        if job.job_id in running and job.start is not None:
            jobs[job.job_id]["restart"] = (None if job.restart is None
                                           else [_when(v) for v in job.restart])
    for job_id, kind in sharing.items():
        if job_id in jobs:
            jobs[job_id]["sharing"] = kind
    known = len(calibrated.pooled.known) if calibrated is not None else 0
    reach = horizon_s if made.reached_s is None else min(horizon_s, made.reached_s)
    return {"made_at": made.now, "draws": made.draws, "horizon_s": reach,
            "horizon_cut": made.reached_s is not None and made.reached_s < horizon_s,
            "stale_after_s": stale_after_s, "cpu_s": round(cpu_s, 3), "arrivals": arrivals,
            "known_outcomes": known, "sharing_jobs": sum(k in jobs for k in sharing),
            "jobs": jobs}


def load_known(store: MetaStore | None) -> list[Past]:
    """The remembered forecasts kept in ``store`` (none when absent or unreadable:
    calibration then starts over, the raw bands stand meanwhile). An entry that is not
    ``[job id, made_at, p50, start]`` with finite times and ``start >= made_at`` or ``start``
    null (a hand-edited or damaged ledger) is left out, the others are kept."""
    raw = store.meta(META_KEY) if store is not None else None
    if not raw:
        return []
    try:
        rows = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    return [past for past in map(_known, rows if isinstance(rows, list) else [])
            if past is not None]


def _time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _known(row: Any) -> Past | None:
    """One kept forecast of :data:`META_KEY` (None: malformed)."""
    if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], (str, int))
            and not isinstance(row[0], bool) and _time(row[1]) and _time(row[2])
            and (row[3] is None or _time(row[3]))):
        return None
    job_id, made_at, p50, start = row
    if start is None:
        return Past(str(job_id), float(made_at), float(p50))
    return Past(str(job_id), float(made_at), float(p50), float(start)) \
        if start >= made_at else None


def dump_known(past: list[Past]) -> str:
    """The ``meta`` value of the remembered forecasts ``past`` (:data:`META_KEY`)."""
    return json.dumps([[p.job_id, p.made_at, p.p50, p.start] for p in past])


def _serve(conn: Connection, args: tuple[Any, ...]) -> None:
    """The child's body: :func:`run_forecasts` of ``args``, its answer (or its error, as
    text) sent through ``conn``. SIGINT is ignored: a Ctrl-C on a ``dlprio run`` in a terminal
    reaches the whole process group, and the daemon stops its child itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        answer: tuple[bool, Any] = (True, run_forecasts(*args))
    except Exception as exc:   # sent back and logged by the daemon as forecast_failed
        answer = (False, f"{type(exc).__name__}: {exc}")
    conn.send(answer)
    conn.close()


class ForecastChild:
    """One forecast made in its own ``spawn`` child process, answered through a pipe.

    A plain process, not a ``multiprocessing`` pool: a pool's worker that a signal to the
    whole process group killed (systemd's ``KillMode=control-group`` stop sends SIGTERM to
    every process of the unit) left ``Pool.terminate()`` waiting for ever, so the daemon never
    finished its stop. A child that dies without answering is a failed forecast; :meth:`stop`
    kills it (SIGKILL) and reaps it."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, theirs = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_serve, args=(theirs, args), name="dlprio-forecast",
                                daemon=True)
        self.proc.start()
        theirs.close()

    def ready(self) -> bool:
        """The answer came, or the child ended without one."""
        return self.conn.poll() or not self.proc.is_alive()

    def get(self, timeout: float | None = None) -> tuple[Forecast, float]:
        """The forecast and the child's CPU seconds. Raises RuntimeError naming the child's
        error, or how it ended when it ended without an answer."""
        try:
            if not self.conn.poll(timeout):
                raise RuntimeError(f"the forecast child gave no answer within {timeout} s")
            ok, value = self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            code = self.proc.exitcode
            how = (f"killed by signal {-code}" if code is not None and code < 0
                   else f"exit status {code}")
            raise RuntimeError(f"the forecast child ended without an answer ({how})") from None
        if not ok:
            raise RuntimeError(value)
        return value   # type: ignore[no-any-return]

    def stop(self) -> None:
        """Kill the child (a forecast in flight is dropped) and reap it."""
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


class Forecaster:
    """Starts forecasts in a child process and keeps the last one ready (module doc)."""

    def __init__(self, cfg: ForecastConfig, interval_s: float, log: Any,
                 store: MetaStore | None = None) -> None:
        self.cfg, self.log = cfg, log
        self.stale_after_s = 3 * cfg.every_cycles * interval_s + cfg.cpu_budget_s
        self.running: ForecastChild | None = None
        self.latest: dict[str, Any] | None = None
        #: where the remembered forecasts are kept across restarts (None: in memory only)
        self.store = store
        #: past forecasts of waiting jobs, with their actual start once seen
        self.past: list[Past] = load_known(store)
        #: the waiting jobs of the forecast in flight
        self.waiting: frozenset[str] = frozenset()
        #: its shard and opportunistic jobs (:func:`sharing_of`)
        self.sharing: dict[str, str] = {}
        #: its running jobs (not being preempted)
        self.running_jobs: frozenset[str] = frozenset()
        #: its pending jobs that wait for something no GPU freed ends (:func:`unforecast`)
        self.waits_for: dict[str, str] = {}
        #: whether virtual clusters ordered its jobs (not modeled: said in the forecast)
        self.tenants = False

    def learn(self, obs: Observation) -> None:
        """Note the starts this cycle sees of remembered forecasts; keep the remembered
        forecasts in the store when that changed them."""
        starts = {str(v.job_id): v.run_start for v in obs.snapshot.jobs
                  if v.phase is JobPhase.RUNNING and v.run_start is not None}
        before = (len(self.past), sum(p.start is not None for p in self.past))
        self.past = note_starts(self.past, starts, (str(v.job_id) for v in obs.snapshot.jobs))
        # note_starts only drops forecasts or gives them a start: the counts tell a change
        if (len(self.past), sum(p.start is not None for p in self.past)) != before:
            self.keep()

    def keep(self) -> None:
        """Write the remembered forecasts to the store (when there is one)."""
        if self.store is not None:
            self.store.set_meta(META_KEY, dump_known(self.past))

    @property
    def enabled(self) -> bool:
        return self.cfg.every_cycles > 0

    def collect(self) -> None:
        """Take the forecast in flight when it is ready (a failure is logged, never raised)."""
        if self.running is None or not self.running.ready():
            return
        finished, self.running = self.running, None   # taken even when what follows fails
        try:
            try:
                made, cpu_s = finished.get(0)
            finally:   # the child has answered or ended: reaped
                if isinstance(finished, ForecastChild):
                    finished.stop()
        except Exception as exc:   # the child's error: logged, the next one is tried
            event(self.log, "forecast_failed", level=logging.ERROR, error=str(exc))
        else:
            self.latest = public(made, self.cfg.horizon_s, self.stale_after_s, cpu_s,
                                 self.cfg.arrivals, calibration(self.past, made.now),
                                 self.waiting, self.sharing, self.running_jobs,
                                 self.waits_for)
            if self.tenants:
                self.latest["tenants_not_modeled"] = True
            self.past = remember(self.past, made.now, {
                j.job_id: j.start[1] for j in made.jobs
                if j.job_id in self.waiting and j.start is not None})
            self.keep()
            event(self.log, "forecast_ready", jobs=len(made.jobs), draws=made.draws,
                  cpu_s=round(cpu_s, 2))

    def tick(self, cycle: int, obs: Observation, decisions: Decisions, config: PolicyConfig,
             distribution: GittinsDistribution, units: UnitCache | None = None,
             learned: bool = False, tenants: bool = False) -> None:
        """Once per cycle: collect a ready forecast; start one when due and none runs.
        ``learned``: ``distribution`` is this cluster's, learned from its ended jobs;
        ``tenants``: virtual clusters order the jobs, which the replay does not model (the
        published forecast says so)."""
        if not self.enabled:
            return
        self.learn(obs)
        self.collect()
        if self.running is not None or cycle % self.cfg.every_cycles:
            return
        world = world_of(obs, decisions, config, units)
        self.waiting = frozenset(j.job_id for j in world.jobs if j.phase == "pending")
        self.sharing = sharing_of(obs.shares, world)
        self.running_jobs = frozenset(j.job_id for j in world.jobs if j.phase == "running")
        self.waits_for = unforecast(obs)
        self.tenants = tenants
        worlds = [(w, recent(((j.submit, j.gpus_per_node) for j in w.jobs), w.now,
                             self.cfg.arrival_window_s) if self.cfg.arrivals == "history"
                   else None) for w in pool_worlds(world, obs.snapshot)]
        self.running = ForecastChild((
            worlds, config, distribution.samples, self.cfg.draws, self.cfg.cpu_budget_s,
            self.cfg.horizon_s, cycle, learned))

    def close(self) -> None:
        """Stop the child (a forecast in flight is dropped)."""
        if isinstance(self.running, ForecastChild):
            self.running.stop()
        self.running = None


def band_of(entry: Mapping[str, Any], key: str) -> tuple[float | None, ...] | None:
    """``start`` or ``finish`` of a snapshot forecast entry as a tuple (None: fits nowhere)."""
    values = entry.get(key)
    return None if values is None else tuple(values)
