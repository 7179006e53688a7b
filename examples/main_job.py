#!/usr/bin/env python3
"""The main job: two real Philly workloads on the live cluster, under Slurm alone and under dlprio.

Steps (docs/main_job.md): two workloads from the trace, each scaled by one time factor that
keeps its spread of durations and gaps (:func:`prioritizer.sim.workload.scale_spread`): the
**burst**, the window of ``--jobs`` jobs of the Philly dense window with the highest offered load
(:func:`pick.load`), and the **mixed** workload, the jobs submitted from a fixed offset
(:func:`pick.mixed`), whatever they are. For each: the map's check (``dlprio/fifo-fit``
predicted for the trace's own window and for the scaled jobs), the dlprio settings from
``dlprio tune`` on the history before the window, scaled the same way (:mod:`tuned`), then two
live runs back to back, each from an idle cluster and with the same specs, submit times and
scaled durations: **1/2 Slurm alone** (its stock multifactor priority and backfill, no daemon)
and **2/2 under** ``dlprio run`` with the tuned config (the demo config ``--config`` with the
tuned policy keys; ledger in ``--out``/dlprio, public snapshot where ``dlqueue`` looks on the
default cluster: :func:`snapshot_path`). The burst writes into ``--out``, the mixed workload
into ``--out``/mixed. Each job is submitted through
``dlsubmit`` at its scaled arrival time as a PAI v2 spec running ``examples/trainer.py``;
``dlqueue --watch`` runs meanwhile (on a terminal; into ``dlqueue.log`` otherwise). At the end:
per-job JCT of both runs side by side, one table with both runs and ``dlprio simulate``'s
prediction for each (``fifo-fit`` for Slurm alone, the config's policy for dlprio; each run's
jobs as they were submitted, with the cluster's start-up costs measured before the runs by
probe jobs: :mod:`startup`), ``jobs.csv``,
``main_job.png`` (JCT CDF; attempts of the dlprio run), ``main_job.json``, and the exact commands
to look further. Runs on the cluster ``SLURM_CONF`` names (``--cluster-name`` sets it).

Exit status: 0 every job completed; 1 the live run or the simulation failed (a job failed, the
daemon died, a timeout); 2 bad options, trace, config or output directory; 3 Slurm does not
answer (start it with ``dlcluster up``); 130 interrupted (our jobs are cancelled).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import shutil
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pick  # noqa: E402
import report  # noqa: E402
import replay  # noqa: E402
import startup  # noqa: E402
import tuned  # noqa: E402
from prioritizer.daemon import config as daemon_config  # noqa: E402
from prioritizer.sim import workload  # noqa: E402
from prioritizer.sim.traces import TraceError  # noqa: E402
from slurm_plugin.slurm.client import SlurmClient, SlurmError  # noqa: E402
from submit import queue_cli  # noqa: E402

HERE = Path(__file__).resolve().parent
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SLURM, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
MARKER = "main_job.json"
MIXED_DIR = "mixed"   # the mixed workload's output, below --out
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"


class UsageError(Exception):
    """Bad options or inputs: exit 2 with one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="main_job.py", description=__doc__.split("\n\n")[0])
    add = p.add_argument
    add("--jobs", type=int, default=None,
        help=f"jobs of each workload (default {pick.DEFAULT_JOBS} in the burst, "
             f"{pick.MIXED_JOBS} in the mixed one); each live run replays them all")
    add("--workloads", default="burst,mixed",
        help="which workloads, comma-separated: burst, mixed (default both)")
    add("--trace", default=str(pick.DEFAULT_TRACE),
        help="trace CSV (default: the Philly excerpt in data/traces/philly-15k)")
    add("--format", choices=("philly", "tiresias", "itp"), help="trace format (default: from the header)")
    add("--start-at", type=float, default=None, metavar="SECONDS",
        help="burst: replay the first --jobs jobs from this trace second instead of the window "
             "with the highest offered load in the Philly dense window (the default)")
    add("--out", default="out/main-job", help="output directory (default out/main-job)")
    add("--config", default=str(HERE / "dlprio-demo.yaml"), help="dlprio config to run with")
    add("--grace", type=int, default=5, help="checkpoint grace in each spec, s (default 5)")
    add("--cluster-name", default=None,
        help="use /etc/slurm-NAME/slurm.conf (a cluster from `dlcluster up --name NAME`)")
    add("--no-watch", action="store_true", help="do not run `dlqueue --watch` during the run")
    add("--watch-interval", type=float, default=None,
        help="dlqueue refresh, s (default 2 on a terminal, 20 otherwise)")
    add("--progress-interval", type=float, default=15.0, metavar="S",
        help="a progress line every S seconds while jobs run (default 15)")
    add("--idle-timeout", type=float, default=300, help="wait this long for an idle cluster (s)")
    add("--timeout", type=float, default=1800, help="give up on unfinished jobs after this (s)")
    return p


