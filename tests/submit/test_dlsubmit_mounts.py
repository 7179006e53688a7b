"""Directories that reach a container mount list (submit/mounts.py): the checkpoint root and the
submit directory are refused, naming which and why, when the runtime's mount list cannot carry
them; the batch script refuses its final checkpoint dir the same way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from submit import cli, load
from submit.options import RenderOptions
from submit.render import render_sbatch
from test_render_runtime import fake_bin, script_env  # noqa: F401


def spec(tmp_path: Path) -> Path:
    """A v1 spec (v1 names one image for every role)."""
    f = tmp_path / "job.json"
    f.write_text(json.dumps({"jobName": "m", "image": "nvcr.io/nvidia/pytorch:23.10-py3",
                             "taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1,
                                            "memoryMB": 10, "gpuNumber": 0, "command": "true"}]}))
    return f


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    return calls


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(("runtime", "root", "char", "why"), [
    ("pyxis", "/shared/a,b", ",", "separates the entries of --container-mounts"),
    ("pyxis", "/shared/a:b", ":", "separates a mount's source, destination and flags"),
    ("pyxis", "/shared/my ckpt", " ", "separates the fields of enroot's mount list (fstab format)"),
    ("apptainer", "/shared/a,b", ",", "separates the entries of --bind"),
    ("apptainer", "ck:1", ":", "separates a bind's source, destination and options"),
])
def test_a_checkpoint_root_the_mount_list_cannot_carry_is_exit_2(
        runtime: str, root: str, char: str, why: str, tmp_path: Path, submitted: list[str],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rc, out, err = run([str(spec(tmp_path)), "--container-runtime", runtime,
                        f"--checkpoint-root={root}"], capsys)
    assert (rc, out, submitted) == (2, "", [])
    assert err == (f"dlsubmit: checkpoint root (--checkpoint-root, or the site's checkpoint_root) "
                   f"{root!r}: holds {char!r}, which {runtime} cannot mount: {char!r} {why}; "
                   "choose a checkpoint root without it\n")


def test_a_submit_directory_with_a_space_is_exit_2_under_pyxis(
        tmp_path: Path, submitted: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    where = tmp_path / "my jobs"
    where.mkdir()
    monkeypatch.chdir(where)
    rc, out, err = run([str(spec(tmp_path)), "--container-runtime", "pyxis"], capsys)
    assert (rc, out, submitted) == (2, "", [])
    assert err == (f"dlsubmit: submit directory (the checkpoint root 'dl-checkpoints' is relative "
                   f"to it) {str(where)!r}: holds ' ', which pyxis cannot mount: ' ' separates the "
                   "fields of enroot's mount list (fstab format); submit from a directory without "
                   "it, or give an absolute --checkpoint-root\n")


@pytest.mark.parametrize("argv", [
    ["--container-runtime", "apptainer"],                    # a space is one path to --bind
    ["--container-runtime", "pyxis", "--checkpoint-root=/shared/ckpt"],   # absolute: cwd unused
    ["--container-runtime", "none", "--checkpoint-root=/a,b:c"],          # nothing is mounted
])
def test_what_no_mount_list_carries_is_accepted(
        argv: list[str], tmp_path: Path, submitted: list[str],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    where = tmp_path / "my jobs"
    where.mkdir()
    monkeypatch.chdir(where)
    rc, out, err = run([str(spec(tmp_path)), *argv], capsys)
    assert (rc, out, err) == (0, "7\n", "") and len(submitted) == 1


def test_a_role_without_an_image_mounts_nothing(
        tmp_path: Path, submitted: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "job.yaml"
    f.write_text("protocolVersion: 2\nname: n\ntaskRoles:\n  main:\n    resourcePerInstance: "
                 "{cpu: 1, memoryMB: 10, gpu: 0}\n    commands: [\"true\"]\n")
    monkeypatch.chdir(tmp_path)
    rc, out, _ = run([str(f), "--container-runtime", "pyxis", "--checkpoint-root=/a,b"], capsys)
    assert (rc, out) == (0, "7\n")


@pytest.mark.parametrize(("runtime", "what"), [("pyxis", "',', ':' or whitespace"),
                                               ("apptainer", "',' or ':'")])
def test_the_script_refuses_a_submit_dir_the_mount_list_cannot_carry(
        runtime: str, what: str, tmp_path: Path, fake_bin: Path) -> None:  # noqa: F811
    """A --dry-run script submitted by hand from another directory: the batch shell stops before
    any srun, naming the directory."""
    script = render_sbatch(load.load(spec(tmp_path)), RenderOptions(container_runtime=runtime))
    submit_dir = tmp_path / "a,b"
    submit_dir.mkdir()
    env = script_env(tmp_path, fake_bin, extra_env={"SLURM_SUBMIT_DIR": str(submit_dir)})
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60, cwd=submit_dir)
    assert proc.returncode == 1
    assert (f"[dlsubmit] cannot start: {runtime} cannot mount the checkpoint dir "
            f"{submit_dir}/dl-checkpoints/77: it holds {what}, separators of its mount list; "
            "submit from a directory without them or give --checkpoint-root; the payload was "
            "not started") in proc.stdout
    assert not (submit_dir / "dl-checkpoints").exists()


def test_a_checkpoint_root_that_is_a_file_is_exit_2(
        tmp_path: Path, submitted: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dl-checkpoints").write_text("")
    monkeypatch.chdir(tmp_path)
    rc, out, err = run([str(spec(tmp_path))], capsys)
    assert (rc, out, submitted) == (2, "", [])
    assert err == (f"dlsubmit: checkpoint root {str(tmp_path / 'dl-checkpoints')!r}: not a "
                   "directory; the job could not make its checkpoint directory in it; give "
                   "--checkpoint-root DIR, a directory of yours\n")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp every user can reach (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="dl-shared-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d)


def test_another_user_s_checkpoint_root_is_refused_before_submitting(open_dir: Path) -> None:
    """The default root in a submit directory shared by two users: made by the first one's job
    (0755, root's here), the second user's job could not make its directory in it. Checked as
    user nobody (root may write anywhere); a root that does not exist yet is the job's to make."""
    shared = open_dir
    (shared / "dl-checkpoints").mkdir()
    (shared / "dl-checkpoints").chmod(0o755)
    spec(shared).chmod(0o644)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
              sys.executable, "-m", "submit.cli", "job.json", "--dry-run"]
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "HOME": str(shared)}
    proc = subprocess.run(nobody, cwd=shared, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"dlsubmit: checkpoint root {str(shared / 'dl-checkpoints')!r}: not "
                           "writable by you (owner root, mode 0755); the job could not make its "
                           "checkpoint directory in it; give --checkpoint-root DIR, a directory of "
                           "yours, or ask the owner to make it group-writable\n")
    (shared / "dl-checkpoints").rmdir()
    proc = subprocess.run(nobody, cwd=shared, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "#SBATCH" in proc.stdout, proc.stderr
