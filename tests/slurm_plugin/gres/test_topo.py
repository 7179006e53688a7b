"""The ``nvidia-smi topo -m`` parser and the CPU topology mapping.

The default tests read our own captures (tests/fixtures/topo, described in its README); expected
values are worked out by hand from those files and from gres.conf(5)'s rule "Core 0 is the first
core on the first socket". The ``corpus`` tests run the same checks on real captures from public
issues (tests/corpus.py), read off those files by eye.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import corpus
from slurm_plugin.gres.topo import TopoError, check_shape, parse_topo, strip_escapes
from slurm_plugin.gres.topo_cpu import CpuTopology, CpuTopologyError, format_ranges, parse_ranges

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
COMPLETE = FIX / "4gpu-nvlink-pairs-tabs-complete.txt"
CUT = FIX / "8gpu-nvswitch-spaces-cut-off.txt"
OLD = FIX / "2gpu-pcie-no-numa-column.txt"
TOPO = corpus.TOPO
ALL = corpus.files(TOPO, ".txt")


# --- our captures ---------------------------------------------------------------------------


def test_complete_tab_capture_with_nic_rows_and_empty_fields():
    t = parse_topo(COMPLETE.read_text())
    assert t.gpu_count == 4 and not t.partial and t.notes == ()
    assert t.nics == ("NIC0", "NIC1", "NIC2")
    assert [r.nvlinks() for r in t.gpus] == [(-1, 4, 0, 0), (4, -1, 0, 0), (0, 0, -1, 4), (0, 0, 4, -1)]
    assert t.gpus[1].peers == ("NV4", "X", "SYS", "SYS")  # NIC columns left out
    assert t.gpus[0].cpu_affinity == tuple(range(0, 8)) + tuple(range(16, 24))
    assert [r.numa for r in t.gpus] == [0, 0, 1, 1]
    assert [r.line for r in t.gpus] == [3, 4, 5, 6]


def test_nic_rows_cut_off_are_said_but_the_gpus_are_complete():
    text = "\n".join(COMPLETE.read_text().splitlines()[:7]) + "\n"  # up to the NIC0 row
    t = parse_topo(text)
    assert not t.partial and len(t.gpus) == 4
    assert t.notes == ("capture ends before the rows of NIC1..NIC2 (NICs; GPUs complete)",)


def test_space_aligned_capture_cut_inside_gpu5():
    t = parse_topo(CUT.read_text())
    assert t.gpu_count == 8 and t.partial
    assert [r.index for r in t.gpus] == [0, 1, 2, 3, 4]
    assert t.missing == (5, 6, 7)
    assert t.gpus[0].nvlinks() == (-1, 12, 12, 12, 12, 12, 12, 12)
    assert [r.numa for r in t.gpus] == [2, 2, 0, 0, 3]  # GPU index order is not NUMA order
    assert t.gpus[2].cpu_affinity == tuple(range(0, 8)) + tuple(range(32, 40))
    assert t.nics == ("NIC0", "NIC1")
    assert t.notes == ("line 8: row GPU5 is cut off (4 of 13 cells)",
                       "capture ends before the rows of GPU6..GPU7")


def test_last_row_without_a_newline_in_a_short_capture_may_be_cut():
    rows = CUT.read_text().splitlines()[:7]  # the prompt, the header, GPU0..GPU4
    t = parse_topo("\n".join(rows))
    assert [r.index for r in t.gpus] == [0, 1, 2, 3]
    assert t.missing == (4, 5, 6, 7)
    assert "line 7: row GPU4 ends the capture without a newline and may be cut" in t.notes
    t = parse_topo("\n".join(rows) + "\n")
    assert [r.index for r in t.gpus] == [0, 1, 2, 3, 4]
    assert t.gpus[4].cpu_affinity == tuple(range(24, 32)) + tuple(range(56, 64))


def test_capture_without_numa_column_and_a_named_nic():
    t = parse_topo(OLD.read_text())
    assert t.nics == ("mlx5_0",) and not t.partial
    assert [r.peers for r in t.gpus] == [("X", "PHB"), ("PHB", "X")]
    assert [r.nvlinks() for r in t.gpus] == [(-1, 0), (0, -1)]
    assert [r.numa for r in t.gpus] == [None, None]
    assert t.gpus[1].cpu_affinity == (0, 1, 2, 3)


# --- the real captures (corpus) -------------------------------------------------------------


@pytest.mark.corpus
def test_the_capture_directory_is_there():
    assert len(ALL) == 5


@pytest.mark.corpus
@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_every_capture_parses_with_consistent_rows(path: Path):
    t = parse_topo(path.read_text())
    assert t.gpu_count in (2, 8)
    for row in t.gpus:
        links = row.nvlinks()
        assert len(links) == t.gpu_count
        assert links[row.index] == -1 and links.count(-1) == 1
        assert row.cpu_affinity  # every complete row in these captures has a CPU list
    assert sorted(set(range(t.gpu_count)) - {r.index for r in t.gpus}) == list(t.missing)


@pytest.mark.corpus
def test_h100_tab_separated_with_nic_columns_and_empty_fields():
    t = parse_topo((TOPO / "8xH100-nccl-issue-1264.txt").read_text())
    assert t.gpu_count == 8 and not t.partial
    assert t.nics == tuple(f"NIC{i}" for i in range(10))
    g0, g4 = t.gpus[0], t.gpus[4]
    assert g0.nvlinks() == (-1, 18, 18, 18, 18, 18, 18, 18)
    assert g0.cpu_affinity == tuple(range(0, 56)) + tuple(range(112, 168))
    assert g0.numa == 0 and g4.numa == 1
    assert g4.cpu_affinity[0] == 56 and g4.cpu_affinity[-1] == 223
    # the NIC rows stop after NIC2: said, but the GPU result is complete
    assert any("NIC3..NIC9" in n for n in t.notes)


@pytest.mark.corpus
def test_dgx_a100_space_aligned_and_cut_inside_gpu4():
    t = parse_topo((TOPO / "DGX-A100-40GB-nccl-issue-1505-truncated.txt").read_text())
    assert [r.index for r in t.gpus] == [0, 1, 2, 3]
    assert t.missing == (4, 5, 6, 7) and t.partial
    assert t.gpus[0].nvlinks() == (-1, 12, 12, 12, 12, 12, 12, 12)
    assert t.gpus[0].numa == 3 and t.gpus[2].numa == 1  # GPU index order is not NUMA order
    assert t.gpus[2].cpu_affinity == tuple(range(16, 32)) + tuple(range(144, 160))
    assert any("line 7" in n and "GPU4" in n and "cut off" in n for n in t.notes)


@pytest.mark.corpus
def test_pcie_capture_without_trailing_newline_drops_the_possibly_cut_last_row():
    t = parse_topo((TOPO / "8xPCIe-mlx4-PIX-PHB-kubernetes-issue-53497-truncated.txt").read_text())
    assert t.nics == ("mlx4_0",)
    assert [r.index for r in t.gpus] == [0, 1, 2, 3]
    assert t.gpus[1].peers == ("PIX", "X", "PHB", "PHB", "SYS", "SYS", "SYS", "SYS")
    assert t.gpus[1].nvlinks() == (0, -1, 0, 0, 0, 0, 0, 0)
    assert t.missing == (4, 5, 6, 7)
    assert t.gpus[0].numa is None  # no NUMA column in this 2017 capture


@pytest.mark.corpus
def test_same_capture_with_a_newline_keeps_gpu4():
    text = (TOPO / "8xPCIe-mlx4-PIX-PHB-kubernetes-issue-53497-truncated.txt").read_text() + "\n"
    t = parse_topo(text)
    assert [r.index for r in t.gpus] == [0, 1, 2, 3, 4]
    assert t.gpus[4].cpu_affinity == tuple(range(10, 20)) + tuple(range(30, 40))


@pytest.mark.corpus
def test_two_gpu_workstation_and_all_sys_box():
    t = parse_topo((TOPO / "2xRTX5090-PHB-club-3090-issue-1229.txt").read_text())
    assert t.gpu_count == 2 and [r.peers for r in t.gpus] == [("X", "PHB"), ("PHB", "X")]
    t = parse_topo((TOPO / "8xRTX4090-pcie-all-SYS-go-gpuallocator-issue-17.txt").read_text())
    assert not t.partial and all(set(r.nvlinks()) == {-1, 0} for r in t.gpus)


def test_tabs_and_spaces_give_the_same_result():
    tab = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\t0-3\t0\nGPU1\tNV4\t X \t4-7\t1\n"
    space = "        GPU0    GPU1    CPU Affinity    NUMA Affinity\nGPU0     X      NV4     0-3     0\nGPU1    NV4      X      4-7     1\n"
    assert parse_topo(tab).gpus == parse_topo(space).gpus
    assert parse_topo(tab).gpus[1].nvlinks() == (4, -1)


@pytest.mark.parametrize(
    "text, words",
    [
        ("hello\nworld\n", "no 'nvidia-smi topo -m' header"),
        ("\tGPU0\tGPU1\nGPU0\t X \tFOO\n", "line 2: row GPU0: unknown connection 'FOO'"),
        ("\tGPU0\tCPU Affinity\nGPU0\t X \t3-1\n", "line 2: row GPU0: CPU Affinity: descending range"),
        ("\tGPU0\nGPU9\t X \n", "line 2: row 'GPU9' is not a column"),
    ],
    ids=["no-header", "bad-cell", "bad-cpulist", "unknown-row"],
)
def test_malformed_captures_name_the_line(text: str, words: str):
    with pytest.raises(TopoError, match=words.replace("(", r"\(")):
        parse_topo(text)


# --- CPU topology -------------------------------------------------------------------------


def test_from_shape_matches_the_h100_capture_by_hand():
    cpu = CpuTopology.from_shape(2, 56, 2)
    # 0-55 and their siblings 112-167 are socket 0: logical cores 0-55
    assert cpu.logical_cores(list(range(0, 56)) + list(range(112, 168))) == tuple(range(56))
    assert cpu.logical_cores([56, 168]) == (56,)  # CPU 168 is the sibling of CPU 56
    assert cpu.cores == 112


def test_cpu_beyond_the_shape_names_the_shape():
    with pytest.raises(CpuTopologyError, match=r"CPU 64 does not exist on a node of 2 socket\(s\) x 16 cores x 2"):
        CpuTopology.from_shape(2, 16, 2).logical_cores([64])


def test_from_sysfs_reads_an_injected_tree(tmp_path: Path):
    # 2 sockets x 2 cores x 2 threads, kernel core_ids not contiguous (0, 4) as on real Xeons
    place = {0: (0, 0), 1: (0, 4), 2: (1, 0), 3: (1, 4), 4: (0, 0), 5: (0, 4), 6: (1, 0), 7: (1, 4)}
    for cpu, (pkg, core) in place.items():
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text(f"{pkg}\n")
        (d / "core_id").write_text(f"{core}\n")
    (tmp_path / "cpufreq").mkdir()
    t = CpuTopology.from_sysfs(tmp_path)
    assert (t.sockets, t.cores_per_socket, t.threads_per_core) == (2, 2, 2)
    assert t.logical_cores([1, 5]) == (1,)
    assert t.logical_cores([2, 3]) == (2, 3)


def test_from_sysfs_empty_tree_is_an_error(tmp_path: Path):
    with pytest.raises(CpuTopologyError, match="no CPU topology found"):
        CpuTopology.from_sysfs(tmp_path)


def test_this_machine_sysfs_is_readable():
    t = CpuTopology.from_sysfs()
    assert len(t.cpu_to_core) == t.sockets * t.cores_per_socket * t.threads_per_core


@given(st.sets(st.integers(min_value=0, max_value=300), max_size=40))
def test_ranges_round_trip(values: set[int]):
    text = format_ranges(values)
    assert (parse_ranges(text) if text else ()) == tuple(sorted(values))


@pytest.mark.parametrize("bad", ["", "1,,2", "a-b", "5-3", "1-"])
def test_parse_ranges_rejects(bad: str):
    with pytest.raises(CpuTopologyError):
        parse_ranges(bad)


# --- terminal escape codes ----------------------------------------------------
# Our fixtures tests/fixtures/topo/ are written by hand in the form `nvidia-smi topo -m > file`
# leaves from a terminal: the header underlined (ESC[4m ... ESC[0m, as our H200 capture has), and
# in the second also bold row names closed the `tput sgr0` way (ESC(B ESC[m).
FIXTOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"


@pytest.mark.parametrize("raw, clean", [
    ("\t\x1b[4mGPU0\tCPU Affinity\x1b[0m", "\tGPU0\tCPU Affinity"),
    ("\x1b[1;31mGPU1\x1b[m", "GPU1"),
    ("\x1b[1mGPU0\x1b(B\x1b[m\t X ", "GPU0\t X "),
    ("\x1b]0;nvidia-smi\x07GPU0", "GPU0"),
    ("\x1b]8;;http://x\x1b\\GPU0", "GPU0"),
    ("\x9b4mGPU0", "GPU0"),
    ("no escapes [4m here", "no escapes [4m here"),
], ids=["underline", "colour", "sgr0", "osc-title", "osc-st", "c1-csi", "plain"])
def test_strip_escapes(raw: str, clean: str):
    assert strip_escapes(raw) == clean


def test_underlined_header_is_read():
    t = parse_topo((FIXTOPO / "1gpu-underlined-header.txt").read_text())
    assert t.gpu_count == 1 and not t.partial
    assert t.gpus[0].cpu_affinity == tuple(range(16)) and t.gpus[0].numa == 0
    assert t.gpus[0].nvlinks() == (-1,)


def test_bold_rows_and_sgr0_are_read():
    t = parse_topo((FIXTOPO / "2gpu-192cpu-bold-rows.txt").read_text())
    assert t.gpu_count == 2 and t.nics == ("NIC0",) and not t.partial
    assert t.gpus[1].cpu_affinity == tuple(range(48, 96)) + tuple(range(144, 192)) and t.gpus[1].numa == 1


def test_our_h200_capture_with_escapes_is_read():
    t = parse_topo((FIXTOPO / "1xH200-ansi-escapes-in-header.txt").read_text())
    assert t.gpu_count == 1 and t.gpus[0].cpu_affinity == tuple(range(16)) and t.gpus[0].numa == 0


# --- a node shape the capture contradicts -----------------------------------
# 2gpu-192cpu-bold-rows.txt: GPU0 on CPUs 0-47,96-143 (NUMA 0), GPU1 on 48-95,144-191 (NUMA 1):
# 192 CPUs, 2 sockets x 48 cores x 2 threads, second threads from CPU 96.

@pytest.mark.parametrize("shape, words", [
    ((2, 52, 2), "CPU 40 and CPU 144 are threads of one core"),  # the wrong shape: 40+104
    ((2, 96, 1), "is NUMA node 0 but spans sockets 0, 1"),
    ((4, 24, 2), "is NUMA node 0 but spans sockets 0, 1"),
    ((2, 40, 2), "go up to CPU 191 (192 CPUs at least) but a 2x40x2 node has 160 CPUs"),
], ids=["2x52x2", "2x96x1", "4x24x2", "too-small"])
def test_contradicting_shape_is_refused(shape: tuple[int, int, int], words: str):
    t = parse_topo((FIXTOPO / "2gpu-192cpu-bold-rows.txt").read_text())
    with pytest.raises(CpuTopologyError, match=re.escape(words)):
        check_shape(t, CpuTopology.from_shape(*shape))


def test_the_real_shape_is_accepted():
    t = parse_topo((FIXTOPO / "2gpu-192cpu-bold-rows.txt").read_text())
    check_shape(t, CpuTopology.from_shape(2, 48, 2))
    check_shape(t, CpuTopology.from_shape(1, 96, 2))  # one socket, two NUMA nodes (SNC): possible
