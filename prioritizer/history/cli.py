"""``dlprio history export|check``: the cluster's own jobs as a trace, and the replay check.

Argument parsing and output only (export rules: :mod:`prioritizer.history.export`; format:
:mod:`prioritizer.history.trace`; replay check: :mod:`prioritizer.history.check`). Exit codes:
0 done; 1 Slurm or slurmdbd did not answer, or a file could not be written; 2 bad input: no
slurmdbd (named with the fix), an empty window, a malformed history file, a bad option.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import io
import json
import sys
import time
from typing import Any, cast


from prioritizer import numbers, tables
from prioritizer.command import CliError, Command, Exit
from prioritizer.outputs import check_output
from prioritizer.history.check import (against_baseline, check, dispatch_latency_of,
                                        format_fidelity, phased, start_latency_from)
from prioritizer.history.export import history_rows
from prioritizer.history.sacct_read import gpu_sources, show_config, with_earlier_attempts
from prioritizer.history.ledger_read import adopted_note, cycle_time, ledger_facts
from prioritizer.forecast.arrivals import DEFAULT_WINDOW_S
from prioritizer.history.forecast_check import (ARRIVALS, DEFAULT_ARRIVALS, DEFAULT_MOMENTS,
                                                check_forecasts)
from prioritizer.history.forecast_check import format_report as format_forecast_report
from prioritizer.history.forecast_check import report as forecast_report
from prioritizer.config_file import load as load_config
from prioritizer.forecast.forecast import DEFAULT_DRAWS
from prioritizer.policy.tenants import NOT_REPLAYED
from prioritizer.policy.validation import ConfigError
from prioritizer.sim.learned import MIN_SAMPLES
from prioritizer.sim.traces import FORMATS
from prioritizer.history.trace import HistoryError, parse_rows, read_rows, trace_point, write_rows
from prioritizer.window import FORMS, WindowError, epoch, sacct_window
from prioritizer.policy.config import POLICY_NAMES, PolicyConfig, PolicyName
from prioritizer.sim.cli import (DEFAULT_BASELINE, DEFAULT_WINDOW_JOBS, baseline_policy,
                                 cluster_of, cluster_requeue_delay,
                                 policy_section, trace_of)
from prioritizer.sim.report import format_windows_table
from slurm_plugin.slurm.accounting import (GPU_TRES_FIX, fold_jobs,
                                           keeps_job_comments, tracks_gpus)
from slurm_plugin.common.atomic import write_atomically
from slurm_plugin.common.cli import visible
from slurm_plugin.common.yamlfile import YamlFileError, read_yaml
from slurm_plugin.slurm.client import (AccountingDisabled, SlurmClient, SlurmError, SlurmUnreachable,
                                       slurm_exit)

NO_DBD = ("this cluster keeps no job accounting (sacct: {msg}): history needs slurmdbd with "
          "AccountingStorageType=accounting_storage/slurmdbd in slurm.conf (a local test "
          "cluster: `dlcluster up --with-dbd`)")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``export`` and ``check`` subcommands."""
    sub = parser.add_subparsers(dest="history_command", metavar="SUBCOMMAND", required=True)
    exp = sub.add_parser("export", help="write finished jobs from sacct as a history trace CSV",
                         description="Write finished jobs from Slurm accounting (sacct "
                         "--duplicates) as a history trace CSV.")
    exp.add_argument("--since", default="now-30days", metavar="TIME",
                     help=f"window start: {FORMS} (local time; default now-30days)")
    exp.add_argument("--until", default="now", metavar="TIME",
                     help="window end, the same forms (default now)")
    exp.add_argument("-o", "--output", default="-", metavar="FILE.csv",
                     help="output file (default: standard output)")
    exp.add_argument("--anonymise", action="store_true",
                     help="replace users and accounts by stable hashes")
    exp.add_argument("--salt", default="", help="secret mixed into --anonymise hashes")
    exp.add_argument("--ledger", metavar="LEDGER.sqlite",
                     help="the daemon's ledger, where it ran: preemptions and checkpoint time")
    exp.add_argument("--include-cpu-only", action="store_true",
                     help="keep CPU-only jobs (left out of GPU replays by default)")
    chk = sub.add_parser("check", help="replay a history under the policy that ran; compare JCTs",
                         description="Replay an exported history under the policy that ran "
                         "and print real vs replayed JCT per job, avg and p95.")
    chk.add_argument("--trace", required=True, metavar="HISTORY.csv")
    chk.add_argument("--cluster-from-slurm", action="store_true",
                     help="nodes × GPUs per node from sinfo (else --nodes/--gpus-per-node)")
    chk.add_argument("--nodes", metavar="N")
    chk.add_argument("--gpus-per-node", metavar="G")
    chk.add_argument("--policy", default=None, metavar="NAME",
                     help="the policy that ran: fifo-fit for Slurm alone (default), or "
                     "--config's")
    chk.add_argument("--config", metavar="DLPRIO.yaml",
                     help="the daemon's config whose policy section ran")
    chk.add_argument("--start-latency", metavar="SECONDS|auto",
                     help="Slurm's start latency for waiting jobs (auto: half of bf_interval "
                     "from scontrol show config; 0 without Slurm)")
    chk.add_argument("--dispatch-latency", metavar="SECONDS|auto",
                     help="seconds from eligible to start of a job that finds free GPUs (auto: "
                     "the shortest such time in the history)")
    chk.add_argument("--ledger", metavar="LEDGER.sqlite",
                     help="the daemon's ledger: its cycle times set the phase of the replay's "
                     "decision ticks (with --config)")
    chk.add_argument("--baseline", metavar="POLICY",
                     help="also replay under this policy and compare the real JCTs and the "
                     f"replay with it per window (default {DEFAULT_BASELINE})")
    chk.add_argument("--window-jobs", type=numbers.count("--window-jobs"), metavar="N",
                     help=f"jobs per window of eligible order (default {DEFAULT_WINDOW_JOBS})")
    chk.add_argument("--summary-only", action="store_true", help="no per-job lines")
    chk.add_argument("--forecasts", action="store_true",
                     help="check start-time forecasts instead: at moments of the replay, "
                     "forecast every waiting job as the daemon does (start bands calibrated "
                     "on earlier moments' outcomes) and compare with the start the replay "
                     "gave (any trace dlprio simulate reads)")
    chk.add_argument("--format", choices=sorted(FORMATS),
                     help="with --forecasts: the trace format (default: from the header)")
    chk.add_argument("--since", metavar="SECONDS|TIME",
                     help="with --forecasts: keep jobs submitted at or after SECONDS of the "
                     "trace's own time, or a TIME on a history trace, as --since of export "
                     f"takes it: {FORMS}; re-base to 0")
    chk.add_argument("--moments", type=numbers.count("--moments", 100_000), metavar="N",
                     help=f"with --forecasts: moments to forecast at, evenly spaced over the "
                     "arrivals, each standing for one daemon refresh (default "
                     f"{DEFAULT_MOMENTS}). CPU: one replay, then moments x draws forecasts "
                     "of the waiting jobs, about 3 ms each on ITP cluster04 and 20 ms on "
                     "Philly's dense window (more with --arrivals history): 100 x 20 on "
                     "Philly is 42 s, on cluster04 9 s (docs/forecasts.md, Cost)")
    chk.add_argument("--draws", type=numbers.count("--draws", 10_000), metavar="N",
                     help=f"with --forecasts: duration draws per forecast (default {DEFAULT_DRAWS})")
    chk.add_argument("--arrivals", choices=ARRIVALS,
                     help="with --forecasts: none = no later submission is counted; history = "
                     "each draw draws later submissions at the rate and of the sizes of the "
                     "jobs submitted in the last --arrival-window-s (the daemon's "
                     f"forecast.arrivals; default {DEFAULT_ARRIVALS})")
    chk.add_argument("--arrival-window-s", type=numbers.arg_type(
                         "--arrival-window-s", numbers.parse_float, 0.0, numbers.MAX_SECONDS,
                         low_open=True), metavar="SECONDS",
                     help="with --forecasts --arrivals history: the history window "
                     f"(default {DEFAULT_WINDOW_S:.0f})")
    chk.add_argument("--json", action="store_true",
                     help="with --forecasts: print the figures as JSON")


