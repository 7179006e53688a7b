"""Slurm hostlist expressions (``node[1-3,5]``), through the python-hostlist library."""

from __future__ import annotations

import hostlist as _hostlist


def expand(expr: str, limit: int | None = None, duplicates: bool = False) -> list[str]:
    """``node[1-2]`` → ``["node1", "node2"]``; ``""`` or ``"(null)"`` → ``[]``. A name given
    twice is kept once, as Slurm does for node lists, unless ``duplicates`` (gres.conf's File=
    keeps both, and slurmd stops on them).

    With ``limit``, an expression of more than ``limit`` names is refused once its parts (split
    at the commas outside brackets, each at most python-hostlist's ``MAX_SIZE``) add up to more,
    so ``n[0-99999],m[0-99999],...`` never builds the whole list.

    Raises ValueError for a malformed expression, or one of more than ``limit`` names.
    """
    if not expr or expr in ("(null)", "None"):
        return []
    try:
        if limit is not None:
            total = 0
            for part in _parts(expr):
                total += len(_hostlist.expand_hostlist(part, allow_duplicates=duplicates))
                if total > limit:
                    raise ValueError(f"bad hostlist {_short(expr)!r}: more than {limit} names")
        return list(_hostlist.expand_hostlist(expr, allow_duplicates=duplicates))
    except _hostlist.BadHostlist as exc:
        raise ValueError(f"bad hostlist {_short(expr)!r}: {exc}") from exc
    except RecursionError:   # python-hostlist recurses once per bracket of a name
        raise ValueError(f"bad hostlist {_short(expr)!r}: too many brackets in one name") from None


def _parts(expr: str) -> list[str]:
    """``a[1,2],b`` → ``["a[1,2]", "b"]``: split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p for p in parts if p]


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[:width] + "..."


def collect(names: list[str]) -> str:
    """``["node1", "node2"]`` → ``node[1-2]``."""
    return str(_hostlist.collect_hostlist(names)) if names else ""
