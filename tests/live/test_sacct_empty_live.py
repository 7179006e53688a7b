"""Live: sacct's answer for a selection that holds no job (slurmdbd's "Nothing found with
query") reaches every caller as no records, on every release (needs
``--with-dbd``, as tests/live/test_history_live.py). A second or two of wall time."""

from __future__ import annotations

import pytest

from slurm_plugin.slurm.client import SlurmClient

#: below slurm.conf's default MaxJobId (67043328) and far above any id a test cluster reaches
NEVER_SUBMITTED = 67_000_000


@pytest.mark.live
@pytest.mark.releases
def test_a_window_and_a_job_id_without_jobs_are_no_records() -> None:
    client = SlurmClient()
    assert client.accounting("2001-01-01T00:00:00", "2001-01-02T00:00:00") == []
    assert client.accounting_runs(NEVER_SUBMITTED) == []
    assert client.accounting_jobs([NEVER_SUBMITTED, NEVER_SUBMITTED + 1]) == []
