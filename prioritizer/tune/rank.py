"""Replays of a tuning grid and their ranking (pure apart from the replays themselves).

A :class:`Task` is everything one replay needs, as plain data (so a process pool or a Slurm
array task can run it from JSON): the trace file and the part of it to replay, the cluster,
the policy config and where its Gittins distribution comes from
(:class:`~prioritizer.sim.learned.Durations`). :func:`run_task` replays it with ``prioritizer.sim.engine.simulate`` and
returns the figures ranked on: avg JCT (rank key), p95 JCT, and the starvation figure, the
longest time any job spent without GPUs (max queueing delay, seconds).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prioritizer import tables
from prioritizer.policy.config import PolicyConfig, PolicyName
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.learned import Durations
from prioritizer.sim.report import nearest_rank
from prioritizer.sim.traces import Trace, TraceJob, read_trace
from prioritizer.sim.windows import (ORACLE, ORACLE_POLICY, Bars, least_regret, regret,
                                     window_figures)


@dataclass(frozen=True)
class Task:
    """One replay: ``trace`` file (format ``fmt`` or detected), jobs submitted in
    ``[lo, hi)`` seconds of trace time (re-based to 0), on ``nodes`` × ``gpus_per_node``."""

    trace: str
    fmt: str | None
    lo: float | None
    hi: float | None
    nodes: int
    gpus_per_node: int
    placement: str
    config: dict[str, Any]
    per_job: bool = False
    #: the :class:`~prioritizer.sim.learned.Durations` fields (used only when the config
    #: reads a distribution)
    durations: dict[str, Any] = dataclasses.field(default_factory=dict)

    def policy_config(self) -> PolicyConfig:
        c = dict(self.config)
        for key in ("thresholds_gpu_s", "thresholds_s"):
            c[key] = tuple(c[key])
        return PolicyConfig(**c)


def make_task(trace: str, fmt: str | None, window: tuple[float | None, float | None],
              cluster: Cluster, config: PolicyConfig, per_job: bool = False,
              durations: Durations = Durations()) -> Task:
    """A task for ``config``; the trace path is made absolute (array tasks run elsewhere).
    ``per_job``: its result also holds every job's submit time and JCT (for the bars).
    ``durations``: where its Gittins distribution comes from (default: packaged)."""
    source = dataclasses.asdict(durations)
    for key in ("file", "trace"):
        if source[key]:
            source[key] = os.path.abspath(source[key])
    return Task(os.path.abspath(trace), fmt, window[0], window[1], cluster.nodes, cluster.gpus_per_node,
                cluster.placement, dataclasses.asdict(config), per_job, source)


def window(trace: Trace, lo: float | None, hi: float | None) -> Trace:
    """Jobs submitted in ``[lo, hi)``, re-based so the first arrives at 0."""
    jobs = [j for j in trace.jobs if (lo is None or j.submit >= lo) and (hi is None or j.submit < hi)]
    base = jobs[0].submit if jobs else 0.0
    return Trace(trace.path, trace.format, tuple(
        TraceJob(i, j.name, j.line, j.submit - base, j.num_gpus, j.duration)
        for i, j in enumerate(jobs)), 0)


def run_task(task: Task) -> dict[str, Any]:
    """Replay one task; ``{"jobs", "avg_jct_s", "p95_jct_s", "max_wait_s"}``, and with
    ``task.per_job`` also ``"jobs_s"``: ``[submit_s, jct_s]`` per job in trace order (the
    input of :func:`with_windows`).

    Raises:
        ValueError: the window holds no job (message says so).
    """
    original = read_trace(task.trace, task.fmt)
    trace = window(original, task.lo, task.hi)
    if not trace.jobs:
        raise ValueError(f"{task.trace}: no job in the window [{task.lo}, {task.hi})")
    config = task.policy_config()
    dist = (Durations(**task.durations).distribution(original)[0] if config.uses_distribution
            else None)
    result = simulate(trace, Cluster(task.nodes, task.gpus_per_node, task.placement), config, dist)
    jcts = [j.jct for j in result.jobs]
    out: dict[str, Any] = {"jobs": float(len(jcts)), "avg_jct_s": statistics.fmean(jcts),
                           "p95_jct_s": nearest_rank(jcts, 95),
                           "max_wait_s": max((j.queueing_delay for j in result.jobs), default=0.0)}
    if task.per_job:
        out["jobs_s"] = [[j.submit, j.jct] for j in sorted(result.jobs, key=lambda j: j.job_id)]
    return out


def bar_configs(current: PolicyConfig, baseline: PolicyName, oracle: bool) -> list[PolicyConfig]:
    """The replays the no-regret bars need besides the grid: the baseline policy and, for
    ``max_worst_window: oracle``, the oracle (:data:`~prioritizer.sim.windows.ORACLE_POLICY`),
    both with ``current``'s other settings (modeled costs); the oracle without the wait and
    requeue guards and the gain rule (settings a tuner varies, so that the bar does not move
    with them)."""
    return ([dataclasses.replace(current, policy=baseline)]
            + ([dataclasses.replace(current, policy=ORACLE_POLICY, wait_guard=0.0,
                                    requeue_guard=0.0, preempt_gain=0.0)] if oracle else []))


def with_windows(results: Sequence[Mapping[str, Any]], count: int, window_jobs: int,
                 max_hurt_share: float | None, max_worst_window: float | str | None
                 ) -> tuple[list[dict[str, float]], Bars]:
    """The first ``count`` results (the grid and the current config) with their window
    figures against the baseline (``worst_window_ratio``, ``hurt_jobs_share``,
    ``avg_jct_ratio``; ``jobs_s`` dropped), and the bars with ``oracle`` resolved.

    Args:
        results: ``run_task`` results with ``jobs_s``: the ``count`` candidates, then the
            baseline's, then (``max_worst_window == "oracle"``) the oracle's
            (:func:`bar_configs`).
        max_worst_window: a ratio, :data:`~prioritizer.sim.windows.ORACLE` (the oracle's
            own worst window on these jobs, or 1.0 where that is lower: a window no worse
            than the baseline's costs no one anything) or None.
    """
    extra = window_figures([r["jobs_s"] for r in results], count, window_jobs)
    worst = (max(1.0, extra[count + 1]["worst_window_ratio"]) if max_worst_window == ORACLE
             else max_worst_window)
    assert not isinstance(worst, str)
    figures = [{k: v for k, v in r.items() if k != "jobs_s"} | e
               for r, e in zip(results[:count], extra)]
    return figures, Bars(max_hurt_share, worst)


@dataclass(frozen=True)
class Ranked:
    """One evaluated combination: its label, figures, whether it is the current config, and
    whether it passes the constraint."""

    label: str
    figures: dict[str, float]
    current: bool
    allowed: bool


def rank(labels: Sequence[str], figures: Sequence[dict[str, float]], current_index: int,
         max_p95_ratio: float | None = None, bars: Bars | None = None) -> list[Ranked]:
    """Sort by avg JCT (ties: p95, then label). With ``max_p95_ratio``, a candidate whose p95
    exceeds ratio × the current config's p95 is marked not allowed (kept in the table); with
    ``bars`` (figures from :func:`with_windows`), so is one that does not clear them."""
    limit = (figures[current_index]["p95_jct_s"] * max_p95_ratio
             if max_p95_ratio is not None else None)
    out = [Ranked(lbl, fig, i == current_index,
                  (limit is None or fig["p95_jct_s"] <= limit + 1e-9)
                  and (bars is None or bars.clears(fig)))
           for i, (lbl, fig) in enumerate(zip(labels, figures))]
    return sorted(out, key=lambda r: (r.figures["avg_jct_s"], r.figures["p95_jct_s"], r.label))


def pick(ranked: Sequence[Ranked], bars: Bars | None = None) -> tuple[Ranked | None, str | None]:
    """The setting to use and, when it is a fallback, why: the first allowed one of
    ``ranked`` (the lowest avg JCT); when none is allowed and ``bars`` are on, the one of
    least regret (:func:`~prioritizer.sim.windows.least_regret`: least hurt share, then least
    worst window, then lowest avg JCT), with a one-line reason; otherwise ``(None, None)``."""
    best = next((r for r in ranked if r.allowed), None)
    if best is not None or bars is None or not ranked:
        return best, None
    fallback = min(ranked, key=lambda r: (*least_regret(r.figures), r.label))
    return fallback, (f"no setting clears the bars ({bars.describe()}); least regret: "
                      f"{fallback.label} ({regret(fallback.figures)})")


RANKING_HEADERS = ("rank", "avg JCT s", "p95 JCT s", "max wait s", "config")


def figure_cells(f: Mapping[str, float]) -> tuple[str, str, str]:
    """avg JCT, p95 JCT and max wait (s) as table cells: one decimal, no thousands separator,
    as in ``dlprio simulate`` and ``history check``."""
    return f"{f['avg_jct_s']:.1f}", f"{f['p95_jct_s']:.1f}", f"{f['max_wait_s']:.1f}"


def format_ranking(ranked: Sequence[Ranked], *, styled: bool = False) -> str:
    """The ranking table (:data:`RANKING_HEADERS`, laid out by :mod:`prioritizer.tables`;
    ``styled`` for a terminal): rank (``x``: filtered out), avg/p95 JCT and max wait in s,
    the config's label with ``*current`` after the current config's. No trailing newline."""
    rows = []
    n = 0
    for r in ranked:
        mark = "x" if not r.allowed else str(n := n + 1)
        f = r.figures
        rows.append((mark, *figure_cells(f), r.label + ("  *current" if r.current else "")))
    return tables.render(RANKING_HEADERS, rows, RANKING_HEADERS[:4], styled=styled).rstrip("\n")


THRESHOLD_POLICIES = ("tiresias-las", "tiresias-gittins")
"""Policies whose queues are cut by ``thresholds_gpu_s`` (attained GPU·s)."""


def tie_reason(configs: Sequence[PolicyConfig], figures: Sequence[Mapping[str, float]],
               jobs: Sequence[TraceJob]) -> str | None:
    """Why every config gave the same avg JCT, p95 JCT and max wait, or ``None`` when they
    did not all tie. The reason is computed from the replayed ``jobs``: no job ever waited
    (the cluster never filled, so no order mattered); or, for the threshold policies, the
    largest job's whole service (GPUs × duration, GPU·s) stays below every config's first
    threshold, so every job stays in the first queue (where the promotion knob does nothing
    either); otherwise no decision that the varied settings steer came up in this trace."""
    keys = ("avg_jct_s", "p95_jct_s", "max_wait_s")
    if len({tuple(f[k] for k in keys) for f in figures}) != 1:
        return None
    if figures[0]["max_wait_s"] == 0:
        return "no job ever waited for GPUs (the cluster never filled), so no setting changed an order"
    largest = max((j.num_gpus * j.duration for j in jobs), default=0.0)
    if all(c.policy in THRESHOLD_POLICIES and c.thresholds_gpu_s for c in configs):
        lowest = min(c.thresholds_gpu_s[0] for c in configs)
        if largest < lowest:
            return (f"no job's attained service crosses a threshold: the largest job ends at "
                    f"{largest:g} GPU·s, below the lowest first threshold of any setting "
                    f"({lowest:g} GPU·s), so every job stays in the first queue")
    return "no decision that the varied settings steer came up in this trace"
