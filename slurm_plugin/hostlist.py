"""Slurm hostlist expressions (``node[1-3,5]``), through the python-hostlist library."""

from __future__ import annotations

import hostlist as _hostlist


def expand(expr: str) -> list[str]:
    """``node[1-2]`` → ``["node1", "node2"]``; ``""`` or ``"(null)"`` → ``[]``.

    Raises ValueError for a malformed expression.
    """
    if not expr or expr in ("(null)", "None"):
        return []
    try:
        return list(_hostlist.expand_hostlist(expr))
    except _hostlist.BadHostlist as exc:
        raise ValueError(f"bad hostlist {expr!r}: {exc}") from exc


def collect(names: list[str]) -> str:
    """``["node1", "node2"]`` → ``node[1-2]``."""
    return str(_hostlist.collect_hostlist(names)) if names else ""
