"""``dlprio tune``: rank a grid of policy settings on a trace (argument parsing and output).

Exit codes: 0 done; 1 the replays could not be run or gathered, or a file could not be
written; 2 bad input: a malformed grid or value out of range, a trace with no GPU jobs, an
empty tuning or validation part, a bad option (one line each).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from prioritizer import numbers, tables
from prioritizer.command import CliError, Command, Exit
from prioritizer.outputs import check_outputs
from prioritizer.history.cli import policy_config, tenants_note, untracked_note
from prioritizer.history.trace import trace_point
from prioritizer.window import FORMS
from prioritizer.policy.config import SIMULATE_ONLY, PolicyConfig
from prioritizer.sim.cli import cluster_of, cluster_requeue_delay, refuse_unfittable
from prioritizer.sim.engine import Cluster
from prioritizer.sim.learned import MIN_SAMPLES, Durations
from prioritizer.sim.traces import Trace, TraceError, read_trace
from prioritizer.sim.windows import DEFAULT_MAX_HURT_SHARE, OFF, ORACLE
from prioritizer.tune.executors import ExecutorError, run_local, run_slurm
from prioritizer.grid import GridError, combinations, label, load_grid, parse_grid, yaml_snippet
from prioritizer.tune.rank import (RANKING_HEADERS, figure_cells, format_ranking, make_task, rank,
                                   tie_reason)
from slurm_plugin.common.atomic import write_atomically
from slurm_plugin.common.cli import visible
from slurm_plugin.slurm.client import SlurmError, slurm_exit


GRID_HINT = "--grid: give a grid, e.g. 'thresholds=1000/5000,3250/7200;knob=4,8'"


def configure(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    usage_error = parser.error

    def error(message: str) -> NoReturn:
        """argparse's usage error, but a missing --grid is one line with an example."""
        if "required: " in message and "--grid" in message.split("required: ")[1]:
            parser.exit(2, f"dlprio: {GRID_HINT}\n")
        usage_error(message)

    parser.error = error  # type: ignore[method-assign]
    add("--trace", required=True, help="trace CSV (a history export or any simulate format)")
    add("--grid", required=True, metavar="SPEC|FILE.yaml",
        help="thresholds=1000/5000,3250/7200;knob=4,8,16;queues=2,3,4, or a YAML grid file")
    add("--config", metavar="DLPRIO.yaml", help="the current config (its policy: section)")
    add("--policy", default=None, help="current policy name (default: --config's, else "
        "tiresias-las)")
    add("--nodes", metavar="N")
    add("--gpus-per-node", metavar="G")
    add("--cluster-from-slurm", action="store_true", help="nodes × GPUs from sinfo")
    add("--placement", choices=("consolidate", "count"), default="consolidate")
    add("--max-p95-ratio", type=numbers.ratio("--max-p95-ratio"), metavar="R",
        help="keep candidates whose p95 JCT <= R × the current config's")
    add("--validate-from", metavar="SECONDS|TIME",
        help="tune on jobs before this point, report the choice on the jobs after it: SECONDS "
        f"of trace time, or on a history trace a TIME as history export --since takes it: {FORMS}"
        " (local time)")
    add("--executor", choices=("local", "slurm"), default="local")
    add("--workers", type=numbers.count("--workers", 4_096), metavar="N",
        help="local: processes (default: one per core)")
    add("--workdir", default=None, metavar="DIR",
        help="slurm: a directory every node sees (default ./dlprio-tune-<time>)")
    add("--durations", metavar="FILE.csv",
        help="GPU·s samples for tiresias-gittins and preempt_gain (default: packaged "
        "yarn-gput1000.csv)")
    add("--durations-from", metavar="TRACE.csv",
        help="learn that distribution from this trace's (finished) jobs")
    add("--durations-from-history", action="store_true",
        help="learn it from the tuned jobs that had ended (--walk-forward: at each point, "
        "the jobs ended before it), as gittins_samples: history does in the daemon")
    add("--durations-min", type=numbers.count("--durations-min"), metavar="N",
        help=f"fewest jobs a learned distribution needs, else the packaged one (default "
        f"{MIN_SAMPLES})")
    add("--output", metavar="FILE.yaml", help="write the best config as a dlprio.yaml snippet")
    add("--plot", metavar="OUT.png", help="avg JCT over the grid (heat map or lines)")
    add("--walk-forward", type=numbers.arg_type("--walk-forward", numbers.parse_float, 0.0,
                                                 1e5, low_open=True), metavar="DAYS",
        help="re-tune every DAYS on the jobs before each point only; judge the settings on "
        "the jobs after it, per window against --baseline and against the current config")
    add("--since", metavar="SECONDS|TIME",
        help="--walk-forward: only jobs submitted at or after this point: SECONDS of trace "
        "time, or a TIME on a history trace, as --validate-from")
    add("--baseline", metavar="POLICY", help="--walk-forward: the policy each window is "
        "compared with (default fifo-fit)")
    add("--window-jobs", type=numbers.count("--window-jobs"), metavar="N",
        help="--walk-forward: jobs per window of submit order (default 200)")
    add("--json", action="store_true", help="--walk-forward: print the runs as JSON")
    add("--max-hurt-share", type=bar("--max-hurt-share", 1.0), metavar="F|off",
        help="--walk-forward: keep settings whose share of jobs hurt against --baseline on the "
        f"history (> 2x and > 1 h) is <= F (default {DEFAULT_MAX_HURT_SHARE:g})")
    add("--max-worst-window", type=bar("--max-worst-window", 1e6, ORACLE, low_open=True),
        metavar="R|oracle|off",
        help="--walk-forward: keep settings whose worst window against --baseline on the "
        "history is <= R, or <= the oracle srtf's there (default oracle)")



