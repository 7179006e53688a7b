"""The daemon's events through the standard logging module: the JSON and text lines
keep today's keys and values, a site's own handler receives the records, and ``dlprio
run/once`` never add a second stderr handler."""

from __future__ import annotations

import argparse
import calendar
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from log_helpers import captured
from prioritizer.cli import main
from prioritizer.daemon import cli as daemon_cli
from prioritizer.daemon import log as daemon_log
from prioritizer.daemon.log import LOGGER, CycleAdapter, JsonFormatter, configure, event

PACKAGED = Path(__file__).resolve().parents[3] / "conf" / "dlprio.yaml"


@pytest.fixture(autouse=True)
def restore_dlprio_logger() -> Iterator[None]:
    """configure() changes the process-wide ``dlprio`` logger: put it back after each test."""
    logger = logging.getLogger(LOGGER)
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    installed = list(daemon_log._installed)   # which of them configure() owns and replaces
    yield
    daemon_log._installed[:] = installed
    for h in list(logger.handlers):
        if h not in handlers:
            logger.removeHandler(h)
            h.close()
    for h in handlers:      # dictConfig clears the handlers of a logger it configures
        if h not in logger.handlers:
            logger.addHandler(h)
    logger.setLevel(level)
    logger.propagate = propagate


def test_json_line_has_the_keys_and_values_of_before() -> None:
    with captured("json", created=0) as (log, out):
        log.cycle = 7
        event(log, "queue_changed", 42, **{"from": 0, "to": 1, "reason": "demoted: 50 >= 40"})
    line = out.getvalue()
    assert line.endswith("\n") and line.count("\n") == 1
    record = json.loads(line)
    assert list(record) == ["ts", "level", "cycle", "job_id", "event", "from", "to", "reason"]
    assert record == {"ts": "1970-01-01T00:00:00Z", "level": "INFO", "cycle": 7, "job_id": 42,
                      "event": "queue_changed", "from": 0, "to": 1,
                      "reason": "demoted: 50 >= 40"}


def test_json_cycle_wide_warning_and_values_json_cannot_hold(tmp_path: Path) -> None:
    created = calendar.timegm((2026, 11, 29, 12, 0, 0))
    with captured("json", created=created) as (log, out):
        log.cycle = 3
        event(log, "slurm_unreachable", level=logging.WARNING, error="timed out",
              retry_in_s=2.5, ledger=tmp_path / "l.sqlite")
        event(log, "snapshot_failed", level=logging.ERROR, path=None)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {"ts": "2026-11-29T12:00:00Z", "level": "WARNING", "cycle": 3,
                     "job_id": None, "event": "slurm_unreachable", "error": "timed out",
                     "retry_in_s": 2.5, "ledger": str(tmp_path / "l.sqlite")}
    assert (second["level"], second["job_id"], second["path"]) == ("ERROR", None, None)


def test_fields_named_like_logrecord_attributes_are_kept() -> None:
    """``lease_acquired`` has a field ``name``: LogRecord has one too; it must neither raise
    nor replace the logger's name."""
    with captured("json", created=0) as (log, out):
        event(log, "lease_acquired", 12, name="dlprio-lease", msg="m", args="a", ttl_s=30)
    assert json.loads(out.getvalue()) == {
        "ts": "1970-01-01T00:00:00Z", "level": "INFO", "cycle": 0, "job_id": 12,
        "event": "lease_acquired", "name": "dlprio-lease", "msg": "m", "args": "a", "ttl_s": 30}


def test_text_line_of_before() -> None:
    with captured("text", created=0) as (log, out):
        event(log, "queue_changed", 42, reason="demoted: 50 >= 40")
        log.cycle = 9
        event(log, "readback_mismatch", 5, logging.WARNING, asked="priority:77", why="",
              note='a "b"', eq="x=y", nl="a\nb")
        event(log, "stopped")
    assert out.getvalue().splitlines() == [
        '1970-01-01T00:00:00Z INFO cycle=0 job_id=42 event=queue_changed '
        'reason="demoted: 50 >= 40"',
        '1970-01-01T00:00:00Z WARNING cycle=9 job_id=5 event=readback_mismatch '
        'asked=priority:77 why="" note="a \\"b\\"" eq="x=y" nl="a\\nb"',
        "1970-01-01T00:00:00Z INFO cycle=9 event=stopped"]


def test_a_site_handler_receives_the_records_with_their_fields() -> None:
    """Routing: a handler the site adds to ``dlprio`` gets every event as a LogRecord whose
    attributes are the event's (besides, not instead of, the stderr handler)."""
    got: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    logging.getLogger(LOGGER).addHandler(site := Collect())
    log = configure("json", stream=(out := io.StringIO()))
    log.cycle = 4
    event(log, "order_set", 17, value="site_factor:252")
    (record,) = got
    assert (record.name, record.levelname, record.getMessage()) == ("dlprio", "INFO", "order_set")
    assert (record.cycle, record.job_id, record.event, record.fields) == (  # type: ignore[attr-defined]
        4, 17, "order_set", {"value": "site_factor:252"})
    assert json.loads(out.getvalue())["value"] == "site_factor:252"
    logging.getLogger(LOGGER).removeHandler(site)


