"""The error every dlsubmit stage raises for bad input, and the field-path spelling it uses.

Kept free of the spec models (and msgspec) so that the CLI, the renderer and the options load without them.
"""

from __future__ import annotations

import json
import re
from typing import Any


class SpecError(Exception):
    """A spec (or its file) is wrong. ``problems`` holds one line per problem, each naming the
    field path (or file:line:column) and what is expected. The CLI exits 2 on it."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def field_path(*parts: Any) -> str:
    """A spec field path: plain keys joined by ``.``, list indices as ``[i]``, and keys with
    other characters as ``["key"]`` (JSON-quoted), e.g. ``taskRoles["ps.server"].commands[0]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += " (key)"
        elif _PLAIN_KEY.match(str(part)):
            out += ("." if out else "") + str(part)
        else:
            out += "[" + json.dumps(str(part), ensure_ascii=False) + "]"
    return out or "(top level)"
