"""The reporting half of the main job: what each job did, the simulator's view, tables and a PNG.

``examples/main_job.py`` hands this module the submitted jobs (``replay.Submitted``) once
Slurm has finished them. The truth about each job comes from the job itself: the event lines
``examples/trainer.py`` appends to the job's output (start and end of every attempt, the
checkpoint taken on the USR2 signal, the step it resumed from), not from the daemon. The
daemon's own counts (``dlprio status --json``) are kept beside them as a cross-check. The
simulated side is ``dlprio simulate --json --jobs-csv`` on the same scaled trace, cluster shape
and policy section. JCT = end of the last attempt − the moment ``dlsubmit`` was called
(seconds); percentiles are nearest-rank, as in ``dlprio simulate``.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from prioritizer.sim.report import nearest_rank
from replay import BIN, Submitted
from trainer import parse_log


@dataclass(frozen=True)
class Attempt:
    """One run of a job: epoch-second bounds, the step it started at and how it ended."""

    number: int
    start: float
    end: float | None
    start_step: int
    end_step: int | None
    end_reason: str | None          # done, terminated, or None (killed without a word)
    resumed: bool                   # started from a checkpoint
    signal_checkpoints: tuple[int, ...]   # steps saved on USR2 during this attempt
    signal_times: tuple[float, ...]       # when those checkpoints were written (epoch s)
    checkpoint_before: int | None   # step of the last checkpoint logged before this attempt


@dataclass
class JobOutcome:
    """What one job did on the live cluster."""

    sub: Submitted
    state: str
    attempts: list[Attempt]
    daemon: dict = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].end_reason == "done"

    @property
    def end(self) -> float | None:
        return self.attempts[-1].end if self.done else None

    @property
    def jct_s(self) -> float | None:
        return None if self.end is None else self.end - self.sub.submitted_at

    @property
    def run_s(self) -> float:
        return sum((a.end or a.start) - a.start for a in self.attempts)

    @property
    def preemptions(self) -> int:
        """USR2 signals the trainer saw (one per preemption of this job)."""
        return sum(len(a.signal_checkpoints) for a in self.attempts)

    @property
    def restarts(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def resumes_ok(self) -> bool:
        """Every attempt after the first resumed at the last step checkpointed before it."""
        return all(a.resumed and a.start_step == a.checkpoint_before for a in self.attempts[1:])


def plural(n: int, word: str) -> str:
    """``"1 job"``, ``"2 jobs"``, ``"0 jobs"`` (English: singular only for exactly one)."""
    return f"{n} {word if n == 1 else word + 's'}"


def checkpoint_summary(signalled: int, resumed: int) -> str:
    """The closing line's first part: how many jobs got the checkpoint signal and how many were
    requeued and resumed from their checkpoints, in grammatical English."""
    verb, whose = ("was", "its checkpoint") if resumed == 1 else ("were", "their checkpoints")
    return (f"{plural(signalled, 'job')} got the checkpoint signal, {resumed} {verb} requeued and "
            f"resumed from {whose}")


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def attempts_from_log(text: str) -> list[Attempt]:
    """The attempts recorded in a job's output (all attempts appended, see trainer.py)."""
    out: list[Attempt] = []
    current: dict | None = None
    saved: int | None = None
    for e in parse_log(text):
        kind = e["event"]
        if kind == "checkpoint":
            saved = int(e["step"])
        if kind == "start":
            if current:
                out.append(Attempt(**current))
            current = {"number": int(e["attempt"]), "start": float(e["time"]), "end": None,
                       "start_step": int(e["step"]), "end_step": None, "end_reason": None,
                       "resumed": False, "signal_checkpoints": (), "signal_times": (),
                       "checkpoint_before": saved}
        elif current is None:
            continue
        elif kind == "resume":
            current["resumed"] = True
        elif kind == "checkpoint" and e.get("reason") == "signal":
            current["signal_checkpoints"] += (int(e["step"]),)
            current["signal_times"] += (float(e["time"]),)
        elif kind == "end":
            current.update(end=float(e["time"]), end_step=int(e["step"]), end_reason=e.get("reason"))
    if current:
        out.append(Attempt(**current))
    return out


