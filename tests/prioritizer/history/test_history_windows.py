"""``dlprio history check --baseline/--window-jobs``: the real JCTs and the replay against a
replay under the baseline policy, per window of eligible order."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.history.check import against_baseline, check
from prioritizer.history.trace import HistoryRow, write_rows
from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster


def _row(job_id: str, eligible: float, duration: float, jct: float) -> HistoryRow:
    return HistoryRow(job_id, "u", "a", "p", eligible, eligible, 8, 1, 8 * duration,
                      duration, eligible + jct, jct, "COMPLETED", 1, "self")


# One 8-GPU node, 8-GPU jobs: a (10,000 s) eligible at 0, b and c (10 s) at 1 and 2; the
# cluster ran them in order (Slurm alone): real JCTs 10,000, 10,009, 10,018.
# srtf replay, no modeled cost: b preempts a at 1 and runs 1-11 (JCT 10), c 11-21 (19),
# a resumes and ends at 21 + 9,999 (JCT 10,020).
ROWS = [_row("a", 0, 10000, 10000), _row("b", 1, 10, 10009), _row("c", 2, 10, 10018)]
FIFO_FIT = PolicyConfig(policy="fifo-fit").zero_cost()
SRTF = PolicyConfig(policy="srtf").zero_cost()


def test_real_and_replay_against_a_baseline_replay() -> None:
    fid, base = check(ROWS, Cluster(1, 8), FIFO_FIT), check(ROWS, Cluster(1, 8), SRTF)
    assert [j.replay_jct for j in base.jobs] == [10020, 10, 19]
    out = against_baseline(fid, base, 2)
    assert list(out) == ["real", "fifo-fit", "srtf"]
    # windows a,b | c (one job is not under 2 / 2: kept)
    assert out["real"]["windows"] == [
        {"first_submit_s": 0, "jobs": 2, "baseline_avg_jct_s": 5015, "avg_jct_s": 10004.5},
        {"first_submit_s": 2, "jobs": 1, "baseline_avg_jct_s": 19, "avg_jct_s": 10018}]
    assert out["real"]["worst_window_ratio"] == pytest.approx(10018 / 19)
    assert out["real"]["windows_over_1_03"] == 2
    assert out["real"]["hurt_jobs_share"] == pytest.approx(2 / 3)    # b and c
    assert out["real"]["avg_jct_ratio"] == pytest.approx(30027 / 10049)
    assert out["fifo-fit"] == out["real"]            # the fifo-fit replay is what ran


def test_same_policy_as_baseline_is_real_against_its_replay() -> None:
    fid = check(ROWS, Cluster(1, 8), FIFO_FIT)
    out = against_baseline(fid, fid, 200)
    assert list(out) == ["real", "fifo-fit"]
    assert out["real"]["avg_jct_ratio"] == 1.0 and len(out["real"]["windows"]) == 1


@pytest.fixture
def history(tmp_path: Path) -> list[str]:
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows(ROWS, handle)
    return ["history", "check", "--trace", str(path), "--nodes", "1", "--gpus-per-node", "8",
            "--start-latency", "0", "--summary-only"]


def test_cli_prints_the_table_against_the_baseline(history: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # dispatch latency (auto): a started at once, 0 s
    assert main([*history, "--baseline", "srtf", "--window-jobs", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    table = out[out.index("") + 1:]
    assert table[0].startswith("against srtf replayed (real: the JCTs the cluster gave")
    assert [line.split() for line in table[2:]] == [
        ["real", "2.988", "527.263", "2", "66.7", "2"],
        ["fifo-fit", "2.988", "527.263", "2", "66.7", "2"]]


def test_cli_default_baseline_is_fifo_fit(history: list[str],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(history) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("") + 1].startswith("against fifo-fit replayed")
    assert out[-1].split() == ["real", "1.000", "1.000", "0", "0.0", "1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--baseline", "dlas"], "dlprio: --baseline: unknown policy 'dlas'; valid: "),
    (["--window-jobs", "0"], "dlprio: --window-jobs: expected a whole number from 1"),
])
def test_cli_bad_options(history: list[str], args: list[str], message: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*history, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
