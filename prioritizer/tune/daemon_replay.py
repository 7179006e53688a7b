"""The child process of ``auto_tune`` (:mod:`prioritizer.daemon.auto_tune`): ``python -m
prioritizer.tune.daemon_replay WORKDIR``.

Reads ``WORKDIR/request.json`` (written by :class:`~prioritizer.daemon.auto_tune.AutoTuner`),
gathers the finished GPU jobs that ended in ``[since, until]`` (epoch s) from the source the
request names, writes them as a history trace (``WORKDIR/history.csv``,
:mod:`prioritizer.history.trace`), replays it on the cluster's shape (``sinfo``) under the
settings in force and every grid point (:func:`prioritizer.tune.rank.run_task`, one after the
other, at ``nice`` 10; a setting that reads a duration distribution gets the daemon's own,
from its ``gittins_samples``: :func:`replay_durations`), and writes ``WORKDIR/result.json`` atomically:

* ``{"jobs", "nodes", "gpus_per_node", "current": FIGURES, "bars", "candidates": [{"setting",
  "figures"}]}``, FIGURES as ``run_task`` returns them (``avg_jct_s``, ``p95_jct_s``, ...)
  and, while the request's no-regret bars (``max_hurt_share``, ``max_worst_window``) are
  on, ``worst_window_ratio``, ``hurt_jobs_share`` and ``avg_jct_ratio`` against ``fifo-fit``
  (:func:`prioritizer.tune.rank.with_windows`: two more replays, ``fifo-fit`` and for
  ``oracle`` ``srtf``), ``bars`` the bars with ``oracle`` resolved (None while off);
* ``{"skipped": WHY}`` when fewer than ``min_jobs`` jobs ended in the window;
* ``{"error": WHY}`` when the history or the cluster could not be read.

Sources: ``ledger`` (the daemon's ledger, read-only: submit time, GPUs, closed runs),
``sacct`` (Slurm accounting over the window, as ``dlprio history export --ledger`` reads it
with the daemon's ledger), or the
path of a history CSV.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

from prioritizer.command import CliError
from prioritizer.config_file import LEARNED_SAMPLES
from prioritizer.daemon.ledger import Ledger
from prioritizer.history.export import kept_work
from prioritizer.history.ledger_read import job_facts, ledger_facts
from prioritizer.history.trace import HistoryError, HistoryRow, read_rows, replay_order, write_rows
from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster
from prioritizer.sim.learned import MIN_SAMPLES, Durations
from prioritizer.sim.slurm_cluster import ClusterShapeError, shape_from_slurm
from prioritizer.grid import combinations, parse_grid
from prioritizer.sim.cli import DEFAULT_BASELINE, DEFAULT_WINDOW_JOBS, baseline_policy
from prioritizer.sim.windows import OFF, ORACLE
from prioritizer.tune.rank import bar_configs, make_task, run_task, with_windows
from slurm_plugin.common.atomic import write_atomically
from slurm_plugin.slurm.client import SlurmClient, SlurmError


def ledger_rows(path: str, since: float, until: float) -> list[HistoryRow]:
    """History rows of the ledger's jobs that ended in ``[since, until]`` with closed runs:
    eligible = submit time, work = GPU·s of the closed runs counted as ``dlprio history
    export --ledger`` counts them (:func:`prioritizer.history.export.kept_work`): a run
    followed by another, or closed at the daemon's requeue, was requeued and is lost unless
    the daemon signalled the job to checkpoint (the ledger keeps no job comment, so a
    checkpoint marker alone does not count), and the seconds from checkpoint signal to
    requeue are not work; duration = work / GPUs."""
    out = []
    with Ledger(path, readonly=True) as ledger:
        runs = ledger.all_runs()
        for job in ledger.jobs():
            if job.ended_at is None or not since <= job.ended_at <= until or not job.gpus:
                continue
            closed = sorted((r for r in runs.get(job.job_id, ()) if r.end is not None),
                            key=lambda r: r.start)
            facts = job_facts(ledger, job)
            work = kept_work([(n < len(closed) - 1 or r.end_source == "requeue",
                               r.gpu_seconds(r.end or 0.0))
                              for n, r in enumerate(closed)], facts.checkpoints,
                             facts.checkpoint_s * job.gpus if facts.checkpoints else 0.0)
            if work <= 0 or job.submit_time is None:
                continue
            # a shard job (a share of one GPU) replays as one GPU: it holds one for others
            out.append(HistoryRow(str(job.job_id), job.user, job.account, job.partition,
                                  job.submit_time, job.submit_time, math.ceil(job.gpus), 1, work,
                                  work / job.gpus, job.ended_at, job.ended_at - job.submit_time,
                                  job.state, len(closed), "self", job.preemptions))
    return out


def sacct_rows(since: float, until: float, timeout_s: float,
               ledger_path: str | None = None) -> list[HistoryRow]:
    """History rows of Slurm accounting's finished jobs that ended in ``[since, until]``, read
    as ``dlprio history export --ledger LEDGER`` reads them: the daemon's ledger adds the jobs
    it checkpointed (their runs before a requeue are kept though accounting keeps no comment)
    and the GPUs it saw where accounting does not track them."""
    from prioritizer.history.export import history_rows
    from prioritizer.history.sacct_read import gpu_sources, with_earlier_attempts
    from slurm_plugin.slurm.accounting import fold_jobs
    import time
    facts = (ledger_facts(ledger_path)
             if ledger_path is not None and os.path.isfile(ledger_path) else None)
    fmt = "%Y-%m-%dT%H:%M:%S"
    client = SlurmClient(timeout_s=timeout_s)
    records = with_earlier_attempts(client, client.accounting(
        time.strftime(fmt, time.localtime(since)), time.strftime(fmt, time.localtime(until))),
        since)
    jobs = fold_jobs(records)
    tracked, known = gpu_sources(client, jobs, facts)
    rows, _ = history_rows(jobs, ledger=facts, gpus_tracked=tracked, known_gpus=known,
                           until=until)
    return [r for r in rows if since <= r.end_time <= until]


def gather(request: dict[str, Any]) -> list[HistoryRow]:
    """The request's history rows (see the module doc). Raises HistoryError, SlurmError."""
    since, until = request["since"], request["until"]
    if request["history"] == "ledger":
        return ledger_rows(request["ledger_path"], since, until)
    if request["history"] == "sacct":
        return sacct_rows(since, until, max(request["slurm_timeout_s"], 30.0),
                          request.get("ledger_path"))
    return [r for r in read_rows(request["history"]) if since <= r.end_time <= until]


