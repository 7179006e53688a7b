"""``dlprio history``: export rules, the trace format, the replay check and its failure paths
(pure; the recorded sacct JSON of tests/slurm_plugin/slurm/test_accounting.py is the input)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.history.check import (check, dispatch_latency_of, format_fidelity,
                                       start_latency_from, tick_base, trace_of)
from prioritizer.history.export import anonymise, history_rows, work_gpu_s
from prioritizer.history.trace import COLUMNS, HistoryError, HistoryRow, read_rows, write_rows
from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster, simulate
from prioritizer.sim.traces import read_trace
from slurm_plugin.slurm.accounting import (AccountedJob, Attempt, fold_jobs, record_from_json,
                                           records_from_json)
from slurm_plugin.slurm.shapes import RELEASES

DATA = Path(__file__).parents[2] / "data"
FIFO_FIT = PolicyConfig(policy="fifo-fit").zero_cost()


@pytest.fixture(scope="module")
def exported() -> tuple:
    recs = records_from_json((DATA / "sample-sacct.json").read_bytes(), RELEASES[(22, 5)])
    rows, report = history_rows(fold_jobs(recs))
    return {r.job_id: r for r in rows}, report


def test_cpu_only_left_out_and_reported(exported: tuple) -> None:
    rows, report = exported
    assert "2" not in rows
    assert report.left_out == {"cpu_only": [2]}
    assert report.lines()[0].startswith("left out 1 job(s): cpu_only")
    assert report.exported == len(rows) == 8    # jobs 1, 3, 4, 6, 7, 8, 10, 11


def test_row_values(exported: tuple) -> None:
    rows, _ = exported
    r3 = rows["3"]
    assert (r3.num_gpu, r3.num_nodes, r3.work_gpu_s, r3.duration) == (16, 2, 48, 3)
    assert rows["4"].num_gpu == 4                       # hetjob: 0 + 4 GPUs
    assert rows["7"].ended_by == "timelimit" and rows["7"].duration == 78
    assert rows["10"].ended_by == "cancelled"
    # job 6: plain sbatch (no checkpoint marker) requeued once: the first 2 s were lost
    assert rows["6"].attempts == 2 and rows["6"].work_gpu_s == 20
    assert rows["6"].jct == 1796077095 - 1796077037


def _job(comment: str, attempts: list[tuple[int, int, int, str]], state: str = "COMPLETED",
         gpus: int = 2) -> AccountedJob:
    return AccountedJob(1, "n", "u", "a", "p", comment, 100, 100, None, gpus, 1, state,
                        tuple(Attempt(s, e, g, 1, st) for s, e, g, st in attempts))


def test_checkpointing_job_keeps_work_of_every_run() -> None:
    runs = [(100, 150, 2, "REQUEUED"), (200, 230, 2, "COMPLETED")]
    assert work_gpu_s(_job("dl:v1;signal=USR2;grace=60", runs)) == 160
    assert work_gpu_s(_job("", runs)) == 60


@pytest.mark.parametrize(("job", "reason"), [
    (_job("", [(100, None, 2, "RUNNING")], state="RUNNING"), "unfinished"),
    # requeued a moment ago: slurmdbd has its run, not yet the pending attempt that follows
    (_job("dl:v1;signal=USR2;grace=60", [(100, 157, 4, "REQUEUED")], state="REQUEUED"),
     "unfinished"),
    (_job("", [(None, 120, 2, "CANCELLED")], state="CANCELLED"), "never_ran"),
    (_job("", [(130, 120, 2, "COMPLETED")]), "end_before_start"),
    (_job("", [(100, 100, 2, "COMPLETED")]), "zero_work"),
    # ran 50 s, requeued (held) without a checkpoint, cancelled before it ran again: not
    # "ran for 0 seconds"
    (_job("", [(100, 150, 2, "REQUEUED"), (None, 170, 2, "CANCELLED")], state="CANCELLED"),
     "lost_to_requeue"),
    (_job("", [(100, 110, 0, "COMPLETED")], gpus=0), "cpu_only"),
], ids=["unfinished", "requeued-last", "never-ran", "end-before-start", "zero-work",
        "lost-to-requeue", "cpu-only"])
def test_bad_or_partial_records_are_counted(job: AccountedJob, reason: str) -> None:
    rows, report = history_rows([job])
    assert rows == [] and report.left_out == {reason: [1]}


def test_anonymise_is_stable_and_hides_names() -> None:
    assert anonymise("alice") == anonymise("alice") != anonymise("bob")
    assert "alice" not in anonymise("alice") and anonymise("alice", "s") != anonymise("alice")
    rows, _ = history_rows([_job("", [(100, 110, 2, "COMPLETED")])], anonymise_names=True)
    assert rows[0].user == anonymise("u") and rows[0].account == anonymise("a")


def _row(job_id: str, eligible: float, gpus: int, duration: float, jct: float) -> HistoryRow:
    return HistoryRow(job_id, "u", "a", "p", eligible, eligible, gpus, 1,
                      gpus * duration if gpus else duration,   # CPU-only: seconds run
                      duration, eligible + jct, jct, "COMPLETED", 1, "self")


def test_round_trip_and_simulate_reads_it_by_header(tmp_path: Path) -> None:
    rows = [_row("7", 1000, 8, 30, 30), _row("9", 1005, 4, 10.5, 12)]
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows(rows, handle)
    assert path.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert read_rows(str(path)) == rows
    trace = read_trace(path)
    assert trace.format == "history"
    assert [(j.name, j.submit, j.num_gpus, j.duration) for j in trace.jobs] == [
        ("7", 0.0, 8, 30.0), ("9", 5.0, 4, 10.5)]


@pytest.mark.parametrize(("line", "message"), [
    ("1,u,a,p,10,10,x,1,10,10,20,10,COMPLETED,1,self,0", "num_gpu is not a number"),
    ("1,u,a,p,10,10,2,1,-4,10,20,10,COMPLETED,1,self,0", "work_gpu_s must be"),
    ("1,u,a,p,10,10,2,1,4,2,20,10,COMPLETED,1,maybe,0", "ended_by must be one of"),
    ("1,u,a", "3 columns"),
    ("1,u,a,p,10,10,2,1,1_000,10,20,10,COMPLETED,1,self,0",
     "work_gpu_s is not a plain decimal number: '1_000'"),
    ("1,u,a,p,10,10,\uff12,1,4,10,20,10,COMPLETED,1,self,0",
     "num_gpu is not a plain decimal number"),
    ("1,u,a,p,10,10,2,1,-inf,10,20,10,COMPLETED,1,self,0", "work_gpu_s must be finite, got '-inf'"),
])
def test_malformed_history_names_line_and_column(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "h.csv"
    path.write_text(",".join(COLUMNS) + "\n" + line + "\n")
    with pytest.raises(HistoryError, match=f"h.csv:2: .*{message}"):
        read_rows(str(path))


@pytest.mark.parametrize(("line", "message"), [
    ("1,u,a,gpu,1000,1000,1e30,1,1e30,1,1001,1,COMPLETED,1,self,0",
     "num_gpu must be at most 102,400,000, got '1e30'"),
    ("1,u,a,gpu,1000,1e300,1,1,1,1,1e300,1,COMPLETED,1,self,0",
     "eligible_time must be at most 100,000,000,000, got '1e300'"),
    ("1,u,a,gpu,1000,1000,1,1,1e300,1e300,1001,1,COMPLETED,1,self,0",
     "work_gpu_s must be at most 102,400,000,000,000,000, got '1e300'"),
    ("1,u,a,gpu,1000,1000,1,1,2e9,2e9,1001,1,COMPLETED,1,self,0",
     "duration must be at most 1,000,000,000, got '2e9'"),
    ("1,u,a,gpu,1000,1000,1,200000,1,1,1001,1,COMPLETED,1,self,0",
     "num_nodes must be at most 100,000, got '200000'"),
    ("1,u,a,gpu,1000,1000,1,1,1,1,1001,1,COMPLETED,1e10,self,0",
     "attempts must be at most 1,000,000,000, got '1e10'"),
], ids=["gpus", "times", "work", "duration", "nodes", "attempts"])
def test_history_values_have_the_simulate_readers_bounds(tmp_path: Path, line: str,
                                                         message: str) -> None:
    """GPUs, times and durations past what ``dlprio simulate``'s readers take are refused by
    cell (unbounded, 1e30 GPUs would overflow the placement and 1e300 times give a negative
    replay JCT)."""
    path = tmp_path / "h.csv"
    path.write_text(",".join(COLUMNS) + "\n" + line + "\n")
    with pytest.raises(HistoryError) as err:
        read_rows(str(path))
    assert str(err.value) == f"{path}:2: {message}"


def test_history_check_refuses_a_job_larger_than_any_cluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "h_huge.csv"
    path.write_text(",".join(COLUMNS) + "\n"
                    "1,u,a,gpu,1000,1000,1e30,1,1e30,1,1001,1,COMPLETED,1,self,0\n")
    assert main(["history", "check", "--trace", str(path), "--nodes", "1",
                 "--gpus-per-node", "4"]) == 2
    assert capsys.readouterr() == ("", f"dlprio: {path}:2: num_gpu must be at most "
                                   "102,400,000, got '1e30'\n")


def test_check_refuses_a_history_no_job_of_which_fits() -> None:
    rows = [_row("a", 0, 8, 10, 10), _row("b", 0, 16, 10, 10)]
    with pytest.raises(ValueError) as err:
        check(rows, Cluster(1, 4), FIFO_FIT)
    assert str(err.value) == ("no job of the history fits the cluster (1 × 4 GPUs): the "
                              "smallest asks for 8 GPUs; give a larger cluster")


def test_check_on_hand_computed_fifo() -> None:
    # one 8-GPU node: job a (8 GPUs, 10 s) then b (8 GPUs, 10 s) arriving together;
    # b waits for a: replay JCTs 10 and 20; with a 2 s start latency b starts at 12 → 22.
    rows = [_row("a", 0, 8, 10, 10), _row("b", 0, 8, 10, 22)]
    fid = check(rows, Cluster(1, 8), FIFO_FIT)
    assert [(j.job_id, j.replay_jct) for j in fid.jobs] == [("a", 10), ("b", 20)]
    late = check(rows, Cluster(1, 8), FIFO_FIT, start_latency_s=2)
    assert [j.replay_jct for j in late.jobs] == [10, 22]
    assert late.avg_error == 0 and late.share_within == 1 and late.meets_targets
    assert fid.avg(True) == 16 and fid.avg(False) == 15
    assert fid.jobs[1].error == pytest.approx(-2 / 22)


def test_dispatch_latency_is_the_shortest_start_of_a_job_that_ran_once() -> None:
    rows = [_row("a", 0, 2, 10, 11), _row("b", 0, 2, 10, 14),
            dataclasses.replace(_row("c", 0, 2, 10, 10), attempts=2)]   # c: requeued, ignored
    assert dispatch_latency_of(rows) == 1
    assert dispatch_latency_of(rows[2:]) == 0                             # none ran once
    assert dispatch_latency_of([_row("d", 0, 2, 10, 9)]) == 0             # never negative


def test_check_with_dispatch_latency() -> None:
    # one 8-GPU node, a and b (8 GPUs, 10 s each) eligible at 0, 1 s dispatch: a starts at 1,
    # ends at 11; b starts when a ends, at 11, and ends at 21: JCTs from eligible 11 and 21.
    rows = [_row("a", 0, 8, 10, 11), _row("b", 0, 8, 10, 21)]
    fid = check(rows, Cluster(1, 8), FIFO_FIT, dispatch_s=1)
    assert [(j.job_id, j.replay_jct) for j in fid.jobs] == [("a", 11), ("b", 21)]
    assert fid.dispatch_s == 1 and fid.share_within == 1
    with pytest.raises(ValueError, match="latencies"):
        check(rows, Cluster(1, 8), FIFO_FIT, dispatch_s=-1)


def test_tick_base_puts_replay_ticks_on_the_daemon_cycles() -> None:
    assert tick_base(100, 104, 5) == 99          # cycles at ..., 99, 104, ...
    assert tick_base(100, 90, 5) == 100          # a cycle at the first arrival itself
    assert tick_base(100, 101.5, 5) == 96.5
    assert tick_base(100, None, 5) == tick_base(100, 104, 0) == 100
    with pytest.raises(ValueError, match="after the first eligible"):
        trace_of([_row("a", 100, 2, 10, 10)], base=101)


def test_check_in_the_daemon_cycle_phase() -> None:
    # One 8-GPU node, 2D-LAS with a 40 GPU·s first threshold, 5 s cycles, free preemption.
    # a (8 GPUs, 20 s) eligible at epoch 100, b (8 GPUs, 5 s) at 101. a crosses 40 GPU·s
    # 5 s after its start, at 105, and is preempted on the first cycle at or after that; b
    # then runs 5 s, and a resumes when b ends.
    # Cycles at ..., 100, 105, 110 (no ledger: in phase with the first arrival): 105 is a
    # cycle, so b runs 105-110 (JCT 9); a resumes at 110 with 15 s left (JCT 25).
    # Cycles at ..., 99, 104, 109 (the daemon's, cycle_at=104): b runs 109-114 (JCT 13);
    # a has 11 s left, resumes at 114, ends at 125 (JCT 25).
    # The simulator's default (published replays) acts on the tick after 105: b 110-115 (14).
    las = PolicyConfig.from_mapping({"policy": "tiresias-las", "thresholds_gpu_s": [40, 1000],
                                     "starve_knob": 0, "min_run_s": 0,
                                     "checkpoint_overhead_s": 0, "requeue_delay_s": 0,
                                     "decision_interval_s": 5})
    rows = [_row("a", 100, 8, 20, 25), _row("b", 101, 8, 5, 13)]
    assert [j.replay_jct for j in check(rows, Cluster(1, 8), las).jobs] == [25, 9]
    phased = check(rows, Cluster(1, 8), las, cycle_at=104)
    assert [j.replay_jct for j in phased.jobs] == [25, 13] and phased.cycle_phased
    default = simulate(trace_of(rows), Cluster(1, 8), las)
    assert sorted((j.name, j.jct) for j in default.jobs) == [("a", 25), ("b", 14)]


def test_trace_of_skips_zero_gpu_rows() -> None:
    trace = trace_of([_row("a", 5, 0, 10, 10), _row("b", 7, 2, 3, 3)])
    assert trace.skipped_jobs == 1 and trace.jobs[0].submit == 0


@pytest.mark.parametrize(("params", "kind", "expected"), [
    ("bf_interval=5", "sched/backfill", 2.5),
    ("defer,bf_interval=60,bf_window=10", "sched/backfill", 30.0),
    ("", "sched/backfill", 15.0),                # slurm.conf(5): bf_interval default 30
    ("bf_interval=5", "sched/builtin", 0.0),
])
def test_start_latency_from_scheduler_parameters(params: str, kind: str, expected: float) -> None:
    assert start_latency_from(params, kind) == expected


def test_check_cli_failure_paths(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows([_row("a", 0, 0, 10, 10)], handle)
    base = ["history", "check", "--trace", str(path), "--nodes", "1", "--gpus-per-node", "8",
            "--start-latency", "0"]
    assert main(base) == 2
    assert "no GPU job" in capsys.readouterr().err
    assert main(base[:-1] + ["soon"]) == 2
    assert "--start-latency" in capsys.readouterr().err
    assert main(base + ["--dispatch-latency", "-1"]) == 2
    assert "--dispatch-latency: expected seconds >= 0" in capsys.readouterr().err
    assert main(base + ["--ledger", str(tmp_path / "missing.sqlite")]) == 2
    assert "--ledger" in capsys.readouterr().err
    assert main(["history", "check", "--trace", str(path)]) == 2
    assert "--cluster-from-slurm" in capsys.readouterr().err
    assert main(base + ["--policy", "nope"]) == 2
    assert "unknown policy" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    assert main(["history", "check", "--trace", str(tmp_path / "x.csv"), "--nodes", "1",
                 "--gpus-per-node", "8", "--start-latency", "0"]) == 2
    assert "not a history trace" in capsys.readouterr().err


def test_write_rows_counts() -> None:
    buf = io.StringIO()
    assert write_rows([_row("a", 0, 1, 1, 1)], buf) == 1
    assert buf.getvalue().count("\n") == 2


def test_ledger_facts_take_checkpoint_time_off_work() -> None:
    from prioritizer.history.export import LedgerFacts
    job = _job("dl:v1;signal=USR2;grace=60", [(100, 150, 2, "REQUEUED"), (200, 230, 2, "COMPLETED")])
    rows, _ = history_rows([job], ledger={1: LedgerFacts(1, 5.0)})
    assert rows[0].preemptions == 1 and rows[0].work_gpu_s == 160 - 5 * 2
    rows, _ = history_rows([job])
    assert rows[0].preemptions == 0 and rows[0].work_gpu_s == 160
    # no marker in accounting (comments need AccountingStoreFlags=job_comment), but the daemon
    # signalled the job for a checkpoint: its first run is kept
    plain = _job("", [(100, 150, 2, "REQUEUED"), (200, 230, 2, "COMPLETED")])
    rows, _ = history_rows([plain], ledger={1: LedgerFacts(1, 5.0, checkpoints=True)})
    assert rows[0].work_gpu_s == 160 - 5 * 2
    rows, _ = history_rows([plain], ledger={1: LedgerFacts(1, 0.0, checkpoints=False)})
    assert rows[0].work_gpu_s == 60


def test_export_ledger_from_a_real_ledger_file(tmp_path: Path) -> None:
    from prioritizer.daemon.ledger import Ledger
    from prioritizer.history.ledger_read import cycle_time, ledger_facts
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        with ledger.transaction():
            ledger.upsert_job(6, user="u", account="a", partition="gpu", state="RUNNING", gpus=1,
                              submit_time=0, restart_count=0, now=0)
        intent = ledger.add_intent(6, None, "USR2", 10, 0, 100)
        ledger.mark_signal(intent, 100, 110)
        ledger.mark_requeue(intent, 107)
    facts = ledger_facts(str(path))
    assert facts[6].preemptions == 1 and facts[6].checkpoint_s == 7 and facts[6].checkpoints
    assert cycle_time(str(path)) == 100                  # the cycle that created the intent
    with Ledger(tmp_path / "empty.sqlite") as ledger, ledger.transaction():
        ledger.note_observed(42.5)
    assert cycle_time(str(tmp_path / "empty.sqlite")) == 42.5   # no intent: last cycle
    with pytest.raises(Exception, match="--ledger"):
        ledger_facts(str(tmp_path / "missing.sqlite"))


def test_export_counts_only_the_intents_that_preempted(tmp_path: Path) -> None:
    """The daemon's steps on a real ledger: a victim that had stopped running before its
    signal was due is no preemption in the export; one requeued after its signal is."""
    from daemon_unit_helpers import RecordingClient, observation, unit
    from prioritizer.daemon.config import DaemonConfig
    from prioritizer.daemon.ledger import Ledger
    from prioritizer.daemon.log import CycleAdapter
    from prioritizer.daemon.observe import record_units
    from prioritizer.daemon.preempt import Preemptor
    from prioritizer.history.ledger_read import ledger_facts
    from prioritizer.policy.model import Preemption
    path = tmp_path / "l.sqlite"
    with Ledger(path) as ledger:
        with ledger.transaction():
            record_units(None, ledger, {j: unit(j) for j in (5, 6)}, 100)
        p = Preemptor(RecordingClient(), ledger, DaemonConfig(max_grace_s=20),   # type: ignore[arg-type]
                      CycleAdapter())
        assert p.start((Preemption(9, (5, 6)),), observation(100, unit(5), unit(6))) == [5, 6]
        waiter = unit(9, "PENDING", start=None)
        p.progress(observation(101, unit(6), waiter))      # 5 is no longer running; 6 signalled
        assert p.progress(observation(121, unit(6), waiter)) == [6]   # requeued at its deadline
        assert [i.outcome for i in ledger.intents(5)] == ["not running"]
    facts = ledger_facts(str(path))
    assert (facts[5].preemptions, facts[6].preemptions) == (0, 1)


def test_history_check_policy_errors_name_the_file_and_each_key(tmp_path: Path) -> None:
    from prioritizer.command import CliError
    from prioritizer.history.cli import policy_config
    conf = tmp_path / "dlprio.yaml"
    conf.write_text("policy:\n  starve_knob: -1\n  thresholds_gpu_s: [10, 5]\n")
    with pytest.raises(CliError) as err:
        policy_config(None, str(conf))
    assert str(err.value).splitlines() == [f"{conf}: policy.starve_knob: must be >= 0 (got -1)"]
    conf.write_text("policy:\n  thresholds_gpu_s: [10, 5]\n")
    with pytest.raises(CliError) as err:
        policy_config(None, str(conf))
    assert str(err.value) == (f"{conf}: policy.thresholds_gpu_s: thresholds must increase "
                              "strictly (got [10.0, 5.0])")
    assert err.value.exit_code == 2


def test_history_with_a_bom_reads_as_without(tmp_path: Path) -> None:
    """A spreadsheet's byte-order mark before the header: the same rows (simulate read such a
    file already; history check did not find its first column)."""
    rows = [_row("7", 1000, 8, 30, 30)]
    plain, marked = tmp_path / "h.csv", tmp_path / "bom.csv"
    with open(plain, "w") as handle:
        write_rows(rows, handle)
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_rows(str(marked)) == rows


@pytest.mark.parametrize("column, value, message", [
    ("jct", "999999", "h.csv:2: jct 999999 is not end_time - eligible_time (30); fix the row "
                      "or export the history again"),
    ("duration", "31", "h.csv:2: duration 31 is not work_gpu_s / num_gpu (30); fix the row or "
                       "export the history again"),
    ("work_gpu_s", "100", "h.csv:2: duration 30 is not work_gpu_s / num_gpu (12.5); fix the row "
                          "or export the history again"),
    ("end_time", "900", "h.csv:2: end_time 900 is before eligible_time 1000: a job ends after it "
                        "may start (history export leaves such a job out); fix the row or "
                        "export the history again"),
    # whole-number columns: a fraction is refused, not cut to its whole part (4.9 GPUs as 4)
    ("num_gpu", "4.9", "h.csv:2: num_gpu must be a whole number, got 4.9; history check "
                       "replays whole GPUs (dlprio simulate reads a num_gpu below 1 as a shard "
                       "job)"),
    ("num_gpu", "0.5", "h.csv:2: num_gpu must be a whole number, got 0.5; history check "
                       "replays whole GPUs (dlprio simulate reads a num_gpu below 1 as a shard "
                       "job)"),
    ("num_nodes", "1.5", "h.csv:2: num_nodes must be a whole number, got 1.5"),
    ("attempts", "1.7", "h.csv:2: attempts must be a whole number, got 1.7"),
    ("preemptions", "0.5", "h.csv:2: preemptions must be a whole number, got 0.5"),
])
def test_a_row_that_contradicts_itself_is_refused(tmp_path: Path, column: str, value: str,
                                                  message: str) -> None:
    """jct is end_time - eligible_time and duration is work_gpu_s / num_gpu (8 GPUs, 30 s:
    240 GPU·s); a row whose columns disagree names the line and the columns."""
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows([_row("7", 1000, 8, 30, 30)], handle)
    header, line = path.read_text().splitlines()
    cells = line.split(",")
    cells[COLUMNS.index(column)] = value
    path.write_text(f"{header}\n{','.join(cells)}\n")
    with pytest.raises(HistoryError) as err:
        read_rows(str(path))
    assert str(err.value) == f"{path.parent}/{message}"
    path.write_text(f"{header}\n{line},extra\n")
    with pytest.raises(HistoryError, match="h.csv:2: 17 columns, the header has 16"):
        read_rows(str(path))


def test_a_bad_dispatch_latency_is_refused_before_slurm_is_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """With --start-latency auto (the default) Slurm is asked for bf_interval; a bad
    --dispatch-latency is refused first, one line, with no note about Slurm."""
    path = tmp_path / "h.csv"
    with open(path, "w") as handle:
        write_rows([_row("a", 0, 1, 10, 10)], handle)
    assert main(["history", "check", "--trace", str(path), "--nodes", "1", "--gpus-per-node",
                 "8", "--dispatch-latency", "-3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dlprio: --dispatch-latency: expected seconds")


# --- requeued runs counted as lost where accounting keeps no job comments -------------------


def test_requeued_runs_counted_lost_are_listed(exported: tuple) -> None:
    _, report = exported
    # job 6 of the capture: plain sbatch (no marker) requeued once; no other job was requeued
    assert report.requeued_lost == [6]
    assert report.requeued_line(True) is None        # comments kept: it did restart from the top
    line = report.requeued_line(False)
    assert line == ("1 job(s) requeued with no checkpoint marker seen had their runs before the "
                    "requeue counted as lost (6): Slurm accounting keeps no job comments (no "
                    "job_comment in AccountingStoreFlags), so the dl:v1 marker of a "
                    "checkpointing job is not seen; to keep it, add job_comment to "
                    "AccountingStoreFlags in slurm.conf (AccountingStoreFlags=job_comment) and "
                    "restart slurmctld; only jobs that end after that keep their comment; "
                    "--ledger adds the jobs the daemon checkpointed")
    assert "could not be read" in (report.requeued_line(None) or "")


def test_a_checkpointing_job_is_not_counted_lost() -> None:
    runs = [(100, 150, 2, "REQUEUED"), (200, 230, 2, "COMPLETED")]
    _, marked = history_rows([_job("dl:v1;signal=USR2;grace=60", runs)])
    _, plain = history_rows([_job("", runs)])
    _, never = history_rows([_job("", [(100, 150, 2, "COMPLETED")])])
    assert (marked.requeued_lost, plain.requeued_lost, never.requeued_lost) == ([], [1], [])


@pytest.mark.parametrize(("flags", "said"), [
    ("(null)", "keeps no job comments"), ("job_env", "keeps no job comments"),
    ("job_comment,job_env", None), (None, "could not be read")],
    ids=["none", "other-flag", "kept", "no-answer"])
def test_export_says_when_requeued_runs_may_be_miscounted(
        flags: str | None, said: str | None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from prioritizer.history import cli as history_cli
    from slurm_plugin.slurm.client import SlurmUnreachable

    class Slurm:
        def __init__(self, timeout_s: float) -> None:
            pass

        def accounting(self, start: str, end: str) -> list:
            return records_from_json((DATA / "sample-sacct.json").read_bytes(), RELEASES[(22, 5)])

        def show_config(self) -> dict:
            if flags is None:
                raise SlurmUnreachable(["scontrol"], "timed out")
            return {"AccountingStorageTRES": "cpu,mem,gres/gpu", "AccountingStoreFlags": flags}

        def jobs(self) -> list:
            return []

    monkeypatch.setattr(history_cli, "SlurmClient", Slurm)
    assert main(["history", "export"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "requeued" in line]
    if said is None:
        assert lines == []
    else:
        assert len(lines) == 1 and said in lines[0] and "counted as lost (6)" in lines[0]


def test_a_job_that_ends_after_the_window_is_unfinished() -> None:
    job = _job("", [(100, 200, 2, "COMPLETED")])
    assert history_rows([job], until=199)[1].left_out == {"unfinished": [1]}
    assert len(history_rows([job], until=200)[0]) == 1


def _attempt(job_id: int, submit: int, start: int | None, end: int, state: str):
    return record_from_json({"job_id": job_id, "state": {"current": state, "reason": "None"},
                             "time": {"submission": submit, "eligible": submit,
                                      "start": start, "end": end}})


class _Sacct:
    """``accounting_jobs`` of records set by the test: the chain rule of
    ``with_earlier_attempts`` on ids that name an older job too (a cluster whose ids started
    over), which the live cluster of a test run does not have."""

    def __init__(self, records) -> None:
        self.records, self.asked = records, []

    def accounting_jobs(self, ids):
        self.asked.append(list(ids))
        return [r for r in self.records if r.job_id in ids]


def test_a_window_gets_the_attempts_of_its_jobs_from_before_it() -> None:
    from prioritizer.history.sacct_read import with_earlier_attempts
    old_7 = _attempt(7, 10, 20, 30, "COMPLETED")           # an older job 7
    first = _attempt(7, 100, 100, 150, "REQUEUED")         # job 7's runs: requeued at 150,
    second = _attempt(7, 150, 150, 170, "REQUEUED")        # again at 170,
    last = _attempt(7, 170, 180, 400, "COMPLETED")         # then the run in the window
    inside = _attempt(8, 300, 300, 350, "COMPLETED")       # submitted in the window
    sacct = _Sacct([old_7, first, second, last, inside])
    got = with_earlier_attempts(sacct, [last, inside], since_s=200)
    assert sacct.asked == [[7]]
    assert sorted(got, key=lambda r: (r.job_id, r.submit)) == [first, second, last, inside]
    (seven,) = [j for j in fold_jobs(got) if j.job_id == 7]
    assert (seven.submit, len(seven.attempts)) == (100, 3)
    # nothing submitted before the window: sacct is not asked again
    assert with_earlier_attempts(sacct, [inside], since_s=200) == [inside] and len(sacct.asked) == 1


def test_check_notes_settings_the_daemons_auto_tune_adopted(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--config`` with ``auto_tune`` on and a ``--ledger`` whose daemon adopted thresholds
    100/200 and knob 4 over the file's 3,250/7,200 and knob 8: the replay keeps the file's
    section (it ran before the switch) and a note names what was adopted, when (epoch 0),
    and the keys to set to replay it."""
    import json
    from prioritizer.daemon import auto_tune
    from prioritizer.daemon.ledger import Ledger
    trace = tmp_path / "h.csv"
    with open(trace, "w") as handle:
        write_rows([_row("a", 0, 8, 100, 100)], handle)
    config = tmp_path / "dlprio.yaml"
    config.write_text("auto_tune: {enabled: true}\npolicy:\n  policy: tiresias-las\n")
    with Ledger(tmp_path / "l.sqlite") as ledger:
        ledger.set_meta(auto_tune.META_SETTINGS, json.dumps({
            "setting": {"thresholds": [100, 200], "knob": 4}, "label": "thresholds=100/200 knob=4",
            "at": 0.0, "reason": "made here",
            "base": json.dumps(dataclasses.asdict(PolicyConfig(policy="tiresias-las")),
                               sort_keys=True)}))
    assert main(["history", "check", "--trace", str(trace), "--nodes", "1", "--gpus-per-node",
                 "8", "--start-latency", "0", "--config", str(config),
                 "--ledger", str(tmp_path / "l.sqlite")]) in (0, 1)
    err = capsys.readouterr().err
    assert (f"dlprio history check: note: the daemon's auto_tune adopted thresholds=100/200 "
            f"knob=4 at 1970-01-01 00:00:00 UTC; this replay uses the policy section of {config} "
            "as written (in force before that switch); to replay the adopted settings, set "
            "thresholds_gpu_s: [100, 200], starve_knob: 4 in a copy of it") in err.splitlines()


