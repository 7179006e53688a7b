"""GPUs about to be freed count for the waiter: a job Slurm shows COMPLETING, a victim whose
preemption is in flight and a victim whose checkpoint signal Slurm refused because it was
already completing all release GPUs, so the daemon picks no other victim for the GPUs they
free (docs/dlprio.md, "Failure modes"). Whole cycles (observe → decide → act) against
:class:`daemon_unit_helpers.FakeSlurm`."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon_unit_helpers import FakeSlurm, sinfo_node, squeue_job
from slurm_plugin.slurm.client import SlurmRefused
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon

T0 = 10_000


def _daemon(tmp_path: Path, client: FakeSlurm, ledger: Ledger, clock: list[float]) -> Daemon:
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l.sqlite"),
                       snapshot_path=str(tmp_path / "snapshot.json"))
    return Daemon(cfg, client, ledger, CycleAdapter(), clock=lambda: clock[0])  # type: ignore[arg-type]


def _signals(client: FakeSlurm) -> list[int]:
    return [c[1] for c in client.calls if c[0] in ("signal", "requeue")]


@pytest.mark.parametrize("seen_after", ["COMPLETING", "RUNNING"])
def test_victim_refusing_the_signal_as_completing_gets_no_second_victim(
        tmp_path: Path, seen_after: str) -> None:
    """The waiter (8 GPUs) preempts job 1 (8 GPUs, most service); scancel answers that job 1
    is already completing. Next cycle squeue shows it COMPLETING (or, not caught up yet,
    still RUNNING): its 8 GPUs cover the waiter, so job 2 is left alone."""
    client = FakeSlurm(completing={1}, sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)])
    waiter = squeue_job(3, "PENDING", reason="Resources")
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=100),
                     squeue_job(2, "RUNNING", nodes="node2", start=1000), waiter]
    clock = [float(T0)]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        daemon = _daemon(tmp_path, client, ledger, clock)
        first = daemon.cycle()
        assert [(p.waiter, p.victims) for p in first.preemptions] == [(3, (1,))]
        assert _signals(client) == [1]
        client.squeue[0] = squeue_job(1, seen_after, nodes="node1", start=100,
                                      end=T0 + 5 if seen_after == "COMPLETING" else 0)
        clock[0] = T0 + 30.0
        second = daemon.cycle()
        assert second.preemptions == ()
        assert _signals(client) == [1] and ledger.intents(2) == []
        [intent] = ledger.intents(1)
        assert intent.outcome == ("ended before signal: scancel: error: Kill job error on job "
                                  "id 1: Job/step already completing or completed")
        assert ledger.job(1).preemptions == 0          # it ended by itself


def test_completing_job_covers_the_waiter_without_any_victim(tmp_path: Path) -> None:
    """Job 1 ends by itself (COMPLETING on node1, its 8 GPUs still allocated): the 8-GPU
    waiter waits for them instead of preempting job 2."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)])
    client.squeue = [squeue_job(1, "COMPLETING", nodes="node1", start=100, end=T0 - 2),
                     squeue_job(2, "RUNNING", nodes="node2", start=1000),
                     squeue_job(3, "PENDING", reason="Resources")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        decisions = _daemon(tmp_path, client, ledger, [float(T0)]).cycle()
        assert decisions.preemptions == () and _signals(client) == []
        assert ledger.open_intents() == []


def test_completing_job_freeing_half_the_need_leaves_exactly_one_more_victim(
        tmp_path: Path) -> None:
    """node1: job 1 completing (4 GPUs) and job 4 (4 GPUs, most service); node2: jobs 5 and
    6 (4 GPUs each). The 8-GPU waiter needs 4 more GPUs beside job 1's: one victim, job 4
    on node1, not both jobs of node2."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)])
    client.squeue = [squeue_job(1, "COMPLETING", nodes="node1", gpus=4, start=100, end=T0 - 2),
                     squeue_job(4, "RUNNING", nodes="node1", gpus=4, start=100),
                     squeue_job(5, "RUNNING", nodes="node2", gpus=4, start=1000),
                     squeue_job(6, "RUNNING", nodes="node2", gpus=4, start=1000),
                     squeue_job(3, "PENDING", reason="Resources")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        decisions = _daemon(tmp_path, client, ledger, [float(T0)]).cycle()
    assert [(p.waiter, p.victims) for p in decisions.preemptions] == [(3, (4,))]
    assert _signals(client) == [4]


def test_victim_whose_preemption_is_in_flight_before_its_signal_gets_no_second_victim(
        tmp_path: Path) -> None:
    """A daemon stopped right after writing job 1's intent: the next cycle sends job 1's
    signal and counts its GPUs as coming free, so job 2 is not preempted for the same
    waiter."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)])
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=100),
                     squeue_job(2, "RUNNING", nodes="node2", start=1000),
                     squeue_job(3, "PENDING", reason="Resources")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.add_intent(1, 3, "USR2", 60, restart_count=0, now=T0 - 1)
        decisions = _daemon(tmp_path, client, ledger, [float(T0)]).cycle()
        assert decisions.preemptions == ()
        assert _signals(client) == [1] and ledger.intents(2) == []


