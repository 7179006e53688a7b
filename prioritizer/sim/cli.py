"""``dlprio simulate``: replay a job trace under one or several policies.

Argument parsing and output only; the replay is ``prioritizer.sim.engine``, the rules are
``prioritizer.policy.decide``. Bad input (malformed trace row, bad config key, no cluster size)
exits 2 with one line naming the file and line or the option; an unknown policy name lists
the valid ones. With several policies or ``--baseline``, each is also measured window by
window against the baseline (``prioritizer.sim.windows``), which is replayed with the others.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import sys
import time
import typing
from typing import Any, cast

import msgspec


from prioritizer import numbers
from prioritizer.command import CliError, Command, Exit
from prioritizer.outputs import check_outputs
from prioritizer.policy.config import (DEFAULT_REQUEUE_DELAY_S, POLICY_NAMES, PolicyConfig,
                                       PolicyName)
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.tenants import SHARED, Tenancy
from slurm_plugin.common.wording import close_name, shown
from prioritizer.sim.report import (format_sharing_table, format_table, format_windows_table,
                                    summarize, window_comparison, write_jobs_csv, write_plot)
from prioritizer.sim.engine import Cluster, SimResult, simulate, trace_tenant
from prioritizer.sim.shared import is_shared
from prioritizer.sim.learned import MIN_SAMPLES, learned_distribution, samples_from_trace
from prioritizer.sim.traces import FORMATS, Trace, TraceError, read_cluster_spec, read_trace
from prioritizer.window import FORMS, WindowError, epoch
from slurm_plugin.common.cli import visible

#: the policies whose queues --thresholds (``thresholds_gpu_s``) sets; ``las`` queues by
#: seconds (``thresholds_s``, set by --config)
THRESHOLD_POLICIES = frozenset({"tiresias-las", "tiresias-gittins"})

#: the baseline of a comparison (Slurm alone) and its jobs per window, unless given
DEFAULT_BASELINE, DEFAULT_WINDOW_JOBS = "fifo-fit", 200

#: option name -> PolicyConfig field it overrides
OVERRIDES = {"starve_knob": "starve_knob", "min_run": "min_run_s",
             "gittins_quantum": "gittins_quantum_gpu_s",
             "checkpoint_overhead": "checkpoint_overhead_s",
             "requeue_delay": "requeue_delay_s", "decision_interval": "decision_interval_s",
             "wait_guard": "wait_guard", "requeue_guard": "requeue_guard",
             "preempt_gain": "preempt_gain"}


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` options."""
    add = parser.add_argument
    add("--trace", required=True, help="job trace CSV (tiresias, philly/helios or itp)")
    add("--format", choices=sorted(FORMATS), help="trace format (default: from the header)")
    add("--since", type=_since, metavar="SECONDS|TIME",
        help="keep jobs submitted at or after SECONDS of the trace's own time, or a TIME on a "
        f"history trace, as --since of 'dlprio history export' takes it: {FORMS}; re-base to 0")
    add("--nodes", metavar="N",
        help=f"number of nodes (1 to {numbers.MAX_NODES:,})")
    add("--gpus-per-node", metavar="G",
        help=f"GPUs per node (1 to {numbers.MAX_GPUS_PER_NODE:,})")
    add("--cluster", metavar="SPEC.csv", help="Tiresias cluster spec instead of --nodes/-G")
    add("--cluster-from-slurm", action="store_true",
        help="take nodes × GPUs per node from sinfo on the SLURM_CONF cluster")
    add("--placement", choices=("consolidate", "count"), default="consolidate",
        help="consolidate: real nodes, fewest per job (default); count: GPU counting only")
    add("--policy", default=None, metavar="NAME",
        help=f"one of: {', '.join(POLICY_NAMES)} (default: --config's, else tiresias-las)")
    add("--compare", metavar="P1,P2,...", help="run several policies; ratios to the first")
    add("--baseline", metavar="POLICY",
        help="compare each policy per window with this one, replayed too (default with "
        f"--compare: {DEFAULT_BASELINE})")
    add("--window-jobs", type=numbers.count("--window-jobs"), metavar="N",
        help=f"jobs per window of submit order, for the baseline comparison (default "
        f"{DEFAULT_WINDOW_JOBS})")
    add("--config", metavar="FILE.yaml", help="YAML file whose 'policy:' section sets the policy")
    add("--thresholds", metavar="T1,T2", help="queue thresholds, GPU·s (2D policies)")
    hints = typing.get_type_hints(PolicyConfig, include_extras=True)
    for option, fld in OVERRIDES.items():
        meta = next(m for m in typing.get_args(hints[fld]) if isinstance(m, msgspec.Meta))
        flag = "--" + option.replace("_", "-")
        add(flag, type=numbers.override(flag, meta.gt if meta.gt is not None else meta.ge or 0.0,
                                        low_open=meta.gt is not None),
            metavar="X", help=f"override {fld}")
    add("--zero-cost", action="store_true",
        help="no checkpoint overhead, requeue delay, decision interval or min-run guard")
    add("--durations", metavar="FILE.csv",
        help="GPU·s samples for tiresias-gittins and --preempt-gain (default: packaged "
        "yarn-gput1000.csv)")
    add("--durations-from", metavar="TRACE.csv",
        help="learn the GPU·s distribution (tiresias-gittins, --preempt-gain) from this "
        "trace's (finished) jobs")
    add("--durations-min", type=numbers.count("--durations-min"), metavar="N",
        help=f"fewest jobs --durations-from needs, else the packaged one (default {MIN_SAMPLES})")
    add("--jobs-csv", metavar="FILE", help="write the per-job CSV")
    add("--json", action="store_true", help="print a JSON list of summaries instead of a table")
    add("--plot", metavar="OUT.png", help="write the JCT CDF and queue-length plot")
    add("--tenants", metavar="FILE.yaml",
        help="virtual clusters: a dlprio.yaml, or a file with only its 'virtual_clusters:' "
        "section (with users: lists) and fair_share_half_life_s; replay under the tenant "
        "rules and report per tenant")
    add("--tenants-plot", metavar="OUT.png",
        help="with --tenants: write the GPUs held per tenant over time (first policy)")


