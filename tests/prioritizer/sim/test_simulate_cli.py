"""``dlprio simulate`` end to end, in-process through ``prioritizer.cli.main``."""

from __future__ import annotations

import os

import csv
import json
from pathlib import Path

import pytest

from prioritizer.cli import main

TIRESIAS = Path(__file__).resolve().parents[3] / "data" / "traces" / "tiresias"
SIXTY = str(TIRESIAS / "60_job.csv")
N2G4 = ["--cluster", str(TIRESIAS / "n2g4.csv")]


def test_json_compare_on_the_reference_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", SIXTY, *N2G4, "--placement", "count", "--zero-cost",
               "--compare", "fifo,fifo-fit", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [o["policy"] for o in out] == ["fifo", "fifo-fit"]
    assert [round(o["avg_jct_s"], 1) for o in out] == [1556.5, 715.3]
    assert set(out[0]) == {"policy", "jobs", "skipped_jobs", "avg_jct_s", "median_jct_s",
                           "p95_jct_s", "p99_jct_s", "makespan_s", "avg_queueing_delay_s",
                           "preemptions", "promotions", "gpu_utilisation", "wall_s",
                           "windows", "worst_window_ratio", "windows_over_1_03",
                           "hurt_jobs_share", "avg_jct_ratio", "baseline"}
    # against fifo-fit (the default baseline, in --compare): 60 jobs, one window
    assert out[0]["baseline"] == "fifo-fit" and len(out[0]["windows"]) == 1
    assert out[0]["avg_jct_ratio"] == out[0]["worst_window_ratio"] == pytest.approx(
        out[0]["avg_jct_s"] / out[1]["avg_jct_s"])
    assert out[0]["jobs"] == 60 and out[0]["skipped_jobs"] == 0


def test_sharing_trace_reports_production_and_opportunistic_jobs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One GPU, the default costs (15 s checkpoint, 121 s requeue delay, 30 s ticks).
    # o (opportunistic, 0.5 GPU, 100 s) runs from 0; p (1 GPU, 50 s) arrives at 20. On the
    # tick at 30 o is preempted (an opportunistic job has no thrash guard), holds its GPU to
    # 45; p runs 45..95 (JCT 75). o may restart at 45 + 121 = 166 and runs its last 70 s:
    # ends 236. Arrival window [0, 20]: o held half the GPU, utilisation 0.5.
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration,opportunistic\n"
                     "o,0.5,0,100,1\np,1,20,50,0\n")
    cluster = ["--nodes", "1", "--gpus-per-node", "1", "--policy", "las"]
    assert main(["simulate", "--trace", str(trace), *cluster, "--json"]) == 0
    (out,) = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in ("avg_jct_s", "production_jobs", "production_avg_jct_s",
                                "opportunistic_jobs", "opportunistic_avg_jct_s",
                                "opportunistic_preemptions",
                                "gpu_utilisation_arrival_window")} == {
        "avg_jct_s": 155.5, "production_jobs": 1, "production_avg_jct_s": 75.0,
        "opportunistic_jobs": 1, "opportunistic_avg_jct_s": 236.0,
        "opportunistic_preemptions": 1, "gpu_utilisation_arrival_window": 0.5}
    assert main(["simulate", "--trace", str(trace), *cluster]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("GPU sharing:"))
    assert lines[at + 2].split() == ["las", "1", "75.0", "155.5", "1", "236.0", "1", "0.500"]


