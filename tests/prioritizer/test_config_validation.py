"""Hostile configuration files and values, through the real commands (the
msgspec configs): every problem is one bounded, escaped line naming the key path or file
and line, exit 2, before Slurm or a ledger is touched. Expected texts are written out here."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.daemon import config as daemon_config
from prioritizer.daemon import metrics as metrics_module
from prioritizer.daemon.config import DaemonConfig
from prioritizer.history.cli import policy_config
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.validation import ConfigError

TRACE = str(Path(__file__).resolve().parents[2] / "data" / "traces" / "tiresias" / "60_job.csv")
CONF = str(Path(__file__).resolve().parents[2] / "conf" / "dlprio.yaml")
POLICY_KEYS = ("checkpoint_overhead_s, decision_interval_s, gittins_quantum_gpu_s, min_run_s, "
               "policy, preempt_gain, preemption, promoted_preempts, requeue_delay_s, requeue_guard, starve_knob, "
               "thresholds_gpu_s, thresholds_s, "
               "wait_guard")
DAEMON_KEYS = ", ".join(sorted(f.name for f in dataclasses.fields(DaemonConfig)))
BIG = 10**400   # a whole number no float holds


def _errors(tmp_path: Path, text: str) -> list[str]:
    """The problem lines ``dlprio.yaml`` text gets, without the ``FILE: `` prefix."""
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        daemon_config.load(f)
    lines = str(err.value).splitlines()
    assert all(line.startswith(f"{f}:") for line in lines)
    return [line.removeprefix(f"{f}:").removeprefix(" ") for line in lines]


# -- a key written twice: PyYAML kept the last value without a word ---------------------------

@pytest.mark.parametrize("argv, text, prefix, tail", [
    (["status", "--config", "{f}"], "interval_s: 30\npolicy:\n  starve_knob: 4\n  starve_knob: 16\n",
     "config: ", "4: key 'starve_knob' appears twice in the same mapping (lines 3 and 4)"),
    (["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--config", "{f}"],
     "policy:\n  min_run_s: 0\n  starve_knob: 4\n  starve_knob: 16\n",
     "", "4: key 'starve_knob' appears twice in the same mapping (lines 3 and 4)"),
    (["history", "check", "--trace", TRACE, "--config", "{f}"],
     "policy: {starve_knob: 4}\n\n\npolicy: {}\n",
     "", "4: key 'policy' appears twice in the same mapping (lines 1 and 4)"),
    (["tune", "--trace", TRACE, "--config", "{f}", "--grid", "queues=2"],
     "policy:\n  policy: las\n  policy: fifo\n",
     "", "3: key 'policy' appears twice in the same mapping (lines 2 and 3)"),
    (["tune", "--trace", TRACE, "--grid", "{f}"], "knob: [4]\nqueues: [2]\nknob: [16]\n",
     "", "3: key 'knob' appears twice in the same mapping (lines 1 and 3)"),
    (["once", "--dry-run", "--config", CONF, "--log-config", "{f}"],
     "version: 1\nroot: {}\nversion: 1\n",
     "config: log-config: ", "3: key 'version' appears twice in the same mapping (lines 1 and 3)"),
], ids=["daemon-config", "simulate", "history-check", "tune-config", "tune-grid", "log-config"])
def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path: Path, capsys, argv: list[str],
                                                          text: str, prefix: str, tail: str) -> None:
    f = tmp_path / "dup.yaml"
    f.write_text(text)
    rc = main([a.replace("{f}", str(f)) for a in argv])
    out, err = capsys.readouterr()
    assert (rc, out) == (2, "")
    assert err == f"dlprio: {prefix}{f}:{tail}; keep one\n"


def test_every_key_written_twice_is_one_line_in_file_order(tmp_path: Path) -> None:
    assert _errors(tmp_path, "interval_s: 5\npolicy:\n  policy: las\n  policy: fifo\n"
                             "interval_s: 6\n") == [
        "4: key 'policy' appears twice in the same mapping (lines 3 and 4); keep one",
        "5: key 'interval_s' appears twice in the same mapping (lines 1 and 5); keep one"]


def test_a_merge_key_may_still_be_overridden(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("policy:\n  <<: {starve_knob: 2, min_run_s: 5}\n  starve_knob: 4\n")
    cfg = daemon_config.load(f).policy
    assert (cfg.starve_knob, cfg.min_run_s) == (4.0, 5.0)


# -- what a file holds is echoed bounded and escaped -------------------------------------------

def test_a_long_value_is_echoed_cut_with_its_size(tmp_path: Path) -> None:
    assert _errors(tmp_path, "mode: " + "x" * 100_000 + "\n") == [
        "mode: must be 'priority' or 'partition' (got '" + "x" * 59 + "… (100,000 characters))"]
    assert _errors(tmp_path, "partitions: " + "y" * 5000 + "\n") == [
        "partitions: expected a list (got '" + "y" * 59 + "… (5,000 characters))"]


def test_a_long_list_in_a_rule_across_items_is_cut(tmp_path: Path) -> None:
    assert _errors(tmp_path, "policy:\n  thresholds_gpu_s: [" + ", ".join(["5"] * 30_000) + "]\n") == [
        "policy.thresholds_gpu_s: thresholds must increase strictly (got [" + "5.0, " * 11
        + "5.0,… (30,000 items))"]
    assert _errors(tmp_path, "mode: partition\nqueue_partitions: [" + "p" * 300 + "]\n") == [
        "queue_partitions: mode partition needs one partition per queue (3 queues from policy "
        "thresholds) (got ['" + "p" * 58 + "… (1 item))"]


def test_short_values_are_echoed_whole_as_before(tmp_path: Path) -> None:
    assert _errors(tmp_path, "mode: " + "x" * 70 + "\n") == [
        "mode: must be 'priority' or 'partition' (got '" + "x" * 70 + "')"]


@pytest.mark.parametrize("key, shown", [
    ('"a\\nb: x"', "'a\\nb: x'"),                  # a newline split the problem into two lines
    ('"\\e[31mred"', "'\\x1b[31mred'"),            # an escape sequence restyled the terminal
    ('"\\u202eevil"', "'\\u202eevil'"),            # a bidi override reordered the line
    ('"a.b"', "'a.b'"),                            # path syntax in a key is quoted
    ("k" * 1000, "'" + "k" * 59 + "… (1,000 characters)"),
], ids=["newline", "escape", "bidi", "dot", "long"])
def test_an_unknown_key_is_named_on_one_line_escaped_and_cut(tmp_path: Path, key: str,
                                                             shown: str) -> None:
    assert _errors(tmp_path, f"policy:\n  {key}: 1\n") == [
        f"policy.{shown}: unknown key; valid keys: {POLICY_KEYS}"]


def test_a_key_that_is_not_a_name_says_so_and_is_not_a_list_index(tmp_path: Path) -> None:
    """``policy: {1: x}`` was ``policy[1]: unknown key``, as if ``policy`` were a list."""
    assert _errors(tmp_path, "true: 1\npolicy:\n  1: a\n  null: b\n  2.5: c\n") == [
        f"policy.1: unknown key (a number, not a name); valid keys: {POLICY_KEYS}",
        f"policy.null: unknown key (null, not a name); valid keys: {POLICY_KEYS}",
        f"policy.2.5: unknown key (a number, not a name); valid keys: {POLICY_KEYS}",
        f"true: unknown key (true/false, not a name); valid keys: {DAEMON_KEYS}"]


def test_simulate_names_a_hostile_key_on_one_line(tmp_path: Path, capsys) -> None:
    f = tmp_path / "c.yaml"
    f.write_text('policy:\n  "starve_knob\\n--starve-knob": 1\n')
    rc = main(["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8",
               "--config", str(f), "--starve-knob", "2"])
    assert rc == 2
    # named by the file, not by --starve-knob: the quoted key is not the option's key
    assert capsys.readouterr().err == (f"dlprio: {f}: policy.'starve_knob\\n--starve-knob': "
                                       "unknown key; did you mean 'starve_knob'?\n")


# -- whole numbers past the largest float -------------------------------------------------------

def test_a_whole_number_past_any_float_is_not_finite_nor_echoed_whole(tmp_path: Path) -> None:
    """10**400 for a seconds key was "expected a number", with its 401 digits."""
    assert _errors(tmp_path, f"interval_s: {BIG}\nmetrics_port: {BIG}\npolicy:\n"
                             f"  thresholds_gpu_s: [1, {BIG}]\n  starve_knob: -{BIG}\n") == [
        "policy.thresholds_gpu_s[1]: must be a finite number (got a whole number of 401 digits)",
        "policy.starve_knob: must be a finite number (got a negative whole number of 401 digits)",
        "interval_s: must be a finite number (got a whole number of 401 digits)",
        "metrics_port: must be >= 0 and <= 65535 (got a whole number of 401 digits)"]


def test_a_whole_number_python_cannot_write_is_named_in_library_use() -> None:
    """``repr`` of an int of over 4,300 digits raises ValueError: the message is built anyway."""
    with pytest.raises(ConfigError) as err:
        PolicyConfig(min_run_s=10**5000, thresholds_s={10**5000})
    assert str(err.value).splitlines() == [
        "thresholds_s: expected a list (got a set holding a whole number of over 4,000 digits)",
        "min_run_s: must be a finite number (got a whole number of over 4,000 digits)"]


def test_tune_grid_echo_is_bounded(tmp_path: Path, capsys) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("knob: [" + "x" * 100_000 + "]\n")
    assert main(["tune", "--trace", TRACE, "--grid", str(grid)]) == 2
    assert capsys.readouterr().err == (f"dlprio: {grid}: knob='" + "x" * 59
                                       + "… (100,000 characters) is not a number\n")
    grid.write_text(f"queues: [{BIG}]\n")
    assert main(["tune", "--trace", TRACE, "--grid", str(grid)]) == 2
    assert capsys.readouterr().err == (f"dlprio: {grid}: queues=a whole number of 401 digits out "
                                       "of range: at most 1e+12\n")


# -- the daemon's waits: past ~9.2e9 s Python's clock overflows ---------------------------------

@pytest.mark.parametrize("key", ["max_grace_s", "interval_s", "backoff_max_s", "slurm_timeout_s",
                                 "gittins_refresh_s", "lease_ttl_s"])
def test_a_wait_past_max_seconds_is_a_config_error(tmp_path: Path, key: str) -> None:
    """``slurm_timeout_s: 1e300`` reached ``subprocess.run(timeout=...)``: OverflowError and a
    traceback at the first Slurm call; ``interval_s: 1e300`` the loop's wait."""
    assert _errors(tmp_path, f"{key}: 1e300\n") == [
        f"{key}: must be <= 1000000000 (about 31 years) (got 1e+300)"]


