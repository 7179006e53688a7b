"""dlsubmit packs for the node shape of the job's partition as Slurm lists it (submit/node_shape.py):
the largest node of the partition on a submit (and on ``--dry-run --cluster-shape``), flags and
the site config kept, the defaults with a note when Slurm is not asked or does not answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from slurm_plugin.slurm.client import SlurmUnreachable
from submit import cli, node_shape
from submit_helpers import DEFAULT_SHAPE_NOTE, option, res, sbatch_directives, v2_spec


@dataclass(frozen=True)
class FakeNode:
    name: str
    partitions: tuple[str, ...]
    gpus_total: int
    cpus: int
    real_memory_mib: int
    shards_total: int = 0
    gpu_types: tuple[str, ...] = ()


NODES = [FakeNode("a1", ("gpu",), 4, 32, 128000), FakeNode("a2", ("gpu",), 4, 32, 128000),
         FakeNode("b1", ("big",), 16, 64, 512000), FakeNode("b2", ("big",), 8, 64, 512000),
         FakeNode("c1", ("cpu",), 0, 96, 256000)]


class FakeClient:
    """``show_partitions`` and ``nodes`` as SlurmClient answers them; counts the questions."""

    def __init__(self, default: str | None = "gpu") -> None:
        self.default = default
        self.asked: list[object] = []

    def show_partitions(self) -> dict[str, dict[str, str]]:
        self.asked.append("partitions")
        return {p: {"PartitionName": p, "Default": "YES" if p == self.default else "NO"}
                for p in ("gpu", "big", "cpu")}

    def nodes(self, *, partitions: list[str] | None = None) -> list[FakeNode]:
        self.asked.append(partitions)
        return [n for n in NODES if partitions is None or set(partitions) & set(n.partitions)]


def spec_file(tmp_path: Path, instances: int, gpus: int, cpus: int = 1, mem: int = 1000,
              **top: object) -> str:
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(v2_spec(roles={"main": {
        "instances": instances, "resourcePerInstance": {"cpu": cpus, "memoryMB": mem, "gpu": gpus},
        "commands": ["true"]}}, **top)))
    return str(f)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient()
    monkeypatch.setattr(cli, "_cluster_nodes", lambda: node_shape.ask_slurm(client))
    return client


def submitted(argv: list[str], monkeypatch: pytest.MonkeyPatch,
              capsys: pytest.CaptureFixture[str]) -> tuple[int, list[list[str]], str]:
    scripts: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: scripts.append(s) or 7)
    rc = cli.main(argv)
    err = capsys.readouterr().err
    return rc, [a for s in scripts for a in sbatch_directives(s)], err


def test_submit_packs_for_the_default_partitions_nodes(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # 8 one-GPU instances: one node of the default 8-GPU shape, two of partition gpu's 4-GPU nodes
    rc, [args], err = submitted([spec_file(tmp_path, 8, 1)], monkeypatch, capsys)
    assert (rc, err) == (0, "")
    assert res(2, 8, 4, 1, 1000, "gpu:4") == [a for a in args if a.split("=")[0] in (
        "--nodes", "--ntasks", "--ntasks-per-node", "--cpus-per-task", "--mem-per-cpu", "--gres")]
    assert cluster.asked == ["partitions", ["gpu"]]


def test_submit_fits_an_instance_larger_than_the_defaults_on_the_partitions_largest_node(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # 12 GPUs, 48 cores, 300000 MB per instance: refused by the 8/16/64000 defaults, and fits
    # partition big's 16-GPU node (the largest of its two shapes, which the note names)
    path = spec_file(tmp_path, 1, 12, cpus=48, mem=300000)
    rc, [args], err = submitted([path, "--partition", "big"], monkeypatch, capsys)
    assert rc == 0
    assert option(args, "gres") == ["gpu:12"] and option(args, "nodes") == ["1"]
    assert err == ("dlsubmit: note: partition big has nodes of 2 shapes; packed for its largest "
                   "(16 GPUs, 64 cores, 512000 MiB per node, 1 of 2 nodes): a job needing more "
                   "such nodes than that waits\n")
    assert cluster.asked == [["big"]]


def test_flags_and_site_config_win_over_the_cluster(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("cores_per_node: 2\n")
    # GPUs from the flag (2), cores from the site (2), memory from partition gpu (128000)
    rc, [args], err = submitted([spec_file(tmp_path, 4, 1, cpus=1, mem=60000),
                                 "--gpus-per-node", "2", "--site-config", str(site)],
                                monkeypatch, capsys)
    assert (rc, err) == (0, "")
    assert option(args, "nodes") == ["2"] and option(args, "ntasks-per-node") == ["2"]
    rc, _, err = submitted([spec_file(tmp_path, 1, 1, mem=130000), "--gpus-per-node", "2",
                            "--site-config", str(site)], monkeypatch, capsys)
    assert rc == 2 and "(128000 MiB per node;" in err


def test_dry_run_packs_for_the_defaults_and_says_so_unless_asked(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, 8, 1)
    assert cli.main(["--dry-run", path]) == 0
    out, err = capsys.readouterr()
    assert err == DEFAULT_SHAPE_NOTE and cluster.asked == []
    assert option(sbatch_directives(out)[0], "nodes") == ["1"]
    assert cli.main(["--dry-run", "--cluster-shape", path]) == 0
    out, err = capsys.readouterr()
    assert err == "" and option(sbatch_directives(out)[0], "nodes") == ["2"]
    # every number given: nothing to say, nothing asked
    assert cli.main(["--dry-run", path, "--gpus-per-node", "8", "--cores-per-node", "16",
                     "--mem-per-node", "64000"]) == 0
    assert capsys.readouterr().err == ""


def test_the_note_names_the_numbers_given_apart_from_the_defaults(
        tmp_path: Path, cluster: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, 1, 1)
    assert cli.main(["--dry-run", path, "--gpus-per-node", "4"]) == 0
    assert capsys.readouterr().err == (
        "dlsubmit: note: packed for 4 GPUs, 16 cores, 64000 MiB per node (GPUs given, cores and "
        "memory the defaults; --cluster-shape reads the partition's nodes from Slurm)\n")
    site = tmp_path / "site.yaml"
    site.write_text("gpus_per_node: 2\nmem_per_node_mib: 32000\n")
    assert cli.main(["--dry-run", path, "--site-config", str(site)]) == 0
    assert capsys.readouterr().err == (
        "dlsubmit: note: packed for 2 GPUs, 16 cores, 32000 MiB per node (GPUs and memory "
        "given, cores the default; --cluster-shape reads the partition's nodes from Slurm)\n")
    assert cluster.asked == []


def test_dry_run_with_cluster_shape_and_no_slurm_keeps_the_defaults_and_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # (the autouse fixture of tests/conftest.py makes Slurm unreachable)
    assert cli.main(["--dry-run", "--cluster-shape", spec_file(tmp_path, 8, 1)]) == 0
    out, err = capsys.readouterr()
    assert err == ("dlsubmit: note: packed for 8 GPUs, 16 cores, 64000 MiB per node (the "
                   "defaults: Slurm did not tell its node shapes: no cluster in pure tests)\n")
    assert option(sbatch_directives(out)[0], "nodes") == ["1"]

    # a submit to that Slurm fails and says so; no note about the shape besides
    def refuse(*_: object) -> int:
        raise SlurmUnreachable(["sbatch"], "Unable to contact slurm controller")

    monkeypatch.setattr(cli, "_submit", refuse)
    assert cli.main([spec_file(tmp_path, 1, 1)]) == 3
    assert capsys.readouterr().err == ("dlsubmit: Slurm unreachable: Unable to contact slurm "
                                       "controller\n")


def test_a_partition_without_gpus_refuses_a_gpu_job_and_packs_a_cpu_job(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = submitted([spec_file(tmp_path, 1, 1), "--partition", "cpu"], monkeypatch, capsys)
    assert (rc, err) == (2, "dlsubmit: partition cpu: no node has a GPU (largest node: 0 GPUs, "
                            "96 cores, 256000 MiB per node); name a GPU partition with --partition\n")
    rc, [args], err = submitted([spec_file(tmp_path, 2, 0, cpus=48), "--partition", "cpu"],
                                monkeypatch, capsys)
    assert (rc, err) == (0, "")
    assert option(args, "nodes") == ["1"] and option(args, "ntasks-per-node") == ["2"]


@pytest.mark.parametrize(("instances", "gpus", "cpus", "mem", "line"), [
    # partition gpu: a1 + a2, 4 GPUs, 32 cores, 128000 MiB each
    (3, 4, 1, 1000, "the job needs 12 GPUs at once (all instances start together) and "
     "partition gpu has 8 in all (2 nodes)"),
    (3, 0, 32, 1000, "the job needs 96 cores at once (all instances start together) and "
     "partition gpu has 64 in all (2 nodes)"),
    (3, 1, 1, 100000, "the job needs 300000 MiB at once (all instances start together) and "
     "partition gpu has 256000 in all (2 nodes)"),
], ids=["gpus", "cores", "memory"])
def test_a_gang_larger_than_its_partition_is_refused_before_sbatch(
        instances: int, gpus: int, cpus: int, mem: int, line: str, tmp_path: Path,
        cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    rc, scripts, err = submitted([spec_file(tmp_path, instances, gpus, cpus=cpus, mem=mem)],
                                 monkeypatch, capsys)
    assert (rc, scripts) == (2, [])
    assert err == (f"dlsubmit: {line}: it could never start; ask for fewer instances or less per "
                   "instance, or name a larger partition with --partition\n")
    # the same instances as a job array start one by one: each fits a node, so it is submitted
    rc, [args], err = submitted([spec_file(tmp_path, instances, gpus, cpus=cpus, mem=mem,
                                           extras={"gangAllocation": False})],
                                monkeypatch, capsys)
    assert (rc, err) == (0, "") and option(args, "array") == [f"0-{instances - 1}"]


def test_a_gang_of_several_roles_counts_every_role(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # three roles of one 4-GPU instance each: 12 GPUs at once, partition gpu has 8
    f = tmp_path / "roles.yaml"
    role = {"instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 100, "gpu": 4},
            "commands": ["true"]}
    f.write_text(yaml.safe_dump(v2_spec(roles={"a": role, "b": role, "c": role})))
    rc, scripts, err = submitted([str(f)], monkeypatch, capsys)
    assert (rc, scripts) == (2, []) and err.startswith(
        "dlsubmit: the job needs 12 GPUs at once (all instances start together) and partition "
        "gpu has 8 in all (2 nodes): it could never start")


def test_the_virtual_clusters_partition_is_asked_once_for_several_specs(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("virtual_clusters: {vc: {partition: big}}\n")
    one = spec_file(tmp_path, 2, 8, defaults={"virtualCluster": "vc"})
    two = tmp_path / "two.yaml"
    two.write_text(Path(one).read_text())
    rc, comps, _ = submitted([one, str(two), "--site-config", str(site)], monkeypatch, capsys)
    assert rc == 0 and [option(a, "nodes") for a in comps] == [["1"], ["1"]]
    assert cluster.asked == [["big"]]


def test_no_default_partition_means_every_node() -> None:
    client = FakeClient(default=None)
    name, nodes = node_shape.ask_slurm(client)(None)
    assert (name, len(nodes)) == ("", len(NODES))
    assert node_shape.largest(nodes) == (node_shape.Shape(16, 64, 512000), 1, 5, 4)


def test_the_gang_is_checked_in_the_partition_sbatch_will_use(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # SBATCH_PARTITION overrides the script's #SBATCH --partition (sbatch(1)): 12 GPUs fit
    # partition big (16 + 8), not the default gpu (4 + 4)
    monkeypatch.setenv("SBATCH_PARTITION", "big")
    rc, [args], err = submitted([spec_file(tmp_path, 3, 4)], monkeypatch, capsys)
    assert rc == 0, err
    assert cluster.asked == [["big"]]


@pytest.mark.parametrize(("site_mem", "instances", "mem", "err"), [
    # packing takes the site's MiB per node: 2 x 150000 MiB fit 2 nodes x 200000 (partition
    # gpu's RealMemory, 2 x 128000, would refuse them)
    (200000, 2, 150000, ""),
    (100000, 4, 90000, "dlsubmit: the job needs 360000 MiB at once (all instances start "
     "together) and partition gpu has 200000 in all (2 nodes): it could never start; ask for "
     "fewer instances or less per instance, or name a larger partition with --partition\n"),
], ids=["fits", "refused"])
def test_a_number_the_site_gives_stands_for_every_nodes_in_the_gang_check(
        site_mem: int, instances: int, mem: int, err: str, tmp_path: Path, cluster: FakeClient,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "site.yaml").write_text(f"mem_per_node_mib: {site_mem}\n")
    rc, scripts, said = submitted([spec_file(tmp_path, instances, 1, mem=mem), "--site-config",
                                   str(tmp_path / "site.yaml")], monkeypatch, capsys)
    assert (rc, len(scripts) > 0, said) == ((2, False, err) if err else (0, True, ""))


@pytest.mark.parametrize("how", ["env", "flag"])
def test_a_list_of_partitions_is_read_as_each_of_them(
        how: str, tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``gpu,big`` (sbatch(1): the job starts in whichever of them can run it first): the
    nodes of both are asked for, and a gang is refused only when no one partition holds it:
    12 GPUs fit big (16 + 8) though not gpu (4 + 4); 32 GPUs fit neither (big, the larger,
    has 24)."""
    flag: list[str] = []
    if how == "env":
        monkeypatch.setenv("SBATCH_PARTITION", "gpu,big")
    else:
        flag = ["--partition", "gpu,big"]
    rc, scripts, err = submitted([spec_file(tmp_path, 3, 4), *flag], monkeypatch, capsys)
    assert (rc, len(scripts) > 0) == (0, True), err
    assert err == ("dlsubmit: note: partitions gpu,big have nodes of 3 shapes; packed for their "
                   "largest (16 GPUs, 64 cores, 512000 MiB per node, 1 of 4 nodes): a job needing "
                   "more such nodes than that waits\n")
    assert cluster.asked == [["gpu", "big"]]
    rc, scripts, err = submitted([spec_file(tmp_path, 4, 8), *flag], monkeypatch, capsys)
    assert (rc, scripts) == (2, [])
    assert err == ("dlsubmit: the job needs 32 GPUs at once (all instances start together) and "
                   "the largest of partitions gpu, big (big) has 24 in all (2 nodes): it could "
                   "never start; ask for fewer instances or less per instance, or name a larger "
                   "partition with --partition\n")


