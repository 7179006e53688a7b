"""conf/slurm.conf.d without Slurm: every setting in a snippet carries a comment saying why, and
the snippets set what the daemon needs (slurmctld started on them: tests/live/test_conf_live.py)."""

from __future__ import annotations

from conf_helpers import COMMON, MODES, snippet_keys


def test_every_snippet_setting_is_commented():
    for path in [*COMMON, *MODES.values()]:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip() and not line.lstrip().startswith("#"):
                assert i > 0 and lines[i - 1].lstrip().startswith("#"), f"{path.name}:{i + 1} has no comment above it"


def test_snippets_cover_what_the_daemon_needs():
    keys = snippet_keys([*COMMON, *MODES.values()])
    assert {"prioritytype", "preempttype", "jobsubmitplugins", "slurmctldparameters", "partitionname"} <= keys
