"""Tests of main_job.py's guards, run without a cluster: a second run refuses an output
directory that a live run uses (pid files of live processes, the daemon's ledger lock) and
deletes nothing; the pid files go away when the children stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from main_job_helpers import REPO, load_example
from prioritizer.sim import workload
from prioritizer.daemon.lock import LedgerLock

replay = load_example("replay")
main_job = load_example("main_job")


def _earlier_output(out: Path) -> list[Path]:
    """An earlier main-job output (which prepare_out would replace); its files."""
    (out / "logs").mkdir(parents=True)
    files = [out / "main_job.log", out / "ledger.sqlite", out / "logs" / "mj00-u1660-7.out"]
    for f in files:
        f.write_text("kept\n")
    return files


def _fake_program(tmp_path: Path, name: str) -> subprocess.Popen:
    """A live process whose command line is ``python .../<name>``, as ``dlprio`` runs."""
    script = tmp_path / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text("import time\ntime.sleep(60)\n")
    return subprocess.Popen([sys.executable, str(script)])


def _main(out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))       # passes the config check; Slurm is never asked
    return main_job.main(["--out", str(out), "--no-watch"])


@pytest.mark.parametrize("pid_file,program", [("dlprio.pid", "dlprio"), ("dlqueue.pid", "dlqueue"),
                                              ("main_job.pid", "main_job.py")])
def test_live_run_is_refused_and_nothing_deleted(pid_file: str, program: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    files = _earlier_output(out)
    proc = _fake_program(tmp_path, program)
    try:
        (out / pid_file).write_text(f"{proc.pid}\n")
        assert _main(out, tmp_path, monkeypatch) == 2
    finally:
        proc.kill()
        proc.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pid {proc.pid}" in err[0] and program in err[0]
    assert all(f.read_text() == "kept\n" for f in files)


def test_held_ledger_lock_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    files = _earlier_output(out)
    with LedgerLock(out / "ledger.sqlite"):
        assert _main(out, tmp_path, monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ledger.sqlite.lock" in err[0]
    assert all(f.read_text() == "kept\n" for f in files)


def test_stale_pid_files_and_free_lock_do_not_block(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _earlier_output(out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (out / "dlprio.pid").write_text(f"{dead.pid}\n")            # no such process now
    other = _fake_program(tmp_path, "sleeper")                     # alive, but not dlqueue
    try:
        (out / "dlqueue.pid").write_text(f"{other.pid}\n")
        (out / "main_job.pid").write_text("garbage\n")
        with LedgerLock(out / "ledger.sqlite"):
            pass                                                   # lock file left, not held
        main_job.check_not_running(out)                            # raises nothing
    finally:
        other.kill()
        other.wait()


def test_child_removes_its_pid_file_when_stopped(tmp_path: Path) -> None:
    pid_path = tmp_path / "dlprio.pid"
    child = replay.Child([sys.executable, "-c", "import time; time.sleep(60)"], None, pid_path)
    assert pid_path.read_text() == f"{child.proc.pid}\n"
    assert child.stop(timeout_s=5) == -15                          # SIGTERM
    assert not pid_path.exists()


@pytest.mark.parametrize(("text", "needle"), [
    ("policy:\n  polcy: tiresias-las\n", "polcy"),                 # misspelt policy key
    ("intervl_s: 2\n", "intervl_s: unknown key"),                   # misspelt top-level key
    ("policy: [\n", "YAML syntax error: while parsing a flow node expected the node content"),
], ids=["policy-key", "top-key", "yaml"])
def test_bad_config_is_refused_before_the_output_is_touched(text: str, needle: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    files = _earlier_output(out)
    config = tmp_path / "my-dlprio.yaml"
    config.write_text(text)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert main_job.main(["--out", str(out), "--config", str(config), "--no-watch"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and captured.out == ""                     # said once
    assert f"--config {config}:" in err[0] and needle in err[0]      # the user's file, not a copy
    assert "dlprio.yaml" not in err[0].replace("my-dlprio.yaml", "")
    assert all(f.read_text() == "kept\n" for f in files)            # earlier results kept
    assert not (out / "dlprio.yaml").exists()


def test_missing_config_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=none\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    missing = tmp_path / "nope.yaml"
    assert main_job.main(["--out", str(tmp_path / "out"), "--config", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--config {missing}: cannot read" in err[0]
    assert not (tmp_path / "out").exists()


def _demo_copy(tmp_path: Path, with_venv: bool) -> Path:
    """demo.sh in a scratch tree whose scripts/setup.sh only leaves a marker and fails."""
    root = tmp_path / "tree"
    (root / "scripts").mkdir(parents=True)
    (root / "demo.sh").write_bytes((REPO / "demo.sh").read_bytes())
    (root / "demo.sh").chmod(0o755)
    (root / "scripts" / "setup.sh").write_text("#!/bin/sh\ntouch \"$(dirname \"$0\")/../setup-ran\"\nexit 7\n")
    (root / "scripts" / "setup.sh").chmod(0o755)
    (root / "examples").symlink_to(REPO / "examples")
    if with_venv:
        (root / ".venv").symlink_to(sys.prefix)                      # the test's virtualenv
    return root


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_demo_help_skips_setup_when_the_venv_exists(flag: str, tmp_path: Path) -> None:
    root = _demo_copy(tmp_path, with_venv=True)
    proc = subprocess.run(["bash", str(root / "demo.sh"), "--jobs", "6", flag],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: main_job.py") and "--workloads" in proc.stdout
    assert not (root / "setup-ran").exists()


def test_demo_ddp_help_prints_the_ddp_demos_options_without_setup(tmp_path: Path) -> None:
    root = _demo_copy(tmp_path, with_venv=True)
    proc = subprocess.run(["bash", str(root / "demo.sh"), "--ddp", "--help"],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ddp_demo.py") and "--keep" in proc.stdout
    assert not (root / "setup-ran").exists()


def test_demo_runs_setup_first_otherwise(tmp_path: Path) -> None:
    for with_venv, argv in ((False, ["--help"]), (True, ["--jobs", "6"])):
        root = _demo_copy(tmp_path / str(with_venv), with_venv=with_venv)
        proc = subprocess.run(["bash", str(root / "demo.sh"), *argv],
                              capture_output=True, text=True, check=False, timeout=60)
        assert proc.returncode == 7 and (root / "setup-ran").exists()   # set -e stops at setup


def test_snapshot_goes_where_dlqueue_looks_on_the_default_cluster(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    no_site = str(tmp_path / "no-dlprio.yaml")
    for conf in (None, "/etc/slurm/slurm.conf", "/etc/slurm/../slurm/slurm.conf"):
        if conf is None:
            monkeypatch.delenv("SLURM_CONF", raising=False)
        else:
            monkeypatch.setenv("SLURM_CONF", conf)
        assert main_job.snapshot_path(out, no_site) == Path("/var/lib/dlprio/snapshot.json"), conf
    site = tmp_path / "dlprio.yaml"                       # a site config: dlqueue reads its path
    site.write_text("snapshot_path: /srv/dlprio/snap.json\n")
    assert main_job.snapshot_path(out, str(site)) == Path("/srv/dlprio/snap.json")


def test_snapshot_stays_in_out_on_another_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/slurm.conf")
    replay.env_for_cluster("fix1")                        # what --cluster-name fix1 does
    assert main_job.snapshot_path(tmp_path, str(tmp_path / "none")) == tmp_path / "snapshot.json"
    cfg = yaml.safe_load(replay.daemon_config(REPO / "examples" / "dlprio-demo.yaml", tmp_path,
                                              Path("/var/lib/dlprio/snapshot.json")).read_text())
    assert cfg["snapshot_path"] == "/var/lib/dlprio/snapshot.json"
    assert cfg["ledger_path"] == str(tmp_path / "ledger.sqlite")   # the ledger stays in out


def test_queue_view_pid_file_is_in_out_not_beside_the_snapshot(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    monkeypatch.setattr(replay, "Child", lambda argv, log, pid: seen.update(argv=argv, pid=pid))
    replay.start_queue_view(Path("/var/lib/dlprio/snapshot.json"), 2.0, tmp_path)
    assert seen["pid"] == tmp_path / "dlqueue.pid"
    assert seen["argv"][-2:] == ["--snapshot", "/var/lib/dlprio/snapshot.json"]


def test_plain_jobs_6_is_the_short_form_of_both_workloads() -> None:
    parse = main_job.build_parser().parse_args
    burst, mixed = main_job.load_jobs(parse(["--jobs", "6"]))
    assert (burst.key, mixed.key) == ("burst", "mixed")
    assert len(burst.jobs) == len(mixed.jobs) == 6
    assert f"from u_id {burst.jobs[0].name} " in burst.chosen
    # one time factor: 6 jobs put the 90th-percentile (here the longest) job at 20 s, and every
    # job above the 2 s floor keeps its trace duration / k (rounded to whole seconds)
    for load in (burst, mixed):
        assert max(j.duration_s for j in load.jobs) == 20
        for j in load.jobs:
            if j.duration_s > 2:
                assert abs(j.duration_s - j.trace_duration_s / load.found.k) <= 0.5
    # the mixed workload: the first 6 jobs from day 50 of the trace, whatever they are
    assert mixed.found.window[0].submit >= 50 * 86400 > mixed.found.before[-1].submit
    full = main_job.load_jobs(parse([]))
    assert [len(w.jobs) for w in full] == [12, 40]
    # --start-at keeps the old rule for the burst: the first N jobs from that trace second
    first, = main_job.load_jobs(parse(["--jobs", "6", "--start-at", "4172631",
                                       "--workloads", "burst"]))
    assert [j.name for j in first.jobs] == ["1660", "1661", "1662", "1665", "1664", "1663"]
    assert "from trace second 4172631" in first.chosen


def test_an_unknown_workload_is_a_usage_error() -> None:
    args = main_job.build_parser().parse_args(["--workloads", "burst,other"])
    with pytest.raises(main_job.UsageError, match="--workloads 'burst,other'"):
        main_job.load_jobs(args)


def test_demo_readme_and_doc_give_the_same_times() -> None:
    """demo.sh's header, the README and docs/main_job.md name the same duration for the whole demo
    and for --jobs 6."""
    import re

    demo = (REPO / "demo.sh").read_text()
    readme = (REPO / "README.md").read_text()
    doc = (REPO / "docs" / "main_job.md").read_text()
    whole = re.search(r"About (\d+) minutes\s*#?\s*after installation", demo).group(1)
    short = re.search(r"`\./demo\.sh --jobs 6` \(about (\d+) minutes\)", demo).group(1)
    assert re.search(rf"about {whole} minutes after installation", readme)
    assert re.search(rf"About {whole} minutes after installation", doc)
    assert f"`./demo.sh --jobs 6` is a {short}-minute form" in readme
    assert re.search(rf"`sudo \./demo\.sh --jobs 6`, takes about {short} minutes", doc)
