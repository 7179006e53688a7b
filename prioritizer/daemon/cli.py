"""The daemon's subcommands of ``dlprio``: ``run``, ``once [--dry-run]``, ``explain JOBID``,
``status [--json] [--all]``.

:data:`RUN`, :data:`ONCE`, :data:`EXPLAIN`, :data:`STATUS` are registered in ``dlprio``'s
command registry (prioritizer/cli.py; docs/design.md, code rule 12); each handler returns an exit status and turns domain errors into one line on stderr:

exit codes are :class:`~slurm_plugin.common.exits.Exit` (README.md's table):

* ``OK`` (0): done;
* ``SLURM_UNREACHABLE`` (3) / ``SLURM_REFUSED`` (4): ``once`` could not ask Slurm, or Slurm
  refused every update it tried (``run`` never exits for that); ``explain`` of an array task
  (``40_3``) could not ask Slurm for its job id, or sacct answered with an error (no
  slurmdbd): one line naming the commands that find that id;
* ``BAD_INPUT`` (2): bad configuration or usage (the message names the file and key), a
  ledger written by a newer dlprio, a file at ``ledger_path`` that holds no ledger or that
  this user may not read or write, or a damaged ledger (SQLite reports it corrupt, or a cell
  holds a value of the wrong type or out of range): the message names the file and the fix;
* ``NOT_FOUND`` (5): ``explain``: the job is not in the ledger, or has no such hetjob
  component (``40+5``), or Slurm knows no such array task (``40_3``: squeue and sacct
  asked); ``explain``/``status``: no ledger yet;
* ``HELD`` (6): another dlprio holds the ledger lock (the message names its pid) or the
  cluster lease (the message names its host:pid and lease job); ``run`` also exits 6 when it
  loses the lease to another daemon;
* ``STORAGE`` (7): the ledger's storage failed (disk full, read-only file system, I/O error):
  not a configuration error, so the systemd unit (conf/dlprio.service)
  restarts the daemon, whose ``RestartPreventExitStatus`` holds only 2 and 6.

Every subcommand takes ``--config FILE`` (default ``/etc/dlprio/dlprio.yaml``, else the
packaged ``conf/dlprio.yaml``); ``run``/``once`` also take ``--log-format text|json``
and ``--log-config FILE``.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

from prioritizer.daemon import config as daemon_config

from prioritizer import tables
from prioritizer.daemon import act, auto_tune, explain
from prioritizer.command import CliError, Command, Exit, clean_message
from prioritizer.daemon.loop import Daemon, retry_wait
from prioritizer.daemon.config import ConfigError, DaemonConfig
from prioritizer.daemon.lease import ClusterLease, LeaseHeld, LeaseLost
from prioritizer.daemon.names_check import preflight
from prioritizer.daemon.lock import LedgerLock, LockHeld
from prioritizer.daemon.log import CycleAdapter, configure, event
from prioritizer.daemon.ledger import (Ledger, LedgerDamaged, LedgerVersionError, NotALedger,
                                       check_file)
from prioritizer.config_file import HISTORY_SOURCES, LEARNED_SAMPLES
from prioritizer.daemon.metrics import Metrics
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.samplesfile import load_distribution
from slurm_plugin.common.cli import StdoutError, visible
from slurm_plugin.slurm.client import (AccountingDisabled, SlurmClient, SlurmError,
                                       SlurmUnreachable, slurm_exit)
from slurm_plugin.common.readfile import not_regular

def _common(p: argparse.ArgumentParser, logs: bool = False) -> None:
    p.add_argument("--config", default=None,
                   help="daemon config (default /etc/dlprio/dlprio.yaml, else conf/dlprio.yaml)")
    if logs:
        p.add_argument("--log-format", choices=("text", "json"), default=None,
                       help="log line format (overrides log_format in the config)")
        p.add_argument("--log-config", default=None, metavar="FILE",
                       help="a logging.config dictionary (YAML/JSON) routing the 'dlprio' "
                            "logger instead of the stderr handler (docs/dlprio.md, Logs)")


def _configure_run(p: argparse.ArgumentParser) -> None:
    _common(p, logs=True)


def _configure_once(p: argparse.ArgumentParser) -> None:
    _common(p, logs=True)
    p.add_argument("--dry-run", action="store_true", help="send nothing to Slurm")


def _configure_explain(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("job_id", metavar="JOBID",
                   help="a job id as dlqueue prints it: 40, 40+1 (hetjob: its leader), 40_3 (array task), "
                        "40_[5-9] (array tasks waiting in one record)")


def _configure_status(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--json", action="store_true",
                   help="JSON list; keys: " + ", ".join(explain.STATUS_KEYS))
    p.add_argument("--all", action="store_true",
                   help="also finished jobs the ledger still holds (default: active jobs)")


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except ConfigError as exc:
            return _fail(str(exc), Exit.BAD_INPUT, "config: ")
        except (LockHeld, LeaseHeld, LeaseLost) as exc:
            return _fail(str(exc), Exit.HELD)
        except explain.UnknownJob as exc:
            return _fail(str(exc), Exit.NOT_FOUND)
        except FileNotFoundError as exc:
            return _fail(str(exc), Exit.NOT_FOUND)
        except SlurmError as exc:
            return _fail(f"slurm: {exc}", slurm_exit(exc))
        except (LedgerVersionError, NotALedger, LedgerDamaged) as exc:   # the operator's call
            return _fail(f"ledger: {exc}", Exit.BAD_INPUT)
        except PermissionError as exc:   # a restart does not fix it
            return _fail(f"ledger: {exc}", Exit.BAD_INPUT)
        except (BrokenPipeError, StdoutError):   # stdout's own failures (Command's to report)
            raise
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorname", "") == "SQLITE_BUSY"
            return _fail(f"ledger: {exc}" + ("; another process held its lock for 10 s (a "
                                             "sqlite3 shell, a backup?): try again when it "
                                             "lets go" if busy else ""), Exit.STORAGE)
        except (OSError, sqlite3.Error) as exc:
            return _fail(f"ledger: {exc}", Exit.STORAGE)
        except ValueError as exc:     # e.g. an unreadable Gittins samples file
            return _fail(str(exc), Exit.BAD_INPUT)
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _fail(message: str, code: Exit, kind: str = "") -> int:
    """Print ``message`` as ``dlprio: <kind><line>`` lines (a config error has one line per
    problem), each with control characters escaped as every command does
    (:func:`~prioritizer.command.clean_message`); return ``code``."""
    for line in message.splitlines() or [""]:
        print(f"dlprio: {kind}{clean_message(line, [])}", file=sys.stderr)
    return code


def _load(args: argparse.Namespace, *keys: str) -> DaemonConfig:
    """The config of ``--config``, with each file path ``keys`` names (``ledger_path``,
    ``snapshot_path``) either missing or a regular file (a symbolic link to one counts).

    Raises:
        ConfigError: ``FILE: KEY: a directory; give a file path (got PATH)`` (also a FIFO,
            device or socket), exit 2 as any config error, before anything is opened.
    """
    cfg = daemon_config.load(args.config)
    for key in keys:
        path = getattr(cfg, key)
        why = not_regular(path)
        if why is not None:
            source = args.config if args.config is not None else daemon_config.default_path()
            raise ConfigError(f"{visible(source)}: {key}: {why}; give a file path "
                              f"(got {visible(path)})")
    return cfg


def gittins_samples(cfg: DaemonConfig, source: object) -> GittinsDistribution | None:
    """The samples file (``gittins_samples: FILE``) of ``tiresias-gittins`` or
    ``preempt_gain`` (``PolicyConfig.uses_distribution``), read with the config, before the
    ledger is locked or opened; None when there is none to read (neither of them, ``""``:
    the packaged samples, ``history``: learned later). ``source``: the config file.

    Raises:
        ConfigError: ``FILE: gittins_samples: PATH: cannot read (a FIFO; give a regular
            file)`` or a bad sample's line, exit 2 as any config error.
    """
    if not cfg.policy.uses_distribution or cfg.gittins_samples in ("", LEARNED_SAMPLES):
        return None
    try:
        return load_distribution(cfg.gittins_samples)
    except ValueError as exc:
        raise ConfigError(f"{visible(source)}: gittins_samples: {exc}") from None


def auto_tune_history(cfg: DaemonConfig, source: object) -> None:
    """Check the history CSV that ``auto_tune.history`` names (when the daemon tunes itself
    and it is neither ``ledger`` nor ``sacct``), with the config, before the first cycle: the
    replay reads it only after ``period_s``. Read as ``dlprio simulate`` reads a history
    trace (``prioritizer.sim.traces``: a regular file, the format's header, each row's job,
    GPUs, eligible time and duration); the replay's reader checks the rest of each row.
    ``source``: the config file.

    Raises:
        ConfigError: ``FILE: auto_tune.history: PATH:LINE: why`` (not a history CSV, a bad
            row, not a regular file), exit 2 as any config error.
    """
    from prioritizer.sim.traces import TraceError, read_trace
    at = cfg.auto_tune
    if not at.enabled or at.history in HISTORY_SOURCES:
        return
    try:
        read_trace(at.history, fmt="history")
    except TraceError as exc:
        raise ConfigError(f"{visible(source)}: auto_tune.history: {exc} (or give ledger or "
                          "sacct)") from None


def _setup(args: argparse.Namespace) -> tuple[DaemonConfig, CycleAdapter, GittinsDistribution | None]:
    """The config, its samples file and the logger of ``run``/``once``: every file the config
    names is checked before anything is opened."""
    cfg = _load(args, "ledger_path", "snapshot_path")
    source = _source(args)
    samples = gittins_samples(cfg, source)
    auto_tune_history(cfg, source)
    return cfg, configure(args.log_format or cfg.log_format, config_file=args.log_config), samples


def _source(args: argparse.Namespace) -> str:
    """The config file ``run``/``once`` read (``--config``, else the default path)."""
    return str(args.config if args.config is not None else daemon_config.default_path())


def _ledger_lock(path: str) -> LedgerLock:
    """The lock of the ledger at ``path``, to be taken by a writer: a file there that is no
    ledger this dlprio may write is refused first (:func:`~prioritizer.daemon.ledger.check_file`),
    before the lock file is made beside it."""
    if Path(path).exists():
        check_file(Path(path))
    return LedgerLock(path)


@_guard
def cmd_run(args: argparse.Namespace) -> int:
    """``dlprio run``: loop until SIGTERM/SIGINT."""
    cfg, log, samples = _setup(args)
    stop = threading.Event()
    client = SlurmClient(timeout_s=cfg.call_timeout_s)
    metrics = Metrics()
    with _stop_on_signals(stop):
        # a config it refuses leaves no lock, lease job or ledger: checked before them, once
        # Slurm answers (waited for as a failed cycle is)
        if not _until_slurm_answers(cfg, log, stop, metrics, "preflight",
                                    lambda: preflight(cfg, client, _source(args), log)):
            return Exit.OK
        return _run(args, cfg, log, samples, stop, client, metrics)


def _run(args: argparse.Namespace, cfg: DaemonConfig, log: CycleAdapter,
         samples: GittinsDistribution | None, stop: threading.Event, client: SlurmClient,
         metrics: Metrics) -> int:
    """``run`` once its config passed the checks against the cluster."""
    lock = _ledger_lock(cfg.ledger_path)
    # the lock first (a ledger another daemon holds is exit 6, whatever else), then the
    # endpoint, then the ledger: a port it cannot listen on leaves no new ledger or lock file
    with lock:
        try:
            metrics.serve(cfg.metrics_port, cfg.metrics_addr)
        except OSError as exc:
            lock.discard()
            # a name that does not resolve is the address's fault; in use, no permission: the port's
            key = "metrics_addr" if isinstance(exc, socket.gaierror) else "metrics_port"
            raise ConfigError(f"{visible(_source(args))}: {key}: cannot listen on "
                              f"{visible(cfg.metrics_addr)}:{cfg.metrics_port} "
                              f"({exc.strerror})") from None
        # the lease first, as for once: a run refused by another daemon's lease leaves no
        # new ledger behind
        with _lease(cfg, client, log, stop, metrics) as lease, \
                Ledger(cfg.ledger_path) as ledger:
            if stop.is_set():
                return Exit.OK
            event(log, "started", ledger=cfg.ledger_path, mode=cfg.mode, policy=cfg.policy.policy,
                  interval_s=cfg.interval_s, metrics_port=cfg.metrics_port)
            try:
                Daemon(cfg, client, ledger, log, metrics, lease=lease,
                       distribution=samples, auto_tune=True, checked=True,
                       source=_source(args)).run(stop)
            except LeaseLost as exc:
                event(log, "lease_lost", level=logging.ERROR, error=str(exc))
                return _fail(str(exc), Exit.HELD)
        event(log, "stopped")
    return Exit.OK


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` inside the block (the ledger is closed inside it too);
    the previous handlers (an in-process caller's own) come back when it ends."""
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:   # None: a handler not set from Python
                signal.signal(sig, handler)


