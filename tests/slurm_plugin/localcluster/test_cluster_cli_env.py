"""``dlcluster env`` prints shell lines that point Slurm's commands at a cluster, read back by a
real shell; env, status, down and ctl refuse a cluster that does not exist; ``up --slurm`` takes
only the declared releases. In-process, no cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from slurm_plugin.localcluster import cli as cluster_cli
from slurm_plugin.localcluster import provision
from slurm_plugin.localcluster.cluster import ClusterSpec, render_slurm_conf


@pytest.fixture
def paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Config and state of every cluster under a directory whose name holds a space, quotes and
    ``$(...)``; the host is Debian 12 (22.05)."""
    top = tmp_path / "it's a \"dir\" $(touch pwned)"
    monkeypatch.setattr(ClusterSpec, "conf_dir", property(lambda self: top / "etc" / self.name))
    monkeypatch.setattr(ClusterSpec, "state_dir", property(lambda self: top / "state" / self.name))
    monkeypatch.setattr(provision, "host_release", lambda: "22.05")
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    return top


def _write_conf(spec: ClusterSpec) -> None:
    spec.conf_dir.mkdir(parents=True)
    spec.slurm_conf.write_text(render_slurm_conf(spec, "host"))


def _read_back(lines: str, cwd: Path) -> list[str]:
    """SLURM_CONF and PATH after ``eval``-ing ``lines`` in bash."""
    out = subprocess.run(["/bin/bash", "-c", 'eval "$1" && printf "%s\\0" "$SLURM_CONF" "$PATH"', "_", lines],
                         capture_output=True, check=True, cwd=cwd, timeout=30, env={"PATH": "/nowhere"})
    return out.stdout.decode().split("\0")[:-1]


