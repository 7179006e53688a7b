"""observe's pure parts: hetjob components become one unit; what the policy is told about
held, exempt and non-requeueable jobs (docs/dlprio.md, "Preemption")."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from daemon_unit_helpers import FakeSlurm, sinfo_node, squeue_job, unit
from prioritizer.daemon import explain
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.policy.model import JobPhase
from prioritizer.daemon.observe import (awaiting_waiters, build_snapshot, observe,
                                        record_units, units_from_jobs)
from slurm_plugin.slurm.records import Node
from slurm_plugin.slurm.shapes import job_from_json


def _job(**kw: object) -> dict:
    base = {"job_id": 10, "job_state": "RUNNING", "user_name": "bob", "partition": "gpu",
            "tres_per_node": "gres:gpu:8", "node_count": 1, "nodes": "node1", "start_time": 100,
            "submit_time": 90, "requeue": True, "comment": "dl:v1;signal=USR2;grace=60"}
    base.update(kw)
    return base


def test_hetjob_is_one_unit_keyed_by_leader_with_every_component_node() -> None:
    jobs = [job_from_json(_job(job_id=11, het_job_id=10, het_job_offset=1, node_count=2,
                               nodes="node[2-3]", tres_per_node="gres:gpu:2", comment="")),
            job_from_json(_job(job_id=10, het_job_id=10, het_job_offset=0)),
            job_from_json(_job(job_id=12, tres_per_node=None, comment=""))]   # CPU-only job
    units = units_from_jobs(jobs, DaemonConfig())
    assert list(units) == [10]
    u = units[10]
    assert u.gpus_per_node == (8, 2, 2) and u.nodes == ("node1", "node2", "node3")
    assert u.gpus == 12 and u.contract is not None and u.contract.grace_s == 60


def test_partitions_filter_and_malformed_marker() -> None:
    jobs = [job_from_json(_job(job_id=1, partition="cpu")),
            job_from_json(_job(job_id=2, comment="dl:v1;signal=KILL;grace=5"))]
    units = units_from_jobs(jobs, DaemonConfig(partitions=("gpu",)))
    assert list(units) == [2] and units[2].contract is None


def test_unit_cache_reuses_units_of_the_same_job_records_and_rebuilds_changed_ones() -> None:
    """With a cache, a unit whose Job records are the very objects of the last call
    is reused; a changed component, a new job or a CPU-only job give what a fresh call gives."""
    lead = job_from_json(_job(job_id=10, het_job_id=10, het_job_offset=0))
    comp = job_from_json(_job(job_id=11, het_job_id=10, het_job_offset=1, node_count=2,
                              nodes="node[2-3]", tres_per_node="gres:gpu:2", comment=""))
    cpu = job_from_json(_job(job_id=12, tres_per_node=None, comment=""))
    cache: dict = {}
    cfg = DaemonConfig()
    first = units_from_jobs([comp, lead, cpu], cfg, cache)
    again = units_from_jobs([comp, lead, cpu], cfg, cache)
    assert list(again) == [10] and again[10] is first[10]
    grown = job_from_json(_job(job_id=11, het_job_id=10, het_job_offset=1, node_count=2,
                               nodes="node[2-3]", tres_per_node="gres:gpu:4", comment=""))
    other = job_from_json(_job(job_id=20))
    third = units_from_jobs([grown, lead, cpu, other], cfg, cache)
    assert third == units_from_jobs([grown, lead, cpu, other], cfg)
    assert third[10] is not first[10] and third[10].gpus_per_node == (8, 4, 4)
    assert set(cache) == {10, 12, 20}      # only this call's units are kept


def _node(name: str, used: int) -> Node:
    return Node(name, "127.0.0.1", "mixed", (), ("gpu",), 16, 2, 8, 64000, 8, used, "a100")


def test_snapshot_marks_exempt_held_and_unrequeueable_jobs(tmp_path: Path) -> None:
    cfg = DaemonConfig(exempt_accounts=("vip",))
    units = {u.job_id: u for u in (
        unit(1, gpus=8), unit(2, gpus=8, account="vip"),
        unit(3, "PENDING", start=None, reason="JobHeldUser"),
        unit(4, "PENDING", start=None, reason="Resources"))}
    units[5] = unit(5, gpus=8).__class__(**{**unit(5, gpus=8).__dict__, "requeue": False})
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=130)
        snap = build_snapshot(ledger, units, [_node("node1", 8)], [], cfg, now=130)
    views = {v.job_id: v for v in snap.jobs}
    assert [views[j].preemptible for j in (1, 2, 5)] == [True, False, False]
    assert views[1].phase is JobPhase.RUNNING and views[1].run_start == 100
    assert views[1].attained_gpu_s == 8 * 30 and views[1].nodes == ("node1",)
    assert views[3].eligible_time == math.inf and views[4].eligible_time is None


def test_gpu_less_hetjob_component_needs_no_gpu_node() -> None:
    """PAI's ps (0 GPUs) + worker (8 GPUs) is one 8-GPU node, not (0, 8)."""
    pending = [job_from_json(_job(job_id=20, het_job_id=20, het_job_offset=0, job_state="PENDING",
                                  tres_per_node=None, nodes="", start_time=0)),
               job_from_json(_job(job_id=21, het_job_id=20, het_job_offset=1, job_state="PENDING",
                                  nodes="", start_time=0))]
    running = [job_from_json(_job(job_id=30, het_job_id=30, het_job_offset=0, tres_per_node=None,
                                  nodes="node4")),
               job_from_json(_job(job_id=31, het_job_id=30, het_job_offset=1, nodes="node2"))]
    units = units_from_jobs(pending + running, DaemonConfig())
    assert units[20].gpus_per_node == (8,) and units[20].nodes == ()
    assert units[30].gpus_per_node == (8,) and units[30].nodes == ("node2",)


