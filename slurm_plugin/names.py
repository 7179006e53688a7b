"""The one rule for a Slurm name the product passes on or writes: a partition, account, QOS or
GRES type (dlsubmit's options, site config and specs; dlgres's ``--type``, the Types it derives
from GPU names and the ``Type=`` values ``dlgres --check`` reads).

Letters, digits, ``_ . -``, not starting with ``-``: ``--partition=--`` or ``--gres=gpu:-x:1``
would reach Slurm as an option or a malformed GRES. It also keeps out what would break gres.conf
or ``Gres=`` (whitespace and ``=`` end a key=value token, ``,`` separates values, ``:``
separates name:type:count, ``#`` starts a comment, a newline starts a line) and shell syntax
(``$(...)``, quotes) that a name is pasted next to. Pure: runs no Slurm command.
"""

from __future__ import annotations

import re

SLURM_NAME_RE = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\Z")
"""A Slurm name (see the module doc): ``SLURM_NAME_RE.match(text)`` is None for anything else.
Anchored with ``\\Z``, not ``$``, which would also match before a final newline (``gpu\\n``)."""

SLURM_NAME_RULE = "must be a Slurm name (letters, digits, _ . -; not starting with -)"

SLURM_NAMES_RULE = ("must be a Slurm name or a comma-separated list of them (letters, digits, "
                    "_ . -; not starting with -)")
"""The rule for a list of names, ``gpu,debug`` (sbatch(1) ``--partition``: the job starts in
whichever of them can run it first)."""


def slurm_names(text: str) -> bool:
    """Whether ``text`` is one Slurm name or a comma-separated list of them (no empty item)."""
    return all(SLURM_NAME_RE.match(part) for part in text.split(","))