class SinceTime(float):
    """``--since`` given as a TIME (:data:`prioritizer.window.FORMS`, local time): epoch
    seconds, which only a history trace's times are (:func:`trace_of` refuses it on another)."""


def _since(value: str) -> float:
    """``--since``: seconds of trace time, a plain finite number >= 0, or a TIME
    (:class:`SinceTime`); CliError otherwise."""
    if not numbers.looks_numeric(value):
        try:
            return SinceTime(epoch("--since", value, time.time()))
        except WindowError:
            raise CliError(f"--since: expected SECONDS of trace time or, on a history trace, a "
                           f"time: {FORMS}; got {value!r}") from None
    if numbers.FLOAT_TEXT.match(value.strip()) and -math.inf < float(value) < 0:
        raise CliError(f"--since must be >= 0 (seconds of trace time), got {float(value):g}")
    return numbers.trace_time("--since")(value)


def run(args: argparse.Namespace) -> int:
    """Run the replays and print/write the outputs; see the module doc for exit codes."""
    if args.since is not None and not args.since >= 0:
        raise CliError(f"--since must be >= 0 (seconds of trace time), got {args.since:g}")
    base = _config(args)
    policies = _policies(args, base.policy)
    baseline = _baseline(args, policies)
    if baseline is not None and baseline not in policies:
        policies.append(baseline)
    if args.durations_min is not None and not args.durations_from:
        raise CliError("--durations-min applies only with --durations-from; add it or drop "
                       "--durations-min")
    uses = "tiresias-gittins" in policies or base.preempt_gain > 0   # PolicyConfig.uses_distribution
    if not uses:
        for option in ("durations", "durations_from"):
            if getattr(args, option, None):
                flag = "--" + option.replace("_", "-")
                raise CliError(f"{flag} only applies to tiresias-gittins or --preempt-gain "
                               f"(running {', '.join(policies)}); drop {flag} or add "
                               "tiresias-gittins to --policy/--compare")
    if args.thresholds and not THRESHOLD_POLICIES & set(policies):
        raise CliError(f"--thresholds (GPU·s) only applies to {' and '.join(sorted(THRESHOLD_POLICIES))} "
                       f"(running {', '.join(policies)}); drop --thresholds or add one of them "
                       "to --policy/--compare")
    cluster = cluster_of(args)
    base, delay_note = cluster_requeue_delay(args, base)
    inputs = [("--trace", args.trace), ("--cluster", args.cluster), ("--config", args.config),
              ("--durations", args.durations), ("--durations-from", args.durations_from),
              ("--tenants", args.tenants)]
    if args.tenants_plot and not args.tenants:
        raise CliError("--tenants-plot needs --tenants FILE.yaml")
    check_outputs([("--jobs-csv", args.jobs_csv, False), ("--plot", args.plot, True),
                   ("--tenants-plot", args.tenants_plot, True)],
                  inputs)   # before the replay, not after it
    trace = trace_of(args, "simulate", cluster)
    distribution = None
    if uses:
        distribution = _distribution(args)
    tenancy = _tenancy(args, cluster) if args.tenants else None
    if tenancy is not None and is_shared(trace):
        raise CliError("--tenants: the trace has shard or opportunistic jobs, which replay "
                       "without tenants; drop --tenants or the sharing columns")
    if tenancy is not None and all(trace_tenant(tenancy, job) == SHARED for job in trace.jobs):
        raise CliError(f"--tenants: no job of the trace belongs to a virtual cluster of "
                       f"{visible(args.tenants)} ("
                       + ("the trace names no user, account or partition: use a trace with a "
                          "user column (Philly) or a history export"
                          if not any(j.user or j.account or j.partition for j in trace.jobs)
                          else "its users: lists name none of the trace's users")
                       + ")")
    if delay_note is not None:   # after the input checks: bad input is one line
        print(f"note: {delay_note}", file=sys.stderr)
    configs = [dataclasses.replace(base, policy=cast(PolicyName, name)) for name in policies]
    results = _replay_all(trace, cluster, configs, distribution, tenancy)
    summaries = [summarize(r) for r in results]
    tenant_tables: list[tuple[str, dict[str, Any]]] = []
    if tenancy is not None:
        for summary, result, config in zip(summaries, results, configs):
            figures = _tenant_figures(trace, cluster, config, distribution, tenancy, result)
            summary.update(figures)
            tenant_tables.append((config.policy, figures))
    window_jobs = args.window_jobs or DEFAULT_WINDOW_JOBS
    comparison = window_comparison(results, baseline, window_jobs) if baseline else None
    if comparison:
        for summary in summaries:
            summary.update(comparison[summary["policy"]], baseline=baseline)
    if trace.skipped_jobs:
        print(f"note: {trace.skipped_jobs} trace row(s) with zero GPUs or zero duration were "
              "skipped; counted in skipped_jobs", file=sys.stderr)
    if results[0].unfittable_jobs:
        beyond = " (or pass their virtual cluster's max_gpus or user limit)" if tenancy else ""
        print(f"note: {results[0].unfittable_jobs} job(s) can never fit on this cluster{beyond}; "
              "counted in skipped_jobs", file=sys.stderr)
    if args.json:
        print(json.dumps(summaries, indent=2))
    else:
        from prioritizer import tables   # rich: only for the table (imports cost a sweep)
        sys.stdout.write(format_table(summaries, styled=tables.is_terminal()))
        if comparison and baseline is not None:
            sys.stdout.write("\n" + format_windows_table(comparison, baseline, window_jobs,
                                                          styled=tables.is_terminal()))
        if summaries and "production_jobs" in summaries[0]:
            sys.stdout.write("\n" + format_sharing_table(summaries, styled=tables.is_terminal()))
        from prioritizer.sim.tenant_report import format_tenant_table
        for policy, figures in tenant_tables:
            sys.stdout.write("\n" + format_tenant_table(policy, figures,
                                                        styled=tables.is_terminal()))
    if args.tenants_plot and tenancy is not None:
        from prioritizer.sim.tenant_report import write_tenant_plot
        _write(lambda rs, path: write_tenant_plot(rs[0], tenancy, path), results,
               args.tenants_plot)
    if args.jobs_csv:
        _write(write_jobs_csv, results, args.jobs_csv)
    if args.plot:
        _write(functools.partial(write_plot, comparison=comparison, baseline=baseline),
               results, args.plot)
    return 0


