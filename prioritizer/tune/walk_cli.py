"""``dlprio tune --walk-forward DAYS``: the run and its output (the rules are
:mod:`prioritizer.tune.walk`'s). A period that would cut the trace at more than
:data:`~prioritizer.tune.walk.MAX_RETUNE_POINTS` points is refused before any is made, with
the least period allowed for the trace.

Each re-tune point ranks the grid on the jobs submitted before it (through the same executors
as ``dlprio tune``: a process pool, or one Slurm job array per point, in ``point-K`` under
the work directory); the whole trace is then replayed here three times: with the chosen
settings switched at the points (:mod:`prioritizer.tune.walk`), under the current settings
held fixed and under the baseline policy (``--baseline``, default ``fifo-fit``), and the walk-forward
result is measured window by window against the baseline as ``dlprio simulate`` measures a
policy (``prioritizer.sim.windows``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from prioritizer import tables
from prioritizer.command import CliError
from prioritizer.policy.config import PolicyConfig
from prioritizer.history.cli import tenants_note
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.sim.cli import (DEFAULT_BASELINE, DEFAULT_WINDOW_JOBS, baseline_policy,
                                 refuse_unfittable)
from prioritizer.sim.engine import Cluster, SimResult, Switch, simulate
from prioritizer.sim.learned import Durations
from prioritizer.sim.report import format_table, format_windows_table, summarize, window_comparison
from prioritizer.sim.traces import Trace, TraceError, read_trace
from prioritizer.grid import yaml_snippet
from prioritizer.sim.windows import DEFAULT_MAX_HURT_SHARE, OFF, ORACLE
from prioritizer.tune.rank import (Task, bar_configs, make_task, pick, rank, window,
                                   with_windows)
from prioritizer.tune.walk import (DAY_S, MAX_RETUNE_POINTS, TooManyPoints, retune_points,
                                   settings_per_window)
from slurm_plugin.common.cli import visible

WALK, FIXED = "walk-forward", "fixed"
CURRENT = "(current config)"

Execute = Callable[[argparse.Namespace, list[Task]], list[dict[str, Any]]]


def run_walk(args: argparse.Namespace, cluster: Cluster, labels: Sequence[str],
             configs: Sequence[PolicyConfig], execute: Execute,
             durations: Durations | None = None) -> int:
    """The walk-forward run; ``configs[-1]`` is the current config (labelled :data:`CURRENT`).
    ``durations``: where the Gittins distribution comes from (None: packaged); learned from
    the history, it is learned anew at each point from the jobs ended before it (period 0:
    those ended before the first replayed submission), for the ranking there and from that
    point on in the replays that measure the walk."""
    period_s = args.walk_forward * DAY_S
    baseline = baseline_policy(args.baseline or DEFAULT_BASELINE)
    window_jobs = args.window_jobs or DEFAULT_WINDOW_JOBS
    try:
        original = read_trace(args.trace)
    except TraceError as exc:
        raise CliError(str(exc)) from None
    full = window(original, args.since, None)
    if not full.jobs:
        raise CliError(f"{args.trace}: no GPU job to replay at or after --since "
                       f"{args.since or 0:g}")
    refuse_unfittable(full, cluster, args.trace)
    start = min(j.submit for j in original.jobs if args.since is None or j.submit >= args.since)
    last = max(j.submit for j in full.jobs)   # seconds after the first submission
    if not last:
        raise CliError(f"--walk-forward {args.walk_forward:g}: every job of the trace is "
                       "submitted at one time, so no re-tune point can fall inside it; "
                       "walk-forward needs submissions spread over time")
    try:
        points = retune_points([j.submit for j in full.jobs], period_s)
    except TooManyPoints as exc:
        days = exc.least_period_s / DAY_S
        scale = 10.0 ** (3 - math.floor(math.log10(days)))   # 4 significant digits,
        least = math.ceil(days * scale) / scale               # rounded up
        raise CliError(f"--walk-forward {args.walk_forward:g}: the trace spans "
                       f"{last / DAY_S:.4g} day(s) of submissions ({last:g} s), which this "
                       f"period cuts at {exc.count:,} re-tune points, more than "
                       f"{MAX_RETUNE_POINTS:,} (each ranks the whole grid); give at least "
                       f"{least:g} days") from None
    if not points:
        scale = 10.0 ** (3 - math.floor(math.log10(last / DAY_S)))   # 4 significant digits,
        most = math.floor(last / DAY_S * scale) / scale               # rounded down
        raise CliError(f"--walk-forward {args.walk_forward:g}: the trace spans "
                       f"{last / DAY_S:.2f} day(s) of submissions ({last:g} s), so no "
                       f"re-tune point falls inside it; give at most {most:g} days")
    tenants_note("dlprio tune", getattr(args, "config", None))   # after the input checks
    current = configs[-1]
    chosen, chosen_labels = [current], [CURRENT]
    history: list[int] = []
    choices: list[dict[str, Any]] = []
    hurt_bar, worst_bar = bar_values(args)
    bars_on = hurt_bar is not None or worst_bar is not None
    extra = bar_configs(current, baseline, worst_bar == ORACLE) if bars_on else []
    workdir = Path(args.workdir or f"dlprio-tune-{time.strftime('%Y%m%dT%H%M%S')}")
    durations = durations or Durations()
    at_point = [dataclasses.replace(durations, until=start + p) if durations.history
                else durations for p in [0.0, *points]]   # per period: what was known then
    for k, point in enumerate(points, 1):
        tasks = [make_task(args.trace, None, (args.since, start + point), cluster, c, bars_on,
                           at_point[k])
                 for c in [*configs, *extra]]
        # --executor slurm: one job array per point, each in its own work directory
        at = argparse.Namespace(**{**vars(args), "workdir": str(workdir / f"point-{k}")})
        figures = execute(at, tasks)
        bars = None
        if bars_on:
            figures, bars = with_windows(figures, len(configs), window_jobs, hurt_bar, worst_bar)
        ranked = rank(labels, figures, len(configs) - 1, args.max_p95_ratio, bars)
        best, fallback = pick(ranked, bars)
        label = best.label if best is not None else CURRENT
        chosen.append(configs[list(labels).index(label)])
        chosen_labels.append(label)
        history.append(sum(1 for j in full.jobs if j.submit < point))
        on_history = figures[labels.index(label)]
        choices.append({"bars": None if bars is None else dataclasses.asdict(bars),
                        "fallback": fallback,
                        "history": {k: v for k, v in on_history.items() if k != "jobs"}})
    # one replay per run: the walk-forward's settings (and the distribution they decide
    # with, learned anew at each point) switch at the points for every job on the cluster,
    # as the daemon's auto_tune switches; the current settings held fixed switch only
    # their distribution
    base_config = dataclasses.replace(current, policy=baseline)
    needed = {i for i, c in enumerate(chosen) if c.uses_distribution}
    if current.uses_distribution:
        needed |= set(range(len(chosen)))
    dists = _distributions(durations, at_point, original, needed, bool(needed))
    runs = [_switching(chosen, points, dists), _switching([current] * len(chosen), points, dists),
            (base_config, None, [])]
    walked, fixed, base = _replay_all(full, cluster, runs)
    walked = dataclasses.replace(walked, policy=WALK)
    fixed = dataclasses.replace(fixed, policy=FIXED)
    results = [base, fixed, walked]
    comparison = window_comparison(results, baseline, window_jobs)
    notes = {i: note for i, (_, note) in dists.items()}
    periods = [{"from_s": 0.0 if i == 0 else points[i - 1], "history_jobs": 0 if i == 0 else
                history[i - 1], "settings": chosen_labels[i],
                "policy": _section(chosen[i]),
                "durations": notes.get(i) if chosen[i].uses_distribution else None}
               | (choices[i - 1] if i else {"bars": None, "fallback": None, "history": None})
               for i in range(len(chosen))]
    summaries = []
    for r in results:
        s = summarize(r) | comparison[r.policy] | {"baseline": baseline}
        if r.policy == WALK:
            in_force = settings_per_window(s["windows"], points, chosen_labels)
            s["windows"] = [w | {"settings": lbl} for w, lbl in zip(s["windows"], in_force)]
            s["periods"] = periods
        summaries.append(s)
    if args.json:
        print(json.dumps(summaries, indent=2))
        return 0
    styled = tables.is_terminal()
    print(f"dlprio tune --walk-forward {args.walk_forward:g}: {len(labels) - 1} configuration(s) "
          f"re-tuned at {len(points)} point(s) on {visible(args.trace)} ({len(full.jobs)} jobs), "
          f"{cluster.nodes} × {cluster.gpus_per_node} GPUs; {FIXED}: the current config")
    if bars_on:
        print(f"bars on each history against {baseline} (windows of {window_jobs} jobs): hurt "
              f"<= {_shown(hurt_bar, 100, ' %')}, worst window <= {_shown(worst_bar, 1, '')}; "
              "the lowest avg JCT among the settings that clear them")
    head = ("from day", "history jobs", "history worst window x", "history hurt %",
            "settings in force")
    rows = [(f"{p['from_s'] / DAY_S:g}", str(p["history_jobs"]),
             *_history_cells(p["history"]), p["settings"]) for p in periods]
    sys.stdout.write(tables.render(head, rows, head[:4], styled=styled) + "\n")
    for p in periods:
        if p["fallback"]:
            print(f"day {p['from_s'] / DAY_S:g}: {p['fallback']}")
        if p["durations"] and (durations.history or p is periods[0]):
            print(f"day {p['from_s'] / DAY_S:g}: {p['durations']}")
    sys.stdout.write(format_table(summaries, styled=styled) + "\n")
    sys.stdout.write(format_windows_table(comparison, baseline, window_jobs, styled=styled))
    return 0


def bar_values(args: argparse.Namespace) -> tuple[float | None, float | str | None]:
    """``--max-hurt-share`` and ``--max-worst-window`` as the bars take them: None when
    ``off``; unless given, :data:`~prioritizer.sim.windows.DEFAULT_MAX_HURT_SHARE` and
    ``oracle``."""
    hurt = getattr(args, "max_hurt_share", None)
    worst = getattr(args, "max_worst_window", None)
    hurt = DEFAULT_MAX_HURT_SHARE if hurt is None else hurt
    worst = ORACLE if worst is None else worst
    return (None if hurt == OFF else hurt), (None if worst == OFF else worst)


def _shown(value: float | str | None, scale: float, unit: str) -> str:
    if value is None:
        return "off"
    return value if isinstance(value, str) else f"{value * scale:g}{unit}"


def _history_cells(figures: dict[str, float] | None) -> tuple[str, str]:
    """The chosen setting's worst window and hurt share on its history ("-": none measured)."""
    if not figures or "worst_window_ratio" not in figures:
        return "-", "-"
    return f"{figures['worst_window_ratio']:.3f}", f"{100 * figures['hurt_jobs_share']:.3f}"


