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

``tenants`` (optional, with ``virtual_clusters``): ``[{"name": str, "guaranteed": int, "used":
int, "borrowed": int, "waiting": int, "fair_share": float}]``, GPUs per tenant.
``cluster`` (optional, added later in version 1): Slurm's ``ClusterName`` of the cluster the
daemon schedules, as ``scontrol show config`` gives it (so right for any slurm.conf location or
a configless client; else read from the ``slurm.conf`` of ``SLURM_CONF`` or
``/etc/slurm/slurm.conf``); absent in files of older daemons. Readers on a host with several clusters use it to ignore the
snapshot of another cluster.

``forecast`` (optional): start-time forecasts, in the format of
:mod:`prioritizer.daemon.forecasts`; absent until the daemon has made one.

``rank`` is the job's place in the daemon's target start order (0 = starts first; ``null`` for
running jobs).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prioritizer.paths import SNAPSHOT
from slurm_plugin.common.atomic import write_atomically
from slurm_plugin.common.readfile import BadText, UnreadableFile, decode_utf8, read_regular
from slurm_plugin.gres import slurm_lines

VERSION = 1
#: what a forecast entry's ``sharing`` may say: a job of a fraction of one GPU (``shard``), an
#: opportunistic one, or both (``opportunistic shard``); :func:`prioritizer.daemon.forecasts.sharing_of`
SHARING_KINDS = ("shard", "opportunistic", "opportunistic shard")
DEFAULT_PATH = SNAPSHOT
#: A snapshot (or ledger read) older than this many of the daemon's cycles is stale: the
#: daemon stopped, or waits on Slurm
STALE_INTERVALS = 3
#: ... and one whose cycle is not known (files of older daemons), older than this (s)
STALE_AFTER_S = 300.0


def stale_after_s(interval_s: float | None) -> float:
    """Seconds after its writing at which a snapshot the daemon writes every ``interval_s``
    seconds is stale: :data:`STALE_INTERVALS` cycles, or :data:`STALE_AFTER_S` when the
    cycle is not known (None)."""
    return STALE_AFTER_S if interval_s is None else STALE_INTERVALS * interval_s


CLOCK_SLACK_S = 60.0
"""How far ahead of this host's clock a time the daemon wrote (a snapshot's, a forecast's, the
ledger's last cycle) may be and still be believed, s: two hosts' clocks, or one clock before and
after an NTP step, differ by less. Further ahead, the clock was set back since the daemon wrote
it (or this host's runs behind the daemon's), so its age is not known."""


def is_current(at: float, now: float, stale_after: float) -> bool:
    """Whether a time the daemon wrote, ``at`` (epoch s), is current at ``now``: at most
    ``stale_after`` seconds old and at most :data:`CLOCK_SLACK_S` ahead of ``now``."""
    return -CLOCK_SLACK_S <= now - at <= stale_after


def ahead(at: float, now: float) -> bool:
    """Whether ``at`` is more than :data:`CLOCK_SLACK_S` ahead of ``now`` (:func:`is_current`)."""
    return at - now > CLOCK_SLACK_S


DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"


def local_cluster_name(env: Mapping[str, str] | None = None) -> str | None:
    """``ClusterName`` from the ``slurm.conf`` that ``SLURM_CONF`` names (else
    :data:`DEFAULT_SLURM_CONF`), lower-cased as Slurm stores it; ``None`` when the file is
    unreadable or has none. Reads the file and what it includes (no Slurm command) with the
    project's one reader of Slurm's config lines (:mod:`slurm_plugin.gres.slurm_lines`; a
    relative Include is looked for beside the file), and nothing more: a node line or GRES
    that ``dlgres --check`` would refuse does not hide the name, and an Include it cannot read
    leaves the file's own lines to look in."""
    path = (os.environ if env is None else env).get("SLURM_CONF") or DEFAULT_SLURM_CONF
    try:
        data, _ = read_regular(path, slurm_lines.MAX_BYTES)
    except UnreadableFile:
        return None
    for includes in (True, False):
        try:
            lines = slurm_lines.read_bytes(data, path, includes=includes)
        except slurm_lines.ConfReadError:
            continue
        names = [line.pairs[0].value for line in lines
                 if line.pairs and line.pairs[0].key.lower() == "clustername"]
        return names[-1].lower() if names else None
    return None


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
class PublicTenant:
    """One tenant (``virtual_clusters``) as the last cycle saw it, in GPUs: ``guaranteed``,
    ``used`` by its running jobs, ``borrowed`` (used beyond the guarantee), ``waiting``
    (asked by its pending jobs), and its weighted ``fair_share`` (smaller: served first)."""

    name: str
    guaranteed: int
    used: int
    borrowed: int
    waiting: int
    fair_share: float


