"""Shared test set-up: the hypothesis CI profile and the live-cluster guard.

Tests marked ``@pytest.mark.live`` talk to the real Slurm cluster that ``SLURM_CONF`` names
(default ``/etc/slurm/slurm.conf``, the cluster ``dlcluster up`` starts; ``.ci/run`` and
``./test.sh`` start it). When no cluster answers, a live test fails with a message saying how to
start one; it is never skipped. ``pytest -m "not live"`` runs the pure tests alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", deadline=None, derandomize=True, max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))

_live_ok: bool | None = None


@pytest.fixture(autouse=True)
def _require_live_cluster(request: pytest.FixtureRequest) -> None:
    global _live_ok
    if request.node.get_closest_marker("live") is None:
        return
    if _live_ok is None:
        from slurm_plugin.client import SlurmClient

        _live_ok = SlurmClient(timeout_s=10).ping()
    if not _live_ok:
        pytest.fail(
            f"no live Slurm cluster answers (SLURM_CONF={os.environ.get('SLURM_CONF', '/etc/slurm/slurm.conf')}); "
            "start one with `sudo .venv/bin/dlcluster up` or run `pytest -m 'not live'`",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _keep_slurm_conf() -> Iterator[None]:
    """A test (or code it calls in-process) that repoints SLURM_CONF must not move later tests
    to another cluster: restore the value the session started with."""
    before = os.environ.get("SLURM_CONF")
    yield
    if os.environ.get("SLURM_CONF") != before:
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before
