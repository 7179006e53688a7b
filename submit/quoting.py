"""Quoting user strings for each layer of a batch script: ``#SBATCH`` lines and bash.

* bash: :func:`bash_word` single-quotes everything (``'`` becomes ``'\\''``); inside single
  quotes bash treats every character literally, newlines included (bash(1), QUOTING).
* ``#SBATCH`` lines: sbatch's own parser (src/sbatch/opt.c ``_get_argument``) ends the value at
  an unquoted space or ``#``, drops quotes, treats ``\\`` as an escape even inside quotes, and
  treats any directive line containing ``hetjob``/``packjob`` (any case) as a component
  separator. A blank ends the value even after a backslash (the blank test comes first), so
  :func:`sbatch_word` double-quotes any value outside ``[A-Za-z0-9_.,:;/=+@%-]``, escapes ``\\``
  and ``"`` inside, and escapes the ``j`` of ``hetjob``/``packjob``. A newline cannot be carried
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
    """``text`` quoted for an ``#SBATCH --opt=<value>`` line.

    Plain values (only ``[A-Za-z0-9_.,:;/=+@%-]``) stay as they are; anything else is put in
    double quotes with ``\\`` and ``"`` backslash-escaped (sbatch ends an argument at a blank
    even after a backslash, so only quotes can carry blanks). ``text`` must hold no control
    characters (callers sanitise; see :func:`slurm_name`); raises ``ValueError`` otherwise.
    """
    if _CONTROL.search(text):
        raise ValueError(f"control character in #SBATCH value {text!r}")
    body = _SEPARATOR_WORD.sub(lambda m: "\\" + m.group(0), text)
    if all(_SAFE.match(ch) for ch in text) and body == text:
        return text
    body = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + _SEPARATOR_WORD.sub(lambda m: "\\" + m.group(0), body) + '"'


def slurm_name(name: str) -> str:
    """The job name Slurm gets: control characters (newline, tab, ...) become ``_``.
    Everything else, unicode included, is kept."""
    return _CONTROL.sub("_", name)