@contextmanager
def _lease(cfg: DaemonConfig, client: SlurmClient, log: CycleAdapter,
           stop: threading.Event | None = None,
           metrics: Metrics | None = None) -> Iterator[ClusterLease | None]:
    """The cluster lease for one ``run``/``once`` (None when ``lease_name`` is ""). With
    ``stop`` (``run``), a Slurm that does not answer is waited for as a failed cycle is
    (:func:`~prioritizer.daemon.loop.retry_wait`; ``slurm_unreachable`` with
    ``failed_after_s`` and ``retry_in_s``, counted in ``metrics``) until it answers or ``stop``
    is set; ``once`` fails at once."""
    if not cfg.lease_name:
        yield None
        return
    lease = ClusterLease(client, cfg.lease_name, cfg.lease_ttl, cfg.ledger_path, log)
    if stop is None:
        lease.acquire()
    elif not _until_slurm_answers(cfg, log, stop, metrics, "lease", lease.acquire):
        yield None
        return
    try:
        yield lease
    finally:
        lease.release()


def _until_slurm_answers(cfg: DaemonConfig, log: CycleAdapter, stop: threading.Event,
                         metrics: Metrics | None, step: str, call: Callable[[], object]) -> bool:
    """Call ``call`` until Slurm answers it (no SlurmUnreachable), trying as a failed cycle
    retries (:func:`~prioritizer.daemon.loop.retry_wait`): each failure logged
    ``slurm_unreachable`` (``failed_after_s``, ``retry_in_s``, ``step``) and counted in
    ``metrics``. False when ``stop`` was set while waiting."""
    failures = 0
    while True:
        started = time.monotonic()
        try:
            call()
            return True
        except SlurmUnreachable as exc:
            failures += 1
            blocked = time.monotonic() - started
            delay = retry_wait(cfg, failures, blocked)
            if metrics is not None:
                metrics.slurm_errors.labels(kind="unreachable").inc()
            event(log, "slurm_unreachable", level=logging.WARNING, error=exc.message,
                  failed_after_s=round(blocked, 1), retry_in_s=round(delay, 1), step=step)
            if stop.wait(delay):
                return False


