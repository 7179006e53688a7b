"""The live cluster's gres.conf (written by dlcluster through slurm_plugin.gres.generate) passes
``dlgres --check`` for the node shape slurmd reports, and slurmd took every GPU line."""

from __future__ import annotations

import pytest
from live_helpers import slurm_conf

from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin import hostlist
from slurm_plugin.gres.check import check_gres
from slurm_plugin.gres.topo_cpu import CpuTopology

pytestmark = pytest.mark.live


def test_live_gres_conf_is_clean_and_accepted_by_slurmd():
    text = slurm_conf().with_name("gres.conf").read_text()
    nodes = SlurmClient(timeout_s=20).nodes()
    assert nodes
    shape = {(n.sockets, n.cores_per_socket) for n in nodes}
    assert len(shape) == 1, f"mixed node shapes {shape}"
    sockets, cps = shape.pop()
    assert check_gres(text, CpuTopology.from_shape(sockets, cps)) == []
    gpu_lines = [ln for ln in text.splitlines() if ln.startswith("NodeName=") and "Name=gpu" in ln]
    per_node: dict[str, int] = {}
    for ln in gpu_lines:
        for host in hostlist.expand(ln.split()[0].split("=", 1)[1]):
            per_node[host] = per_node.get(host, 0) + 1
    for n in nodes:
        assert n.usable, f"{n.name} is {n.state} {n.state_flags}"
        assert n.gpus_total == per_node[n.name]
        assert f"Type={n.gpu_type}" in gpu_lines[0]


# --- slurmd 22.05 itself on the faults dlgres --check reports --------------------------------
# `slurmd -G` reads slurm.conf and gres.conf, prints the GRES it would use and exits; a fault it
# cannot live with ends it with "fatal:". Each case runs on a private copy of the live cluster's
# slurm.conf (node1 given Gres=gpu:a100:2, its own spool/log/pid paths), so no daemon is touched.

def _slurmd_g(tmp_path, gres_text: str) -> tuple[int, str]:
    import re
    import subprocess

    run = tmp_path / "run"
    for sub in ("spool/node1", "log", "run", "state"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    conf = slurm_conf().read_text()
    conf = re.sub(r"^(NodeName=node1 .*?)Gres=\S+", r"\1Gres=gpu:a100:2", conf, flags=re.M)
    conf = re.sub(r"/var/lib/dlcluster/[^/\s]+", str(run), conf)
    (run / "slurm.conf").write_text(conf)
    (run / "gres.conf").write_text(gres_text.replace("DEV", str(tmp_path / "dev")))
    p = subprocess.run(["slurmd", "-f", str(run / "slurm.conf"), "-N", "node1", "-G"],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


@pytest.fixture()
def devdir(tmp_path):
    (tmp_path / "dev" / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidia-caps/nvidia-cap21"):
        (tmp_path / "dev" / name).touch()
    return tmp_path


@pytest.mark.parametrize("text, fatal", [
    ("NodeName=node1 Name=gpu Type=a100 File=DEV/nvidia[0-1]\n", None),
    ("NodeName=node1 Name=gpu\nNodeName=node1 Name=gpu\n", "duplicate records for gpu"),
    ("NodeName=node1 Name=gpu Type=a100 File=DEV/nvidia[0-1] Count=4\n", "count does not match File value"),
    ("NodeName=node1 Name=gpu Type=a100 File=DEV/nvidia0 MultipleFiles=DEV/nvidia0,DEV/nvidia-caps/nvidia-cap21\n",
     "File and MultipleFiles options are mutually exclusive"),
    ("NodeName=node1 Name=gpu Type=a100 File=DEV/nvidia0 Flags=nvidia_gpu_env\n"
     "NodeName=node1 Name=gpu Type=a100 File=DEV/nvidia1 Flags=opencl_env\n", "does not match env flags"),
    ("Name=gpu NodeName=node1 Type=a100 File=DEV/nvidia[0-1]\n", "error opening/reading"),
    ("NodeName=node1 Name=gpu Type=a100 File=DEV/nvidia[0-1]\nNodeName=node1 Name=gpu Type=a100 Count=2\n",
     "some records have \"File\""),
    ("NodeName=node1 AutoDetect=nvml\nNodeName=node1 AutoDetect=off\nNodeName=node1 Name=gpu Type=a100 File=DEV/nvidia[0-1]\n",
     "duplicate node-local AutoDetect"),
], ids=["clean", "dup-records", "count-vs-file", "file-and-multiplefiles", "env-flags", "nodename-not-first",
        "file-on-some", "autodetect-conflict"])
def test_slurmd_refuses_what_check_reports(devdir, text: str, fatal: str | None):
    rc, out = _slurmd_g(devdir, text)
    found = check_gres(text.replace("DEV", str(devdir / "dev")))
    if fatal is None:
        assert rc == 0 and "fatal:" not in out, out
        assert found == []
    else:
        assert rc != 0 and fatal in out, out
        assert found, "dlgres --check passed a gres.conf that slurmd refuses"


def test_slurmd_without_nvml_ignores_autodetect(devdir):
    from slurm_plugin.gres.cli import DEBIAN_PLUGIN_DIR

    text = "AutoDetect=nvml\nNodeName=node1 Name=gpu Type=a100 File=DEV/nvidia[0-1]\n"
    rc, out = _slurmd_g(devdir, text)
    assert rc == 0 and "nvml functionality, but that lib wasn't found" in out, out
    found = check_gres(text.replace("DEV", "/dev"), plugin_dirs=[DEBIAN_PLUGIN_DIR])
    assert [f.line for f in found] == [1] and "no gpu_nvml.so" in found[0].message


def test_slurmd_ignores_a_name_missing_from_grestypes(devdir):
    from slurm_plugin.gres.slurmconf import parse_slurm_conf

    text = "NodeName=node1 Name=mps Count=100\nNodeName=node1 Name=gpu Type=a100 File=DEV/nvidia[0-1]\n"
    rc, out = _slurmd_g(devdir, text)
    assert rc == 0 and "Ignoring gres.conf record, invalid name: mps" in out, out
    conf = parse_slurm_conf(slurm_conf().read_text())
    conf.node_gres["node1"] = {("gpu", "a100"): 2}
    found = check_gres(text.replace("DEV", "/dev"), slurm=conf)
    assert [f.line for f in found] == [1] and "not in slurm.conf GresTypes" in found[0].message