def run(args: argparse.Namespace) -> int:
    return _export(args) if args.history_command == "export" else _check(args)


def _export(args: argparse.Namespace) -> int:
    check_output("--output", args.output, [("--ledger", args.ledger)])
    now = time.time()
    try:
        start, end = sacct_window(args.since, args.until, now)
        since_s, until_s = epoch("--since", args.since, now), epoch("--until", args.until, now)
    except WindowError as exc:
        raise CliError(str(exc)) from None
    facts = ledger_facts(args.ledger) if args.ledger else None   # a bad ledger: before sacct
    try:
        client = SlurmClient(timeout_s=120)
        records = with_earlier_attempts(client, client.accounting(start, end), since_s)
    except AccountingDisabled as exc:
        raise CliError(NO_DBD.format(msg=exc.message), Exit.SLURM_REFUSED) from None
    except SlurmError as exc:
        raise CliError(sacct_failed(exc), slurm_exit(exc)) from None
    jobs = fold_jobs(records)
    slurm = SlurmClient(timeout_s=30)
    config = functools.cache(lambda: show_config(slurm))   # asked at most once, only when needed
    tracked, known = gpu_sources(slurm, jobs, facts, config)
    rows, report = history_rows(jobs, anonymise_names=args.anonymise,
                                salt=args.salt, include_cpu_only=args.include_cpu_only,
                                ledger=facts, gpus_tracked=tracked, known_gpus=known,
                                until=until_s)
    for line in report.lines():
        print(f"dlprio history export: {line}", file=sys.stderr)
    untracked = report.untracked_line()
    if untracked and not rows:
        raise CliError(f"no finished job with a known GPU count: {untracked}")
    if untracked:
        print(f"dlprio history export: {untracked}", file=sys.stderr)
    if report.requeued_lost:
        conf = config()
        requeued = report.requeued_line(None if conf is None else keeps_job_comments(conf))
        if requeued:
            print(f"dlprio history export: {requeued}", file=sys.stderr)
    if not rows:
        raise CliError(f"no finished GPU job between {args.since} ({start}) and {args.until} "
                       f"({end}), {report.left_out_count} left out; widen --since/--until")
    text = io.StringIO()
    write_rows(rows, text)
    try:   # never write a trace `history check` would refuse
        parse_rows("the exported trace", list(csv.reader(io.StringIO(text.getvalue()))))
    except HistoryError as exc:
        source = f" (with --ledger {visible(args.ledger)})" if args.ledger else ""
        raise CliError(f"{exc}{source}; nothing written") from None
    if args.output == "-":
        sys.stdout.write(text.getvalue())
    else:
        _write_atomically(args.output, text.getvalue())
    print(f"dlprio history export: {len(rows)} job(s) written to {visible(args.output)}, "
          f"{report.left_out_count} left out ({len(records)} accounting records)",
          file=sys.stderr)
    return 0