def test_a_failed_sacct_is_one_line_with_where_to_look() -> None:
    """slurmdbd down: sacct prints the connection's steps, then the outcome; the error is one
    line, the outcome's, with the fix."""
    from prioritizer.history.cli import sacct_failed
    from slurm_plugin.slurm.client import SlurmRefused, SlurmUnreachable
    text = ("sacct: error: _open_persist_conn: failed to open persistent connection to "
            "host:localhost:6819: Connection refused\n"
            "sacct: error: Sending PersistInit msg: Connection refused\n"
            "sacct: error: Problem talking to the database: Connection refused\n")
    assert sacct_failed(SlurmUnreachable(["sacct"], text)) == (
        "sacct failed: sacct: error: Problem talking to the database: Connection refused; "
        "slurmdbd (or slurmctld) did not answer: is it running (systemctl status slurmdbd)? "
        "run this again once it answers")
    assert sacct_failed(SlurmRefused(["sacct"], "sacct: error: Invalid user id\n")) == (
        "sacct failed: sacct: error: Invalid user id")


def test_rows_a_replay_reads_are_in_export_order_job_ids_as_numbers() -> None:
    """Jobs submitted in the same second go in Slurm's order, 9 before 10 (as text, "10" sorts
    before "9", and a replay breaks ties of arrival by file order)."""
    from prioritizer.history.trace import replay_order
    rows = [_row(i, 100.0, 1, 10.0, 10.0) for i in ("10", "9", "11", "100")]
    rows.append(_row("8", 101.0, 1, 10.0, 10.0))
    rows.append(_row("12_3", 100.0, 1, 10.0, 10.0))
    rows.append(_row("12_10", 100.0, 1, 10.0, 10.0))
    assert [r.job_id for r in sorted(rows, key=replay_order)] == [
        "9", "10", "11", "12_3", "12_10", "100", "8"]


def test_the_check_says_what_the_skipped_rows_were() -> None:
    # a CPU-only row (kept by export --include-cpu-only) is no GPU job: skipped, and said why
    rows = [_row("a", 0, 8, 10, 10), _row("cpu", 0, 0, 10, 10)]
    fid = check(rows, Cluster(1, 8), FIFO_FIT)
    assert fid.skipped == 1 and [j.job_id for j in fid.jobs] == ["a"]
    assert ("1 jobs replayed, 1 skipped (no GPU or no work, e.g. CPU-only rows, or fitting no "
            "node); " in format_fidelity(fid))
    assert "0 skipped; " in format_fidelity(check(rows[:1], Cluster(1, 8), FIFO_FIT))