def _distribution(args: argparse.Namespace) -> Any:
    """--durations FILE, --durations-from TRACE (learned, with a note) or the packaged one."""
    if getattr(args, "durations_from", None):
        if args.durations:
            raise CliError("use either --durations or --durations-from, not both")
        try:
            source = read_trace(args.durations_from)
        except TraceError as exc:
            raise CliError(str(exc)) from None
        distribution, note = learned_distribution(samples_from_trace(source),
                                                  args.durations_min or MIN_SAMPLES,
                                                  args.durations_from)
        print(f"note: {note}", file=sys.stderr)
        return distribution
    if not args.durations:
        return load_distribution()
    from prioritizer.samplesfile import load_distribution as load_file   # PyYAML's reader
    try:
        return load_file(args.durations)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _replay_all(trace: Trace, cluster: Cluster, configs: list[PolicyConfig],
                distribution: Any, tenancy: Tenancy | None = None) -> list[SimResult]:
    """One replay per config, in parallel processes (one per core, at most one per
    policy) when there are several; results in ``configs`` order."""
    workers = min(len(configs), os.cpu_count() or 1)
    if workers <= 1:
        return [simulate(trace, cluster, c, distribution, tenancy=tenancy) for c in configs]
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(simulate, trace, cluster, c, distribution, tenancy=tenancy)
                   for c in configs]
        return [f.result() for f in futures]