def test_gpu_less_component_lets_the_hetjob_start_on_a_free_node_without_preemption(
        tmp_path: Path) -> None:
    """With one free 8-GPU node, the (ps, worker) hetjob fits: nobody is preempted."""
    from prioritizer.policy.config import PolicyConfig
    from prioritizer.policy.decide import decide
    jobs = [job_from_json(_job(job_id=20, het_job_id=20, het_job_offset=0, job_state="PENDING",
                               tres_per_node=None, nodes="", start_time=0, state_reason="Resources")),
            job_from_json(_job(job_id=21, het_job_id=20, het_job_offset=1, job_state="PENDING",
                               nodes="", start_time=0, state_reason="Resources")),
            job_from_json(_job(job_id=5, nodes="node1", start_time=10))]
    cfg = DaemonConfig(policy=PolicyConfig(min_run_s=0))
    units = units_from_jobs(jobs, cfg)
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=5000)
            ledger.set_queue(5, 1, 100, 0, "demoted", 100, False)   # the running job is lower
        snap = build_snapshot(ledger, units, [_node("node1", 8), _node("node2", 0)], [], cfg,
                              now=5000)
    assert decide(snap, cfg.policy, 5000).preemptions == ()
    # the old model, (0, 8), asked for a second node and preempted job 5
    import dataclasses
    old = dataclasses.replace(snap, jobs=tuple(
        dataclasses.replace(v, gpus_per_node=(0, 8)) if v.job_id == 20 else v for v in snap.jobs))
    assert [p.victims for p in decide(old, cfg.policy, 5000).preemptions] == [(5,)]


def test_interactive_allocation_is_never_a_victim(tmp_path: Path) -> None:
    """``salloc``/``srun`` jobs (``batch_flag`` false) cannot be requeued."""
    jobs = [job_from_json(_job(job_id=40, batch_flag=False)), job_from_json(_job(job_id=41))]
    units = units_from_jobs(jobs, DaemonConfig())
    assert units[40].requeue is False and units[41].requeue is True
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=130)
        snap = build_snapshot(ledger, units, [_node("node1", 8)], [], DaemonConfig(), now=130)
    assert {v.job_id: v.preemptible for v in snap.jobs} == {40: False, 41: True}


