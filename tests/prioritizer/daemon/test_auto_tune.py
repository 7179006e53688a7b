"""``auto_tune``: the switching decision with hand-worked figures, the ``auto_tune:`` section's
validation, which settings are in force (adopted vs the config's own), and the history the
replay child reads from the ledger."""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import subprocess
import time
from pathlib import Path

import pytest

from prioritizer.config_file import ConfigError, DaemonConfig, from_mapping, load
from prioritizer.daemon import auto_tune
from prioritizer.daemon.auto_tune import choose, in_force, status_line
from prioritizer.tune.daemon_replay import ledger_rows
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon
from prioritizer.daemon.metrics import Metrics
from prioritizer.policy.config import PolicyConfig

CURRENT = {"avg_jct_s": 100.0, "p95_jct_s": 200.0}
#: A saves 10 % of avg JCT but its p95 rises 5 % (210 = 200 × 1.05); B saves 6 %, same p95.
A = {"avg_jct_s": 90.0, "p95_jct_s": 210.0}
B = {"avg_jct_s": 94.0, "p95_jct_s": 200.0}


def test_the_best_point_within_the_p95_bar_is_adopted_when_it_saves_enough() -> None:
    # max_p95_rise 0.02: the p95 limit is 204 s, A (210) is out; B saves 1 - 94/100 = 6 % >= 5 %
    v = choose(CURRENT, [A, B], min_gain=0.05, max_p95_rise=0.02)
    assert (v.switch, v.index) == (True, 1)
    assert v.gain == pytest.approx(0.06) and v.p95_rise == pytest.approx(0.0)


def test_a_wider_p95_bar_lets_the_faster_point_in() -> None:
    # max_p95_rise 0.05: the limit is 210 s, A is allowed and saves 10 %, its p95 rises 5 %
    v = choose(CURRENT, [A, B], min_gain=0.05, max_p95_rise=0.05)
    assert (v.switch, v.index) == (True, 0)
    assert v.gain == pytest.approx(0.10) and v.p95_rise == pytest.approx(0.05)


def test_a_gain_below_the_bar_keeps_the_settings() -> None:
    # B is the best allowed point and saves 6 % < 7 %
    v = choose(CURRENT, [A, B], min_gain=0.07, max_p95_rise=0.02)
    assert (v.switch, v.index) == (False, 1)
    assert "below min_gain 0.07" in v.reason


def test_no_point_within_the_p95_bar_keeps_the_settings() -> None:
    v = choose(CURRENT, [A], min_gain=0.0, max_p95_rise=0.0)
    assert (v.switch, v.index) == (False, None)
    assert "above 200.0 s" in v.reason


def test_a_tie_is_no_gain_even_with_min_gain_zero() -> None:
    v = choose(CURRENT, [dict(CURRENT)], min_gain=0.0, max_p95_rise=0.0)
    assert (v.switch, v.gain) == (False, 0.0)
    # not "+0.0% saved ... below min_gain 0": 0 is not below 0, the replay saved nothing
    assert v.reason == ("best grid point avg JCT 100.0 -> 100.0 s (no gain), p95 200.0 -> "
                        "200.0 s: nothing saved over the settings in force")


def test_a_loss_is_worded_as_one() -> None:
    # the best point within the p95 bar takes 1 - 105/100 = 5 % longer
    v = choose(CURRENT, [{"avg_jct_s": 105.0, "p95_jct_s": 200.0}], min_gain=0.0, max_p95_rise=0.0)
    assert (v.switch, v.index) == (False, 0) and v.gain == pytest.approx(-0.05)
    assert v.reason == ("best grid point avg JCT 100.0 -> 105.0 s (5.0% longer), p95 200.0 -> "
                        "200.0 s: nothing saved over the settings in force")


def test_a_gain_below_min_gain_is_worded_with_it() -> None:
    v = choose(CURRENT, [A, B], min_gain=0.07, max_p95_rise=0.02)
    assert v.reason == ("best grid point avg JCT 100.0 -> 94.0 s (+6.0% saved), p95 200.0 -> "
                        "200.0 s: below min_gain 0.07")