def test_a_list_naming_a_partition_the_cluster_lacks_is_refused_before_sbatch(
        tmp_path: Path, cluster: FakeClient, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``gpu,nope``: sbatch would refuse the whole list ("invalid partition specified: nope")
    after the batch's earlier specs went in; dlsubmit refuses it first, naming the partition.
    A name listed twice (``gpu,gpu``) is one partition."""
    rc, scripts, err = submitted([spec_file(tmp_path, 1, 1), "--partition", "gpu,nope"],
                                 monkeypatch, capsys)
    assert (rc, scripts) == (2, [])
    assert err == ("dlsubmit: partition nope (of --partition gpu,nope): sinfo lists no node in "
                   "it (no such partition, or one without nodes): name partitions that "
                   "'sinfo -s' lists\n")
    rc, scripts, err = submitted([spec_file(tmp_path, 3, 4), "--partition", "gpu,gpu"],
                                 monkeypatch, capsys)
    assert (rc, scripts) == (2, [])
    assert "and partition gpu has 8 in all (2 nodes)" in err, err


@pytest.mark.parametrize(("where", "source"), [
    ("env", "SBATCH_PARTITION"), ("site", "the site config's partition"),
    ("vc", "the site config's virtual_clusters.vc1.partition")])
def test_a_partition_the_cluster_lacks_is_named_with_where_it_came_from(
        where: str, source: str, tmp_path: Path, cluster: FakeClient,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A partition the user did not type on the command line (sbatch's environment, the site
    config, the spec's virtual cluster) is named with its source, so the fix is findable; a
    list is refused the same way (a virtual cluster's partition is one name, no list)."""
    site = tmp_path / "site.yaml"
    for value, named in (("nosuch", "partition nosuch (from {source}): sinfo lists no node in it "
                                    "(no such partition, or one without nodes): name a partition "
                                    "that 'sinfo -s' lists"),
                         ("gpu,nosuch", "partition nosuch (of {source} gpu,nosuch): sinfo lists "
                                        "no node in it (no such partition, or one without nodes): "
                                        "name partitions that 'sinfo -s' lists")):
        if where == "vc" and "," in value:
            continue
        top: dict = {}
        argv = [f"--site-config={site}"]
        site.write_text("{}\n")
        if where == "env":
            monkeypatch.setenv("SBATCH_PARTITION", value)
        elif where == "site":
            site.write_text(yaml.safe_dump({"partition": value}))
        else:
            site.write_text(yaml.safe_dump({"virtual_clusters": {"vc1": {"partition": value}}}))
            top = {"defaults": {"virtualCluster": "vc1"}}
        rc, scripts, err = submitted([spec_file(tmp_path, 1, 1, **top), *argv], monkeypatch, capsys)
        assert (rc, scripts, err) == (2, [], f"dlsubmit: {named.format(source=source)}\n")
