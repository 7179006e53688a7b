"""dlprio.yaml: the packaged file loads, documents every key, and bad input names the key."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from prioritizer.daemon import config as daemon_config
from prioritizer.daemon.config import ConfigError, DaemonConfig
from prioritizer.daemon.lock import LedgerLock, LockHeld
from prioritizer.policy.config import PolicyConfig

PACKAGED = Path(__file__).resolve().parents[3] / "conf" / "dlprio.yaml"


def test_packaged_config_is_the_documented_defaults() -> None:
    assert daemon_config.PACKAGED_PATH == PACKAGED
    assert daemon_config.load(PACKAGED) == DaemonConfig()


def test_every_key_is_documented_in_the_packaged_file() -> None:
    text = PACKAGED.read_text()
    for f in dataclasses.fields(DaemonConfig):
        m = re.search(rf"^#.*\n(?:[a-z_]+:.*\n)*{f.name}:", text, re.M)
        assert m, f"{f.name} has no comment line above it in conf/dlprio.yaml"


def _load(tmp_path: Path, text: str) -> DaemonConfig:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return daemon_config.load(p)


@pytest.mark.parametrize("text, line", [
    # unknown keys, with the nearest valid one
    ("intervl_s: 5\n", "intervl_s: unknown key; did you mean 'interval_s'?"),
    ("policy:\n  starve_knb: 3\n", "policy.starve_knb: unknown key; did you mean 'starve_knob'?"),
    # types
    ("interval_s: ten\n", "interval_s: expected a number > 0 (got 'ten')"),
    ("interval_s: true\n", "interval_s: expected a number > 0 (got True)"),
    ("metrics_port: 9.5\n", "metrics_port: expected a whole number >= 0 and <= 65535 (got 9.5)"),
    ("partitions: gpu\n", "partitions: expected a list (got 'gpu')"),
    ("exempt_accounts: ['']\n", "exempt_accounts[0]: must not be empty (got '')"),
    ("metrics_addr: 8\n", "metrics_addr: expected a string, but YAML read the value as a number; "
     "quote it as written, e.g. metrics_addr: \"8\" (got 8)"),
    ("policy: fifo\n", "policy: expected a mapping of keys (got 'fifo')"),
    # an optional mapping, worded as a mapping (not as its Python type)
    ("virtual_clusters: []\n", "virtual_clusters: expected a mapping of keys (got [])"),
    ("virtual_clusters: 5\n", "virtual_clusters: expected a mapping of keys (got 5)"),
    ("policy:\n  preemption: 1\n", "policy.preemption: expected true or false (got 1)"),
    ("policy:\n  starve_knob: '8'\n", "policy.starve_knob: expected a number >= 0 (got '8')"),
    ("policy:\n  thresholds_gpu_s: 3250\n", "policy.thresholds_gpu_s: expected a list (got 3250)"),
    ("policy:\n  thresholds_gpu_s: [100, x]\n",
     "policy.thresholds_gpu_s[1]: expected a number > 0 (got 'x')"),
    # names from a fixed list
    ("mode: fast\n", "mode: must be 'priority' or 'partition' (got 'fast')"),
    ("priority_field: nice\n", "priority_field: must be 'site_factor' or 'priority' (got 'nice')"),
    ("log_format: xml\n", "log_format: must be 'text' or 'json' (got 'xml')"),
    ("policy:\n  policy: dlas-gpu\n", "policy.policy: must be 'tiresias-las', 'tiresias-gittins', "
     "'las', 'fifo', 'fifo-fit' or 'srtf' (got 'dlas-gpu')"),
    # ranges of one key
    ("interval_s: 0\n", "interval_s: must be > 0 (got 0)"),
    ("max_grace_s: -5\n", "max_grace_s: must be > 0 (got -5)"),
    ("gittins_refresh_s: 0\n", "gittins_refresh_s: must be > 0 (got 0)"),
    ("interval_s: .nan\n", "interval_s: must be a finite number (got nan)"),
    ("metrics_port: 70000\n", "metrics_port: must be >= 0 and <= 65535 (got 70000)"),
    ("inqueue_span_s: 0\n", "inqueue_span_s: must be >= 1 and <= 100000000 (got 0)"),
    ("update_budget: -1\n", "update_budget: must be >= 0 and <= 1000000 (got -1)"),
    ("update_budget: 1.5\n", "update_budget: expected a whole number >= 0 and <= 1000000 (got 1.5)"),
    # YAML reads 1e9 and 4.0 as decimal numbers: a whole number must be written as one
    ("forecast:\n  draws: 1e9\n", "forecast.draws: expected a whole number >= 1 and <= 1000 "
     "(got 1000000000.0, a decimal number: write it without a decimal point or exponent)"),
    ("forecast:\n  draws: 4.0\n", "forecast.draws: expected a whole number >= 1 and <= 1000 "
     "(got 4.0, a decimal number: write it without a decimal point or exponent)"),
    ("retention_days: -1\n", "retention_days: must be >= 0 (got -1)"),
    ("slurm_timeout_s: -1\n", "slurm_timeout_s: must be >= 0 (got -1)"),
    ("gittins_min_samples: 0\n", "gittins_min_samples: must be >= 1 (got 0)"),
    ("ledger_path: ''\n", "ledger_path: must not be empty (got '')"),
    ("snapshot_path: ''\n", "snapshot_path: must not be empty (got '')"),
    ("lease_name: 'a b'\n", "lease_name: ASCII letters, digits, '-', '_', '.' only, e.g. "
     "dlprio-lease (the same name to squeue on every host) (got 'a b')"),
    ("policy:\n  starve_knob: -0.5\n", "policy.starve_knob: must be >= 0 (got -0.5)"),
    ("policy:\n  min_run_s: -1\n", "policy.min_run_s: must be >= 0 (got -1)"),
    ("policy:\n  gittins_quantum_gpu_s: 0\n", "policy.gittins_quantum_gpu_s: must be > 0 (got 0)"),
    ("policy:\n  thresholds_s: [0, 10]\n", "policy.thresholds_s[0]: must be > 0 (got 0)"),
    ("policy:\n  thresholds_gpu_s: [100, .inf]\n",
     "policy.thresholds_gpu_s[1]: must be a finite number (got inf)"),
    # rules across keys
    ("policy:\n  thresholds_gpu_s: [100, 50]\n",
     "policy.thresholds_gpu_s: thresholds must increase strictly (got [100.0, 50.0])"),
    ("policy:\n  thresholds_s: [5, 5]\n",
     "policy.thresholds_s: thresholds must increase strictly (got [5.0, 5.0])"),
    ("mode: partition\n", "queue_partitions: mode partition needs one partition per queue "
     "(3 queues from policy thresholds) (got [])"),
    ("mode: partition\nqueue_partitions: [q0, q1]\n", "queue_partitions: mode partition needs one "
     "partition per queue (3 queues from policy thresholds) (got ['q0', 'q1'])"),
    ("interval_s: 60\nbackoff_max_s: 30\n", "backoff_max_s: must be >= interval_s (60 s) (got 30)"),
    ("interval_s: 5\nslurm_timeout_s: 5\n", "slurm_timeout_s: must be < interval_s (5 s) so that a "
     "hung Slurm call cannot stretch a cycle, or 0 (auto) (got 5)"),
    ("interval_s: 10\nlease_ttl_s: 15\n",
     "lease_ttl_s: must be >= 2 × interval_s (20 s) or 0 (auto) (got 15)"),
    ("lease_ttl_s: -1\n", "lease_ttl_s: must be >= 2 × interval_s (60 s) or 0 (auto) (got -1)"),
    ("policy:\n  policy: srtf\n", "policy.policy: srtf needs every job's true duration (an oracle); "
     "it exists for `dlprio simulate` only"),
    # the file itself
    ("- a\n- b\n", "top level: expected a mapping of keys, got list"),
])
def test_bad_config_is_one_line_naming_file_key_and_range(tmp_path: Path, text: str,
                                                          line: str) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    assert str(err.value) == f"{tmp_path / 'c.yaml'}: {line}"


def test_every_problem_is_reported_one_line_each(tmp_path: Path) -> None:
    text = ("mode: fast\nintervl_s: 5\nmetrics_port: -1\n"
            "policy:\n  knob: 1\n  starve_knob: x\n  thresholds_gpu_s: [1, -2]\n")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    f = tmp_path / "c.yaml"
    assert str(err.value).splitlines() == [
        f"{f}: policy.thresholds_gpu_s[1]: must be > 0 (got -2)",
        f"{f}: policy.starve_knob: expected a number >= 0 (got 'x')",
        f"{f}: policy.knob: unknown key; valid keys: checkpoint_overhead_s, decision_interval_s, "
        "gittins_quantum_gpu_s, min_run_s, policy, preempt_gain, preemption, promoted_preempts, requeue_delay_s, "
        "requeue_guard, starve_knob, "
        "thresholds_gpu_s, thresholds_s, wait_guard",
        f"{f}: mode: must be 'priority' or 'partition' (got 'fast')",
        f"{f}: metrics_port: must be >= 0 and <= 65535 (got -1)",
        f"{f}: intervl_s: unknown key; did you mean 'interval_s'?",
    ]


def test_every_rule_across_keys_is_reported_together(tmp_path: Path) -> None:
    text = ("mode: partition\ninterval_s: 10\nbackoff_max_s: 5\nslurm_timeout_s: 12\n"
            "lease_ttl_s: 1\n")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    assert [line.split(": ")[1] for line in str(err.value).splitlines()] == [
        "queue_partitions", "lease_ttl_s", "slurm_timeout_s", "backoff_max_s"]


def test_a_bad_auto_tune_key_hides_no_other_problem(tmp_path: Path) -> None:
    """An unquoted ``off`` (YAML's false) in auto_tune beside a grid of 3 thresholds for the
    2 of the default policy (3250, 7200 GPU·s) and a tenant of -1 GPUs: all three lines at
    once, the section's own in place, then the rules across keys and sections."""
    text = ('auto_tune:\n  enabled: true\n  grid: "thresholds=1/2/3"\n'
            "  max_worst_window: off\nvirtual_clusters:\n  vision:\n    guaranteed_gpus: -1\n")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    f = tmp_path / "c.yaml"
    assert str(err.value).splitlines() == [
        f"{f}: auto_tune.max_worst_window: a ratio > 0 and <= 1e6 (1.1: 10 % worse than "
        "fifo-fit), oracle or off (got False, YAML's reading of an unquoted no/off/false; "
        'quote it: "off")',
        f"{f}: auto_tune.grid: every thresholds value needs 2 number(s), as "
        "policy.thresholds_gpu_s (the number of queues stays) (got 1/2/3)",
        f"{f}: virtual_clusters.vision.guaranteed_gpus: must be a whole number >= 0, got -1",
    ]


def test_a_bad_grid_and_bad_keys_elsewhere_come_together(tmp_path: Path) -> None:
    """A grid naming a parameter the daemon cannot tune (``queues``), a bad policy key and a
    misspelt top-level key: each its line; a rule that reads a bad key (the grid's thresholds
    against the policy's) is left until that key is fixed, and a rule of valid keys
    (backoff_max_s under interval_s) still comes."""
    text = ('auto_tune:\n  grid: "queues=3"\n  min_gain: 2\npolicy:\n  starve_knob: -1\n'
            "interval_s: 10\nbackoff_max_s: 5\npolcy: {}\n")
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, text)
    f = tmp_path / "c.yaml"
    assert str(err.value).splitlines() == [
        f"{f}: policy.starve_knob: must be >= 0 (got -1)",
        f"{f}: auto_tune.min_gain: must be >= 0 and <= 1 (got 2)",
        f"{f}: auto_tune.grid: queues cannot be tuned by the daemon (it keeps the policy and "
        "its number of queues); tunable: thresholds, knob, min_run, quantum (got 'queues=3')",
        f"{f}: backoff_max_s: must be >= interval_s (10 s) (got 5)",
        f"{f}: polcy: unknown key; did you mean 'policy'?",
    ]


