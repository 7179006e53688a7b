"""dlsubmit with several specs: stdout is one record per spec, in spec order, printed as each is
done (not after the whole batch), and a SIGINT/SIGTERM stops submitting cleanly (exit 130/143,
submitted ids and unsubmitted specs reported, no traceback).

The Slurm door (``cli._submit``) is replaced: the point is what dlsubmit does around sbatch
(ordering, a refusal among good specs, a signal in the middle), which a live cluster cannot
provoke on cue. Live submission is in tests/live/test_submit_live.py.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from slurm_plugin.slurm.client import SlurmRefused, SlurmUnreachable
from submit import cli
from submit_helpers import v2_spec


def specs(tmp_path: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        p = tmp_path / f"s{i}.yaml"
        p.write_text(yaml.safe_dump(v2_spec(f"s{i}")))
        out.append(str(p))
    return out


def job_name(script: str) -> str:
    return script.split("--job-name=", 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_submitting_and_reports_what_was_submitted(
        sig: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    paths = specs(tmp_path, 40)
    submitted: dict[str, int] = {}
    ids = itertools.count(1000)
    lock = threading.Lock()

    def submit(script: str, *a: object) -> int:
        with lock:
            submitted[job_name(script)] = job_id = next(ids)
            if len(submitted) == 6:
                os.kill(os.getpid(), sig)  # as `kill` or Ctrl-C would, mid-batch
                stop = signal.getsignal(sig).__self__  # dlsubmit's handler: wait until it ran
                deadline = time.monotonic() + 5
                while not stop.signum and time.monotonic() < deadline:
                    time.sleep(0.001)
        time.sleep(0.02)  # sbatch takes a while (and lets go of the GIL meanwhile)
        return job_id

    monkeypatch.setattr(cli, "_submit", submit)
    rc = cli.main(paths)
    out, err = capsys.readouterr()
    assert rc == 128 + sig
    assert "Traceback" not in err
    lines = out.splitlines()
    assert len(lines) == 40  # one record per spec, in spec order
    got = {f"s{i}": int(line) for i, line in enumerate(lines) if line != cli.NO_JOB}
    assert got == submitted  # every queued job is reported under its own spec, nothing more
    # submitting stopped: only the calls already past the check (other threads) still ran
    assert 6 <= len(got) <= 6 + cli.SUBMIT_THREADS - 1
    missed = [p for i, p in enumerate(paths) if f"s{i}" not in got]
    [summary] = err.strip().splitlines()  # one summary line, not one line per unsubmitted spec
    assert summary.startswith(f"dlsubmit: interrupted by {signal.Signals(sig).name}: {len(got)} of 40")
    assert summary.endswith("not submitted: " + ", ".join(missed))


def test_ids_print_as_they_are_submitted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Spec k's sbatch starts only after spec k-2*SUBMIT_THREADS's id is printed: with every
    result collected first (the old way) this would wait forever (here: 5 s, then fail)."""
    n, lag = 20, 2 * cli.SUBMIT_THREADS
    printed = [threading.Event() for _ in range(n)]
    late: list[int] = []
    real_record = cli._record

    def record(path: str, *a: object) -> str:
        printed[int(Path(path).stem[1:])].set()
        return real_record(path, *a)  # type: ignore[arg-type]

    def submit(script: str, *a: object) -> int:
        k = int(job_name(script)[1:])
        if k >= lag and not printed[k - lag].wait(5):
            late.append(k)
        return 100 + k

    monkeypatch.setattr(cli, "_record", record)
    monkeypatch.setattr(cli, "_submit", submit)
    rc = cli.main(specs(tmp_path, n))
    out, _ = capsys.readouterr()
    assert (rc, late) == (0, [])
    assert out.splitlines() == [str(100 + k) for k in range(n)]