@pytest.mark.parametrize(("section", "line"), [
    ({"min_gain": 1.5}, "auto_tune.min_gain: must be >= 0 and <= 1 (got 1.5)"),
    ({"max_p95_rise": -0.1}, "auto_tune.max_p95_rise: must be >= 0 and <= 1 (got -0.1)"),
    ({"period_s": 0}, "auto_tune.period_s: must be > 0 (got 0)"),
    ({"grid": "queues=2,3"}, "auto_tune.grid: queues cannot be tuned by the daemon"),
    ({"grid": "knob=-1"}, "auto_tune.grid: knob='-1' out of range: must be >= 0"),
    ({"enabled": True, "grid": "thresholds=100"},
     "auto_tune.grid: every thresholds value needs 2 number(s)"),
    ({"histroy": "sacct"}, "auto_tune.histroy: unknown key; did you mean 'history'?"),
    ({"grid": ";"}, "auto_tune.grid: ';' names no parameter; give NAME=V1,V2,... joined by "
     "';', e.g. knob=4,8,16"),
    # YAML reads an unquoted off as the boolean false
    ({"max_hurt_share": False}, "auto_tune.max_hurt_share: a fraction from 0 to 1 (0.0005 = "
     "0.05 % of the jobs), or off (got False, YAML's reading of an unquoted no/off/false; "
     "quote it: \"off\")"),
    ({"max_worst_window": False}, "auto_tune.max_worst_window: a ratio > 0 and <= 1e6 (1.1: 10 % worse "
     "than fifo-fit), oracle or off (got False, YAML's reading of an unquoted no/off/false; "
     "quote it: \"off\")"),
    ({"max_worst_window": [1]}, "auto_tune.max_worst_window: a ratio > 0 and <= 1e6 (1.1: 10 % worse "
     "than fifo-fit), oracle or off (got [1])"),
])
def test_a_bad_auto_tune_section_is_one_line_naming_the_field(section: dict, line: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping({"auto_tune": section})
    assert len(str(err.value).splitlines()) == 1 and str(err.value).startswith(line)


def test_auto_tune_needs_a_threshold_policy(tmp_path: Path) -> None:
    path = tmp_path / "dlprio.yaml"
    path.write_text("policy: {policy: fifo}\nauto_tune: {enabled: true}\n")
    with pytest.raises(ConfigError) as err:
        load(path)
    assert str(err.value) == (f"{path}: auto_tune.enabled: needs policy tiresias-las or "
                              "tiresias-gittins (got policy fifo)")


def test_a_quantum_in_the_grid_needs_the_gittins_policy(tmp_path: Path) -> None:
    path = tmp_path / "dlprio.yaml"
    path.write_text("policy: {policy: tiresias-las}\n"
                    "auto_tune: {enabled: true, grid: 'quantum=1000,4000'}\n")
    with pytest.raises(ConfigError) as err:
        load(path)
    assert str(err.value) == (f"{path}: auto_tune.grid: quantum (the Gittins quantum) changes "
                              "nothing under policy tiresias-las; drop it, or use "
                              "tiresias-gittins")
    path.write_text("policy: {policy: tiresias-gittins}\n"
                    "auto_tune: {enabled: true, grid: 'quantum=1000,4000'}\n")
    assert load(path).policy.policy == "tiresias-gittins"


def _adopt(ledger: Ledger, base: PolicyConfig, setting: dict) -> None:
    ledger.set_meta(auto_tune.META_SETTINGS, json.dumps({
        "setting": setting, "label": "thresholds=100/200", "at": 0.0, "reason": "made here",
        "base": json.dumps(dataclasses.asdict(base), sort_keys=True)}))
    ledger.set_meta(auto_tune.META_SWITCHES, "1")


def test_adopted_settings_are_in_force_only_while_enabled_and_the_section_unchanged(
        tmp_path: Path) -> None:
    on = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s"),
                      auto_tune=from_mapping({"auto_tune": {"enabled": True}}).auto_tune)
    with Ledger(on.ledger_path) as ledger:
        _adopt(ledger, on.policy, {"thresholds": [100, 200], "knob": 4})
        policy, record = in_force(on, ledger)
        assert (policy.thresholds_gpu_s, policy.starve_knob) == ((100.0, 200.0), 4.0)
        assert record is not None and record["label"] == "thresholds=100/200"
        assert Daemon(on, None, ledger, CycleAdapter()).cfg.policy == policy  # type: ignore[arg-type]
        line = status_line(on, ledger)
        assert line.startswith("auto_tune: on; thresholds 100/200 GPU·s, knob 4, min_run 60 s "
                               "from tuned 1970-01-01 00:00:00 UTC: thresholds=100/200")
        assert "1 switch(es)" in line
        off = dataclasses.replace(on, auto_tune=dataclasses.replace(on.auto_tune, enabled=False))
        assert in_force(off, ledger) == (off.policy, None)
        assert status_line(off, ledger) is None   # status and explain print no line
        edited = dataclasses.replace(on, policy=dataclasses.replace(on.policy, min_run_s=30.0))
        assert in_force(edited, ledger) == (edited.policy, None)   # the operator's edit wins