@dataclass(frozen=True)
class PublicSnapshot:
    """The whole file."""

    generated_at: float
    cycle: int
    mode: str
    thresholds_gpu_s: tuple[float, ...]
    jobs: tuple[PublicJob, ...]
    cluster: str | None = None   # Slurm's ClusterName; None in files of older daemons
    #: start-time forecasts (:mod:`prioritizer.daemon.forecasts`); None until one is ready
    forecast: dict[str, Any] | None = None
    tenants: tuple[PublicTenant, ...] = ()   # with virtual_clusters only
    #: the daemon's cycle (seconds, its ``interval_s``): a reader calls the file stale after a
    #: few missed cycles; None in files of older daemons
    interval_s: float | None = None

    def by_id(self) -> dict[int, PublicJob]:
        return {j.job_id: j for j in self.jobs}


def write_snapshot(path: str | os.PathLike[str], snap: PublicSnapshot) -> None:
    """Atomically replace ``path`` with ``snap`` as JSON, mode 0644. Raises OSError.

    ``cluster`` is ``snap.cluster`` (the daemon passes Slurm's own ``ClusterName``, from
    ``scontrol show config``), else :func:`local_cluster_name` (the slurm.conf file);
    left out when neither is known."""
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
    cluster = snap.cluster or local_cluster_name()
    if cluster:
        data["cluster"] = cluster
    if snap.forecast is not None:
        data["forecast"] = snap.forecast
    if snap.tenants:
        data["tenants"] = [vars(t) for t in snap.tenants]
    if snap.interval_s is not None:
        data["interval_s"] = snap.interval_s
    # the C encoder (json.dump streams through Python); a new file is 0644, an existing one
    # keeps its mode; a device or FIFO is written in place (slurm_plugin.common.atomic)
    write_atomically(target, json.dumps(data), mode=0o644)


class SnapshotError(ValueError):
    """The snapshot file exists but is not a version-1 snapshot."""


SNAPSHOT_MAX_BYTES = 128 << 20
"""Largest snapshot a reader takes, bytes (128 MiB): a job and its forecast take well under
2 KiB, so this is far above 10,000 managed jobs; it keeps a wrong ``snapshot_path`` (a 2 GB
file) from filling a reader's memory."""


def read_snapshot(path: str | os.PathLike[str]) -> PublicSnapshot | None:
    """Read the snapshot; ``None`` when the file does not exist (no daemon).

    Raises :class:`SnapshotError` naming the file when it cannot be read (not a regular file,
    larger than :data:`SNAPSHOT_MAX_BYTES`, not UTF-8) or is malformed.
    """
    if not os.path.lexists(path):
        return None
    try:
        raw = decode_utf8(read_regular(path, SNAPSHOT_MAX_BYTES)[0])
    except BadText as exc:
        raise SnapshotError(f"{path}:{exc.line}: malformed snapshot ({exc.reason})") from None
    except UnreadableFile as exc:
        raise SnapshotError(f"{path}: cannot read ({exc.reason})") from None
    try:
        try:
            data = json.loads(raw)
        except RecursionError:   # arrays or objects nested past Python's recursion limit
            raise SnapshotError(f"{path}: malformed snapshot (nested too deeply)") from None
        if not isinstance(data, dict):
            raise SnapshotError(f"{path}: malformed snapshot (not a JSON object)")
        if data.get("version") != VERSION:
            raise SnapshotError(f"{path}: unsupported snapshot version {data.get('version')!r}")
        jobs = tuple(PublicJob(**j) for j in data["jobs"])
        if not _epoch(data["generated_at"]):
            raise SnapshotError(f"{path}: malformed snapshot (generated_at: expected epoch "
                                "seconds)")
        if not _count(data["cycle"]):
            raise SnapshotError(f"{path}: malformed snapshot (cycle: expected a count)")
        thresholds = data.get("thresholds_gpu_s", [])
        if not isinstance(thresholds, list) or not all(_number(t) for t in thresholds):
            raise SnapshotError(f"{path}: malformed snapshot (thresholds_gpu_s: expected a "
                                "list of finite numbers)")
        interval = data.get("interval_s")
        if interval is not None and not (_number(interval) and interval > 0):
            raise SnapshotError(f"{path}: malformed snapshot (interval_s: expected seconds "
                                "above 0)")
        return PublicSnapshot(
            generated_at=float(data["generated_at"]),
            cycle=data["cycle"],
            mode=str(data.get("mode", "priority")),
            thresholds_gpu_s=tuple(float(t) for t in thresholds),
            jobs=jobs,
            cluster=str(data["cluster"]) if data.get("cluster") is not None else None,
            forecast=_forecast(data.get("forecast"), path),
            tenants=tuple(PublicTenant(**t) for t in data.get("tenants", [])),
            interval_s=float(interval) if interval is not None else None,
        )
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"{path}: malformed snapshot ({exc})") from exc


