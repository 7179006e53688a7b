"""The daemon's events through the standard :mod:`logging` module: one record per event, naming
the cycle and, where there is one, the job.

docs/design.md, code rule 11. Every event is a record of the logger ``dlprio`` (:data:`LOGGER`)
whose message is the event name and whose ``extra`` carries ``cycle``, ``job_id``, ``event`` and
``fields`` (the event's own fields, a dict). Two formatters lay a record out as one line:
:class:`TextFormatter` (``2026-11-29T12:00:00Z INFO cycle=7 job_id=42 event=demoted from=0 to=1
reason="..."``) and :class:`JsonFormatter` (one object per line with the keys ``ts, level, cycle,
job_id, event`` then the event's fields). ``dlprio run/once`` put one stderr handler with the
chosen formatter on ``dlprio`` (:func:`configure`), or load a site's ``logging.config``
dictionary (``--log-config``) to route records with any standard handler (syslog, a file, ...).
The reason strings are the policy's own (``QueueState.reason``), the same that ``dlprio explain``
shows.
"""

from __future__ import annotations

import json
import logging
import logging.config
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, TextIO


from slurm_plugin.common.yamlfile import YamlFileError, read_yaml
from slurm_plugin.common.cli import visible
from prioritizer.daemon.config import ConfigError

LOGGER = "dlprio"
FORMATS = ("text", "json")

logging.getLogger(LOGGER).addHandler(logging.NullHandler())   # no lastResort lines when unset


class CycleAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """The ``dlprio`` logger plus the daemon's current cycle, which every record carries.

    The loop sets :attr:`cycle` at the start of each cycle (the ledger's cycle number).

    Args:
        logger: the logger to write to (default ``logging.getLogger("dlprio")``).
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        super().__init__(logger if logger is not None else logging.getLogger(LOGGER), {"cycle": 0})

    @property
    def cycle(self) -> int:
        return int(self.extra["cycle"])  # type: ignore[index, arg-type]  # extra is the {"cycle": int} set here

    @cycle.setter
    def cycle(self, value: int) -> None:
        self.extra = {"cycle": value}

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]
                ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def event(log: logging.Logger | logging.LoggerAdapter,  # type: ignore[type-arg]
          name: str, /, job_id: int | None = None, level: int = logging.INFO,
          **fields: Any) -> None:
    """Log event ``name`` for ``job_id`` (None: cycle-wide) at ``level`` with its ``fields``."""
    log.log(level, name, extra={"job_id": job_id, "event": name, "fields": fields})


def _ts(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return dict(getattr(record, "fields", None) or {})


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (UTC, ``%Y-%m-%dT%H:%M:%SZ``), ``level`` (``INFO``,
    ``WARNING``, ``ERROR``), ``cycle``, ``job_id`` (null when cycle-wide), ``event``, then the
    event's fields in call order; values JSON cannot hold are written as ``str(value)``. A record
    not made by :func:`event` has ``cycle``/``job_id`` null and its message as ``event``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"ts": _ts(record), "level": record.levelname,
                                "cycle": getattr(record, "cycle", None),
                                "job_id": getattr(record, "job_id", None),
                                "event": getattr(record, "event", None) or record.getMessage(),
                                **_fields(record)}
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """``TS LEVEL cycle=N [job_id=J] event=NAME key=value ...``; a value holding a space, ``"``,
    ``=`` or a newline (or empty) is written as a JSON string."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_ts(record), record.levelname]
        cycle = getattr(record, "cycle", None)
        if cycle is not None:
            parts.append(f"cycle={cycle}")
        job_id = getattr(record, "job_id", None)
        if job_id is not None:
            parts.append(f"job_id={job_id}")
        parts.append(f"event={getattr(record, 'event', None) or record.getMessage()}")
        parts += [f"{k}={_text(v)}" for k, v in _fields(record).items()]
        return " ".join(parts)


def _text(value: Any) -> str:
    s = str(value)
    return json.dumps(s, ensure_ascii=False) if (not s or any(c in s for c in ' "=\n')) else s


def formatter(fmt: str) -> logging.Formatter:
    """The formatter for ``fmt`` (``text`` or ``json``); ValueError names any other value."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


_installed: list[logging.Handler] = []     # the handler configure() put on ``dlprio``


def configure(fmt: str = "text", stream: TextIO | None = None,
              config_file: str | Path | None = None) -> CycleAdapter:
    """Set up the ``dlprio`` logger for ``dlprio run/once`` and return the adapter to log with.

    Without ``config_file``: one :class:`logging.StreamHandler` on ``stream`` (default
    ``sys.stderr``) with :func:`formatter` ``(fmt)``, level INFO. A second call replaces the
    handler the first one added (never two lines per event); handlers others added stay, and
    records still propagate to the root logger's handlers. With ``config_file`` (YAML or JSON, a
    :func:`logging.config.dictConfig` dictionary), that file alone decides handlers and levels.

    Raises:
        ConfigError: the config file is unreadable or not a valid dictConfig dictionary.
    """
    logger = logging.getLogger(LOGGER)
    for old in _installed:
        logger.removeHandler(old)
    _installed.clear()
    if config_file is not None:
        _dict_config(Path(config_file))
        return CycleAdapter(logger)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(fmt))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    _installed.append(handler)
    return CycleAdapter(logger)


def _dict_config(path: Path) -> None:
    try:
        spec = read_yaml(path)
    except YamlFileError as exc:
        raise ConfigError(f"log-config: {exc}") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"log-config: {visible(path)}: expected a logging.config dictionary "
                          "(version: 1, handlers: ..., loggers: ...)")
    spec.setdefault("disable_existing_loggers", False)
    try:
        logging.config.dictConfig(spec)
    except (ValueError, TypeError, AttributeError, ImportError) as exc:
        raise ConfigError(f"log-config: {visible(path)}: {visible(exc)}") from None
