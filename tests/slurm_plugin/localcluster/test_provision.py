"""dlcluster's provisioning for a Slurm release (slurm_plugin/localcluster/provision.py), pure: the
environment that points commands at a cluster, the files ``up`` writes, the daemons' command
lines, and the root filesystem built once (mmdebstrap replaced by a small script)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from slurm_plugin.localcluster import provision
from slurm_plugin.localcluster import rootfs
from slurm_plugin.localcluster.cluster import ClusterSpec

HOST = ClusterSpec(name="h22", port_base=7000)
S24 = ClusterSpec(name="s24", port_base=7100, slurm="24.11", host_slurm="22.05")
S26 = ClusterSpec(name="s26", port_base=7200, slurm="26.05", host_slurm="22.05", with_dbd=True)


@pytest.mark.parametrize("path,expected", [
    ("/usr/local/bin:/usr/bin:/bin", "/var/lib/dlcluster/s24/bin:/usr/local/bin:/usr/bin:/bin"),
    ("/usr/bin:/var/lib/dlcluster/s24/bin:/bin:/var/lib/dlcluster/s24/bin",
     "/var/lib/dlcluster/s24/bin:/usr/bin:/bin"),
    ("/var/lib/dlcluster/s24/bin", "/var/lib/dlcluster/s24/bin"),
    ("/opt/my bin::/usr/bin", "/var/lib/dlcluster/s24/bin:/opt/my bin:/usr/bin"),
], ids=["absent", "already-twice", "only", "space-and-empty"])
def test_cluster_env_puts_the_wrappers_first_on_path_once(
        monkeypatch: pytest.MonkeyPatch, path: str, expected: str) -> None:
    monkeypatch.setenv("PATH", path)
    assert provision.cluster_env(S24) == {"SLURM_CONF": "/etc/slurm-s24/slurm.conf", "PATH": expected}


def test_cluster_env_without_path_uses_the_default_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PATH")
    assert provision.cluster_env(S24)["PATH"] == "/var/lib/dlcluster/s24/bin:/usr/bin:/bin"


def test_cluster_env_of_the_hosts_release_leaves_path_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin")
    assert provision.cluster_env(HOST) == {"SLURM_CONF": "/etc/slurm-h22/slurm.conf"}
    assert provision.cluster_env(ClusterSpec()) == {"SLURM_CONF": "/etc/slurm/slurm.conf"}


def test_files_of_the_hosts_release_have_no_wrappers_and_no_cgroup_conf() -> None:
    files = provision.desired_files(HOST)
    assert {str(p): mode for p, (_text, mode) in files.items()} == {
        "/etc/slurm-h22/slurm.conf": 0o644, "/etc/slurm-h22/gres.conf": 0o644,
        "/etc/slurm-h22/job_submit.lua": 0o644}


def test_files_of_another_release_add_cgroup_conf_and_executable_wrappers() -> None:
    files = {str(p): (text, mode) for p, (text, mode) in provision.desired_files(S26).items()}
    conf = {p: mode for p, (_t, mode) in files.items() if p.startswith("/etc/")}
    assert conf == {"/etc/slurm-s26/slurm.conf": 0o644, "/etc/slurm-s26/gres.conf": 0o644,
                    "/etc/slurm-s26/job_submit.lua": 0o644, "/etc/slurm-s26/slurmdbd.conf": 0o600,
                    "/etc/slurm-s26/cgroup.conf": 0o644}
    wrappers = {p: mode for p, (_t, mode) in files.items() if not p.startswith("/etc/")}
    names = ["sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "sdiag",
             "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger",
             "slurmctld", "slurmd", "slurmdbd"]
    assert wrappers == {f"/var/lib/dlcluster/s26/bin/{name}": 0o755 for name in names}
    r = "/var/cache/dlcluster/rootfs/sid"
    assert files["/var/lib/dlcluster/s26/bin/sinfo"][0].splitlines()[-1] == (
        f"exec {r}/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path "
        f"{r}/usr/lib/x86_64-linux-gnu/slurm-wlm:{r}/usr/lib/x86_64-linux-gnu:{r}/lib/x86_64-linux-gnu "
        f'--argv0 sinfo {r}/usr/bin/sinfo "$@"')
    assert files["/var/lib/dlcluster/s26/bin/slurmdbd"][0].splitlines()[-1] == (
        f"exec unshare -m bash {provision.SCRIPTS}/chroot.sh {r} /etc/slurm-s26 /usr/sbin/slurmdbd \"$@\"")
    assert "CgroupPlugin=disabled" in files["/etc/slurm-s26/cgroup.conf"][0]
    assert "PluginDir=/var/cache/dlcluster/rootfs/sid/usr/lib/x86_64-linux-gnu/slurm-wlm" in \
        files["/etc/slurm-s26/slurm.conf"][0]


def test_daemon_argv_host_or_chrooted() -> None:
    argv = ["slurmd", "-f", "/etc/slurm-s24/slurm.conf", "-N", "node1"]
    assert provision._daemon_argv(HOST, argv) == ["/usr/sbin/slurmd", "-f", "/etc/slurm-s24/slurm.conf",
                                                  "-N", "node1"]
    assert provision._daemon_argv(S24, argv) == [
        "unshare", "-m", "bash", f"{provision.SCRIPTS}/chroot.sh", "/var/cache/dlcluster/rootfs/trixie",
        "/etc/slurm-s24", "/usr/sbin/slurmd", "-f", "/etc/slurm-s24/slurm.conf", "-N", "node1"]
    assert provision._daemon_argv(S24, ["slurmdbd"])[-1] == "/usr/sbin/slurmdbd"


#: mmdebstrap's stand-in: counts its runs, takes a while, fills TARGET (argv[-2]) or fails
FAKE_MMDEBSTRAP = """
import os, sys, time
count, fail, target = sys.argv[1], sys.argv[2], sys.argv[-2]
with open(count, "a") as f:
    f.write(target + "\\n")
