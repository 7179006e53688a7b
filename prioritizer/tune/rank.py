"""Replays of a tuning grid and their ranking (pure apart from the replays themselves).

A :class:`Task` is everything one replay needs, as plain data (so a process pool or a Slurm
array task can run it from JSON): the trace file and the part of it to replay, the cluster,
and the policy config. :func:`run_task` replays it with ``prioritizer.sim.engine.simulate`` and
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
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_distribution
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.report import nearest_rank
from prioritizer.sim.traces import Trace, TraceJob, read_trace


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

    def policy_config(self) -> PolicyConfig:
        c = dict(self.config)
        for key in ("thresholds_gpu_s", "thresholds_s"):
            c[key] = tuple(c[key])
        return PolicyConfig(**c)


def make_task(trace: str, fmt: str | None, window: tuple[float | None, float | None],
              cluster: Cluster, config: PolicyConfig) -> Task:
    """A task for ``config``; the trace path is made absolute (array tasks run elsewhere)."""
    return Task(os.path.abspath(trace), fmt, window[0], window[1], cluster.nodes, cluster.gpus_per_node,
                cluster.placement, dataclasses.asdict(config))


def window(trace: Trace, lo: float | None, hi: float | None) -> Trace:
    """Jobs submitted in ``[lo, hi)``, re-based so the first arrives at 0."""
    jobs = [j for j in trace.jobs if (lo is None or j.submit >= lo) and (hi is None or j.submit < hi)]
    base = jobs[0].submit if jobs else 0.0
    return Trace(trace.path, trace.format, tuple(
        TraceJob(i, j.name, j.line, j.submit - base, j.num_gpus, j.duration)
        for i, j in enumerate(jobs)), 0)


def run_task(task: Task) -> dict[str, float]:
    """Replay one task; ``{"jobs", "avg_jct_s", "p95_jct_s", "max_wait_s"}``.

    Raises:
        ValueError: the window holds no job (message says so).
    """
    trace = window(read_trace(task.trace, task.fmt), task.lo, task.hi)
    if not trace.jobs:
        raise ValueError(f"{task.trace}: no job in the window [{task.lo}, {task.hi})")
    config = task.policy_config()
    dist = load_distribution() if config.policy == "tiresias-gittins" else None
    result = simulate(trace, Cluster(task.nodes, task.gpus_per_node, task.placement), config, dist)
    jcts = [j.jct for j in result.jobs]
    return {"jobs": float(len(jcts)), "avg_jct_s": statistics.fmean(jcts),
            "p95_jct_s": nearest_rank(jcts, 95),
            "max_wait_s": max((j.queueing_delay for j in result.jobs), default=0.0)}


@dataclass(frozen=True)
class Ranked:
    """One evaluated combination: its label, figures, whether it is the current config, and
    whether it passes the constraint."""

    label: str
    figures: dict[str, float]
    current: bool
    allowed: bool


def rank(labels: Sequence[str], figures: Sequence[dict[str, float]], current_index: int,
         max_p95_ratio: float | None = None) -> list[Ranked]:
    """Sort by avg JCT (ties: p95, then label). With ``max_p95_ratio``, a candidate whose p95
    exceeds ratio × the current config's p95 is marked not allowed (kept in the table)."""
    limit = (figures[current_index]["p95_jct_s"] * max_p95_ratio
             if max_p95_ratio is not None else None)
    out = [Ranked(lbl, fig, i == current_index, limit is None or fig["p95_jct_s"] <= limit + 1e-9)
           for i, (lbl, fig) in enumerate(zip(labels, figures))]
    return sorted(out, key=lambda r: (r.figures["avg_jct_s"], r.figures["p95_jct_s"], r.label))


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
