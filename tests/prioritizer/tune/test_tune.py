"""``dlprio tune``: grid parsing and range checks, ranking, the local executor end to end, and
every failure path (one line, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from prioritizer.cli import main
from prioritizer.policy.config import PolicyConfig
from prioritizer.grid import (GridError, combinations, extend_thresholds, load_grid,
                                   parse_grid, yaml_snippet)
from prioritizer.tune.rank import rank

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "tiresias" / "60_job.csv"


def test_parse_grid_spelling_of_the_issue() -> None:
    grid = parse_grid("thresholds=1000/5000,3250/7200;knob=4,8,16;queues=2,3,4")
    assert grid == {"thresholds": [(1000, 5000), (3250, 7200)], "knob": [4, 8, 16],
                    "queues": [2, 3, 4]}
    assert len(combinations(grid, PolicyConfig())) == 18


def test_wait_guard_is_a_grid_parameter() -> None:
    grid = parse_grid("wait_guard=0,1;knob=1,8")
    assert grid == {"wait_guard": [0, 1], "knob": [1, 8]}
    assert [(c.wait_guard, c.starve_knob) for _, c in combinations(grid, PolicyConfig())] == [
        (0, 1), (0, 8), (1, 1), (1, 8)]
    with pytest.raises(GridError, match="--grid: wait_guard='-1' out of range: must be >= 0"):
        parse_grid("wait_guard=-1")


def test_requeue_guard_is_a_grid_parameter() -> None:
    grid = parse_grid("requeue_guard=0,0.1")
    assert grid == {"requeue_guard": [0, 0.1]}
    assert [c.requeue_guard for _, c in combinations(grid, PolicyConfig())] == [0, 0.1]
    with pytest.raises(GridError, match="--grid: requeue_guard='-1' out of range: must be >= 0"):
        parse_grid("requeue_guard=-1")


def test_preempt_gain_is_a_grid_parameter() -> None:
    grid = parse_grid("preempt_gain=0,1")
    assert grid == {"preempt_gain": [0, 1]}
    assert [c.preempt_gain for _, c in combinations(grid, PolicyConfig())] == [0, 1]
    with pytest.raises(GridError, match="--grid: preempt_gain='-1' out of range: must be >= 0"):
        parse_grid("preempt_gain=-1")


def test_yaml_grid_is_the_same_grid(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({"thresholds": [[1000, 5000], [3250, 7200]], "knob": [4, 8]}))
    assert load_grid(str(path)) == parse_grid("thresholds=1000/5000,3250/7200;knob=4,8")


def test_queues_cut_or_extend_thresholds() -> None:
    assert extend_thresholds((3250, 7200), 2) == (3250,)
    assert extend_thresholds((1000, 5000), 4) == (1000, 5000, 25000)
    assert extend_thresholds((1000,), 3) == (1000, 2000)
    assert extend_thresholds((1000, 5000), 1) == ()
    (setting, config), = combinations(parse_grid("thresholds=1000/5000;queues=4"), PolicyConfig())
    assert config.thresholds_gpu_s == (1000, 5000, 25000)


@pytest.mark.parametrize(("spec", "message"), [
    ("queues=0", "queues='0' out of range"),
    ("queues=9", "out of range"),
    ("thresholds=5000/1000", "increase strictly"),
    ("knob=-1", "knob='-1' out of range"),
    ("knob=abc", "is not a number"),
    ("quantum=0", "must be > 0"),
    ("colour=red", "unknown parameter 'colour'"),
    ("knob", "expected NAME=V1,V2"),
    ("policy=best", "policy='best'"),
])
def test_grid_values_out_of_range(spec: str, message: str) -> None:
    with pytest.raises(GridError, match=message):
        parse_grid(spec)


@pytest.mark.parametrize(("spec", "message"), [
    ("knob=4,,8", "--grid: 'knob=4,,8': an empty value between ','; remove the extra ','"),
    ("knob=4,", "--grid: 'knob=4,': an empty value between ','; remove the extra ','"),
    ("knob=4;;queues=2", "--grid: 'knob=4;;queues=2': an empty parameter between ';'; remove "
                         "the extra ';'"),
    ("knob=4,4.0", "--grid: knob lists knob=4 twice; give each value once"),
    ("thresholds=1/2,1/2", "--grid: thresholds lists thresholds=1/2 twice; give each value once"),
    ("promoted_preempts=yes,true", "--grid: promoted_preempts lists promoted_preempts=yes twice; "
                                   "give each value once"),
])
def test_an_empty_or_repeated_grid_value_is_refused(spec: str, message: str) -> None:
    """An empty item was dropped and a repeated one replayed twice (one table row twice);
    both are a typo, refused as ``--compare fifo,`` is."""
    with pytest.raises(GridError) as err:
        parse_grid(spec)
    assert str(err.value) == message


@pytest.mark.parametrize("spec", [";", " ; ;", "  "])
def test_a_grid_of_no_parameter_is_refused(spec: str) -> None:
    """Separators alone make no grid: refused as a grid file without keys is, not replayed as
    the current settings alone."""
    with pytest.raises(GridError) as err:
        parse_grid(spec)
    assert str(err.value) == (f"--grid: {spec!r} names no parameter; give NAME=V1,V2,... "
                              "joined by ';', e.g. knob=4,8,16")


@pytest.mark.parametrize(("written", "reading"), [
    ("no", "False, YAML's reading of an unquoted no/off/false"),
    ("on", "True, YAML's reading of an unquoted yes/on/true"),
    ("~", "None, YAML's reading of an empty value, ~ or null"),
    ("7", "7, a number to YAML"),
])
def test_grid_file_policy_read_as_not_text_is_named(tmp_path: Path, written: str,
                                                   reading: str) -> None:
    """A grid file's policy value that YAML reads as a boolean, null or number is named
    with that reading and the fix (quote it), not echoed as a bare ``False``."""
    path = tmp_path / "grid.yaml"
    path.write_text(f"policy: [fifo, {written}]\n")
    with pytest.raises(GridError) as err:
        load_grid(str(path))
    assert str(err.value) == (f"{path}: policy={reading}; a policy name, quoted if YAML "
                              "reads it otherwise; valid: tiresias-las, tiresias-gittins, "
                              "las, fifo, fifo-fit, srtf")


def test_rank_marks_current_and_filters_by_p95() -> None:
    figs = [{"avg_jct_s": 10, "p95_jct_s": 50, "max_wait_s": 1},
            {"avg_jct_s": 8, "p95_jct_s": 70, "max_wait_s": 1},
            {"avg_jct_s": 12, "p95_jct_s": 40, "max_wait_s": 1}]
    ranked = rank(["cur", "fast-tail", "slow"], figs, 0, max_p95_ratio=1.0)
    assert [(r.label, r.current, r.allowed) for r in ranked] == [
        ("fast-tail", False, False), ("cur", True, True), ("slow", False, True)]


def test_tune_local_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, plot = tmp_path / "best.yaml", tmp_path / "grid.png"
    rc = main(["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4",
               "--grid", "thresholds=1000/5000,3250/7200;knob=4,8;queues=2,3", "--workers", "2",
               "--output", str(out), "--plot", str(plot), "--validate-from", "900"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "8 configuration(s)" in text and "*current" in text
    assert text.count("thresholds=") >= 8 and "validation on jobs from 900" in text
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("validation on jobs from 900"))
    assert "\x1b" not in text and lines[at + 1].split() == ["avg", "JCT", "s", "p95", "JCT", "s",
                                                            "max", "wait", "s"]
    assert [ln.split()[0] for ln in lines[at + 2:at + 4]] == ["chosen", "current"]
    assert all(float(c.replace(",", "")) >= 0 for ln in lines[at + 2:at + 4] for c in ln.split()[1:])
    snippet = yaml.safe_load(out.read_text())
    PolicyConfig.from_mapping(snippet["policy"])        # a ready dlprio.yaml policy section
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("extra", "message"), [
    (["--grid", "queues=12"], "out of range"),
    ([], "--grid: give a grid"),
    (["--grid", "knob=4", "--validate-from", "99999999"], "both parts need jobs"),
    (["--grid", "knob=4", "--validate-from", "tomorrow"], "--validate-from"),
    (["--grid", "knob=4", "--max-p95-ratio", "0"], "--max-p95-ratio"),
    (["--grid", "knob=4", "--output", "/nonexistent/x.yaml"], "does not exist"),
    (["--grid", "knob=4", "--plot", "/tmp/grid.txt"], "--plot /tmp/grid.txt: unknown figure format 'txt'; use one of"),
    (["--grid", "knob=4", "--output", "/tmp"], "--output /tmp: is a directory; give a file name"),
    (["--grid", "knob=4", "--output", str(TRACE)], f"--output {TRACE}: is the file given with --trace"),
    (["--grid", "queues=2;knob=4;queues=3"], "--grid: queues given twice; give its values once, e.g. queues=2,3"),
])
def test_tune_failure_paths(extra: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    rc = main(["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1


def test_tune_trace_without_gpu_jobs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = tmp_path / "cpu.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\na,0,10,0\n")
    rc = main(["tune", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "8",
               "--grid", "knob=4"])
    assert rc == 2 and "no GPU job" in capsys.readouterr().err


def test_validate_from_date_on_a_history_trace(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from prioritizer.history.trace import HistoryRow, write_rows
    rows = [HistoryRow(str(i), "u", "a", "p", 1796083200 + 60 * i, 1796083200 + 60 * i, 2, 1,
                       2 * (30 + i), 30 + i, 1796083200 + 60 * i + 30 + i, 30 + i, "COMPLETED",
                       1, "self") for i in range(20)]
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows(rows, handle)
    # 1796083200 = 2026-12-01T00:00:00Z; jobs every minute: 10 before 00:10, 10 after. The
    # TIME is local time (as history export reads it): UTC here
    monkeypatch.setenv("TZ", "UTC0")
    time.tzset()
    try:
        rc = main(["tune", "--trace", str(path), "--nodes", "1", "--gpus-per-node", "8",
                   "--grid", "knob=4,8", "--validate-from", "2026-12-01T00:10:00", "--workers", "1"])
    finally:
        monkeypatch.undo()
        time.tzset()
    out = capsys.readouterr().out
    assert rc == 0 and "validation on jobs from 2026-12-01T00:10:00 on (10 jobs)" in out


def test_array_script_quotes_the_workdir() -> None:
    from prioritizer.tune.executors import ExecutorError, array_script
    text = array_script(Path("/tmp/a b/$(x)"), 3)
    assert "#SBATCH --array=0-2" in text
    assert "'/tmp/a b/$(x)'" in text and '--output="/tmp/a b/$(x)/task-%a.out"' in text
    with pytest.raises(ExecutorError, match="plainer --workdir"):
        array_script(Path('/tmp/a"b'), 1)


def test_grid_combination_the_policy_refuses_is_one_line_naming_the_key() -> None:
    with pytest.raises(GridError) as err:
        combinations({"knob": [4, -1]}, PolicyConfig())
    assert str(err.value) == "grid combination knob=-1: starve_knob: must be >= 0 (got -1)"


def test_tune_unknown_policy_is_one_line(capsys: pytest.CaptureFixture) -> None:
    rc = main(["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4",
               "--grid", "knob=4", "--policy", "nope"])
    assert rc == 2
    assert capsys.readouterr().err == (
        "dlprio: --policy: must be 'tiresias-las', 'tiresias-gittins', 'las', 'fifo', "
        "'fifo-fit' or 'srtf' (got 'nope')\n")


def test_tune_help_shows_grid_as_required(capsys: pytest.CaptureFixture) -> None:
    assert main(["tune", "--help"]) == 0
    usage = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    assert "--trace TRACE --grid SPEC|FILE.yaml" in usage and "[--grid" not in usage


def test_tune_without_grid_is_one_line(capsys: pytest.CaptureFixture) -> None:
    assert main(["tune", "--trace", str(TRACE)]) == 2
    assert capsys.readouterr().err == ("dlprio: --grid: give a grid, e.g. "
                                       "'thresholds=1000/5000,3250/7200;knob=4,8'\n")


def _tie_trace(tmp_path: Path, rows: list[tuple[int, int, int]]) -> str:
    """A tiresias-format trace of (submit s, GPUs, duration s) rows."""
    path = tmp_path / "tie.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\n"
                    + "".join(f"j{i},{s},{d},{g}\n" for i, (s, g, d) in enumerate(rows)))
    return str(path)


def _best_line(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith("best: "))


@pytest.mark.parametrize(("rows", "grid", "best"), [
    # three 8-GPU jobs of 100 s at once on one 8-GPU node: they wait, but 800 GPU·s each stays
    # below every first threshold of the grid (1000 and 3250 GPU·s)
    ([(0, 8, 100), (0, 8, 100), (0, 8, 100)], "thresholds=1000/5000,3250/7200;knob=4,8",
     "best: the current config: all 4 setting(s) and the current config gave the same avg JCT "
     "200.0 s (p95 300.0 s, max wait 200.0 s): no job's attained service crosses a threshold: "
     "the largest job ends at 800 GPU·s, below the lowest first threshold of any setting "
     "(1000 GPU·s), so every job stays in the first queue"),
    # two 2-GPU jobs on an 8-GPU node: nobody waits
    ([(0, 2, 5000), (10, 2, 9000)], "knob=4,8",
     "best: the current config: all 2 setting(s) and the current config gave the same avg JCT "
     "7000.0 s (p95 9000.0 s, max wait 0.0 s): no job ever waited for GPUs (the cluster never "
     "filled), so no setting changed an order"),
], ids=["below-thresholds", "no-wait"])
def test_tune_says_why_every_setting_tied(rows: list[tuple[int, int, int]], grid: str, best: str,
                                          tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    rc = main(["tune", "--trace", _tie_trace(tmp_path, rows), "--nodes", "1", "--gpus-per-node",
               "8", "--workers", "1", "--grid", grid])
    assert rc == 0
    assert _best_line(capsys.readouterr().out) == best


@pytest.mark.parametrize(("extra", "line"), [
    pytest.param(["--workdir", "w"], "--workdir applies only with --executor slurm (a "
                 "directory every node sees); add it or drop --workdir", id="workdir-local"),
    pytest.param(["--executor", "slurm", "--workers", "2"], "--workers applies only with "
                 "--executor local (the default); drop --workers", id="workers-slurm"),
    pytest.param(["--workers", "0"], "--workers: expected a whole number from 1 to 4,096, got 0",
                 id="no-workers"),
    pytest.param(["--workers=-3"], "--workers: expected a whole number from 1 to 4,096, got -3",
                 id="negative-workers"),
])
def test_an_option_of_the_other_executor_is_refused(extra: list[str], line: str,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    """An executor's own option given to the other one is refused before any replay (and
    before Slurm is asked), not ignored."""
    rc = main(["tune", "--trace", _tie_trace(tmp_path, [(0, 2, 5000)]), "--nodes", "1",
               "--gpus-per-node", "8", "--grid", "knob=4,8", *extra])
    captured = capsys.readouterr()
    assert (rc, captured.out, captured.err) == (2, "", f"dlprio: {line}\n")
    assert not (tmp_path / "w").exists()


def test_tune_names_a_winner_without_a_tie_reason() -> None:
    from prioritizer.tune.rank import tie_reason
    fig = {"avg_jct_s": 10.0, "p95_jct_s": 20.0, "max_wait_s": 5.0}
    assert tie_reason([PolicyConfig()] * 2, [fig, {**fig, "avg_jct_s": 9.0}], []) is None


def test_output_and_plot_naming_one_file_are_refused(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "o.png"
    rc = main(["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4",
               "--grid", "knob=4,8", "--output", str(out), "--plot", f"{tmp_path}/./o.png"])
    assert (rc, capsys.readouterr().err) == (
        2, f"dlprio: --plot {tmp_path}/./o.png: is also the file given with --output; one would "
        "overwrite the other: give each output its own file name\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("extra, source", [
    (["--grid", "policy=srtf,fifo"], "--grid policy=srtf"),
    (["--grid", "policy=fifo,las", "--policy", "srtf"], "--policy srtf"),
    (["--grid", "knob=4,8", "--config", "CONFIG"], "--config CONFIG (policy: srtf)"),
], ids=["grid", "current-policy", "current-config"])
def test_output_refuses_a_policy_the_daemon_refuses(tmp_path: Path, extra: list[str], source: str,
                                                    capsys: pytest.CaptureFixture) -> None:
    """``--output`` writes a dlprio.yaml snippet: srtf (an oracle, `dlprio simulate` only)
    there is a config the daemon refuses, so a grid or current config that may be chosen with
    it is refused before any replay; without --output it is ranked like any other."""
    config = tmp_path / "dlprio.yaml"
    config.write_text("policy:\n  policy: srtf\n")
    out = tmp_path / "best.yaml"
    argv = ["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4",
            *[str(config) if e == "CONFIG" else e for e in extra], "--output", str(out)]
    assert main(argv) == 2
    assert capsys.readouterr() == ("", f"dlprio: --output: {source.replace('CONFIG', str(config))}: "
                                   "the daemon refuses policy srtf (it needs every job's true "
                                   "duration, an oracle: `dlprio simulate` only), so the best "
                                   "config could not be used; drop srtf or drop --output\n")
    assert not out.exists()


def test_yaml_snippet_is_the_whole_policy_section_in_force() -> None:
    """Every policy key, in PolicyConfig's order: the tuned ones as tuned, the rest as the
    current config has them (min_run_s 20 and wait_guard 1 here, not the defaults 60 and 0)."""
    current = PolicyConfig.from_mapping({"min_run_s": 20, "wait_guard": 1, "checkpoint_overhead_s": 7,
                                         "thresholds_gpu_s": [1000, 5000]})
    (_, best), = combinations(parse_grid("knob=4"), current)
    assert yaml_snippet(best) == (
        "policy:\n  policy: tiresias-las\n  thresholds_gpu_s:\n  - 1000.0\n  - 5000.0\n"
        "  thresholds_s:\n  - 3250.0\n  - 7200.0\n  starve_knob: 4.0\n  min_run_s: 20.0\n"
        "  gittins_quantum_gpu_s: 3250.0\n  checkpoint_overhead_s: 7.0\n  requeue_delay_s: 121.0\n"
        "  decision_interval_s: 30.0\n  preemption: true\n  promoted_preempts: true\n"
        "  wait_guard: 1.0\n  requeue_guard: 0.0\n  preempt_gain: 0.0\n")


def test_tune_output_keeps_the_configs_other_policy_keys(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    """Pasted into dlprio.yaml, the written section is the config the best replay ran with:
    --config's min_run_s, guards, knob and costs stay, only the tuned thresholds change (the
    grid point wins: 211.4 s against the current config's 256.6 s on this trace)."""
    config, out = tmp_path / "dlprio.yaml", tmp_path / "best.yaml"
    config.write_text("policy:\n  min_run_s: 20\n  wait_guard: 1\n  requeue_guard: 0.1\n"
                      "  checkpoint_overhead_s: 7\n  starve_knob: 1\n  thresholds_gpu_s: [100, 500]\n")
    rc = main(["tune", "--trace", str(TRACE), "--nodes", "4", "--gpus-per-node", "4",
               "--config", str(config), "--grid", "thresholds=3250/7200", "--workers", "1",
               "--output", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "\nbest: thresholds=3250/7200\n" in text
    assert yaml.safe_load(out.read_text()) == {"policy": {
        "policy": "tiresias-las", "thresholds_gpu_s": [3250.0, 7200.0],
        "thresholds_s": [3250.0, 7200.0], "starve_knob": 1.0, "min_run_s": 20.0,
        "gittins_quantum_gpu_s": 3250.0, "checkpoint_overhead_s": 7.0, "requeue_delay_s": 121.0,
        "decision_interval_s": 30.0, "preemption": True, "promoted_preempts": True,
        "wait_guard": 1.0, "requeue_guard": 0.1, "preempt_gain": 0.0}}
    assert text.endswith(out.read_text())


def test_a_current_config_kept_by_the_p95_bar_says_so(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """One GPU, no costs: fifo-fit runs A (1,000 s) 0-1000 and B (100 s, at 10 s) 1000-1100:
    JCTs 1000 and 1090, avg 1045, p95 1090; srtf lets B preempt A at 10 s: B 10-110, A
    110-1100, avg 600 but p95 1100, above 1.0 x 1090. The current config stays, for the p95
    bar, not because nothing beat its avg JCT."""
    config = tmp_path / "dlprio.yaml"
    config.write_text("policy:\n  policy: fifo-fit\n  checkpoint_overhead_s: 0\n"
                      "  requeue_delay_s: 0\n  decision_interval_s: 0\n  min_run_s: 0\n")
    rc = main(["tune", "--trace", _tie_trace(tmp_path, [(0, 1, 1000), (10, 1, 100)]),
               "--nodes", "1", "--gpus-per-node", "1", "--workers", "1", "--config",
               str(config), "--grid", "policy=srtf", "--max-p95-ratio", "1"])
    assert rc == 0
    assert _best_line(capsys.readouterr().out) == (
        "best: the current config: the 1 setting(s) with a lower avg JCT (best policy=srtf, "
        "600.0 s) have a p95 above --max-p95-ratio 1 x its p95 1090.0 s")
