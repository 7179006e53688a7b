"""The cluster lease's rules with a recording stand-in for slurmctld. The
live test (tests/live/test_lease_live.py) shows them on a real cluster; this one covers the race a
live run cannot time: two daemons submitting their lease jobs at the same moment."""

from __future__ import annotations

import json

import pytest

from prioritizer.daemon.lease import ClusterLease, LeaseHeld, LeaseLost, ledger_id
from log_helpers import captured
from prioritizer.daemon.log import CycleAdapter
from slurm_plugin.slurm.shapes import job_from_json


class FakeSlurm:
    """Jobs by id; ``submit`` gives the next id, after ``sneak_in`` (another daemon's lease
    job submitted a moment before ours, invisible to our first read)."""

    def __init__(self) -> None:
        self.next_id, self.jobs_by_id, self.sneak_in, self.calls = 10, {}, None, []

    def add(self, comment: str, name: str = "dlprio-lease") -> int:
        job_id, self.next_id = self.next_id, self.next_id + 1
        self.jobs_by_id[job_id] = job_from_json({"job_id": job_id, "name": name, "comment": comment,
                                                 "job_state": "PENDING"})
        return job_id

    def jobs(self) -> list:
        return list(self.jobs_by_id.values())

    def submit(self, script: str, args: list[str]) -> int:
        if self.sneak_in:
            self.add(self.sneak_in)
            self.sneak_in = None
        comment = next(a.split("=", 1)[1] for a in args if a.startswith("--comment="))
        return self.add(comment)

    def cancel(self, ids: list[int]) -> None:
        self.calls.append(("cancel", list(ids)))
        for j in ids:
            self.jobs_by_id.pop(j, None)

    def update(self, ids: list[int], field: str, value: str) -> None:
        self.calls.append(("update", list(ids), field))


def _lease(slurm: FakeSlurm, ledger: str = "/l/a", now: float = 1000.0) -> ClusterLease:
    return ClusterLease(slurm, "dlprio-lease", 30, ledger, CycleAdapter(),  # type: ignore[arg-type]
                        clock=lambda: now)


def test_simultaneous_start_lowest_job_id_wins_and_loser_cleans_up() -> None:
    slurm = FakeSlurm()
    slurm.sneak_in = "dlprio-lease;holder=other:1;ledger=other:x;heartbeat=1000"
    with pytest.raises(LeaseHeld, match="held by other:1 \\(lease job 10"):
        _lease(slurm).acquire()
    assert sorted(slurm.jobs_by_id) == [10] and ("cancel", [11]) in slurm.calls


def test_fresh_lease_refuses_stale_lease_is_taken_over() -> None:
    slurm = FakeSlurm()
    slurm.add("dlprio-lease;holder=other:1;ledger=other:x;heartbeat=990")
    with pytest.raises(LeaseHeld, match="heartbeat 10 s ago"):
        _lease(slurm, now=1000).acquire()
    lease = _lease(slurm, now=1021)                  # 31 s > TTL 30
    lease.acquire()
    assert sorted(slurm.jobs_by_id) == [lease.job_id] == [11]


def test_lease_of_our_own_ledger_is_taken_over_at_once() -> None:
    slurm = FakeSlurm()
    slurm.add(f"dlprio-lease;holder=me:1;ledger={ledger_id('/l/a')};heartbeat=999")
    _lease(slurm, "/l/a", now=1000).acquire()
    assert sorted(slurm.jobs_by_id) == [11]


def test_fencing_and_heartbeat() -> None:
    slurm = FakeSlurm()
    lease = _lease(slurm)
    lease.acquire()
    lease.check(slurm.jobs(), 1005)                  # < TTL/3: no renewal
    assert not [c for c in slurm.calls if c[0] == "update"]
    lease.check(slurm.jobs(), 1010)
    assert ("update", [10], "Comment") in slurm.calls
    # someone with a lower id? impossible for later submissions; ours cancelled: lost
    with pytest.raises(LeaseLost, match="lease job 10 lost"):
        lease.check([], 1012)
    slurm.add("dlprio-lease;holder=other:2;ledger=o;heartbeat=1012")
    with pytest.raises(LeaseLost, match="to other:2 \\(job 11\\)"):
        lease.check([j for j in slurm.jobs() if j.job_id != 10], 1013)


