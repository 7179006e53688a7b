"""Tests of the main job's pure parts: the spec it hands dlsubmit (rendered by the real dlsubmit
in --dry-run), the daemon config it writes, and the report built from trainer logs (hand-written
logs, hand-computed figures)."""

from __future__ import annotations

import csv

import os

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from main_job_helpers import REPO, load_example
from prioritizer.daemon.config import load as load_daemon_config
from prioritizer.sim.workload import ScaledJob

replay = load_example("replay")
report = load_example("report")
main_job = load_example("main_job")

JOB = ScaledJob(index=3, name="1665", gpus=8, submit_s=26.2, duration_s=240.0, trace_gpus=16,
                trace_gap_s=45.0, trace_duration_s=55005.0)


# ------------------------------------------------------------------ the spec
def test_spec_is_a_pai_v2_job_running_the_trainer() -> None:
    spec = replay.spec_for(JOB, grace_s=5)
    role = spec["taskRoles"]["train"]
    assert spec["protocolVersion"] == 2 and spec["name"] == "mj03-u1665"
    assert role["instances"] == 1
    assert role["resourcePerInstance"] == {"gpu": 8, "cpu": 16, "memoryMB": 64000}
    assert role["commands"] == [f"{sys.executable} {REPO / 'examples' / 'trainer.py'} "
                                "--total-s 240 --step-s 1 --seed 3"]
    assert spec["extras"]["checkpoint"] == {"signal": "USR2", "grace": 5}


def test_dlsubmit_renders_the_spec(tmp_path: Path) -> None:
    path = replay.write_spec(JOB, tmp_path, grace_s=5)
    proc = subprocess.run([sys.executable, "-m", "submit.cli", "--dry-run", str(path)],
                          capture_output=True, text=True, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    for line in ("#SBATCH --job-name=mj03-u1665", "#SBATCH --requeue", "#SBATCH --gres=gpu:8",
                 "#SBATCH --cpus-per-task=16", "#SBATCH --signal=B:USR2@5",
                 "#SBATCH --comment=dl:v1;signal=USR2;grace=5", "#SBATCH --nodes=1"):
        assert line in script.splitlines(), line
    assert "trainer.py --total-s 240 --step-s 1 --seed 3" in script


def test_daemon_config_points_ledger_and_snapshot_into_the_run(tmp_path: Path) -> None:
    path = replay.daemon_config(REPO / "examples" / "dlprio-demo.yaml", tmp_path)
    cfg = load_daemon_config(path)             # the daemon's own validation accepts it
    assert cfg.ledger_path == str(tmp_path / "ledger.sqlite")
    assert cfg.snapshot_path == str(tmp_path / "snapshot.json")
    assert cfg.policy.thresholds_gpu_s == (100.0, 1000.0)
    assert cfg.interval_s == 2 and cfg.metrics_port == 0
    assert yaml.safe_load(path.read_text())["policy"]["policy"] == "tiresias-las"


def test_out_dir_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("x")
    with pytest.raises(main_job.UsageError, match="not empty"):
        main_job.prepare_out(tmp_path)
    assert (tmp_path / "precious.txt").exists()


def test_earlier_output_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "main_job.log").write_text("old")
    (tmp_path / "logs").mkdir()
    assert main_job.prepare_out(tmp_path) == tmp_path.resolve()
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ reading trainer logs
PREEMPTED_LOG = """\
[dlsubmit] attempt 0 start: job 5
[trainer] start attempt=1 restart_count=0 time=1000.0 step=0 total_steps=83 pid=1 job_id=5
[trainer] checkpoint attempt=1 reason=periodic step=10 time=1010.0
[dlsubmit] attempt 0: got SIGUSR2, forwarded it to the payload
[trainer] checkpoint attempt=1 reason=signal step=14 time=1014.5
[trainer] checkpoint attempt=1 reason=terminate step=20 time=1020.0
[trainer] end attempt=1 reason=terminated step=20 time=1020.0
[trainer] start attempt=2 restart_count=1 time=1032.0 step=20 total_steps=83 pid=2 job_id=5
[trainer] resume attempt=2 step=20 checkpoint=/x/trainer-ckpt.npz
[trainer] end attempt=2 reason=done step=83 loss=0.0659 time=1095.0
"""