def test_a_switch_dropped_by_an_edit_is_said_and_logged_and_an_old_replay_marked(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    on = DaemonConfig(ledger_path=str(tmp_path / "l"), snapshot_path=str(tmp_path / "s"),
                      auto_tune=from_mapping({"auto_tune": {"enabled": True}}).auto_tune)
    edited = dataclasses.replace(on, policy=dataclasses.replace(on.policy, min_run_s=30.0))
    with Ledger(on.ledger_path) as ledger:
        _adopt(ledger, on.policy, {"thresholds": [100, 200]})
        adopted = in_force(on, ledger)[0]
        # the last replay compared the grid with the adopted settings, then the section changed
        ledger.set_meta(auto_tune.META_LAST, json.dumps({
            "at": 0.0, "outcome": "kept", "reason": "no gain",
            "in_force": json.dumps(dataclasses.asdict(adopted), sort_keys=True)}))
        assert status_line(on, ledger).endswith("last replay 1970-01-01 00:00:00 UTC: kept: "
                                                "no gain")
        line = status_line(edited, ledger)
        assert "from the config's policy section (the switch to thresholds=100/200 was " \
               "dropped: the section changed since it was tuned)" in line
        assert line.endswith("kept: no gain (measured against other settings than those now "
                             "in force)")
        with caplog.at_level(logging.INFO):
            Daemon(edited, None, ledger, CycleAdapter())  # type: ignore[arg-type]
        assert [r for r in caplog.records if "auto_tune_dropped" in r.getMessage()]


def test_the_ledger_history_counts_work_as_history_export_does(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l") as ledger:
        with ledger.transaction():
            for job_id in (1, 2, 3, 4, 5):
                ledger.upsert_job(job_id, user="u", account="a", partition="gpu",
                                  state="RUNNING", gpus=2, submit_time=1000.0, restart_count=0,
                                  now=1000.0)
            ledger.start_run(1, 1010.0, 2, 1010.0)
            ledger.close_run(1, 1010.0, 1110.0, "requeue")
            ledger.start_run(1, 1300.0, 2, 1300.0)
            ledger.close_run(1, 1300.0, 1350.0, "slurm")
            ledger.mark_ended(1, "COMPLETED", 1400.0)
            ledger.start_run(2, 1010.0, 2, 1010.0)   # still running: not history
            ledger.start_run(3, 1010.0, 2, 1010.0)   # ended before the window
            ledger.close_run(3, 1010.0, 1020.0, "slurm")
            ledger.mark_ended(3, "COMPLETED", 1020.0)
            # job 4 has no checkpoint: its 100 s run before the requeue restarts from the top,
            # only the last run of 60 s counts: 120 GPU·s, 60 s
            ledger.start_run(4, 1010.0, 2, 1010.0)
            ledger.close_run(4, 1010.0, 1110.0, "requeue")
            ledger.start_run(4, 1300.0, 2, 1300.0)
            ledger.close_run(4, 1300.0, 1360.0, "slurm")
            ledger.mark_ended(4, "COMPLETED", 1400.0)
            # job 5 was requeued without a checkpoint and cancelled while pending: no work kept
            ledger.start_run(5, 1010.0, 2, 1010.0)
            ledger.close_run(5, 1010.0, 1110.0, "requeue")
            ledger.mark_ended(5, "CANCELLED", 1400.0)
        # job 1 checkpoints: the daemon signalled it at 1100 and requeued it at 1110, so its
        # runs of 100 s and 50 s on 2 GPUs keep (100 + 50 - 10) x 2 = 280 GPU·s, 140 s
        intent = ledger.add_intent(1, waiter=None, signal="USR1", grace_s=30.0,
                                   restart_count=0, now=1100.0)
        ledger.mark_signal(intent, 1100.0, 1130.0)
        ledger.mark_requeue(intent, 1110.0)
    rows = ledger_rows(str(tmp_path / "l"), since=1100.0, until=2000.0)
    assert [(r.job_id, r.num_gpu, r.work_gpu_s, r.duration, r.eligible_time, r.jct, r.attempts)
            for r in rows] == [("1", 2, 280.0, 140.0, 1000.0, 400.0, 2),
                               ("4", 2, 120.0, 60.0, 1000.0, 400.0, 2)]


def test_explain_places_a_job_with_the_adopted_thresholds_and_says_why(tmp_path: Path) -> None:
    from prioritizer.daemon import explain
    cfg = from_mapping({"ledger_path": str(tmp_path / "l"), "auto_tune": {"enabled": True}})
    with Ledger(cfg.ledger_path) as ledger:
        with ledger.transaction():
            ledger.upsert_job(42, user="alice", account="a", partition="gpu", state="PENDING",
                              gpus=4, submit_time=0, restart_count=0, now=0)
            ledger.start_run(42, 0, 4, now=0)
            ledger.close_run(42, 0, 40, "requeue")      # 4 GPUs x 40 s = 160 GPU·s
        _adopt(ledger, cfg.policy, {"thresholds": [100, 200]})
        lines = explain.explain(42, ledger, cfg, now=100).splitlines()
    # 160 GPU·s: queue 1 under the adopted 100/200 (queue 0 under the config's 3,250/7,200)
    assert "thresholds: 100, 200 GPU·s (service alone places it in queue 1)" in lines
    assert lines[2].startswith("auto_tune: on; thresholds 100/200 GPU·s, knob 8, min_run 60 s "
                               "from tuned 1970-01-01 00:00:00 UTC: thresholds=100/200 (made here)")


def _tuner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str],
           **section: object) -> tuple[auto_tune.AutoTuner, Ledger, Metrics]:
    """An AutoTuner whose child runs ``argv`` instead of the replay."""
    real = subprocess.Popen
    monkeypatch.setattr(auto_tune.subprocess, "Popen", lambda _argv, **kw: real(argv, **kw))
    cfg = from_mapping({"ledger_path": str(tmp_path / "l"),
                        "auto_tune": {"enabled": True, **section}})
    ledger, metrics = Ledger(cfg.ledger_path), Metrics()
    return auto_tune.AutoTuner(cfg, ledger, CycleAdapter(), metrics, 5.0), ledger, metrics