def sacct_failed(exc: SlurmError) -> str:
    """One line for a failed sacct: its last line of error (sacct prints the connection's
    steps first, the outcome last: ``Problem talking to the database: Connection refused``)
    and, when slurmdbd did not answer, where to look."""
    lines = [ln.strip() for ln in exc.message.splitlines() if ln.strip()]
    text = f"sacct failed: {lines[-1] if lines else 'no message'}"
    if isinstance(exc, SlurmUnreachable):
        text += ("; slurmdbd (or slurmctld) did not answer: is it running (systemctl status "
                 "slurmdbd)? run this again once it answers")
    return text


def _write_atomically(path: str, text: str) -> None:
    """Write the trace with :func:`slurm_plugin.common.atomic.write_atomically`: never a half-written
    trace, and a device or FIFO (``-o /dev/null``) is written in place, never renamed over."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise CliError(f"{visible(path)}: cannot write ({exc.strerror})", exit_code=Exit.FAILED) from None


def policy_config(policy: str | None, config_path: str | None) -> PolicyConfig:
    """The policy that ran: ``config_path``'s ``policy:`` section (``policy`` overrides its
    name), else ``policy`` (default ``fifo-fit``, Slurm alone) with no modeled costs.

    Raises:
        CliError: unreadable YAML, a bad key or an unknown policy name (exit 2).
    """
    if policy is not None and policy not in POLICY_NAMES:
        raise CliError(f"unknown policy {policy!r}; valid: {', '.join(POLICY_NAMES)}")
    if config_path:
        section = policy_section(config_path)
        try:
            cfg = PolicyConfig.from_mapping(section)
        except ValueError as exc:
            raise CliError("\n".join(f"{config_path}: {line}"
                                     for line in str(exc).splitlines())) from None
        name = cast(PolicyName, policy)   # checked against POLICY_NAMES above
        return dataclasses.replace(cfg, policy=name) if policy else cfg
    return PolicyConfig(policy=cast(PolicyName, policy or "fifo-fit")).zero_cost()


def _delay_source(args: argparse.Namespace) -> str:
    """Where the requeue delay of :func:`policy_config`'s policy comes from, in words."""
    return ("the policy's requeue_delay_s (--config)" if args.config else
            "no modeled cost: without --config the policy is replayed with none (give --config "
            "for the daemon's policy and costs)")


