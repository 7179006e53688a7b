"""``--config`` of ``dlprio simulate``, ``history check`` and ``tune`` is checked as ``dlprio
run`` checks it: they read only its ``policy:`` section, so a misspelt
daemon key, a bad daemon value or a wrong top-level section passed, and a file simulate accepted
failed in ``dlprio run``. Now every daemon key is checked by the daemon's own rules, without
Slurm, a ledger or the configured paths. Expected texts are written out here from the rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.command import CliError
from prioritizer.daemon import config as daemon_config
from prioritizer.daemon.config import DaemonConfig
from prioritizer.policy.validation import ConfigError
from prioritizer.sim.cli import policy_section

TRACE = str(Path(__file__).resolve().parents[2] / "data" / "traces" / "tiresias" / "60_job.csv")
DAEMON_KEYS = ", ".join(sorted(f.name for f in dataclasses.fields(DaemonConfig)))
COMMANDS = {
    "simulate": ["simulate", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--json",
                 "--config", "{f}"],
    "history-check": ["history", "check", "--trace", TRACE, "--config", "{f}"],
    "tune": ["tune", "--trace", TRACE, "--nodes", "1", "--gpus-per-node", "8", "--grid",
             "queues=2", "--config", "{f}"]}


def _run(tmp_path: Path, capsys, command: str, text: str) -> tuple[int, str, Path]:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    rc = main([a.replace("{f}", str(f)) for a in COMMANDS[command]])
    return rc, capsys.readouterr().err, f


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("text, lines", [
    ("intervl_s: 5\n", ["intervl_s: unknown key; did you mean 'interval_s'?"]),
    ("policy: {}\nleese_name: x\n", ["leese_name: unknown key; did you mean 'lease_name'?"]),
    ("interval_s: -1\n", ["interval_s: must be > 0 (got -1)"]),
    ("lease_name: no\n", ['lease_name: expected a string, but YAML read the value as the '
                          'boolean false; quote it as written, e.g. lease_name: "no" (got False)']),
    ("mode: partition\nqueue_partitions: [a, b]\n",
     ["queue_partitions: mode partition needs one partition per queue (3 queues from policy "
      "thresholds) (got ['a', 'b'])"]),
    ("interval_s: 10\nbackoff_max_s: 5\n", ["backoff_max_s: must be >= interval_s (10 s) (got 5)"]),
    ("daemon:\n  interval_s: 5\n", [f"daemon: unknown key; valid keys: {DAEMON_KEYS}"]),
    ("1: x\nmetrics_port: 70000\n", ["metrics_port: must be >= 0 and <= 65535 (got 70000)",
                                     f"1: unknown key (a number, not a name); valid keys: {DAEMON_KEYS}"]),
], ids=["misspelt-key", "misspelt-next-to-policy", "bad-value", "yaml-boolean", "rule-across-keys",
        "backoff-rule", "wrong-section", "every-problem"])
def test_the_daemon_keys_are_checked_as_dlprio_run_checks_them(tmp_path: Path, capsys, command: str,
                                                                text: str, lines: list[str]) -> None:
    rc, err, f = _run(tmp_path, capsys, command, text)
    assert (rc, err) == (2, "".join(f"dlprio: {f}: {line}\n" for line in lines))


@pytest.mark.parametrize("text", [
    "", "policy: ~\n", "interval_s: 5\n",
    "mode: partition\nqueue_partitions: [a, b]\npolicy: {thresholds_gpu_s: [100]}\n",
    "mode: partition\nqueue_partitions: [a, b]\npolicy: {policy: las, thresholds_s: [100]}\n",
    "ledger_path: /nonexistent/dir/l.sqlite\nsnapshot_path: /proc/1/nope.json\n"
    "gittins_samples: /nonexistent.csv\n",
    "policy: {policy: srtf}\n", "lease_name: \"no\"\n"])
def test_a_file_the_daemon_takes_or_srtf_is_replayed(tmp_path: Path, text: str) -> None:
    """Paths are checked as text only (never opened or created), as the daemon's config check
    does; srtf, which the daemon refuses as an oracle, is what simulate is for."""
    f = tmp_path / "c.yaml"
    f.write_text(text)
    policy_section(str(f))
    assert not Path("/nonexistent").exists()


@pytest.mark.parametrize("text", [
    "intervl_s: 5\n", "interval_s: 5\nlease_ttl_s: 6\n", "mode: partition\n", "policy: {}\nx: 1\n",
    "exempt_accounts: ['a b']\n", "metrics_addr: ''\n", "interval_s: 1e300\n",
    "interval_s: 30\npolicy: {starve_knob: 2}\n", "policy:\n  min_run_s: 5\n", "mode: partition\nqueue_partitions: [a, b, c]\n"])
def test_simulate_refuses_a_daemon_key_exactly_when_the_daemon_does(tmp_path: Path, text: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    try:
        daemon_config.load(f)
        daemon_ok = True
    except ConfigError:
        daemon_ok = False
    try:
        policy_section(str(f))
        section_ok = True
    except CliError:
        section_ok = False
    assert section_ok == daemon_ok


def test_a_policy_value_an_option_overrides_is_still_the_options(tmp_path: Path, capsys) -> None:
    """As before: the policy section's values are checked after the options apply, named by
    the option that set them; a bad one in the file that an option replaces is not used."""
    f = tmp_path / "c.yaml"
    f.write_text("policy: {starve_knob: -1}\n")
    argv = [a.replace("{f}", str(f)) for a in COMMANDS["simulate"]]
    assert main(argv + ["--starve-knob", "4"]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == f"dlprio: {f}: policy.starve_knob: must be >= 0 (got -1)\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_refused_for_its_daemon_keys_names_its_policy_problems_too(
        tmp_path: Path, capsys, command: str) -> None:
    """Every problem of the file at once: a misspelt daemon key and a bad policy value are
    both named (the daemon's keys first), so one edit fixes the file."""
    rc, err, f = _run(tmp_path, capsys, command,
                      "intervl_s: 5\npolicy: {starve_knob: -1}\n")
    assert (rc, err) == (2, f"dlprio: {f}: intervl_s: unknown key; did you mean 'interval_s'?\n"
                            f"dlprio: {f}: policy.starve_knob: must be >= 0 (got -1)\n")


def test_relative_file_paths_are_the_config_files_directorys(tmp_path: Path, monkeypatch) -> None:
    """dlprio run (its unit runs in /), status and dlqueue run from different directories:
    a relative path names one file for all of them, beside the config file."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "samples.csv").write_text("gpu_s\n100\n")
    f = etc / "dlprio.yaml"
    f.write_text("ledger_path: state/ledger.sqlite\nsnapshot_path: ../www/snap.json\n"
                 "gittins_samples: samples.csv\nauto_tune: {history: h.csv}\n")
    monkeypatch.chdir(tmp_path)
    cfg = daemon_config.load(Path("etc/dlprio.yaml"))
    assert cfg.ledger_path == f"{etc}/state/ledger.sqlite"
    assert cfg.snapshot_path == f"{etc}/../www/snap.json"
    assert cfg.gittins_samples == f"{etc}/samples.csv"
    assert cfg.auto_tune.history == f"{etc}/h.csv"
    # absolute paths and the words that name no file stay as written
    f.write_text("ledger_path: /srv/l.sqlite\ngittins_samples: history\n"
                 "auto_tune: {history: sacct}\n")
    cfg = daemon_config.load(f)
    assert (cfg.ledger_path, cfg.gittins_samples, cfg.auto_tune.history) == (
        "/srv/l.sqlite", "history", "sacct")
    f.write_text("gittins_samples: ''\n")
    assert daemon_config.load(f).gittins_samples == ""


def test_the_daemons_interval_is_the_replays_decision_interval(tmp_path: Path) -> None:
    """The daemon decides every interval_s: simulate, history check and tune replay a daemon
    config at that interval unless its policy section sets decision_interval_s."""
    f = tmp_path / "dlprio.yaml"
    f.write_text("interval_s: 5\n")
    assert policy_section(str(f)) == {"decision_interval_s": 5}
    f.write_text("interval_s: 5\npolicy: {decision_interval_s: 10, starve_knob: 2}\n")
    assert policy_section(str(f)) == {"decision_interval_s": 10, "starve_knob": 2}
    f.write_text("policy: {starve_knob: 2}\n")   # the daemon's default cycle, 30 s
    assert policy_section(str(f)) == {"starve_knob": 2}


def test_the_daemons_own_replays_tick_at_its_interval(tmp_path: Path) -> None:
    """The daemon's config carries its cycle into its policy: its forecasts and auto_tune's
    replays (which read ``cfg.policy``) decide every interval_s, as the daemon does, unless
    the policy section sets decision_interval_s; a bad interval_s is named once, as itself."""
    f = tmp_path / "dlprio.yaml"
    f.write_text("interval_s: 10\npolicy: {starve_knob: 2}\n")
    cfg = daemon_config.load(f)
    assert (cfg.interval_s, cfg.policy.decision_interval_s, cfg.policy.starve_knob) == (10, 10, 2)
    f.write_text("interval_s: 10\npolicy: {decision_interval_s: 4}\n")
    assert daemon_config.load(f).policy.decision_interval_s == 4
    f.write_text("policy: {starve_knob: 2}\n")
    assert daemon_config.load(f).policy.decision_interval_s == 30   # both defaults: 30 s
    for bad in ("soon", ".nan", ".inf", "0", "-5", "1e12", "1" + "0" * 400, "true"):
        f.write_text(f"interval_s: {bad}\n")
        with pytest.raises(ConfigError) as exc:
            daemon_config.load(f)
        assert [line.split(": ")[1] for line in str(exc.value).splitlines()] == ["interval_s"]