def test_tiers_from_scontrol_show_partition_reach_the_policy(tmp_path: Path) -> None:
    """Each unit carries its partition's PriorityTier (highest of a list)."""
    from prioritizer.daemon.observe import partition_tiers
    tiers = partition_tiers({"gpu": {"PriorityTier": "1"}, "hi": {"PriorityTier": "10"},
                             "odd": {"PriorityTier": "x"}})
    assert tiers == {"gpu": 1, "hi": 10, "odd": 0}
    units = {u.job_id: u for u in (unit(1, gpus=8), unit(2, "PENDING", start=None, partition="gpu,hi"))}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=130)
        snap = build_snapshot(ledger, units, [_node("node1", 8)], [], DaemonConfig(), now=130,
                              tiers=tiers)
    assert {v.job_id: v.tier for v in snap.jobs} == {1: 1, 2: 10}


def test_snapshot_gives_the_first_run_start_for_the_requeue_guard(tmp_path: Path) -> None:
    """``JobView.first_start`` is the start of the job's first run in the ledger (the
    requeue guard counts the time lost since then): job 1 ran 10-40 s, was requeued and
    runs again since 100; job 4 never ran."""
    units = {u.job_id: u for u in (unit(1, gpus=8),
                                   unit(4, "PENDING", start=None, reason="Resources"))}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=130)
            ledger.start_run(1, 10.0, 8, now=10.0)
            ledger.close_run(1, 10.0, 40.0, "requeue")
        snap = build_snapshot(ledger, units, [_node("node1", 8)], [], DaemonConfig(), now=130)
    views = {v.job_id: v for v in snap.jobs}
    assert (views[1].first_start, views[1].run_start, views[1].last_run_end) == (10.0, 100, 40.0)
    assert views[1].attained_s == 30 + 30   # 10-40 s, then 100-130 s
    assert views[4].first_start is None


def test_a_suspended_or_stopped_job_keeps_its_run_and_a_held_one_is_not_ordered() -> None:
    """squeue(1): SUSPENDED and STOPPED ("execution has been stopped with SIGSTOP signal. CPUS
    have been retained") keep the allocation, so the run goes on; REQUEUE_HOLD, RESV_DEL_HOLD
    and SPECIAL_EXIT wait, held, for a person, not for the daemon's order."""
    phases = {state: units_from_jobs([job_from_json(_job(job_state=state))], DaemonConfig())[10].phase
              for state in ("SUSPENDED", "STOPPED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT")}
    assert phases == {"SUSPENDED": JobPhase.RUNNING, "STOPPED": JobPhase.RUNNING,
                      "REQUEUE_HOLD": None, "RESV_DEL_HOLD": None, "SPECIAL_EXIT": None}


def test_a_held_job_stays_active_with_its_runs_through_retention_and_resumes_with_them(
        tmp_path: Path) -> None:
    """Job 7 runs 100-400 s on 8 GPUs (seen at 200 and 400 s), then is held (REQUEUE_HOLD
    from ``scontrol requeuehold``; RESV_DEL_HOLD and SPECIAL_EXIT alike) for 30 days, longer
    than the 21 days of retention, then released. Held, it is not ordered, not ended and
    not pruned; released, it waits with its 300 s × 8 GPUs = 2,400 GPU·s of attained
    service. A ledger that had marked a held job ended (job 8) takes it back as active."""
    day = 86400.0
    with Ledger(tmp_path / "l.sqlite") as ledger:
        for now, state, start in ((200.0, "RUNNING", 100.0), (400.0, "RUNNING", 100.0),
                                  (500.0, "REQUEUE_HOLD", None), (500.0 + 30 * day, "REQUEUE_HOLD", None)):
            with ledger.transaction():
                record_units(None, ledger, {7: unit(7, state, start=start)}, now=now)
        row = ledger.job(7)
        assert row is not None and (row.state, row.ended_at) == ("REQUEUE_HOLD", None)
        assert ledger.prune(500.0 + 30 * day - 21 * day) == 0
        assert [(r.start, r.end) for r in ledger.runs(7)] == [(100.0, 400.0)]
        for state in ("RESV_DEL_HOLD", "SPECIAL_EXIT"):
            with ledger.transaction():
                ledger.upsert_job(8, user="alice", account="acct", partition="gpu", state=state,
                                  gpus=8, submit_time=50.0, restart_count=0, now=600.0)
                ledger.mark_ended(8, state, 600.0)
                record_units(None, ledger, {8: unit(8, state, start=None)}, now=630.0)
            row8 = ledger.job(8)
            assert row8 is not None and (row8.state, row8.ended_at) == (state, None)
        now = 600.0 + 30 * day
        released = {7: unit(7, "PENDING", start=None, reason="Priority")}
        with ledger.transaction():
            record_units(None, ledger, released, now=now)
        snap = build_snapshot(ledger, released, [_node("node1", 0)], [], DaemonConfig(), now=now)
    (view,) = snap.jobs
    assert (view.job_id, view.phase, view.attained_gpu_s) == (7, JobPhase.PENDING, 2400.0)


