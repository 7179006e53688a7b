"""``update_budget`` on the live cluster: a backlog of new pending jobs is sent head of
the start order first, a budget per cycle, and converges; Slurm's priorities then follow the
policy's order.

Pending jobs are held back with ``--begin`` (reason BeginTime: startable, so ordered, but they
never start during the test). Submitted in four groups a second or more apart, so the groups
enter queue 0 at different times and get different values. The daemon runs in this process
(its cycles are driven one by one); everything it sends goes to the real slurmctld and the
priorities are read back from squeue.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from daemon_helpers import live_jobs, write_config
from prioritizer.daemon import config as daemon_config
from prioritizer.daemon.explain import freshness
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import configure
from prioritizer.daemon.loop import Daemon
from slurm_plugin.slurm.client import SlurmClient

pytestmark = [pytest.mark.live, pytest.mark.releases]
BUDGET = 5
GROUPS = 4
PER_GROUP = 3
HOLD = "#!/bin/bash\nsleep 600\n"


def _priorities(client: SlurmClient, ids: list[int]) -> dict[int, int]:
    return {j.job_id: j.priority for j in client.jobs(job_ids=ids)}


def test_backlog_is_sent_head_first_within_the_budget_and_converges(tmp_path: Path) -> None:
    cfg = daemon_config.load(write_config(tmp_path / "dlprio.yaml", update_budget=BUDGET))
    with live_jobs(tmp_path) as jobs:
        ids: list[int] = []
        for g in range(GROUPS):
            if g:
                time.sleep(1.2)
            for k in range(PER_GROUP):
                ids.append(jobs.client.submit(HOLD, [f"--job-name=budget-{g}-{k}", "--gres=gpu:1",
                                                     "--begin=now+2hours", "--output=/dev/null"]))
        jobs.ids.extend(ids)
        stream = io.StringIO()
        with Ledger(cfg.ledger_path) as ledger:
            daemon = Daemon(cfg, SlurmClient(timeout_s=20), ledger, configure("text", stream))
            before = _priorities(jobs.client, ids)
            decisions = daemon.cycle()
            order = [j for j in decisions.order if j in ids]
            assert sorted(order) == sorted(ids)
            head, rest = order[:BUDGET], order[BUDGET:]
            # the first cycle sent exactly the head of the start order
            assert sorted(daemon.pushed.accepted) == sorted(head)
            assert f"event=order_backlog left={len(ids) - BUDGET} budget={BUDGET}" in stream.getvalue()
            assert f"{len(ids) - BUDGET} pending jobs' values still to send" in freshness(
                ledger, time.time(), cfg.interval_s)
            after = _priorities(jobs.client, ids)
            enc = daemon.encoding(time.time())
            assert enc is not None
            # the head carries its value (SiteFactor adds at least step to every queue-0 job),
            # the rest still has what it had (SiteFactor 0): every head job outranks them all
            assert all(after[j] >= before[j] + enc.step for j in head)
            assert all(after[j] < before[j] + enc.step for j in rest)
            assert min(after[j] for j in head) > max(after[j] for j in rest)
            _assert_follows_order(head, after, ledger)

            cycles = 1
            while daemon.pushed.accepted and cycles < 10:
                decisions = daemon.cycle()
                cycles += 1
            # ceil(12 / 5) = 3 cycles send everything; the fourth finds nothing to send
            assert cycles == -(-len(ids) // BUDGET) + 1
            assert "event=order_backlog left=0" in stream.getvalue()
            assert "still to send" not in freshness(ledger, time.time(), cfg.interval_s)
            order = [j for j in decisions.order if j in ids]
            final = _priorities(jobs.client, ids)
            assert all(final[j] >= before[j] + enc.step for j in ids)
            _assert_follows_order(order, final, ledger)


def _assert_follows_order(order: list[int], priority: dict[int, int], ledger: Ledger) -> None:
    """Where the daemon gave a job a higher value than the next one in its start order,
    Slurm's priority is higher too (jobs of one group share a value)."""
    applied = {r.job_id: int(r.applied.split(":")[1]) for r in ledger.jobs(active_only=True)
               if r.applied}
    strict = 0
    for a, b in zip(order, order[1:]):
        assert applied[a] >= applied[b], (a, b)
        if applied[a] > applied[b]:
            strict += 1
            assert priority[a] > priority[b], (a, b, priority[a], priority[b])
    assert strict >= 1   # the groups' different entry times show in the values
