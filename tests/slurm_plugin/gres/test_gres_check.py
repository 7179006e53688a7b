"""``dlgres --check``: one line per finding with its line number, exit 1 when any.

Default tests: our good and bad files (tests/fixtures/gres, README there) and small inline
texts. The ``corpus`` tests run real site configs (tests/corpus.py) with findings read off the
files by eye."""

from __future__ import annotations

from pathlib import Path

import pytest

import corpus
from slurm_plugin.gres.generate import fake_gres_lines
from slurm_plugin.gres.check import Finding, check_gres
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.topo_cpu import CpuTopology

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "gres"
GOOD = FIX / "good-lab4.conf"
BAD = FIX / "bad-lab4.conf"
LAB4 = ["--sockets", "2", "--cores-per-socket", "8", "--threads-per-core", "2"]
CONFS = corpus.SLURM_CONFIGS
DEEPOPS = CONFS / "deepops-issue-1102-dgxa100-gres-with-Links-and-typo.conf"
LAMBDA = CONFS / "arlk-lambda-8gpu-gres.conf"


def test_good_file_has_no_findings(capsys: pytest.CaptureFixture[str]):
    assert main(["--check", str(GOOD), *LAB4]) == 0
    assert capsys.readouterr().out == f"{GOOD}: no findings\n"


def test_bad_file_one_line_per_finding(capsys: pytest.CaptureFixture[str]):
    rc = main(["--check", str(BAD), *LAB4])
    assert rc == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{BAD}:3: Links=4,-1,,0,0: entry 3 is empty (one integer per GPU, -1 for itself; slurmd takes it "
        "without a message)",
        f"{BAD}:3: Links has 5 entries but the node has 4 GPUs: give one entry per GPU (slurmd takes it without a message)",
        f"{BAD}:4: Cores=8-23: 16-23 beyond the node's 16 cores (0-15); Cores= takes logical core "
        "indices, not OS CPU ids",
        f"{BAD}:5: CPUs= is not in gres.conf(5) of Slurm 22.05: use Cores= with logical core indices "
        "(on this node shape: Cores=8-15); 24-31 are not cores: OS ids of hyper-thread siblings",
    ]


def test_bad_file_without_a_shape_still_finds_the_links(capsys: pytest.CaptureFixture[str]):
    assert main(["--check", str(BAD)]) == 1
    out = capsys.readouterr().out
    assert f"{BAD}:3: Links has 5 entries" in out and "beyond" not in out


@pytest.mark.corpus
def test_deepops_malformed_links_line_3_is_found(capsys: pytest.CaptureFixture[str]):
    rc = main(["--check", str(DEEPOPS)])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out == [
        f"{DEEPOPS}:3: Links=0,0,-1,,0,0,0,0,0: entry 4 is empty (one integer per GPU, -1 for itself; slurmd takes "
        "it without a message)",
        f"{DEEPOPS}:3: Links has 9 entries but the node has 8 GPUs: give one entry per GPU (slurmd takes it without a message)",
    ]


@pytest.mark.corpus
def test_deepops_with_a_64_core_shape_flags_cores_beyond_the_node():
    # Cores=112-127 and 80-95 only fit a 2x64 node; on 2x32 they are beyond the node
    found = check_gres(DEEPOPS.read_text(), CpuTopology.from_shape(2, 32, 2))
    beyond = [f.line for f in found if "beyond the node's 64 cores" in f.message]
    assert beyond == [5, 6, 7, 8]
    assert not [f for f in check_gres(DEEPOPS.read_text(), CpuTopology.from_shape(2, 64, 2)) if "beyond" in f.message]


@pytest.mark.corpus
def test_lambda_cpus_with_os_ids_and_hyperthreads(capsys: pytest.CaptureFixture[str]):
    # slurm.conf of that box: Sockets=2 CoresPerSocket=16 ThreadsPerCore=2
    rc = main(["--check", str(LAMBDA), "--sockets", "2", "--cores-per-socket", "16", "--threads-per-core", "2"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1 and len(out) == 8
    assert out[0] == (
        f"{LAMBDA}:1: CPUs= is not in gres.conf(5) of Slurm 22.05: use Cores= with logical core indices "
        "(on this node shape: Cores=0-15); 32-47 are not cores: OS ids of hyper-thread siblings"
    )
    assert "Cores=16-31" in out[4] and "48-63 are not cores" in out[4]


def test_generated_fake_cluster_gres_has_no_findings(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    conf = tmp_path / "gres.conf"
    conf.write_text("\n".join(fake_gres_lines("node1", [f"/dev/nvidia{i}" for i in range(8)], "a100", 2, 4)) + "\n")
    assert main(["--check", str(conf), "--sockets", "2", "--cores-per-socket", "4"]) == 0
    assert capsys.readouterr().out == f"{conf}: no findings\n"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Name=gpu File=/dev/nvidia0 Links=0,-1\nName=gpu File=/dev/nvidia1 Links=0,-1\n",
         [Finding(1, "Links self entry: this is GPU 0 of the node, so entry 1 (only) must be -1; -1 found at entries: 2"
                    " (slurmd takes it without a message)"),
          Finding(2, "Links to GPU 0 is 0 but line 1 gives -1 the other way (slurmd takes it without a message)")]),
        ("Name=gpu File=/dev/nvidia0 Links=-1,2\nName=gpu File=/dev/nvidia1 Links=4,-1\n",
         [Finding(2, "Links to GPU 0 is 4 but line 1 gives 2 the other way (slurmd takes it without a message)")]),
        ("Name=gpu File=/dev/nvidia[0-1] Links=-1,0\n",
         [Finding(1, "Links= with 2 files: a line with Links must name a single File (slurmd takes it without a message)")]),
        ("NodeName=a[1-2] Name=gpu File=/dev/nvidia0\nNodeName=a2 Name=gpu File=/dev/nvidia0\n",
         [Finding(2, "File=/dev/nvidia0 already given on line 1 for the same node(s): slurmd stops ('gpu duplicate "
                     "device file name (/dev/nvidia0)', then 'Gres GPU plugin failed to load configuration'); each "
                     "device belongs to one line")]),
        ("NodeName=a1 Name=gpu File=/dev/nvidia0\nNodeName=a2 Name=gpu File=/dev/nvidia0  # other node\n", []),
        ("Name=gpu Fiel=/dev/nvidia0\n", [Finding(1, "unknown key 'fiel' (gres.conf(5) keys: autodetect, cores, count, "
                                                   "cpus, file, flags, links, multiplefiles, name, nodename, type)")]),
        ("Name=gpu File=/dev/nvidia0 COREs=0-3\n# Name=gpu File=/dev/nvidia0\nAutoDetect=off\n", []),
    ],
    ids=["self-entry", "asymmetric", "links-multi-file", "dup-file", "same-file-other-node", "typo-key", "clean"],
)
def test_small_files(text: str, expected: list[Finding]):
    assert check_gres(text) == expected
