"""The requeue delay of replays that read the cluster from Slurm (``--cluster-from-slurm``):
the cluster's ``cred_expire`` + 1 s where the policy leaves ``requeue_delay_s`` at its default
(121 s), by the daemon's rule (:meth:`PolicyConfig.with_cluster_requeue_delay`), with a note
naming the delay and its source. Slurm is a fake client answering ``sinfo`` and ``scontrol
show config`` as a cluster of one 8-GPU node and ``AuthInfo cred_expire=10`` (dlcluster's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import prioritizer.history.cli as history_cli
import prioritizer.sim.slurm_cluster as slurm_cluster
import prioritizer.tune.cli as tune_cli
import prioritizer.tune.rank as rank
from prioritizer.cli import main
from prioritizer.history.trace import HistoryRow, write_rows
from prioritizer.policy.config import PolicyConfig
from slurm_plugin.slurm.client import SlurmError
from slurm_plugin.slurm.records import Node


class FakeSlurm:
    """``sinfo``: one node of 8 GPUs; ``scontrol show config``: ``auth`` as AuthInfo (None:
    Slurm does not answer)."""

    auth: str | None = "cred_expire=10"

    def __init__(self, timeout_s: float = 30) -> None:
        pass

    def nodes(self) -> list[Node]:
        return [Node("node1", "127.0.0.1", "idle", (), ("gpu",), 8, 1, 8, 64000, 8, 0, "")]

    def show_config(self) -> dict[str, str]:
        if FakeSlurm.auth is None:
            raise SlurmError(["scontrol", "show", "config"], "Unable to contact slurm controller")
        return {"AuthInfo": FakeSlurm.auth, "ClusterName": "dl"}


@pytest.fixture(autouse=True)
def fake_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_cluster, "SlurmClient", FakeSlurm)
    monkeypatch.setattr(FakeSlurm, "auth", "cred_expire=10")


@pytest.mark.parametrize(("policy", "cluster_s", "expected"), [
    ({}, 11.0, 11.0),                             # left at 121: the cluster's
    ({}, 121.0, 121.0),                           # a cluster of Slurm's default
    ({"requeue_delay_s": 300}, 11.0, 300.0),      # a site's own value is kept
    ({"requeue_delay_s": 0}, 11.0, 0.0)])         # --zero-cost's, kept
def test_the_rule(policy: dict[str, float], cluster_s: float, expected: float) -> None:
    assert PolicyConfig(**policy).with_cluster_requeue_delay(cluster_s).requeue_delay_s == expected  # type: ignore[arg-type]


def test_requeue_delay_from_slurm_and_a_silent_controller() -> None:
    assert slurm_cluster.requeue_delay_from_slurm() == 11.0
    FakeSlurm.auth = ""
    assert slurm_cluster.requeue_delay_from_slurm() == 121.0   # slurm.conf(5) default 120 + 1
    FakeSlurm.auth = None
    with pytest.raises(slurm_cluster.ClusterShapeError) as err:
        slurm_cluster.requeue_delay_from_slurm()
    assert str(err.value) == ("--cluster-from-slurm: scontrol show config failed: scontrol: "
                              "Unable to contact slurm controller")


def _row(job_id: str, eligible: float, duration: float, jct: float) -> HistoryRow:
    return HistoryRow(job_id, "u", "a", "p", eligible, eligible, 8, 1, 8 * duration, duration,
                      eligible + jct, jct, "COMPLETED", 1, "self")


# 2D-LAS, first threshold 40 GPU·s, 5 s cycles, no checkpoint cost: a (8 GPUs, 20 s) from
# 100, b (8 GPUs, 5 s) from 101 on the one 8-GPU node. a reaches 40 GPU·s at 105 and is
# requeued on that cycle; b runs 105-110 (JCT 9). a may start again 105 + delay later and
# runs its 15 s left: with the cluster's 11 s from 116 to 131 (JCT 31), with 121 s from 226
# to 241 (JCT 141).
LAS = ("policy:\n  policy: tiresias-las\n  thresholds_gpu_s: [40, 1000]\n  starve_knob: 0\n"
       "  min_run_s: 0\n  checkpoint_overhead_s: 0\n  decision_interval_s: 5\n")


def _check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str,
           capsys: pytest.CaptureFixture) -> tuple[list[tuple[str, float]], str]:
    trace, cfg = tmp_path / "h.csv", tmp_path / "dlprio.yaml"
    with open(trace, "w") as handle:
        write_rows([_row("a", 100, 20, 25), _row("b", 101, 5, 13)], handle)
    cfg.write_text(config)
    replays: list[tuple[str, float]] = []
    real = history_cli.check

    def recording(rows: Any, cluster: Any, policy: PolicyConfig, **kw: Any) -> Any:
        fidelity = real(rows, cluster, policy, **kw)
        replays.extend((j.job_id, j.replay_jct) for j in fidelity.jobs)
        return fidelity

    monkeypatch.setattr(history_cli, "check", recording)
    rc = main(["history", "check", "--trace", str(trace), "--cluster-from-slurm", "--config",
               str(cfg), "--start-latency", "0", "--dispatch-latency", "0", "--baseline",
               "tiresias-las"])
    err = capsys.readouterr().err
    assert rc == 0, err
    return replays, err


def test_history_check_replays_with_the_clusters_delay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    replays, err = _check(tmp_path, monkeypatch, LAS, capsys)
    assert replays == [("a", 31.0), ("b", 9.0)]
    assert ("dlprio history check: note: requeue delay 11 s, the cluster's (scontrol show "
            "config: cred_expire + 1 s), as the daemon uses it while requeue_delay_s is left at "
            "its default") in err.splitlines()


def test_history_check_keeps_a_delay_the_config_sets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    replays, err = _check(tmp_path, monkeypatch, LAS + "  requeue_delay_s: 121.5\n", capsys)
    assert replays == [("a", 141.5), ("b", 9.0)]
    assert ("dlprio history check: note: requeue delay 121.5 s, the policy's requeue_delay_s "
            "(--config); the cluster's is 11 s (scontrol show config: "
            "cred_expire + 1 s)") in err.splitlines()


def test_history_check_without_a_config_says_it_models_no_cost(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Without --config, history check replays the policy with no modeled cost (delay 0 s):
    the note says so, not that --config or an option set it."""
    trace = tmp_path / "h.csv"
    with open(trace, "w") as handle:
        write_rows([_row("a", 100, 20, 25), _row("b", 101, 5, 13)], handle)
    assert main(["history", "check", "--trace", str(trace), "--cluster-from-slurm",
                 "--start-latency", "0", "--dispatch-latency", "0"]) == 0
    assert ("dlprio history check: note: requeue delay 0 s, no modeled cost: without --config "
            "the policy is replayed with none (give --config for the daemon's policy and "
            "costs); the cluster's is 11 s (scontrol show config: cred_expire + 1 s)"
            ) in capsys.readouterr().err.splitlines()