def test_run_waits_for_slurmctld_before_taking_the_lease() -> None:
    """``run`` started during an outage: the lease is taken once Slurm answers; ``once`` fails."""
    import threading
    from prioritizer.daemon.cli import _lease
    from prioritizer.daemon.config import DaemonConfig
    from slurm_plugin.slurm.client import SlurmUnreachable

    class Flaky(FakeSlurm):
        down = 2

        def jobs(self) -> list:
            if self.down:
                self.down -= 1
                raise SlurmUnreachable(["squeue"], "Unable to contact slurm controller")
            return super().jobs()

    cfg = DaemonConfig(interval_s=0.05, backoff_max_s=0.1, ledger_path="/l/a")
    slurm = Flaky()
    with captured() as (log, stream):
        with _lease(cfg, slurm, log, threading.Event()) as lease:  # type: ignore[arg-type]
            assert lease is not None and lease.job_id == 10
    assert stream.getvalue().count("slurm_unreachable") == 2 and slurm.jobs_by_id == {}
    with pytest.raises(SlurmUnreachable):
        with _lease(cfg, Flaky(), log):  # type: ignore[arg-type]
            pass


def test_lease_tries_start_a_backoff_apart_and_count_as_slurm_errors() -> None:
    """The lease's failed tries are spaced as failed cycles are: they *start* ``interval_s``
    apart however long the failed call blocked (here 0.6 s of a 1 s interval, so the wait
    is 0.4 s, not 1 s after it), and each is logged with ``failed_after_s`` and counted in
    ``dlprio_slurm_errors_total{kind="unreachable"}``."""
    import json
    import threading
    import time
    from prioritizer.daemon.cli import _lease
    from prioritizer.daemon.config import DaemonConfig
    from prioritizer.daemon.metrics import Metrics
    from slurm_plugin.slurm.client import SlurmUnreachable

    class Slow(FakeSlurm):
        starts: list[float] = []

        def jobs(self) -> list:
            self.starts.append(time.monotonic())
            if len(self.starts) == 1:
                time.sleep(0.6)           # the call blocks until its timeout
                raise SlurmUnreachable(["squeue"], "Unable to contact slurm controller")
            return super().jobs()

    cfg = DaemonConfig(interval_s=1.0, backoff_max_s=2.0, ledger_path="/l/a")
    slurm, metrics = Slow(), Metrics()
    with captured("json") as (log, stream):
        with _lease(cfg, slurm, log, threading.Event(), metrics) as lease:  # type: ignore[arg-type]
            assert lease is not None
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines() if "slurm_unreachable" in x]
    assert line["step"] == "lease" and line["failed_after_s"] >= 0.6
    assert line["retry_in_s"] == pytest.approx(1.0 - line["failed_after_s"], abs=0.11)
    gap = slurm.starts[1] - slurm.starts[0]
    assert 0.98 <= gap < 1.45         # one interval apart, not interval + 0.6 s blocked
    assert metrics.registry.get_sample_value("dlprio_slurm_errors_total",
                                             {"kind": "unreachable"}) == 1


def test_a_lease_under_another_name_is_not_ours_and_is_warned_of() -> None:
    """A daemon under lease_name ``dlprio-b`` holds its lease job (12); ours, ``dlprio-lease``,
    is taken beside it (it is no lease of ours), and acquire warns once that two daemons
    order the same jobs unless their partitions are apart. A job of another name whose
    comment is no lease's is no daemon."""
    slurm = FakeSlurm()
    slurm.add("just a comment", name="train")
    other = slurm.add("dlprio-b;holder=hostb:7;ledger=hostb:y;heartbeat=995", name="dlprio-b")
    with captured(fmt="json") as (log, stream):
        lease = ClusterLease(slurm, "dlprio-lease", 30, "/l/a", log,  # type: ignore[arg-type]
                             clock=lambda: 1000.0)
        lease.acquire()
    assert lease.job_id == 12
    warned = [json.loads(line) for line in stream.getvalue().splitlines()
              if '"other_lease"' in line]
    assert [(w["job_id"], w["name"], w["holder"], w["heartbeat_age_s"], w["level"])
            for w in warned] == [(other, "dlprio-b", "hostb:7", 5.0, "WARNING")]