def outcomes(subs: Sequence[Submitted], states: dict[int, str], daemon: dict[int, dict]) -> list[JobOutcome]:
    """One :class:`JobOutcome` per submitted job, from its log, Slurm state and daemon row."""
    return [JobOutcome(s, states.get(s.job_id, "?"), attempts_from_log(_read(s.log_path)),
                       daemon.get(s.job_id, {})) for s in subs]


def daemon_rows(config: Path) -> dict[int, dict]:
    """``dlprio status --json`` rows by job id (``{}`` when the command fails)."""
    proc = subprocess.run([str(BIN / "dlprio"), "status", "--json", "--config", str(config)],
                          capture_output=True, text=True, check=False)
    try:
        return {int(r["job_id"]): r for r in json.loads(proc.stdout)} if proc.returncode == 0 else {}
    except (ValueError, KeyError, TypeError):
        return {}


def real_summary(jobs: Sequence[JobOutcome]) -> dict:
    """Summary of the live run with the keys ``dlprio simulate --json`` uses (subset)."""
    jcts = [j.jct_s for j in jobs if j.jct_s is not None]
    ends = [j.end for j in jobs if j.end is not None]
    first = min(j.sub.submitted_at for j in jobs)
    promotions = [j.daemon.get("promotions") for j in jobs]
    return {
        "policy": "live", "jobs": len(jcts),
        "avg_jct_s": statistics.fmean(jcts) if jcts else 0.0,
        "median_jct_s": statistics.median(jcts) if jcts else 0.0,
        "p95_jct_s": nearest_rank(jcts, 95),
        "makespan_s": (max(ends) - first) if ends else 0.0,
        "avg_queueing_delay_s": statistics.fmean(j.jct_s - j.run_s for j in jobs if j.jct_s is not None)
        if jcts else 0.0,
        "preemptions": sum(j.preemptions for j in jobs),
        "promotions": sum(p for p in promotions if isinstance(p, int)) if any(
            isinstance(p, int) for p in promotions) else None,
    }


def simulate(trace_csv: Path, config: Path, nodes: int, gpus_per_node: int, out: Path) -> list[dict]:
    """``dlprio simulate`` on the scaled trace: tiresias-las and fifo-fit with the modeled costs
    of ``config``, then tiresias-las at zero cost. Per-job rows go to ``out/sim-jobs*.csv``.

    Returns the summaries (``policy`` ``tiresias-las``, ``fifo-fit``, ``tiresias-las zero-cost``).
    Raises RuntimeError with the simulator's message when it fails.
    """
    base = [str(BIN / "dlprio"), "simulate", "--trace", str(trace_csv), "--nodes", str(nodes),
            "--gpus-per-node", str(gpus_per_node), "--config", str(config), "--json"]
    runs = [(["--compare", "tiresias-las,fifo-fit", "--jobs-csv", str(out / "sim-jobs.csv")], ""),
            (["--policy", "tiresias-las", "--zero-cost",
              "--jobs-csv", str(out / "sim-jobs-zero-cost.csv")], " zero-cost")]
    summaries: list[dict] = []
    for extra, suffix in runs:
        proc = subprocess.run(base + extra, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"dlprio simulate exited {proc.returncode}: {proc.stderr.strip()}")
        for s in json.loads(proc.stdout):
            summaries.append({**s, "policy": s["policy"] + suffix})
    return summaries


def sim_jcts(path: Path, policy: str = "tiresias-las") -> dict[int, float]:
    """Per-job simulated JCT (s) by scaled job index from a ``--jobs-csv`` file."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {int(r["job_id"]): float(r["jct"]) for r in rows if r.get("policy", policy) == policy}


def jobs_table(jobs: Sequence[JobOutcome], sim: dict[int, float]) -> str:
    """Per-job table: arrival, GPUs, nominal length, real and simulated JCT, preemptions,
    restarts, the steps each restart resumed from, Slurm's final state."""
    t0 = min(j.sub.submitted_at for j in jobs)
    head = (f"{'job':<12} {'slurm':>5} {'arrive':>6} {'gpus':>4} {'len_s':>5} {'jct_s':>6} "
            f"{'sim_s':>6} {'preempt':>7} {'restarts':>8}  {'resumed at step':<16} state")
    lines = [head, "-" * len(head)]
    for j in jobs:
        resumed = ",".join(str(a.start_step) for a in j.attempts[1:] if a.resumed) or "-"
        jct = f"{j.jct_s:6.1f}" if j.jct_s is not None else f"{'-':>6}"
        simv = sim.get(j.sub.job.index)
        lines.append(f"{j.sub.name:<12} {j.sub.job_id:>5} {j.sub.submitted_at - t0:6.1f} "
                     f"{j.sub.job.gpus:>4} {j.sub.job.duration_s:5.0f} {jct} "
                     f"{(f'{simv:6.1f}' if simv is not None else '     -')} {j.preemptions:>7} "
                     f"{j.restarts:>8}  {resumed:<16} {j.state}")
    return "\n".join(lines)


