"""``dlprio simulate --baseline/--window-jobs``: the per-window comparison in JSON, the table
and the plot, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prioritizer.cli import main

# One GPU, no modeled cost. j0 (10,000 s) arrives at 0, j1-j3 (10 s each) at 1, 2, 3.
# fifo-fit: in order; JCTs 10,000, 10,009, 10,018, 10,027.
# srtf: j1 preempts j0 at 1 and runs 1-11, j2 11-21, j3 21-31, j0 ends at 31 + 9,999:
# JCTs 10,030, 10, 19, 28.
FOUR = "job_id,submission_time,duration,num_gpu\nj0,0,10000,1\nj1,1,10,1\nj2,2,10,1\nj3,3,10,1\n"
ONE_GPU = ["--nodes", "1", "--gpus-per-node", "1", "--zero-cost"]


@pytest.fixture
def four(tmp_path: Path) -> str:
    path = tmp_path / "four.csv"
    path.write_text(FOUR)
    return str(path)


def test_json_against_a_baseline_not_in_the_run(four: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # windows j0,j1 | j2,j3. srtf: (10,030 + 10) / 2 = 5,020 and (19 + 28) / 2 = 23.5;
    # fifo-fit: (10,000 + 10,009) / 2 = 10,004.5 and (10,018 + 10,027) / 2 = 10,022.5.
    # j1-j3 wait > 2x and > 1 h longer under fifo-fit than under srtf: 3 of 4 hurt.
    rc = main(["simulate", "--trace", four, *ONE_GPU, "--policy", "fifo-fit",
               "--baseline", "srtf", "--window-jobs", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [o["policy"] for o in out] == ["fifo-fit", "srtf"]   # the baseline replayed too
    fifo = out[0]
    assert fifo["baseline"] == "srtf"
    assert fifo["windows"] == [
        {"first_submit_s": 0, "jobs": 2, "baseline_avg_jct_s": 5020, "avg_jct_s": 10004.5},
        {"first_submit_s": 2, "jobs": 2, "baseline_avg_jct_s": 23.5, "avg_jct_s": 10022.5}]
    assert fifo["worst_window_ratio"] == pytest.approx(10022.5 / 23.5)
    assert fifo["windows_over_1_03"] == 2
    assert fifo["hurt_jobs_share"] == 0.75
    assert fifo["avg_jct_ratio"] == pytest.approx(40054 / 10087)
    assert (out[1]["worst_window_ratio"], out[1]["windows_over_1_03"], out[1]["hurt_jobs_share"],
            out[1]["avg_jct_ratio"]) == (1.0, 0, 0.0, 1.0)


def test_compare_defaults_to_fifo_fit_and_prints_the_second_table(
        four: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # srtf against fifo-fit: windows 5,020 / 10,004.5 = 0.502 and 23.5 / 10,022.5 = 0.002;
    # avg 10,087 / 40,054 = 0.252; nobody hurt
    plot = tmp_path / "p.png"
    rc = main(["simulate", "--trace", four, *ONE_GPU, "--compare", "srtf,fifo",
               "--window-jobs", "2", "--plot", str(plot)])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert [line.split()[0] for line in lines[1:4]] == ["srtf", "fifo", "fifo-fit"]
    table = lines[lines.index("") + 1:]
    assert table[0].startswith("against fifo-fit, per window of 2 jobs in submit order")
    assert table[1].split() == ["policy", "avg", "x", "worst", "window", "x", "windows", ">",
                                "1.03", "hurt", "jobs", "%", "windows"]
    assert table[2].split() == ["srtf", "0.252", "0.502", "0", "0.0", "2"]
    assert table[3].split() == ["fifo", "1.000", "1.000", "0", "0.0", "2"]   # fifo = fifo-fit here
    assert len(table) == 4
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_policy_has_no_comparison(four: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--trace", four, *ONE_GPU, "--policy", "srtf", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 1 and "windows" not in out[0]


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--compare", "fifo,srtf", "--window-jobs", "0"],
                 "dlprio: --window-jobs: expected a whole number from 1 to 1,000,000,000, got 0",
                 id="zero-window"),
    pytest.param(["--compare", "fifo,srtf", "--window-jobs", "2.5"],
                 "dlprio: --window-jobs: expected a whole number", id="fractional-window"),
    pytest.param(["--baseline", "dlas"], "dlprio: --baseline: unknown policy 'dlas'; valid: "
                 "tiresias-las, tiresias-gittins, las, fifo, fifo-fit, srtf", id="unknown-baseline"),
    pytest.param(["--policy", "srtf", "--window-jobs", "2"],
                 "dlprio: --window-jobs applies to a comparison: add --baseline POLICY or "
                 "--compare P1,P2", id="window-without-comparison"),
])
def test_bad_options_are_one_line_exit_2(four: str, args: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", four, *ONE_GPU, *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(message) and len(err.strip().splitlines()) == 1
