"""What dlsubmit checks against the partition's nodes before any sbatch of a batch
(submit/node_shape.py): the GPU type, GPU shards, and one instance against one node before the
gang's sum. The cluster is a new user's Slurm 24.11: 4 nodes of 16 CPUs, 64000 MiB and
``gpu:a100:8`` in partition gpu, read through records.node_from_fields as sinfo writes them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurm_plugin.slurm import records
from submit import cli, node_shape
from submit_helpers import option, sbatch_directives, v2_spec


def sinfo_node(name: str, gres: str, gres_used: str = "gpu:a100:0(IDX:N/A)") -> records.Node:
    return records.node_from_fields([name, name, "idle", "gpu*", "16", "2", "8", "64000", gres,
                                     gres_used])


A100 = [sinfo_node(f"node{i}", "gpu:a100:8(S:0-1)") for i in range(1, 5)]
UNTYPED = [sinfo_node(f"node{i}", "gpu:8(S:0-1)", "gpu:0(IDX:N/A)") for i in range(1, 5)]
MIXED = [sinfo_node("node1", "gpu:a100:4(S:0),gpu:v100:4(S:1)")]
SHARDS = [sinfo_node(f"node{i}", "gpu:a100:8(S:0-1),shard:a100:32(S:0-1)") for i in range(1, 5)]


class FakeClient:
    """``show_partitions`` and ``nodes`` as SlurmClient answers them (one partition, gpu)."""

    def __init__(self, nodes: list[records.Node]) -> None:
        self.nodes_held = nodes

    def show_partitions(self) -> dict[str, dict[str, str]]:
        return {"gpu": {"PartitionName": "gpu", "Default": "YES"}}

    def nodes(self, *, partitions: list[str] | None = None) -> list[records.Node]:
        return self.nodes_held


def on(monkeypatch: pytest.MonkeyPatch, nodes: list[records.Node]) -> list[str]:
    """Point dlsubmit at a cluster of ``nodes``; returns the scripts it submits."""
    monkeypatch.setattr(cli, "_cluster_nodes", lambda: node_shape.ask_slurm(FakeClient(nodes)))
    scripts: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: scripts.append(s) or 39 + len(scripts))
    return scripts


def spec(tmp_path: Path, name: str, gpu: float = 1, mem: int = 1000, cpu: int = 1,
         instances: int = 1, **extras: object) -> str:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(v2_spec(roles={"w": {
        "instances": instances, "resourcePerInstance": {"cpu": cpu, "memoryMB": mem, "gpu": gpu},
        "commands": ["true"]}}, **({"extras": extras} if extras else {}))))
    return str(f)


def test_a_gpu_type_the_partition_lacks_refuses_the_batch_before_any_sbatch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scripts = on(monkeypatch, A100)
    small, gt = spec(tmp_path, "small1.yaml"), spec(tmp_path, "gt.yaml", gpuType="v100")
    assert cli.main([small, gt, small]) == 2
    assert scripts == []
    assert capsys.readouterr().err == (
        f"dlsubmit: {gt}: extras.gpuType: no node of partition gpu has GPUs of type v100 (sinfo "
        "lists a100): set extras.gpuType to a100, leave it out for any type, or name a "
        "partition with v100 GPUs with --partition\n")


def test_a_v1_gpu_type_and_the_flag_are_named_as_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scripts = on(monkeypatch, A100)
    v1 = tmp_path / "v1.yaml"
    v1.write_text(yaml.safe_dump({"jobName": "t", "image": "ubuntu", "gpuType": "h100", "taskRoles": [
        {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100, "gpuNumber": 1,
         "command": "true"}]}))
    assert cli.main([str(v1)]) == 2
    assert capsys.readouterr().err == (
        "dlsubmit: gpuType: no node of partition gpu has GPUs of type h100 (sinfo lists a100): "
        "set gpuType to a100, leave it out for any type, or name a partition with h100 GPUs "
        "with --partition\n")
    assert cli.main([spec(tmp_path, "s.yaml"), "--gpu-type", "v100"]) == 2
    assert capsys.readouterr().err.startswith(
        "dlsubmit: --gpu-type: no node of partition gpu has GPUs of type v100 (sinfo lists a100)")
    assert scripts == []


def test_a_type_in_another_case_is_refused_as_slurm_refuses_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Slurm compares GRES types with case (24.11: ``--gres=gpu:A100:1`` on ``gpu:a100``
    nodes is "Requested node configuration is not available"): refused before any sbatch,
    with the spelling sinfo gives."""
    scripts = on(monkeypatch, A100)
    small, gt = spec(tmp_path, "small1.yaml"), spec(tmp_path, "gt.yaml", gpuType="A100")
    assert cli.main([small, gt]) == 2
    assert scripts == []
    assert capsys.readouterr().err == (
        f"dlsubmit: {gt}: extras.gpuType: no node of partition gpu has GPUs of type A100 (sinfo "
        "lists a100): set extras.gpuType to a100, leave it out for any type, or name a "
        "partition with A100 GPUs with --partition\n")