def test_table_with_ratios_csv_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jobs_csv, plot = tmp_path / "jobs.csv", tmp_path / "jct.png"
    rc = main(["simulate", "--trace", SIXTY, "--nodes", "2", "--gpus-per-node", "4",
               "--placement", "count", "--zero-cost", "--compare", "fifo,srtf",
               "--jobs-csv", str(jobs_csv), "--plot", str(plot)])
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert lines[0].split()[-4:] == ["avg", "x", "p95", "x"]
    assert lines[1].split()[0] == "fifo" and lines[1].split()[-2:] == ["1.000", "1.000"]
    # srtf / fifo = 519.9 / 1556.5 (the reference simulator's figures, docs/simulator.md)
    assert lines[2].split()[-2] == f"{519.9 / 1556.5:.3f}"
    rows = list(csv.DictReader(jobs_csv.open()))
    assert len(rows) == 180 and rows[0]["policy"] == "fifo"   # and fifo-fit, the baseline
    assert rows[-1]["policy"] == "fifo-fit"
    assert list(rows[0])[1:] == ["job_id", "submit", "start", "end", "jct", "queueing_delay",
                                 "preemptions", "promotions"]
    assert rows[0]["job_id"] == "0" and rows[0]["end"] == "164"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--policy", "dlas-gpu"], "unknown policy 'dlas-gpu'; valid: tiresias-las, "
                 "tiresias-gittins, las, fifo, fifo-fit, srtf", id="unknown-policy"),
    pytest.param(["--compare", "fifo,nope"], "unknown policy 'nope'", id="unknown-in-compare"),
    pytest.param([], "give the cluster", id="no-cluster"),
    pytest.param(["--thresholds", "7200,3250"], "dlprio: --thresholds: thresholds must increase "
                 "strictly (got [7200.0, 3250.0])\n", id="bad-thresholds"),
    pytest.param(["--thresholds", "0,3250"], "dlprio: --thresholds[0]: must be > 0 (got 0.0)\n",
                 id="zero-threshold"),
    pytest.param(["--starve-knob", "-1"], "dlprio: --starve-knob: must be >= 0 (got -1.0)\n",
                 id="negative-knob"),
    pytest.param(["--gittins-quantum", "0"],
                 "dlprio: --gittins-quantum: must be > 0 (got 0.0)\n", id="zero-quantum"),
])
def test_usage_errors_exit_2_with_one_line(args: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    cluster = [] if "give the cluster" in message else ["--nodes", "1", "--gpus-per-node", "8"]
    rc = main(["simulate", "--trace", SIXTY, *cluster, *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(("args", "line"), [
    pytest.param(["--requeue-guard", "nan"], "--requeue-guard: expected a number >= 0 and <= "
                 "1e+09, got 'nan'", id="nan-guard"),
    pytest.param(["--wait-guard", "inf"], "--wait-guard: expected a number >= 0 and <= 1e+09, "
                 "got 'inf'", id="inf-guard"),
    pytest.param(["--starve-knob=-1e12"], "--starve-knob: expected a number >= 0 and <= "
                 "1e+09, got -1e12", id="huge-negative-knob"),
    pytest.param(["--gittins-quantum", "x"], "--gittins-quantum: expected a number > 0 and <= "
                 "1e+09, got 'x'", id="word-quantum"),
    pytest.param(["--min-run", "2e9"], "--min-run: expected a number >= 0 and <= 1e+09, got 2e9",
                 id="huge-min-run"),
])
def test_an_override_that_is_no_number_names_the_settings_range(
        args: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every policy override states the range its setting allows (>= 0, > 0 for the quantum),
    not the wider one its text is first read with."""
    assert main(["simulate", "--trace", SIXTY, *N2G4, *args]) == 2
    assert capsys.readouterr().err == f"dlprio: {line}\n"


@pytest.mark.parametrize(("value", "line"), [
    pytest.param("100,", "--thresholds: item 2: expected a number > 0 and <= 1.024e+12, got ''; "
                 "give increasing GPU·s like 3250,7200", id="empty-item"),
    pytest.param("-5,100", "--thresholds: item 1: expected a number > 0 and <= 1.024e+12, got "
                 "-5; give increasing GPU·s like 3250,7200", id="negative"),
    pytest.param("100,1e400", "--thresholds: item 2: expected a number > 0 and <= 1.024e+12, "
                 "got 1e400; give increasing GPU·s like 3250,7200", id="infinite"),
])
def test_a_threshold_that_is_no_number_names_its_item_and_range(
        value: str, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A threshold must be > 0 (the policy's rule), so the range given for one that is no
    number says so too."""
    assert main(["simulate", "--trace", SIXTY, *N2G4, f"--thresholds={value}"]) == 2
    assert capsys.readouterr().err == f"dlprio: {line}\n"


@pytest.mark.parametrize("policy", ["tiresias-gittins", "fifo"])
def test_durations_min_without_durations_from_is_refused(
        policy: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--durations-min sets what --durations-from needs; alone it would be ignored."""
    assert main(["simulate", "--trace", SIXTY, *N2G4, "--policy", policy,
                 "--durations-min", "5"]) == 2
    assert capsys.readouterr().err == ("dlprio: --durations-min applies only with "
                                       "--durations-from; add it or drop --durations-min\n")


def test_bad_policy_section_names_the_file_and_each_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "p.yaml"
    conf.write_text("policy:\n  starve_knob: x\n  min_run: 5\n")
    rc = main(["simulate", "--trace", SIXTY, *N2G4, "--config", str(conf), "--min-run", "-3"])
    assert rc == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dlprio: {conf}: policy.starve_knob: expected a number >= 0 (got 'x')",
        "dlprio: --min-run: must be >= 0 (got -3.0)",
        f"dlprio: {conf}: policy.min_run: unknown key; did you mean 'min_run_s'?"]


def test_malformed_trace_names_file_and_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,5\n2,1,3,-5\n")
    rc = main(["simulate", "--trace", str(bad), "--nodes", "1", "--gpus-per-node", "4"])
    assert rc == 2
    assert capsys.readouterr().err.strip() == \
        f"dlprio: {bad}:3: duration must be >= 0, got '-5'"


def test_config_file_policy_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "dlprio.yaml"
    conf.write_text("policy:\n  policy: fifo\n  knob: 3\n")
    rc = main(["simulate", "--trace", SIXTY, *N2G4, "--config", str(conf)])
    assert rc == 2 and "policy.knob: unknown key" in capsys.readouterr().err


def test_config_file_sets_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "dlprio.yaml"
    conf.write_text("policy:\n  policy: fifo\n  starve_knob: 3\n")
    rc = main(["simulate", "--trace", SIXTY, *N2G4, "--placement", "count", "--zero-cost",
               "--config", str(conf), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out[0]["policy"] == "fifo" and round(out[0]["avg_jct_s"], 1) == 1556.5


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--help"]) == 0
    assert "--zero-cost" in capsys.readouterr().out


def test_single_policy_jobs_csv_and_since(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "itp.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\n"
                     "early,10,100,1\nb,1000,50,2\nc,1010,30,0\nd,1020,40,4\n")
    jobs_csv = tmp_path / "jobs.csv"
    rc = main(["simulate", "--trace", str(trace), "--since", "1000", "--nodes", "1",
               "--gpus-per-node", "4", "--policy", "fifo", "--zero-cost", "--json",
               "--jobs-csv", str(jobs_csv)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out[0]["jobs"] == 2 and out[0]["skipped_jobs"] == 1
    # b: 0-50 on 2 GPUs; d (4 GPUs) arrives at 20, waits for b: 50-90
    assert jobs_csv.read_text().splitlines() == [
        "job_id,submit,start,end,jct,queueing_delay,preemptions,promotions",
        "b,0,0,50,50,0,0,0", "d,20,50,90,70,30,0,0"]


@pytest.mark.parametrize("cluster", [["--nodes", "0", "--gpus-per-node", "4"],
                                     ["--nodes", "-3", "--gpus-per-node", "4"],
                                     ["--nodes", "2", "--gpus-per-node", "0"]],
                         ids=["zero-nodes", "negative-nodes", "zero-gpus"])
def test_zero_or_negative_cluster_size_is_the_same_clear_error(cluster: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", SIXTY, *cluster])
    assert (rc, capsys.readouterr().err) == (2, "dlprio: --nodes and --gpus-per-node must be > 0\n")


@pytest.mark.parametrize("option", ["--plot", "--jobs-csv"])
def test_missing_output_directory_fails_before_the_replay(option: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from prioritizer.sim import cli as sim_cli

    replays: list[object] = []
    monkeypatch.setattr(sim_cli, "simulate", lambda *a: replays.append(a))
    target = tmp_path / "nonexistent" / "dir" / "x.png"
    rc = main(["simulate", "--trace", SIXTY, *N2G4, option, str(target)])
    out, err = capsys.readouterr()
    assert (rc, out, replays) == (2, "", [])
    assert err == (f"dlprio: {option} {target}: directory {target.parent} does not exist; "
                   "create it first\n")


@pytest.mark.parametrize("option", ["--plot", "--jobs-csv"])
def test_an_output_directory_that_takes_no_file_fails_before_the_replay(
        option: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # /proc exists and is a directory, yet no file can be made in it, even by root: the
    # write would fail only after the replay
    from prioritizer.sim import cli as sim_cli

    replays: list[object] = []
    monkeypatch.setattr(sim_cli, "simulate", lambda *a: replays.append(a))
    rc = main(["simulate", "--trace", SIXTY, *N2G4, option, "/proc/x.png"])
    out, err = capsys.readouterr()
    assert (rc, out, replays) == (2, "", [])
    assert err.startswith(f"dlprio: {option} /proc/x.png: cannot write in directory /proc (")
    assert err.endswith("); give a path in a writable directory\n")
    assert os.listdir("/proc").count("x.png") == 0


def test_zero_gpu_row_is_skipped_counted_and_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    # job 2 asks for 0 GPUs (a CPU-only row): 2 jobs run, 1 skipped
    trace.write_text("job_id,num_gpu,submit_time,duration\n1,1,0,10\n2,0,5,10\n3,2,6,10\n")
    rc = main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4",
               "--policy", "fifo", "--zero-cost", "--json"])
    out, err = capsys.readouterr()
    [summary] = json.loads(out)
    assert rc == 0 and (summary["jobs"], summary["skipped_jobs"]) == (2, 1)
    assert err == ("note: 1 trace row(s) with zero GPUs or zero duration were skipped; "
                   "counted in skipped_jobs\n")


def test_plot_queue_axis_starts_at_the_first_kept_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # Philly rows: a job at 0, then one at 1,000 h (8 GPUs, 2 h) and one 60 s later (8 GPUs, 1 h)
    # that waits for it on the single 8-GPU node; --since keeps the last two.
    trace = tmp_path / "late.csv"
    trace.write_text("u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
                     "0,1,1,0,1,0,100,0,Pass\n1,1,8,0,1,3600000,7200,0,Pass\n2,1,8,0,1,60,3600,0,Pass\n")
    figures: list = []
    from matplotlib.figure import Figure
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: figures.append(self))
    rc = main(["simulate", "--trace", str(trace), "--since", "3600000", "--nodes", "1",
               "--gpus-per-node", "8", "--policy", "fifo", "--zero-cost", "--plot", str(tmp_path / "q.png")])
    assert rc == 0, capsys.readouterr().err
    queue = figures[0].axes[1]
    left, right = queue.get_xlim()
    # the first kept job is time 0; the last decision is between the second job's start (2 h)
    # and its end (3 h), not 1,000 h later
    assert left == 0.0 and 2.0 <= right <= 3.0
    assert "first job of the replay" in queue.get_xlabel()


# -- inputs that are not regular files, a byte-order mark, outputs checked before the replay
# (unchecked, /dev/zero would grow without end, a FIFO would hang, --plot x.txt would end in a
# traceback after the whole replay, --jobs-csv could replace the trace it read)

def _fifo(tmp_path: Path) -> str:
    import os
    path = tmp_path / "trace.fifo"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize(("make", "kind"), [
    (lambda tmp: "/dev/zero", "a device"),
    (_fifo, "a FIFO"),
    (lambda tmp: str(tmp), "a directory"),
])
def test_trace_that_is_not_a_regular_file_is_refused_at_once(make, kind: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = make(tmp_path)
    rc = main(["simulate", "--trace", path, "--nodes", "2", "--gpus-per-node", "4"])
    assert (rc, capsys.readouterr().err) == (
        2, f"dlprio: {path}: cannot read ({kind}; give a regular file)\n")


def test_cluster_spec_that_is_a_device_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", SIXTY, "--cluster", "/dev/zero"])
    assert (rc, capsys.readouterr().err) == (
        2, "dlprio: /dev/zero: cannot read (a device; give a regular file)\n")


def test_byte_order_mark_as_spreadsheets_save_it_reads_as_without(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, spec = tmp_path / "t.csv", tmp_path / "c.csv"
    trace.write_bytes(b"\xef\xbb\xbf" + Path(SIXTY).read_bytes())
    spec.write_bytes(b"\xef\xbb\xbf" + (TIRESIAS / "n2g4.csv").read_bytes())
    assert main(["simulate", "--trace", SIXTY, *N2G4, "--policy", "fifo", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--trace", str(trace), "--cluster", str(spec), "--policy", "fifo",
                 "--json"]) == 0
    marked = json.loads(capsys.readouterr().out)
    for summary in (*plain, *marked):
        del summary["wall_s"]   # the replay's own time
    assert marked == plain and plain[0]["jobs"] == 60


@pytest.fixture
def no_replay(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    from prioritizer.sim import cli as sim_cli
    replays: list[object] = []
    monkeypatch.setattr(sim_cli, "simulate", lambda *a: replays.append(a))
    return replays


def test_jobs_csv_naming_the_trace_is_refused_and_the_trace_kept(
        tmp_path: Path, no_replay: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "self.csv"
    trace.write_bytes(Path(SIXTY).read_bytes())
    alias = tmp_path / "sub" / ".." / "self.csv"
    (tmp_path / "sub").mkdir()
    rc = main(["simulate", "--trace", str(trace), *N2G4, "--jobs-csv", str(alias)])
    assert (rc, no_replay) == (2, [])
    assert capsys.readouterr().err == (
        f"dlprio: --jobs-csv {alias}: is the file given with --trace; writing it would "
        "overwrite that input: give another file name\n")
    assert trace.read_bytes() == Path(SIXTY).read_bytes()


@pytest.mark.parametrize(("first", "second", "extra"), [
    ("--jobs-csv", "--plot", []),
    ("--plot", "--tenants-plot", ["--tenants", "TENANTS"]),
    ("--jobs-csv", "--tenants-plot", ["--tenants", "TENANTS"]),
], ids=["jobs-csv-plot", "plot-tenants-plot", "jobs-csv-tenants-plot"])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "existing"])
def test_two_outputs_naming_one_file_are_refused_before_the_replay(
        first: str, second: str, extra: list[str], existing: bool, tmp_path: Path,
        no_replay: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    """The second write would silently replace the first: one line naming both options, exit
    2, nothing written, whether the file exists yet or not and by any spelling of its path."""
    tenants = tmp_path / "ten.yaml"
    tenants.write_text("virtual_clusters:\n  A: {users: ['1'], guaranteed_gpus: 2}\n")
    out = tmp_path / "same.png"
    if existing:
        out.write_bytes(b"old")
    (tmp_path / "sub").mkdir()
    alias = tmp_path / "sub" / ".." / "same.png"
    argv = ["simulate", "--trace", SIXTY, *N2G4, first, str(out), second, str(alias),
            *[str(tenants) if e == "TENANTS" else e for e in extra]]
    assert (main(argv), no_replay) == (2, [])
    assert capsys.readouterr() == ("", f"dlprio: {second} {alias}: is also the file given "
                                   f"with {first}; one would overwrite the other: give each "
                                   "output its own file name\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        ["same.png", "sub", "ten.yaml"] if existing else ["sub", "ten.yaml"])


def test_a_trace_no_job_of_which_fits_is_refused(tmp_path: Path, no_replay: list[object],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A replay with nothing to run printed an avg JCT of 0.0 and exit 0; as for a trace
    without jobs, one line and exit 2 (a trace with some jobs that fit replays those)."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\na,8,0,5\nb,16,0,5\n")
    rc = main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4"])
    assert (rc, no_replay) == (2, [])
    assert capsys.readouterr() == ("", f"dlprio: {trace}: no job of the trace fits the cluster "
                                   "(1 × 4 GPUs): the smallest asks for 8 GPUs; give a larger "
                                   "cluster\n")


@pytest.mark.parametrize(("option", "name", "message"), [
    ("--jobs-csv", "", "is a directory; give a file name"),
    ("--plot", "", "is a directory; give a file name"),
    ("--plot", "cdf.txt", "unknown figure format 'txt'; use one of .avif, .eps"),
])
def test_output_that_cannot_be_written_fails_before_the_replay(
        option: str, name: str, message: str, tmp_path: Path, no_replay: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / name if name else tmp_path
    rc = main(["simulate", "--trace", SIXTY, *N2G4, option, str(target)])
    err = capsys.readouterr().err
    assert (rc, no_replay) == (2, [])
    assert err.startswith(f"dlprio: {option} {target}: {message}") and err.count("\n") == 1


def test_plot_in_another_format_is_that_format(tmp_path: Path) -> None:
    target = tmp_path / "cdf.svg"
    assert main(["simulate", "--trace", SIXTY, *N2G4, "--policy", "fifo", "--plot", str(target)]) == 0
    assert target.read_text().lstrip().startswith(("<?xml", "<svg"))


@pytest.mark.parametrize(("compare", "message"), [
    ("fifo,fifo", "--compare: fifo given more than once; each policy runs once"),
    ("fifo,srtf,srtf,fifo", "--compare: fifo, srtf given more than once"),
    ("fifo,,srtf", "--compare 'fifo,,srtf': an empty policy name between commas"),
])
def test_compare_with_a_repeated_or_empty_name_is_refused(
        compare: str, message: str, no_replay: list[object],
        capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", SIXTY, *N2G4, "--compare", compare])
    err = capsys.readouterr().err
    assert (rc, no_replay) == (2, []) and err.startswith("dlprio: " + message), err


@pytest.mark.parametrize("policies", [["--policy", "fifo"], ["--compare", "srtf,las"]])
def test_thresholds_for_policies_without_gpu_s_queues_are_refused(
        policies: list[str], no_replay: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", SIXTY, *N2G4, *policies, "--thresholds", "100,200"])
    err = capsys.readouterr().err
    assert (rc, no_replay) == (2, [])
    assert err.startswith("dlprio: --thresholds (GPU·s) only applies to tiresias-gittins and "
                          "tiresias-las (running "), err


def test_thresholds_with_a_2d_policy_among_others_are_taken(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--trace", SIXTY, *N2G4, "--compare", "fifo,tiresias-las",
               "--thresholds", "100,200", "--json"])
    assert rc == 0 and [s["policy"] for s in json.loads(capsys.readouterr().out)] == [
        "fifo", "tiresias-las", "fifo-fit"]   # fifo-fit: the baseline of the comparison


@pytest.mark.parametrize(("row", "message"), [
    ("1,1,0,1e300", "t.csv:2: duration must be at most 1,000,000,000, got '1e300'"),
    ("1,1e12,0,10", "t.csv:2: num_gpu must be at most 102,400,000, got '1e12'"),
    ("1,1,1e300,10", "t.csv:2: submit_time must be at most 100,000,000,000, got '1e300'"),
])
def test_trace_value_beyond_any_cluster_or_clock_names_the_cell(
        row: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration\n" + row + "\n")
    rc = main(["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "4"])
    assert (rc, capsys.readouterr().err) == (2, f"dlprio: {tmp_path}/{message}\n")


def test_cluster_spec_with_a_second_row_is_refused(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "c.csv"
    spec.write_text((TIRESIAS / "n2g4.csv").read_text().rstrip("\n") + "\n1,4,8,64,2\n")
    rc = main(["simulate", "--trace", SIXTY, "--cluster", str(spec)])
    assert (rc, capsys.readouterr().err) == (
        2, f"dlprio: {spec}:3: a cluster spec has one row under the header (one cluster); "
        "remove the others\n")


def test_plot_queue_axis_ends_with_the_last_wait_and_coinciding_lines_stay_visible(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # two 8-GPU nodes: jobs 0 and 1 (1 h) at 0, job 2 60 s later waits until 1 h; jobs 3
    # (100 h) and 4 (50 h) arrive at 2 h and run side by side, job 4's end is decided at 52 h;
    # fifo and fifo-fit give the same schedule
    trace = tmp_path / "long.csv"
    trace.write_text("u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"
                     "0,1,8,0,1,0,3600,0,Pass\n1,1,8,0,1,0,3600,0,Pass\n2,1,8,0,1,60,3600,0,Pass\n"
                     "3,1,8,0,1,7140,360000,0,Pass\n4,1,8,0,1,0,180000,0,Pass\n")
    figures: list = []
    from matplotlib.figure import Figure
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: figures.append(self))
    rc = main(["simulate", "--trace", str(trace), "--nodes", "2", "--gpus-per-node", "8",
               "--compare", "fifo,fifo-fit", "--zero-cost", "--plot", str(tmp_path / "q.png")])
    assert rc == 0, capsys.readouterr().err
    cdf, queue, windows = figures[0].axes
    # the per-window panel: fifo's one window (5 jobs) at its first submit, 0 h, ratio 1 to
    # fifo-fit; the baseline is the line at 1.0
    ratio, one = windows.get_lines()
    assert ratio.get_label() == "fifo" and list(ratio.get_xydata().ravel()) == [0.0, 1.0]
    assert one.get_label() == "fifo-fit (baseline)" and list(one.get_ydata()) == [1.0, 1.0]
    assert windows.get_yscale() == "log"
    # the last arrival (2 h) with 5 % to spare, not the last decision (52 h) or job end (102 h)
    assert queue.get_xlim() == pytest.approx((0.0, 2.1))
    for ax in (cdf, queue):
        fifo, fit = ax.get_lines()
        assert [line.get_label() for line in (fifo, fit)] == ["fifo", "fifo-fit"]
        assert list(fifo.get_xydata().ravel()) == list(fit.get_xydata().ravel())  # they coincide
        assert (fifo.get_linestyle(), fit.get_linestyle()) == ("-", "--")
        assert (fifo.get_marker(), fit.get_marker()) == ("o", "s")
        # the second is thinner and drawn above the first, so both show
        assert fit.get_zorder() > fifo.get_zorder() and fit.get_linewidth() < fifo.get_linewidth()


def test_an_average_over_no_production_job_is_null_not_zero(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # every job opportunistic, 2 GPUs: a (0.5 GPU, 100 s) and b (1 GPU, 50 s from 20) run at
    # once and end at 100 and 70 (JCTs 100 and 50): there is no production job to average
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,num_gpu,submit_time,duration,opportunistic\n"
                     "a,0.5,0,100,1\nb,1,20,50,1\n")
    cluster = ["--nodes", "1", "--gpus-per-node", "2", "--policy", "las"]
    assert main(["simulate", "--trace", str(trace), *cluster, "--json"]) == 0
    (out,) = json.loads(capsys.readouterr().out)
    assert (out["production_jobs"], out["production_avg_jct_s"]) == (0, None)
    assert (out["opportunistic_jobs"], out["opportunistic_avg_jct_s"]) == (2, 75.0)
    assert main(["simulate", "--trace", str(trace), *cluster]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("GPU sharing:"))
    assert lines[at + 2].split()[:6] == ["las", "0", "-", "75.0", "2", "75.0"]