def submitted(tmp_path: Path, name: str, index: int, at: float, log: str) -> object:
    path = tmp_path / f"{name}.out"
    path.write_text(log)
    job = ScaledJob(index, name, 8, 0.0, 83.0, 8, 0.0, 100.0)
    return replay.Submitted(job, 5 + index, at, path, name)


def test_attempts_from_a_preempted_job() -> None:
    a1, a2 = report.attempts_from_log(PREEMPTED_LOG)
    assert (a1.number, a1.start, a1.end, a1.end_reason) == (1, 1000.0, 1020.0, "terminated")
    assert a1.signal_checkpoints == (14,) and a1.signal_times == (1014.5,)
    assert not a1.resumed and a1.checkpoint_before is None
    assert (a2.number, a2.start_step, a2.resumed, a2.checkpoint_before) == (2, 20, True, 20)
    assert (a2.end, a2.end_step, a2.end_reason) == (1095.0, 83, "done")


def test_outcome_of_a_preempted_job(tmp_path: Path) -> None:
    sub = submitted(tmp_path, "mj02", 2, 999.0, PREEMPTED_LOG)
    (out,) = report.outcomes([sub], {7: "COMPLETED"}, {})
    assert out.done and out.state == "COMPLETED"
    assert out.jct_s == 1095.0 - 999.0
    assert out.run_s == (1020.0 - 1000.0) + (1095.0 - 1032.0)
    assert (out.preemptions, out.restarts, out.resumes_ok) == (1, 1, True)


def test_resume_from_a_wrong_step_is_caught(tmp_path: Path) -> None:
    sub = submitted(tmp_path, "mj02", 2, 999.0, PREEMPTED_LOG.replace(
        "time=1032.0 step=20", "time=1032.0 step=14"))
    (out,) = report.outcomes([sub], {}, {})
    assert out.resumes_ok is False


def test_unfinished_job_has_no_jct(tmp_path: Path) -> None:
    cut = "".join(PREEMPTED_LOG.splitlines(keepends=True)[:7])
    (out,) = report.outcomes([submitted(tmp_path, "mj02", 2, 999.0, cut)], {}, {})
    assert not out.done and out.jct_s is None


def test_real_summary_by_hand(tmp_path: Path) -> None:
    logs = [
        "[trainer] start attempt=1 restart_count=0 time=10 step=0 total_steps=5\n"
        "[trainer] end attempt=1 reason=done step=5 time=30\n",
        "[trainer] start attempt=1 restart_count=0 time=12 step=0 total_steps=5\n"
        "[trainer] end attempt=1 reason=done step=5 time=62\n",
        PREEMPTED_LOG,
    ]
    subs = [submitted(tmp_path, f"j{i}", i, at, log)
            for i, (at, log) in enumerate(zip((0.0, 2.0, 999.0), logs))]
    outs = report.outcomes(subs, {}, {5: {"promotions": 1}, 6: {"promotions": 0}})
    real = report.real_summary(outs)
    # JCTs: 30, 60, 96; run times 20, 50, 83 -> queueing 10, 10, 13
    assert real["jobs"] == 3
    assert real["avg_jct_s"] == pytest.approx(62.0)
    assert real["median_jct_s"] == 60.0
    assert real["p95_jct_s"] == 96.0
    assert real["makespan_s"] == 1095.0
    assert real["avg_queueing_delay_s"] == pytest.approx(11.0)
    assert real["preemptions"] == 1 and real["promotions"] == 1