#: the top-level keys of a ``--tenants`` file (those of dlprio.yaml it shares)
TENANTS_FILE_KEYS = ("virtual_clusters", "fair_share_half_life_s")


def _tenancy(args: argparse.Namespace, cluster: Cluster) -> Tenancy:
    """``--tenants FILE.yaml``: its ``virtual_clusters`` and ``fair_share_half_life_s``,
    checked against the cluster (CliError, one line per problem, exit 2). The file is a whole
    ``dlprio.yaml`` or one with only those keys: the other keys of dlprio.yaml are left to the
    daemon (``--config`` reads the ``policy:`` section), a key dlprio.yaml does not have is
    refused, and so is a file without virtual clusters."""
    from prioritizer.config_file import DaemonConfig
    from prioritizer.policy.tenants import check_tenancy, read_tenancy
    from slurm_plugin.common.yamlfile import YamlFileError, read_yaml
    path = visible(args.tenants)
    try:
        data = read_yaml(args.tenants)
    except YamlFileError as exc:
        raise CliError(str(exc)) from None
    daemon_keys = [f.name for f in dataclasses.fields(DaemonConfig)]
    for key in data if isinstance(data, dict) else ():
        if key not in daemon_keys:
            close = close_name(str(key), daemon_keys)
            name = key if isinstance(key, str) and key.isprintable() else shown(key)
            raise CliError(f"{path}: {name}: unknown key" + (
                f"; did you mean {close!r}?" if close
                else f"; valid keys: {', '.join(TENANTS_FILE_KEYS)} (or a whole dlprio.yaml)"))
    if not isinstance(data, dict) or data.get("virtual_clusters") is None:
        raise CliError(f"{path}: no virtual clusters to replay; give a dlprio.yaml or a file "
                       "with a 'virtual_clusters:' section (and fair_share_half_life_s)")
    tenancy, problems = read_tenancy(data["virtual_clusters"],
                                     data.get("fair_share_half_life_s", 0.0))
    problems += check_tenancy(tenancy, cluster.total_gpus)   # the valid tenants' rules too
    if problems:
        raise CliError("\n".join(f"{path}: {line}" for line in problems))
    return tenancy


def _tenant_figures(trace: Trace, cluster: Cluster, config: PolicyConfig, distribution: Any,
                    tenancy: Tenancy, result: SimResult) -> dict[str, Any]:
    """The per-tenant figures of ``result``, each tenant's jobs replayed alone on its
    guaranteed GPUs under ``config`` for ρ (``prioritizer.sim.tenant_report``)."""
    from prioritizer.sim.tenant_report import alone_cluster, tenant_figures, tenant_trace
    alone = {}
    for tenant in tenancy.tenants:
        small = alone_cluster(tenant.guaranteed_gpus, cluster.gpus_per_node)
        mine = tenant_trace(trace, result.tenant_of, tenant.name)
        if small is not None and mine.jobs:
            small = Cluster(small.nodes, small.gpus_per_node, cluster.placement)
            alone[tenant.name] = simulate(mine, small, config, distribution)
    return tenant_figures(result, tenancy, alone)