def seconds_option(option: str, value: str) -> float:
    """Seconds given to ``option``: a plain finite number from 0 to
    :data:`prioritizer.numbers.MAX_SECONDS`. Raises CliError (exit 2) naming the option."""
    try:
        return numbers.parse_float(value, 0.0, numbers.MAX_SECONDS)
    except ValueError:
        raise CliError(f"{option}: expected seconds >= 0 and <= {numbers.MAX_SECONDS:g} "
                       f"(a plain number) or auto, got {value!r}") from None


def untracked_note(command: str) -> None:
    """Print one note on stderr when this cluster's accounting does not track GPUs
    (``scontrol show config``; nothing when Slurm does not answer): a history exported here
    lacks the jobs whose GPU counts are unknown, so a replay of it misses their load."""
    try:
        conf = SlurmClient(timeout_s=10).show_config()
    except SlurmError:
        return
    if tracks_gpus(conf) is False:
        print(f"{command}: note: this cluster's Slurm accounting does not track GPUs (no "
              "gres/gpu in AccountingStorageTRES): histories exported here leave out the jobs "
              f"whose GPU counts are unknown, so replays miss their load; to count them, "
              f"{GPU_TRES_FIX}", file=sys.stderr)


def tenants_note(command: str, config_path: str | None) -> None:
    """Print one note on stderr when the config at ``config_path`` (already read and checked
    by :func:`policy_config`) has ``virtual_clusters``: the replay leaves them out, so on a
    tenant cluster it is not the order that really ran."""
    if not config_path:
        return
    try:
        data = read_yaml(config_path)
    except YamlFileError:
        return
    if isinstance(data, dict) and data.get("virtual_clusters"):
        print(f"{command}: note: {visible(config_path)}: {NOT_REPLAYED}",
              file=sys.stderr)


def start_latency(value: str) -> float:
    """Seconds of ``--start-latency``: a number >= 0, or ``auto`` (from the cluster's
    SchedulerParameters; 0 with a note when Slurm does not answer). Raises CliError (exit 2)."""
    if value != "auto":
        return seconds_option("--start-latency", value)
    try:
        conf = SlurmClient(timeout_s=30).show_config()
    except SlurmError as exc:
        print(f"dlprio history check: note: no Slurm to read bf_interval from ({exc}); "
              "start latency 0 s", file=sys.stderr)
        return 0.0
    return start_latency_from(conf.get("SchedulerParameters", ""),
                              conf.get("SchedulerType", "sched/backfill"))


#: The options only ``check --forecasts`` reads, and only the JCT check (without it) reads,
#: with their defaults: argparse leaves them None (False for a flag) so that one given to the
#: other check is refused (:func:`_check`), even at its default value.
FORECAST_ONLY = {"format": None, "since": None, "json": False, "moments": DEFAULT_MOMENTS,
                 "draws": DEFAULT_DRAWS, "arrivals": DEFAULT_ARRIVALS,
                 "arrival_window_s": DEFAULT_WINDOW_S}
CHECK_ONLY = {"start_latency": "auto", "dispatch_latency": "auto", "ledger": None,
              "baseline": DEFAULT_BASELINE, "window_jobs": DEFAULT_WINDOW_JOBS,
              "summary_only": False}


def _refuse_given(args: argparse.Namespace, names: dict[str, Any], rule: str, fix: str) -> None:
    """CliError (exit 2) naming the options of ``names`` given on the command line: ``--json
    applies only with --forecasts; add --forecasts or drop --json``."""
    given = [f"--{name.replace('_', '-')}" for name in names
             if getattr(args, name) not in (None, False)]
    if len(given) == 1:
        raise CliError(f"{given[0]} applies only {rule}; {fix}{given[0]}")
    if given:
        raise CliError(f"{', '.join(given)} apply only {rule}; {fix}them")


