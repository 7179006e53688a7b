"""``lease_name``, the Slurm job name of the cluster lease: one name that
reads the same to squeue on every daemon host and fits in the lease job's comment. Expected texts
are written out here from the rule in prioritizer/daemon/config.py (LeaseName)."""

from __future__ import annotations

import unicodedata

import pytest

from prioritizer.daemon.config import DaemonConfig
from prioritizer.policy.validation import ConfigError

CHARS = ("lease_name: ASCII letters, digits, '-', '_', '.' only, e.g. dlprio-lease (the same "
         "name to squeue on every host)")


@pytest.mark.parametrize("name, got", [
    ("a b", "'a b'"), ("a,b", "'a,b'"), ("a\tb", "'a\\tb'"), ("a\nb", "'a\\nb'"),
    ("lease\r", "'lease\\r'"), ("\x1b[31mx", "'\\x1b[31mx'"), ("a\x00", "'a\\x00'"),
    # the comment is split at ';' and '=': this name would forge a heartbeat
    ("x;heartbeat=9999999999", "'x;heartbeat=9999999999'"),
    ("café", "'café'"), ("cafe\u0301", "'cafe\u0301'"), ("lease\u200b", "'lease\\u200b'"),
    ("٣", "'٣'"), ("ｌｅａｓｅ", "'ｌｅａｓｅ'"), ("a/b", "'a/b'"), ("$(id)", "'$(id)'")])
def test_a_lease_name_squeue_could_print_otherwise_is_refused(name: str, got: str) -> None:
    with pytest.raises(ConfigError) as err:
        DaemonConfig(lease_name=name)
    assert str(err.value) == f"{CHARS} (got {got})"


def test_two_spellings_of_one_accented_name_are_both_refused() -> None:
    """NFC and NFD print alike and are different job names: neither is a lease name."""
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    for name in (nfc, nfd):
        with pytest.raises(ConfigError):
            DaemonConfig(lease_name=name)


def test_a_lease_name_past_800_characters_is_refused_bounded() -> None:
    with pytest.raises(ConfigError) as err:
        DaemonConfig(lease_name="a" * 801)
    assert str(err.value) == (
        "lease_name: at most 800 characters (Slurm refuses a job comment past 1024, and the "
        "lease's comment holds the name) (got '" + "a" * 59 + "… (801 characters))")


@pytest.mark.parametrize("name", ["", "dlprio-lease", "dlprio.lease_2", "A" * 800, "-x", "0"])
def test_ascii_names_up_to_800_characters_and_off_are_accepted(name: str) -> None:
    assert DaemonConfig(lease_name=name).lease_name == name