def _baseline(args: argparse.Namespace, policies: list[str]) -> str | None:
    """The baseline of the per-window comparison: --baseline, else :data:`DEFAULT_BASELINE`
    when several policies run; None (no comparison) for one policy and no --baseline."""
    if args.baseline is None and len(policies) < 2:
        if args.window_jobs is not None:
            raise CliError("--window-jobs applies to a comparison: add --baseline POLICY or "
                           "--compare P1,P2")
        return None
    return baseline_policy(args.baseline if args.baseline is not None else DEFAULT_BASELINE)


def baseline_policy(name: str) -> PolicyName:
    """``--baseline``'s policy name (``dlprio simulate`` and ``history check``). Raises
    CliError (exit 2) for an unknown name, listing the valid ones."""
    if name.strip() not in POLICY_NAMES:
        raise CliError(f"--baseline: unknown policy {name!r}; valid: {', '.join(POLICY_NAMES)}")
    return cast(PolicyName, name.strip())


def _policies(args: argparse.Namespace, configured: str) -> list[str]:
    """Policy names to run: --compare, else --policy, else the config file's policy."""
    names = args.compare.split(",") if args.compare is not None else [args.policy or configured]
    names = [n.strip() for n in names]
    if args.compare is not None and args.policy:
        raise CliError("use either --policy or --compare, not both")
    if args.compare is not None and "" in names and any(names):
        raise CliError(f"--compare {args.compare!r}: an empty policy name between commas; "
                       "give names like fifo,srtf")
    names = [n for n in names if n]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CliError(f"--compare: {', '.join(twice)} given more than once; each policy runs "
                       "once (its rows in --jobs-csv are told apart by the policy name)")
    for name in names:
        if name not in POLICY_NAMES:
            raise CliError(f"unknown policy {name!r}; valid: {', '.join(POLICY_NAMES)}")
    if not names:
        raise CliError("--compare needs at least one policy name")
    return names


def _config(args: argparse.Namespace) -> PolicyConfig:
    section: dict[str, Any] = {}
    if args.config:
        section = policy_section(args.config)
    if args.thresholds:
        # 0 passes here so that the policy names it with the section's other problems
        high = numbers.MAX_SECONDS * numbers.MAX_GPUS_PER_NODE
        section["thresholds_gpu_s"] = []
        for item, v in enumerate(args.thresholds.split(","), 1):
            try:
                section["thresholds_gpu_s"].append(numbers.parse_float(v, 0.0, high))
            except ValueError:
                try:   # not in [0, high], so not in (0, high], the policy's range: its message
                    numbers.parse_float(v, 0.0, high, low_open=True)
                except ValueError as exc:
                    raise CliError(f"--thresholds: item {item}: {exc}; give increasing GPU·s "
                                   "like 3250,7200") from None
    for option, fld in OVERRIDES.items():
        if getattr(args, option) is not None:
            section[fld] = getattr(args, option)
    try:
        config = PolicyConfig.from_mapping(section)
    except ValueError as exc:
        raise CliError("\n".join(_source(line, args) for line in str(exc).splitlines())) from None
    return config.zero_cost() if args.zero_cost else config


