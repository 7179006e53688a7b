"""``benchmarks/forecast_live_history.py``'s options: a bad value ends it with one line naming
the option and exit 2, before it starts a daemon or submits a job."""

from __future__ import annotations

import pytest

from script_helpers import load_script


@pytest.mark.parametrize(("argv", "message"), [
    (["--steps", "45,10"], "--steps: expected LOW,HIGH whole numbers with 1 <= LOW <= HIGH, "
                           "got '45,10'"),
    (["--steps", "10"], "--steps: expected LOW,HIGH whole numbers"),
    (["--thresholds", "0,5"], "--thresholds: expected LOW,HIGH whole numbers"),
    (["--jobs", "0"], "--jobs: expected a whole number from 1 to 1,000, got 0"),
    (["--gap-s", "-1"], "--gap-s: expected a number >= 0"),
    (["--moments", "0"], "--moments: expected a whole number from 1"),
], ids=["steps-reversed", "steps-one", "thresholds-zero", "jobs-zero", "gap-negative",
        "moments-zero"])
def test_a_bad_option_is_one_line_and_exit_2(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)   # a good argv would stop at SLURM_CONF
    assert load_script("benchmarks/forecast_live_history.py").main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"forecast_live_history: {message}") and err.count("\n") == 1


def test_without_slurm_conf_it_names_it(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert load_script("benchmarks/forecast_live_history.py").main([]) == 2
    assert capsys.readouterr().err.startswith("SLURM_CONF: not set")
