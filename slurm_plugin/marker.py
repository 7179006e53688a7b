"""The checkpoint contract marker: the one string dlsubmit, job_submit.lua, dlprio and dlqueue share.

A job declares that it traps a checkpoint signal by carrying, in its Slurm ``--comment``, the
marker ``dl:v1;signal=<SIG>;grace=<SECONDS>`` (docs/design.md, "dlsubmit mapping").

* ``signal``: a signal name without the ``SIG`` prefix, one of :data:`ALLOWED_SIGNALS`.
* ``grace``: whole seconds (1..86400) the job needs between the signal and the requeue.
* ``class`` (optional, after ``grace``): ``production`` (the default, never written) or
  ``opportunistic``: the job runs only on GPUs production jobs leave free and is the first
  victim when production needs them (``dl:v1;signal=USR2;grace=60;class=opportunistic``).

The marker may stand alone or be followed by free text after a single space
(``dl:v1;signal=USR2;grace=60 my note``); anything else in the comment is not a marker.
``slurm_plugin/job_submit.lua`` applies the same grammar (and caps ``grace`` at the site
maximum); keep both in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "dl:v1;"
ALLOWED_SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP", "URG")
CLASSES = ("production", "opportunistic")
MAX_GRACE_S = 86400

_MARKER_RE = re.compile(r"^dl:v1;signal=([A-Z0-9]+);grace=([0-9]+)(?:;class=([a-z]+))?(?:$| )")


class MarkerError(ValueError):
    """A comment starts with ``dl:v1;`` but is not a well-formed marker."""


@dataclass(frozen=True)
class CheckpointContract:
    """What a job promised: on ``signal`` it checkpoints within ``grace_s`` seconds."""

    signal: str
    grace_s: int
    job_class: str = "production"

    @property
    def opportunistic(self) -> bool:
        return self.job_class == "opportunistic"

    def to_comment(self) -> str:
        """The ``--comment`` value, e.g. ``dl:v1;signal=USR2;grace=60`` (``;class=opportunistic``
        appended for an opportunistic job)."""
        tail = ";class=opportunistic" if self.opportunistic else ""
        return f"{PREFIX}signal={self.signal};grace={self.grace_s}{tail}"


def make(signal: str = "USR2", grace_s: int = 60, job_class: str = "production") -> CheckpointContract:
    """Build a validated contract. Raises :class:`MarkerError` naming the bad part."""
    if job_class not in CLASSES:
        raise MarkerError(f"class {job_class!r}: must be one of {', '.join(CLASSES)}")
    sig = signal.upper().removeprefix("SIG")
    if sig not in ALLOWED_SIGNALS:
        raise MarkerError(f"signal {signal!r}: must be one of {', '.join(ALLOWED_SIGNALS)}")
    if not isinstance(grace_s, int) or isinstance(grace_s, bool) or not 1 <= grace_s <= MAX_GRACE_S:
        raise MarkerError(f"grace {grace_s!r}: must be whole seconds in 1..{MAX_GRACE_S}")
    return CheckpointContract(sig, grace_s, job_class)


def parse(comment: str | None) -> CheckpointContract | None:
    """Read the marker from a job's comment.

    Returns ``None`` when the comment carries no marker (no ``dl:v1;`` prefix).
    Raises :class:`MarkerError` when it starts with the prefix but is malformed.
    """
    if not comment or not comment.startswith(PREFIX):
        return None
    m = _MARKER_RE.match(comment)
    if not m:
        raise MarkerError(
            f"comment {comment!r}: expected 'dl:v1;signal=<SIG>;grace=<seconds>"
            "[;class=opportunistic]'"
        )
    return make(m.group(1), int(m.group(2)), m.group(3) or "production")
