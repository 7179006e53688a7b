"""``dlcluster up`` keeps a running cluster's shape (slurm.conf) for every option not given and
says what it kept and what an option changes; in-process, stopping before provisioning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_plugin.localcluster import cli as cluster_cli
from slurm_plugin.localcluster import provision
from slurm_plugin.localcluster.cluster import ClusterSpec, render_slurm_conf

WITH_DBD = ClusterSpec(nodes=2, gpus_per_node=4, gpu_type="h100", cred_expire_s=30, with_dbd=True)


@pytest.fixture
def up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[ClusterSpec]:
    """provision.up captured; the cluster's slurm.conf in tmp_path (written by the tests)."""
    seen: list[ClusterSpec] = []
    monkeypatch.setattr(ClusterSpec, "slurm_conf", property(lambda self: tmp_path / "slurm.conf"))
    monkeypatch.setattr(provision, "up", lambda spec, **kw: seen.append(spec) or "started")
    return seen


def running(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spec: ClusterSpec | None) -> None:
    """The cluster runs with ``spec``'s slurm.conf (``None``: nothing runs, no slurm.conf)."""
    monkeypatch.setattr(provision, "running",
                        lambda _spec: {"slurmctld": 101 if spec else None, "slurmd node1": None})
    if spec is not None:
        (tmp_path / "slurm.conf").write_text(render_slurm_conf(spec, "vm"))


def test_up_without_options_keeps_a_running_clusters_accounting_and_shape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, up: list[ClusterSpec],
        capsys: pytest.CaptureFixture[str]) -> None:
    running(monkeypatch, tmp_path, WITH_DBD)
    assert cluster_cli.main(["up"]) == 0
    assert up == [ClusterSpec(nodes=2, gpus_per_node=4, gpu_type="h100", cred_expire_s=30,
                              with_dbd=True)]
    assert capsys.readouterr().out == (
        "dlcluster: cluster 'dlcluster' is running; kept from its slurm.conf: --slurm 22.05 --nodes 2 "
        "--gpus-per-node 4 --gpu-type h100 --shards 0 --with-dbd --cred-expire 30 --no-netns (an option changes it)\n"
        "started\n")
    # once it is down, up starts from the defaults and the options given, silently
    running(monkeypatch, tmp_path, None)
    assert cluster_cli.main(["up", "--with-dbd"]) == 0
    assert up[1:] == [ClusterSpec(with_dbd=True)] and capsys.readouterr().out == "started\n"


def test_an_option_that_changes_the_shape_is_named_the_rest_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, up: list[ClusterSpec],
        capsys: pytest.CaptureFixture[str]) -> None:
    running(monkeypatch, tmp_path, WITH_DBD)
    assert cluster_cli.main(["up", "--without-dbd", "--nodes", "2", "--gpus-per-node", "8"]) == 0
    assert up == [ClusterSpec(nodes=2, gpus_per_node=8, gpu_type="h100", cred_expire_s=30,
                              with_dbd=False)]
    assert capsys.readouterr().out == (
        "dlcluster: cluster 'dlcluster' is running; kept from its slurm.conf: --slurm 22.05 --gpu-type h100 "
        "--shards 0 --cred-expire 30 --no-netns (an option changes it)\n"
        "dlcluster: cluster 'dlcluster' is running; changing --gpus-per-node 4 -> 8, "
        "--with-dbd -> --without-dbd\nstarted\n")


def test_shards_are_sticky_like_the_rest_of_the_shape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, up: list[ClusterSpec],
        capsys: pytest.CaptureFixture[str]) -> None:
    running(monkeypatch, tmp_path, ClusterSpec(nodes=2, gpus_per_node=2, shards_per_gpu=4))
    assert cluster_cli.main(["up"]) == 0
    assert up[-1].shards_per_gpu == 4 and "--shards 4" in capsys.readouterr().out
    assert cluster_cli.main(["up", "--shards", "2"]) == 0
    assert up[-1].shards_per_gpu == 2
    assert "changing --shards 4 -> 2\n" in capsys.readouterr().out


def test_netns_is_kept_by_a_plain_up_and_named_when_an_option_drops_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, up: list[ClusterSpec],
        capsys: pytest.CaptureFixture[str]) -> None:
    net = ClusterSpec(name="net", port_base=8400, nodes=2, netns=True)
    running(monkeypatch, tmp_path, net)
    assert cluster_cli.main(["up", "--name", "net", "--port-base", "8400"]) == 0
    assert up == [net]
    assert capsys.readouterr().out == (
        "dlcluster: cluster 'net' is running; kept from its slurm.conf: --slurm 22.05 --nodes 2 "
        "--gpus-per-node 8 --gpu-type a100 --shards 0 --without-dbd --cred-expire 10 --netns (an option changes it)\n"
        "started\n")
    assert cluster_cli.main(["up", "--name", "net", "--port-base", "8400", "--no-netns"]) == 0
    assert up[1:] == [ClusterSpec(name="net", port_base=8400, nodes=2)]
    assert capsys.readouterr().out.splitlines()[1:] == [
        "dlcluster: cluster 'net' is running; changing --netns -> --no-netns", "started"]



def test_a_sacctmgr_that_hangs_is_no_answer_from_slurmdbd(tmp_path):
    """dlcluster up waits for slurmdbd with sacctmgr; one that hangs past its limit counts as
    no answer (the wait then ends with "slurmdbd does not answer"), not a TimeoutExpired."""
    for name, body in (("hangs", "sleep 5"), ("answers", "exit 0"), ("refuses", "exit 1")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "sacctmgr").write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / name / "sacctmgr").chmod(0o755)
    env = lambda name: {**os.environ, "PATH": f"{tmp_path / name}:{os.environ['PATH']}"}  # noqa: E731
    assert provision._dbd_answers(env("hangs"), timeout_s=0.3) is False
    assert provision._dbd_answers(env("answers"), timeout_s=5) is True
    assert provision._dbd_answers(env("refuses"), timeout_s=5) is False
