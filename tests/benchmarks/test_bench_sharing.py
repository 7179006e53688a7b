"""``benchmarks/bench_sharing.py``'s options: a bad value ends it with one line naming the
option and exit 2, before any replay runs."""

from __future__ import annotations

import pytest

from script_helpers import load_script


def _bench():
    return load_script("benchmarks/bench_sharing.py")


@pytest.mark.parametrize(("argv", "message"), [
    (["--opportunistic-load", "0"], "--opportunistic-load: expected a number > 0"),
    (["--opportunistic-load=-0.3"], "--opportunistic-load: expected a number > 0"),
    (["--opportunistic-load", "nan"], "--opportunistic-load: expected a number > 0"),
    (["--opportunistic-load", "inf"], "--opportunistic-load: expected a number > 0"),
    (["--load", "0"], "--load: expected a number > 0"),
    (["--nodes", "-3"], "--nodes: expected a whole number from 0"),
    (["--mix", "split", "--shard-every", "0"], "--shard-every: expected a whole number from 1"),
    # the excerpt's dense window (submit >= 48 d) holds 14,237 jobs
    (["--jobs", "14237"], "--jobs: expected fewer than the 14,237 jobs"),
    # the window's first job alone has no arrival span
    (["--jobs", "1"], "--jobs: the first 1 jobs all arrive at once"),
    (["--mix", "split", "--jobs", "1"], "--jobs: the production jobs of the first 1"),
], ids=["opp-zero", "opp-negative", "opp-nan", "opp-inf", "load-zero", "nodes-negative",
        "shard-every-zero", "jobs-beyond-trace", "jobs-one", "split-jobs-one"])
def test_a_bad_option_is_one_line_and_exit_2(argv: list[str], message: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"bench_sharing: {message}") and err.count("\n") == 1
