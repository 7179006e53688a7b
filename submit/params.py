"""Template rendering for v2 specs: ``<% $parameters.x %>`` and friends, and ``--param`` overrides.

OpenPAI renders ``<% $ref %>`` references (a mustache dialect) at submit time
(microsoft/pai src/rest-server/src/middlewares/v2/protocol.js):
``$parameters.<name>`` is global, ``$data``/``$output``/``$script`` name the prerequisite a task
role selects (``$data.uri[0]``). A reference into one of those scopes that names nothing there
(``<% $parameters.nope %>``) is an error naming it; references to other scopes are left verbatim.
``$secrets`` is never rendered at submit time (Slurm keeps batch scripts in its state directory
and shows them to ``scontrol write batch_script``): each ``<% $secrets.name %>`` is written in the
canonical form :func:`secret_placeholder` and the task fills it in at run time from the user's
``--secrets`` file (submit/runtime.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from submit.errors import SpecError
from submit.validation import _IDENT_RE as _SECRET_NAME_RE   # a shell variable name

_REF_RE = re.compile(
    r"<%\s*\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])*)\s*%>"
)
_STEP_RE = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")
_PARAM_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
#: what a parameter name must be for ``<% $parameters.NAME %>`` to name it
PARAM_NAME_RULE = ("a parameter name is ASCII letters, digits, '_' and '-', starting with a "
                   "letter or '_' (<% $parameters.NAME %> could not name it): rename it")


def param_name_ok(name: object) -> bool:
    """Whether a reference ``<% $parameters.NAME %>`` can name the parameter ``name``."""
    return isinstance(name, str) and bool(_PARAM_NAME_RE.match(name))
_MISSING = object()


def _lookup(value: Any, steps: str) -> Any:
    for m in _STEP_RE.finditer(steps):
        key, index = m.group(1), m.group(2)
        if key is not None and isinstance(value, Mapping) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return _MISSING
    return value


def _text(value: Any) -> str:
    """How a YAML value prints in a command: JS-like (``true``, ``64``, JSON for containers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def secret_placeholder(name: str) -> str:
    """The one spelling of a secret reference the run time replaces: ``<% $secrets.NAME %>``."""
    return f"<% $secrets.{name} %>"


def render(text: str, scopes: Mapping[str, Any], where: str = "commands") -> tuple[str, list[str]]:
    """Render every ``<% $scope.path %>`` of ``text`` whose scope is in ``scopes``.

    Args:
        text: a command (or any string).
        scopes: ``{"parameters": {...}, "data": {...}, ...}``; a ``secrets`` entry is ignored.
        where: the field path for messages.
    Returns:
        ``(rendered text, names of the $secrets referenced)``; secret references are rewritten
        as :func:`secret_placeholder`.
    Raises:
        SpecError: a reference names nothing in its scope or its value holds a NUL character
            (one line per reference), or a secret reference is not ``$secrets.NAME`` with NAME a shell identifier.
    """
    secrets: list[str] = []
    problems: list[str] = []

    def sub(m: re.Match[str]) -> str:
        scope, steps = m.group(1), m.group(2)
        if scope == "secrets":
            name = steps[1:] if steps.startswith(".") else ""
            if not _SECRET_NAME_RE.match(name):
                problems.append(f"{where}: {m.group(0)}: a secret reference is "
                                "<% $secrets.NAME %> with NAME like api_token")
                return m.group(0)
            if name not in secrets:
                secrets.append(name)
            return secret_placeholder(name)
        if scope not in scopes:
            return m.group(0)
        value = _lookup(scopes[scope], steps)
        if value is _MISSING:
            known = ", ".join(sorted(scopes[scope])) if isinstance(scopes[scope], Mapping) else ""
            problems.append(f"{where}: {m.group(0)} names nothing: ${scope} has "
                            + (f"{known}" if known else "no entries")
                            + (" (declare it under parameters:; --param NAME=VALUE only "
                               "overrides a declared one)"
                               if scope == "parameters" else ""))
            return m.group(0)
        text = _text(value)
        if "\x00" in text:
            problems.append(f"{where}: {m.group(0)}: the value contains a NUL character, which no "
                            "shell command can hold; remove it")
            return m.group(0)
        return text

    out = _REF_RE.sub(sub, text)
    if problems:
        raise SpecError(problems)
    return out, secrets


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` from ``--param`` into a dict; raises :class:`SpecError` per bad item and
    per parameter given more than once (which value was meant is unknown, so none is taken)."""
    out: dict[str, str] = {}
    problems = []
    twice: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not _PARAM_NAME_RE.match(name):
            problems.append(f"--param {item!r}: expected NAME=VALUE with NAME like batch_size")
        elif name in out:
            twice.setdefault(name, f"--param {name}: given more than once; give each parameter once")
        else:
            out[name] = value
    problems += twice.values()
    if problems:
        raise SpecError(problems)
    return out
