"""The Slurm release ``dlgres --check`` judges by, found on the live cluster's own plugin
directory (the rules by release: tests/slurm_plugin/gres/test_gres_release.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from slurm_plugin.gres import release as gres_release
from slurm_plugin.gres.release import resolve


@pytest.mark.live
@pytest.mark.releases
def test_release_from_the_live_clusters_plugin_version(tmp_path: Path, slurm_release: tuple[int, int]):
    """The release read from the plugin directory the live cluster's slurmctld reports is the
    cluster's own (run on every release ./test.sh brings up), also from a copied plugin."""
    from slurm_plugin.slurm.client import SlurmClient

    plugins = Path(SlurmClient(timeout_s=10).show_config()["PluginDir"].split(":")[0])
    name = f"{slurm_release[0]}.{slurm_release[1]:02d}"
    got = resolve(None, [str(plugins)])
    assert (got.name, got.note) == (name, None)
    assert got.source.startswith(f"plugin_version {name}.")
    shutil.copy(plugins / "gres_gpu.so", tmp_path / "gres_gpu.so")
    assert gres_release.plugin_version(tmp_path / "gres_gpu.so")[:2] == slurm_release
