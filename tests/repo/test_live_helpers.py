"""The live tests' wait for an idle cluster: it names what blocks it, and a job that outlasted one
whole wait fails later waits at once (CI once spent its 90 minutes on one held job restored from
a killed run, every live test waiting out its own timeout). The cluster here is a stand-in
client: what is tested is the helper's own bookkeeping, not Slurm."""

from __future__ import annotations

import pytest

import live_helpers
from live_helpers import wait_cluster_idle
from queue_helpers import make_job
from slurm_plugin.slurm.client import SlurmUnreachable


class Cluster:
    """``jobs()`` answers the list it holds; counts the calls."""

    def __init__(self, jobs: list) -> None:
        self.queue, self.calls = jobs, 0

    def jobs(self) -> list:
        self.calls += 1
        return list(self.queue)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_helpers, "_outlasted", {})


def held(job_id: int):
    return make_job(job_id, name="dlprio-lease", user="root", reason="JobHeldUser")


def test_timeout_names_the_jobs_still_active() -> None:
    cluster = Cluster([held(6923), make_job(7, state="COMPLETED")])
    with pytest.raises(AssertionError) as err:
        wait_cluster_idle(cluster, timeout_s=0.3)
    text = str(err.value)
    assert "timed out after 0.3 s waiting for the cluster to have no active jobs" in text
    assert "still active: 6923 'dlprio-lease' PENDING (JobHeldUser), user root" in text
    assert " 7 " not in text   # a finished job is not named


def test_a_job_that_outlasted_a_wait_fails_the_next_at_once() -> None:
    cluster = Cluster([held(6923)])
    with pytest.raises(AssertionError):
        wait_cluster_idle(cluster, timeout_s=0.3)
    cluster.calls = 0
    with pytest.raises(AssertionError) as err:
        wait_cluster_idle(cluster, timeout_s=60)
    assert cluster.calls == 1            # one look, no 60 s of polling
    assert "outlasted an earlier wait" in str(err.value) and "6923 'dlprio-lease'" in str(err.value)
    assert "dlcluster up --clear" in str(err.value)


def test_a_new_job_beside_the_stuck_one_gets_its_wait() -> None:
    cluster = Cluster([held(6923)])
    with pytest.raises(AssertionError):
        wait_cluster_idle(cluster, timeout_s=0.3)
    cluster.queue = [held(6923), make_job(8, state="RUNNING")]
    cluster.calls = 0
    with pytest.raises(AssertionError) as err:
        wait_cluster_idle(cluster, timeout_s=0.5)
    assert cluster.calls > 1 and "timed out" in str(err.value)
    assert "8 'job8' RUNNING" in str(err.value)


def test_the_stuck_job_gone_the_wait_passes() -> None:
    cluster = Cluster([held(6923)])
    with pytest.raises(AssertionError):
        wait_cluster_idle(cluster, timeout_s=0.3)
    cluster.queue = []
    wait_cluster_idle(cluster, timeout_s=5)


def test_an_unreachable_controller_is_waited_for_not_blamed_on_old_jobs() -> None:
    cluster = Cluster([held(6923)])
    with pytest.raises(AssertionError):
        wait_cluster_idle(cluster, timeout_s=0.3)
    answers = iter([SlurmUnreachable(["squeue"], "timed out"), []])

    def jobs() -> list:
        answer = next(answers, [])
        if isinstance(answer, Exception):
            raise answer
        return answer
    cluster.jobs = jobs   # type: ignore[method-assign]
    wait_cluster_idle(cluster, timeout_s=5)