def test_dry_run_lists_the_completing_job_and_no_preemption(tmp_path: Path) -> None:
    import io
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)])
    client.squeue = [squeue_job(1, "COMPLETING", nodes="node1", start=100, end=T0 - 2),
                     squeue_job(2, "RUNNING", nodes="node2", start=1000),
                     squeue_job(3, "PENDING", reason="Resources")]
    out = io.StringIO()
    with Ledger(tmp_path / "l.sqlite") as ledger:
        cfg = DaemonConfig(snapshot_path=str(tmp_path / "snapshot.json"))
        Daemon(cfg, client, ledger, CycleAdapter(), clock=lambda: float(T0),  # type: ignore[arg-type]
               dry_run=True, out=out).cycle()
    rows = [line.split() for line in out.getvalue().splitlines()]
    assert [r[:3] for r in rows[1:4]] == [["0", "3", "PENDING"], ["-", "1", "COMPLETING"],
                                         ["-", "2", "RUNNING"]]
    assert rows[4:] == [["dry", "run:", "nothing", "sent", "to", "Slurm"]]


@pytest.mark.parametrize("state_after, outcome, second", [
    ("COMPLETING", "ended before signal: ", []),
    ("RUNNING", "signal refused: ", [(3, (2,))]),
])
def test_refused_signal_is_judged_by_the_job_state_slurm_shows(
        tmp_path: Path, state_after: str, outcome: str, second: list) -> None:
    """``scancel --signal --batch`` answers "Invalid job id specified" once a completing job's
    batch step is gone (seen on Slurm 22.05). The daemon reads the job: shown COMPLETING, it
    frees its GPUs by itself (no second victim); still RUNNING, it is a real refusal and the
    next cycle takes the other job for the waiter."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)])
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=100),
                     squeue_job(2, "RUNNING", nodes="node2", start=1000),
                     squeue_job(3, "PENDING", reason="Resources")]

    def refuse(job_id: int, sig: str, batch_only: bool = True) -> None:
        client.calls.append(("signal", job_id, sig))
        client.squeue[0] = squeue_job(1, state_after, nodes="node1", start=100,
                                      end=T0 + 5 if state_after == "COMPLETING" else 0)
        raise SlurmRefused(["scancel"], f"scancel: error: Kill job error on job id {job_id}: "
                           "Invalid job id specified")

    client.signal = refuse  # type: ignore[method-assign]
    clock = [float(T0)]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        daemon = _daemon(tmp_path, client, ledger, clock)
        assert [(p.waiter, p.victims) for p in daemon.cycle().preemptions] == [(3, (1,))]
        [intent] = ledger.intents(1)
        assert intent.outcome is not None and intent.outcome.startswith(outcome)
        assert intent.outcome.endswith("Invalid job id specified")
        clock[0] = T0 + 30.0
        assert [(p.waiter, p.victims) for p in daemon.cycle().preemptions] == second
        assert ledger.job(1).preemptions == 0


def test_the_loop_wakes_when_a_victims_grace_ends(tmp_path: Path) -> None:
    """A victim signalled at T0 with a 60 s grace (its marker) in a 120 s cycle: the next
    cycle comes 60 s later, when its requeue is due, not 118 s later (at least 1 s: a deadline
    that has passed never makes the loop spin); with no victim in grace, the rest of the cycle."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8)])
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=100),
                     squeue_job(3, "PENDING", reason="Resources")]
    clock = [float(T0)]
    cfg = DaemonConfig(ledger_path=str(tmp_path / "l.sqlite"), interval_s=120, max_grace_s=60,
                       snapshot_path=str(tmp_path / "snapshot.json"))
    with Ledger(tmp_path / "l.sqlite") as ledger:
        daemon = Daemon(cfg, client, ledger, CycleAdapter(), clock=lambda: clock[0])  # type: ignore[arg-type]
        assert daemon.next_delay(2.0) == 118.0
        daemon.cycle()
        assert _signals(client) == [1]
        assert daemon.next_delay(2.0) == 60.0
        clock[0] = T0 + 75
        assert daemon.next_delay(2.0) == 1.0