def policy_section(path: str) -> dict[str, Any]:
    """The ``policy:`` section of the daemon config at ``path`` as a dict: ``{}`` (the default
    policy) for an empty file, no ``policy:`` key or an empty one (``policy: ~``), as ``dlprio
    run`` reads them. ``dlprio simulate``, ``history check`` and ``tune`` read ``--config``
    through it, and the rest of the file is checked as ``dlprio run`` checks it
    (:func:`prioritizer.config_file.from_mapping`: every daemon key with its own rules, an
    unknown or misspelt key named with the closest one, ``polcy:`` included), so a file these
    commands accept is one the daemon starts with; nothing is read from Slurm, no ledger is
    opened and no configured path is touched. Two things are left to the caller: the policy
    section's own values (the caller checks them after its options override them, naming the
    option; a file refused for its daemon keys lists them too, after those), and the daemon's
    refusal of ``policy: srtf`` (an oracle, for these commands only). The daemon's
    ``interval_s`` stands for the section's ``decision_interval_s`` where it sets none
    (:func:`prioritizer.config_file.with_cycle_interval`).

    Raises:
        CliError: unreadable file or bad YAML (:func:`slurm_plugin.common.yamlfile.read_yaml`), a top
            level or ``policy:`` that is not a mapping of keys, named as the daemon names it:
            ``FILE: policy: expected a mapping of keys (got [])``, or one line per problem of
            the daemon's keys, ``FILE: KEY: allowed range or fix (got VALUE)`` (exit 2).
    """
    from prioritizer.config_file import from_mapping, with_cycle_interval
    from prioritizer.policy.validation import ConfigError
    from slurm_plugin.common.yamlfile import YamlFileError, read_yaml
    try:
        data = read_yaml(path)
    except YamlFileError as exc:
        raise CliError(str(exc)) from None
    if data is not None and not isinstance(data, dict):
        raise CliError(f"{visible(path)}: top level: expected a mapping of keys with a 'policy:' "
                       f"section (got {shown(data)})")
    section = (data or {}).get("policy")
    if section is not None and not isinstance(section, dict):
        raise CliError(f"{visible(path)}: policy: expected a mapping of keys (got {shown(section)})")
    policy_problems: list[str] = []
    try:   # the policy as the daemon would take it, for the rules that read it (queue count)
        policy = PolicyConfig.from_mapping(section)
    except ConfigError as exc:   # the caller's to name (an option may override a value),
        policy = PolicyConfig()  # unless the file is refused anyway: then named with the rest
        policy_problems = str(exc).splitlines()
    if policy.policy == "srtf":
        policy = dataclasses.replace(policy, policy="tiresias-las")
    try:
        from_mapping({**(data or {}), "policy": policy})
    except ConfigError as exc:
        raise CliError("\n".join(f"{visible(path)}: {line}" for line in
                                 str(exc).splitlines() + policy_problems)) from None
    return dict(with_cycle_interval(data or {}).get("policy") or {})


def _source(line: str, args: argparse.Namespace) -> str:
    """A policy error line (``policy.KEY: ...``) named by where the value came from: the
    option that set it (``--starve-knob: ...``), else the --config file."""
    flags = {fld: "--" + option.replace("_", "-") for option, fld in OVERRIDES.items()
             if getattr(args, option) is not None}
    if args.thresholds:
        flags["thresholds_gpu_s"] = "--thresholds"
    path, _, rest = line.partition(":")
    key = path.removeprefix("policy.").split("[")[0]
    if key in flags:
        return f"{flags[key]}{path.removeprefix('policy.' + key)}:{rest}"
    return f"{args.config}: {line}" if args.config else line


def trace_of(args: argparse.Namespace, doing: str, cluster: Cluster | None = None) -> Trace:
    """The trace of ``--trace``/``--format``/``--since``; a bad or empty one is a CliError
    naming it (``doing``: what the command would do with its jobs, e.g. ``simulate``), and so
    is one of which no job fits ``cluster`` (:func:`refuse_unfittable`)."""
    try:
        trace = read_trace(args.trace, args.format, args.since)
    except TraceError as exc:
        raise CliError(str(exc)) from None
    if isinstance(args.since, SinceTime) and trace.format != "history":
        raise CliError(f"--since: a time needs a history trace (epoch times); give SECONDS of "
                       f"trace time for {args.trace}")
    if not trace.jobs:
        raise CliError(f"{args.trace}: no jobs to {doing} (after --since and skipping)")
    if cluster is not None:
        refuse_unfittable(trace, cluster, args.trace)
    return trace


def refuse_unfittable(trace: Trace, cluster: Cluster, path: str) -> None:
    """CliError (exit 2) when ``trace`` has jobs and none of them fits ``cluster`` even
    empty: the replay would have nothing to run, as for a trace without jobs. Some jobs
    that never fit are left to the replay, which counts them (a note, ``skipped_jobs``)."""
    line = cluster.none_fits([j.num_gpus for j in trace.jobs], "trace") if trace.jobs else None
    if line is not None:
        raise CliError(f"{visible(path)}: {line}")


