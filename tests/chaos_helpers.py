"""The daemon under chaos on a live cluster: seeded churn of mixed jobs,
``dlprio run`` SIGKILLed at random moments *and* right after each preemption step (the
test-only fault point), then every figure checked against Slurm's accounting.

Used by tests/live/test_chaos_live.py (a few minutes) and benchmarks/chaos_daemon.py (longer,
prints the figures). Needs slurmdbd (``sacct --duplicates`` is the truth for attained
service). The independent truths:

* ``sacct --duplicates``: every attempt of every job (start, end);
* each attempt's own log (tests/daemon_helpers.py's checkpointing script): one
  ``checkpoint`` stamp per USR2 it received.
"""

from __future__ import annotations

import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from daemon_helpers import DaemonProc, Jobs, attempts, write_config
from live_helpers import wait_for
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.preempt import FAULT_ENV, FAULT_STEPS

INTERVAL = 2.0


@dataclass
class ChaosReport:
    """What a chaos run did and found. Figures: GPU·s and seconds."""

    seed: int
    jobs: int = 0
    kills_random: int = 0
    kills_at_step: list[str] = field(default_factory=list)
    preemptions: int = 0
    requeues: int = 0
    intents_open: int = 0
    max_error_gpu_s: float = 0.0
    max_error_per_gpu_s: float = 0.0
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"seed {self.seed}: {self.jobs} jobs, {self.kills_random} random SIGKILLs, "
                f"SIGKILL after steps {', '.join(self.kills_at_step) or '-'}",
                f"preemptions (intents) {self.preemptions}, requeued by the daemon {self.requeues}, "
                f"open intents at the end {self.intents_open}",
                f"ledger vs sacct --duplicates: max |error| {self.max_error_gpu_s:.1f} GPU·s, "
                f"{self.max_error_per_gpu_s:.2f} s per GPU (bound: interval {INTERVAL:g} s)",
                f"problems: {len(self.problems)}", *[f"  {p}" for p in self.problems]]


def _spec(rng: random.Random, i: int) -> dict:
    """A mixed job. The first four fill the cluster (8 GPUs each, checkpointing, long) and are
    soon demoted; the churn is short jobs (1-8 GPUs, some 2-node, some without the marker)
    that preempt them, and a few more long ones."""
    if i < 4:
        return {"name": f"chaos-{i}", "nodes": 1, "gpus_per_node": 8,
                "steps": rng.randint(50, 70), "marker": True}
    long = rng.random() < 0.2
    return {"name": f"chaos-{i}", "nodes": rng.choice((1, 1, 1, 2)),
            "gpus_per_node": rng.choice((1, 2, 4, 8)),
            "steps": rng.randint(20, 40) if long else rng.randint(3, 10),
            "marker": rng.random() < 0.7}


