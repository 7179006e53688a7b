"""The root filesystem of another Slurm release (slurm_plugin/localcluster/rootfs.py), pure: os-release and
apt source texts, the mmdebstrap command, and the wrapper scripts run against a fake root whose
loader and unshare(1) print their argv."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hostile import HOSTILE, HOSTILE_IDS
from slurm_plugin.localcluster import rootfs

DEBIAN_12 = '''PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
'''
DEBIAN_13 = '''PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
NAME="Debian GNU/Linux"
VERSION_ID="13"
VERSION="13 (trixie)"
ID=debian
'''
UBUNTU = '''PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
ID=ubuntu
ID_LIKE=debian
'''


@pytest.mark.parametrize("text,release", [
    (DEBIAN_12, "22.05"),
    (DEBIAN_13, "24.11"),
    ("ID=debian\nVERSION_ID=12\n", "22.05"),             # unquoted
    ("ID='debian'\nVERSION_ID='13'\n", "24.11"),         # single quotes (os-release(5) allows them)
    ('ID="debian"\nVERSION_ID="12"\n', "22.05"),
    ("# a comment\n\nID=debian\nVERSION_ID=13\n", "24.11"),
    (UBUNTU, None),
    ("ID=debian\nVERSION_ID=11\n", None),                 # bullseye: no release declared
    ("ID=debian\n", None),                                # sid has no VERSION_ID
    ("", None),
], ids=["debian12", "debian13", "unquoted", "single-quoted", "double-quoted", "comment",
        "ubuntu", "debian11", "sid", "empty"])
def test_host_release_from_os_release(text: str, release: str | None) -> None:
    assert rootfs.host_release(text) == release


@pytest.mark.parametrize("sources,url", [
    ({"/etc/apt/sources.list.d/debian.sources":
      "Types: deb\nURIs: http://ftp.fr.debian.org/debian\nSuites: bookworm bookworm-updates\n"
      "Components: main\n\n"
      "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"},
     "http://ftp.fr.debian.org/debian"),
    ({"/etc/apt/sources.list.d/debian.sources":
      "Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: bookworm-security\n\n"
      "Types: deb\nURIs: http://mirror.example.org/debian\nSuites: bookworm\n"},
     "http://mirror.example.org/debian"),
    ({"/etc/apt/sources.list":
      "# deb http://commented.example.org/debian bookworm main\n"
      "deb http://security.debian.org/debian-security bookworm-security main\n"
      "deb-src http://src.example.org/debian bookworm main\n"
      "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://one.example.org/debian bookworm main\n"},
     "http://one.example.org/debian"),
    # sources.list sorts before sources.list.d/*
    ({"/etc/apt/sources.list.d/z.list": "deb http://later.example.org/debian bookworm main\n",
      "/etc/apt/sources.list": "deb http://first.example.org/debian bookworm main\n"},
     "http://first.example.org/debian"),
    # a URIs: line counts only in a .sources file
    ({"/etc/apt/sources.list": "URIs: http://not-deb822.example.org/debian\n"},
     "http://deb.debian.org/debian"),
    ({"/etc/apt/sources.list": "deb http://security.debian.org/debian-security bookworm-security main\n"},
     "http://deb.debian.org/debian"),
    ({}, "http://deb.debian.org/debian"),
], ids=["deb822", "deb822-security-first", "one-line", "order", "uris-in-list", "security-only",
        "none"])
def test_mirror_is_the_first_archive_that_is_not_security(sources: dict[str, str], url: str) -> None:
    assert rootfs.mirror(sources) == url


def test_mmdebstrap_argv_per_suite() -> None:
    include = "--include=slurm-wlm,slurm-client,slurmdbd,munge,bash,python3,procps"
    assert rootfs.mmdebstrap_argv("24.11", Path("/c/trixie.partial"), "http://m.example/debian") == [
        "mmdebstrap", "--variant=apt", include, "trixie", "/c/trixie.partial", "http://m.example/debian"]
    assert rootfs.mmdebstrap_argv("26.05", Path("/c/sid"), "http://m/debian") == [
        "mmdebstrap", "--variant=apt", include, '--aptopt=Acquire::Check-Valid-Until "false"',
        "sid", "/c/sid", "http://m/debian"]


def test_rootfs_dir_and_plugin_dir() -> None:
    assert rootfs.rootfs_dir("24.11") == Path("/var/cache/dlcluster/rootfs/trixie")
    assert rootfs.rootfs_dir("26.05") == Path("/var/cache/dlcluster/rootfs/sid")
    assert rootfs.plugin_dir(Path("/r/sid")) == "/r/sid/usr/lib/x86_64-linux-gnu/slurm-wlm"


#: prints its arguments, NUL-terminated (a newline in an argument stays visible)
PRINT_ARGV = "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done\n"


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _run(script: Path, args: list[str], env: dict[str, str] | None = None) -> list[str]:
    out = subprocess.run([str(script), *args], capture_output=True, check=True, timeout=30,
                         env=env).stdout.decode()
    assert out.endswith("\0") or out == ""
    return out.split("\0")[:-1]


ROOTS = ["root", "with space", "it's \"quoted\"", "new\nline", "$(touch pwned)"]
ROOT_IDS = ["plain", "space", "quotes", "newline", "cmdsubst"]


@pytest.fixture(params=ROOTS, ids=ROOT_IDS)
def fake_root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A root filesystem whose dynamic loader prints its argv."""
    root = tmp_path / request.param / "trixie"
    _executable(root / rootfs.LOADER, PRINT_ARGV)
    return root


