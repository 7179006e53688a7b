"""gres.conf generation: from a recorded fake NVML, from topo captures, and for dlcluster.

The NVML path runs only against :class:`slurm_plugin.gres.nvml_fake.FakeNvml` records
(tests/fixtures/nvml, built from real captures); no GPU exists here. Expected lines are
written out by hand: HGX H100 2x56x2 (GPU0-3 on CPUs 0-55,112-167), DGX A100 2x64x2 (GPU0/1 on
48-63,176-191; GPU2/3 on 16-31,144-159); for ``--from-topo``, our captures in tests/fixtures/topo
(README there), and the real ones in the ``corpus`` tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpus
from slurm_plugin.gres import generate as gres
from slurm_plugin.gres import nvml
from slurm_plugin.gres.cli import main
from slurm_plugin.gres.nvml_fake import FakeNvml, FakeNvmlError
from slurm_plugin.gres.topo_cpu import CpuTopology

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"
TOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"
COMPLETE = str(TOPO / "4gpu-nvlink-pairs-tabs-complete.txt")
CUT = str(TOPO / "8gpu-nvswitch-spaces-cut-off.txt")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_fake_nvml_h100_reads_names_buses_affinity_and_switch_links():
    gpus = nvml.read_gpus(FakeNvml.from_file(FIX / "hgx-h100.json"), cpu_count=224)
    assert len(gpus) == 8
    assert gpus[0].name == "NVIDIA H100 80GB HBM3" and gpus[0].bus_id == "00000000:1B:00.0"
    assert gpus[0].cpu_affinity == tuple(range(56)) + tuple(range(112, 168))
    assert gpus[7].cpu_affinity == tuple(range(56, 112)) + tuple(range(168, 224))
    assert gpus[0].switch_links == 18 and gpus[0].peer_links == {}
    # NV18 between every pair, as the capture shows
    assert nvml.link_matrix(gpus)[3] == [18, 18, 18, -1, 18, 18, 18, 18]


def test_fake_nvml_shuts_nvml_down():
    fake = FakeNvml.from_file(FIX / "pcie-rtx4090.json")
    nvml.read_gpus(fake, cpu_count=224)
    assert fake.initialised and fake.shutdowns == 1


def test_direct_nvlink_bridge_counts_links_per_peer():
    rec = {"devices": [
        {"name": "NVIDIA RTX A6000", "bus_id": "00000000:41:00.0", "minor": 1, "cpu_affinity": "0-3",
         "nvlinks": [["gpu", "00000000:01:00.0"]] * 4},
        {"name": "NVIDIA RTX A6000", "bus_id": "00000000:01:00.0", "minor": 0, "cpu_affinity": "4-7",
         "nvlinks": [["gpu", "00000000:41:00.0"]] * 4},
    ]}
    gpus = nvml.read_gpus(FakeNvml(rec), cpu_count=8)
    devs = gres.devices_from_nvml(gpus, CpuTopology.from_shape(2, 4, 1))
    # bus 01 sorts first although NVML listed it second; its device file is /dev/nvidia0
    assert [(d.file, d.cores, d.links) for d in devs] == [
        ("/dev/nvidia0", (4, 5, 6, 7), (-1, 4)),
        ("/dev/nvidia1", (0, 1, 2, 3), (4, -1)),
    ]
    assert devs[0].type == "rtxa6000"


def test_dgx_a100_lines_follow_bus_order_with_permuted_minors():
    gpus = nvml.read_gpus(FakeNvml.from_file(FIX / "dgx-a100.json"), cpu_count=256)
    lines = gres.gres_lines("dgx1", gres.devices_from_nvml(gpus, CpuTopology.from_shape(2, 64, 2)))
    nv12 = lambda i: ",".join("-1" if j == i else "12" for j in range(8))  # noqa: E731
    assert lines[0] == f"NodeName=dgx1 Name=gpu Type=a100 File=/dev/nvidia2 Cores=48-63 Links={nv12(0)}"
    assert lines[2] == f"NodeName=dgx1 Name=gpu Type=a100 File=/dev/nvidia0 Cores=16-31 Links={nv12(2)}"
    assert lines[6] == f"NodeName=dgx1 Name=gpu Type=a100 File=/dev/nvidia4 Cores=80-95 Links={nv12(6)}"


@pytest.mark.parametrize(
    "name, short",
    [
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA L40S", "l40s"),
    ],
)
def test_gpu_type_short_names(name: str, short: str):
    assert gres.gpu_type(name) == short


def test_gres_lines_refuses_bad_links_and_duplicate_files():
    ok = gres.GpuDevice("/dev/nvidia0", None, (), (-1, 2))
    with pytest.raises(ValueError, match="Links has 2 entries for 1 GPUs"):
        gres.gres_lines(None, [ok])
    with pytest.raises(ValueError, match="-1 exactly at its own position 1"):
        gres.gres_lines(None, [ok, gres.GpuDevice("/dev/nvidia1", None, (), (-1, 2))])
    with pytest.raises(ValueError, match="File /dev/nvidia0 appears more than once"):
        gres.gres_lines(None, [ok, gres.GpuDevice("/dev/nvidia0", None, (), None)])


def test_fake_gres_lines_for_dlcluster_by_hand():
    # 4 GPUs, 2 sockets x 4 cores: GPU0/1 on socket 0 (cores 0-3), GPU2/3 on socket 1 (4-7)
    lines = gres.fake_gres_lines("node[1-2]", [f"/x/nvidia{i}" for i in range(4)], "a100", 2, 4)
    assert lines == [
        "NodeName=node[1-2] Name=gpu Type=a100 File=/x/nvidia0 Cores=0-3 Links=-1,4,1,1",
        "NodeName=node[1-2] Name=gpu Type=a100 File=/x/nvidia1 Cores=0-3 Links=4,-1,1,1",
        "NodeName=node[1-2] Name=gpu Type=a100 File=/x/nvidia2 Cores=4-7 Links=1,1,-1,4",
        "NodeName=node[1-2] Name=gpu Type=a100 File=/x/nvidia3 Cores=4-7 Links=1,1,4,-1",
    ]
    with pytest.raises(ValueError, match="3 GPUs cannot be spread evenly over 2 sockets"):
        gres.fake_gres_lines("n", ["a", "b", "c"], None, 2, 4)


# --- the CLI ------------------------------------------------------------------------------


def test_cli_fake_nvml_json(capsys: pytest.CaptureFixture[str]):
    rc, out, _ = _run(capsys, "--fake-nvml", str(FIX / "hgx-h100.json"), "--sockets", "2",
                      "--cores-per-socket", "56", "--threads-per-core", "2", "--node", "g1", "--json")
    assert rc == 0
    obj = json.loads(out)
    assert obj["source"].startswith("recorded NVML") and obj["partial"] is False
    assert [g["cores"][0] for g in obj["gpus"]] == [0, 0, 0, 0, 56, 56, 56, 56]
    assert obj["gpus"][5]["bus_id"] == "00000000:C3:00.0"
    assert obj["lines"][0] == "NodeName=g1 Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18"


def test_cli_text_output_is_a_valid_gres_conf_with_slurm_conf_hint(capsys: pytest.CaptureFixture[str]):
    # 2 x 8 x 2: socket 0 holds CPUs 0-7 and their siblings 16-23, i.e. logical cores 0-7
    rc, out, _ = _run(capsys, "--from-topo", COMPLETE, "--sockets", "2", "--cores-per-socket", "8",
                      "--threads-per-core", "2", "--type", "a100", "--node", "lab4")
    assert rc == 0
    body = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert body == [
        "NodeName=lab4 Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-7 Links=-1,4,0,0",
        "NodeName=lab4 Name=gpu Type=a100 File=/dev/nvidia1 Cores=0-7 Links=4,-1,0,0",
        "NodeName=lab4 Name=gpu Type=a100 File=/dev/nvidia2 Cores=8-15 Links=0,0,-1,4",
        "NodeName=lab4 Name=gpu Type=a100 File=/dev/nvidia3 Cores=8-15 Links=0,0,4,-1",
    ]
    assert "# slurm.conf: NodeName=lab4 Gres=gpu:a100:4 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2" in out


def test_cli_truncated_capture_is_refused_then_partial_on_request(capsys: pytest.CaptureFixture[str]):
    # 2 x 16 x 2: NUMA node 2 (CPUs 16-23, siblings 48-55) is socket 1's first 8 cores, 16-23
    shape = ["--sockets", "2", "--cores-per-socket", "16", "--threads-per-core", "2"]
    rc, out, err = _run(capsys, "--from-topo", CUT, *shape)
    assert rc == 2 and out == ""
    # the count in brackets is the GPUs present: rows GPU0..GPU4
    assert "cut off: no complete row for GPU5,GPU6,GPU7 (5 of 8 GPUs)" in err and "--allow-partial" in err
    rc, out, _ = _run(capsys, "--from-topo", CUT, *shape, "--allow-partial")
    assert rc == 0 and "# PARTIAL" in out
    body = [ln for ln in out.splitlines() if not ln.startswith("#")]
    nv12 = lambda i: ",".join("-1" if j == i else "12" for j in range(8))  # noqa: E731
    assert body == [
        f"Name=gpu File=/dev/nvidia0 Cores=16-23 Links={nv12(0)}",
        f"Name=gpu File=/dev/nvidia1 Cores=16-23 Links={nv12(1)}",
        f"Name=gpu File=/dev/nvidia2 Cores=0-7 Links={nv12(2)}",
        f"Name=gpu File=/dev/nvidia3 Cores=0-7 Links={nv12(3)}",
        f"Name=gpu File=/dev/nvidia4 Cores=24-31 Links={nv12(4)}",
    ]
    rc, out, _ = _run(capsys, "--from-topo", CUT, *shape, "--allow-partial", "--json")
    assert json.loads(out)["partial"] is True


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--from-topo", COMPLETE], "needs the node's shape: --sockets"),
        (["--from-topo", COMPLETE, "--sockets", "2", "--cores-per-socket", "8"], "go up to CPU 31 (32 CPUs at least) but a 2x8x1 node has 16 CPUs"),
        (["--from-topo", "/nonexistent/topo.txt", "--sockets", "1", "--cores-per-socket", "1"], "cannot read /nonexistent/topo.txt"),
        (["--check", "/nonexistent/gres.conf"], "cannot read /nonexistent/gres.conf"),
        (["--sockets", "2"], "give both --sockets and --cores-per-socket"),
        (["--slurm-conf", "/etc/slurm/slurm.conf"], "--slurm-conf goes with --check; leave it out"),
        (["--from-topo", "t.txt", "--fake-nvml", "n.json"], "--from-topo and --fake-nvml are two sources"),
        (["--from-topo", COMPLETE, "--sockets", "2", "--cores-per-socket", "8", "--threads-per-core", "0"],
         "node shape 2x8x0: sockets, cores per socket and threads per core must be >= 1"),
    ],
    ids=["no-shape", "shape-without-threads", "missing-topo", "missing-conf", "half-shape", "slurm-conf-alone",
         "two-sources", "zero-threads"],
)
def test_cli_input_errors_are_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], words: str):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    assert words in err and err.count("\n") == 1 and err.startswith("dlgres: ")


# --- the same CLI on real captures (corpus) -------------------------------------------------


@pytest.mark.corpus
def test_cli_on_the_real_h100_capture(capsys: pytest.CaptureFixture[str]):
    rc, out, _ = _run(capsys, "--from-topo", str(corpus.TOPO / "8xH100-nccl-issue-1264.txt"), "--sockets", "2",
                      "--cores-per-socket", "56", "--threads-per-core", "2", "--type", "h100", "--node", "g1")
    assert rc == 0
    body = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert body[4] == "NodeName=g1 Name=gpu Type=h100 File=/dev/nvidia4 Cores=56-111 Links=18,18,18,18,-1,18,18,18"
    assert len(body) == 8
    assert "# slurm.conf: NodeName=g1 Gres=gpu:h100:8 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2" in out
    assert "NIC3..NIC9" in out


@pytest.mark.corpus
def test_cli_on_the_real_truncated_dgx_a100_capture(capsys: pytest.CaptureFixture[str]):
    path = str(corpus.TOPO / "DGX-A100-40GB-nccl-issue-1505-truncated.txt")
    shape = ["--sockets", "2", "--cores-per-socket", "64", "--threads-per-core", "2"]
    rc, out, err = _run(capsys, "--from-topo", path, *shape)
    assert rc == 2 and "cut off: no complete row for GPU4,GPU5,GPU6,GPU7 (4 of 8 GPUs)" in err
    rc, out, _ = _run(capsys, "--from-topo", path, *shape, "--allow-partial")
    body = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert body == [
        "Name=gpu File=/dev/nvidia0 Cores=48-63 Links=-1,12,12,12,12,12,12,12",
        "Name=gpu File=/dev/nvidia1 Cores=48-63 Links=12,-1,12,12,12,12,12,12",
        "Name=gpu File=/dev/nvidia2 Cores=16-31 Links=12,12,-1,12,12,12,12,12",
        "Name=gpu File=/dev/nvidia3 Cores=16-31 Links=12,12,12,-1,12,12,12,12",
    ]


def test_cli_without_nvml_says_so_exit_8(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    class NoDriver(FakeNvml):
        def nvmlInit(self) -> None:  # noqa: N802 - pynvml's name
            raise FakeNvmlError(9, "Driver Not Loaded")

    monkeypatch.setattr(nvml, "load_pynvml", lambda: NoDriver({"devices": []}))
    rc, out, err = _run(capsys, "--sockets", "1", "--cores-per-socket", "2")
    assert rc == 8 and out == ""   # Exit.NO_GPU_LIBRARY
    assert err == "dlgres: NVML: Driver Not Loaded (on a machine without GPUs use --from-topo or --fake-nvml)\n"


def test_nvml_with_no_gpu_is_unavailable(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    empty = tmp_path / "none.json"
    empty.write_text('{"devices": []}')
    rc, _, err = _run(capsys, "--fake-nvml", str(empty), "--sockets", "1", "--cores-per-socket", "2")
    assert rc == 8 and "NVML sees no GPU on this node" in err


@pytest.mark.parametrize(("text", "why"), [
    ("root:x:0:0:root:/root:/bin/bash\n", "Expecting value at line 1 column 1"),  # like /etc/passwd
    ("[1, 2]", 'expected {"devices": [...]}'),
    ('{"gpus": []}', 'expected {"devices": [...]}'),
])
def test_fake_nvml_bad_file_is_named(text: str, why: str, capsys: pytest.CaptureFixture[str], tmp_path: Path):
    bad = tmp_path / "passwd"
    bad.write_text(text)
    rc, out, err = _run(capsys, "--fake-nvml", str(bad), "--sockets", "1", "--cores-per-socket", "2")
    assert (rc, out) == (2, "")
    assert err == f"dlgres: {bad}: not a recorded NVML JSON file ({why})\n"


FIXTOPO = Path(__file__).resolve().parents[2] / "fixtures" / "topo"


def test_cli_from_topo_reads_a_capture_with_escape_codes(capsys: pytest.CaptureFixture[str]):
    rc, out, _ = _run(capsys, "--from-topo", str(FIXTOPO / "1gpu-underlined-header.txt"),
                      "--sockets", "1", "--cores-per-socket", "16", "--threads-per-core", "1")
    assert rc == 0
    assert [ln for ln in out.splitlines() if not ln.startswith("#")] == ["Name=gpu File=/dev/nvidia0 Cores=0-15 Links=-1"]


def test_cli_from_topo_refuses_a_shape_the_capture_contradicts(capsys: pytest.CaptureFixture[str]):
    path = str(FIXTOPO / "2gpu-192cpu-bold-rows.txt")
    rc, out, err = _run(capsys, "--from-topo", path, "--sockets", "2", "--cores-per-socket", "52", "--threads-per-core", "2")
    assert rc == 2 and out == ""
    assert err.startswith("dlgres: GPU0 (line 2): CPU Affinity 0-47,96-143: on a 2x52x2 node") and err.count("\n") == 1
    rc, out, _ = _run(capsys, "--from-topo", path, "--sockets", "2", "--cores-per-socket", "48", "--threads-per-core", "2")
    body = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert rc == 0 and body == ["Name=gpu File=/dev/nvidia0 Cores=0-47 Links=-1,0",
                                "Name=gpu File=/dev/nvidia1 Cores=48-95 Links=0,-1"]


# --- every user value dlgres writes into gres.conf is validated -------------------------------

_SHAPE = ["--sockets", "2", "--cores-per-socket", "8", "--threads-per-core", "2"]
_NODE_MSG = ("dlgres: --node {!r} is not a Slurm node name or hostlist (letters, digits, '-', '.', '_', "
             "brackets like gpu[01-04]); give the NodeName from slurm.conf\n")
_TYPE_MSG = ("dlgres: --type {!r} is not a gres Type: letters, digits, '_', '.' and '-' (not first), as dlsubmit "
             "requests it; e.g. --type a100\n")


@pytest.mark.parametrize("flag, value", [
    ("--node", "bad node"), ("--node", "n1\nAutoDetect=nvml"), ("--node", "n1=x"), ("--node", "x["),
    ("--node", "n1#c"), ("--node", "n\u00e9"), ("--node", "n1;rm"), ("--node", ""),
    ("--type", "a100 Flags=foo"), ("--type", "a100\nAutoDetect=nvml"), ("--type", "a,b"), ("--type", "a:b"),
    ("--type", "a#b"), ("--type", "a=b"), ("--type", "a\tb"), ("--type", ""), ("--type", "$(id)a100"),
    ("--type", "a100'"),
])
def test_cli_refuses_node_and_type_that_would_break_gres_conf(capsys: pytest.CaptureFixture[str], flag: str,
                                                                value: str):
    rc, out, err = _run(capsys, "--from-topo", COMPLETE, *_SHAPE, flag, value)
    assert (rc, out) == (2, "")
    if value == "":   # every command's rule (slurm_plugin.common.cli.ArgumentParser)
        assert err == f"dlgres: {flag}: empty value; give a value or leave the option out\n"
    else:
        assert err == (_NODE_MSG if flag == "--node" else _TYPE_MSG).format(value)


def test_cli_fake_nvml_without_shape_names_the_shape_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    sysfs = tmp_path / "cpu"  # a 1 x 2 x 1 machine: the H100 record's affinity reaches CPU 223
    for cpu in range(2):
        top = sysfs / f"cpu{cpu}" / "topology"
        top.mkdir(parents=True)
        (top / "physical_package_id").write_text("0\n")
        (top / "core_id").write_text(f"{cpu}\n")
    rc, out, err = _run(capsys, "--fake-nvml", str(FIX / "hgx-h100.json"), "--sysfs", str(sysfs))
    assert (rc, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("dlgres: CPU ")
    assert err.endswith("give the node's real shape with --sockets S --cores-per-socket C "
                        "--threads-per-core T (slurm.conf or 'slurmd -C')\n")


_NAME_CHARS = "abz09-._[],= \n#:\tAé"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(node=st.none() | st.text(_NAME_CHARS, max_size=12), gtype=st.none() | st.text(_NAME_CHARS, max_size=8))
def test_whatever_from_topo_writes_passes_check(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 node: str | None, gtype: str | None):
    argv = ["--from-topo", COMPLETE, *_SHAPE]
    argv += [f"--node={node}"] if node is not None else []
    argv += [f"--type={gtype}"] if gtype is not None else []
    rc, out, err = _run(capsys, *argv)
    if rc == 2:
        assert out == "" and err.count("\n") == 1
        assert err.startswith(("dlgres: --node " if node is not None and "--node" in err
                               else "dlgres: --type ", "dlgres: --node: empty value",
                               "dlgres: --type: empty value"))
        return
    assert rc == 0, err
    conf = tmp_path / "gres.conf"
    conf.write_text(out)
    rc, out, err = _run(capsys, "--check", str(conf), *_SHAPE)
    assert (rc, err) == (0, ""), out


def test_nvml_affinity_beyond_the_given_shape_is_refused_not_cut_off(
        capsys: pytest.CaptureFixture[str], tmp_path: Path):
    """A 2 x 48 x 2 node (192 CPUs; GPU0 near CPUs 0-47 and 96-143) given as 2 x 32 x 1: the
    affinity above CPU 63 reaches the shape check, which refuses CPU 96 (the first the 64-CPU
    shape lacks after 0-47); cut at the shape's 64 CPUs it would be written as Cores=0-47, a
    range across both sockets of that shape."""
    recorded = tmp_path / "two.json"
    recorded.write_text(json.dumps({"devices": [
        {"name": "NVIDIA A100", "bus_id": "00000000:01:00.0", "minor": 0,
         "cpu_affinity": "0-47,96-143", "nvlinks": []},
        {"name": "NVIDIA A100", "bus_id": "00000000:81:00.0", "minor": 1,
         "cpu_affinity": "48-95,144-191", "nvlinks": []}]}))
    rc, out, err = _run(capsys, "--fake-nvml", str(recorded), "--sockets", "2",
                        "--cores-per-socket", "32", "--threads-per-core", "1")
    assert (rc, out) == (2, "")
    assert err.startswith("dlgres: CPU 96 does not exist on a node of 2 socket(s) x 32 cores x "
                          "1 thread(s) (OS CPUs 0-63)") and err.count("\n") == 1
    rc, out, _ = _run(capsys, "--fake-nvml", str(recorded), "--sockets", "2",
                      "--cores-per-socket", "48", "--threads-per-core", "2")
    assert rc == 0
    assert [ln for ln in out.splitlines() if not ln.startswith("#")] == [
        "Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-47 Links=-1,0",
        "Name=gpu Type=a100 File=/dev/nvidia1 Cores=48-95 Links=0,-1"]


_GRES = "Name=gpu File=/dev/nvidia0\n"


@pytest.mark.parametrize("argv, line", [
    (["--check", "G", "--node", "gpu01", "--type", "a100"],
     "--node, --type go with writing gres.conf lines, not with --check; leave them out"),
    (["--check", "G", "--shards", "4"],
     "--shards goes with writing gres.conf lines, not with --check; leave it out"),
    (["--check", "G", "--allow-partial", "--sysfs", "/sys/devices/system/cpu"],
     "--allow-partial, --sysfs go with writing gres.conf lines, not with --check; leave them out"),
    (["--fake-nvml", "N", "--sockets", "1", "--cores-per-socket", "2", "--plugin-dir", "/x",
      "--slurm-release", "24.11"],
     "--plugin-dir, --slurm-release go with --check; leave them out"),
    (["--fake-nvml", "N", "--sockets", "1", "--cores-per-socket", "2", "--allow-partial"],
     "--allow-partial goes with --from-topo (a cut-off capture); leave it out"),
    (["--from-topo", COMPLETE, *_SHAPE, "--sysfs", "/tmp"],
     "--sysfs goes with the NVML path (the CPU topology of this node), not --from-topo; "
     "leave it out"),
    (["--check", "G", "--threads-per-core", "2"],
     "--threads-per-core completes a shape: give --sockets and --cores-per-socket with it"),
    (["--fake-nvml", "N", "--threads-per-core", "2"],
     "--threads-per-core completes a shape: give --sockets and --cores-per-socket with it"),
], ids=["check-node-type", "check-shards", "check-partial-sysfs", "write-check-options",
        "partial-without-capture", "sysfs-with-capture", "threads-alone-check",
        "threads-alone-nvml"])
def test_an_option_the_mode_would_not_use_is_refused_not_dropped(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], line: str):
    """Dropped, each would mislead: ``--check --node gpu01`` would look like a check of that
    node alone, and ``--threads-per-core 2`` without the rest of the shape would leave the
    threads at 1."""
    gres_conf, recorded = tmp_path / "gres.conf", FIX / "hgx-h100.json"
    gres_conf.write_text(_GRES)
    argv = [str(gres_conf) if a == "G" else str(recorded) if a == "N" else a for a in argv]
    assert _run(capsys, *argv) == (2, "", f"dlgres: {line}\n")
