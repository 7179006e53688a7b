"""slurm_plugin/localcluster/provision/chroot.sh at the shell level: ``mount`` and ``chroot`` are stub scripts
first on PATH that log their arguments, ROOT is a fake root filesystem in tmp_path. Nothing is
mounted; the host's own top-level directories, /run/munge, /run/mysqld, python3.N and account
files decide which binds the script asks for, as they do on a real host."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hostile import HOSTILE, HOSTILE_IDS
from slurm_plugin.localcluster import provision

SCRIPT = provision.SCRIPTS / "chroot.sh"
#: stands in for mount/chroot/unshare: one record per call, the name then each argument
LOG_CALL = "#!/bin/sh\n{ printf '%s\\0' \"${0##*/}\" \"$@\"; printf '\\036'; } >> \"$CALLS\"\n"
#: top-level directories of the operating system, never bound (the root filesystem has its own)
SYSTEM = {"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "lost+found", "proc", "run",
          "sbin", "sys", "usr", "var"}


def _real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _run(tmp_path: Path, root: Path, conf: Path, command: list[str]) -> tuple[subprocess.CompletedProcess,
                                                                             list[list[str]]]:
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in ("mount", "chroot", "unshare"):
        (stubs / name).write_text(LOG_CALL)
        (stubs / name).chmod(0o755)
    calls = tmp_path / "calls"
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "CALLS": str(calls)}
    assert subprocess.run(["/bin/bash", "-c", "command -v mount chroot"], env=env, capture_output=True,
                          text=True).stdout == f"{stubs}/mount\n{stubs}/chroot\n"
    proc = subprocess.run(["/bin/bash", str(SCRIPT), str(root), str(conf), *command], env=env,
                          capture_output=True, text=True, timeout=60)
    records = calls.read_bytes().decode().split("\036")[:-1] if calls.exists() else []
    return proc, [r.split("\0")[:-1] for r in records]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A finished root filesystem (its marker) with the directories a Debian one has."""
    root = tmp_path / "cache it's" / "trixie"
    for sub in ("etc", "usr/bin", "usr/lib", "run", "var/lib"):
        (root / sub).mkdir(parents=True)
    (root / ".dlcluster-rootfs").write_text("slurm 24.11, suite trixie\n")
    return root


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    conf = tmp_path / "etc slurm-s24"
    conf.mkdir()
    return conf


def test_a_root_without_the_marker_is_refused(tmp_path: Path, root: Path, conf: Path) -> None:
    (root / ".dlcluster-rootfs").unlink()
    proc, calls = _run(tmp_path, root, conf, ["/usr/sbin/slurmd"])
    assert proc.returncode == 2
    assert proc.stderr == f"chroot.sh: {root} is not a finished root filesystem\n"
    assert calls == []


def test_binds_the_hosts_data_and_never_its_system(tmp_path: Path, root: Path, conf: Path) -> None:
    proc, calls = _run(tmp_path, root, conf, ["/usr/sbin/slurmctld", "-f", f"{conf}/slurm.conf"])
    assert proc.returncode == 0, proc.stderr
    mounts, last = calls[:-1], calls[-1]
    assert mounts[0] == ["mount", "--make-rprivate", "/"]
    assert mounts[1:4] == [["mount", "--rbind", d, f"{root}{d}"] for d in ("/proc", "/sys", "/dev")]
    r = str(root)
    data = {f"/{d}" for d in os.listdir("/") if not d.startswith(".") and d not in SYSTEM and _real_dir(f"/{d}")}
    assert "/tmp" in data
    fixed = {d for d in ("/var/tmp", "/var/lib/dlcluster", str(conf), "/run/munge", "/run/mysqld")
             if _real_dir(d)}
    assert str(conf) in fixed
    pythons = [f"/usr/bin/{f}" for f in os.listdir("/usr/bin")
               if f.startswith("python3.") and f[8:9].isdigit() and not f.endswith(("-config", "m"))]
    expected = [["mount", "--rbind", d, r + d] for d in ("/proc", "/sys", "/dev", *data, *fixed)]
    expected += [["mount", "--bind", "/run/mysqld", f"{r}/run/mariadbd"]] if _real_dir("/run/mysqld") else []
    expected += [["mount", "--bind", exe, r + exe] for exe in pythons]
    expected += [["mount", "--rbind", f"/usr/lib/{os.path.basename(exe)}", f"{r}/usr/lib/{os.path.basename(exe)}"]
                 for exe in pythons if _real_dir(f"/usr/lib/{os.path.basename(exe)}")]
    # the host's /etc, read-only, where ROOT's account and host files link to
    expected += [["mount", "--bind", "/etc", f"{r}/run/dlcluster-host-etc"],
                 ["mount", "-o", "remount,ro,bind", f"{r}/run/dlcluster-host-etc"]]
    assert sorted(mounts[1:]) == sorted(expected)
    for name in ("passwd", "group", "hosts", "hostname"):
        assert os.readlink(root / "etc" / name) == f"/run/dlcluster-host-etc/{name}"
    sources = {m[2] for m in mounts[1:] if m[1] != "-o"}
    assert not sources & {"/", "/usr", "/var", "/bin", "/lib", "/sbin", "/run", "/usr/bin", "/usr/lib"}
    # the mount points, made inside the root filesystem (a python3.N as an empty file)
    assert (root / "proc").is_dir() and (root / "tmp").is_dir() and Path(f"{root}{conf}").is_dir()
    for exe in pythons:
        assert Path(r + exe).is_file() and Path(r + exe).stat().st_size == 0
    assert last == ["chroot", r, "/usr/sbin/slurmctld", "-f", f"{conf}/slurm.conf"]


@pytest.mark.parametrize("arg", HOSTILE, ids=HOSTILE_IDS)
def test_the_command_and_its_arguments_reach_chroot_unchanged(
        tmp_path: Path, root: Path, conf: Path, arg: str) -> None:
    proc, calls = _run(tmp_path, root, conf, ["/bin/bash", "-c", arg, "", "*"])
    assert proc.returncode == 0, proc.stderr
    assert calls[-1] == ["chroot", str(root), "/bin/bash", "-c", arg, "", "*"]
    assert not (tmp_path / "pwned").exists()
