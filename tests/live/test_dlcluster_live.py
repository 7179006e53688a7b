"""`dlcluster` on this machine: a second, small cluster next to the one the suite runs on.

These start real slurmctld/slurmd processes (name `citest`, ports 13000+) and stop them again;
the main cluster (SLURM_CONF) must keep answering throughout.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import wait_for, wait_state
from slurm_plugin.slurm.client import SlurmClient

pytestmark = pytest.mark.live

NAME, PORT = "citest", 13000
CLI = [sys.executable, "-m", "slurm_plugin.localcluster.cli"]


def dlcluster(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, env=env)


def status() -> dict:
    return json.loads(dlcluster("status", "--name", NAME, "--json").stdout)


def nothing_started() -> bool:
    """No daemon of the cluster runs: ``status`` finds no such cluster (exit 5: neither its
    slurm.conf nor its state directory was made) or lists its daemons, none running."""
    res = dlcluster("status", "--name", NAME, "--json")
    if res.returncode == 5:
        return f"no dlcluster named {NAME!r} exists" in res.stderr
    return not any(json.loads(res.stdout)["daemons"].values())


@pytest.fixture
def small_cluster() -> Iterator[None]:
    dlcluster("down", "--name", NAME, "--purge")
    yield
    dlcluster("down", "--name", NAME, "--purge")


def test_up_is_idempotent_and_down_stops_only_its_own(small_cluster: None) -> None:
    up = dlcluster("up", "--name", NAME, "--port-base", str(PORT), "--nodes", "2", "--gpus-per-node", "2",
                   "--no-install")
    assert up.returncode == 0, up.stderr
    first = status()
    assert first["nodes"] and {n["name"] for n in first["nodes"]} == {"node1", "node2"}
    assert all(n["state"] == "idle" and n["gpus"] == 2 for n in first["nodes"])
    pids = first["daemons"]
    assert all(pids.values())
    again = dlcluster("up", "--name", NAME, "--port-base", str(PORT), "--nodes", "2", "--gpus-per-node", "2",
                      "--no-install")
    assert again.returncode == 0 and "already up" in again.stdout
    assert status()["daemons"] == pids  # same processes: nothing restarted
    down = dlcluster("down", "--name", NAME)
    assert down.returncode == 0
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists()
    assert SlurmClient(timeout_s=10).ping()  # the suite's own cluster is untouched


def test_stale_pid_files_do_not_break_up(small_cluster: None) -> None:
    run = Path(f"/var/lib/dlcluster/{NAME}/run")
    run.mkdir(parents=True, exist_ok=True)
    (run / "slurmctld.pid").write_text("1\n")  # PID 1 is not slurmctld: must be ignored
    up = dlcluster("up", "--name", NAME, "--port-base", str(PORT), "--nodes", "1", "--gpus-per-node", "2",
                   "--no-install")
    assert up.returncode == 0, up.stderr
    assert status()["daemons"]["slurmctld"] not in (None, 1)


def test_nodes_zero_is_refused_before_anything_happens() -> None:
    res = dlcluster("up", "--name", "zero", "--port-base", "13500", "--nodes", "0")
    assert res.returncode == 2
    assert "--nodes 0: must be between 1 and 64" in res.stderr
    assert not Path("/etc/slurm-zero").exists() and not Path("/var/lib/dlcluster/zero").exists()


def test_occupied_port_leaves_nothing_started(small_cluster: None) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", PORT))
        s.listen()
        res = dlcluster("up", "--name", NAME, "--port-base", str(PORT), "--nodes", "1", "--no-install")
    assert res.returncode == 1
    assert f"port(s) {PORT} already in use" in res.stderr
    assert not Path(f"/etc/slurm-{NAME}/slurm.conf").exists()
    assert nothing_started()


def test_missing_apt_package_gives_one_clear_error(small_cluster: None, tmp_path: Path) -> None:
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    # dpkg says nothing is installed, apt-get cannot find the package: as on a broken mirror
    (fakebin / "dpkg").write_text("#!/bin/sh\nexit 1\n")
    (fakebin / "apt-get").write_text("#!/bin/sh\necho 'E: Unable to locate package slurmd' >&2\nexit 100\n")
    for f in fakebin.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{fakebin}:{os.environ['PATH']}"}
    res = dlcluster("up", "--name", NAME, "--port-base", str(PORT), "--nodes", "1", env=env)
    assert res.returncode == 1
    assert "apt-get could not install" in res.stderr and "slurmd" in res.stderr
    assert not Path(f"/etc/slurm-{NAME}/slurm.conf").exists()
    assert nothing_started()


def test_changed_config_does_not_restart_under_running_jobs(small_cluster: None) -> None:
    base = ["--name", NAME, "--port-base", str(PORT), "--no-install"]
    assert dlcluster("up", *base, "--nodes", "1", "--gpus-per-node", "2").returncode == 0
    env = {**os.environ, "SLURM_CONF": f"/etc/slurm-{NAME}/slurm.conf"}
    client_env = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    try:
        client = SlurmClient(timeout_s=10)
        jid = client.submit("#!/bin/bash\n#SBATCH --gres=gpu:1 --output=/dev/null\nsleep 120\n")
        wait_state(client, jid, {"RUNNING"}, 30)
        pids = status()["daemons"]
        res = dlcluster("up", *base, "--nodes", "1", "--gpus-per-node", "4")
        assert res.returncode == 1
        assert (f"is running 1 active job(s) ({jid}) and needs a restart (its configuration "
                "differs)") in res.stderr and "--force" in res.stderr
        assert status()["daemons"] == pids  # nothing restarted
        assert client.job(jid).state == "RUNNING" and client.job(jid).restart_count == 0
        forced = dlcluster("up", *base, "--nodes", "1", "--gpus-per-node", "4", "--force")
        assert forced.returncode == 0, forced.stderr
        assert {n["gpus"] for n in status()["nodes"]} == {4}
    finally:
        if client_env is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = client_env


def _stop_without_cancelling() -> None:
    """SIGTERM the small cluster's daemons as a machine shutdown would: slurmctld saves its
    state, jobs included, and nothing cancels them (``dlcluster down`` would)."""
    daemons = status()["daemons"]
    # slurmctld first, and alone: it saves its state while slurmd still answers, so a node
    # cannot be marked not responding (DOWN) on the way out under a loaded machine
    order = sorted(daemons, key=lambda name: name != "slurmctld")
    for name in order:
        pid = daemons[name]
        if pid:
            os.kill(pid, 15)
            wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30, f"{name} to exit")


def test_clear_cancels_jobs_restored_from_a_killed_run(small_cluster: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["--name", NAME, "--port-base", str(PORT), "--nodes", "1", "--gpus-per-node", "2", "--no-install"]
    assert dlcluster("up", *base).returncode == 0
    monkeypatch.setenv("SLURM_CONF", f"/etc/slurm-{NAME}/slurm.conf")
    client = SlurmClient(timeout_s=10)
    held = client.submit("#!/bin/bash\n#SBATCH --hold --output=/dev/null\ntrue\n")
    running = client.submit("#!/bin/bash\n#SBATCH --gres=gpu:1 --output=/dev/null\nsleep 300\n")
    wait_state(client, running, {"RUNNING"}, 30)
    _stop_without_cancelling()

    # the fault: a plain `up` brings the held job back, and it stays active for good
    plain = dlcluster("up", *base)
    assert plain.returncode == 0, plain.stderr
    active = {j.job_id: j.state for j in client.jobs() if j.is_active}
    assert active.get(held) == "PENDING"

    cleared = dlcluster("up", *base, "--clear")          # already up: cancels what is there
    assert cleared.returncode == 0, cleared.stderr
    assert "already up" in cleared.stdout
    assert f"cancelled {len(active)} job(s) left from before (" in cleared.stdout
    assert all(str(job_id) in cleared.stdout for job_id in active)
    assert [j.job_id for j in client.jobs() if j.is_active] == []

    again = client.submit("#!/bin/bash\n#SBATCH --hold --output=/dev/null\ntrue\n")
    subprocess.run(["scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=killed run"],
                   check=True, capture_output=True)
    wait_for(lambda: ["DRAIN" in n.state_flags for n in client.nodes()] == [True], 30,
             "node1 drained")
    _stop_without_cancelling()
    restarted = dlcluster("up", *base, "--clear")         # started from saved state, then cleared
    assert restarted.returncode == 0, restarted.stderr
    assert "already up" not in restarted.stdout
    assert "resumed drained node(s) node1" in restarted.stdout
    assert f"cancelled 1 job(s) left from before ({again})" in restarted.stdout
    assert [j.job_id for j in client.jobs() if j.is_active] == []
    assert [(n.name, n.state, n.usable) for n in client.nodes()] == [("node1", "idle", True)]

    empty = dlcluster("up", *base, "--clear")
    assert empty.returncode == 0 and "no jobs left from before" in empty.stdout
