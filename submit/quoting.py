"""Quoting user strings for each layer of a batch script: ``#SBATCH`` lines and bash.

* bash: :func:`bash_word` single-quotes everything (``'`` becomes ``'\\''``); inside single
  quotes bash treats every character literally, newlines included (bash(1), QUOTING).
* ``#SBATCH`` lines: sbatch's own parser (src/sbatch/opt.c ``_get_argument``) ends the value at
  an unquoted space or ``#``, drops quotes, treats ``\\`` as an escape even inside quotes, and
  treats any directive line containing ``hetjob``/``packjob`` (any case) as a component
  separator. :func:`sbatch_word` therefore backslash-escapes every ASCII character outside
  ``[A-Za-z0-9_.,:;/=+@%-]`` and the ``j`` of ``hetjob``/``packjob``. A newline cannot be carried
  in a directive at all; :func:`slurm_name` is the documented sanitised job name.
* srun argv: values reach ``srun`` as separate words of a bash array, never re-parsed.
"""

from __future__ import annotations

import re

_SAFE = re.compile(r"[A-Za-z0-9_.,:;/=+@%-]")
_SEPARATOR_WORD = re.compile(r"(?i)(?<=het)j|(?<=pack)j")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def bash_word(text: str) -> str:
    """``text`` as one bash word that expands to exactly ``text`` (single quotes)."""
    return "'" + text.replace("'", "'\\''") + "'"


def sbatch_word(text: str) -> str:
    """``text`` escaped for an ``#SBATCH --opt=<value>`` line. ``text`` must hold no control
    characters (callers sanitise; see :func:`slurm_name`). Raises ``ValueError`` otherwise."""
    if _CONTROL.search(text):
        raise ValueError(f"control character in #SBATCH value {text!r}")
    out = []
    for i, ch in enumerate(text):
        if ord(ch) < 128 and (not _SAFE.match(ch) or _SEPARATOR_WORD.match(text, i)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def slurm_name(name: str) -> str:
    """The job name Slurm gets: control characters (newline, tab, ...) become ``_``.
    Everything else, unicode included, is kept."""
    return _CONTROL.sub("_", name)
