"""Start a throw-away slurmctld on a stock dlcluster config with conf/slurm.conf.d snippets included.

:func:`apply_snippets` does what docs/admins.md tells an admin: drop from slurm.conf the keys a
snippet sets (and its PartitionName lines), then add one ``Include`` line per snippet. The
controller gets its own port, state, log and pid files in a temporary directory, its own cluster
name and no accounting, and its node lines point at unused ports, so the cluster the config was
copied from is not disturbed.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNIPPETS = REPO / "conf" / "slurm.conf.d"
COMMON = [SNIPPETS / "10-priority.conf", SNIPPETS / "20-preemption.conf", SNIPPETS / "30-job-submit.conf"]
"""The snippets every dlprio mode includes."""
MODES = {
    "priority": SNIPPETS / "40-partitions-priority-mode.conf",
    "partition": SNIPPETS / "40-partitions-partition-mode.conf",
}
"""The partition snippet of each dlprio mode."""
_KEY_RE = re.compile(r"^\s*([A-Za-z]+)\s*=")


def snippet_keys(paths: Sequence[Path]) -> set[str]:
    """Keys (lower-case) the snippet files set, ``partitionname`` included."""
    keys = set()
    for p in paths:
        for line in p.read_text().splitlines():
            m = _KEY_RE.match(line)
            if m:
                keys.add(m.group(1).lower())
    return keys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def apply_snippets(stock: str, snippets: Sequence[Path], tmp: Path, port: int) -> str:
    """The stock slurm.conf text with the snippets' keys removed, private paths, Include lines."""
    # its own accounting (none) and cluster name: a throw-away controller that registered with the
    # live cluster's slurmdbd under its name would end that cluster's running jobs in accounting
    keys = snippet_keys(snippets) | {"slurmctldport", "statesavelocation", "slurmctldpidfile", "slurmctldlogfile",
                                     "clustername", "accountingstoragetype", "accountingstoragehost",
                                     "accountingstorageport", "accountingstoragetres"}
    out = []
    for line in stock.splitlines():
        m = _KEY_RE.match(line)
        key = m.group(1).lower() if m else ""
        if key in keys:
            continue
        if key == "nodename":
            line = re.sub(r"\bPort=\d+", lambda _: f"Port={_free_port()}", line)
        out.append(line)
    out += [f"SlurmctldPort={port}", f"StateSaveLocation={tmp}/state", f"SlurmctldPidFile={tmp}/slurmctld.pid",
            f"SlurmctldLogFile={tmp}/slurmctld.log", f"ClusterName=snippets{port}",
            "AccountingStorageType=accounting_storage/none"]
    out += [f"Include {p}" for p in snippets]
    return "\n".join(out) + "\n"


@contextmanager
def controller(stock_conf: Path, snippets: Sequence[Path], tmp: Path) -> Iterator[Path]:
    """Run slurmctld (foreground, ours) on the patched config; yield its slurm.conf path.

    Raises AssertionError with the log's tail when slurmctld exits early.
    """
    (tmp / "state").mkdir(parents=True, exist_ok=True)
    for extra in ("gres.conf", "job_submit.lua", "cgroup.conf"):
        if (stock_conf.parent / extra).exists():
            shutil.copy(stock_conf.parent / extra, tmp / extra)
    conf = tmp / "slurm.conf"
    conf.write_text(apply_snippets(stock_conf.read_text(), snippets, tmp, _free_port()))
    proc = subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield conf
        if proc.poll() is not None:
            log = (tmp / "slurmctld.log").read_text()[-2000:] if (tmp / "slurmctld.log").exists() else ""
            raise AssertionError(f"slurmctld exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}{log}")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
