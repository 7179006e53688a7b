"""Template rendering for v2 specs: ``<% $parameters.x %>`` and friends, and ``--param`` overrides.

OpenPAI renders ``<% $ref %>`` references (a mustache dialect) at submit time
(microsoft/pai src/rest-server/src/middlewares/v2/protocol.js):
``$parameters.<name>`` is global, ``$data``/``$output``/``$script`` name the prerequisite a task
role selects (``$data.uri[0]``). Unknown references are left in place verbatim. ``$secrets`` is
never rendered into commands (the protocol keeps secrets out of anything users can read, and a
batch script is readable by anyone who can run ``scontrol show job -d``): a reference to a secret
stays as written and the caller gets a warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from submit.validation import SpecError

_REF_RE = re.compile(
    r"<%\s*\$([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_][A-Za-z0-9_-]*|\[\d+\])*)\s*%>"
)
_STEP_RE = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")
_PARAM_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
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


def render(text: str, scopes: Mapping[str, Any]) -> tuple[str, list[str]]:
    """Render every ``<% $scope.path %>`` of ``text`` found in ``scopes``.

    Args:
        text: a command (or any string).
        scopes: ``{"parameters": {...}, "data": {...}, ...}``; a ``secrets`` entry is ignored.
    Returns:
        ``(rendered text, names of $secrets references left in place)``.
    """
    secrets: list[str] = []

    def sub(m: re.Match[str]) -> str:
        scope, steps = m.group(1), m.group(2)
        if scope == "secrets":
            secrets.append(steps.lstrip("."))
            return m.group(0)
        if scope not in scopes:
            return m.group(0)
        value = _lookup(scopes[scope], steps)
        return m.group(0) if value is _MISSING else _text(value)

    return _REF_RE.sub(sub, text), secrets


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` from ``--param`` into a dict; raises :class:`SpecError` per bad item."""
    out: dict[str, str] = {}
    problems = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not _PARAM_NAME_RE.match(name):
            problems.append(f"--param {item!r}: expected NAME=VALUE with NAME like batch_size")
        else:
            out[name] = value
    if problems:
        raise SpecError(problems)
    return out