def test_env_of_a_cluster_of_another_release_sets_slurm_conf_and_path(
        paths: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_conf(ClusterSpec(name="s24", port_base=7100, slurm="24.11"))
    assert cluster_cli.main(["env", "--name", "s24"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and out.out.count("\n") == 2
    assert _read_back(out.out, tmp_path) == [
        f"{paths}/etc/s24/slurm.conf", f"{paths}/state/s24/bin:/usr/local/bin:/usr/bin:/bin"]
    assert not (tmp_path / "pwned").exists()


def test_env_of_the_hosts_release_sets_slurm_conf_alone(
        paths: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_conf(ClusterSpec(name="h22", port_base=7000))
    assert cluster_cli.main(["env", "--name", "h22"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("export SLURM_CONF=") and out.count("\n") == 1
    assert _read_back(out, tmp_path) == [f"{paths}/etc/h22/slurm.conf", "/nowhere"]


def test_env_of_a_cluster_without_its_slurm_conf_is_one_line_exit_5(
        paths: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ClusterSpec(name="s9").state_dir.mkdir(parents=True)   # a purge stopped half-way
    assert cluster_cli.main(["env", "--name", "s9"]) == 5   # Exit.NOT_FOUND
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (f"dlcluster: no cluster 's9' here ({paths}/etc/s9/slurm.conf is missing): "
                       "start it with dlcluster up --name s9\n")


@pytest.mark.parametrize("argv", [["env"], ["status"], ["status", "--json"], ["down"],
                                  ["down", "--purge"], ["ctl", "start"]],
                         ids=lambda a: "-".join(a))
def test_a_cluster_that_does_not_exist_is_one_line_naming_those_that_do(
        paths: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str]) -> None:
    acted: list[str] = []
    for name in ("down", "ctl"):
        monkeypatch.setattr(provision, name, lambda *a, _n=name, **kw: acted.append(_n) or "done")
    monkeypatch.setattr(provision, "running", lambda _spec: acted.append("running") or {})
    _write_conf(ClusterSpec(name="s24", port_base=7100, slurm="24.11"))
    for name in ("s24", "h22"):   # up makes each cluster's state directory
        ClusterSpec(name=name).state_dir.mkdir(parents=True)
    (paths / "state" / "munged.started").write_text("")
    assert cluster_cli.main([*argv, "--name", "nosuch"]) == 5   # Exit.NOT_FOUND
    out = capsys.readouterr()
    assert (out.out, acted) == ("", [])
    assert out.err == (f"dlcluster: no dlcluster named 'nosuch' exists ({paths}/etc/nosuch/slurm.conf "
                       f"and {paths}/state/nosuch are missing); the clusters here: h22, s24; use "
                       "--name with one of them, or start this one with dlcluster up --name nosuch\n")


def test_down_removes_the_namespaces_an_interrupted_up_left(
        paths: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``up --netns`` stopped before it wrote slurm.conf or the state directory leaves
    namespaces only: ``down`` removes them; ``status`` still finds no cluster."""
    acted: list[str] = []
    monkeypatch.setattr(provision, "down", lambda spec, **kw: acted.append(spec.name) or "done")
    monkeypatch.setattr(cluster_cli.netns, "namespaces",
                        lambda spec: [f"dlc-{spec.name}-node1"] if spec.name == "half" else [])
    assert cluster_cli.main(["down", "--name", "half"]) == 0
    assert acted == ["half"]
    assert cluster_cli.main(["status", "--name", "half"]) == 5
    assert cluster_cli.main(["down", "--name", "nosuch"]) == 5
    assert acted == ["half"]


def test_with_no_cluster_at_all_it_says_there_is_none(
        paths: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cluster_cli.main(["status"]) == 5
    assert capsys.readouterr().err == (
        f"dlcluster: no dlcluster named 'dlcluster' exists ({paths}/etc/dlcluster/slurm.conf and "
        f"{paths}/state/dlcluster are missing); there is none here; start it with dlcluster up "
        "--name dlcluster\n")


def test_status_of_a_cluster_that_exists_but_is_stopped_is_its_table(
        paths: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _write_conf(ClusterSpec(name="s24", port_base=7100, slurm="24.11"))
    monkeypatch.setattr(provision, "running", lambda _spec: {"slurmctld": None})
    assert cluster_cli.main(["status", "--name", "s24"]) == 1   # not up: Exit.FAILED
    assert capsys.readouterr().out == (f"cluster 's24'  Slurm 24.11  SLURM_CONF={paths}/etc/s24/slurm.conf\n"
                                       "  slurmctld        not running\n")


@pytest.mark.parametrize("release", ["23.02", "24.05", "22.05.8", ""])
def test_up_takes_only_the_declared_releases(
        paths: Path, release: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cluster_cli.main(["up", "--slurm", release, "--no-install"])
    assert exc.value.code == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("dlcluster: ") and "--slurm" in out.err
    if release:
        assert out.err == (f"dlcluster: --slurm: invalid choice {release!r} "
                           "(choose from 22.05, 24.11, 26.05)\n")


def test_up_on_a_running_cluster_keeps_its_release(
        paths: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _write_conf(ClusterSpec(name="s26", port_base=7200, slurm="26.05"))
    seen: list[ClusterSpec] = []
    monkeypatch.setattr(provision, "running", lambda _spec: {"slurmctld": 101})
    monkeypatch.setattr(provision, "up", lambda spec, **kw: seen.append(spec) or "started")
    assert cluster_cli.main(["up", "--name", "s26", "--port-base", "7200"]) == 0
    assert [s.slurm for s in seen] == ["26.05"] and seen[0].host_slurm == "22.05"
    assert capsys.readouterr().out.startswith(
        "dlcluster: cluster 's26' is running; kept from its slurm.conf: --slurm 26.05 --nodes 4 ")
    assert cluster_cli.main(["up", "--name", "s26", "--port-base", "7200", "--slurm", "24.11"]) == 0
    assert seen[1].slurm == "24.11"
    assert "changing --slurm 26.05 -> 24.11" in capsys.readouterr().out
