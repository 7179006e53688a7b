"""The ``--secrets FILE`` of dlsubmit: checked at submit time, read by the job at run time.

OpenPAI fills ``<% $secrets.name %>`` from values kept out of the job's readable record. On
Slurm the batch script is that record (slurmctld keeps it in its state directory and
``scontrol write batch_script`` prints it), so dlsubmit writes only the file's *absolute path*
into the script; the batch shell reads the values when the job starts (submit/runtime.py) and
each task puts them into its command text in memory.

Format (one secret per line, no quoting rules): ``NAME=VALUE``, NAME a shell identifier, VALUE
everything after the first ``=`` taken literally; blank lines and lines starting with ``#`` are
skipped. The file must be a regular file of the submitting user with no group or other
permission bits (mode 0600 or stricter), and must be readable from the job's first node.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from submit.errors import SpecError

_LINE_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def check(path: str, needed: tuple[str, ...]) -> str:
    """Validate the secrets file for a job referencing ``needed``; return its absolute path.

    Raises :class:`SpecError` for a missing/unreadable file, group/other permission bits, a
    file owned by someone else, a malformed line or a value with a NUL byte (named by number,
    value never shown), or a
    needed name the file lacks. Values are read only to check the format; they are not kept."""
    p = Path(path).expanduser().absolute()
    from submit.files import MAX_SMALL_BYTES, read_limited

    raw, st = read_limited(p, "--secrets ", MAX_SMALL_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([f"--secrets {p}: cannot read: {exc}"]) from None
    problems = []
    if st.st_mode & 0o077:
        problems.append(f"--secrets {p}: mode {stat.S_IMODE(st.st_mode):04o} lets others read it; "
                        f"run chmod 600 {p}")
    if st.st_uid != os.getuid():
        problems.append(f"--secrets {p}: owned by uid {st.st_uid}, not you (uid {os.getuid()})")
    names = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE_RE.match(line)
        if not m:
            problems.append(f"--secrets {p}:{n}: expected NAME=VALUE with NAME like api_token")
        elif "\x00" in m.group(2):   # bash drops it: the command would get another value
            problems.append(f"--secrets {p}:{n}: the value of {m.group(1)} holds a NUL byte, "
                            "which no shell variable can hold; remove it")
        else:
            names.add(m.group(1))
    missing = [s for s in needed if s not in names]
    if missing:
        problems.append(f"--secrets {p}: no line for {', '.join(missing)} "
                        "(the spec's commands reference them)")
    if problems:
        raise SpecError(problems)
    return str(p)
