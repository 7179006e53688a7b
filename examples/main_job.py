#!/usr/bin/env python3
"""The main job: replay a real Philly workload on the live cluster under dlprio, and simulate it.

Steps (issue 7; docs/main_job.md): sample and scale ``--jobs`` jobs from the trace
(:mod:`prioritizer.sim.workload`), start ``dlprio run`` with the demo config
(``examples/dlprio-demo.yaml``, ledger in ``--out``, public snapshot where ``dlqueue`` looks on
the default cluster: :func:`snapshot_path`), submit each job through
``dlsubmit`` at its scaled arrival time as a PAI v2 spec running ``examples/trainer.py``, show
``dlqueue --watch`` meanwhile, wait until Slurm has finished every job, stop the daemon, then
print per-job JCT, preemptions, restarts and resumed steps, and the real run beside
``dlprio simulate`` on the same scaled trace and cluster shape; write ``main_job.png`` and
``main_job.json``. Runs on the cluster ``SLURM_CONF`` names (``--cluster-name`` sets it).

Exit status: 0 every job completed; 1 the live run or the simulation failed (a job failed, the
daemon died, a timeout); 2 bad options, trace, config or output directory; 3 Slurm does not
answer (start it with ``dlcluster up``); 130 interrupted (our jobs are cancelled).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402
import replay  # noqa: E402
from prioritizer.daemon import config as daemon_config  # noqa: E402
from prioritizer.sim import workload  # noqa: E402
from prioritizer.sim.traces import TraceError  # noqa: E402
from slurm_plugin.client import SlurmClient, SlurmError  # noqa: E402
from submit import queue_cli  # noqa: E402

HERE = Path(__file__).resolve().parent
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_SLURM, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
MARKER = "main_job.json"
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"


class UsageError(Exception):
    """Bad options or inputs: exit 2 with one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="main_job.py", description=__doc__.split("\n\n")[0])
    add = p.add_argument
    add("--jobs", type=int, default=workload.DEFAULT_JOBS, help="jobs to replay (default 24)")
    add("--trace", default=str(HERE / "data" / "philly-sample.csv"),
        help="trace CSV (default: the Philly rows shipped in examples/data)")
    add("--format", choices=("philly", "tiresias", "itp"), help="trace format (default: from the header)")
    add("--start-at", type=float, default=workload.DEFAULT_START_S, metavar="SECONDS",
        help=f"first trace second to sample from (default {workload.DEFAULT_START_S:.0f}: "
             "Philly day 48.29, in the dense window)")
    add("--max-duration", type=float, default=None, metavar="S",
        help="longest scaled job, s (durations map onto [20, S]; default min(240, max(90, "
             "10 x jobs)): 240 for 24 jobs, 90 for 6)")
    add("--max-gap", type=float, default=workload.GAP_RANGE_S[1], metavar="S",
        help="longest scaled arrival gap, s (default 15)")
    add("--out", default="out/main-job", help="output directory (default out/main-job)")
    add("--config", default=str(HERE / "dlprio-demo.yaml"), help="dlprio config to run with")
    add("--grace", type=int, default=5, help="checkpoint grace in each spec, s (default 5)")
    add("--cluster-name", default=None,
        help="use /etc/slurm-NAME/slurm.conf (a cluster from `dlcluster up --name NAME`)")
    add("--no-watch", action="store_true", help="do not run `dlqueue --watch` during the run")
    add("--watch-interval", type=float, default=None,
        help="dlqueue refresh, s (default 2 on a terminal, 20 otherwise)")
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

    Live means: one of its pid files (``main_job.pid``, ``dlprio.pid``, ``dlqueue.pid``) names
    a running process of that program, or the daemon's ledger lock (``ledger.sqlite.lock``) is
    held. Reads only; never changes ``path``.

    Raises:
        UsageError: naming the process (or the lock) and the fix.
    """
    if not path.is_dir():
        return
    for name, program in PID_FILES.items():
        if (pid := _runs(path / name, program)) is not None:
            raise UsageError(f"--out {path}: another main job is running there ({program}, pid "
                             f"{pid}); wait for it, stop it, or name another --out")
    if _lock_held(path / "ledger.sqlite.lock"):
        raise UsageError(f"--out {path}: a dlprio daemon holds {path / 'ledger.sqlite.lock'}; "
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


def load_jobs(args: argparse.Namespace) -> list[workload.ScaledJob]:
    """The scaled workload of ``args`` (rules in prioritizer/sim/workload.py; ``--max-duration``
    defaults to :func:`prioritizer.sim.workload.duration_range` of ``--jobs``).

    Raises:
        UsageError: ``--max-duration`` < 20, ``--max-gap`` < 0 or ``--grace`` < 1.
        TraceError, WorkloadError: the trace cannot give the sample.
    """
    lo, hi = workload.duration_range(args.jobs)
    hi = hi if args.max_duration is None else args.max_duration
    if hi < lo or args.max_gap < 0 or args.grace < 1:
        raise UsageError("--max-duration must be >= 20, --max-gap >= 0, --grace >= 1")
    return workload.load(args.trace, args.jobs, args.start_at, args.format, (lo, hi),
                         (0.0, args.max_gap))


def run(args: argparse.Namespace) -> int:
    conf = os.environ.get("SLURM_CONF", DEFAULT_SLURM_CONF)
    if not Path(conf).is_file():
        raise UsageError(f"no cluster config {conf}; start the cluster with `dlcluster up` "
                         "(`--name NAME --port-base PORT` for --cluster-name NAME)")
    jobs = load_jobs(args)
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
        return _run_in(args, out, jobs, config, client, nodes, gpus)
    finally:
        pid_file.unlink(missing_ok=True)


def _run_in(args: argparse.Namespace, out: Path, jobs: list[workload.ScaledJob], config: Path,
            client: SlurmClient, nodes: int, gpus: int) -> int:
    """The run proper, in the prepared output directory ``out``; the exit status."""
    watch = not args.no_watch and sys.stdout.isatty()
    say = Say(out, quiet=False)
    workload.write_tiresias_csv(jobs, out / "scaled-trace.csv")
    snapshot = snapshot_path(out)
    run_config = replay.daemon_config(config, out, snapshot)
    say(f"main job: {report.plural(len(jobs), 'job')} from {args.trace} "
        f"(start {args.start_at:.0f} s), "
        f"cluster {nodes} x {gpus} GPUs, output in {out}, daemon snapshot {snapshot}")
    replay.wait_idle(client, args.idle_timeout, say)

    daemon = queue_view = None
    subs: list[replay.Submitted] = []
    states: dict[int, str] = {}
    daemon_rows: dict[int, dict] = {}
    finished = False
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        daemon = replay.start_daemon(run_config, out)
        if not args.no_watch:
            interval = args.watch_interval or (2.0 if watch else 20.0)
            queue_view = replay.start_queue_view(snapshot, interval, out)
            say.quiet = watch            # dlqueue redraws the terminal; progress goes to the log
        replay.replay(jobs, out, args.grace, daemon, say, subs)
        states = replay.wait_finished(client, subs, daemon, args.timeout)
        finished = True
    except replay.ReplayError as exc:
        say.quiet = True                       # to the log; the terminal gets it once, below
        say(f"main job failed: {exc}")
        print(f"main_job.py: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("main_job.py: interrupted; cancelling the jobs it submitted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        if queue_view:
            queue_view.stop(signal.SIGINT, timeout_s=5)
        if not finished and subs:
            replay.cancel(client, subs)
        if daemon:
            daemon.stop()
            daemon_rows = report.daemon_rows(run_config) if finished else {}
    return finish(out, run_config, subs, states, daemon_rows, nodes, gpus, say)


def finish(out: Path, config: Path, subs: list[replay.Submitted], states: dict[int, str],
           daemon_rows: dict[int, dict], nodes: int, gpus: int, say: Say) -> int:
    """Collect, simulate, print the tables, write the PNG and JSON; the exit status."""
    say.quiet = False
    outcomes = report.outcomes(subs, states, daemon_rows)
    real = report.real_summary(outcomes)
    try:
        sims = report.simulate(out / "scaled-trace.csv", config, nodes, gpus, out)
    except RuntimeError as exc:
        say(f"main job: the simulation failed: {exc}")
        return EXIT_FAILED
    sim_jct = report.sim_jcts(out / "sim-jobs.csv")
    sim_las = next(s for s in sims if s["policy"] == "tiresias-las")
    say("\nper job (times in s; arrive = seconds after the first submission):")
    say(report.jobs_table(outcomes, sim_jct))
    say(f"\nreal vs simulated ({report.plural(len(subs), 'job')}, {nodes} x {gpus} GPUs, "
        "policy and modeled costs "
        f"from {config}):")
    say(report.comparison_table(real, sims))
    report.write_plot(outcomes, sim_jct, real, sim_las, out / "main_job.png")
    preempted = [o for o in outcomes if o.preemptions]
    resumed = [o for o in outcomes if o.restarts and o.resumes_ok]
    say(f"\n{report.checkpoint_summary(len(preempted), len(resumed))}; "
        f"plot {out / 'main_job.png'}, details {out / MARKER}")
    (out / MARKER).write_text(json.dumps({
        "real": real, "simulated": sims,
        "jobs": [{"name": o.sub.name, "job_id": o.sub.job_id, "state": o.state,
                  "scaled": asdict(o.sub.job), "submitted_at": o.sub.submitted_at,
                  "jct_s": o.jct_s, "sim_jct_s": sim_jct.get(o.sub.job.index),
                  "preemptions": o.preemptions, "restarts": o.restarts,
                  "resumes_ok": o.resumes_ok, "daemon": o.daemon,
                  "attempts": [asdict(a) for a in o.attempts]} for o in outcomes],
        "finished_at": time.time(),
    }, indent=2))
    bad = [o.sub.name for o in outcomes if not o.done or o.state != "COMPLETED"]
    if bad:
        say(f"main job: {report.plural(len(bad), 'job')} did not complete: {', '.join(bad)}")
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