def test_bad_yaml_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "mode: [\n")
    assert str(err.value) == (f"{tmp_path / 'c.yaml'}:2:1: YAML syntax error: while parsing a flow node "
                              "expected the node content, but found '<stream end>'")


def test_empty_file_and_empty_policy_section_are_the_defaults(tmp_path: Path) -> None:
    assert _load(tmp_path, "") == DaemonConfig()
    assert _load(tmp_path, "policy:\n") == DaemonConfig()


def test_dlprio_once_exits_2_with_one_prefixed_line_per_problem(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from prioritizer.cli import main
    bad = tmp_path / "c.yaml"
    bad.write_text("interval_s: 0\npolicy:\n  starve_knob: -1\n")
    assert main(["once", "--dry-run", "--config", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dlprio: config: {bad}: policy.starve_knob: must be >= 0 (got -1)",
        f"dlprio: config: {bad}: interval_s: must be > 0 (got 0)"]


def test_example_config_loads() -> None:
    cfg = daemon_config.load(PACKAGED.parents[1] / "examples" / "dlprio-demo.yaml")
    assert (cfg.interval_s, cfg.slurm_timeout_s, cfg.policy.thresholds_gpu_s) == (
        2.0, 1.5, (100.0, 1000.0))


def test_partition_mode_with_one_partition_per_queue(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "mode: partition\nqueue_partitions: [q0, q1, q2]\n"
                          "policy:\n  thresholds_gpu_s: [10, 20]\n")
    assert cfg.queues == 3 and cfg.queue_partitions == ("q0", "q1", "q2")


def test_missing_file_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope.yaml: cannot read \(No such file"):
        daemon_config.load(tmp_path / "nope.yaml")


def test_second_lock_holder_is_refused_with_the_pid(tmp_path: Path) -> None:
    import os
    with LedgerLock(tmp_path / "l.sqlite"):
        with pytest.raises(LockHeld, match=rf"held by process {os.getpid()}"):
            LedgerLock(tmp_path / "l.sqlite").acquire()
    with LedgerLock(tmp_path / "l.sqlite"):   # released: a successor may take it
        pass


def test_a_refused_daemon_discards_only_what_its_lock_made(tmp_path: Path) -> None:
    """A run/once refused while holding the lock (another daemon's lease, a busy metrics port)
    removes the lock file and the directories its lock made, nothing that was there before."""
    lock = LedgerLock(tmp_path / "state" / "new" / "l.sqlite")
    with lock:
        assert lock.path.exists()
        lock.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "l.sqlite.lock").write_text("1\n")
    with LedgerLock(tmp_path / "kept" / "l.sqlite") as lock:
        lock.discard()
    assert (tmp_path / "kept" / "l.sqlite.lock").exists()


def test_once_refused_by_another_daemons_lease_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """``dlprio once`` whose cluster lease another daemon holds exits 6 and leaves neither
    the ledger's new directory nor a lock file there."""
    from prioritizer.daemon import cli
    from prioritizer.daemon.lease import LeaseHeld

    def held(self: object) -> None:
        raise LeaseHeld("dlprio-lease: held by other:1 (lease job 10, heartbeat 3 s ago)")
    monkeypatch.setattr(cli, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(cli.ClusterLease, "acquire", held)
    config = tmp_path / "c.yaml"
    config.write_text(f"ledger_path: {tmp_path / 'state' / 'l.sqlite'}\n"
                      f"snapshot_path: {tmp_path / 's.json'}\n")
    from prioritizer.cli import main
    assert main(["once", "--config", str(config)]) == 6
    assert "held by other:1" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_slurm_call_timeout_is_shorter_than_the_interval() -> None:
    """Auto timeout is half the interval, at most 10 s."""
    assert DaemonConfig(interval_s=30).call_timeout_s == 10
    assert DaemonConfig(interval_s=4).call_timeout_s == 2
    assert DaemonConfig(interval_s=30, slurm_timeout_s=25).call_timeout_s == 25


def test_lease_ttl_auto_is_three_intervals_and_a_call() -> None:
    assert DaemonConfig(interval_s=30).lease_ttl == 100
    assert DaemonConfig(interval_s=30, lease_ttl_s=600).lease_ttl == 600


def test_the_policy_section_may_be_given_as_a_mapping_or_empty() -> None:
    assert DaemonConfig(policy={"policy": "las"}).policy == PolicyConfig(policy="las")
    assert DaemonConfig(policy=None).policy == PolicyConfig()
    with pytest.raises(ConfigError) as err:
        DaemonConfig(policy={"starve_knob": -2}, interval_s=0)
    assert str(err.value).splitlines() == ["policy.starve_knob: must be >= 0 (got -2)",
                                           "interval_s: must be > 0 (got 0)"]