def test_no_victim_on_a_node_that_takes_no_new_job_nor_a_suspended_one(tmp_path: Path) -> None:
    """Job 1 runs on node1, which is draining (``mixed`` + DRAIN: its jobs are let finish, and
    GPUs freed there start nothing); job 2 on node2 is SUSPENDED (``scancel --signal`` answers
    "Job is in transitional state, retrying" until it is resumed), job 5 on node2 STOPPED;
    job 3 on node2 runs: only job 3 may be a victim."""
    draining = Node("node1", "127.0.0.1", "mixed", ("DRAIN",), ("gpu",), 16, 2, 8, 64000, 8, 8, "a100")
    on2 = {u.job_id: dataclasses.replace(u, nodes=("node2",))
           for u in (unit(2, "SUSPENDED", gpus=2), unit(3, gpus=2), unit(5, "STOPPED", gpus=2))}
    units = {1: unit(1, gpus=8), **on2}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            record_units(None, ledger, units, now=130)
        snap = build_snapshot(ledger, units, [draining, _node("node2", 6)], [], DaemonConfig(),
                              now=130)
    assert {v.job_id: v.preemptible for v in snap.jobs} == {1: False, 2: False, 3: True, 5: False}


def test_a_job_requeued_in_held_state_reads_as_held() -> None:
    """``scontrol requeuehold`` on 24.11 and 26.05: squeue shows PENDING, priority 0 and the
    reason "job requeued in held state" (the hold's description, not JobHeldUser)."""
    held = unit(7, "PENDING", start=None, reason="job requeued in held state")
    held = dataclasses.replace(held, priority=0)
    waiting = dataclasses.replace(unit(8, "PENDING", start=None, reason="Resources"), priority=0)
    assert (held.held, waiting.held) == (True, False)
    assert unit(9, "PENDING", start=None, reason="JobHeldAdmin").held


def test_a_waiter_preempted_for_that_does_not_start_is_preempted_for_no_more(
        tmp_path: Path) -> None:
    """Victims were requeued for waiter 4 at 1,000 s. Slurm starts a waiter that lacked only
    GPUs within SETTLE_S (120 s, the interval being 30 s): until then it may still preempt
    (eligible now); from 1,120 s on, still pending, it lacks what the policy cannot see (CPUs,
    the nodes it named...) and waits without preempting (eligible never). Waiter 6 had victims
    requeued at 1,000 s too, then ran from 1,010 s and was requeued itself: it may preempt."""
    waiters = {u.job_id: u for u in (unit(4, "PENDING", start=None, reason="Resources"),
                                     unit(6, "PENDING", start=None, reason="Priority"))}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        for waiter in (4, 6):
            ledger.finish_intent(ledger.add_intent(90 + waiter, waiter, "USR2", 30, 0, now=900),
                                 1000.0, "requeued")
        with ledger.transaction():
            record_units(None, ledger, waiters, now=1000)
            ledger.start_run(6, 1010.0, 8, now=1010.0)
            ledger.close_run(6, 1010.0, 1050.0, "requeue")
        eligible = {now: {v.job_id: v.eligible_time for v in build_snapshot(
            ledger, waiters, [_node("node1", 8)], [], DaemonConfig(), now=now).jobs}
            for now in (1119.0, 1120.0)}
    assert eligible == {1119.0: {4: None, 6: None}, 1120.0: {4: math.inf, 6: None}}