def bar(option: str, high: float, *words: str, low_open: bool = False) -> Any:
    """An argparse ``type=`` for a no-regret bar: a number in [0, ``high``] ((0, ``high``]
    with ``low_open``: a worst-window ratio of 0 no window clears), ``off``, or one of
    ``words``."""
    def convert(value: str) -> float | str:
        if value.strip().lower() in (OFF, *words):
            return value.strip().lower()
        try:
            return numbers.parse_float(value, 0.0, high, low_open=low_open)
        except ValueError as exc:
            choices = "/".join((OFF, *words))
            raise CliError(f"{option}: {exc} (or {choices})") from None
    convert.__name__ = "bar"
    return convert


def _split_point(value: str, trace_path: str) -> float:
    """``--validate-from``: seconds of the replay's clock (:func:`trace_point`)."""
    return _trace_point("--validate-from", value, trace_path, 100 * numbers.MAX_SECONDS)


def _trace_point(option: str, value: str, trace_path: str, high: float = numbers.MAX_TIME_S) -> float:
    """SECONDS of the replay's clock, or a TIME on a history trace (CliError: one line)."""
    try:
        return trace_point(option, value, trace_path, time.time(), rebased=True, high=high)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    if not args.grid:
        raise CliError(GRID_HINT)
    if args.max_p95_ratio is not None and not args.max_p95_ratio > 0:
        raise CliError(f"--max-p95-ratio must be > 0, got {args.max_p95_ratio}")
    if args.workdir is not None and args.executor != "slurm":
        raise CliError("--workdir applies only with --executor slurm (a directory every node "
                       "sees); add it or drop --workdir")
    if args.workers is not None and args.executor == "slurm":
        raise CliError("--workers applies only with --executor local (the default); drop "
                       "--workers")
    inputs = [("--trace", args.trace), ("--cluster", getattr(args, "cluster", None)),
              ("--grid", args.grid), ("--config", getattr(args, "config", None)),
              ("--durations", args.durations), ("--durations-from", args.durations_from)]
    check_outputs([("--output", args.output, False), ("--plot", args.plot, True)],
                  inputs)   # before the replays, not after them
    current = _current(args)
    try:
        grid = load_grid(args.grid) if args.grid.endswith((".yaml", ".yml")) else parse_grid(args.grid)
        combos = combinations(grid, current)
    except GridError as exc:
        raise CliError(str(exc)) from None
    if args.output:
        _refuse_simulate_only(args, grid, current)
    cluster = cluster_of(args)
    own_delay_s = current.requeue_delay_s   # what the snippet keeps (the daemon adopts alike)
    adopted, delay_note = cluster_requeue_delay(args, current)
    if adopted is not current:   # the grid's settings over the cluster's requeue delay
        current, combos = adopted, combinations(grid, adopted)
    durations = durations_of(args, [c for _, c in combos] + [current])
    walk_only = [f"--{name.replace('_', '-')}"
                 for name in ("since", "baseline", "window_jobs", "json", "max_hurt_share",
                              "max_worst_window")
                 if getattr(args, name, None) not in (None, False)]
    if args.walk_forward is not None:
        if args.validate_from or args.output or args.plot:
            raise CliError("--walk-forward judges the settings itself: drop --validate-from, "
                           "--output and --plot")
        if args.since is not None:
            args.since = _trace_point("--since", args.since, args.trace)
        if delay_note is not None:
            print(f"dlprio tune: note: {delay_note}", file=sys.stderr)
        from prioritizer.tune.walk_cli import CURRENT, run_walk
        return run_walk(args, cluster, [label(s) for s, _ in combos] + [CURRENT],
                        [c for _, c in combos] + [current], _execute, durations)
    if walk_only:
        raise CliError(f"{', '.join(walk_only)} "
                       f"{'applies' if len(walk_only) == 1 else 'apply'} only with --walk-forward "
                       f"DAYS; add it or drop {walk_only[0] if len(walk_only) == 1 else 'them'}")
    try:
        trace = read_trace(args.trace)
    except TraceError as exc:
        raise CliError(str(exc)) from None
    split = _split_point(args.validate_from, args.trace) if args.validate_from else None
    if trace.format == "history":   # after the option checks (a bad option is one line), before
        untracked_note("dlprio tune")   # the trace's own faults, which it may explain
    tenants_note("dlprio tune", getattr(args, "config", None))
    if delay_note is not None:
        print(f"dlprio tune: note: {delay_note}", file=sys.stderr)
    if not trace.jobs:
        raise CliError(f"{args.trace}: no GPU job to replay (CPU-only or zero-length rows only)")
    refuse_unfittable(trace, cluster, args.trace)
    tune_part = (None, split)
    if split is not None:
        before = sum(1 for j in trace.jobs if j.submit < split)
        if before == 0 or before == len(trace.jobs):
            raise CliError(f"--validate-from {args.validate_from}: splits {args.trace} into "
                           f"{before} and {len(trace.jobs) - before} jobs; both parts need jobs")
    labels = [label(s) for s, _ in combos] + ["(current config)"]
    configs = [c for _, c in combos] + [current]
    if durations is not None:
        durations = dataclasses.replace(durations, until=split)   # what was known at split
        _note(durations, trace)
    durations = durations or Durations()
    figures = _execute(args, [make_task(args.trace, None, tune_part, cluster, c,
                                        durations=durations) for c in configs])
    ranked = rank(labels, figures, len(configs) - 1, args.max_p95_ratio)
    print(f"dlprio tune: {len(combos)} configuration(s) on {visible(args.trace)} "
          f"({'jobs before ' + args.validate_from if split is not None else 'all jobs'}), "
          f"{cluster.nodes} × {cluster.gpus_per_node} GPUs")
    print(format_ranking(ranked, styled=tables.is_terminal()))
    best = next((r for r in ranked if r.allowed), None)
    if best is None:
        raise CliError("no configuration meets --max-p95-ratio; relax it or widen the grid",
                       exit_code=Exit.FAILED)
    best_config = configs[labels.index(best.label)]
    written = best_config
    if best_config.requeue_delay_s == current.requeue_delay_s != own_delay_s:
        # the cluster's delay, adopted while left at the default: the snippet leaves it so
        written = dataclasses.replace(best_config, requeue_delay_s=own_delay_s)
    snippet = yaml_snippet(written)
    verdict = best.label
    if best.current:
        barred = [r for r in ranked if not r.allowed and r.figures["avg_jct_s"]
                  < best.figures["avg_jct_s"]]
        verdict = ("the current config (no grid point beats it)" if not barred else
                   f"the current config: the {len(barred)} setting(s) with a lower avg JCT "
                   f"(best {barred[0].label}, {barred[0].figures['avg_jct_s']:.1f} s) have a p95 "
                   f"above --max-p95-ratio {args.max_p95_ratio:g} x its p95 "
                   f"{best.figures['p95_jct_s']:.1f} s")
    tuned = [j for j in trace.jobs if split is None or j.submit < split]
    why = tie_reason(configs, figures, tuned)
    if why is not None:
        f = figures[-1]
        verdict = (f"the current config: all {len(combos)} setting(s) and the current config "
                   f"gave the same avg JCT {f['avg_jct_s']:.1f} s (p95 {f['p95_jct_s']:.1f} s, "
                   f"max wait {f['max_wait_s']:.1f} s): {why}")
    print(f"\nbest: {verdict}\n{snippet}", end="")
    if split is not None:
        _validate(args, cluster, split, best_config, current, durations)
    if args.output:
        _write(args.output, snippet)
    if args.plot:
        from prioritizer.tune.plot import write_plot
        try:
            write_plot(grid, [s for s, _ in combos], figures[:-1], args.plot)
        except OSError as exc:
            raise CliError(f"{args.plot}: cannot write ({exc.strerror})", exit_code=Exit.FAILED) from None
    return 0


