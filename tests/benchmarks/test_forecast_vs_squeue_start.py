"""``benchmarks/forecast_vs_squeue_start.py``'s options: a bad value ends it with one line
naming the option and exit 2, before it starts a daemon or submits a job."""

from __future__ import annotations

import pytest

from script_helpers import load_script


def _bench():
    return load_script("benchmarks/forecast_vs_squeue_start.py")


@pytest.mark.parametrize(("argv", "message"), [
    (["--run-s", "45,15"], "--run-s: expected LOW,HIGH seconds with 0 <= LOW <= HIGH, got '45,15'"),
    (["--run-s", "15"], "--run-s: expected LOW,HIGH seconds"),
    (["--run-s", "nan,3"], "--run-s: expected LOW,HIGH seconds"),
    (["--run-s=-1,3"], "--run-s: expected LOW,HIGH seconds"),
    (["--jobs", "0"], "--jobs: expected a whole number from 1 to 10,000, got 0"),
    (["--gpus", "-1"], "--gpus: expected a whole number from 1"),
    (["--time-min", "0"], "--time-min: expected a whole number from 1"),
    (["--timeout-s", "inf"], "--timeout-s: expected a number > 0"),
], ids=["run-s-reversed", "run-s-one", "run-s-nan", "run-s-negative", "jobs-zero",
        "gpus-negative", "time-min-zero", "timeout-inf"])
def test_a_bad_option_is_one_line_and_exit_2(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)   # a good argv would stop at SLURM_CONF
    assert _bench().main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"forecast_vs_squeue_start: {message}") and err.count("\n") == 1