@_guard
def cmd_once(args: argparse.Namespace) -> int:
    """``dlprio once [--dry-run]``: one cycle. A dry run writes nothing anywhere: no lock, no
    lease job, and its cycle runs on an in-memory copy of the ledger (an empty one when there
    is none), so the next real cycle and ``status``/``explain`` see the ledger as it was."""
    cfg, log, samples = _setup(args)
    client = SlurmClient(timeout_s=cfg.call_timeout_s)
    preflight(cfg, client, _source(args), log)   # a config it refuses leaves no lease job, no ledger
    with ExitStack() as stack:
        lock = None if args.dry_run else stack.enter_context(_ledger_lock(cfg.ledger_path))
        existed = Path(cfg.ledger_path).exists()
        # the lease first: a once refused by another daemon's lease leaves no new ledger, nor
        # the lock file and directories it made (run opens the ledger first, for readers that
        # wait on it while run waits for the lease)
        try:
            lease = stack.enter_context(_lease(
                cfg if not args.dry_run else replace(cfg, lease_name=""), client, log))
        except (LeaseHeld, SlurmError):
            if lock is not None:
                lock.discard()
            raise
        ledger = stack.enter_context(Ledger(cfg.ledger_path, scratch=args.dry_run))
        daemon = Daemon(cfg, client, ledger, log, dry_run=args.dry_run, lease=lease,
                        distribution=samples, checked=True)
        daemon.cycle()
    if args.dry_run:
        shown = visible(cfg.ledger_path)
        print(f"dry run: nothing written; decided on a copy of the ledger {shown}" if existed
              else f"dry run: nothing written; no ledger at {shown}, decided as a first cycle")
    return once_exit(daemon.pushed)