def _refuse_simulate_only(args: argparse.Namespace, grid: dict[str, list[Any]],
                          current: PolicyConfig) -> None:
    """With ``--output``: CliError (exit 2) when a setting that may be written, a grid value
    or the current config (chosen when no grid point beats it), runs a policy the daemon
    refuses (:data:`~prioritizer.policy.config.SIMULATE_ONLY`): the snippet would be a
    ``dlprio.yaml`` the daemon does not start with. Checked before any replay."""
    oracle = next((p for p in grid.get("policy", []) if p in SIMULATE_ONLY), None)
    source = f"--grid policy={oracle}"
    if oracle is None and current.policy in SIMULATE_ONLY:
        oracle = current.policy
        source = (f"--policy {oracle}" if args.policy
                  else f"--config {visible(args.config)} (policy: {oracle})")
    if oracle is not None:
        raise CliError(f"--output: {source}: the daemon refuses policy {oracle} (it needs "
                       "every job's true duration, an oracle: `dlprio simulate` only), so the "
                       f"best config could not be used; drop {oracle} or drop --output")


def _validate(args: argparse.Namespace, cluster: Cluster, split: float, best: PolicyConfig,
              current: PolicyConfig, durations: Durations) -> None:
    tasks = [make_task(args.trace, None, (split, None), cluster, c, durations=durations)
             for c in (best, current)]
    chosen, cur = _execute(args, tasks)
    print(f"validation on jobs from {args.validate_from} on ({int(chosen['jobs'])} jobs):")
    rows = [(name, *figure_cells(f)) for name, f in (("chosen", chosen), ("current", cur))]
    head = ("", *RANKING_HEADERS[1:4])
    sys.stdout.write(tables.render(head, rows, head[1:], styled=tables.is_terminal()))


