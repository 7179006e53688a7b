"""The reporting half of the main job: what each job did, the simulator's view, tables and a PNG.

``examples/main_job.py`` hands this module the submitted jobs (``replay.Submitted``) once
Slurm has finished them. The truth about each job comes from the job itself: the event lines
``examples/trainer.py`` appends to the job's output (start and end of every attempt, the
checkpoint taken on the USR2 signal, the step it resumed from), not from the daemon. The
daemon's own counts (``dlprio status --json``) are kept beside them as a cross-check. The
simulated side is ``dlprio simulate --json --jobs-csv`` on each run's jobs as submitted, with the
cluster's start-up (``examples/startup.py``), the cluster shape and the policy section. JCT = end
of the last attempt − the moment ``dlsubmit`` was called (seconds); percentiles are
nearest-rank, as in ``dlprio simulate``.
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from prioritizer import tables
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
    """``dlprio status --json --all`` rows by job id (finished jobs included) (``{}`` when the command fails)."""
    proc = subprocess.run([str(BIN / "dlprio"), "status", "--json", "--all", "--config", str(config)],
                          capture_output=True, text=True, check=False)
    try:
        return {int(r["job_id"]): r for r in json.loads(proc.stdout)} if proc.returncode == 0 else {}
    except (ValueError, KeyError, TypeError):
        return {}


@dataclass
class RunReport:
    """One live run as reported: its key (``slurm``/``dlprio``), label, per-job outcomes (in
    arrival order) and the daemon config it ran with (None: Slurm alone)."""

    key: str
    label: str
    outcomes: list[JobOutcome]
    config: Path | None = None
    prediction: str = "fifo-fit"    # the simulated policy that predicts this run


#: The simulated policy that predicts each live run by default: Slurm alone schedules like
#: fit-first FIFO (its backfill starts any job that fits, oldest first); the dlprio run like its
#: config's policy (main_job.py sets that one from the config).
PREDICTS = {"slurm": "fifo-fit", "dlprio": "tiresias-las"}


def real_summary(jobs: Sequence[JobOutcome]) -> dict:
    """Summary of a live run with the keys ``dlprio simulate --json`` uses (subset), plus
    ``restarts`` (requeues seen in the jobs' logs)."""
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
        "restarts": sum(j.restarts for j in jobs),
        "promotions": sum(p for p in promotions if isinstance(p, int)) if any(
            isinstance(p, int) for p in promotions) else None,
    }


def simulate(trace_csv: Path, config: Path, nodes: int, gpus_per_node: int, out: Path,
             policies: Sequence[str] = tuple(PREDICTS.values())) -> list[dict]:
    """``dlprio simulate`` on ``trace_csv`` (a run's jobs as submitted, ``startup.write_trace``):
    ``policies`` with the modeled costs and policy section of ``config``; per-job rows go to
    ``out/sim-jobs.csv``.

    Returns one summary per policy (``restarts`` added: in the simulator every preemption is
    followed by one restart). Raises RuntimeError with the simulator's message when it fails.
    """
    argv = [str(BIN / "dlprio"), "simulate", "--trace", str(trace_csv), "--nodes", str(nodes),
            "--gpus-per-node", str(gpus_per_node), "--config", str(config), "--json",
            "--compare", ",".join(dict.fromkeys(policies)), "--jobs-csv", str(out / "sim-jobs.csv")]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"dlprio simulate exited {proc.returncode}: {proc.stderr.strip()}")
    return [{**s, "restarts": s.get("preemptions", 0)} for s in json.loads(proc.stdout)]


def sim_jcts(path: Path, policy: str = "tiresias-las") -> dict[int, float]:
    """Per-job simulated JCT (s) by scaled job index from a ``--jobs-csv`` file."""
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {int(r["job_id"]): float(r["jct"]) for r in rows if r.get("policy", policy) == policy}