def _check(args: argparse.Namespace) -> int:
    if args.forecasts:
        _refuse_given(args, CHECK_ONLY, "without --forecasts (the JCT check)", "drop ")
        if args.arrivals != "history":
            _refuse_given(args, {"arrival_window_s": None}, "with --arrivals history",
                          "add --arrivals history or drop ")
        vars(args).update({k: v for k, v in FORECAST_ONLY.items() if getattr(args, k) is None})
        return _check_forecasts(args)
    _refuse_given(args, FORECAST_ONLY, "with --forecasts", "add --forecasts or drop ")
    vars(args).update({k: v for k, v in CHECK_ONLY.items() if getattr(args, k) is None})
    config = policy_config(args.policy, args.config)
    baseline = baseline_policy(args.baseline)
    cluster = cluster_of(args)
    config, delay_note = cluster_requeue_delay(args, config, _delay_source(args))
    try:
        rows = read_rows(args.trace)
    except HistoryError as exc:
        raise CliError(str(exc)) from None
    dispatch = (dispatch_latency_of(rows) if args.dispatch_latency == "auto"
                else seconds_option("--dispatch-latency", args.dispatch_latency))
    cycle_at = cycle_time(args.ledger) if args.ledger else None
    latency = start_latency(args.start_latency)   # last: it may ask Slurm (a note if none)
    untracked_note("dlprio history check")   # after the input checks: bad input is one line
    tenants_note("dlprio history check", args.config)
    if delay_note is not None:
        print(f"dlprio history check: note: {delay_note}", file=sys.stderr)
    adopted = adopted_note(args.config, args.ledger) if args.config and args.ledger else None
    if adopted is not None:
        print(f"dlprio history check: note: {adopted}", file=sys.stderr)
    if cycle_at is not None and not phased(cycle_at, config):
        print(f"dlprio history check: note: --ledger {visible(args.ledger)}: policy "
              f"{config.policy} has no decision ticks (decision_interval_s "
              f"{config.decision_interval_s:g}), so the daemon's cycle times change nothing",
              file=sys.stderr)
    try:
        fidelity = check(rows, cluster, config, start_latency_s=latency, dispatch_s=dispatch,
                         cycle_at=cycle_at)
        base = fidelity if baseline == config.policy else check(
            rows, cluster, dataclasses.replace(config, policy=baseline), start_latency_s=latency,
            dispatch_s=dispatch, cycle_at=cycle_at)
    except ValueError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    print(format_fidelity(fidelity, per_job=not args.summary_only, styled=tables.is_terminal()))
    print()
    sys.stdout.write(format_windows_table(
        against_baseline(fidelity, base, args.window_jobs), baseline, args.window_jobs,
        styled=tables.is_terminal(),
        what=" replayed (real: the JCTs the cluster gave, under the policy that ran)"))
    return 0


def min_samples_of(config_path: str | None) -> int:
    """The daemon config's ``gittins_min_samples`` (the fewest ended jobs its forecasts learn
    run times from), or the default without ``--config``; the file was checked as the daemon
    checks it by :func:`policy_config`."""
    if not config_path:
        return MIN_SAMPLES
    try:
        return load_config(config_path).gittins_min_samples
    except ConfigError as exc:   # policy_config read it first: not reached as a rule
        raise CliError(str(exc)) from None


def _check_forecasts(args: argparse.Namespace) -> int:
    """``check --forecasts``: forecast quality on a replay of the trace
    (:mod:`prioritizer.history.forecast_check`)."""
    if args.since is not None:
        try:
            args.since = trace_point("--since", args.since, args.trace, time.time(), rebased=False)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    config = policy_config(args.policy, args.config)
    cluster = cluster_of(args)
    config, delay_note = cluster_requeue_delay(args, config, _delay_source(args))
    trace = trace_of(args, "replay", cluster)
    shared = sum(1 for j in trace.jobs if j.share > 0 or j.opportunistic)
    if shared:
        raise CliError(f"{args.trace}: {shared} shard or opportunistic jobs: the forecast "
                       "replays whole-GPU production jobs only; check a trace without them")
    if delay_note is not None:
        print(f"dlprio history check: note: {delay_note}", file=sys.stderr)
    try:
        checks = check_forecasts(trace, cluster, config, args.moments, args.draws,
                                 arrivals=args.arrivals, arrival_window_s=args.arrival_window_s,
                                 min_samples=min_samples_of(args.config))
    except ValueError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    data = forecast_report(checks, args.moments, args.draws, args.arrivals)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(format_forecast_report(data, styled=tables.is_terminal()))
    return 0


COMMAND = Command("history", "export the cluster's own jobs from sacct; check replays of them",
                  configure, run)