def cluster_of(args: argparse.Namespace) -> Cluster:
    """The replay's cluster from ``--cluster-from-slurm``, ``--cluster SPEC.csv`` or
    ``--nodes``/``--gpus-per-node`` (``dlprio simulate`` and ``dlprio history check``; a
    command without an option reads it as absent). Raises CliError (exit 2) naming the option."""
    spec, placement = getattr(args, "cluster", None), getattr(args, "placement", None)
    hint = "--cluster SPEC.csv" if hasattr(args, "cluster") else "--cluster-from-slurm"
    if getattr(args, "cluster_from_slurm", False):
        if spec or args.nodes is not None or args.gpus_per_node is not None:
            raise CliError("use either --cluster-from-slurm or --cluster/--nodes/--gpus-per-node")
        from prioritizer.sim.slurm_cluster import ClusterShapeError, shape_from_slurm
        try:
            nodes, gpus = shape_from_slurm()
        except ClusterShapeError as exc:
            raise CliError(str(exc)) from None
    elif spec:
        if args.nodes is not None or args.gpus_per_node is not None:
            raise CliError("use either --cluster or --nodes/--gpus-per-node, not both")
        try:
            nodes, gpus = read_cluster_spec(spec)
        except TraceError as exc:
            raise CliError(str(exc)) from None
    else:
        if args.nodes is None or args.gpus_per_node is None:
            raise CliError(f"give the cluster: --nodes N --gpus-per-node G, or {hint}")
        nodes = numbers.cluster_size("--nodes", args.nodes, numbers.MAX_NODES)
        gpus = numbers.cluster_size("--gpus-per-node", args.gpus_per_node,
                                    numbers.MAX_GPUS_PER_NODE)
    if nodes <= 0 or gpus <= 0:
        raise CliError("--nodes and --gpus-per-node must be > 0")
    if nodes > numbers.MAX_NODES or gpus > numbers.MAX_GPUS_PER_NODE:
        where = (f"{visible(spec)}: " if spec else "--cluster-from-slurm: "
                 if getattr(args, "cluster_from_slurm", False) else "")
        raise CliError(f"{where}cluster of {nodes:,} nodes × {gpus:,} GPUs: at most "
                       f"{numbers.MAX_NODES:,} nodes and {numbers.MAX_GPUS_PER_NODE:,} GPUs "
                       "per node")
    return Cluster(nodes, gpus, placement) if placement else Cluster(nodes, gpus)


#: where a policy's own requeue delay comes from, for the note of :func:`cluster_requeue_delay`
FROM_POLICY = "the policy's requeue_delay_s (--config or an option)"


def cluster_requeue_delay(args: argparse.Namespace, policy: PolicyConfig,
                          source: str = FROM_POLICY) -> tuple[PolicyConfig, str | None]:
    """With ``--cluster-from-slurm``: ``policy`` with the cluster's requeue delay where it
    leaves ``requeue_delay_s`` at its default
    (:meth:`~prioritizer.policy.config.PolicyConfig.with_cluster_requeue_delay`, the daemon's
    rule), and a note naming the delay the replay uses and where it comes from (``source``:
    where a delay other than the default came from); without it, ``policy`` and None. Raises
    CliError (exit 2) when Slurm does not answer."""
    if not getattr(args, "cluster_from_slurm", False):
        return policy, None
    from prioritizer.sim.slurm_cluster import ClusterShapeError, requeue_delay_from_slurm
    try:
        cluster_s = requeue_delay_from_slurm()
    except ClusterShapeError as exc:
        raise CliError(str(exc)) from None
    adopted = policy.with_cluster_requeue_delay(cluster_s)
    if policy.requeue_delay_s == DEFAULT_REQUEUE_DELAY_S:
        return adopted, (f"requeue delay {cluster_s:g} s, the cluster's (scontrol show config: "
                         "cred_expire + 1 s), as the daemon uses it while requeue_delay_s "
                         "is left at its default")
    return adopted, (f"requeue delay {policy.requeue_delay_s:g} s, {source}; the cluster's is "
                     f"{cluster_s:g} s (scontrol show config: cred_expire + 1 s)")


def _write(writer: Any, results: list[SimResult], path: str) -> None:
    try:
        writer(results, path)
    except OSError as exc:
        raise CliError(f"{path}: cannot write ({exc.strerror})", exit_code=Exit.FAILED) from None


COMMAND = Command("simulate", "replay a job trace under Tiresias and baseline policies",
                  configure, run)