@pytest.mark.parametrize("as_json", [False, True])
def test_a_refused_spec_keeps_its_line(as_json: bool, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    a, vc, b = specs(tmp_path, 3)

    def submit(script: str, *a: object) -> int:
        if job_name(script) == "s1":
            raise SlurmRefused(["sbatch"], "sbatch: error: invalid partition specified: nope")
        return 7

    monkeypatch.setattr(cli, "_submit", submit)
    rc = cli.main(["--json", a, vc, b] if as_json else [a, vc, b])
    out, err = capsys.readouterr()
    assert rc == 4   # Exit.SLURM_REFUSED
    assert err == (f"dlsubmit: {vc}: Slurm refused the job: sbatch: error: invalid partition "
                   "specified: nope\n")
    if not as_json:
        assert out == "7\n-\n7\n"
        return
    docs = [json.loads(line) for line in out.splitlines()]
    assert [(d["spec"], d["job_id"]) for d in docs] == [(a, 7), (vc, None), (b, 7)]
    assert docs[1]["error"].startswith("Slurm refused the job: ") and docs[0]["error"] is None
    # a single refused spec still has its record
    rc = cli.main(["--json", vc])
    out, _ = capsys.readouterr()
    assert rc == 4 and json.loads(out)["job_id"] is None and json.loads(out)["spec"] == vc


@pytest.mark.parametrize("name,ok", [("L" * 1024, True), ("L" * 1025, False),
                                     ("名" * 341, True), ("名" * 342, False)])
def test_job_name_is_checked_in_utf8_bytes(name: str, ok: bool, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Slurm's limit is 1024 bytes (job_mgr.c _test_job_desc_fields); '名' is 3 bytes."""
    p = tmp_path / "long.yaml"
    p.write_text(yaml.safe_dump(v2_spec(name), allow_unicode=True), encoding="utf-8")
    rc = cli.main(["--dry-run", str(p)])
    err = capsys.readouterr().err
    assert (rc == 0) == ok
    if not ok:
        assert rc == 2 and err.startswith("dlsubmit: name (v1: jobName): ")


def test_a_script_over_slurms_size_limit_is_refused_before_anything_is_submitted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    [ok] = specs(tmp_path, 1)
    spec = v2_spec("big")   # 48 roles of 110,000-byte commands: each within Linux's one-argument limit
    main = spec["taskRoles"].pop("main")
    for i in range(48):
        spec["taskRoles"][f"r{i}"] = {**main, "commands": ["echo " + "x" * 110_000]}
    big = tmp_path / "big.yaml"
    big.write_text(yaml.safe_dump(spec))
    rc = cli.main([ok, str(big)])
    out, err = capsys.readouterr()
    assert (rc, out, calls) == (2, "", [])
    assert err.startswith(f"dlsubmit: {big}: taskRoles.*.commands: the batch script would be ")
    assert "at most 4194304 (max_script_size" in err
    site = tmp_path / "site.yaml"  # a site that raised the limit says so
    site.write_text("max_script_size: 8388608\n")
    assert cli.main(["--dry-run", "--site-config", str(site), str(big)]) == 0


@pytest.mark.parametrize("flag", ["--secrets", "--site-config", "--checkpoint-root", "--output",
                                  "--partition", "--account", "--qos", "--gpu-type", "--signal"])
def test_an_empty_option_value_is_an_error(flag: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    [spec] = specs(tmp_path, 1)
    rc = cli.main(["--dry-run", f"{flag}=", spec])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err == f"dlsubmit: {flag}: empty value; give a value or leave the option out\n"


def test_an_empty_dlsubmit_config_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    [spec] = specs(tmp_path, 1)
    monkeypatch.setenv("DLSUBMIT_CONFIG", "")
    assert cli.main(["--dry-run", spec]) == 2
    assert capsys.readouterr().err == ("dlsubmit: DLSUBMIT_CONFIG: empty; name a site config file "
                                       "or unset it\n")


@pytest.mark.parametrize("flag", ["--partition", "--gpu-type", "--account", "--qos"])
@pytest.mark.parametrize("value", ["--", "-x", "-"])
def test_a_slurm_name_may_not_start_with_a_dash(flag: str, value: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    [spec] = specs(tmp_path, 1)
    assert cli.main(["--dry-run", f"{flag}={value}", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlsubmit: {flag} {value!r}: must be a Slurm name") and "not starting with -" in err
    site = tmp_path / "site.yaml"
    key = flag[2:].replace("-", "_")
    site.write_text(yaml.safe_dump({key: value}))
    assert cli.main(["--dry-run", "--site-config", str(site), spec]) == 2
    assert capsys.readouterr().err.startswith(f"dlsubmit: {site}: {key} {value!r}: must be a Slurm name")
    if key != "gpu_type":
        site.write_text(yaml.safe_dump({"virtual_clusters": {"vc": {key: value}}}))
        assert cli.main(["--dry-run", "--site-config", str(site), spec]) == 2
        assert f"virtual_clusters.vc.{key} {value!r}: must be a Slurm name" in capsys.readouterr().err
    else:
        p = tmp_path / "g.yaml"
        p.write_text(yaml.safe_dump(v2_spec("g", extras={"gpuType": value})))
        assert cli.main(["--dry-run", str(p)]) == 2
        assert "extras.gpuType" in capsys.readouterr().err


def _fifo(tmp_path: Path) -> str:
    p = tmp_path / "fifo.yaml"
    os.mkfifo(p)
    return str(p)


@pytest.mark.parametrize("make,kind", [(lambda t: "/dev/zero", "a device"),
                                       (lambda t: "/dev/urandom", "a device"),
                                       (_fifo, "a FIFO"), (lambda t: str(t), "a directory")])
@pytest.mark.parametrize("where", ["spec", "--site-config", "--secrets"])
def test_a_file_that_is_not_regular_is_refused_at_once(make: object, kind: str, where: str,
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/zero, a FIFO or /dev/urandom (read, each would grow or hang without end) is
    refused without reading."""
    bad = make(tmp_path)  # type: ignore[operator]
    [ok] = specs(tmp_path, 1)
    argv = {"spec": ["--dry-run", bad], "--site-config": ["--dry-run", "--site-config", bad, ok],
            "--secrets": ["--dry-run", "--secrets", bad, ok]}[where]
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err.count("\n") == 1 and f"{bad}: cannot read: {kind}; give a regular file" in err


def test_a_spec_over_the_size_limit_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from submit.files import MAX_SPEC_BYTES

    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_SPEC_BYTES + b"\n")
    assert cli.main(["--dry-run", str(big)]) == 2
    assert capsys.readouterr().err == (f"dlsubmit: {big}: larger than {MAX_SPEC_BYTES} bytes "
                                       "(8 MiB), the most dlsubmit reads\n")


def test_file_errors_name_the_file_once_on_one_line(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    [ok] = specs(tmp_path, 1)
    d = tmp_path / "dir"
    d.mkdir()
    odd = tmp_path / "a\nb.yaml"  # missing, with a newline in its name
    assert cli.main(["--dry-run", ok, str(d), str(odd)]) == 2
    assert capsys.readouterr().err == (
        f"dlsubmit: {d}: cannot read: a directory; give a regular file\n"
        f"dlsubmit: {tmp_path}/a\\nb.yaml: cannot read: No such file or directory\n")


def test_a_parameter_given_twice_is_an_error(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(v2_spec("p", parameters={"lr": "0.1"})))
    assert cli.main(["--dry-run", "--param", "lr=0.5", "--param", "lr=0.7", "--param", "lr=0.9", str(p)]) == 2
    assert capsys.readouterr().err == "dlsubmit: --param lr: given more than once; give each parameter once\n"
    assert cli.main(["--dry-run", "--param", "lr=0.5", str(p)]) == 0


def test_a_signal_during_validation_submits_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from submit import load

    calls: list[str] = []
    real_load = load.load

    def slow_load(path: str, *a: object) -> object:
        if path.endswith("s3.yaml"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)  # the handler interrupts this
        return real_load(path, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(load, "load", slow_load)
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    rc = cli.main(specs(tmp_path, 6))
    out, err = capsys.readouterr()
    assert (rc, out, calls) == (130, "", [])
    assert err == "dlsubmit: interrupted by SIGINT before anything was submitted\n"


def test_an_sbatch_killed_by_the_interrupt_is_looked_up(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C reaches the whole process group; if an sbatch dies of it after slurmctld queued the
    job, the job is found by its token and reported under its spec."""
    tokens: dict[str, str] = {}

    def submit(script: str, extra: list[str], env: object) -> int:
        name = job_name(script)
        tokens[extra[0].rsplit(cli.TOKEN_PREFIX, 1)[1]] = name
        if name == "s0":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
            raise SlurmRefused(["sbatch"], "sbatch: interrupted")
        time.sleep(0.2)
        return 500

    monkeypatch.setattr(cli, "_submit", submit)
    monkeypatch.setattr(cli, "_find", lambda token: [900] if tokens[token.split("=")[1]] == "s0" else [])
    rc = cli.main(specs(tmp_path, 12))
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert rc == 143 and lines[0] == "900" and len(lines) == 12
    assert set(lines[1:cli.SUBMIT_THREADS]) <= {"500", cli.NO_JOB}  # started alongside s0, or not
    assert set(lines[cli.SUBMIT_THREADS:]) == {cli.NO_JOB}


@pytest.mark.parametrize("key", ["checkpoint_root", "output", "partition", "account", "qos", "gpu_type"])
def test_an_empty_site_config_value_is_an_error(key: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    [spec] = specs(tmp_path, 1)
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({key: ""}))
    assert cli.main(["--dry-run", "--site-config", str(site), spec]) == 2
    assert capsys.readouterr().err.startswith(f"dlsubmit: {site}: {key} '': must ")


@pytest.mark.parametrize("instances,site,ok", [(1001, None, True), (1002, None, False),
                                               (1002, 2000, True), (5, 5, True), (6, 5, False)])
def test_a_job_array_over_max_array_size_is_refused(instances: int, site: int | None, ok: bool,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """gangAllocation false: one array element per instance; Slurm's MaxArraySize (default
    1001: indexes 0..1000) bounds it (slurm.conf(5))."""
    spec = v2_spec("arr", extras={"gangAllocation": False})
    spec["taskRoles"]["main"]["instances"] = instances
    p = tmp_path / "arr.yaml"
    p.write_text(yaml.safe_dump(spec))
    argv = ["--dry-run", str(p)]
    if site is not None:
        (tmp_path / "site.yaml").write_text(f"max_array_size: {site}\n")
        argv += ["--site-config", str(tmp_path / "site.yaml")]
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    if ok:
        assert rc == 0 and f"#SBATCH --array=0-{instances - 1}\n" in out
    else:
        assert rc == 2 and err.startswith(f"dlsubmit: extras.gangAllocation: false makes a job "
                                          f"array of {instances} elements")


@pytest.mark.parametrize(("first", "code"), [("unreachable", 3), ("refused", 4)])
def test_several_failed_specs_exit_with_the_first_ones_code(
        first: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    a, b = specs(tmp_path, 2)
    errors = {"unreachable": SlurmUnreachable(["sbatch"], "Unable to contact slurm controller"),
              "refused": SlurmRefused(["sbatch"], "sbatch: error: invalid partition")}
    second = "refused" if first == "unreachable" else "unreachable"

    def submit(script: str, *_: object) -> int:
        raise errors[first if job_name(script) == "s0" else second]

    monkeypatch.setattr(cli, "_submit", submit)
    assert cli.main([a, b]) == code
    assert capsys.readouterr().out == "-\n-\n"