def _forecast(value: Any, path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The snapshot's ``forecast`` object, every field the views read checked (a bad one:
    :class:`SnapshotError` naming it)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("jobs"), dict):
        raise SnapshotError(f"{path}: malformed snapshot (forecast: expected an object with jobs)")
    if not _epoch(value.get("made_at")):
        raise SnapshotError(f"{path}: malformed snapshot (forecast.made_at: expected epoch "
                            "seconds)")
    for key in ("stale_after_s", "horizon_s", "draws"):
        if not _number(value.get(key)):
            raise SnapshotError(f"{path}: malformed snapshot (forecast.{key}: expected a number)")
    for key in ("known_outcomes", "sharing_jobs"):
        if key in value and not _count(value[key]):
            raise SnapshotError(f"{path}: malformed snapshot (forecast.{key}: expected a count)")
    for job_id, entry in value["jobs"].items():
        where = f"forecast.jobs.{job_id}"
        if not isinstance(entry, dict):
            raise SnapshotError(f"{path}: malformed snapshot ({where}: expected an object)")
        if entry.get("sharing", "shard") not in SHARING_KINDS:
            raise SnapshotError(f"{path}: malformed snapshot ({where}.sharing: expected one of "
                                f"{', '.join(map(repr, SHARING_KINDS))})")
        if "waits_for" in entry and not isinstance(entry["waits_for"], str):
            raise SnapshotError(f"{path}: malformed snapshot ({where}.waits_for: expected "
                                "text)")
        if "calibrated" in entry and not _count(entry["calibrated"]):
            raise SnapshotError(f"{path}: malformed snapshot ({where}.calibrated: expected a "
                                "count)")
        for key in ("start", "raw_start", "finish", "restart"):
            band = entry.get(key)
            if band is not None and not (isinstance(band, list) and len(band) == 3 and all(
                    v is None or _epoch(v) for v in band)):
                raise SnapshotError(f"{path}: malformed snapshot ({where}.{key}: expected "
                                    "[p10, p50, p90] or null, in epoch seconds)")
        chance: Any = entry.get("preempt_chance")
        if not (_number(chance) and 0 <= chance <= 1):
            raise SnapshotError(f"{path}: malformed snapshot ({where}.preempt_chance: expected "
                                "a share from 0 to 1)")
        if not _count(entry.get("ahead")):
            raise SnapshotError(f"{path}: malformed snapshot ({where}.ahead: expected a count)")
        first = entry.get("first_ahead")
        if not (isinstance(first, list) and all(isinstance(j, int) and not isinstance(j, bool)
                                                for j in first)):
            raise SnapshotError(f"{path}: malformed snapshot ({where}.first_ahead: expected "
                                "a list of job ids)")
    return value


def _number(value: Any) -> bool:
    """A finite JSON number (``json`` reads ``NaN`` and ``Infinity`` as floats)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


#: the last second of year 9999 UTC: the latest time the views can write as a date
MAX_EPOCH_S = 253402300799


def _epoch(value: Any) -> bool:
    """A time the views can write: epoch seconds from 0 to :data:`MAX_EPOCH_S`."""
    return _number(value) and 0 <= value <= MAX_EPOCH_S


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