def test_history_check_when_slurm_does_not_answer_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    FakeSlurm.auth = None
    trace = tmp_path / "h.csv"
    with open(trace, "w") as handle:
        write_rows([_row("a", 100, 20, 25)], handle)
    assert main(["history", "check", "--trace", str(trace), "--cluster-from-slurm",
                 "--start-latency", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "dlprio: --cluster-from-slurm: scontrol show config failed: scontrol: Unable to "
        "contact slurm controller"]


def test_tune_replays_with_the_clusters_delay_and_its_snippet_leaves_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    trace, cfg = tmp_path / "h.csv", tmp_path / "dlprio.yaml"
    with open(trace, "w") as handle:
        write_rows([_row("a", 100, 20, 25), _row("b", 101, 5, 13)], handle)
    cfg.write_text(LAS)
    delays: list[float] = []
    monkeypatch.setattr(tune_cli, "run_local", lambda tasks, workers=None, progress=True: [
        rank.run_task(t) for t in tasks])
    real = rank.simulate

    def recording(trace: Any, cluster: Any, config: PolicyConfig, *a: Any, **k: Any) -> Any:
        delays.append(config.requeue_delay_s)
        return real(trace, cluster, config, *a, **k)

    monkeypatch.setattr(rank, "simulate", recording)
    rc = main(["tune", "--trace", str(trace), "--cluster-from-slurm", "--config", str(cfg),
               "--grid", "knob=4,8", "--workers", "1"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert delays == [11.0, 11.0, 11.0]   # two grid points and the current config
    assert ("dlprio tune: note: requeue delay 11 s, the cluster's (scontrol show config: "
            "cred_expire + 1 s), as the daemon uses it while requeue_delay_s is left at its "
            "default") in err.splitlines()
    assert "  requeue_delay_s: 121.0" in out.splitlines()