def test_a_replay_past_its_budget_is_stopped_and_the_settings_stay(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tuner, ledger, metrics = _tuner(tmp_path, monkeypatch, ["sleep", "600"], budget_s=0.001)
    with ledger:
        assert tuner.poll(1e6, tuner.cfg.policy) is None      # due (none yet): starts the child
        child, workdir = tuner.child, tuner.workdir
        assert child is not None and workdir is not None and child.poll() is None
        time.sleep(0.01)                                           # past the 1 ms budget
        assert tuner.poll(1e6 + 1, tuner.cfg.policy) is None
        assert child.returncode == -signal.SIGKILL and tuner.child is None
        assert not workdir.exists()
        assert json.loads(ledger.meta(auto_tune.META_LAST) or "")["outcome"] == "timeout"
        assert metrics.registry.get_sample_value("dlprio_auto_tune_replays_total",
                                                 {"outcome": "timeout"}) == 1
        assert tuner.poll(1e6 + 2, tuner.cfg.policy) is None      # next one only after period_s
        assert tuner.child is None


def test_a_child_without_a_result_is_a_failed_replay(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    tuner, ledger, metrics = _tuner(tmp_path, monkeypatch, ["false"])
    with ledger:
        tuner.poll(1e6, tuner.cfg.policy)
        assert tuner.child is not None
        tuner.child.wait()
        assert tuner.poll(1e6 + 1, tuner.cfg.policy) is None
        last = json.loads(ledger.meta(auto_tune.META_LAST) or "")
        assert (last["outcome"], last["reason"]) == ("failed", "replay exited 1 without a result")
        assert metrics.registry.get_sample_value("dlprio_auto_tune_switches_total") == 0


def test_a_switch_keeps_the_clusters_requeue_delay_and_status_knows_it_in_force(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon replaces the default requeue delay (121 s) with the cluster's (11 s) and the
    replay compares the grid with that policy: the switch adopts the grid point on it (not on
    the file's section, which would bring back 121 s until a restart), and ``dlprio status``,
    which does not ask Slurm, does not call the replay's settings other than those in force."""
    tuner, ledger, _ = _tuner(tmp_path, monkeypatch, ["true"], min_gain=0.0)
    running = tuner.cfg.policy.with_cluster_requeue_delay(11.0)
    with ledger:
        tuner.poll(1e6, running)
        assert tuner.child is not None and tuner.workdir is not None
        tuner.child.wait()
        (tuner.workdir / "result.json").write_text(json.dumps({
            "jobs": 40, "current": {"avg_jct_s": 400.0, "p95_jct_s": 900.0},
            "candidates": [{"setting": {"thresholds": [100, 200]},
                            "figures": {"avg_jct_s": 300.0, "p95_jct_s": 800.0}}]}))
        adopted = tuner.poll(1e6 + 1, running)
        assert adopted is not None
        assert (adopted.thresholds_gpu_s, adopted.requeue_delay_s) == ((100.0, 200.0), 11.0)
        assert json.loads(ledger.meta(auto_tune.META_LAST) or "")["outcome"] == "switched"
        # the next replay compares with the adopted settings (delay 11 s) and keeps them
        tuner.poll(1e6 + tuner.cfg.auto_tune.period_s + 1, adopted)
        assert tuner.child is not None and tuner.workdir is not None
        tuner.child.wait()
        (tuner.workdir / "result.json").write_text(json.dumps({"skipped": "3 jobs"}))
        tuner.poll(1e6 + tuner.cfg.auto_tune.period_s + 2, adopted)
        line = status_line(tuner.cfg, ledger)
        assert line is not None and line.endswith("skipped: 3 jobs"), line


def test_dlprio_status_prints_the_auto_tune_line_only_while_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prioritizer.cli import main
    ledger_path = tmp_path / "l"
    on = tmp_path / "on.yaml"
    on.write_text(f"ledger_path: {ledger_path}\nauto_tune: {{enabled: true}}\n")
    off = tmp_path / "off.yaml"
    off.write_text(f"ledger_path: {ledger_path}\n")
    with Ledger(ledger_path) as ledger:
        _adopt(ledger, PolicyConfig(), {"thresholds": [100, 200]})
    assert main(["status", "--config", str(on)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("auto_tune: on; thresholds 100/200 GPU·s, knob 8")
    assert main(["status", "--config", str(off)]) == 0
    assert not any(ln.startswith("auto_tune") for ln in capsys.readouterr().out.splitlines())


def test_the_sacct_history_is_what_history_export_keeps_in_the_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from prioritizer.tune import daemon_replay as auto_tune_replay
    from slurm_plugin.slurm.accounting import AccountingRecord

    def record(job_id: int, state: str, start: int, end: int | None) -> AccountingRecord:
        return AccountingRecord(job_id, None, 0, None, None, "train", "u", "a", "gpu", "",
                                state, 1000, 1000, start, end, 3600, 2, 1, True)
    asked = []

    def accounting(self: object, start: str, end: str = "now") -> list[AccountingRecord]:
        asked.append((start, end))
        return [record(1, "COMPLETED", 1010, 1110),    # 2 GPUs x 100 s, ended in the window
                record(2, "COMPLETED", 1010, 1050),    # ended before it
                record(3, "RUNNING", 1010, None)]      # not finished
    monkeypatch.setattr(auto_tune_replay.SlurmClient, "accounting", accounting)
    rows = auto_tune_replay.gather({"history": "sacct", "since": 1100.0, "until": 2000.0,
                                    "slurm_timeout_s": 5.0, "ledger_path": ""})
    assert [(r.job_id, r.num_gpu, r.work_gpu_s, r.duration, r.end_time) for r in rows] == [
        ("1", 2, 200.0, 100.0, 1110.0)]
    assert len(asked) == 1


def test_the_sacct_history_keeps_the_runs_of_jobs_the_daemon_checkpointed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Accounting keeps no comment here (no checkpoint marker seen): job 4's run of 50 s
    before its requeue counts as lost, 100 GPU·s; the daemon's ledger shows it signalled job 4
    at 1050 and requeued it at 1060, so, as ``history export --ledger`` counts it, both runs
    are work less the 10 s of checkpointing, (50 + 50 - 10) x 2 = 180 GPU·s."""
    from prioritizer.tune import daemon_replay as auto_tune_replay
    from slurm_plugin.slurm.accounting import AccountingRecord

    def record(state: str, start: int, end: int) -> AccountingRecord:
        return AccountingRecord(4, None, 0, None, None, "train", "u", "a", "gpu", "",
                                state, 1000, 1000, start, end, 3600, 2, 1, True)

    monkeypatch.setattr(auto_tune_replay.SlurmClient, "accounting",
                        lambda self, start, end="now": [record("REQUEUED", 1010, 1060),
                                                        record("COMPLETED", 1100, 1150)])
    request = {"history": "sacct", "since": 1100.0, "until": 2000.0, "slurm_timeout_s": 5.0,
               "ledger_path": str(tmp_path / "l.sqlite")}
    assert [r.work_gpu_s for r in auto_tune_replay.gather(request)] == [100.0]   # no ledger yet
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with ledger.transaction():
            ledger.upsert_job(4, user="u", account="a", partition="gpu", state="RUNNING",
                              gpus=2, submit_time=1000.0, restart_count=0, now=1000.0)
        intent = ledger.add_intent(4, None, "USR2", 30.0, 0, 1050.0)
        ledger.mark_signal(intent, 1050.0, 1080.0)
        ledger.mark_requeue(intent, 1060.0)
    assert [r.work_gpu_s for r in auto_tune_replay.gather(request)] == [180.0]


def test_a_replay_that_cannot_start_is_a_failed_replay_and_the_cycle_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tuner, ledger, metrics = _tuner(tmp_path, monkeypatch, [str(tmp_path / "no-such-program")])
    with ledger:
        assert tuner.poll(1e6, tuner.cfg.policy) is None
        last = json.loads(ledger.meta(auto_tune.META_LAST) or "")
        assert last["outcome"] == "failed" and last["reason"].startswith("replay not started: ")
        assert tuner.child is None and tuner.workdir is None
        ledger.set_meta(auto_tune.META_SETTINGS, "not json")
        assert in_force(tuner.cfg, ledger) == (tuner.cfg.policy, None)


def test_a_ledger_that_went_bad_is_the_replays_error_not_a_traceback(tmp_path: Path) -> None:
    """The child replays the ledger at ``ledger_path``; a file there that is no ledger is its
    ``error`` result (the daemon logs it as a failed replay), as for a missing history."""
    from prioritizer.tune import daemon_replay as auto_tune_replay
    bad = tmp_path / "ledger.sqlite"
    bad.write_text("not a database\n")
    result = auto_tune_replay.replay({"history": "ledger", "ledger_path": str(bad),
                                      "since": 0.0, "until": 1e9}, tmp_path)
    assert result == {"error": f"history ledger: {bad}: not a dlprio ledger (not an SQLite "
                               "database); give ledger_path another file, or move this one "
                               "away"}


@pytest.mark.parametrize("tenants", [True, False], ids=["tenants", "none"])
def test_a_replay_on_a_tenant_cluster_says_it_leaves_the_tenants_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tenants: bool) -> None:
    """The replay orders every job by the policy alone: with virtual_clusters its start says
    so, once per replay; without them it says nothing of tenants."""
    from log_helpers import captured
    real = subprocess.Popen
    monkeypatch.setattr(auto_tune.subprocess, "Popen", lambda _argv, **kw: real(["true"], **kw))
    cfg = from_mapping({"ledger_path": str(tmp_path / "l"), "auto_tune": {"enabled": True},
                        **({"virtual_clusters": {"nlp": {"account": "nlp"}}} if tenants else {})})
    with Ledger(cfg.ledger_path) as ledger, captured("json") as (log, out):
        tuner = auto_tune.AutoTuner(cfg, ledger, log, Metrics(), 5.0)
        tuner.poll(1e6, cfg.policy)
        tuner.close()
    started = [json.loads(line) for line in out.getvalue().splitlines()
               if "auto_tune_replay_started" in line]
    assert [s.get("note") for s in started] == [
        "virtual_clusters: not replayed; the replay orders all jobs by the policy alone "
        "(dlprio simulate --tenants FILE replays them)" if tenants else None]