PID_FILES = {"main_job.pid": "main_job.py", "dlprio.pid": "dlprio", "dlqueue.pid": "dlqueue"}


def _runs(pid_file: Path, program: str) -> int | None:
    """The pid in ``pid_file`` if that process is alive and runs ``program`` (the base name of
    its first or second argument, so ``python /venv/bin/dlprio`` counts), else None."""
    try:
        pid = int(pid_file.read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
    except (OSError, ValueError):
        return None
    return pid if any(Path(a.decode(errors="replace")).name == program for a in argv) else None


def _lock_held(lock: Path) -> bool:
    """True if a process holds ``lock`` (the daemon's ``flock``, prioritizer/daemon/lock.py)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def check_not_running(path: Path) -> None:
    """Refuse an output directory that a live main job is using.

    Live means: one of its pid files (``main_job.pid``, ``dlprio.pid``, ``dlqueue.pid``, in
    ``path`` or in a run's subdirectory ``slurm/``, ``dlprio/``) names a running process of that
    program, or the daemon's ledger lock (``ledger.sqlite.lock``, same places) is held. Reads
    only; never changes ``path``.

    Raises:
        UsageError: naming the process (or the lock) and the fix.
    """
    if not path.is_dir():
        return
    places = [path] + [path / key for key, _, _ in RUNS]
    for where in places + [p / MIXED_DIR for p in places[:1]] + [path / MIXED_DIR / key
                                                                 for key, _, _ in RUNS]:
        for name, program in PID_FILES.items():
            if (pid := _runs(where / name, program)) is not None:
                raise UsageError(f"--out {path}: another main job is running there ({program}, "
                                 f"pid {pid}); wait for it, stop it, or name another --out")
        if _lock_held(where / "ledger.sqlite.lock"):
            raise UsageError(f"--out {path}: a dlprio daemon holds {where / 'ledger.sqlite.lock'}; "
                             "wait for that run to end or name another --out")


def prepare_out(path: Path) -> Path:
    """Empty ``path`` if it holds an earlier main-job output, create it otherwise.

    Raises:
        UsageError: ``path`` is a non-empty directory that is not a main-job output.
    """
    if path.exists() and any(path.iterdir()):
        if not (path / MARKER).exists() and not (path / "main_job.log").exists():
            raise UsageError(f"--out {path}: not empty and not an earlier main-job output; "
                             "name a new directory")
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


def snapshot_path(out: Path, site_config: str = queue_cli.DAEMON_CONFIG) -> Path:
    """Where the demo's daemon writes its public snapshot.

    On the default cluster (``SLURM_CONF`` unset or ``/etc/slurm/slurm.conf``): the path a
    plain ``dlqueue`` reads (:func:`submit.queue_cli.default_snapshot_path` of ``site_config``:
    its ``snapshot_path``, else :data:`prioritizer.daemon.snapshot.DEFAULT_PATH`), so that
    ``dlqueue`` in another terminal shows the demo. On any other cluster (``--cluster-name``,
    ``SLURM_CONF``): ``out/snapshot.json``, so that runs on parallel clusters never share one.
    """
    conf = Path(os.environ.get("SLURM_CONF", DEFAULT_SLURM_CONF))
    if conf.resolve() == Path(DEFAULT_SLURM_CONF).resolve():
        return Path(queue_cli.default_snapshot_path(site_config)[0])
    return out / "snapshot.json"


def cluster_shape(client: SlurmClient) -> tuple[int, int]:
    """(GPU nodes, GPUs per node) of the live cluster. Raises UsageError if nodes differ."""
    sizes = [n.gpus_total for n in client.nodes() if n.gpus_total > 0]
    if not sizes or len(set(sizes)) != 1:
        raise UsageError(f"the cluster's GPU nodes have sizes {sizes}; the simulator comparison "
                         "needs equal GPU nodes")
    return len(sizes), sizes[0]


class Say:
    """Progress lines: always to ``out/main_job.log``; to stdout unless ``quiet``."""

    def __init__(self, out: Path, quiet: bool) -> None:
        self.path, self.quiet = out / "main_job.log", quiet

    def __call__(self, line: str) -> None:
        with open(self.path, "a") as handle:
            handle.write(line + "\n")
        if not self.quiet:
            print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    replay.env_for_cluster(args.cluster_name)
    try:
        return run(args)
    except UsageError as exc:
        print(f"main_job.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (TraceError, workload.WorkloadError) as exc:
        print(f"main_job.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SlurmError as exc:
        print(f"main_job.py: Slurm does not answer ({exc}); start the cluster with "
              "`dlcluster up` (or name it with --cluster-name)", file=sys.stderr)
        return EXIT_SLURM
    except (replay.ReplayError, OSError) as exc:
        print(f"main_job.py: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM is handled like Ctrl-C: cancel our jobs, stop the daemon, exit 130."""
    raise KeyboardInterrupt


@dataclass(frozen=True)
class Workload:
    """One workload of the main job: its key (``burst``, ``mixed``), how it was chosen (one
    line), and the :class:`pick.Pick` (scaled jobs, time factor, the trace's window and the jobs
    before it)."""

    key: str
    chosen: str
    found: pick.Pick

    @property
    def jobs(self) -> list[workload.ScaledJob]:
        return self.found.jobs


WORKLOADS = ("burst", "mixed")


def load_jobs(args: argparse.Namespace) -> list[Workload]:
    """The workloads of ``args`` (``--workloads``), scaled. Reads only the trace: no Slurm.

    The burst: the window of ``--jobs`` consecutive jobs of the Philly dense window with the
    highest offered load (:func:`pick.load`), or with ``--start-at`` the first ``--jobs`` jobs
    from that trace second; the mixed workload: the ``--jobs`` jobs from
    :data:`pick.MIXED_START_S` on (:func:`pick.mixed`). Both scaled by
    :func:`prioritizer.sim.workload.scale_spread`.

    Raises:
        UsageError: ``--jobs`` < 1, ``--grace`` < 1, an unknown workload.
        TraceError, WorkloadError: the trace cannot give the sample.
    """
    keys = [k.strip() for k in args.workloads.split(",") if k.strip()]
    if not keys or any(k not in WORKLOADS for k in keys) or len(set(keys)) != len(keys):
        raise UsageError(f"--workloads {args.workloads!r}: a comma-separated list of "
                         f"{', '.join(WORKLOADS)}")
    if args.grace < 1 or (args.jobs is not None and args.jobs < 1):
        raise UsageError("--jobs must be >= 1, --grace >= 1")
    out = []
    if "burst" in keys:
        n = args.jobs or pick.DEFAULT_JOBS
        if args.start_at is not None:
            found = pick.mixed(args.trace, n, args.format, args.start_at)
            chosen = f"the first {report.plural(n, 'job')} from trace second {args.start_at:.0f}"
        else:
            found = pick.load(args.trace, n, pick.CLUSTER_GPUS, args.format)
            chosen = (f"the {n} consecutive jobs of the dense window with the highest offered "
                      f"load (on {pick.CLUSTER_GPUS} GPUs: {found.load:.1f}), from u_id "
                      f"{found.first_name} (job {found.first + 1} of the trace)")
        out.append(Workload("burst", chosen, found))
    if "mixed" in keys:
        n = args.jobs or pick.MIXED_JOBS
        found = pick.mixed(args.trace, n, args.format)
        out.append(Workload("mixed", f"the {n} jobs submitted from day "
                            f"{pick.MIXED_START_S / 86400:g} of the trace on, from u_id "
                            f"{found.first_name} (a fixed offset: the trace's own mix)", found))
    return out


def run(args: argparse.Namespace) -> int:
    conf = os.environ.get("SLURM_CONF", DEFAULT_SLURM_CONF)
    if not Path(conf).is_file():
        raise UsageError(f"no cluster config {conf}; start the cluster with `dlcluster up` "
                         "(`--name NAME --port-base PORT` for --cluster-name NAME)")
    loads = load_jobs(args)
    config = Path(args.config)
    try:
        daemon_config.load(config)             # the daemon's own checks, before --out is touched
    except daemon_config.ConfigError as exc:
        raise UsageError(f"--config {exc}") from None
    client = SlurmClient(timeout_s=30)
    check_not_running(Path(args.out))
    nodes, gpus = cluster_shape(client)
    check_not_running(Path(args.out))          # again: Slurm may have taken a while
    out = prepare_out(Path(args.out))
    pid_file = out / "main_job.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    try:
        verdicts = []
        for load in loads:
            where = out if load.key == "burst" else out / MIXED_DIR
            where.mkdir(exist_ok=True)
            status = _workload(args, where, load, config, client, nodes, gpus)
            verdicts.append(f"{load.key}: {(where / 'verdict.txt').read_text().strip()}"
                            if (where / "verdict.txt").exists() else f"{load.key}: failed")
            if status != EXIT_OK:
                return status
        if len(loads) > 1:
            print("\nboth workloads:\n" + "\n".join(f"  {v}" for v in verdicts), flush=True)
        return EXIT_OK
    finally:
        pid_file.unlink(missing_ok=True)


def _workload(args: argparse.Namespace, out: Path, load: Workload, base: Path,
              client: SlurmClient, nodes: int, gpus: int) -> int:
    """One workload into ``out``: the map's check, ``dlprio tune`` on its history, both live
    runs and the report; the exit status."""
    say = Say(out, quiet=False)
    found, n = load.found, len(load.jobs)
    p90 = workload.spread_p90_s(n)
    say(f"\n=== {load.key} workload: {load.chosen}")
    say(f"  scaled by one time factor k = {found.k:.2f} (durations and gaps / k; the 90th-"
        f"percentile job -> {p90:g} s, none under {workload.SPREAD_FLOOR_S:g} s or over "
        f"{workload.SPREAD_CAP_FACTOR * p90:g} s)")
    say(f"  settings: `dlprio tune` on the {min(len(found.before), tuned.HISTORY_JOBS)} jobs "
        f"before the window, scaled the same way:")
    try:
        config = tuned.tune(found.before, found.k, workload.SPREAD_CAP_FACTOR * p90, base, nodes,
                            gpus, out, replay.BIN / "dlprio", say)
    except tuned.TuneError as exc:
        say(f"main job: {exc}")
        return EXIT_FAILED
    policy = daemon_config.load(config).policy
    unscaled, scaled = workload.predicted_ratios(found.window, load.jobs, found.k, policy,
                                                 nodes, gpus)
    say(f"  map check, predicted avg JCT {policy.policy}/fifo-fit on {nodes} x {gpus} GPUs: "
        f"trace's own times {unscaled:.3f}, scaled {scaled:.3f} "
        f"({100 * (scaled / unscaled - 1):+.1f} %)")
    (out / "workload.json").write_text(json.dumps({
        "workload": load.key, "chosen": load.chosen, "k": found.k,
        "thresholds_gpu_s": list(policy.thresholds_gpu_s), "starve_knob": policy.starve_knob,
        "predicted_ratio": {"unscaled": unscaled, "scaled": scaled}}, indent=2))
    return _run_in(args, out, load.jobs, load.chosen, config, client, nodes, gpus,
                   "" if load.key == "burst" else f"{load.key} ")


@dataclass
class LiveRun:
    """One live run of the workload: its key (``slurm`` or ``dlprio``, also its subdirectory of
    the output), its label, what was submitted, Slurm's final states and the daemon's rows."""

    key: str
    label: str
    out: Path
    subs: list[replay.Submitted] = field(default_factory=list)
    states: dict[int, str] = field(default_factory=dict)
    daemon_rows: dict[int, dict] = field(default_factory=dict)
    config: Path | None = None
    wall_s: float = 0.0


RUNS = (("slurm", "Slurm alone", False), ("dlprio", "dlprio", True))


def _run_in(args: argparse.Namespace, out: Path, jobs: list[workload.ScaledJob], chosen: str,
            config: Path, client: SlurmClient, nodes: int, gpus: int, prefix: str = "") -> int:
    """Both live runs in the prepared output directory ``out``, then the report; the exit status.
    Progress tags start with ``prefix`` (``mixed ``)."""
    say = Say(out, quiet=False)
    workload.write_tiresias_csv(jobs, out / "scaled-trace.csv")
    demand = sum(j.gpus * j.duration_s for j in jobs)
    say(f"main job: {chosen}; from {args.trace}")
    say(f"  {report.plural(len(jobs), 'job')}, {demand:,.0f} GPU·s, arriving over "
        f"{jobs[-1].submit_s:g} s, on {nodes} x {gpus} GPUs; output in {out}")
    say("  two live runs, back to back from an idle cluster: 1/2 Slurm alone (its own "
        "multifactor priority, no daemon), 2/2 under `dlprio run`")
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        replay.wait_idle(client, args.idle_timeout, say)
        costs = startup.measure(client, out / "probes", args.grace, say)
    except (startup.ProbeError, replay.ReplayError) as exc:
        say(f"main job: {exc}")
        return EXIT_FAILED
    runs: list[LiveRun] = []
    for number, (key, label, with_daemon) in enumerate(RUNS, start=1):
        live = LiveRun(key, label, out / key)
        live.out.mkdir()
        runs.append(live)
        status = _live_run(args, live, f"{prefix}{number}/{len(RUNS)} {label}", jobs,
                           config if with_daemon else None, client, say)
        if status != EXIT_OK:
            return status
    return finish(out, runs, config, nodes, gpus, say, costs)


def _live_run(args: argparse.Namespace, live: LiveRun, tag: str, jobs: list[workload.ScaledJob],
              config: Path | None, client: SlurmClient, say: Say) -> int:
    """One live run into ``live`` (daemon only when ``config`` is given); EXIT_OK or the failure's
    exit status. Progress lines carry ``tag`` (``1/2 Slurm alone``)."""
    watch = not args.no_watch and sys.stdout.isatty()
    say.quiet = False
    replay.wait_idle(client, args.idle_timeout, say)
    snapshot = snapshot_path(live.out) if config else live.out / "no-daemon-snapshot.json"
    if config:
        live.config = replay.daemon_config(config, live.out, snapshot)
    say(f"\n[{tag}] starting: {report.plural(len(jobs), 'job')}"
        + (f", daemon config {shown(live.config)}, snapshot {shown(snapshot)}" if config else
           ", no daemon")
        + ("" if watch or args.no_watch else f"; dlqueue --watch writes to {shown(live.out / 'dlqueue.log')}"))
    daemon = queue_view = None
    finished = False
    started = time.monotonic()
    progress = replay.Progress(say, f"[{tag}]", len(jobs), interval_s=args.progress_interval)
    try:
        if config:
            daemon = replay.start_daemon(live.config, live.out)
        if not args.no_watch:
            interval = args.watch_interval or (2.0 if watch else 20.0)
            queue_view = replay.start_queue_view(snapshot, interval, live.out,
                                                 None if watch else live.out / "dlqueue.log")
            say.quiet = watch            # dlqueue redraws the terminal; progress goes to the log
        replay.replay(jobs, live.out, args.grace, daemon, progress, live.subs, prefix=live.key)
        live.states = replay.wait_finished(client, live.subs, daemon, args.timeout, progress)
        finished = True
        if daemon:                   # two more cycles: the ledger records the last job's end
            time.sleep(2 * daemon_config.load(live.config).interval_s + 1)
    except replay.ReplayError as exc:
        say.quiet = True                       # to the log; the terminal gets it once, below
        say(f"[{tag}] failed: {exc}")
        print(f"main_job.py: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("main_job.py: interrupted; cancelling the jobs it submitted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if queue_view:
            queue_view.stop(signal.SIGINT, timeout_s=5)
        if not finished and live.subs:
            replay.cancel(client, live.subs)
        if daemon:
            daemon.stop()
            live.daemon_rows = report.daemon_rows(live.config) if finished else {}
        say.quiet = False
    live.wall_s = time.monotonic() - started
    say(f"[{tag}] done in {live.wall_s:.0f} s: "
        + ", ".join(f"{n} {s}" for s, n in sorted(Counter(live.states.values()).items())))
    return EXIT_OK


def shown(path: Path | str) -> str:
    """``path`` as a user types it from the current directory: relative when it lies below it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def look_further(runs: Sequence[report.RunReport], out: Path) -> list[str]:
    """The closing lines: exact commands (``dlprio explain`` for the dlprio run's most-preempted
    job, ``dlprio status``) and the CSV, PNG and JSON paths, as they run from the current
    directory."""
    dl = next(r for r in runs if r.config is not None)
    top = max(dl.outcomes, key=lambda o: (o.preemptions, o.jct_s or 0.0))
    dlprio = shown(replay.BIN / "dlprio")
    config = shlex.quote(shown(dl.config))
    why = (f"preempted {report.plural(top.preemptions, 'time')}" if top.preemptions
           else "no job was preempted; this one waited longest")
    return ["look further:",
            f"  {dlprio} explain {top.sub.job_id} --config {config}    # {top.sub.name}, {why}",
            f"  {dlprio} status --all --config {config}",
            f"  per-job CSV: {shown(out / 'jobs.csv')}",
            f"  figure:      {shown(out / 'main_job.png')}",
            f"  everything:  {shown(out / MARKER)} (per attempt), {shown(out / 'main_job.log')}"]


def finish(out: Path, runs: Sequence[LiveRun], config: Path, nodes: int, gpus: int,
           say: Say, costs: startup.Startup) -> int:
    """Collect both runs, simulate each as it was submitted with the start-up ``costs``
    (:mod:`startup`), print the tables, write the CSV, PNG and JSON; the exit status."""
    say.quiet = False
    policy = daemon_config.load(config).policy.policy
    reports = [report.RunReport(r.key, r.label, report.outcomes(r.subs, r.states, r.daemon_rows),
                                r.config, policy if r.config else report.PREDICTS[r.key])
               for r in runs]
    sims: list[dict] = []
    sim_jct: dict[str, dict[int, float]] = {}
    try:
        for r, live in zip(reports, runs):
            trace = live.out / "sim-trace.csv"
            startup.write_trace(live.subs, costs, trace)
            found = report.simulate(trace, config, nodes, gpus, live.out, [r.prediction])
            sims.append(startup.shift_summary(found[0], costs))
            sim_jct[r.key] = {i: jct + costs.jct_shift_s for i, jct in
                              report.sim_jcts(live.out / "sim-jobs.csv", r.prediction).items()}
    except RuntimeError as exc:
        say(f"main job: the simulation failed: {exc}")
        return EXIT_FAILED
    n = len(reports[0].outcomes)
    say(f"\nper job (JCT in s; arrive = seconds after the first submission; sim = `dlprio "
        f"simulate` of the run's jobs as submitted, with the start-up measured above):")
    say(report.jobs_table(reports, sim_jct))
    say(f"\nboth live runs and their predictions ({report.plural(n, 'job')}, {nodes} x {gpus} "
        f"GPUs; policy and modeled costs from {shown(config)}):")
    say(report.comparison_table(reports, sims))
    report.write_jobs_csv(reports, sim_jct, out / "jobs.csv")
    report.write_plot(reports, sim_jct, out / "main_job.png")
    dl = reports[-1]
    preempted = [o for o in dl.outcomes if o.preemptions]
    resumed = [o for o in dl.outcomes if o.restarts and o.resumes_ok]
    say(f"\n{report.verdict(reports)}")
    (out / "verdict.txt").write_text(report.verdict(reports) + "\n")
    say(f"under dlprio {report.checkpoint_summary(len(preempted), len(resumed))}")
    (out / MARKER).write_text(json.dumps({
        "simulated": sims,
        "startup": costs.as_dict(),
        "runs": {r.key: {"label": r.label, "summary": report.real_summary(r.outcomes),
                         "wall_s": lr.wall_s,
                         "jobs": [report.outcome_json(o, sim_jct) for o in r.outcomes]}
                 for r, lr in zip(reports, runs)},
        "finished_at": time.time(),
    }, indent=2))
    say("")
    for line in look_further(reports, out):
        say(line)
    bad = [o.sub.name for r in reports for o in r.outcomes if not o.done or o.state != "COMPLETED"]
    if bad:
        say(f"main job: {report.plural(len(bad), 'job')} did not complete: {', '.join(bad)}")
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
