"""The Gittins distribution of ``dlprio tune``'s replays (``--durations``, ``--durations-from``,
``--durations-from-history``) and of the daemon's ``auto_tune`` replays (its
``gittins_samples``): which jobs a learned one is made of, worked out by hand on small traces,
at each walk-forward point only the jobs ended before it, and the bad-input lines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import prioritizer.tune.cli as tune_cli
import prioritizer.tune.rank as rank
import prioritizer.tune.walk_cli as walk_cli
from prioritizer.cli import main
from prioritizer.history.trace import HistoryRow, write_rows
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.durations import load_samples
from prioritizer.sim.learned import Durations, samples_ended_by
from prioritizer.sim.traces import read_trace
from prioritizer.tune import daemon_replay

# Four 1-GPU jobs on one GPU; the walk's one re-tune point every 0.01 day is 864 s.
# Ended by 864 s (submitted + run at or before it): j1 (10 + 100 = 110) only; by 1,000 s
# also j0 (0 + 1,000); all four in the end.
TRACE = ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
         "j0,1,0,1,m,1000,0\n"
         "j1,1,10,1,m,100,0\n"
         "j2,1,900,1,m,1000,0\n"
         "j3,2,910,1,m,100,0\n")
GITTINS = ("policy:\n  policy: tiresias-gittins\n  checkpoint_overhead_s: 0\n"
           "  requeue_delay_s: 0\n  decision_interval_s: 0\n  min_run_s: 0\n")
PACKAGED = tuple(sorted(load_samples()))


def _files(tmp_path: Path, config: str = GITTINS) -> tuple[Path, Path]:
    trace, cfg = tmp_path / "t.csv", tmp_path / "dlprio.yaml"
    trace.write_text(TRACE)
    cfg.write_text(config)
    return trace, cfg


def test_samples_ended_by_counts_the_jobs_submitted_and_run_by_then(tmp_path: Path) -> None:
    trace = read_trace(str(_files(tmp_path)[0]))
    assert samples_ended_by(trace, 864.0) == [100.0]
    assert samples_ended_by(trace, 1000.0) == [1000.0, 100.0]
    assert samples_ended_by(trace, None) == [1000.0, 100.0, 1000.0, 200.0]   # j3: 2 GPUs


def test_durations_name_their_source(tmp_path: Path) -> None:
    trace_path = _files(tmp_path)[0]
    trace = read_trace(str(trace_path))
    dist, note = Durations(history=True, until=1000.0, min_samples=2).distribution(trace)
    assert dist.samples == (100.0, 1000.0)
    assert note == ("Gittins distribution learned from 2 finished job(s) in the history ended "
                    "by 1000 s of trace time")
    dist, note = Durations(history=True, until=864.0, min_samples=2).distribution(trace)
    assert dist.samples == PACKAGED and note.startswith("only 1 finished job(s) in the history")
    dist, _ = Durations(trace=str(trace_path), min_samples=1).distribution()
    assert dist.samples == (100.0, 200.0, 1000.0, 1000.0)
    samples = tmp_path / "s.csv"
    samples.write_text("duration\n5\n7\n")
    assert Durations(file=str(samples)).distribution()[0].samples == (5.0, 7.0)
    assert Durations().distribution()[0].samples == PACKAGED


def _recording(monkeypatch: pytest.MonkeyPatch, module: object) -> list[tuple[str, tuple]]:
    """Record (policy, samples or ()) of every replay ``module.simulate`` makes, and of each
    setting it switches to (the tuner's replays made here, not in a process pool, so that
    the record is seen)."""
    monkeypatch.setattr(tune_cli, "run_local",
                        lambda tasks, workers=None, progress=True: [rank.run_task(t) for t in tasks])
    seen: list[tuple[str, tuple]] = []
    real = module.simulate   # type: ignore[attr-defined]

    def recording(trace, cluster, config, distribution=None, *a, **k):
        seen.append((config.policy, distribution.samples if distribution else ()))
        seen.extend((w.config.policy, w.distribution.samples if w.distribution else ())
                    for w in k.get("switches", ()))
        return real(trace, cluster, config, distribution, *a, **k)

    monkeypatch.setattr(module, "simulate", recording)
    return seen


def test_tune_learns_from_the_tuned_part_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture) -> None:
    """With --validate-from 864 the tuned jobs are j0 and j1, and only j1 had ended by then;
    the validation replays decide with the same distribution (what was known at the split)."""
    trace, config = _files(tmp_path)
    seen = _recording(monkeypatch, rank)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
               "--config", str(config), "--grid", "knob=4,8", "--workers", "1",
               "--durations-from-history", "--durations-min", "1", "--validate-from", "864"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "note: Gittins distribution learned from 1 finished job(s) in the history ended " \
        "by 864 s of trace time" in captured.err
    # two grid points + current, then the chosen and the current on the validation part
    assert seen == [("tiresias-gittins", (100.0,))] * 5
    seen.clear()
    assert main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
                 "--config", str(config), "--grid", "knob=4,8", "--workers", "1",
                 "--durations-from-history", "--durations-min", "2"]) == 0
    assert seen == [("tiresias-gittins", (100.0, 200.0, 1000.0, 1000.0))] * 3


def test_walk_forward_learns_at_each_point_from_the_jobs_ended_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    trace, config = _files(tmp_path)
    tasks: list[rank.Task] = []
    real = tune_cli._execute

    def executing(args, batch):
        tasks.extend(batch)
        return real(args, batch)

    monkeypatch.setattr(tune_cli, "_execute", executing)
    monkeypatch.setattr(walk_cli.os, "cpu_count", lambda: 1)   # replays here, recorded
    seen = _recording(monkeypatch, walk_cli)
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
               "--config", str(config), "--grid", "knob=4,8", "--walk-forward", "0.01",
               "--window-jobs", "2", "--workers", "1", "--durations-from-history",
               "--durations-min", "1", "--json"])
    assert rc == 0
    runs = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    # the point's ranking: the grid and current decide with what had ended by 864 s (j1);
    # the bars' fifo-fit and srtf read no distribution
    grid = [t for t in tasks if t.config["policy"] == "tiresias-gittins"]
    assert len(grid) == 3 and all(t.durations == dataclasses.asdict(
        Durations(history=True, until=864.0, min_samples=1)) for t in grid)
    # the measuring replays: before the point nothing had ended (packaged), after it j1;
    # the baseline once
    assert sorted(set(seen)) == sorted({("fifo-fit", ()), ("tiresias-gittins", PACKAGED),
                                        ("tiresias-gittins", (100.0,))})
    periods = runs["walk-forward"]["periods"]
    assert periods[0]["durations"] == (
        "only 0 finished job(s) in the history ended by 0 s of trace time (minimum 1): using "
        "the packaged distribution (yarn-gput1000.csv)")
    assert periods[1]["durations"] == ("Gittins distribution learned from 1 finished job(s) "
                                       "in the history ended by 864 s of trace time")


def test_without_a_source_the_replays_use_the_packaged_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    trace, config = _files(tmp_path)
    seen = _recording(monkeypatch, rank)
    assert main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
                 "--config", str(config), "--grid", "knob=4", "--workers", "1"]) == 0
    assert seen == [("tiresias-gittins", PACKAGED)] * 2


@pytest.mark.parametrize(("extra", "line"), [
    (["--durations", "s.csv", "--durations-from-history"],
     "dlprio: use one of --durations, --durations-from-history, not several\n"),
    (["--durations-min", "5"], "dlprio: --durations-min applies only with --durations-from or "
     "--durations-from-history; add one or drop --durations-min\n"),
    (["--durations", "missing.csv"], "missing.csv"),
    (["--durations-from", "missing.csv"], "missing.csv"),
])
def test_bad_duration_options_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, extra: list[str],
                                           line: str) -> None:
    trace, config = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.csv").write_text("duration\n5\n")
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
               "--config", str(config), "--grid", "knob=4", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and line in err


def test_a_distribution_no_setting_reads_is_refused(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    trace, config = _files(tmp_path, GITTINS.replace("tiresias-gittins", "tiresias-las"))
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
               "--config", str(config), "--grid", "knob=4,8", "--durations-from-history"])
    assert rc == 2 and capsys.readouterr().err == (
        "dlprio: --durations-from-history only applies to tiresias-gittins or preempt_gain > 0 "
        "(no setting of the grid nor the current config reads a distribution); drop "
        "--durations-from-history or put one of them in the grid or --config\n")
    # the gain rule in the grid reads it
    assert main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "2",
                 "--config", str(config), "--grid", "preempt_gain=0,1", "--workers", "1",
                 "--durations-from-history", "--durations-min", "1"]) == 0


@pytest.mark.parametrize(("samples", "expected"), [
    ("history", "learned"), ("", PACKAGED), ("file", (5.0, 7.0))])
def test_auto_tune_replays_decide_with_the_daemons_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples: str, expected: object) -> None:
    """The replay child reads gittins_samples as the daemon does: ``history`` learns from the
    replayed (finished) jobs, ``""`` is the packaged samples, a path is that file."""
    history = tmp_path / "history.csv"
    specs = [(float(k), 100.0 + k) for k in range(12)]   # twelve 1-GPU jobs, 100-111 s
    with open(history, "w", newline="") as handle:
        write_rows((HistoryRow(str(i + 1), "u", "a", "gpu", 1000 + t, 1000 + t, 1, 1, d, d,
                               1000 + t + d, d, "COMPLETED", 1, "self")
                    for i, (t, d) in enumerate(specs)), handle)
    (tmp_path / "s.csv").write_text("duration\n5\n7\n")
    monkeypatch.setattr(daemon_replay, "shape_from_slurm", lambda client: (1, 1))
    seen = _recording(monkeypatch, rank)
    request = {"history": str(history), "since": 0.0, "until": 1e9, "grid": "knob=4",
               "policy": dataclasses.asdict(PolicyConfig(policy="tiresias-gittins").zero_cost()),
               "min_jobs": 10, "slurm_timeout_s": 5.0, "max_hurt_share": "off",
               "max_worst_window": "off",
               "gittins_samples": str(tmp_path / "s.csv") if samples == "file" else samples,
               "gittins_min_samples": 10}
    result = daemon_replay.replay(request, tmp_path)
    assert result["jobs"] == 12
    want = tuple(d for _, d in specs) if expected == "learned" else expected
    assert seen == [("tiresias-gittins", want)] * 2
