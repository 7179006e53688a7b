"""The JSON fields the docs list are the ones the commands print: ``dlqueue --json``
(docs/dlqueue.md) and ``dlprio history check --forecasts --json`` (docs/forecasts.md)."""

from __future__ import annotations

import re
from pathlib import Path

from prioritizer.daemon.forecast_text import json_field
from prioritizer.history.forecast_check import report
from submit.queue_view import JSON_KEYS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _names(listed: str) -> list[str]:
    return [name.strip().strip('"') for name in listed.split(",")]


def test_dlqueue_json_keys_are_those_the_doc_lists() -> None:
    doc = _flat((DOCS / "dlqueue.md").read_text())
    listed = re.search(r"`--json` objects have exactly the keys `([^`]*)`", doc)
    assert listed is not None
    assert _names(listed.group(1)) == list(JSON_KEYS)


def test_dlqueue_forecast_object_keys_are_those_the_doc_lists() -> None:
    doc = _flat((DOCS / "dlqueue.md").read_text())
    listed = re.search(r"`forecast` is `null` without a fresh forecast of the job, else "
                       r"`\{([^}]*)\}`", doc)
    assert listed is not None
    forecast = {"made_at": 100.0, "stale_after_s": 900.0, "horizon_s": 86400.0, "draws": 3,
                "jobs": {"7": {"start": [200.0, 300.0, 400.0], "raw_start": [250.0] * 3,
                               "calibrated": 40, "finish": [500.0] * 3,
                               "preempt_chance": 0.0, "ahead": 0, "first_ahead": []}}}
    field = json_field(forecast, 7, 150.0)
    assert field is not None
    assert sorted(_names(listed.group(1))) == sorted(field)


def test_history_check_forecasts_json_keys_are_those_the_doc_lists() -> None:
    doc = _flat((DOCS / "forecasts.md").read_text())
    listed = re.search(r'`--json` prints `\{"forecasts": \{([^`]*), "by_wait": \[\.\.\.\]\}\}`',
                       doc)
    assert listed is not None
    printed = report([], moments=1, draws=1)["forecasts"]
    assert _names(listed.group(1)) + ["by_wait"] == list(printed)
