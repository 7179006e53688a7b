"""The one wording of what a user's file holds, for every error message that echoes it: a value
bounded and escaped (:func:`shown`), the closest valid name (:func:`close_name`), and the fix
for a text that YAML (1.1, as PyYAML reads it) or JSON did not read as text
(:func:`not_text_message`). dlprio's config checks (:mod:`prioritizer.policy.validation`) and
dlsubmit's spec checks (:mod:`submit.validation`) word msgspec's refusals with these, and the
YAML reader (:mod:`slurm_plugin.common.yamlfile`) names repeated keys with :func:`shown`.

Pure (no I/O, standard library only): the policy package imports it, the one module of
``slurm_plugin`` it may import (pyproject.toml's contracts).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

#: The longest echo of a value (``repr``, characters) before :func:`shown` cuts it.
MAX_SHOWN = 80

def shown(value: Any) -> str:
    """``value`` as a message echoes it, ``(got VALUE)``: its ``repr`` (a string quoted, its
    control and invisible characters escaped: ``'a\\nb'``, ``'\\x1b[31m'``), cut past
    :data:`MAX_SHOWN` characters to its start and what was cut: ``'xxx… (200,000
    characters)``, ``[5.0, 5.0,… (30,000 items)``. A whole number past 60 digits is ``a whole
    number of N digits`` (Python refuses to write one past 4,300 digits: ``repr`` raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 199:
        digits = f"{len(str(abs(value)))}" if value.bit_length() < 14_000 else "over 4,000"
        return f"a {'negative ' if value < 0 else ''}whole number of {digits} digits"
    try:
        text = repr(value)
    except ValueError:   # a container holding such a number
        return f"a {type(value).__name__} holding a whole number of over 4,000 digits"
    if len(text) <= MAX_SHOWN:
        return text
    if isinstance(value, str | bytes):
        size = f"{len(value):,} characters"
    elif isinstance(value, list | tuple | dict | set):
        size = f"{len(value):,} item{'' if len(value) == 1 else 's'}"
    else:
        size = f"{len(text):,} characters"
    return f"{text[:MAX_SHOWN - 20]}… ({size})"


def close_name(key: str, names: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The name of ``names`` closest to ``key`` (``difflib.get_close_matches``, ``cutoff`` its
    least ratio), or None when none is close; a key far longer than any name is close to none
    (and difflib's cost grows with it)."""
    close = (difflib.get_close_matches(key, sorted(names), n=1, cutoff=cutoff)
             if len(key) <= MAX_SHOWN else [])
    return close[0] if close else None


#: What YAML 1.1 (PyYAML) makes of an unquoted scalar that is not text: ``no``/``off``/
#: ``false`` and ``yes``/``on``/``true`` (lower, Title or UPPER case) are booleans,
#: ``123``/``0x1f``/``1_000``/``1.5`` numbers, an empty value/``~``/``null`` null (the YAML 1.1
#: type repository, tag:yaml.org,2002:bool/int/float/null, as PyYAML's resolver implements it).
_YAML_TYPES = (bool, int, float, type(None))


def read_as_not_text(value: Any) -> bool:
    """Whether ``value`` is what YAML made of an unquoted scalar that is not a string."""
    return type(value) in _YAML_TYPES


def yaml_reading(value: Any) -> str:
    """What an unquoted scalar became, for an echo: ``False, YAML's reading of an unquoted
    no/off/false``, ``None, ... an empty value, ~ or null``, ``7, a number to YAML``."""
    if isinstance(value, bool):
        return f"{value}, YAML's reading of an unquoted {'yes/on/true' if value else 'no/off/false'}"
    if value is None:
        return "None, YAML's reading of an empty value, ~ or null"
    return f"{shown(value)}, a number to YAML"


def quoted(text: str) -> str:
    """``text`` as a YAML quoted scalar that reads back as ``text``: in double quotes, or in
    single quotes (``'`` doubled) when it holds ``"`` or ``\\``."""
    if '"' in text or "\\" in text:
        return "'" + text.replace("'", "''") + "'"
    return f'"{text}"'


def _usable(as_written: str | None) -> bool:
    """Whether a value's source text can be shown in a hint: one short line."""
    return as_written is not None and 0 < len(as_written) <= MAX_SHOWN and "\n" not in as_written


def not_text_message(value: Any, key: str, optional: bool = True, syntax: str = "YAML",
                     as_written: str | None = None) -> str:
    """The fix for a name YAML did not read as text (``lease_name: no`` is the boolean false,
    ``lease_name: 123`` a number, ``- echo step: 1`` a mapping; quoted, each is the text):
    ``key`` is the field name, or ``NAME: [`` for an item of the list ``NAME``; null is told to
    be written, or left out where the key is ``optional`` (it has a default). ``as_written``:
    the value's text in the file (the YAML node's source, so ``0755`` is shown as ``"0755"``, not
    as the 493 YAML 1.1 read); without it the hint writes the value back (``on`` as ``"yes"``).
    With ``syntax="JSON"`` (a v1 JSON job spec) the value is named as JSON wrote it: ``123``,
    ``true``, ``null``, an object, an array."""
    if isinstance(value, dict | list):
        if syntax == "JSON":
            kind = "an array" if isinstance(value, list) else "an object"
            return (f"expected a string, but the JSON value is {kind}; write the text in quotes "
                    f"(got {shown(value)})")
        kind = ("a list (an unquoted '- ' or '[' starts one)" if isinstance(value, list)
                else "a mapping (an unquoted ': ' makes one)")
        example = f", e.g. {_example(key, as_written or '')}" if _usable(as_written) else ""
        return (f"expected a string, but YAML read the value as {kind}; quote the whole text"
                f"{example} (got {shown(value)})")
    if value is None:
        kind, written = "null", "null"
    elif isinstance(value, bool):
        written = str(value).lower()
        kind = f"the boolean {written}"
    else:   # a number; repr of 5,000 digits raises
        short = isinstance(value, float) or value.bit_length() < 64
        kind, written = "a number", repr(value) if short else "123"
    if syntax == "JSON":
        leave = ", or leave the key out for its default" if optional and value is None else ""
        return (f"expected a string, but the JSON value is {kind}; write the text in quotes, "
                f"e.g. \"{written}\"{leave} (got {shown(value)})")
    if value is None:
        return ("expected a string, but YAML read the value as null (an empty value, ~ or "
                "null); write the text in quotes" +
                (", or leave the key out for its default" if optional else "") + " (got None)")
    if _usable(as_written):
        text = as_written or ""
    else:
        text = ("yes" if value else "no") if isinstance(value, bool) else written
    return (f"expected a string, but YAML read the value as {kind}; quote it as written, "
            f"e.g. {_example(key, text)} (got {shown(value)})")


def _example(key: str, text: str) -> str:
    q = quoted(text)
    return f"{key}{q}]" if key.endswith("[") else f"{key}: {q}" if key else q


def utf8_text(text: str) -> bool:
    """Whether ``text`` is UTF-8 text: no lone surrogate, which is how Python holds a byte of a
    file name, an argument or an environment value that did not decode (PEP 383)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