def test_a_waiter_held_after_its_victims_requeue_is_a_fresh_waiter_once_released(
        tmp_path: Path) -> None:
    """Victims were requeued for waiters 4, 5 and 6 at 1,000 s (settle 120 s). 4 was seen held
    (JobHeldUser) at 1,030 s and released by 1,090 s: the hold kept it from starting, so at
    1,100 s GPUs are no longer being freed for it (awaiting: 5 and 6) and at 1,200 s it may
    preempt (eligible now) while 5, never held, is stuck (eligible never); explain says so of
    5 and nothing of the requeue of 4. 6 was held at 990 s and released at 995 s, before the
    requeue: stuck at 1,200 s as 5. A new requeue for 4 at 1,300 s counts again: at 1,420 s,
    not started, it is stuck (its last hold, 1,030 s, came before that requeue)."""
    pending = {j: unit(j, "PENDING", start=None, reason="Resources") for j in (4, 5, 6)}
    held = {j: dataclasses.replace(u, reason="JobHeldUser") for j, u in pending.items()}
    cfg, node = DaemonConfig(), [_node("node1", 8)]

    def eligible(ledger: Ledger, now: float) -> dict[int, float | None]:
        return {v.job_id: v.eligible_time for v in build_snapshot(
            ledger, pending, node, [], cfg, now=now).jobs}

    with Ledger(tmp_path / "l.sqlite") as ledger:
        for now, units in ((990, {**pending, 6: held[6]}), (995, pending)):
            with ledger.transaction():
                record_units(None, ledger, units, now=now)
        for waiter in (4, 5, 6):
            ledger.finish_intent(ledger.add_intent(90 + waiter, waiter, "USR2", 30, 0, now=900),
                                 1000.0, "requeued")
        for now, units in ((1030, {**pending, 4: held[4]}), (1090, pending), (1100, pending)):
            with ledger.transaction():
                record_units(None, ledger, units, now=now)
        assert awaiting_waiters(ledger, pending, [], 1100, 120,
                                ledger.requeued_for()) == {5, 6}
        with ledger.transaction():
            record_units(None, ledger, pending, now=1200)
        assert eligible(ledger, 1200) == {4: None, 5: math.inf, 6: math.inf}
        said = {j: [line for line in explain.explain(j, ledger, cfg, 1200).splitlines()
                    if line.startswith("victims were requeued")] for j in (4, 5)}
        assert said == {4: [], 5: [
            "victims were requeued for it at 1970-01-01 00:16:40 UTC and it has not started in "
            "120 s: Slurm lacks something else for it (CPUs, memory, the nodes it named or "
            "excluded), so it preempts no more until it starts"]}
        ledger.finish_intent(ledger.add_intent(99, 4, "USR2", 30, 0, now=1250), 1300.0,
                             "requeued")
        with ledger.transaction():
            record_units(None, ledger, pending, now=1420)
        assert eligible(ledger, 1420)[4] == math.inf


def test_awaiting_waiters_are_those_gpus_are_being_freed_for(tmp_path: Path) -> None:
    """Waiter 20 has an open intent (its victim 1 checkpointing); waiter 21's victim 2 was
    requeued at 1000, 60 s before now (settle 120 s); waiter 22's victim 3 at 900, 160 s
    before; waiter 23's victim 4 at 1000, but 23 ran from 1010 to 1030 and waits again;
    waiter 24 has an open intent and is running. Awaiting: 20 and 21."""
    units = {j: unit(j, "PENDING", start=None) for j in (20, 21, 22, 23)} | {24: unit(24)}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        open_ = [ledger.add_intent(1, 20, "USR2", 30, 0, now=990),
                 ledger.add_intent(5, 24, "USR2", 30, 0, now=990)]
        for victim, waiter, done in ((2, 21, 1000), (3, 22, 900), (4, 23, 1000)):
            ledger.finish_intent(ledger.add_intent(victim, waiter, "USR2", 30, 0, now=done - 20),
                                 done, "requeued")
        ledger.start_run(23, 1010, 8, now=1010)
        ledger.close_run(23, 1010, 1030, "slurm")
        intents = ledger.open_intents()
        assert sorted(i.id for i in intents) == sorted(open_)
        assert awaiting_waiters(ledger, units, intents, 1060, 120,
                                ledger.requeued_for()) == {20, 21}


