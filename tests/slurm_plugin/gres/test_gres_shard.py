"""GPU shards in gres.conf: ``dlgres --shards N`` writes ``Name=shard`` lines next to the GPU
lines, and ``dlgres --check`` applies the shard rules (slurm_plugin/gres/shard_check.py) on
every release the product supports."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.gres.generate import shard_lines
from slurm_plugin.gres.check import Finding, check_gres
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.release import RELEASES, Release

TOPO_1GPU = Path(__file__).parents[2] / "fixtures" / "topo" / "1gpu-underlined-header.txt"


def test_dlgres_writes_a_shard_line_per_gpu_and_the_slurm_conf_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--from-topo", str(TOPO_1GPU), "--sockets", "2", "--cores-per-socket", "32",
                 "--shards", "4", "--node", "gpu01"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "NodeName=gpu01 Name=gpu File=/dev/nvidia0 Cores=0-15 Links=-1",
        "NodeName=gpu01 Name=shard Count=4 File=/dev/nvidia0",
        "# slurm.conf: GresTypes=gpu,shard",
        "# slurm.conf: NodeName=gpu01 Gres=gpu:1,shard:4 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1"]


def test_shard_lines_for_two_gpus_and_none_for_zero() -> None:
    assert shard_lines("n[1-2]", ["/dev/nvidia0", "/dev/nvidia1"], 8) == [
        "NodeName=n[1-2] Name=shard Count=8 File=/dev/nvidia0",
        "NodeName=n[1-2] Name=shard Count=8 File=/dev/nvidia1"]
    assert shard_lines(None, ["/dev/nvidia0"], 2) == ["Name=shard Count=2 File=/dev/nvidia0"]
    assert shard_lines("n1", ["/dev/nvidia0"], 0) == []


@pytest.mark.parametrize("value", ["-1", "1025", "x", "2.5"])
def test_dlgres_refuses_a_shard_count_outside_its_range(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--from-topo", str(TOPO_1GPU), "--sockets", "2", "--cores-per-socket", "32",
                 "--shards", value]) == 2
    assert capsys.readouterr().err.endswith(
        f"--shards: {value!r}: shards per GPU must be a whole number in 0..1024\n")


GOOD = ("NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"
        "NodeName=n[1-2] Name=shard Count=4 File=/dev/nvidia0\n"
        "NodeName=n[1-2] Name=shard Count=4 File=/dev/nvidia1\n")
UNEVEN = GOOD.replace("Count=4 File=/dev/nvidia1", "Count=2 File=/dev/nvidia1")
SPREAD_ODD = "NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n1 Name=shard Count=7\n"
SPREAD_EVEN = "NodeName=n1 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n1 Name=shard Count=8\n"
NO_GPU = "NodeName=n3 Name=shard Count=4\n"
STRANGER = "NodeName=n4 Name=gpu File=/dev/nvidia0\nNodeName=n4 Name=shard Count=4 File=/dev/nvidia9\n"
GPU_WITHOUT_FILE = "NodeName=n5 Name=gpu Count=2\nNodeName=n5 Name=shard Count=4 File=/dev/nvidia0\n"
HALF_COVERED = "NodeName=n6 Name=gpu File=/dev/nvidia[0-1]\nNodeName=n6 Name=shard Count=4 File=/dev/nvidia0\n"

CASES = {
    "good": (GOOD, []),
    "spread-evenly": (SPREAD_EVEN, []),
    "uneven": (UNEVEN, [Finding(2, "n[1-2]: the GPUs carry different shard counts (2, 4; 6 shards over 2 GPUs): "
                                   "dlsubmit and dlprio take shards per GPU as the node's shards / its GPUs; "
                                   "give every GPU the same Count (dlgres --shards N)")]),
    "spread-odd": (SPREAD_ODD, [Finding(2, "n1: the GPUs carry different shard counts (3.5; 7 shards over 2 "
                                           "GPUs): dlsubmit and dlprio take shards per GPU as the node's "
                                           "shards / its GPUs; give every GPU the same Count (dlgres --shards N)")]),
    "half-covered": (HALF_COVERED, [Finding(2, "n6: the GPUs carry different shard counts (0, 4; 4 shards over "
                                               "2 GPUs): dlsubmit and dlprio take shards per GPU as the node's "
                                               "shards / its GPUs; give every GPU the same Count (dlgres --shards N)")]),
    "no-gpu": (NO_GPU, [Finding(1, "n3: Name=shard but no Name=gpu line: a shard is a share of one of the "
                                   "node's GPUs (slurmd stops: 'failed to merge SHARED and SHARING configuration'); "
                                   "give the GPU lines too (dlgres --shards N writes both)")]),
    "stranger-file": (STRANGER, [Finding(2, "n4: Name=shard File=/dev/nvidia9 is no device of the node's "
                                            "Name=gpu lines: slurmd drops the line ('Discarding gres/'shared' "
                                            "configuration (File=/dev/nvidia9) without matching gres/'sharing' "
                                            "record') and starts without its shards; name one of the GPU files")]),
    # slurmd drops line 4's shards: lines 2 and 3 are what the GPUs carry, uneven, told too
    "stranger-and-uneven": (UNEVEN + "NodeName=n[1-2] Name=shard Count=4 File=/dev/nvidia2\n", [
        Finding(2, "n[1-2]: the GPUs carry different shard counts (2, 4; 6 shards over 2 GPUs): "
                   "dlsubmit and dlprio take shards per GPU as the node's shards / its GPUs; "
                   "give every GPU the same Count (dlgres --shards N)"),
        Finding(4, "n[1-2]: Name=shard File=/dev/nvidia2 is no device of the node's Name=gpu "
                   "lines: slurmd drops the line ('Discarding gres/'shared' configuration "
                   "(File=/dev/nvidia2) without matching gres/'sharing' record') and starts "
                   "without its shards; name one of the GPU files")]),
    "gpu-without-file": (GPU_WITHOUT_FILE, [Finding(2, "n5: Name=shard gives File= but the node's Name=gpu "
                                                       "lines do not: slurmd stops ('SHARING configuration "
                                                       "lacks File specification'); give File= on the GPU "
                                                       "lines (dlgres writes them)")]),
}


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_shard_rules_hold_on_every_release(case: str, release: str) -> None:
    """slurmd -G of 22.05, 24.11 and 26.05 (``GresTypes=gpu,shard``): no-gpu stops it ("we have a
    shared gres of 'shard' but no gres that is sharing", "fatal: failed to merge SHARED and SHARING
    configuration"), gpu-without-file too ("SHARING configuration lacks "File" specification");
    stranger-file starts with "error: Discarding gres/'shared' configuration (File=/dev/nvidia9)
    without matching gres/'sharing' record" and no shard of that line."""
    text, expected = CASES[case]
    assert check_gres(text, release=Release(release, "--slurm-release")) == expected