def once_exit(pushed: act.PushResult) -> int:
    """``dlprio once``'s status after its cycle: ``Exit.SLURM_REFUSED`` (and one line) when it
    tried updates and Slurm accepted none (e.g. the daemon's user is not an operator)."""
    if pushed.refused and not pushed.accepted:
        job_id, text = pushed.refused[0]
        return _fail(f"slurm refused every update this cycle ({len(pushed.refused)} job(s); job "
                     f"{job_id}: {text}); is the daemon's user a Slurm operator?", Exit.SLURM_REFUSED)
    return Exit.OK


@_guard
def cmd_explain(args: argparse.Namespace) -> int:
    """``dlprio explain JOBID``."""
    task: explain.ArrayTask | None = None
    try:
        job_id, component = explain.parse_job_id(args.job_id)
    except explain.ArrayTask as exc:
        task, component = exc, None
    except ValueError as exc:
        raise CliError(str(exc), exit_code=Exit.BAD_INPUT) from None
    cfg = _load(args, "ledger_path")
    if task is not None:
        job_id = _array_task_job(task, cfg)
        print(f"array task {task.text} is job {job_id}" if task.one else
              f"array tasks {task.text} are job {job_id}")
    with Ledger(cfg.ledger_path, readonly=True) as ledger:
        now = time.time()
        if task is None and component is None and ledger.job(job_id) is None:
            leader = _hetjob_leader(job_id, cfg)
            if leader is not None:
                print(f"job {job_id} is component {leader[0]}+{leader[1]} of hetjob {leader[0]}")
                job_id, component = leader
        sys.stdout.write(explain.explain(job_id, ledger, cfg, now, component))
        for line in explain.forecast_lines(job_id, ledger, cfg.snapshot_path, now,
                                           cfg.interval_s):
            print(line)
    return Exit.OK