def _section(config: PolicyConfig) -> Any:
    """The whole ``policy:`` section in force for the setting (:func:`yaml_snippet`)."""
    import yaml
    return yaml.safe_load(yaml_snippet(config))["policy"]


def _switching(configs: Sequence[PolicyConfig], points: Sequence[float],
               dists: dict[int, tuple[GittinsDistribution, str]]
               ) -> tuple[PolicyConfig, GittinsDistribution | None, list[Switch]]:
    """One replay's settings: the first period's config and distribution, and a switch at
    each point where the config or the distribution it decides with changes."""
    def dist(i: int) -> GittinsDistribution | None:
        return dists[i][0] if configs[i].uses_distribution else None
    switches = [Switch(points[i - 1], configs[i], dist(i)) for i in range(1, len(configs))
                if (configs[i], dist(i)) != (configs[i - 1], dist(i - 1))]
    return configs[0], dist(0), switches


def _distributions(durations: Durations, at_point: Sequence[Durations], original: Trace,
                   periods: set[int], needed: bool
                   ) -> dict[int, tuple[GittinsDistribution, str]]:
    """The distribution in force and its note per period: learned from the history, for each
    of ``periods`` (those a replay decides in with one of its own); otherwise the one
    distribution, for every period (none when no replay reads one)."""
    if not needed:
        return {}
    try:
        if not durations.history:
            one = durations.distribution(original)
            return {i: one for i in range(len(at_point))}
        return {i: at_point[i].distribution(original) for i in sorted(periods)}
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _replay_all(trace: Trace, cluster: Cluster,
                runs: list[tuple[PolicyConfig, GittinsDistribution | None, list[Switch]]]
                ) -> list[SimResult]:
    """One replay of ``trace`` per run (first config, its distribution, the switches), in a
    process pool (one per core)."""
    workers = min(len(runs), os.cpu_count() or 1)
    if workers <= 1:
        return [simulate(trace, cluster, c, d, switches=w) for c, d, w in runs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return [f.result() for f in [pool.submit(simulate, trace, cluster, c, d, switches=w)
                                     for c, d, w in runs]]
