"""The times the ``history``, ``tune`` and ``simulate`` options take: the forms we accept, turned
into the one form we hand to ``sacct --starttime/--endtime`` (``history export
--since``/``--until``) or into epoch seconds (:func:`epoch`: a TIME given to ``tune
--validate-from``/``--since``, ``history check --since`` on a history trace,
:func:`prioritizer.history.trace.trace_point`, or ``simulate --since`` on one).

Accepted (the clock is the caller's ``now``, epoch seconds; dates are local time, as sacct(1)
reads them):

- ``now``; ``today`` (local midnight that began today);
- ``now-N[UNIT]`` / ``now+N[UNIT]``: N a whole number, UNIT one of ``seconds``, ``minutes``,
  ``hours``, ``days``, ``weeks`` (singular or plural; none = seconds), e.g. ``now-30days``;
- ``YYYY-MM-DD`` (midnight), ``YYYY-MM-DDTHH:MM`` or ``YYYY-MM-DDTHH:MM:SS``.

Anything else (sacct's other forms such as ``MMDDYY`` or ``HH:MM`` included) is refused, so no
value reaches sacct that it would read differently or not at all; sacct gets
``YYYY-MM-DDTHH:MM:SS``. Pure: no Slurm, the clock is a parameter.
"""

from __future__ import annotations

import datetime as dt
import re

UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
FORMS = "now, today, now-N or now+N [seconds|minutes|hours|days|weeks] (no unit: seconds), YYYY-MM-DD[THH:MM[:SS]]"
_RELATIVE = re.compile(r"now([+-])([0-9]{1,9})(second|minute|hour|day|week)?s?\Z")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}(:[0-9]{2})?)?\Z")
SACCT_FORMAT = "%Y-%m-%dT%H:%M:%S"


class WindowError(ValueError):
    """A ``--since``/``--until`` value outside :data:`FORMS`, or a window that ends before it
    starts; the message names the option."""


def resolve(option: str, value: str, now: float) -> dt.datetime:
    """``value`` of ``option`` as a local naive datetime (whole seconds).

    Raises:
        WindowError: ``OPTION: expected one of FORMS, got 'VALUE'``.
    """
    clock = dt.datetime.fromtimestamp(int(now))
    text = value   # no strip: a newline or space is refused, not silently dropped
    try:
        if text == "now":
            return clock
        if text == "today":
            return clock.replace(hour=0, minute=0, second=0)
        rel = _RELATIVE.match(text)
        if rel:
            seconds = int(rel.group(2)) * UNITS[rel.group(3) or "second"]
            return clock + dt.timedelta(seconds=seconds if rel.group(1) == "+" else -seconds)
        if _DATE.match(text):
            return dt.datetime.fromisoformat(text)
    except (ValueError, OverflowError):
        pass
    raise WindowError(f"{option}: expected {FORMS}, got {value!r}")


def sacct_window(since: str, until: str, now: float) -> tuple[str, str]:
    """``(start, end)`` for sacct as ``YYYY-MM-DDTHH:MM:SS``.

    Raises:
        WindowError: a bad form, or ``--since`` after ``--until``.
    """
    start, end = resolve("--since", since, now), resolve("--until", until, now)
    if start > end:
        raise WindowError(f"--since {since} ({start:{SACCT_FORMAT}}) is after --until {until} "
                          f"({end:{SACCT_FORMAT}}); give a start before the end")
    return f"{start:{SACCT_FORMAT}}", f"{end:{SACCT_FORMAT}}"


def epoch(option: str, value: str, now: float) -> float:
    """``value`` of ``option`` (:data:`FORMS`, local time) as epoch seconds.

    Raises:
        WindowError: as :func:`resolve`.
    """
    return resolve(option, value, now).timestamp()