def _hetjob_leader(job_id: int, cfg: DaemonConfig) -> tuple[int, int] | None:
    """``(leader, offset)`` when squeue shows ``job_id`` as a component of a hetjob other
    than its leader (its own id, which squeue's JSON and ``dlqueue --json`` give it; the
    ledger keys a hetjob by its leader); None otherwise, or when Slurm does not answer (the
    ledger's answer stands)."""
    try:
        jobs = SlurmClient(timeout_s=cfg.call_timeout_s).jobs(job_ids=[job_id])
    except SlurmError:
        return None
    for job in jobs:
        if job.job_id == job_id and job.het_job_id and job.het_job_id != job_id:
            return job.het_job_id, job.het_job_offset
    return None


def _array_task_job(task: explain.ArrayTask, cfg: DaemonConfig) -> int:
    """The job id of array task(s) (``40_3``, ``40_[5-9]``) as Slurm shows it: squeue, then
    sacct for tasks that have ended (for a range always both: some tasks may still be in
    squeue, others only in sacct). Raises CliError with the commands that find it by hand
    when Slurm does not answer (exit 3, :func:`~slurm_plugin.slurm.client.slurm_exit`) or
    answers with an error (exit 4: no slurmdbd); CliError listing the job ids (exit 2) when
    the tasks are several jobs; UnknownJob (exit 5) when Slurm knows none of them."""
    client = SlurmClient(timeout_s=cfg.call_timeout_s)
    try:
        found = explain.array_task_units(task.array_id, task.tasks,
                                         client.jobs(job_ids=[task.array_id]))
        if not found or not task.one:   # a range: squeue may hold some, sacct the ended ones
            try:
                ended = explain.array_task_units(task.array_id, task.tasks, (),
                                                 client.accounting_jobs([task.array_id]))
            except AccountingDisabled:
                if not found:
                    raise
                ended = {}
            found = {**ended, **found}
    except SlurmError as exc:
        raise CliError(str(task), exit_code=slurm_exit(exc)) from None
    if not found:
        raise explain.UnknownJob(f"job {task.text}: neither squeue nor sacct knows this "
                                 "array task" if task.one else
                                 f"job {task.text}: neither squeue nor sacct knows these "
                                 "array tasks")
    if len(found) > 1:
        listed = [f"{job_id} ({name})" for job_id, name in sorted(found.items())]
        more = f", and {len(listed) - 10} more" if len(listed) > 10 else ""
        raise CliError(f"JOBID {task.text}: these array tasks are {len(found)} jobs: "
                       f"{', '.join(listed[:10])}{more}; run 'dlprio explain <job id>' for one",
                       exit_code=Exit.BAD_INPUT)
    return next(iter(found))


@_guard
def cmd_status(args: argparse.Namespace) -> int:
    """``dlprio status [--json] [--all]``: active jobs (all with ``--all``), after a line saying
    how old the ledger is, and one on ``auto_tune`` while it is on (on stderr with ``--json``)."""
    cfg = _load(args, "ledger_path")
    now = time.time()
    with Ledger(cfg.ledger_path, readonly=True) as ledger:
        rows = explain.status_rows(ledger, now, active_only=not args.all)
        fresh = explain.freshness(ledger, now, cfg.interval_s)
        tenants = explain.tenant_table(ledger, styled=tables.is_terminal())
        if (tuned := auto_tune.status_line(cfg, ledger)) is not None:
            fresh += "\n" + tuned
    if args.json:
        print(fresh, file=sys.stderr)
        sys.stdout.write(json.dumps(rows) + "\n")
    else:
        sys.stdout.write(fresh + "\n" + explain.status_table(rows, styled=tables.is_terminal())
                         + ("\n" + tenants if tenants else ""))
    return Exit.OK


RUN = Command("run", "the daemon: observe, decide, act every interval", _configure_run, cmd_run)
ONCE = Command("once", "one cycle (with --dry-run: print the decisions, change nothing)",
               _configure_once, cmd_once)
EXPLAIN = Command("explain", "why a job sits in its queue", _configure_explain, cmd_explain)
STATUS = Command("status", "active jobs (--all: every job kept): queue, service, preemptions",
                 _configure_status,
                 cmd_status)