@pytest.mark.parametrize(("nodes", "asked"), [
    (A100, "a100"), (UNTYPED, "v100"), (MIXED, "v100")],
    ids=["same-type", "untyped-gres-not-checked", "second-type-of-a-node"])
def test_a_type_a_node_has_or_that_sinfo_cannot_tell_is_submitted(
        nodes: list[records.Node], asked: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    scripts = on(monkeypatch, nodes)
    assert cli.main([spec(tmp_path, "s.yaml", gpuType=asked)]) == 0, capsys.readouterr().err
    assert option(sbatch_directives(scripts[0])[0], "gres") == [f"gpu:{asked}:1"]


def test_sinfo_gres_gives_every_gpu_type_of_a_node() -> None:
    assert [n.gpu_types for n in (A100[0], UNTYPED[0], MIXED[0], SHARDS[0])] == [
        ("a100",), (), ("a100", "v100"), ("a100",)]


def test_shards_on_a_partition_without_them_are_refused_naming_the_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scripts = on(monkeypatch, A100)
    half = spec(tmp_path, "half.yaml", gpu=0.5)
    assert cli.main([half, "--shards-per-gpu", "4"]) == 2
    assert capsys.readouterr().err == (
        "dlsubmit: --shards-per-gpu 4: no node of partition gpu has GPU shards (sinfo lists no "
        "shard GRES), so Slurm would refuse the 0.5 GPU of taskRoles.w.resourcePerInstance.gpu: "
        "ask for whole GPUs, or name a partition with GPU shards with --partition (an admin "
        "adds them with dlgres --shards N)\n")
    assert cli.main([half]) == 2
    assert capsys.readouterr().err == (
        "dlsubmit: taskRoles.w.resourcePerInstance.gpu: 0.5 of a GPU needs GPU shards, and no "
        "node of partition gpu has any (sinfo lists no shard GRES): ask for whole GPUs, or name "
        "a partition with GPU shards with --partition (an admin adds them with dlgres --shards "
        "N)\n")
    assert scripts == []


def test_shards_the_partition_has_are_submitted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scripts = on(monkeypatch, SHARDS)   # 32 shards on 8 GPUs: 4 per GPU, half is 2
    assert cli.main([spec(tmp_path, "half.yaml", gpu=0.5)]) == 0, capsys.readouterr().err
    assert option(sbatch_directives(scripts[0])[0], "gres") == ["shard:2"]


def test_a_dry_run_shard_spec_without_the_flag_says_what_a_dry_run_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([spec(tmp_path, "half.yaml", gpu=0.5), "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        "dlsubmit: taskRoles.w.resourcePerInstance.gpu: 0.5 of a GPU needs GPU shards, and a "
        "--dry-run reads no node to learn how many a GPU has: add --cluster-shape, or give "
        "--shards-per-gpu N (or shards_per_gpu in the site config)\n")


@pytest.mark.parametrize(("field", "kw", "need", "have"), [
    ("memoryMB", {"mem": 999_999_999}, "999999999", "64000 MiB"),
    ("memoryMB", {"mem": 100_000}, "100000", "64000 MiB"),
    ("memoryMB", {"mem": 64_001}, "64001", "64000 MiB"),
    ("cpu", {"cpu": 100}, "100", "16 cores"),
    ("gpu", {"gpu": 33}, "33", "8 GPUs"),
], ids=["mem-above-the-partition", "mem-below-the-partition", "mem-just-above-a-node",
        "cpu-above-the-partition", "gpu-above-the-partition"])
@pytest.mark.parametrize("gang", [True, False], ids=["gang", "array"])
def test_one_instance_larger_than_a_node_names_its_field_whatever_its_size(
        field: str, kw: dict[str, int], need: str, have: str, gang: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The partition: 4 nodes of 8 GPUs, 16 cores, 64000 MiB (32, 64, 256000 in all)."""
    scripts = on(monkeypatch, A100)
    assert cli.main([spec(tmp_path, "big.yaml", gangAllocation=gang, **kw)]) == 2
    assert capsys.readouterr().err == (
        f"dlsubmit: taskRoles.w.resourcePerInstance.{field}: {need} per instance does not fit on "
        f"one node ({have} per node; see --gpus-per-node, --cores-per-node, --mem-per-node)\n")
    assert scripts == []


def test_a_gang_of_instances_that_each_fit_is_refused_by_its_sum(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    on(monkeypatch, A100)   # 5 x 60000 MiB = 300000 > 256000
    assert cli.main([spec(tmp_path, "g.yaml", mem=60_000, instances=5)]) == 2
    assert capsys.readouterr().err == (
        "dlsubmit: the job needs 300000 MiB at once (all instances start together) and "
        "partition gpu has 256000 in all (4 nodes): it could never start; ask for fewer "
        "instances or less per instance, or name a larger partition with --partition\n")