@pytest.mark.parametrize("arg", HOSTILE, ids=HOSTILE_IDS)
def test_command_wrapper_runs_the_release_binary_with_its_loader(
        fake_root: Path, tmp_path: Path, arg: str) -> None:
    wrapper = _executable(tmp_path / "bin/squeue", rootfs.wrapper_text(fake_root, "squeue"))
    r = str(fake_root)
    assert _run(wrapper, ["--me", arg, "", "*"]) == [
        "--library-path",
        f"{r}/usr/lib/x86_64-linux-gnu/slurm-wlm:{r}/usr/lib/x86_64-linux-gnu:{r}/lib/x86_64-linux-gnu",
        "--argv0", "squeue", f"{r}/usr/bin/squeue",
        "--me", arg, "", "*"]
    assert not (Path.cwd() / "pwned").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("arg", HOSTILE, ids=HOSTILE_IDS)
def test_daemon_wrapper_runs_chroot_sh_in_a_private_mount_namespace(
        fake_root: Path, tmp_path: Path, arg: str) -> None:
    stubs = tmp_path / "stubs"
    _executable(stubs / "unshare", PRINT_ARGV)
    conf, script = tmp_path / "etc slurm-x", tmp_path / "prov's/chroot.sh"
    wrapper = _executable(tmp_path / "bin/slurmd",
                          rootfs.daemon_wrapper_text(fake_root, conf, script, "slurmd"))
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}
    assert _run(wrapper, ["-C", arg], env) == [
        "-m", "bash", str(script), str(fake_root), str(conf), "/usr/sbin/slurmd", "-C", arg]


def test_a_newline_in_the_root_stays_inside_the_comment() -> None:
    text = rootfs.wrapper_text(Path("/a\nb"), "sbatch")
    assert text.splitlines()[:2] == ["#!/bin/sh", "# sbatch of the Slurm release in '/a\\nb' (written by dlcluster up)"]


def test_finish_links_the_roots_own_path_to_slash_and_writes_the_marker_last(tmp_path: Path) -> None:
    root = tmp_path / "cache" / "trixie"
    root.mkdir(parents=True)
    assert not rootfs.ready(root)
    rootfs.finish(root, "24.11")
    link = Path(f"{root}{root}")
    assert os.readlink(link) == "/"
    assert (root / ".dlcluster-rootfs").read_text() == "slurm 24.11, suite trixie\n"
    assert rootfs.ready(root)
    # the path under the root filesystem resolves to the root filesystem itself (host view)
    assert (link / str(root).lstrip("/") / ".dlcluster-rootfs").is_file()
    # again (a rebuilt one): the link is replaced, not nested
    rootfs.finish(root, "24.11")
    assert os.readlink(link) == "/"


def test_ready_needs_the_marker_file(tmp_path: Path) -> None:
    assert not rootfs.ready(tmp_path / "absent")
    (tmp_path / ".dlcluster-rootfs").mkdir()
    assert not rootfs.ready(tmp_path)