def test_records_propagate_to_the_root_logger(caplog: pytest.LogCaptureFixture) -> None:
    configure("text", stream=io.StringIO())
    with caplog.at_level(logging.INFO, logger=LOGGER):
        event(CycleAdapter(), "slurm_back", failures=3)
    assert [(r.name, r.event, r.fields) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("dlprio", "slurm_back", {"failures": 3})]


def test_configure_sets_info_and_a_site_level_drops_info(tmp_path: Path) -> None:
    log = configure("text", stream=(out := io.StringIO()))
    log.debug("not an event")
    event(log, "started")
    assert out.getvalue().count("\n") == 1 and "event=started" in out.getvalue()
    conf = tmp_path / "logging.yaml"
    path = tmp_path / "dlprio.log"
    conf.write_text(f"""\
version: 1
formatters:
  json: {{"()": prioritizer.daemon.log.JsonFormatter}}
handlers:
  file: {{class: logging.FileHandler, filename: {json.dumps(str(path))}, formatter: json}}
loggers:
  dlprio: {{level: WARNING, handlers: [file]}}
""")
    log = configure("text", config_file=conf)
    event(log, "order_set", 1, value="priority:5")                   # INFO: dropped
    event(log, "update_refused", 2, logging.WARNING, slurm="denied")
    for h in logging.getLogger(LOGGER).handlers:
        h.flush()
    (line,) = path.read_text().splitlines()
    assert json.loads(line)["event"] == "update_refused"
    assert "update_refused" not in out.getvalue()      # the stderr handler was replaced


def test_run_once_twice_in_one_process_writes_each_event_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(config=str(PACKAGED), log_format="json", log_config=None)
    daemon_cli._setup(args)
    _, log, _ = daemon_cli._setup(args)
    event(log, "started")
    err = capsys.readouterr().err.splitlines()
    assert [json.loads(line)["event"] for line in err] == ["started"]
    streams = [h for h in logging.getLogger(LOGGER).handlers
               if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.NullHandler)]
    assert len(streams) == 1


@pytest.mark.parametrize("text, why", [
    ("version: 1\nhandlers:\n  h: {class: no.such.Handler}\n", "log-config: "),
    ("- just\n- a list\n", "expected a logging.config dictionary"),
    ("version: [1\n", "logging.yaml:2:1: YAML syntax error: while parsing a flow sequence expected ',' or ']', but got '<stream end>'"),
    ("", "expected a logging.config dictionary"),
])
def test_bad_log_config_exits_2_with_one_line(tmp_path: Path, text: str, why: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "logging.yaml"
    conf.write_text(text)
    rc = main(["once", "--config", str(PACKAGED), "--log-config", str(conf), "--dry-run"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and why in err and str(conf) in err


def test_json_formatter_for_a_plain_record_of_the_dlprio_logger() -> None:
    record = logging.makeLogRecord({"name": "dlprio", "levelname": "WARNING", "created": 0,
                                    "msg": "plain %s", "args": ("text",)})
    assert json.loads(JsonFormatter().format(record)) == {
        "ts": "1970-01-01T00:00:00Z", "level": "WARNING", "cycle": None, "job_id": None,
        "event": "plain text"}


def test_the_documented_syslog_example_routes_events(tmp_path: Path) -> None:
    """docs/dlprio.md's --log-config example, with the syslog address pointed at a UDP socket
    of this test and the file under tmp_path: the syslog datagram is the JSON line (after the
    ``<PRI>`` of facility local3, RFC 3164), the file holds only the warning."""
    import re
    import socket

    import yaml

    doc = (Path(__file__).resolve().parents[3] / "docs" / "dlprio.md").read_text()
    block = re.search(r"```yaml\n(version: 1\n.*?)```", doc, re.S)
    assert block is not None
    spec = yaml.safe_load(block.group(1))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(5)
        spec["handlers"]["syslog"]["address"] = ["127.0.0.1", server.getsockname()[1]]
        spec["handlers"]["problems"]["filename"] = str(tmp_path / "problems.log")
        conf = tmp_path / "logging.yaml"
        conf.write_text(yaml.safe_dump(spec))
        log = configure("json", config_file=conf)
        log.cycle = 2
        event(log, "order_set", 8, value="priority:5")
        event(log, "update_refused", 9, logging.WARNING, slurm="denied")
        datagrams = [server.recv(65536).decode() for _ in range(2)]
    local3 = 19 * 8
    assert [d[:d.index(">") + 1] for d in datagrams] == [f"<{local3 + 6}>", f"<{local3 + 4}>"]
    sent = json.loads(datagrams[0][datagrams[0].index(">") + 1:].rstrip("\x00"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", sent.pop("ts"))
    assert sent == {"level": "INFO", "cycle": 2, "job_id": 8, "event": "order_set",
                    "value": "priority:5"}
    for h in logging.getLogger(LOGGER).handlers:
        h.flush()
    (line,) = (tmp_path / "problems.log").read_text().splitlines()
    assert json.loads(line)["event"] == "update_refused"


def test_missing_log_config_exits_2_naming_the_file(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    rc = main(["run", "--config", str(PACKAGED), "--log-config", str(missing)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and str(missing) in err and "cannot read" in err