def _cell(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


def jobs_table(runs: Sequence[RunReport], sim: dict[str, dict[int, float]]) -> str:
    """Per-job table: arrival, GPUs, nominal length, then for each run its live JCT and the
    prediction's JCT (``sim``: per run key, per scaled job index), preemptions and restarts
    (each run's own, headers named by the run's key), Slurm's final states; plain text laid out
    by :mod:`prioritizer.tables` (it goes to the log file too), no trailing newline."""
    first = runs[0].outcomes
    t0 = min(j.sub.submitted_at for j in first)
    head = ["job", "arrive", "gpus", "len_s"]
    for r in runs:
        head += [f"{r.key} jct", f"sim {r.prediction}", f"{r.key} preempt", f"{r.key} restarts"]
    rows = []
    for row, base in enumerate(first):
        job = base.sub.job
        cells = [f"{job.index:02d}-u{job.name}", f"{base.sub.submitted_at - t0:.1f}",
                 str(job.gpus), f"{job.duration_s:.0f}"]
        states = []
        for r in runs:
            o = r.outcomes[row]
            cells += [_cell(o.jct_s), _cell(sim[r.key].get(job.index)), str(o.preemptions),
                      str(o.restarts)]
            states.append(o.state)
        rows.append(cells + ["/".join(dict.fromkeys(states))])
    return tables.render(head + ["state"], rows, head[1:]).rstrip("\n")


ROWS = (("jobs finished", "jobs", "{:.0f}"), ("avg JCT s", "avg_jct_s", "{:.1f}"),
        ("median JCT s", "median_jct_s", "{:.1f}"), ("p95 JCT s", "p95_jct_s", "{:.1f}"),
        ("avg queueing s", "avg_queueing_delay_s", "{:.1f}"), ("makespan s", "makespan_s", "{:.1f}"),
        ("preemptions", "preemptions", "{:.0f}"), ("restarts", "restarts", "{:.0f}"),
        ("promotions", "promotions", "{:.0f}"))


def comparison_columns(runs: Sequence[RunReport], sims: Sequence[dict]) -> list[tuple[str, dict]]:
    """(header, summary) per column: each live run followed by its prediction (``sims[i]``
    predicts ``runs[i]``)."""
    cols: list[tuple[str, dict]] = []
    for r, sim in zip(runs, sims):
        cols += [(f"{r.label} (live)", real_summary(r.outcomes)), (f"sim {r.prediction}", sim)]
    return cols


def comparison_table(runs: Sequence[RunReport], sims: Sequence[dict]) -> str:
    """Both live runs side by side, each beside its prediction, and live ÷ predicted avg JCT;
    plain text laid out by :mod:`prioritizer.tables`, no trailing newline."""
    cols = comparison_columns(runs, sims)
    rows = []
    for label, key, fmt in ROWS:
        rows.append([label] + [fmt.format(v) if isinstance((v := s.get(key)), (int, float))
                               else "-" for _, s in cols])
    ratios = []
    for (_, live), (_, sim) in zip(cols[::2], cols[1::2]):
        ratios += ["", f"{live['avg_jct_s'] / sim['avg_jct_s']:.2f}" if sim.get("avg_jct_s") else "-"]
    rows.append(["live/sim avg"] + ratios)
    heads = [""] + [c for c, _ in cols]
    return tables.render(heads, rows, heads[1:]).rstrip("\n")


def verdict(runs: Sequence[RunReport]) -> str:
    """One sentence: the dlprio run's avg JCT against Slurm alone's, live (percent change)."""
    base, dl = (real_summary(r.outcomes) for r in (runs[0], runs[-1]))
    if not base["avg_jct_s"]:
        return "no job finished under Slurm alone; nothing to compare"
    change = 100.0 * (dl["avg_jct_s"] / base["avg_jct_s"] - 1.0)
    word = "lower" if change < 0 else "higher"
    return (f"live avg JCT: {runs[-1].label} {dl['avg_jct_s']:.1f} s vs {runs[0].label} "
            f"{base['avg_jct_s']:.1f} s ({abs(change):.1f} % {word}); p95 {dl['p95_jct_s']:.1f} s "
            f"vs {base['p95_jct_s']:.1f} s; makespan {dl['makespan_s']:.1f} s vs {base['makespan_s']:.1f} s")


def outcome_json(o: JobOutcome, sim: dict[str, dict[int, float]]) -> dict:
    """One job of one run for ``main_job.json`` (every attempt included)."""
    return {"name": o.sub.name, "job_id": o.sub.job_id, "state": o.state,
            "scaled": asdict(o.sub.job), "submitted_at": o.sub.submitted_at, "jct_s": o.jct_s,
            "sim_jct_s": {p: v.get(o.sub.job.index) for p, v in sim.items()},
            "preemptions": o.preemptions, "restarts": o.restarts, "resumes_ok": o.resumes_ok,
            "daemon": o.daemon, "attempts": [asdict(a) for a in o.attempts]}


def write_jobs_csv(runs: Sequence[RunReport], sim: dict[str, dict[int, float]], path: Path) -> None:
    """``jobs.csv``: one row per job, the columns of :func:`jobs_table` plus Slurm job ids
    (times in s; empty cell: no JCT)."""
    fields = ["index", "trace_id", "gpus", "duration_s", "submit_s"]
    for r in runs:
        fields += [f"{r.key}_job_id", f"{r.key}_jct_s", f"sim_{r.prediction}_jct_s",
                   f"{r.key}_preemptions", f"{r.key}_restarts", f"{r.key}_state"]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for row, base in enumerate(runs[0].outcomes):
            job = base.sub.job
            cells: list[object] = [job.index, job.name, job.gpus, job.duration_s, job.submit_s]
            for r in runs:
                o = r.outcomes[row]
                simv = sim[r.key].get(job.index)
                cells += [o.sub.job_id, "" if o.jct_s is None else round(o.jct_s, 1),
                          "" if simv is None else simv, o.preemptions, o.restarts, o.state]
            writer.writerow(cells)


def cdf_points(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """Step points of the empirical CDF: sorted values and i/n for i = 1..n."""
    xs = sorted(values)
    return xs, [(i + 1) / len(xs) for i in range(len(xs))]


def write_plot(runs: Sequence[RunReport], sim: dict[str, dict[int, float]], path: Path) -> None:
    """PNG: left, the JCT CDF of both live runs (solid) and their predictions (dashed); right,
    every attempt of every job in the dlprio run (bars; x = checkpoint signal, dot = arrival)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 6), width_ratios=(2, 3))
    for colour, r in enumerate(runs):
        jcts = [o.jct_s for o in r.outcomes if o.jct_s is not None]
        if jcts:
            xs, ys = cdf_points(jcts)
            left.step(xs, ys, where="post", color=f"C{colour}", linewidth=2,
                      label=f"{r.label}, live (avg {statistics.fmean(jcts):.1f} s)")
        if sim.get(r.key):
            xs, ys = cdf_points(list(sim[r.key].values()))
            left.step(xs, ys, where="post", color=f"C{colour}", linestyle="--",
                      label=f"sim {r.prediction} (avg {statistics.fmean(xs):.1f} s)")
    left.set_xlabel("JCT s")
    left.set_ylabel("fraction of jobs")
    left.set_title("JCT CDF: both live runs and their predictions")
    left.legend(fontsize=8, loc="lower right")
    left.grid(alpha=0.3)

    dl = runs[-1]
    jobs = dl.outcomes
    t0 = min(j.sub.submitted_at for j in jobs)
    for row, j in enumerate(jobs):
        right.plot(j.sub.submitted_at - t0, row, "k.", markersize=6)
        for a in j.attempts:
            end = (a.end or a.start) - t0
            right.barh(row, end - (a.start - t0), left=a.start - t0, height=0.6,
                       color=f"C{(a.number - 1) % 10}", edgecolor="black", linewidth=0.3)
            for when in a.signal_times:
                right.plot(when - t0, row, "rx", markersize=8)
    right.set_yticks(range(len(jobs)), [f"{j.sub.name} ({j.sub.job.gpus}g)" for j in jobs], fontsize=7)
    right.invert_yaxis()
    right.set_xlabel("seconds since the first submission")
    right.set_title(f"{dl.label} run: attempts per job (colour = attempt; dot = arrival; "
                    "x = checkpoint signal)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
