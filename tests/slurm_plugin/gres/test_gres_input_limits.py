"""dlgres on hostile input: every file it reads, every CPU list, node shape, capture matrix and
fake-NVML field is bounded and checked, ending in one line and exit 2 (or a ``--check``
finding), never a hang, a memory blow-up, a traceback or a gres.conf its own ``--check`` refuses.

The hang cases assert the clear error, not a time: unchecked, each of them would block on a
FIFO, read ``/dev/zero`` for ever or expand ``0-99999999999``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slurm_plugin import hostlist
from slurm_plugin.gres import cli as gres_cli
from slurm_plugin.gres import conf as gres_conf
from slurm_plugin.gres import topo_cpu
from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.nvml_fake import FakeNvml
from slurm_plugin.gres.topo import TopoError, parse_topo
from slurm_plugin.gres.topo_cpu import CpuTopology, CpuTopologyError, parse_ranges

TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
COMPLETE = TOPO / "4gpu-nvlink-pairs-tabs-complete.txt"
SHAPE = ["--sockets", "2", "--cores-per-socket", "8", "--threads-per-core", "2"]
BIG_CPU = ("CPU 99999999999 in '0-99999999999' is above 65532, the highest CPU id of a Slurm node "
           "(Slurm counts a node's CPUs in 16 bits)")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    rc, out, err = _run(capsys, *argv)
    assert (rc, out) == (2, ""), err
    assert err.startswith("dlgres: ") and err.count("\n") == 1
    return err


# --- 1. every file dlgres reads is a regular file of sane size --------------------------------

def _special(kind: str, tmp_path: Path) -> tuple[str, str]:
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
        return str(path), "a FIFO; give a regular file"
    if kind == "zero":
        return "/dev/zero", "a device; give a regular file"
    return str(tmp_path), "a directory; give a regular file"


_ARGVS = {
    "from-topo": lambda p, conf: ["--from-topo", p, *SHAPE],
    "check": lambda p, conf: ["--check", p],
    "fake-nvml": lambda p, conf: ["--fake-nvml", p, *SHAPE],
    "slurm-conf": lambda p, conf: ["--check", conf, "--slurm-conf", p],
    "check-fake-nvml": lambda p, conf: ["--check", conf, "--fake-nvml", p],   # AutoDetect reads GPU names
}


@pytest.mark.parametrize("kind", ["fifo", "zero", "dir"])
@pytest.mark.parametrize("option", sorted(_ARGVS))
def test_non_regular_input_files_are_refused_naming_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            kind: str, option: str):
    path, why = _special(kind, tmp_path)
    conf = tmp_path / "gres.conf"
    conf.write_text("AutoDetect=nvml\nName=gpu Type=a100 File=/dev/nvidia0\n")
    err = _one_line_exit_2(capsys, _ARGVS[option](path, str(conf)))
    assert err == f"dlgres: cannot read {path}: {why}\n"


def test_an_input_file_over_the_limit_is_refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gres_cli, "MAX_INPUT_BYTES", 100)
    err = _one_line_exit_2(capsys, ["--from-topo", str(COMPLETE), *SHAPE])
    assert err == f"dlgres: cannot read {COMPLETE}: larger than 100 bytes (0 MiB), the most dlgres reads\n"


def test_a_missing_or_binary_input_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    err = _one_line_exit_2(capsys, ["--check", str(tmp_path / "none")])
    assert err == f"dlgres: cannot read {tmp_path / 'none'}: No such file or directory\n"
    binary = tmp_path / "bin"
    binary.write_bytes(b"Name=gpu\xff\n")
    err = _one_line_exit_2(capsys, ["--check", str(binary)])
    assert err == (f"dlgres: {binary}:1: byte 0xff is not UTF-8 text (outside a comment); dlgres reads values "
                   "as UTF-8: write them in ASCII\n")


def test_sysfs_topology_files_are_read_as_small_regular_files(tmp_path: Path):
    top = tmp_path / "cpu0" / "topology"
    top.mkdir(parents=True)
    (top / "core_id").write_text("0\n")
    os.mkfifo(top / "physical_package_id")
    with pytest.raises(CpuTopologyError, match="physical_package_id: a FIFO; give a regular file"):
        CpuTopology.from_sysfs(tmp_path)
    (top / "physical_package_id").unlink()
    (top / "physical_package_id").write_text("zero\n")
    with pytest.raises(CpuTopologyError, match="physical_package_id: not a CPU topology id"):
        CpuTopology.from_sysfs(tmp_path)


# --- 2. CPU and core lists are bounded before anything is expanded ---------------------------

def test_parse_ranges_refuses_ids_beyond_a_slurm_node_before_expanding():
    with pytest.raises(CpuTopologyError) as e:
        parse_ranges("0-99999999999")
    assert str(e.value) == BIG_CPU
    with pytest.raises(CpuTopologyError, match="above 65532"):
        parse_ranges("0-" + "9" * 5000)   # int() of a 5000-digit string is never tried
    with pytest.raises(CpuTopologyError, match="core 9 in '0-9' is above 7, the highest core id"):
        parse_ranges("0-9", limit=8, what="core")
    assert parse_ranges("0-65532") == tuple(range(65533))


def test_parse_ranges_merges_repeated_wide_ranges():
    """200000 copies of the widest allowed range: merged first, expanded once."""
    assert parse_ranges(",".join(["0-65532"] * 200_000) + ",5") == tuple(range(65533))
    assert parse_ranges("8-9,0-3,2-5,5") == (0, 1, 2, 3, 4, 5, 8, 9)


def test_capture_with_a_huge_cpu_range_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    cap = tmp_path / "topo.txt"
    cap.write_text(COMPLETE.read_text().replace("0-7,16-23", "0-99999999999", 1))
    err = _one_line_exit_2(capsys, ["--from-topo", str(cap), *SHAPE])
    assert err == f"dlgres: {cap}: line 3: row GPU0: CPU Affinity: {BIG_CPU}\n"


def test_check_of_a_huge_cores_range_is_a_finding(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    conf = tmp_path / "gres.conf"
    conf.write_text("Name=gpu File=/dev/nvidia0 Cores=0-99999999999\nName=gpu File=/dev/nvidia1 CPUs=0-99999999999\n")
    rc, out, err = _run(capsys, "--check", str(conf))
    assert (rc, err) == (1, "")
    assert out.splitlines() == [
        f"{conf}:1: Cores=0-99999999999: " + BIG_CPU.replace("CPU", "core", 1).replace("CPU id", "core id"),
        f"{conf}:2: CPUs=0-99999999999: {BIG_CPU}",
    ]


def test_check_of_huge_file_and_node_lists_is_bounded(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    conf = tmp_path / "gres.conf"
    conf.write_text("Name=gpu File=/dev/nvidia[0-99999]\nNodeName=n[0-99999] Name=gpu File=/dev/nvidia[0-7]\n"
                    "Name=gpu File=/dev/x[0-60000],/dev/y[0-60000]\nNodeName=a[0]" + "[0]" * 3000 + " Name=gpu\n")
    rc, out, err = _run(capsys, "--check", str(conf))
    assert (rc, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == (f"{conf}:1: File=/dev/nvidia[0-99999]: the range 0-99999 names more than 65536 files: "
                        "slurmd stops ('_parse_single_range: Too many hosts in range `0-99999'', then 'can't parse File=/dev/nvidia[0-99999]')")
    assert lines[1] == f"{conf}:2: NodeName= names more than 65536 nodes, more than dlgres checks"
    assert lines[2] == f"{conf}:3: File= names more than 65536 files, more than dlgres checks"
    assert lines[3].startswith(f"{conf}:4: NodeName=a[0][0]") and "too many brackets in one name" in lines[3]


def test_check_of_too_many_node_lines_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    conf = tmp_path / "gres.conf"
    conf.write_text("NodeName=n[0-65535] Name=gpu File=/dev/nvidia[0-7]\n" * 20)
    err = _one_line_exit_2(capsys, ["--check", str(conf)])
    assert err == (f"dlgres: {conf}: line 17: the NodeName= lists up to here name 1114112 nodes in all, more "
                   "than the 1048576 dlgres checks\n")


def test_check_of_global_lines_times_a_huge_slurm_conf_is_refused(capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path):
    slurm = tmp_path / "slurm.conf"
    slurm.write_text("GresTypes=gpu\nNodeName=n[0-65535] Gres=gpu:1\n")
    conf = tmp_path / "gres.conf"
    conf.write_text("".join(f"Name=gpu File=/dev/nvidia{k}\n" for k in range(17)))
    err = _one_line_exit_2(capsys, ["--check", str(conf), "--slurm-conf", str(slurm)])
    assert err == (f"dlgres: {conf}: 17 lines over 65536 nodes make 1114112 (node, line) pairs, more than the "
                   "1048576 dlgres checks\n")
    slurm.write_text("GresTypes=gpu\n" + "".join(f"NodeName=x{k}[0-9999] Gres=gpu:1\n" for k in range(7)))
    err = _one_line_exit_2(capsys, ["--check", str(conf), "--slurm-conf", str(slurm)])
    assert err == f"dlgres: {slurm}:8: the NodeName= lines up to here name more than 65536 nodes, more than dlgres checks\n"


def test_hostlist_limit_refuses_before_the_whole_list_is_built():
    assert hostlist.expand("n[1-3],m", limit=4) == ["n1", "n2", "n3", "m"]
    with pytest.raises(ValueError, match=r"more than 1000 names"):
        hostlist.expand("n[0-99999],m[0-99999]", limit=1000)
    with pytest.raises(ValueError, match="range too large"):
        hostlist.expand("n[0-99999999999]")


def test_gres_conf_parse_bounds_each_expansion():
    rec = gres_conf.parse_line(1, "Name=gpu File=/dev/nvidia[0-65535],/dev/x")
    assert rec is not None and not rec.usable
    assert rec.faults == ["File= names more than 65536 files, more than dlgres checks"]
    assert check_gres("Name=gpu File=/dev/nvidia[0-1023]\n") == []


# --- 3. the node shape options are bounded -----------------------------------------------------

@pytest.mark.parametrize("option, value, limit", [
    ("--sockets", "100000", 64), ("--cores-per-socket", "100000", 1024), ("--threads-per-core", "100000", 8),
    ("--sockets", "65", 64), ("--cores-per-socket", "1025", 1024), ("--threads-per-core", "9", 8),
])
def test_shape_options_beyond_a_real_node_are_usage_errors(capsys: pytest.CaptureFixture[str], option: str,
                                                            value: str, limit: int):
    argv = ["--from-topo", str(COMPLETE), "--sockets", "2", "--cores-per-socket", "8", option, value]
    rc, out, err = _run(capsys, *argv)
    assert (rc, out) == (2, "")
    assert err == f"dlgres: {option}: {value} is more than {limit}, the most a real node has\n"


def test_shape_product_beyond_a_slurm_node_is_refused(capsys: pytest.CaptureFixture[str]):
    err = _one_line_exit_2(capsys, ["--from-topo", str(COMPLETE), "--sockets", "64", "--cores-per-socket", "1024",
                                    "--threads-per-core", "8"])
    assert err == ("dlgres: node shape 64x1024x8: 524288 CPUs, more than 65533, the most a Slurm node has "
                   "(Slurm counts a node's CPUs in 16 bits)\n")
    with pytest.raises(CpuTopologyError, match="--sockets 100000 is more than 64"):
        CpuTopology.from_shape(100000, 1, 1)


def test_shape_option_with_a_huge_number_is_an_int_error(capsys: pytest.CaptureFixture[str]):
    rc, _, err = _run(capsys, "--sockets", "9" * 5000, "--cores-per-socket", "1")
    assert rc == 2 and err.startswith("dlgres: --sockets: invalid int value: '999") and err.count("\n") == 1


# --- 4. the capture matrix must be one nvidia-smi can print ------------------------------------

def _capture(tmp_path: Path, text: str) -> Path:
    cap = tmp_path / "topo.txt"
    cap.write_text(text)
    return cap


def test_asymmetric_capture_is_refused_naming_both_cells(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    cap = _capture(tmp_path, COMPLETE.read_text().replace("GPU1\tNV4", "GPU1\tNV9"))
    err = _one_line_exit_2(capsys, ["--from-topo", str(cap), *SHAPE])
    assert err == (f"dlgres: {cap}: line 4: GPU1 to GPU0 is NV9 but line 3 gives GPU0 to GPU1 as NV4: "
                   "'nvidia-smi topo -m' prints a symmetric matrix, so the capture was edited or mangled; "
                   "take a fresh one\n")
    cap = _capture(tmp_path, COMPLETE.read_text().replace("GPU3\tSYS\tSYS", "GPU3\tSYS\tPIX"))
    assert "GPU3 to GPU1 is PIX but line 4 gives GPU1 to GPU3 as SYS" in _one_line_exit_2(
        capsys, ["--from-topo", str(cap), *SHAPE])


def test_asymmetric_partial_capture_is_refused_too(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    text = COMPLETE.read_text().replace("GPU1\tNV4", "GPU1\tNV9")
    cap = _capture(tmp_path, text[: text.index("\nGPU3") + 1])
    err = _one_line_exit_2(capsys, ["--from-topo", str(cap), *SHAPE, "--allow-partial"])
    assert "GPU1 to GPU0 is NV9 but line 3 gives GPU0 to GPU1 as NV4" in err


@pytest.mark.parametrize("text, words", [
    ("\tGPU0\tGPU1\nGPU0\t X \t X \nGPU1\tNV4\t X \n",
     "line 2: row GPU0 has X (the GPU itself) under GPU0, GPU1, not only under GPU0"),
    ("\tGPU0\tGPU1\nGPU0\tNV4\tNV4\nGPU1\tNV4\t X \n", "line 2: row GPU0 has X (the GPU itself) under no column"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n", "line 3: a second row 'GPU0' (the first is line 2)"),
    ("\tGPU0\tGPU0\nGPU0\t X \t X \n", "line 1: the header names column GPU0 twice"),
])
def test_matrix_nvidia_smi_cannot_print_is_refused(text: str, words: str):
    with pytest.raises(TopoError) as e:
        parse_topo(text)
    assert str(e.value).startswith(words)


def test_what_from_topo_writes_on_every_fixture_passes_its_own_check(capsys: pytest.CaptureFixture[str],
                                                                      tmp_path: Path):
    rc, out, err = _run(capsys, "--from-topo", str(COMPLETE), *SHAPE)
    assert rc == 0, err
    conf = _capture(tmp_path, out)
    assert _run(capsys, "--check", str(conf), *SHAPE)[:1] == (0,)


# --- 5. every field of a fake-NVML device is checked ------------------------------------------

_DEV = {"name": "NVIDIA A100-SXM4-40GB", "bus_id": "00000000:07:00.0", "minor": 0, "cpu_affinity": "0-7"}


def _record(tmp_path: Path, *devices: object) -> Path:
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps({"devices": list(devices)}))
    return path


@pytest.mark.parametrize("device, words", [
    ({k: v for k, v in _DEV.items() if k != "bus_id"}, "device 0: bus_id: missing (each device needs name, bus_id, "
                                                        "minor and cpu_affinity)"),
    ({k: v for k, v in _DEV.items() if k != "name"}, "device 0: name: missing"),
    (dict(_DEV, minor="abc"), 'device 0: minor: "abc" is not a minor number (an integer 0 to 253: /dev/nvidia<minor>)'),
    (dict(_DEV, minor=-1), "device 0: minor: -1 is not a minor number (an integer 0 to 253"),
    (dict(_DEV, minor=254), "device 0: minor: 254 is not a minor number"),
    (dict(_DEV, minor=True), "device 0: minor: true is not a minor number"),
    (dict(_DEV, minor=1.5), "device 0: minor: 1.5 is not a minor number"),
    (dict(_DEV, bus_id="zz"), 'device 0: bus_id: "zz" is not a PCI bus id such as "00000000:1B:00.0"'),
    (dict(_DEV, bus_id=7), "device 0: bus_id: 7 is not a PCI bus id"),
    (dict(_DEV, name=""), 'device 0: name: "" is not a GPU name'),
    (dict(_DEV, name="A100\nAutoDetect=nvml"), "device 0: name: "),
    (dict(_DEV, name=["x"]), "device 0: name: "),
    (dict(_DEV, cpu_affinity="0-99999999999"), f"device 0: cpu_affinity: {BIG_CPU}"),
    (dict(_DEV, cpu_affinity=7), 'device 0: cpu_affinity: 7 is not a CPU list string such as "0-55,112-167"'),
    (dict(_DEV, cpu_affinity="a-b"), "device 0: cpu_affinity: bad range item 'a-b'"),
    (dict(_DEV, nvlinks=[["gpu", "00000000:07:00.0"]] * 19), "device 0: nvlinks: a list of at most 18 links"),
    (dict(_DEV, nvlinks=[["bridge", "00000000:07:00.0"]]), 'device 0: nvlinks[0]: not ["gpu"|"switch", remote_bus_id]'),
    (dict(_DEV, nvlinks=[["gpu", "x"]]), 'device 0: nvlinks[0]: "x" is not a PCI bus id'),
    (dict(_DEV, colour="green"), "device 0: colour: unknown key"),
    ("gpu0", "device 0: not a JSON object"),
])
def test_fake_nvml_fields_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path, device: object, words: str):
    path = _record(tmp_path, device)
    err = _one_line_exit_2(capsys, ["--fake-nvml", str(path), *SHAPE])
    assert err.startswith(f"dlgres: {path}: {words}"), err


def test_fake_nvml_second_device_and_duplicates_are_named(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    path = _record(tmp_path, _DEV, dict(_DEV, minor=1))
    assert _one_line_exit_2(capsys, ["--fake-nvml", str(path), *SHAPE]) == (
        f"dlgres: {path}: device 1: bus_id: 00000000:07:00.0 is also device 0's: each GPU has its own\n")
    path = _record(tmp_path, _DEV, dict(_DEV, bus_id="00000000:08:00.0"))
    assert _one_line_exit_2(capsys, ["--fake-nvml", str(path), *SHAPE]) == (
        f"dlgres: {path}: device 1: minor: 0 is also device 0's: each GPU has its own /dev/nvidia0\n")
    path = _record(tmp_path, *[dict(_DEV, bus_id=f"0000{k:04x}:07:00.0", minor=k % 254) for k in range(1025)])
    assert _one_line_exit_2(capsys, ["--fake-nvml", str(path), *SHAPE]) == (
        f"dlgres: {path}: 1025 devices: at most 1024 per node (gres.conf(5))\n")


def test_fake_nvml_is_documented_as_a_test_stand_in():
    doc = " ".join((__import__("slurm_plugin.gres.nvml_fake").gres.nvml_fake.__doc__ or "").split())
    assert "a test stand-in for a GPU's NVML" in doc
    assert FakeNvml.from_file(Path(__file__).resolve().parents[2] / "fixtures" / "nvml" / "hgx-h100.json").devices


# --- 6. a Type derived from a GPU name passes the --type rule, and --check applies it -------------

def test_derived_type_must_pass_the_type_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    path = _record(tmp_path, dict(_DEV, name="$(id)a100"))
    err = _one_line_exit_2(capsys, ["--fake-nvml", str(path), *SHAPE])
    assert err == ("dlgres: GPU 0 (00000000:07:00.0): its name '$(id)a100' gives Type '$(id)a100', not a gres "
                   "Type: letters, digits, '_', '.' and '-' (not first), as dlsubmit requests it; give the Type "
                   "with --type, e.g. --type a100\n")
    rc, out, _ = _run(capsys, "--fake-nvml", str(path), *SHAPE, "--type", "a100")
    assert rc == 0 and "Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-7 Links=-1" in out


def test_type_option_refuses_a_leading_dash(capsys: pytest.CaptureFixture[str]):
    err = _one_line_exit_2(capsys, ["--from-topo", str(COMPLETE), *SHAPE, "--type=-a100"])
    assert err.startswith("dlgres: --type '-a100' is not a gres Type")


@pytest.mark.parametrize("gtype", ["$(id)a100", "-a100", "a100'", "a100;x", '""'])
def test_check_applies_the_type_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path, gtype: str):
    conf = tmp_path / "gres.conf"
    conf.write_text(f"Name=gpu Type={gtype} File=/dev/nvidia0\n")
    rc, out, err = _run(capsys, "--check", str(conf))
    assert (rc, err) == (1, "")
    assert out == (f"{conf}:1: Type={gtype.strip(chr(34))}: not a gres Type: letters, digits, '_', '.' and '-' (not first), as "
                   "dlsubmit requests it (dlgres --type refuses it too); rename the type here and in slurm.conf "
                   "Gres=\n")


def test_check_passes_real_type_names():
    text = "".join(f"Name=gpu Type={t} File=/dev/nvidia{k}\n"
                   for k, t in enumerate(["a100", "h100", "rtx4090", "a100_3g.20gb", "tesla-v100", "1g.5gb"]))
    assert [f.message for f in check_gres(text) if "Type" in f.message] == []


def test_shape_limits_are_the_documented_ones():
    assert (topo_cpu.MAX_SOCKETS, topo_cpu.MAX_CORES_PER_SOCKET, topo_cpu.MAX_THREADS_PER_CORE,
            topo_cpu.MAX_CPUS) == (64, 1024, 8, 65533)
