"""dlprio.yaml: the packaged file loads, documents every key, and bad input names the key."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from prioritizer.daemon import config as daemon_config
from prioritizer.daemon.config import ConfigError, DaemonConfig
from prioritizer.daemon.lock import LedgerLock, LockHeld

PACKAGED = Path(__file__).resolve().parents[1] / "conf" / "dlprio.yaml"


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


@pytest.mark.parametrize("text, message", [
    ("intervl_s: 5\n", r"intervl_s: unknown key; valid keys: .*interval_s"),
    ("mode: fast\n", r"mode: 'fast' is not one of priority, partition"),
    ("mode: partition\n", r"queue_partitions: mode partition needs one partition per queue \(3 queues"),
    ("mode: partition\nqueue_partitions: [q0, q1]\n", r"queue_partitions: .*got \['q0', 'q1'\]"),
    ("interval_s: 0\n", r"interval_s: must be > 0 seconds"),
    ("interval_s: ten\n", r"interval_s: expected a number, got 'ten'"),
    ("metrics_port: 70000\n", r"metrics_port: must be 0 \(off\) or a TCP port"),
    ("metrics_port: 9.5\n", r"metrics_port: expected a whole number"),
    ("partitions: gpu\n", r"partitions: expected a list of names, got 'gpu'"),
    ("interval_s: 60\nbackoff_max_s: 30\n", r"backoff_max_s: must be >= interval_s"),
    ("interval_s: 5\nslurm_timeout_s: 5\n", r"slurm_timeout_s: must be shorter than interval_s"),
    ("retention_days: -1\n", r"retention_days: must be >= 0"),
    ("interval_s: 10\nlease_ttl_s: 15\n", r"lease_ttl_s: must be >= 2 × interval_s \(20 s\)"),
    ("lease_name: 'a b'\n", r"lease_name: letters, digits"),
    ("policy:\n  thresholds_gpu_s: [100, 50]\n", r"policy.thresholds_gpu_s: thresholds must increase"),
    ("policy:\n  knob: 3\n", r"policy.knob: unknown key"),
    ("log_format: xml\n", r"log_format: 'xml' is not one of text, json"),
    ("policy:\n  policy: srtf\n", r"policy.policy: srtf needs every job's true duration"),
    ("- a\n- b\n", r"expected a mapping of keys at the top level, got list"),
    ("mode: [\n", r"not valid YAML"),
])
def test_bad_config_names_key_and_file(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        _load(tmp_path, text)
    assert str(tmp_path / "c.yaml") in str(err.value)


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


def test_slurm_call_timeout_is_shorter_than_the_interval() -> None:
    """Issue 14 item 10: auto timeout is half the interval, at most 10 s."""
    assert DaemonConfig(interval_s=30).call_timeout_s == 10
    assert DaemonConfig(interval_s=4).call_timeout_s == 2
    assert DaemonConfig(interval_s=30, slurm_timeout_s=25).call_timeout_s == 25


def test_lease_ttl_auto_is_three_intervals_and_a_call() -> None:
    assert DaemonConfig(interval_s=30).lease_ttl == 100
    assert DaemonConfig(interval_s=30, lease_ttl_s=600).lease_ttl == 600
