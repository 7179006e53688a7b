"""``dlprio explain JOBID`` and ``dlprio status``: read-only views of the ledger.

``explain`` says why a job sits where it sits: its queue, attained service (GPU·s, summed
over its runs, the open one up to now), the thresholds of its queue and the next one, the
promotion rule (Tiresias NSDI'19 section 4.2: back to queue 0 after waiting ``knob ×`` the
last run), and the reason of the last change, in the same words the daemon logged
(docs/design.md, code rule 11). ``status`` lists every known job with the fixed keys of issue 5.
Both open the ledger read-only and never take the daemon's lock.
"""

from __future__ import annotations

import bisect
import time

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger

STATUS_KEYS = ("job_id", "user", "state", "queue", "attained_gpu_s", "preemptions",
               "promotions", "restart_count")


class UnknownJob(LookupError):
    """The ledger has no such job."""


def status_rows(ledger: Ledger, now: float) -> list[dict[str, object]]:
    """One dict per known job with exactly :data:`STATUS_KEYS` (service in GPU·s, 1 decimal)."""
    runs = ledger.all_runs()
    out = []
    for row in ledger.jobs():
        service = sum(r.gpu_seconds(now) for r in runs.get(row.job_id, []))
        out.append({"job_id": row.job_id, "user": row.user, "state": row.state,
                    "queue": row.queue, "attained_gpu_s": round(service, 1),
                    "preemptions": row.preemptions, "promotions": row.promotions,
                    "restart_count": row.restart_count})
    return out


def status_table(rows: list[dict[str, object]]) -> str:
    """Plain text table of :func:`status_rows` (header + one line per job)."""
    lines = [f"{'JOBID':>8} {'USER':<12} {'STATE':<11} {'QUEUE':>5} {'ATTAINED(GPU·s)':>15} "
             f"{'PREEMPT':>7} {'PROMOTE':>7} {'RESTART':>7}"]
    for r in rows:   # queue spelled Q0, Q1... and service in GPU·s, as in dlqueue and REASON
        q = "-" if r["queue"] is None else f"Q{r['queue']}"
        lines.append(f"{r['job_id']:>8} {str(r['user'])[:12]:<12} {str(r['state'])[:11]:<11} "
                     f"{q:>5} {r['attained_gpu_s']:>15} {r['preemptions']:>7} "
                     f"{r['promotions']:>7} {r['restart_count']:>7}")
    return "\n".join(lines) + "\n"


def explain(job_id: int, ledger: Ledger, cfg: DaemonConfig, now: float) -> str:
    """Human text on one job (see module doc). Raises :class:`UnknownJob`."""
    row = ledger.job(job_id)
    if row is None:
        raise UnknownJob(f"job {job_id}: not in the ledger {ledger.path} (not a managed GPU job, "
                         "or the daemon has not seen it yet)")
    runs = ledger.runs(job_id)
    service = sum(r.gpu_seconds(now) for r in runs)
    counted = service - row.service_base_gpu_s
    pol = cfg.policy
    las1d = pol.policy == "las"
    thresholds = pol.thresholds_s if las1d else pol.thresholds_gpu_s
    unit = "s of run time" if las1d else "GPU·s"
    lines = [f"job {job_id} ({row.user}, {row.partition}): {row.state}"]
    if row.queue is None:
        lines.append("queue: not decided yet")
    else:
        lo = thresholds[row.queue - 1] if row.queue > 0 else 0
        hi = f"{thresholds[row.queue]:g}" if row.queue < len(thresholds) else "inf"
        lines.append(f"queue: {row.queue} of 0..{len(thresholds)} (policy {pol.policy}); "
                     f"queue range [{lo:g}, {hi}) {unit}")
        if row.queue_entry_time is not None:
            lines.append(f"in queue since: {_ts(row.queue_entry_time)}")
    lines.append(f"attained service: {service:.0f} GPU·s over {len(runs)} run(s)"
                 + (f"; counted since last promotion: {counted:.0f}" if row.service_base_gpu_s else ""))
    level = bisect.bisect_right(thresholds, counted if not las1d else counted / max(row.gpus, 1))
    lines.append(f"thresholds: {', '.join(f'{t:g}' for t in thresholds)} {unit}"
                 f" (service alone places it in queue {level})")
    if pol.starve_knob > 0:
        lines.append(f"promotion: back to queue 0 after waiting >= {pol.starve_knob:g} x its last "
                     "run")
    when = f" at {_ts(row.reason_time)}" if row.reason_time else ""
    lines.append(f"last change{when}: {row.reason or 'none'}")
    lines.append(f"promotions: {row.promotions}, preemptions: {row.preemptions}, "
                 f"restarts: {row.restart_count}")
    for r in runs:
        end = _ts(r.end) if r.end is not None else "running"
        lines.append(f"  run {_ts(r.start)} -> {end}: {r.seconds(now):.0f} s x {r.gpus} GPUs")
    for i in ledger.intents(job_id):
        lines.append(f"  preemption for job {i.waiter}: signal {i.signal or 'none'}, "
                     f"{i.outcome or 'in progress'}")
    if row.applied:
        lines.append(f"told Slurm: {row.applied}")
    return "\n".join(lines) + "\n"


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
