"""vagrant/: the Vagrantfile is valid and provisions with the local cluster's own scripts.

VMs cannot boot here (no hypervisor); `vagrant validate` from Debian's vagrant package checks the
file, and the provisioning scripts it runs are the ones `dlcluster up` runs (tested live in
tests/live/test_dlcluster_live.py and by every live test's cluster).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from slurm_plugin.localcluster import provision

ROOT = Path(__file__).resolve().parents[2]


def test_vagrant_validate_accepts_the_vagrantfile() -> None:
    vagrant = shutil.which("vagrant")
    assert vagrant, "Debian's vagrant package is missing: ./test.sh installs it"
    res = subprocess.run([vagrant, "validate", "--ignore-provider"], cwd=ROOT / "vagrant",
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "validated successfully" in res.stdout


def test_vms_run_the_scripts_dlcluster_runs() -> None:
    text = (ROOT / "vagrant" / "provision-node.sh").read_text()
    used = set(re.findall(r'\$prov/(\w+\.sh)', text))
    assert used == {"install.sh", "munge.sh", "fakegpu.sh"}
    for name in used:
        assert (provision.SCRIPTS / name).is_file()
        assert subprocess.run(["bash", "-n", str(provision.SCRIPTS / name)]).returncode == 0
    assert subprocess.run(["bash", "-n", str(ROOT / "vagrant" / "provision-node.sh")]).returncode == 0


def test_vm_slurm_conf_keeps_the_local_clusters_scheduling_settings() -> None:
    from slurm_plugin.localcluster.cluster import ClusterSpec, render_slurm_conf

    local = dict(line.split("=", 1) for line in render_slurm_conf(ClusterSpec(), "h").splitlines()
                 if "=" in line and not line.startswith(("#", "NodeName", "PartitionName")))
    vm = dict(line.split("=", 1) for line in (ROOT / "vagrant" / "slurm.conf.in").read_text().splitlines()
              if "=" in line and not line.startswith(("#", "NodeName", "PartitionName")))
    for key in ("PriorityType", "PreemptType", "PreemptMode", "SlurmctldParameters", "JobSubmitPlugins",
                "SelectType", "SelectTypeParameters", "GresTypes", "SchedulerParameters", "JobRequeue"):
        assert vm[key] == local[key], key