def test_the_bound_itself_is_a_valid_wait() -> None:
    cfg = DaemonConfig(interval_s=1e9, backoff_max_s=1e9, max_grace_s=1e9, gittins_refresh_s=1e9,
                       slurm_timeout_s=9e8)
    assert (cfg.interval_s, cfg.call_timeout_s) == (1e9, 9e8)
    assert DaemonConfig(interval_s=5e8, backoff_max_s=5e8, lease_ttl_s=1e9).lease_ttl == 1e9


def test_once_stops_at_a_too_long_wait_before_slurm(tmp_path: Path, capsys) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(f"ledger_path: {tmp_path}/l.sqlite\nsnapshot_path: {tmp_path}/s.json\n"
                 "interval_s: 1e301\nbackoff_max_s: 1e302\nslurm_timeout_s: 1e300\n")
    assert main(["once", "--dry-run", "--config", str(f)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"dlprio: config: {f}: interval_s: must be <= 1000000000 (about 31 years) (got 1e+301)",
        f"dlprio: config: {f}: backoff_max_s: must be <= 1000000000 (about 31 years) (got 1e+302)",
        f"dlprio: config: {f}: slurm_timeout_s: must be <= 1000000000 (about 31 years) "
        "(got 1e+300)"]
    assert not (tmp_path / "l.sqlite").exists()


# -- the policy section as simulate / history / tune read it, as the daemon does -----------------

@pytest.mark.parametrize("text", ["", "policy:\n", "policy: ~\n", "metrics_port: 0\n"],
                         ids=["empty-file", "empty-section", "null-section", "no-section"])
def test_an_empty_or_missing_policy_section_is_the_default_policy(tmp_path: Path, capsys,
                                                                   text: str) -> None:
    """``policy: ~`` was "expected a mapping with a 'policy:' mapping" in simulate only; the
    daemon, history check and tune read it as the default policy."""
    f = tmp_path / "c.yaml"
    f.write_text(text)
    assert policy_config(None, str(f)) == PolicyConfig()
    rc = main(["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8",
               "--config", str(f), "--json"])
    assert rc == 0 and '"policy": "tiresias-las"' in capsys.readouterr().out


@pytest.mark.parametrize("text, line", [
    ("policy: []\n", "policy: expected a mapping of keys (got [])"),
    ("policy: las\n", "policy: expected a mapping of keys (got 'las')"),
    ("- policy\n", "top level: expected a mapping of keys with a 'policy:' section (got ['policy'])"),
])
@pytest.mark.parametrize("argv", [
    ["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--config", "{f}"],
    ["history", "check", "--trace", TRACE, "--config", "{f}"],
    ["tune", "--trace", TRACE, "--config", "{f}", "--grid", "queues=2"],
], ids=["simulate", "history-check", "tune"])
def test_a_policy_section_that_is_not_a_mapping_is_named(tmp_path: Path, capsys, argv: list[str],
                                                         text: str, line: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    assert main([a.replace("{f}", str(f)) for a in argv]) == 2
    assert capsys.readouterr().err == f"dlprio: {f}: {line}\n"


# -- gittins_samples / --durations: the samples file is read like every other file --------------

def _gittins_config(tmp_path: Path, samples: str) -> Path:
    f = tmp_path / "c.yaml"
    f.write_text(f"ledger_path: {tmp_path}/l.sqlite\nsnapshot_path: {tmp_path}/s.json\n"
                 f"policy: {{policy: tiresias-gittins}}\ngittins_samples: '{samples}'\n")
    return f


@pytest.mark.parametrize("make, reason", [
    (lambda p: __import__("os").mkfifo(p), "cannot read (a FIFO; give a regular file)"),
    (lambda p: p.mkdir(), "cannot read (a directory; give a regular file)"),
    (lambda p: p.write_text("duration\n100\n-5\n"), None),
    (lambda p: p.write_text("duration\n100\nnan\n"),
     "3: expected a positive finite number of GPU·s, got 'nan'"),
    (lambda p: p.write_text("duration\n5\ninf\nnan\n"),
     "3: expected a positive finite number of GPU·s, got 'inf'"),
], ids=["fifo", "directory", "bad-sample", "nan", "inf-before-nan"])
def test_a_bad_samples_file_is_a_config_error_before_the_ledger(tmp_path: Path, capsys, make,
                                                                 reason: str | None) -> None:
    """A bad samples file is a config error naming the key, found before the ledger is
    created or locked (a FIFO would hang ``dlprio once`` for ever, holding the ledger's
    lock)."""
    samples = tmp_path / "samples.csv"
    make(samples)
    f = _gittins_config(tmp_path, str(samples))
    assert main(["once", "--dry-run", "--config", str(f)]) == 2
    why = reason or "3: expected a positive finite number of GPU·s, got '-5'"
    sep = "" if reason is None or reason[0].isdigit() else " "
    assert capsys.readouterr().err == f"dlprio: config: {f}: gittins_samples: {samples}:{sep}{why}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "samples.csv"]


def test_simulate_durations_refuses_a_fifo(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "samples.csv"
    __import__("os").mkfifo(fifo)
    rc = main(["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8",
               "--policy", "tiresias-gittins", "--durations", str(fifo)])
    assert rc == 2
    assert capsys.readouterr().err == f"dlprio: {fifo}: cannot read (a FIFO; give a regular file)\n"


def test_a_good_samples_file_is_the_daemons_distribution(tmp_path: Path) -> None:
    from prioritizer.daemon.cli import gittins_samples
    samples = tmp_path / "samples.csv"
    samples.write_text("duration\n300\n100\n200\n")
    cfg = daemon_config.load(_gittins_config(tmp_path, str(samples)))
    assert gittins_samples(cfg, "c.yaml").samples == (100.0, 200.0, 300.0)
    assert gittins_samples(dataclasses.replace(cfg, gittins_samples="history"), "c.yaml") is None


@pytest.mark.parametrize("key", ["ledger_path", "snapshot_path", "gittins_samples"])
def test_a_path_no_system_call_takes_is_a_config_error_echoed_bounded(tmp_path: Path,
                                                                      key: str) -> None:
    """A 100,000-character ``ledger_path`` was echoed whole by the ``cannot stat (File name too
    long)`` check; a NUL in ``gittins_samples`` was ``dlprio: embedded null byte``."""
    assert _errors(tmp_path, f"{key}: /{'x' * 100_000}\n") == [
        f"{key}: a path must be shorter than 4096 bytes (PATH_MAX) (got '/" + "x" * 58
        + "… (100,001 characters))"]
    assert _errors(tmp_path, f'{key}: "/tmp/a\\0b"\n') == [
        f"{key}: a path cannot hold a NUL byte (\\x00) (got '/tmp/a\\x00b')"]


def test_a_path_just_below_path_max_is_accepted() -> None:
    assert len(DaemonConfig(ledger_path="/" + "d/" * 2047).ledger_path) == 4095


@pytest.mark.parametrize("argv", [
    ["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--config", "{f}"],
    ["history", "check", "--trace", TRACE, "--config", "{f}"],
    ["tune", "--trace", TRACE, "--config", "{f}", "--grid", "queues=2"],
], ids=["simulate", "history-check", "tune"])
def test_a_misspelt_policy_section_is_refused_not_replayed_as_the_default(
        tmp_path: Path, capsys, argv: list[str]) -> None:
    """``polcy: {starve_knob: 2}`` replayed the default policy without a word (the daemon
    refuses the same file: ``polcy: unknown key; did you mean 'policy'?``)."""
    f = tmp_path / "c.yaml"
    f.write_text("interval_s: 5\npolcy:\n  starve_knob: 2\n")
    assert main([a.replace("{f}", str(f)) for a in argv]) == 2
    assert capsys.readouterr().err == f"dlprio: {f}: polcy: unknown key; did you mean 'policy'?\n"


def test_no_daemon_key_is_taken_for_a_misspelt_policy_section(tmp_path: Path) -> None:
    """Every daemon key, each with a value the daemon takes, leaves the default policy, but
    for interval_s, the daemon's cycle, which the replay decides at."""
    values = {"mode": "priority", "priority_field": "priority", "inqueue_span_s": 100,
              "update_budget": 5, "partitions": "[gpu]", "queue_partitions": "[]",
              "exempt_partitions": "[debug]", "exempt_accounts": "[ops]", "max_grace_s": 60,
              "interval_s": 10, "backoff_max_s": 60, "ledger_path": "/x/l", "snapshot_path": "/x/s",
              "metrics_port": 0, "metrics_addr": "::1", "log_format": "json",
              "slurm_timeout_s": 5, "gittins_samples": "history", "gittins_min_samples": 10,
              "gittins_refresh_s": 60, "retention_days": 3, "lease_name": "x", "lease_ttl_s": 0,
              "auto_tune": "{enabled: true, min_gain: 0.1}",
              "virtual_clusters": "{nlp: {account: nlp, guaranteed_gpus: 8}}",
              "fair_share_half_life_s": 3600}
    assert set(values) == {k.name for k in dataclasses.fields(DaemonConfig)} - {"policy",
                                                                                "forecast"}
    f = tmp_path / "c.yaml"
    f.write_text("".join(f"{k}: {v}\n" for k, v in values.items()))
    assert policy_config(None, str(f)) == PolicyConfig(decision_interval_s=10)


def test_a_long_key_written_twice_is_named_cut(tmp_path: Path) -> None:
    key = "k" * 100_000   # an explicit key (``? KEY``) may be longer than 1024 characters
    assert _errors(tmp_path, f"? {key}\n: 1\n? {key}\n: 2\n") == [
        "3: key '" + "k" * 59 + "… (100,000 characters) appears twice in the same mapping "
        "(lines 1 and 3); keep one"]


@pytest.mark.parametrize("key", ["partitions", "queue_partitions", "exempt_partitions",
                                 "exempt_accounts"])
def test_a_name_list_item_holding_two_names_is_refused(tmp_path: Path, key: str) -> None:
    """``exempt_partitions: ["gpu,debug"]`` matched no job (Slurm names hold no comma): the
    partitions the admin meant to protect were preempted without a word."""
    assert _errors(tmp_path, f'{key}: [ok, "gpu,debug", "a b", "t\\tx"]\n') == [
        f"{key}[1]: one name per item, without ',' or white space (a YAML list: [gpu, debug]) "
        "(got 'gpu,debug')",
        f"{key}[2]: one name per item, without ',' or white space (a YAML list: [gpu, debug]) "
        "(got 'a b')",
        f"{key}[3]: one name per item, without ',' or white space (a YAML list: [gpu, debug]) "
        "(got 't\\tx')"]


def test_an_empty_metrics_addr_is_a_config_error() -> None:
    """``metrics_addr: ""`` passed the check and failed in ``dlprio run`` after the ledger was
    created and locked: ``metrics_port: cannot listen on :9464 (Name or service not known)``."""
    with pytest.raises(ConfigError) as err:
        daemon_config.from_mapping({"metrics_addr": ""})
    assert str(err.value) == "metrics_addr: must not be empty (got '')"


def test_a_metrics_addr_that_does_not_resolve_is_named_as_the_address(
        tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host name that does not resolve is named as the address (``metrics_addr``), not as
    ``metrics_port: cannot listen on ...``: the port is fine. The resolver's failure is
    raised by a stand-in for prometheus' ``start_http_server``: this machine has no DNS whose answer a test could rely on (a name
    under ``.invalid`` may wait for a resolver's timeout)."""
    def unresolvable(port: int, addr: str, registry: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    monkeypatch.setattr(metrics_module, "start_http_server", unresolvable)
    f = tmp_path / "c.yaml"
    f.write_text(f"ledger_path: {tmp_path / 'l.sqlite'}\nsnapshot_path: {tmp_path / 's.json'}\n"
                 "metrics_addr: metrics.example\nmetrics_port: 9999\npolicy:\n  policy: fifo\n")
    assert main(["run", "--config", str(f)]) == 2
    assert capsys.readouterr().err == (f"dlprio: config: {f}: metrics_addr: cannot listen on "
                                       "metrics.example:9999 (Name or service not known)\n")


def test_a_busy_metrics_port_names_the_file_and_leaves_no_ledger_or_lock(
        tmp_path: Path, capsys) -> None:
    """A port another process listens on (a real socket here) is the config file's
    ``metrics_port`` fault, exit 2, and ``dlprio run`` leaves no new ledger or lock file."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        f = tmp_path / "c.yaml"
        f.write_text(f"ledger_path: {tmp_path / 'l.sqlite'}\nsnapshot_path: {tmp_path / 's.json'}\n"
                     f"metrics_port: {port}\nlease_name: ''\npolicy:\n  policy: fifo\n")
        assert main(["run", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dlprio: config: {f}: metrics_port: cannot listen on 127.0.0.1:{port} (")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml"]


def test_a_lone_surrogate_is_a_config_error_naming_the_key(tmp_path: Path, capsys) -> None:
    """YAML's ``"\\ud800"`` escape gives a lone surrogate that no UTF-8 text holds: it is a
    config error naming the file and the key (never msgspec's UnicodeEncodeError without
    either), for a Slurm name or path as for any other value."""
    assert _errors(tmp_path, 'mode: "\\ud800"\nexempt_accounts: [ok, "\\udcff"]\n'
                             'policy:\n  starve_knob: "\\ud800"\n  policy: "\\ud800"\n') == [
        "policy.policy: must be 'tiresias-las', 'tiresias-gittins', 'las', 'fifo', 'fifo-fit' or "
        "'srtf' (got '\\ud800')",
        "policy.starve_knob: expected a number >= 0 (got '\\ud800')",
        "mode: must be 'priority' or 'partition' (got '\\ud800')",
        "exempt_accounts[1]: must be text without a lone surrogate (\\ud800-\\udfff) (got '\\udcff')"]
    f = tmp_path / "c.yaml"
    f.write_text('policy:\n  starve_knob: "\\ud800"\n')
    assert main(["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8",
                 "--config", str(f)]) == 2
    assert capsys.readouterr().err == (f"dlprio: {f}: policy.starve_knob: expected a number "
                                       ">= 0 (got '\\ud800')\n")


def test_a_printable_key_without_path_syntax_is_named_as_written(tmp_path: Path) -> None:
    assert _errors(tmp_path, "policy:\n  starve knob: 1\n  ключ: 2\n") == [
        "policy.starve knob: unknown key; did you mean 'starve_knob'?",
        f"policy.ключ: unknown key; valid keys: {POLICY_KEYS}"]


def test_samples_are_each_positive_and_finite_and_a_bom_is_dropped() -> None:
    """A NaN sorts anywhere, so the distribution checks every sample, not its ends; a
    spreadsheet's byte-order mark before the header is not part of it."""
    from prioritizer.policy.durations import parse_samples
    from prioritizer.policy.gittins import GittinsDistribution
    assert parse_samples("\ufeffduration\n5\n7\n", "s.csv") == [5.0, 7.0]
    for bad in ([5.0, float("nan"), 7.0], [float("nan")], [1.0, float("inf")], [0.0, 1.0]):
        with pytest.raises(ValueError, match="samples must be finite and > 0"):
            GittinsDistribution(bad)


def test_auto_tune_history_is_read_before_the_first_cycle(tmp_path: Path, capsys) -> None:
    """``auto_tune.history`` naming a missing file, a directory or a trace of another format
    stops ``dlprio once`` with one line before the ledger is made (the replay that reads it
    comes a period later)."""
    philly = tmp_path / "philly.csv"
    philly.write_text("u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,"
                      "new_status\n0,u,1,0,1,0,10,0,Pass\n")
    for history, why in ((tmp_path / "missing.csv", "cannot read (No such file or directory)"),
                         (tmp_path, "cannot read (a directory; give a regular file)"),
                         (philly, "history trace lacks column(s) job_id, num_gpu")):
        f = tmp_path / "c.yaml"
        f.write_text(f"ledger_path: {tmp_path}/l.sqlite\nsnapshot_path: {tmp_path}/s.json\n"
                     f"auto_tune: {{enabled: true, history: '{history}'}}\n")
        assert main(["once", "--dry-run", "--config", str(f)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"dlprio: config: {f}: auto_tune.history: {history}") and why in err
        assert err.count("\n") == 1 and not (tmp_path / "l.sqlite").exists()


def test_a_config_that_is_not_utf8_names_the_line_and_the_fix(tmp_path: Path) -> None:
    """A Latin-1 ``é`` (byte 0xe9) in a comment on line 3."""
    f = tmp_path / "c.yaml"
    f.write_bytes(b"interval_s: 30\nmetrics_port: 0\n# caf\xe9\n")
    with pytest.raises(ConfigError) as err:
        daemon_config.load(f)
    assert str(err.value) == f"{f}:3: not UTF-8 text (byte 0xe9); save the file as UTF-8"
