"""The daemon's public snapshot: per-job queue and attained service, readable by every user.

``dlprio`` keeps its ledger private (mode 0600). Each cycle it also writes this world-readable
JSON file (path from the daemon config, key ``snapshot_path``; default
``/var/lib/dlprio/snapshot.json``), which ``dlqueue`` reads for its QUEUE and ATTAINED columns.
The file is replaced atomically (write to a temporary file, then rename), so a reader never
sees half a file.

Format (version 1)::

    {"version": 1, "generated_at": <epoch s>, "cycle": <int>, "mode": "priority"|"partition",
     "thresholds_gpu_s": [3250, 7200],
     "jobs": [{"job_id": int, "user": str, "state": str, "queue": int, "attained_gpu_s": float,
               "preemptions": int, "promotions": int, "restart_count": int,
               "rank": int | null, "reason": str}]}

``rank`` is the job's place in the daemon's target start order (0 = starts first; ``null`` for
running jobs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin.atomic import write_atomically

VERSION = 1
DEFAULT_PATH = "/var/lib/dlprio/snapshot.json"


@dataclass(frozen=True)
class PublicJob:
    """Public fields of one job (units: GPU·s for ``attained_gpu_s``)."""

    job_id: int
    user: str
    state: str
    queue: int
    attained_gpu_s: float
    preemptions: int
    promotions: int
    restart_count: int
    rank: int | None
    reason: str


@dataclass(frozen=True)
class PublicSnapshot:
    """The whole file."""

    generated_at: float
    cycle: int
    mode: str
    thresholds_gpu_s: tuple[float, ...]
    jobs: tuple[PublicJob, ...]

    def by_id(self) -> dict[int, PublicJob]:
        return {j.job_id: j for j in self.jobs}


def write_snapshot(path: str | os.PathLike[str], snap: PublicSnapshot) -> None:
    """Atomically replace ``path`` with ``snap`` as JSON, mode 0644. Raises OSError."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "version": VERSION,
        "generated_at": snap.generated_at,
        "cycle": snap.cycle,
        "mode": snap.mode,
        "thresholds_gpu_s": list(snap.thresholds_gpu_s),
        "jobs": [vars(j) for j in snap.jobs],   # flat dataclass: its __dict__ is the record
    }
    # the C encoder (json.dump streams through Python); a new file is 0644, an existing one
    # keeps its mode; a device or FIFO is written in place (slurm_plugin.atomic)
    write_atomically(target, json.dumps(data), mode=0o644)


class SnapshotError(ValueError):
    """The snapshot file exists but is not a version-1 snapshot."""


def read_snapshot(path: str | os.PathLike[str]) -> PublicSnapshot | None:
    """Read the snapshot; ``None`` when the file does not exist (no daemon).

    Raises :class:`SnapshotError` naming the file when it is malformed.
    """
    try:
        raw = Path(path).read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise SnapshotError(f"{path}: malformed snapshot (not a JSON object)")
        if data.get("version") != VERSION:
            raise SnapshotError(f"{path}: unsupported snapshot version {data.get('version')!r}")
        jobs = tuple(PublicJob(**j) for j in data["jobs"])
        return PublicSnapshot(
            generated_at=float(data["generated_at"]),
            cycle=int(data["cycle"]),
            mode=str(data.get("mode", "priority")),
            thresholds_gpu_s=tuple(float(t) for t in data.get("thresholds_gpu_s", [])),
            jobs=jobs,
        )
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"{path}: malformed snapshot ({exc})") from exc