time.sleep(0.3)
if fail:
    sys.exit("E: cannot download packages\\nE: " + fail)
os.makedirs(os.path.join(target, "usr/sbin"))
open(os.path.join(target, "usr/sbin/slurmd"), "w").close()
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Root filesystems under tmp_path/cache, built by FAKE_MMDEBSTRAP; its runs in tmp_path/runs."""
    monkeypatch.setattr(rootfs, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(rootfs, "read_sources", lambda: {})
    monkeypatch.setenv("FAIL", "")

    def argv(release: str, target: Path, url: str) -> list[str]:
        assert url == "http://deb.debian.org/debian"
        return [sys.executable, "-c", FAKE_MMDEBSTRAP, str(tmp_path / "runs"), os.environ["FAIL"],
                rootfs.RELEASE_SUITES[release], str(target), url]
    monkeypatch.setattr(rootfs, "mmdebstrap_argv", argv)
    return tmp_path / "cache"


def test_ensure_rootfs_builds_once_and_keeps_a_finished_one(cache: Path, tmp_path: Path) -> None:
    logged: list[str] = []
    provision.ensure_rootfs(S24, logged.append)
    root = cache / "trixie"
    assert (root / "usr/sbin/slurmd").is_file() and rootfs.ready(root)
    assert not (cache / "trixie.partial").exists()
    assert (tmp_path / "runs").read_text() == f"{cache}/trixie.partial\n"
    assert logged == [f"building a Debian trixie root filesystem for Slurm 24.11 in {root} (once)"]
    provision.ensure_rootfs(S24, logged.append)
    provision.ensure_rootfs(HOST, logged.append)            # the host's release: nothing to build
    assert (tmp_path / "runs").read_text().count("\n") == 1 and len(logged) == 1


def test_a_failed_build_leaves_nothing_that_looks_finished(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL", "mirror unreachable")
    with pytest.raises(provision.ProvisionError) as exc:
        provision.ensure_rootfs(S26, lambda _line: None)
    assert str(exc.value) == "mmdebstrap could not build the sid root filesystem: E: mirror unreachable"
    assert not (cache / "sid").exists() and not (cache / "sid.partial").exists()


def test_two_ups_building_the_same_root_filesystem_build_it_once(cache: Path, tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def up() -> None:
        try:
            provision.ensure_rootfs(S24, lambda _line: None)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
    threads = [threading.Thread(target=up) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert (tmp_path / "runs").read_text() == f"{cache}/trixie.partial\n"
    assert rootfs.ready(cache / "trixie") and (cache / "trixie/usr/sbin/slurmd").is_file()


def test_a_slurmdbd_left_by_an_earlier_up_is_a_daemon_to_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``up`` without --with-dbd after ``up --with-dbd``: the cluster's daemons no longer list
    slurmdbd, but the one still running (its PID file is there) is stopped with the others."""
    monkeypatch.setattr(ClusterSpec, "state_dir", property(lambda self: tmp_path))
    spec = ClusterSpec(nodes=1, with_dbd=False)
    assert [d.label for d in provision.daemons(spec, left=True)] == ["slurmctld", "slurmd node1"]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "slurmdbd.pid").write_text("1\n")
    assert [d.label for d in provision.daemons(spec)] == ["slurmctld", "slurmd node1"]
    assert [d.label for d in provision.daemons(spec, left=True)] == [
        "slurmdbd", "slurmctld", "slurmd node1"]


def test_a_cluster_with_its_slurmctld_stopped_still_counts_as_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """munged is shared by the clusters: ``dlcluster down`` of one must not stop it while
    another's slurmctld is stopped for an outage (``dlcluster ctl stop``): that cluster's
    slurmd's and commands need munge. A cluster counts as up while any of its daemons lives."""
    import subprocess
    import time
    monkeypatch.setattr(provision, "_ROOT", tmp_path)
    slurmd = subprocess.Popen(["bash", "-c", "exec -a slurmd sleep 60"])
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/proc/{slurmd.pid}/cmdline").read_bytes().startswith(b"slurmd\0"):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        for name, files in (("other", {"slurmctld.pid": "999999999",   # stopped
                                       "slurmd-node1.pid": str(slurmd.pid)}),
                            ("gone", {"slurmctld.pid": "999999999",
                                      "slurmd-node1.pid": "999999999"})):
            (tmp_path / name / "run").mkdir(parents=True)
            for file, pid in files.items():
                (tmp_path / name / "run" / file).write_text(pid)
        assert provision.other_clusters_up(ClusterSpec(name="mine")) == ["other"]
        assert provision.other_clusters_up(ClusterSpec(name="other")) == []
    finally:
        slurmd.kill()
        slurmd.wait()
    assert provision.other_clusters_up(ClusterSpec(name="mine")) == []