def test_tables_put_both_runs_beside_their_predictions(tmp_path: Path) -> None:
    done = ("[trainer] start attempt=1 restart_count=0 time=1000 step=0 total_steps=83\n"
            "[trainer] end attempt=1 reason=done step=83 time=1083\n")
    (tmp_path / "s").mkdir()
    (tmp_path / "d").mkdir()
    alone = report.RunReport("slurm", "Slurm alone", report.outcomes(
        [submitted(tmp_path / "s", "1662", 2, 990.0, done)], {7: "COMPLETED"}, {}))
    dl = report.RunReport("dlprio", "dlprio", report.outcomes(
        [submitted(tmp_path / "d", "1662", 2, 999.0, PREEMPTED_LOG)], {7: "COMPLETED"}, {}),
        tmp_path / "dlprio.yaml", "tiresias-las")
    sim = {"slurm": {2: 90.0}, "dlprio": {2: 101.0}}     # per run: its own prediction
    table = report.jobs_table([alone, dl], sim).splitlines()
    assert table[0].split() == ["job", "arrive", "gpus", "len_s", "slurm", "jct", "sim",
                                "fifo-fit", "slurm", "preempt", "slurm", "restarts", "dlprio",
                                "jct", "sim", "tiresias-las", "dlprio", "preempt", "dlprio",
                                "restarts", "state"]
    assert "\x1b" not in "\n".join(table)                       # plain: it goes to the log too
    # Slurm alone: submitted at 990, ended at 1083 -> 93 s; dlprio: 999 -> 1095 (the log) = 96 s
    assert table[1].split() == ["02-u1662", "0.0", "8", "83", "93.0", "90.0", "0", "0",
                                "96.0", "101.0", "1", "1", "COMPLETED"]
    sims = [{"policy": "fifo-fit", "avg_jct_s": 93.0, "preemptions": 0, "restarts": 0},
            {"policy": "tiresias-las", "avg_jct_s": 120.0, "preemptions": 2, "restarts": 2}]
    comp = report.comparison_table([alone, dl], sims).splitlines()
    assert comp[0].split() == ["Slurm", "alone", "(live)", "sim", "fifo-fit", "dlprio", "(live)",
                               "sim", "tiresias-las"]
    assert [ln.split()[3:] for ln in comp if ln.startswith("avg JCT s")] == [["93.0", "93.0", "96.0", "120.0"]]
    assert [ln.split()[1:] for ln in comp if ln.startswith("restarts")] == [["0", "0", "1", "2"]]
    assert comp[-1].split() == ["live/sim", "avg", "1.00", "0.80"]
    assert report.verdict([alone, dl]).startswith("live avg JCT: dlprio 96.0 s vs Slurm alone 93.0 s (3.2 % higher)")
    report.write_jobs_csv([alone, dl], sim, tmp_path / "jobs.csv")
    with open(tmp_path / "jobs.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["slurm_jct_s"], row["sim_fifo-fit_jct_s"], row["dlprio_jct_s"],
            row["sim_tiresias-las_jct_s"], row["dlprio_preemptions"]) == ("93.0", "90.0", "96.0", "101.0", "1")
    report.write_plot([alone, dl], sim, tmp_path / "fig.png")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_cdf_points_by_hand() -> None:
    assert report.cdf_points([30.0, 10.0, 20.0, 40.0]) == ([10.0, 20.0, 30.0, 40.0], [0.25, 0.5, 0.75, 1.0])


