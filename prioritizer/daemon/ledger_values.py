"""What each cell of the ledger may hold, checked once when a ledger is opened.

:func:`prioritizer.daemon.ledger.open_read_only` asks :func:`first_bad_value` of every ledger it
opens, so ``dlprio status``/``explain``, ``dlprio history export|check --ledger`` and the
writer's check before ``dlprio run``/``once`` lock and migrate a file all refuse a value that
was hand-edited into one of the wrong type or out of range, with one line naming the file, the
table, the row, the column and the way out (:class:`~prioritizer.daemon.ledger.LedgerDamaged`,
exit 2), before any of them computes with it. SQLite stores any value in any column
(https://sqlite.org/datatype3.html, "type affinity"), so the schema alone does not keep a text
out of ``runs.gpus``; NaN is stored as NULL. Each table is checked by one SQL query over all its
rows; :data:`META` holds the rules of the ``meta`` values the commands read (their writers:
``ledger.py``, ``loop.py``, ``auto_tune.py``, ``tenants_view.py``). The daemon's own writes
keep to these rules; a value edited while ``dlprio run`` runs is found by the next reading
command or the daemon's next start. Times are epoch seconds, service GPU·seconds (the ledger's
units).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slurm_plugin.common.cli import visible

#: The largest epoch time a cell may hold: 9999-12-31 00:00 UTC, the last day Python's
#: ``datetime`` and ``time.strftime`` can show in every time zone (``dlprio explain`` shows
#: times in local time).
MAX_EPOCH_S = 253_402_214_400
#: The most GPUs a job or run may hold: Slurm counts GRES in 32-bit fields (``uint32_t``).
MAX_GPUS = 2**32 - 1
_NUMBER = "typeof({c}) IN ('integer', 'real')"


@dataclass(frozen=True)
class Rule:
    """What a value may be: ``words`` for the message, ``sql`` an SQL condition on ``{c}`` that
    is never NULL (``typeof`` first), ``optional``: NULL too."""

    words: str
    sql: str
    optional: bool = False

    def condition(self, column: str) -> str:
        """The SQL condition on ``column``: a column name of :data:`TABLES`, or a bound
        parameter such as ``:v``."""
        ok = self.sql.format(c=column)
        return f"(typeof({column}) = 'null' OR ({ok}))" if self.optional else f"({ok})"

    def or_null(self) -> Rule:
        return Rule(self.words + " or NULL", self.sql, optional=True)


EPOCH = Rule(f"an epoch time in seconds from 0 to {MAX_EPOCH_S}",
             f"{_NUMBER} AND {{c}} BETWEEN 0 AND {MAX_EPOCH_S}")
TIME = Rule(f"a time in seconds from -{MAX_EPOCH_S} to {MAX_EPOCH_S}",
            f"{_NUMBER} AND {{c}} BETWEEN -{MAX_EPOCH_S} AND {MAX_EPOCH_S}")
COUNT = Rule("a whole number >= 0", "typeof({c}) = 'integer' AND {c} >= 0")
GPUS = Rule(f"a GPU count from 0 to {MAX_GPUS}", f"{_NUMBER} AND {{c}} BETWEEN 0 AND {MAX_GPUS}")
SECONDS = Rule(f"a number of seconds from 0 to {MAX_EPOCH_S}",
               f"{_NUMBER} AND {{c}} BETWEEN 0 AND {MAX_EPOCH_S}")
#: The most GPU·s a job can attain: :data:`MAX_GPUS` for :data:`MAX_EPOCH_S` seconds.
GPU_S = Rule(f"GPU·s from 0 to {MAX_GPUS * MAX_EPOCH_S:.4g}",
             f"{_NUMBER} AND {{c}} BETWEEN 0 AND {MAX_GPUS * MAX_EPOCH_S}")
TEXT = Rule("text", "typeof({c}) = 'text'")
COMPONENTS = Rule("a whole number >= 1", "typeof({c}) = 'integer' AND {c} >= 1")
FLAG = Rule("0 or 1", "typeof({c}) = 'integer' AND {c} IN (0, 1)")

#: Per table: its key columns (named in the message) and the rule of each column the code
#: reads. A column an older ledger lacks is not checked (``PRAGMA table_info``).
TABLES: dict[str, tuple[tuple[str, ...], dict[str, Rule]]] = {
    "jobs": (("job_id",), {
        "job_id": COUNT, "user": TEXT, "account": TEXT, "partition": TEXT, "state": TEXT,
        "gpus": GPUS, "submit_time": EPOCH.or_null(), "restart_count": COUNT,
        "queue": COUNT.or_null(), "queue_entry_time": EPOCH.or_null(),
        "service_base_gpu_s": GPU_S, "promotions": COUNT, "preemptions": COUNT,
        "reason": TEXT, "reason_time": EPOCH.or_null(), "applied": TEXT.or_null(),
        "last_seen": EPOCH.or_null(), "ended_at": EPOCH.or_null(), "refusals": COUNT,
        "retry_at": EPOCH.or_null(), "refused": TEXT.or_null(),
        "components": COMPONENTS.or_null(), "held": TEXT.or_null(),
        "held_seen": EPOCH.or_null(), "array_record": FLAG}),
    "runs": (("job_id", "start"), {
        "job_id": COUNT, "start": EPOCH, "end_time": EPOCH.or_null(), "gpus": GPUS,
        "last_seen": EPOCH, "end_source": TEXT.or_null(), "suspended_s": SECONDS,
        "suspended_at": EPOCH.or_null(), "stopped_s": SECONDS}),
    "intents": (("id",), {
        "id": COUNT, "job_id": COUNT, "waiter": COUNT.or_null(), "created": EPOCH,
        "signal": TEXT.or_null(), "grace_s": SECONDS, "restart_count": COUNT,
        "signal_at": EPOCH.or_null(), "deadline": EPOCH.or_null(),
        "requeue_at": EPOCH.or_null(), "done_at": EPOCH.or_null(),
        "outcome": TEXT.or_null(), "rule": TEXT.or_null()}),
}


def _number(value: object) -> bool:
    """A finite JSON number (JSON's ``NaN`` and ``Infinity`` are not)."""
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _tenant_rows(value: Any) -> str | None:
    """``tenant_rows``: ``[[tenant, guaranteed, used, borrowed, waiting, fair_share], ...]``."""
    if not isinstance(value, list):
        return "not a list"
    for i, row in enumerate(value):
        if not (isinstance(row, list) and len(row) == 6 and isinstance(row[0], str)
                and all(map(_number, row[1:]))):
            return (f"item {i} is not [tenant, guaranteed, used, borrowed, waiting, "
                    "fair_share] (a text and five finite numbers)")
    return None


def _tenant_why(value: Any) -> str | None:
    """``tenant_why``: per job id ``["preempts"|"victim", text]`` or ``[rule, who, have, n,
    limit]`` (``prioritizer.policy.tenants.reason_text``)."""
    if not isinstance(value, dict):
        return "not an object"
    for job, why in value.items():
        if not isinstance(why, list):
            return f"job {visible(job)} is not a list"
        if len(why) == 2 and why[0] in ("preempts", "victim"):
            continue
        if not (len(why) == 5 and isinstance(why[0], str) and _number(why[2])
                and _number(why[4])):
            return f"job {visible(job)} is not [rule, who, held GPUs, GPUs, limit]"
    return None


def _tenant_usage(value: Any) -> str | None:
    """``tenant_usage``: ``{"at": epoch s, "usage": {tenant: [GPU·s, CPU·s, MiB·s]}}``."""
    if not (isinstance(value, dict) and _number(value.get("at"))
            and isinstance(value.get("usage"), dict)):
        return 'not {"at": epoch s, "usage": {tenant: [GPU·s, CPU·s, MiB·s]}}'
    for tenant, use in value["usage"].items():
        if not (isinstance(use, list) and len(use) == 3 and all(map(_number, use))):
            return f"tenant {visible(tenant)} is not [GPU·s, CPU·s, MiB·s]"
    return None


def _auto_tune_last(value: Any) -> str | None:
    """``auto_tune_last``: ``{"at": epoch s, "outcome": text, "reason": text}``."""
    if not (isinstance(value, dict) and _number(value.get("at"))
            and 0 <= value["at"] <= MAX_EPOCH_S and isinstance(value.get("outcome"), str)
            and isinstance(value.get("reason"), str)):
        return f'not {{"at": epoch s from 0 to {MAX_EPOCH_S}, "outcome": text, "reason": text}}'
    return None


#: The ``meta`` values the commands read: a number (``repr`` of a float, ``str`` of an int,
#: read by the parser given) with its rule, or JSON with a check of its shape. An empty value
#: reads as absent, as the readers take it.
META: dict[str, tuple[Callable[[str], object], Rule] | Callable[[Any], str | None]] = {
    "observed_at": (float, EPOCH), "pruned_at": (float, EPOCH), "order_ref": (float, TIME),
    "cycle": (int, COUNT), "order_backlog": (int, COUNT),
    "auto_tune_switches": (int, COUNT), "auto_tune_started_at": (float, EPOCH),
    "tenant_rows": _tenant_rows, "tenant_why": _tenant_why, "tenant_usage": _tenant_usage,
    "auto_tune_last": _auto_tune_last,
}

#: The way out, after the cell's description.
WAY_OUT = ("set that value right, restore the ledger from a backup, or move it away to start a "
           "new one (the attained service it holds is then lost)")


def _shown(value: object) -> str:
    """``repr`` of a cell, cut to 40 characters."""
    text = repr(value)
    return visible(text if len(text) <= 40 else text[:37] + "...")


def first_bad_value(conn: sqlite3.Connection) -> str | None:
    """The first cell of the ledger ``conn`` that breaks its rule in words (table, row key,
    column, value and what it should be), or None when every column of :data:`TABLES` and
    every value of :data:`META` holds what its rule says. Reads only; one query per table (a
    full scan: about 30 ms for 10,000 jobs with 20,000 runs)."""
    have_tables = {name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table'")}
    for table, (keys, rules) in TABLES.items():
        if table not in have_tables:
            continue
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        checked = [c for c in rules if c in have]
        flags = ", ".join(f"{rules[c].condition(c)}" for c in checked)
        row = conn.execute(
            f"SELECT {', '.join(keys)}, {', '.join(checked)}, {flags} FROM {table} WHERE NOT "
            f"({' AND '.join(rules[c].condition(c) for c in checked)}) LIMIT 1").fetchone()
        if row is None:
            continue
        values = tuple(row)
        key = " ".join(f"{k}={_shown(v)}" for k, v in zip(keys, values))
        cells = dict(zip(checked, values[len(keys):]))
        column = next(c for c, ok in zip(checked, values[len(keys) + len(checked):]) if not ok)
        return (f"{table} row {key}: {column} is {_shown(cells[column])}, not "
                f"{rules[column].words}")
    if "meta" not in have_tables:
        return None
    for key, value in conn.execute(
            f"SELECT key, value FROM meta WHERE key IN ({', '.join('?' * len(META))}) "
            "ORDER BY key", tuple(META)):
        problem = _meta_problem(conn, META[key], value)
        if problem is not None:
            return f"meta key {key}: value {_shown(value)} is {problem}"
    return None


def _meta_problem(conn: sqlite3.Connection,
                  check: tuple[Callable[[str], object], Rule] | Callable[[Any], str | None],
                  value: object) -> str | None:
    """Why a ``meta`` value breaks ``check`` (None: it holds, or it is empty)."""
    if value == "":
        return None
    if not isinstance(value, str):
        return "not text"
    if isinstance(check, tuple):
        parse, rule = check
        try:
            number = parse(value)
            ok = conn.execute(f"SELECT {rule.condition(':v')}", {"v": number}).fetchone()[0]
        except (ValueError, OverflowError):
            ok = False
        return None if ok else f"not {rule.words}"
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return "not JSON"
    problem = check(parsed)
    return None if problem is None else f"JSON but {problem}"