def replay(request: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """The result of one request (see the module doc)."""
    try:
        rows = [r for r in gather(request) if r.num_gpu > 0 and r.duration > 0]
    except (HistoryError, SlurmError, CliError, OSError, sqlite3.Error) as exc:   # a ledger gone bad
        return {"error": f"history {request['history']}: {exc}"}
    if len(rows) < request["min_jobs"]:
        return {"skipped": f"{len(rows)} finished GPU job(s) in the window, fewer than "
                           f"min_jobs {request['min_jobs']}"}
    trace = workdir / "history.csv"
    with open(trace, "w", newline="") as handle:
        write_rows(sorted(rows, key=replay_order), handle)
    try:
        nodes, gpus = shape_from_slurm(SlurmClient(timeout_s=max(request["slurm_timeout_s"], 30.0)))
    except ClusterShapeError as exc:
        return {"error": str(exc)}
    cluster = Cluster(nodes, gpus)
    c = dict(request["policy"])
    for key in ("thresholds_gpu_s", "thresholds_s"):
        c[key] = tuple(c[key])
    current = PolicyConfig(**c)
    combos = combinations(parse_grid(request["grid"]), current)
    configs = [current] + [cfg for _, cfg in combos]
    hurt, worst = (None if request.get(key, OFF) == OFF else request[key]
                   for key in ("max_hurt_share", "max_worst_window"))
    bars_on = hurt is not None or worst is not None
    extra = bar_configs(current, baseline_policy(DEFAULT_BASELINE), worst == ORACLE) if bars_on else []
    durations = replay_durations(request)
    results = [run_task(make_task(str(trace), "history", (None, None), cluster, config, bars_on,
                                  durations))
               for config in configs + extra]
    bars = None
    if bars_on:
        figures, bars = with_windows(results, len(configs), DEFAULT_WINDOW_JOBS, hurt, worst)
    else:
        figures = results
    return {"jobs": len(rows), "nodes": nodes, "gpus_per_node": gpus, "current": figures[0],
            "bars": None if bars is None else dataclasses.asdict(bars),
            "candidates": [{"setting": {k: list(v) if isinstance(v, tuple) else v
                                        for k, v in setting.items()}, "figures": f}
                           for (setting, _), f in zip(combos, figures[1:])]}


def replay_durations(request: dict[str, Any]) -> Durations:
    """The Gittins distribution the replays decide with, as the daemon's does:
    ``gittins_samples: FILE`` that file, ``history`` learned from the replayed history (every
    job of it has ended; at least ``gittins_min_samples``, else packaged), ``""`` packaged."""
    samples = request.get("gittins_samples", "")
    if samples == LEARNED_SAMPLES:
        return Durations(history=True, min_samples=request.get("gittins_min_samples",
                                                               MIN_SAMPLES))
    return Durations(file=samples or None)


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    os.nice(10)
    request = json.loads((workdir / "request.json").read_text())
    result = replay(request, workdir)
    write_atomically(workdir / "result.json", json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