def durations_of(args: argparse.Namespace, configs: list[PolicyConfig]) -> Durations | None:
    """Where the replays' Gittins distribution comes from (``--durations``,
    ``--durations-from``, ``--durations-from-history``, ``--durations-min``), checked;
    None for the packaged samples. A samples file or trace that cannot be read is refused
    here, before any replay."""
    given = [f"--{name.replace('_', '-')}" for name in
             ("durations", "durations_from", "durations_from_history")
             if getattr(args, name, None)]
    if len(given) > 1:
        raise CliError(f"use one of {', '.join(given)}, not several")
    if args.durations_min is not None and not (args.durations_from or args.durations_from_history):
        raise CliError("--durations-min applies only with --durations-from or "
                       "--durations-from-history; add one or drop --durations-min")
    if not given:
        return None
    if not any(c.uses_distribution for c in configs):
        raise CliError(f"{given[0]} only applies to tiresias-gittins or preempt_gain > 0 (no "
                       "setting of the grid nor the current config reads a distribution); drop "
                       f"{given[0]} or put one of them in the grid or --config")
    durations = Durations(args.durations, args.durations_from, args.durations_from_history,
                          None, args.durations_min or MIN_SAMPLES)
    if not durations.history:
        try:
            _, note = durations.distribution()
        except ValueError as exc:
            raise CliError(str(exc)) from None
        if durations.trace:
            print(f"note: {note}", file=sys.stderr)
    return durations


def _note(durations: Durations, trace: Trace) -> None:
    """The learned distribution's note (jobs learned from, or the packaged fallback)."""
    if durations.history:
        print(f"note: {durations.distribution(trace)[1]}", file=sys.stderr)


def _current(args: argparse.Namespace) -> PolicyConfig:
    if args.config:
        return policy_config(args.policy, args.config)
    try:
        return PolicyConfig.from_mapping({"policy": args.policy} if args.policy else {})
    except ValueError as exc:
        raise CliError(f"--policy: {str(exc).partition(': ')[2]}") from None


def _execute(args: argparse.Namespace, tasks: list) -> list[dict[str, Any]]:
    try:
        if args.executor == "slurm":
            workdir = Path(args.workdir or f"dlprio-tune-{time.strftime('%Y%m%dT%H%M%S')}")
            return run_slurm(tasks, workdir, say=lambda s: print(f"dlprio tune: {s}",
                                                                 file=sys.stderr))
        return run_local(tasks, args.workers, progress=sys.stderr.isatty())
    except ExecutorError as exc:
        raise CliError(str(exc), exit_code=Exit.FAILED) from None
    except SlurmError as exc:
        raise CliError(f"--executor slurm: {exc}", slurm_exit(exc)) from None


def _write(path: str, text: str) -> None:
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise CliError(f"{path}: cannot write ({exc.strerror})", exit_code=Exit.FAILED) from None


COMMAND = Command("tune", "rank a grid of policy settings by replaying a trace", configure, run)
