"""Numeric option values of ``dlprio simulate``, ``history check`` and ``tune``: finite,
bounded, plain ASCII.

Python's ``int``/``float`` accept more than a user means: ``1_0`` is 10, ``nan``/``inf`` and
``1e308`` pass, ``99999999999999999999`` nodes overflow later (the replay builds a list per
node). Each parser here takes only plain decimal forms (``12``, ``0.5``, ``1e3``, ``-3``), checks
the bounds and raises :class:`ValueError` with a message naming the bound; the command wraps it
as a one-line exit-2 error naming the option (argparse ``type=`` via :func:`arg_type`, or
:class:`prioritizer.command.CliError`).

Bounds (generous for any real cluster, small enough that no figure overflows or floods):

- ``MAX_NODES`` = 100,000 nodes, ``MAX_GPUS_PER_NODE`` = 1,024 (the replay holds one entry per
  node, and node × GPU figures stay exact);
- ``MAX_SECONDS`` = 10⁹ s (about 31 years) for any duration or latency option;
- ``MAX_COUNT`` = 10⁹ for other counts and ratios;
- the cells of every trace a command reads (``dlprio simulate``/``tune``'s formats and the
  history export ``history check`` reads): ``MAX_TRACE_GPUS`` GPUs per job (the largest
  cluster), ``MAX_DURATION_S`` seconds of run time (``MAX_SECONDS``) and ``MAX_TIME_S`` for a
  submit, eligible or end time (10¹¹: a history's times are epoch seconds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import overload

from prioritizer.command import CliError
from prioritizer.csvcells import FLOAT_TEXT as FLOAT_TEXT

MAX_NODES = 100_000
MAX_GPUS_PER_NODE = 1_024
MAX_SECONDS = 1e9
MAX_COUNT = 10**9
MAX_TRACE_GPUS = MAX_NODES * MAX_GPUS_PER_NODE
MAX_DURATION_S = MAX_SECONDS
MAX_TIME_S = 100 * MAX_SECONDS

_INT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT = FLOAT_TEXT


def parse_int(value: str, low: int, high: int) -> int:
    """``value`` as an integer in ``[low, high]``. Raises ValueError (the message: the rule)."""
    text = value.strip()
    if not _INT.match(text):
        raise ValueError(f"expected a whole number from {low} to {high:,}, got {value!r}")
    number = int(text)
    if not low <= number <= high:
        raise ValueError(f"expected a whole number from {low} to {high:,}, got {value}")
    return number


def parse_float(value: str, low: float, high: float, *, low_open: bool = False) -> float:
    """``value`` as a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``).
    Raises ValueError (the message: the rule)."""
    text = value.strip()
    rule = f"expected a number {'>' if low_open else '>='} {low:g} and <= {high:g}"
    if not _FLOAT.match(text):
        raise ValueError(f"{rule}, got {value!r}")
    number = float(text)
    if not math.isfinite(number) or number < low or (low_open and number == low) or number > high:
        raise ValueError(f"{rule}, got {value}")
    return number


def looks_numeric(value: str) -> bool:
    """True when ``value`` is meant as a number (starts with a sign, digit or dot, or is a
    float word such as ``nan``/``inf``) rather than a date or keyword."""
    text = value.strip().lower()
    return bool(re.match(r"[+\-.0-9]", text)) and not re.match(r"[0-9]{4}-[0-9]", text) \
        or text.lstrip("+-") in ("nan", "inf", "infinity")


def arg_type(option: str, parse: Callable[..., int | float], *bounds: float,
             **kw: bool) -> Callable[[str], int | float]:
    """An argparse ``type=`` for ``parse(value, *bounds, **kw)``. A bad value raises
    :class:`~prioritizer.command.CliError` ``OPTION: expected ...`` (exit 2, one line: not
    argparse's usage text); argparse lets that exception through ``parse_args``."""

    def convert(value: str) -> int | float:
        try:
            return parse(value, *bounds, **kw)
        except ValueError as exc:
            raise CliError(f"{option}: {exc}") from None

    convert.__name__ = "number"
    return convert


@overload
def cluster_size(option: str, value: str, high: int) -> int: ...
@overload
def cluster_size(option: str, value: None, high: int) -> None: ...
def cluster_size(option: str, value: str | None, high: int) -> int | None:
    """``--nodes``/``--gpus-per-node`` (kept as text by argparse): None when absent, else a
    whole number <= ``high`` (0 or less is left to the caller's "must be > 0").
    Raises CliError (exit 2) naming the option."""
    if value is None:
        return None
    try:
        return parse_int(value, -MAX_COUNT, high)
    except ValueError:
        raise CliError(f"{option}: expected a whole number from 1 to {high:,}, "
                       f"got {value!r}") from None


def override(option: str, low: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type=`` for a policy override (``dlprio simulate --starve-knob``): any
    finite number of magnitude at most :data:`MAX_SECONDS` passes, so that a value below
    ``low`` is named by the policy's check with the other problems of the section; text that
    is no number, or out of that magnitude, is refused with the setting's own range (``>=
    low``, ``> low`` with ``low_open``, ``<= MAX_SECONDS``): CliError, exit 2."""
    strict = arg_type(option, parse_float, low, MAX_SECONDS, low_open=low_open)

    def convert(value: str) -> float:
        try:
            return parse_float(value, -MAX_SECONDS, MAX_SECONDS)
        except ValueError:   # not within the wider bounds, so not within the setting's
            return float(strict(value))

    convert.__name__ = "number"
    return convert


def count(option: str, high: int = MAX_COUNT) -> Callable[[str], int | float]:
    return arg_type(option, parse_int, 1, high)


def ratio(option: str) -> Callable[[str], int | float]:
    return arg_type(option, parse_float, 0.0, 1e6, low_open=True)


def trace_time(option: str) -> Callable[[str], int | float]:
    """Seconds of trace time (a history trace's are epoch seconds)."""
    return arg_type(option, parse_float, 0.0, MAX_TIME_S)
