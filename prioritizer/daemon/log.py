"""Structured log lines of the daemon: every line names the cycle and, where there is one, the job.

docs/design.md, code rule 11 (after kopf's ``ObjectLogger`` and ``LogFormat.JSON``): one line per event,
``text`` (``2026-11-29T12:00:00Z INFO cycle=7 job_id=42 event=demoted from=0 to=1 reason="..."``)
or ``json`` (one object per line with the keys ``ts, level, cycle, job_id, event`` and the
event's own fields). The reason strings are the policy's own (``QueueState.reason``), the same
that ``dlprio explain`` shows. Lines go to stderr (journald under systemd) or any text stream.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO


class EventLog:
    """Writes one structured line per event.

    Args:
        fmt: ``text`` or ``json``.
        stream: where lines go (default ``sys.stderr``).
        clock: returns epoch seconds for the ``ts`` field (injected in tests).
    """

    def __init__(self, fmt: str = "text", stream: TextIO | None = None,
                 clock: Any = time.time) -> None:
        self.fmt = fmt
        self.stream = stream
        self.clock = clock
        self.cycle = 0

    def event(self, event: str, job_id: int | None = None, level: str = "INFO",
              **fields: Any) -> None:
        """Log ``event`` for ``job_id`` (None: cycle-wide) with extra ``fields``."""
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))
        record: dict[str, Any] = {"ts": ts, "level": level, "cycle": self.cycle,
                                  "job_id": job_id, "event": event, **fields}
        if self.fmt == "json":
            line = json.dumps(record, default=str)
        else:
            parts = [ts, level, f"cycle={self.cycle}"]
            if job_id is not None:
                parts.append(f"job_id={job_id}")
            parts.append(f"event={event}")
            parts += [f"{k}={_text(v)}" for k, v in fields.items()]
            line = " ".join(parts)
        out = self.stream if self.stream is not None else sys.stderr
        out.write(line + "\n")
        out.flush()


def _text(value: Any) -> str:
    s = str(value)
    return json.dumps(s, ensure_ascii=False) if (not s or any(c in s for c in ' "=\n')) else s
