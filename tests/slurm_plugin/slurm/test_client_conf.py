"""SlurmClient without a cluster: a bad ``SLURM_CONF`` and a hung command give clear errors.

Slurm 22.05's ``squeue`` answers a missing ``SLURM_CONF`` with "s_p_parse_file: cannot stat file
..., retrying in 1sec up to 60sec", so without the client's own check every call waited for the
whole timeout and reported only "no answer within 30 s".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.slurm.client import SlurmClient, SlurmRefused, SlurmUnreachable, conf_problem


def test_missing_slurm_conf_fails_at_once_with_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nonexistent.conf"
    monkeypatch.setenv("SLURM_CONF", str(missing))
    with pytest.raises(SlurmUnreachable) as info:
        SlurmClient(timeout_s=20).jobs()  # the real squeue is never started
    assert info.value.message == f"SLURM_CONF: cannot stat file {missing}: No such file or directory"
    assert info.value.argv[0] == "squeue"


def test_conf_problem_accepts_a_readable_file_and_the_default(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert conf_problem(str(conf)) is None
    assert conf_problem(None) is None and conf_problem("") is None
    assert conf_problem(str(tmp_path)) == f"SLURM_CONF: cannot read file {tmp_path}: Is a directory"


def test_timeout_shows_the_commands_last_stderr_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    fake = tmp_path / "squeue"
    fake.write_text("#!/bin/sh\necho 'squeue: error: first' >&2\necho 'squeue: error: still retrying' >&2\n"
                    "exec sleep 30\n")
    fake.chmod(0o755)
    with pytest.raises(SlurmUnreachable) as info:
        SlurmClient(timeout_s=1, bin_dir=str(tmp_path)).jobs()
    assert info.value.message == "no answer within 1 s (squeue: error: still retrying)"


def test_commands_of_another_release_than_the_plugins_say_how_to_mend_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """22.05's squeue on PATH for a cluster whose PluginDir holds 24.11 (text of that case)."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    fake = tmp_path / "squeue"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "slurm-wlm 22.05.8"; exit 0 ;; esac\n'
        "echo 'squeue: plugin_load_from_file: Incompatible Slurm plugin /r/auth_munge.so version "
        "(24.11.5)' >&2\n"
        "echo 'squeue: error: cannot create auth context for auth/munge' >&2\n"
        "exit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SlurmRefused) as info:
        SlurmClient(timeout_s=5, bin_dir=str(tmp_path)).jobs()
    assert info.value.message.startswith(
        "squeue: plugin_load_from_file: Incompatible Slurm plugin /r/auth_munge.so version (24.11.5): ")
    assert 'eval "$(dlcluster env --name NAME)"' in info.value.message
    assert "\n" not in info.value.message