# ------------------------------------------------------------------ CLI errors (no Slurm needed)
def test_unknown_cluster_exits_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # main_job points SLURM_CONF at the named cluster for its children: keep that out of later tests
    monkeypatch.setenv("SLURM_CONF", os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    assert main_job.main(["--cluster-name", "nosuchcluster"]) == 2
    assert "/etc/slurm-nosuchcluster/slurm.conf" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "needle"), [
    (["--jobs", "20000"], "only 14237 jobs"),
    (["--trace", "/nonexistent.csv"], "/nonexistent.csv"),
    (["--workloads", "burst,nope"], "--workloads"),
], ids=["too-many-jobs", "missing-trace", "unknown-workload"])
def test_bad_inputs_exit_2_before_touching_slurm(argv: list[str], needle: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert main_job.main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ the replay loop, with fakes
class FakeDaemon:
    def alive(self) -> bool:
        return True


def test_replay_keeps_what_it_submitted_when_a_submission_fails(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [ScaledJob(i, str(i), 1, 0.0, 20.0, 1, 0.0, 60.0) for i in range(4)]
    calls: list[int] = []

    def fake_submit(job: ScaledJob, out: Path, grace_s: int, prefix: str = "mj") -> object:
        if job.index == 2:
            raise replay.ReplayError("dlsubmit mj02 exited 3: refused")
        calls.append(job.index)
        return replay.Submitted(job, 100 + job.index, 0.0, tmp_path / "x.out", replay.job_name(job))

    monkeypatch.setattr(replay, "submit", fake_submit)
    done: list = []
    with pytest.raises(replay.ReplayError, match="refused"):
        replay.replay(jobs, tmp_path, 5, FakeDaemon(), lambda line: None, done)
    assert [s.job_id for s in done] == [100, 101] and calls == [0, 1]


class FakeJob:
    def __init__(self, job_id: int, state: str) -> None:
        self.job_id, self.state = job_id, state


class FakeClient:
    """squeue as a script: each call returns the next list of (id, state)."""

    def __init__(self, frames: list[list[tuple[int, str]]]) -> None:
        self.frames = frames

    def jobs(self, job_ids: list[int]) -> list[FakeJob]:
        frame = self.frames.pop(0) if len(self.frames) > 1 else self.frames[0]
        return [FakeJob(i, s) for i, s in frame if i in job_ids]


def test_wait_finished_reads_states_and_logs_of_purged_jobs(tmp_path: Path) -> None:
    done_log = "[trainer] start attempt=1 time=1 step=0\n[trainer] end attempt=1 reason=done step=3 time=4\n"
    cut_log = "[trainer] start attempt=1 time=1 step=0\n"
    (tmp_path / "a.out").write_text(done_log)
    (tmp_path / "b.out").write_text(cut_log)
    job = ScaledJob(0, "0", 1, 0.0, 20.0, 1, 0.0, 60.0)
    subs = [replay.Submitted(job, 1, 0.0, tmp_path / "a.out", "a"),
            replay.Submitted(job, 2, 0.0, tmp_path / "b.out", "b"),
            replay.Submitted(job, 3, 0.0, tmp_path / "c.out", "c")]
    client = FakeClient([[(1, "RUNNING"), (2, "PENDING"), (3, "RUNNING")],
                         [(3, "FAILED")]])
    states = replay.wait_finished(client, subs, FakeDaemon(), timeout_s=60)
    assert states == {1: "COMPLETED", 2: "GONE", 3: "FAILED"}


# ------------------------------------------------------------------ the closing line's grammar
def test_plural_and_checkpoint_summary_agree_in_number() -> None:
    assert [report.plural(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert report.checkpoint_summary(1, 1) == (
        "1 job got the checkpoint signal, 1 was requeued and resumed from its checkpoint")
    assert report.checkpoint_summary(5, 4) == (
        "5 jobs got the checkpoint signal, 4 were requeued and resumed from their checkpoints")
    assert report.checkpoint_summary(0, 0) == (
        "0 jobs got the checkpoint signal, 0 were requeued and resumed from their checkpoints")


def test_look_further_names_the_most_preempted_job_and_paths_from_here(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "main-job"
    (out / "dlprio").mkdir(parents=True)
    once = PREEMPTED_LOG
    twice = PREEMPTED_LOG.replace("[trainer] end attempt=2 reason=done step=83 loss=0.0659 time=1095.0\n", (
        "[trainer] checkpoint attempt=2 reason=signal step=30 time=1042.0\n"
        "[trainer] end attempt=2 reason=terminated step=30 time=1045.0\n"
        "[trainer] start attempt=3 restart_count=2 time=1060.0 step=30 total_steps=83 pid=3 job_id=5\n"
        "[trainer] resume attempt=3 step=30 checkpoint=/x/trainer-ckpt.npz\n"
        "[trainer] end attempt=3 reason=done step=83 time=1113.0\n"))
    subs = [submitted(out / "dlprio", f"dlprio0{i}", i, 999.0, log) for i, log in enumerate((once, twice))]
    outs = report.outcomes(subs, {}, {})
    assert [o.preemptions for o in outs] == [1, 2]
    dl = report.RunReport("dlprio", "dlprio", outs, out / "dlprio" / "dlprio.yaml", "tiresias-las")
    lines = main_job.look_further([dl], out)
    assert lines[0] == "look further:"
    assert lines[1].split("#")[0].split()[1:] == ["explain", "6", "--config", "out/main-job/dlprio/dlprio.yaml"]
    assert "dlprio01, preempted 2 times" in lines[1]
    assert lines[2].split()[1:] == ["status", "--all", "--config", "out/main-job/dlprio/dlprio.yaml"]
    assert lines[3].split() == ["per-job", "CSV:", "out/main-job/jobs.csv"]
    assert lines[4].split() == ["figure:", "out/main-job/main_job.png"]