def run_chaos(jobs: Jobs, workdir: Path, *, seed: int, n_jobs: int, churn_s: float,
              kill_every_s: tuple[float, float], timeout_s: float) -> ChaosReport:
    """Run one seeded chaos session; returns the report (``problems`` empty = all checks hold)."""
    rng = random.Random(seed)
    report = ChaosReport(seed, jobs=n_jobs)
    cfg = write_config(workdir / "dlprio.yaml", interval_s=INTERVAL, backoff_max_s=4,
                       slurm_timeout_s=1.5, max_grace_s=3, lease_ttl_s=8,
                       policy={"thresholds_gpu_s": [30, 100000], "starve_knob": 0,
                               "min_run_s": 3})
    faults = list(FAULT_STEPS)
    daemon = DaemonProc(cfg, env={FAULT_ENV: faults[0]}).start()
    pending_fault = faults.pop(0)
    specs = [_spec(rng, i) for i in range(n_jobs)]
    submit_at = sorted(rng.uniform(0, churn_s) if i >= 4 else 0.0 for i in range(n_jobs))
    start = time.monotonic()
    next_kill = start + rng.uniform(*kill_every_s)
    ids: list[tuple[int, Path, int]] = []
    try:
        while time.monotonic() - start < timeout_s:
            t = time.monotonic() - start
            while specs and submit_at[len(ids)] <= t:
                s = specs.pop(0)
                job_id, log = jobs.submit(s["name"], nodes=s["nodes"],
                                          gpus_per_node=s["gpus_per_node"], steps=s["steps"],
                                          marker=s["marker"])
                ids.append((job_id, log, s["nodes"] * s["gpus_per_node"]))
            if not daemon.alive():               # it killed itself at a fault step
                assert daemon.proc is not None
                if daemon.proc.returncode != -signal.SIGKILL:
                    report.problems.append(f"daemon exited {daemon.proc.returncode}: "
                                           + daemon.text()[-400:])
                    break
                if pending_fault:
                    report.kills_at_step.append(pending_fault)
                pending_fault = faults.pop(0) if faults else None
                env = {FAULT_ENV: pending_fault} if pending_fault else {FAULT_ENV: ""}
                daemon = DaemonProc(cfg, env=env).start()
            elif time.monotonic() >= next_kill:
                assert daemon.proc is not None
                daemon.proc.send_signal(signal.SIGKILL)
                daemon.proc.wait()
                report.kills_random += 1
                time.sleep(rng.uniform(0, INTERVAL))
                daemon = DaemonProc(cfg, env={FAULT_ENV: pending_fault or ""}).start()
                next_kill = time.monotonic() + rng.uniform(*kill_every_s)
            if not specs and ids and all(
                    not j.is_active for j in jobs.client.jobs(job_ids=[i for i, _, _ in ids])):
                break
            time.sleep(0.5)
        else:
            report.problems.append(f"jobs still active after {timeout_s:g} s")
        time.sleep(2 * INTERVAL)                 # the daemon closes the last runs
    finally:
        daemon.stop()
    _check(jobs, cfg, ids, report)
    return report


def _check(jobs: Jobs, cfg: Path, ids: list[tuple[int, Path, int]], report: ChaosReport) -> None:
    import yaml
    ledger_path = yaml.safe_load(cfg.read_text())["ledger_path"]
    with Ledger(ledger_path, readonly=True) as ledger:
        report.intents_open = len(ledger.open_intents())
        if report.intents_open:
            report.problems.append(f"{report.intents_open} intents never finished")
        for job_id, log, gpus in ids:
            intents = ledger.intents(job_id)
            report.preemptions += len(intents)
            requeued = sum(1 for i in intents if i.outcome == "requeued")
            report.requeues += requeued
            runs = ledger.runs(job_id)
            acct = wait_for(lambda j=job_id: [r for r in jobs.client.accounting_runs(j)
                                              if r.end] or None,
                            60, f"sacct records of {job_id}")
            ran = [r for r in acct if r.start is not None and r.end is not None and r.end > r.start]
            truth = sum(r.run_s * gpus for r in ran)
            mine = sum(r.gpu_seconds(r.end or r.last_seen) for r in runs)
            err = abs(mine - truth)
            report.max_error_gpu_s = max(report.max_error_gpu_s, err)
            report.max_error_per_gpu_s = max(report.max_error_per_gpu_s, err / gpus)
            if err > INTERVAL * gpus:
                report.problems.append(f"job {job_id}: ledger {mine:.1f} vs sacct {truth:.1f} GPU·s")
            starts = [r.start for r in runs]
            if len(set(starts)) != len(starts) or any(
                    a.end is None or a.end > b.start for a, b in zip(runs, runs[1:])):
                report.problems.append(f"job {job_id}: overlapping or repeated runs {runs}")
            if len(runs) != len(ran):
                report.problems.append(f"job {job_id}: {len(runs)} ledger runs, {len(ran)} in sacct")
            if requeued > max(len(ran) - 1, 0):
                report.problems.append(f"job {job_id}: {requeued} requeues for {len(ran)} attempts")
            text = log.read_text() if log.exists() else ""
            per_attempt = text.split("\nstart ")
            # one signal per intent: an attempt gets a second one only after an intent whose
            # waiter started elsewhere (or ended) left it running
            ran_on = sum(1 for i in intents if (i.outcome or "").startswith("waiter "))
            if any(chunk.count("checkpoint ") > 1 + ran_on for chunk in per_attempt):
                report.problems.append(f"job {job_id}: an attempt was signalled twice")
            if attempts(log) and attempts(log)[-1].end_reason != "done":
                report.problems.append(f"job {job_id}: did not finish its steps")