ROWS = (("jobs finished", "jobs", "{:.0f}"), ("avg JCT s", "avg_jct_s", "{:.1f}"),
        ("median JCT s", "median_jct_s", "{:.1f}"), ("p95 JCT s", "p95_jct_s", "{:.1f}"),
        ("makespan s", "makespan_s", "{:.1f}"), ("avg queueing s", "avg_queueing_delay_s", "{:.1f}"),
        ("preemptions", "preemptions", "{:.0f}"), ("promotions", "promotions", "{:.0f}"))


def comparison_table(real: dict, sims: Sequence[dict]) -> str:
    """Real vs simulated side by side, and the real/simulated ratio of avg JCT for each."""
    cols = [("real (live)", real)] + [(f"sim {s['policy']}", s) for s in sims]
    width = max(len(c) for c, _ in cols) + 2
    lines = [f"{'':<16}" + "".join(f"{c:>{width}}" for c, _ in cols)]
    for label, key, fmt in ROWS:
        cells = [fmt.format(v) if isinstance((v := s.get(key)), (int, float)) else "-" for _, s in cols]
        lines.append(f"{label:<16}" + "".join(f"{c:>{width}}" for c in cells))
    ratios = ["1.00"] + [f"{real['avg_jct_s'] / s['avg_jct_s']:.2f}" if s.get("avg_jct_s") else "-"
                         for s in sims]
    lines.append(f"{'real/sim avg':<16}" + "".join(f"{c:>{width}}" for c in ratios))
    return "\n".join(lines)


def write_plot(jobs: Sequence[JobOutcome], sim: dict[int, float], real: dict, sim_las: dict,
               path: Path) -> None:
    """PNG: top, every attempt of every job on the live cluster (bars; x = signal checkpoint,
    dot = arrival); bottom, real vs simulated JCT per job."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = min(j.sub.submitted_at for j in jobs)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), height_ratios=(3, 2))
    for row, j in enumerate(jobs):
        top.plot(j.sub.submitted_at - t0, row, "k.", markersize=6)
        for a in j.attempts:
            end = (a.end or a.start) - t0
            top.barh(row, end - (a.start - t0), left=a.start - t0, height=0.6,
                     color=f"C{(a.number - 1) % 10}", edgecolor="black", linewidth=0.3)
        for a in j.attempts:
            for when in a.signal_times:
                top.plot(when - t0, row, "rx", markersize=8)
    top.set_yticks(range(len(jobs)), [f"{j.sub.name} ({j.sub.job.gpus}g)" for j in jobs], fontsize=7)
    top.invert_yaxis()
    top.set_xlabel("seconds since the first submission")
    top.set_title("live cluster: attempts per job (colour = attempt; dot = arrival; x = checkpoint signal)")
    xs = range(len(jobs))
    bottom.bar([x - 0.2 for x in xs], [j.jct_s or 0 for j in jobs], width=0.4, label="real")
    bottom.bar([x + 0.2 for x in xs], [sim.get(j.sub.job.index, 0) for j in jobs], width=0.4,
               label="simulated (dlprio simulate)")
    bottom.set_xticks(list(xs), [str(j.sub.job.index) for j in jobs], fontsize=7)
    bottom.set_xlabel("job (arrival order)")
    bottom.set_ylabel("JCT s")
    bottom.set_title(f"JCT: real avg {real['avg_jct_s']:.1f} s vs simulated avg "
                     f"{sim_las.get('avg_jct_s', float('nan')):.1f} s")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
