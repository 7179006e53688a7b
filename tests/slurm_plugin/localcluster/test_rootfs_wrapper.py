"""The command wrappers of a cluster whose Slurm runs from a root filesystem start the root's own
dynamic loader: never through ``lib64/ld-linux-x86-64.so.2``, which in bookworm's root is an
absolute link that resolves to the host's loader (on a Debian 13 host: a newer loader with
bookworm's C library, which aborts)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from slurm_plugin.localcluster import rootfs

HOST_LIB = Path("/usr/lib/x86_64-linux-gnu")


def test_the_wrapper_names_the_loader_file_not_the_lib64_link():
    text = rootfs.wrapper_text(Path("/var/cache/dlcluster/rootfs/bookworm"), "squeue")
    assert "exec /var/cache/dlcluster/rootfs/bookworm/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 " in text
    assert "lib64" not in text


def test_a_wrapper_runs_with_the_roots_loader_when_lib64_links_elsewhere(tmp_path: Path):
    """A root whose lib64 link points at a loader that does not exist (as bookworm's points at
    the host's): the wrapper still runs the command with the root's own loader."""
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib64").mkdir()
    os.symlink("/nonexistent/ld-linux-x86-64.so.2", root / "lib64/ld-linux-x86-64.so.2")
    shutil.copy(HOST_LIB / "ld-linux-x86-64.so.2", root / rootfs.LOADER)
    shutil.copy(HOST_LIB / "libc.so.6", root / "usr/lib/x86_64-linux-gnu/libc.so.6")
    shutil.copy("/usr/bin/true", root / "usr/bin/sinfo")
    wrapper = tmp_path / "sinfo"
    wrapper.write_text(rootfs.wrapper_text(root, "sinfo"))
    wrapper.chmod(0o755)
    assert subprocess.run([str(wrapper)], capture_output=True, timeout=30).returncode == 0