def test_a_cycle_reads_requeued_for_once(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Victims were requeued for waiter 4 at 1,000 s; at 1,060 s one observe reads the
    intents' requeue times once, for the snapshot (eligible now: within 120 s) and for the
    awaiting waiters (4) alike."""
    slurm = FakeSlurm(squeue=[squeue_job(4, "PENDING", reason="Resources")],
                      sinfo=[sinfo_node("node1", 8)])
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.finish_intent(ledger.add_intent(90, 4, "USR2", 30, 0, now=900), 1000.0,
                             "requeued")
        reads: list[dict[int, float]] = []
        read = ledger.requeued_for
        monkeypatch.setattr(ledger, "requeued_for", lambda: reads.append(read()) or reads[-1])
        seen = observe(slurm, ledger, DaemonConfig(), now=1060.0)
    assert reads == [{4: 1000.0}]
    assert seen.awaiting == {4}
    assert {v.job_id: v.eligible_time for v in seen.snapshot.jobs} == {4: None}


def test_only_the_array_task_under_the_arrays_own_id_is_named_by_its_task() -> None:
    """Array 40: task 2 started under a new id (41), task 3, the last, under the array's id;
    a record of pending tasks keeps the array id too. Slurm's commands name the last task
    ``40_3`` (the id alone names every task), the others as before."""
    last = job_from_json(_job(job_id=40, array_job_id=40, array_task_id=3, start_time=1015))
    first = job_from_json(_job(job_id=41, array_job_id=40, array_task_id=2, start_time=1000))
    units = units_from_jobs([last, first], DaemonConfig())
    assert (units[40].update_target, units[41].update_target) == ("40_3", 41)
    record = job_from_json(_job(job_id=50, array_job_id=50, array_task_string="3-10",
                                job_state="PENDING", state_reason="Priority", nodes="",
                                start_time=0))
    assert units_from_jobs([record], DaemonConfig())[50].update_target == "50_[3-10]"


def test_a_pending_array_whose_task_started_is_no_stuck_waiter(tmp_path: Path) -> None:
    """Victims were requeued for pending array 40 (tasks 2-10) at 1,000 s, and Slurm started
    its task 2 at 1,015 s, as every task but the last starts: under a new job id (41; the
    pending record keeps 40). Its record never shows a run of its own, so it is no waiter that
    failed to start: at 1,200 s its tasks 3-10 may still preempt, and explain does not say
    it preempts no more."""
    jobs = [job_from_json(_job(job_id=40, array_job_id=40, array_task_string="3-10",
                               job_state="PENDING", state_reason="Priority", nodes="",
                               start_time=0, priority=500)),
            job_from_json(_job(job_id=41, array_job_id=40, array_task_id=2, start_time=1015))]
    units = units_from_jobs(jobs, DaemonConfig())
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.finish_intent(ledger.add_intent(90, 40, "USR2", 30, 0, now=900), 1000.0,
                             "requeued")
        with ledger.transaction():
            record_units(None, ledger, units, now=1020)
        snap = build_snapshot(ledger, units, [_node("node1", 8)], [], DaemonConfig(), now=1200)
        text = explain.explain(40, ledger, DaemonConfig(), now=1200)
        settling = explain.explain(40, ledger, DaemonConfig(), now=1050)
    assert {v.job_id: v.eligible_time for v in snap.jobs} == {40: None, 41: None}
    assert "victims were requeued" not in text and "preempts no more" not in text
    # while settle lasts it is awaited as any waiter (the daemon orders it first), never stuck
    assert "Slurm should start its next task by" in settling
    assert "preempts no more" not in settling


def test_a_waiter_that_started_after_a_requeue_finished_late_is_no_stuck_waiter(
        tmp_path: Path) -> None:
    """The daemon requeued victim 90 for waiter 4 at 130 s and was killed before it wrote the
    outcome; restarted at 5,000 s, it finds the victim requeued and finishes the intent then.
    Waiter 4 had started at 140 s (after the requeue), ran until 3,000 s and waits again: it
    did start after its victims were requeued, so at 5,200 s it may preempt."""
    waiter = {4: unit(4, "PENDING", start=None, reason="Priority", restart=1)}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        intent = ledger.add_intent(90, 4, "USR2", 30, 0, now=100)
        ledger.mark_signal(intent, 100.0, 130.0)
        ledger.mark_requeue(intent, 130.0)
        with ledger.transaction():
            record_units(None, ledger, waiter, now=5000)
            ledger.start_run(4, 140.0, 8, now=140.0)
            ledger.close_run(4, 140.0, 3000.0, "requeue")
        ledger.finish_intent(intent, 5000.0, "requeued")     # recovered on restart
        snap = build_snapshot(ledger, waiter, [_node("node1", 8)], [], DaemonConfig(), now=5200)
    assert {v.job_id: v.eligible_time for v in snap.jobs} == {4: None}


def test_a_waiter_started_in_the_second_of_its_victims_requeue_is_no_stuck_waiter(
        tmp_path: Path) -> None:
    """The cycle that requeued victim 90 for waiter 4 began at 1,000.4 s (the intent's
    requeue_at); Slurm freed the GPUs and started the waiter within that second, and gives
    its start in whole seconds: 1,000. Requeued itself at 1,200 s and waiting at 1,300 s,
    it did start after its victims' requeue: it may preempt."""
    waiter = {4: unit(4, "PENDING", start=None, reason="Priority", restart=1)}
    with Ledger(tmp_path / "l.sqlite") as ledger:
        intent = ledger.add_intent(90, 4, None, 0, 0, now=1000.4)
        ledger.mark_requeue(intent, 1000.4)
        ledger.finish_intent(intent, 1000.4, "requeued")
        with ledger.transaction():
            record_units(None, ledger, waiter, now=1300)
            ledger.start_run(4, 1000.0, 8, now=1030.0)
            ledger.close_run(4, 1000.0, 1200.0, "requeue")
        snap = build_snapshot(ledger, waiter, [_node("node1", 8)], [], DaemonConfig(), now=1300)
    assert {v.job_id: v.eligible_time for v in snap.jobs} == {4: None}


def test_a_held_job_that_leaves_squeue_unseen_is_gone_not_still_held(tmp_path: Path) -> None:
    """Job 7 is held (REQUEUE_HOLD), then squeue no longer lists it (cancelled and purged while
    the daemon was away): its end state was not seen, so the ledger says GONE, as for a pending
    job, instead of an ended job still "REQUEUE_HOLD"."""
    with Ledger(tmp_path / "l.sqlite") as ledger:
        for now, units in ((500.0, {7: unit(7, "REQUEUE_HOLD", start=None)}), (900.0, {})):
            with ledger.transaction():
                record_units(None, ledger, units, now=now)
        row = ledger.job(7)
    assert row is not None and (row.state, row.ended_at) == ("GONE", 900.0)


def test_a_running_job_under_scontrol_hold_is_not_held() -> None:
    """26.05: ``scontrol hold 106`` on a running job leaves it RUNNING on its node with
    priority 0 and reason JobHeldAdmin (JobHeldUser after a user's hold): it is not held
    here, and nothing is recorded as holding it. Requeued, pending with that reason, it is."""
    running = unit(106, "RUNNING", reason="JobHeldAdmin")
    assert (running.priority, running.held, running.hold) == (0, False, None)
    assert unit(106, "RUNNING", reason="JobHeldUser").held is False
    requeued = unit(106, "PENDING", start=None, reason="JobHeldAdmin")
    assert (requeued.held, requeued.hold) == (True, "JobHeldAdmin")
