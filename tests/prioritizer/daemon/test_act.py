"""act: the priority encoding (strict queue precedence), diffing and batching.

The batching tests use a recording fake client (tests/daemon_unit_helpers.py): they are unit
tests of the diff logic only; tests/live/test_daemon_live.py shows Slurm starting jobs in order."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon_unit_helpers import RecordingClient, observation, unit
from prioritizer.daemon import act
from prioritizer.daemon.config import DaemonConfig
from log_helpers import captured
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.ledger import Ledger
from prioritizer.policy.model import Decisions, QueueState
from prioritizer.daemon.observe import record_units

SHOW_CONFIG = {"PriorityWeightAge": "1000", "PriorityWeightAssoc": "0",
               "PriorityWeightFairShare": "1000", "PriorityWeightJobSize": "100",
               "PriorityWeightPartition": "1000", "PriorityWeightQOS": "0",
               "PriorityWeightTRES": "CPU=1000,Mem=2000,GRES/gpu=3000", "PriorityType": "x"}


def test_other_weights_sum_every_priority_weight() -> None:
    assert act.other_weights(SHOW_CONFIG) == 1000 + 1000 + 100 + 1000 + 1000 + 2000 + 3000
    assert act.other_weights({"PriorityWeightTRES": "(null)"}) == 0


def test_values_by_hand() -> None:
    enc = act.Encoding(queues=3, span=10, weights=5, ref=100)   # step = 10 + 5 + 1 = 16
    assert enc.value(0, 100) == 2 * 16 + 9 + 1
    assert enc.value(0, 109) == 2 * 16 + 0 + 1
    assert enc.value(0, 500) == 2 * 16 + 0 + 1      # beyond the span: bottom of its queue
    assert enc.value(0, 50) == 2 * 16 + 9 + 1       # before the reference: top of its queue
    assert enc.value(1, 100) == 16 + 10
    assert enc.value(2, 105) == 0 + 4 + 1


@given(q=st.integers(0, 3), dq=st.integers(1, 3), e1=st.floats(-1e7, 1e8),
       e2=st.floats(-1e7, 1e8), weights=st.integers(0, 10**6), span=st.integers(1, 10**6))
def test_queue_precedence_is_strict_whatever_other_factors_add(
        q: int, dq: int, e1: float, e2: float, weights: int, span: int) -> None:
    enc = act.Encoding(queues=q + dq + 1, span=span, weights=weights, ref=1e6)
    # the lowest job of a queue (other factors 0) outranks the highest of any lower queue
    assert enc.value(q, e1) > enc.value(q + dq, e2) + weights
    assert enc.value(q + dq, e2) >= 1   # absolute priority 0 would hold the job


def test_older_entry_ranks_higher_inside_a_queue() -> None:
    enc = act.Encoding(queues=2, span=1000, weights=0, ref=0)
    assert enc.value(1, 10) > enc.value(1, 11)


def test_overflow_is_a_clear_error() -> None:
    with pytest.raises(act.OrderError, match="lower inqueue_span_s"):
        act.Encoding(queues=10, span=10**8, weights=10**9, ref=0).check()


def test_diff_sends_only_changes_grouped_by_value() -> None:
    wanted = {1: "site_factor:5", 2: "site_factor:5", 3: "site_factor:7", 4: "site_factor:9"}
    current = {1: "site_factor:5", 2: None, 3: "site_factor:6", 4: "site_factor:9"}
    assert act.diff(wanted, current) == {"site_factor:5": [2], "site_factor:7": [3]}


def _decisions(*states: tuple[int, int, float]) -> Decisions:
    return Decisions(order=tuple(s[0] for s in states),
                     states={j: QueueState(j, q, e, 0.0, False, "") for j, q, e in states})


def _ledger_with(tmp_path: Path, obs) -> Ledger:
    ledger = Ledger(tmp_path / "l.sqlite")
    with ledger.transaction():
        record_units(None, ledger, obs.units, obs.now)
    return ledger


def test_one_scontrol_call_per_value_and_no_call_when_nothing_changed(tmp_path: Path) -> None:
    obs = observation(200, *(unit(j, "PENDING", start=None) for j in (1, 2, 3)))
    ledger = _ledger_with(tmp_path, obs)
    cfg = DaemonConfig()
    enc = act.Encoding(queues=3, span=100, weights=0, ref=100)   # step 101
    dec = _decisions((1, 0, 150), (2, 0, 150), (3, 1, 120))
    client = RecordingClient()
    log = CycleAdapter()
    for _ in range(2):
        batches = act.diff(act.targets(dec, obs, cfg, enc), act.current_values(ledger, obs, cfg))
        act.push(client, ledger, batches, log)  # type: ignore[arg-type]
    # queue 0 entered at 150: 2*101 + (99-50) + 1 = 252; queue 1 at 120: 101 + 79 + 1 = 181
    # (the two calls run in parallel: their order is not fixed)
    assert sorted(client.calls) == [("site_factor", [1, 2], 252), ("site_factor", [3], 181)]


def test_refused_batch_falls_back_to_single_jobs(tmp_path: Path) -> None:
    obs = observation(200, *(unit(j, "PENDING", start=None) for j in (1, 2, 3)))
    ledger = _ledger_with(tmp_path, obs)
    client = RecordingClient(refuse={2})
    refused = act.push(client, ledger, {"priority:9": [1, 2, 3]},  # type: ignore[arg-type]
                       CycleAdapter())
    assert [j for j, _ in refused.refused] == [2] and refused.accepted == [1, 3]
    assert client.calls == [("priority", [1, 2, 3], 9), ("priority", [1], 9),
                            ("priority", [2], 9), ("priority", [3], 9)]
    assert [ledger.job(j).applied for j in (1, 2, 3)] == ["priority:9", None, "priority:9"]


def test_an_arrays_pending_record_is_updated_through_its_pending_tasks(tmp_path: Path) -> None:
    """Array 40's record holds tasks 5-9 (throttled to 2 at a time); ``jobid=40`` would name
    every task, and one that ended makes Slurm answer "Job has already finished" (exit 1):
    the update names ``40_[5-9]`` instead; a plain job keeps its id."""
    import dataclasses
    record = dataclasses.replace(unit(40, "PENDING", start=None), array_tasks="5-9%2", tasks=5)
    plain = unit(41, "PENDING", start=None)
    assert (record.update_target, plain.update_target) == ("40_[5-9]", 41)
    obs = observation(200, record, plain)
    ledger = _ledger_with(tmp_path, obs)
    client = RecordingClient()
    result = act.push(client, ledger, {"priority:9": [40, 41]}, CycleAdapter(),  # type: ignore[arg-type]
                      targets={40: record.update_target})
    assert result.accepted == [40, 41]
    assert client.calls == [("priority", ["40_[5-9]", 41], 9)]


def test_partition_mode_moves_pending_jobs_only_when_their_partition_differs(tmp_path: Path) -> None:
    cfg = DaemonConfig(mode="partition", queue_partitions=("q0", "q1", "q2"))
    obs = observation(200, unit(1, "PENDING", start=None, partition="q0"),
                      unit(2, "PENDING", start=None, partition="q0"),
                      unit(3, "RUNNING", partition="q0"))
    dec = _decisions((1, 0, 1), (2, 2, 1))
    assert act.diff(act.targets(dec, obs, cfg, None), act.current_values(
        _ledger_with(tmp_path, obs), obs, cfg)) == {"partition:q2": [2]}


def test_readback_flags_absolute_priority_slurm_did_not_take(tmp_path: Path) -> None:
    cfg = DaemonConfig(priority_field="priority")
    obs = observation(200, unit(1, "PENDING", start=None))     # squeue shows priority 0
    ledger = _ledger_with(tmp_path, obs)
    with ledger.transaction():
        ledger.set_applied([1], "priority:77")
    with captured() as (log, out):
        assert act.readback(ledger, obs, cfg, log) == 1
    assert "job_id=1 event=readback_mismatch asked=priority:77 slurm_priority=0" in out.getvalue()
    assert ledger.job(1).applied is None   # forgotten: this cycle sends it again


@pytest.mark.parametrize("field", ["site_factor", "priority"])
def test_readback_finds_no_mismatch_in_a_held_job(tmp_path: Path, field: str) -> None:
    """``scontrol hold`` and ``requeuehold`` set the priority to 0 (24.11, 26.05: PENDING,
    JobHeldAdmin or "job requeued in held state"): no mismatch, and the value sent is kept."""
    cfg = DaemonConfig(priority_field=field)
    obs = observation(200, unit(1, "PENDING", start=None, reason="JobHeldAdmin"),
                      unit(2, "PENDING", start=None, reason="job requeued in held state"))
    ledger = _ledger_with(tmp_path, obs)
    with ledger.transaction():
        ledger.set_applied([1, 2], f"{field}:77")
    with captured() as (log, out):
        assert act.readback(ledger, obs, cfg, log) == 0
    assert "readback_mismatch" not in out.getvalue()
    assert [ledger.job(j).applied for j in (1, 2)] == [f"{field}:77"] * 2


def test_held_jobs_get_no_update(tmp_path: Path) -> None:
    obs = observation(200, unit(1, "PENDING", start=None, reason="JobHeldUser"),
                      unit(2, "PENDING", start=None, reason="Priority"))
    enc = act.Encoding(queues=3, span=100, weights=0, ref=100)
    assert list(act.targets(_decisions((1, 0, 150), (2, 0, 150)), obs, DaemonConfig(), enc)) == [2]


def test_refused_update_backs_off_per_job_instead_of_every_cycle(tmp_path: Path) -> None:
    """Job 2's update is refused; it is not re-sent until its backoff
    (interval, doubling) is over, while the other jobs' updates go on; an accepted update
    ends the backoff."""
    obs = observation(200, *(unit(j, "PENDING", start=None) for j in (1, 2)))
    ledger = _ledger_with(tmp_path, obs)
    client = RecordingClient(refuse={2})
    log = CycleAdapter()
    sent_to_2 = []
    for now in range(200, 300, 10):          # a 10 s cycle; job 1's value changes each cycle
        wanted = act.without_backoff({1: f"priority:{now}", 2: f"priority:{now}"}, ledger, now)
        batches = act.diff(wanted, act.current_values(ledger, obs, DaemonConfig()))
        before = len(client.calls)
        act.push(client, ledger, batches, log, now=now, backoff_s=10, backoff_max_s=40)  # type: ignore[arg-type]
        if any(2 in c[1] for c in client.calls[before:]):
            sent_to_2.append(now)
    assert sent_to_2 == [200, 210, 230, 270]      # waits 10, 20, 40 (the cap), ...
    row = ledger.job(2)
    assert row.refusals == 4 and row.retry_at == 310 and "no longer pending" in row.refused
    assert ledger.job(1).refusals == 0
    client.refuse.clear()
    wanted = act.without_backoff({2: "priority:5"}, ledger, 310)
    act.push(client, ledger, act.diff(wanted, {}), log, now=310, backoff_s=10, backoff_max_s=40)  # type: ignore[arg-type]
    assert (ledger.job(2).refusals, ledger.job(2).retry_at) == (0, None)


def test_once_exits_4_only_when_slurm_accepted_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    from prioritizer.daemon.cli import once_exit
    assert once_exit(act.PushResult([], [])) == 0                       # nothing to send
    assert once_exit(act.PushResult([1], [(2, "Access/permission denied")])) == 0
    assert once_exit(act.PushResult([], [(2, "Access/permission denied")])) == 4   # SLURM_REFUSED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "job 2: Access/permission denied" in err


# ---------------------------------------------------------------- update budget
def test_plan_sends_the_head_of_the_start_order_first_up_to_the_budget() -> None:
    wanted = {5: "site_factor:9", 3: "site_factor:8", 9: "site_factor:8", 1: "site_factor:7"}
    todo = act.plan(wanted, {}, budget=2)
    assert todo.batches == {"site_factor:9": [5], "site_factor:8": [3]} and todo.left == 2


def test_plan_budget_counts_only_jobs_whose_value_changes() -> None:
    wanted = {5: "site_factor:9", 3: "site_factor:8", 9: "site_factor:8", 1: "site_factor:7"}
    todo = act.plan(wanted, {5: "site_factor:9", 3: "site_factor:8"}, budget=2)
    assert todo.batches == {"site_factor:8": [9], "site_factor:7": [1]} and todo.left == 0


def test_plan_budget_zero_sends_everything() -> None:
    wanted = {j: f"priority:{j}" for j in range(1, 2001)}
    todo = act.plan(wanted, {}, budget=0)
    assert sum(map(len, todo.batches.values())) == 2000 and todo.left == 0


def test_plan_a_preemption_waiter_never_waits_behind_the_budget() -> None:
    wanted = {1: "site_factor:9", 2: "site_factor:8", 3: "site_factor:7", 4: "site_factor:6"}
    todo = act.plan(wanted, {}, budget=2, urgent={4})
    assert todo.batches == {"site_factor:6": [4], "site_factor:9": [1]} and todo.left == 2
    spent = act.plan(wanted, {}, budget=1, urgent={3, 4})      # over the budget: still sent
    assert spent.batches == {"site_factor:7": [3], "site_factor:6": [4]} and spent.left == 2


@given(n=st.integers(0, 60), budget=st.integers(1, 25), seed=st.randoms(use_true_random=False))
def test_a_backlog_converges_head_first_in_ceil_n_over_budget_cycles(
        n: int, budget: int, seed) -> None:
    """Each cycle sends the first ``budget`` jobs of the start order still to send; after
    ceil(n / budget) cycles every job carries its value and nothing is left."""
    order = list(range(100, 100 + n))
    seed.shuffle(order)
    wanted = {j: f"site_factor:{(j * 7) % 5}" for j in order}
    current: dict[int, str | None] = {}
    sent: list[int] = []
    cycles = 0
    while True:
        todo = act.plan(wanted, current, budget)
        ids = sorted(j for ids in todo.batches.values() for j in ids)
        if not ids:
            break
        cycles += 1
        assert ids == sorted(order[len(sent):len(sent) + budget])   # the head still unsent
        assert todo.left == n - len(sent) - len(ids)
        sent += ids
        current.update((j, wanted[j]) for j in ids)
    assert cycles == -(-n // budget) and sorted(sent) == sorted(order)


def test_push_sends_pieces_in_parallel_and_records_every_accepted_job(tmp_path: Path) -> None:
    ids = list(range(1, 1 + 3 * act.PIECE_IDS + 7))
    obs = observation(200, *(unit(j, "PENDING", start=None) for j in ids))
    ledger = _ledger_with(tmp_path, obs)
    client = RecordingClient(refuse={act.PIECE_IDS + 3})
    result = act.push(client, ledger, {"site_factor:5": ids[:-7], "site_factor:6": ids[-7:]},  # type: ignore[arg-type]
                      CycleAdapter())
    assert sorted(result.accepted) == [j for j in ids if j != act.PIECE_IDS + 3]
    assert [j for j, _ in result.refused] == [act.PIECE_IDS + 3]
    lists = [c[1] for c in client.calls if len(c[1]) > 1]
    assert sorted(map(len, lists)) == [7] + [act.PIECE_IDS] * 3      # 4 calls, none bigger
    applied = {r.job_id: r.applied for r in ledger.jobs()}
    assert applied[1] == "site_factor:5" and applied[ids[-1]] == "site_factor:6"
    assert applied[act.PIECE_IDS + 3] is None


def test_push_records_what_went_through_before_raising_unreachable(tmp_path: Path) -> None:
    class HalfDown(RecordingClient):
        def set_site_factor(self, ids: list[int], value: int) -> None:
            if value == 6:
                from slurm_plugin.slurm.client import SlurmUnreachable
                raise SlurmUnreachable(["scontrol"], "Unable to contact slurm controller")
            super().set_site_factor(ids, value)

    obs = observation(200, *(unit(j, "PENDING", start=None) for j in (1, 2, 3)))
    ledger = _ledger_with(tmp_path, obs)
    from slurm_plugin.slurm.client import SlurmUnreachable
    with pytest.raises(SlurmUnreachable):
        act.push(HalfDown(), ledger, {"site_factor:5": [1, 2], "site_factor:6": [3]},  # type: ignore[arg-type]
                 CycleAdapter())
    assert [ledger.job(j).applied for j in (1, 2, 3)] == ["site_factor:5", "site_factor:5", None]
