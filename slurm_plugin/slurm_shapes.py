"""Which Slurm releases and output shapes tiresias-slurm reads, and the checks that refuse others.

Pure (no commands run here). Slurm changed the shape of its JSON between releases: 22.05's
``openapi/v0.0.38`` data parser prints plain numbers and a job's ``job_state`` as one word;
later data parsers print numbers as objects (``{"set": true, "infinite": false, "number":
N}``) and states as lists (Slurm's NEWS for 23.02 and the ``data_parser`` plugins in its
source tree). A field that silently parses as 0 or "" would make a running job look ended,
so every field the product uses is type-checked here, and a read with any other shape raises
:class:`slurm_plugin.records.ShapeError` (the client turns it into ``SlurmShapeUnknown``).

Supported, verified on a live cluster by ``tests/test_client_live.py``:

* Slurm 22.05 (Debian 12's ``slurm-wlm 22.05.8``): ``squeue --Format`` fields of
  :data:`slurm_plugin.records.SQUEUE_FIELDS` (squeue(1) of 22.05, ``-O``), ``squeue --json`` /
  ``sinfo --json`` with data parser ``openapi/v0.0.38`` (source tag ``slurm-22-05-8-1``,
  ``src/plugins/openapi/v0.0.38``).

Any other release is refused with an error naming it: supporting one means adding its shapes
here, with their source, and running the live tests on it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from slurm_plugin.records import KNOWN_STATES, ShapeError

#: (major, minor) releases whose formatted squeue output and JSON shapes are read.
SUPPORTED_RELEASES: dict[tuple[int, int], str] = {
    (22, 5): "Slurm 22.05 (squeue(1) -O of 22.05; data parser openapi/v0.0.38, tag slurm-22-05-8-1)",
}
#: ``meta.plugin.type`` values of ``squeue --json`` / ``sinfo --json`` that are parsed.
SUPPORTED_PARSERS = frozenset({"openapi/v0.0.38"})

_VERSION_RE = re.compile(r"^slurm(?:-wlm)?\s+(\d+)\.(\d+)\.(\d+)", re.IGNORECASE)
# Fields of one job / node of v0.0.38 and the Python type each must have (None allowed where
# 22.05 prints null). Source: slurm-22-05-8-1 src/plugins/openapi/v0.0.38/{jobs,nodes}.c.
_JOB_TYPES: dict[str, tuple[type, ...]] = {
    "job_id": (int,), "job_state": (str,), "node_count": (int,), "start_time": (int,),
    "end_time": (int,), "submit_time": (int,), "eligible_time": (int,), "restart_cnt": (int,),
    "priority": (int,), "het_job_id": (int,), "het_job_offset": (int,), "array_job_id": (int,),
}
_NODE_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "state": (str,), "state_flags": (list,), "partitions": (list,),
    "cpus": (int,), "gres": (str,), "gres_used": (str,), "real_memory": (int,),
}


def parse_version(text: str, argv: Sequence[str] = ("squeue", "--version")) -> tuple[int, int, int]:
    """``slurm 22.05.8`` / ``slurm-wlm 22.05.8`` → ``(22, 5, 8)``; raises :class:`ShapeError`."""
    m = _VERSION_RE.match(text.strip())
    if not m:
        raise ShapeError(f"{' '.join(argv)}: cannot read a Slurm version from {text.strip()[:60]!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def check_release(version: tuple[int, int, int]) -> None:
    """Raise :class:`ShapeError` unless ``version``'s (major, minor) is supported."""
    if version[:2] not in SUPPORTED_RELEASES:
        known = "; ".join(SUPPORTED_RELEASES.values())
        raise ShapeError(f"Slurm {version[0]}.{version[1]:02d}.{version[2]} is not a release this "
                         f"version of tiresias-slurm reads (reads: {known}); nothing was changed")


def check_meta(data: dict, what: str) -> None:
    """Refuse JSON whose data parser (``meta.plugin.type``) is not a supported one."""
    meta = data.get("meta")
    plugin = meta.get("plugin") if isinstance(meta, dict) else None
    kind = plugin.get("type") if isinstance(plugin, dict) else None
    if kind not in SUPPORTED_PARSERS:
        release = (meta.get("Slurm") or {}).get("release") if isinstance(meta, dict) else None
        raise ShapeError(f"{what}: data parser {kind!r} (Slurm {release or 'unknown'}) is not one "
                         f"this version reads ({', '.join(sorted(SUPPORTED_PARSERS))}); "
                         "nothing was changed")


def _check_fields(rec: object, types: dict[str, tuple[type, ...]], what: str) -> dict:
    if not isinstance(rec, dict):
        raise ShapeError(f"{what}: an entry is {type(rec).__name__}, not an object")
    for key, kinds in types.items():
        value = rec.get(key)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise ShapeError(f"{what}: field {key}={value!r} is {type(value).__name__}, "
                             f"expected {'/'.join(k.__name__ for k in kinds)}")
    return rec


def check_jobs(data: dict) -> list[dict]:
    """The ``jobs`` list of ``squeue --json``, every used field type-checked."""
    check_meta(data, "squeue --json")
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        raise ShapeError("squeue --json: no 'jobs' list")
    for j in jobs:
        _check_fields(j, _JOB_TYPES, "squeue --json")
        if j.get("job_state") not in KNOWN_STATES:
            raise ShapeError(f"squeue --json: job {j.get('job_id')} job_state="
                             f"{j.get('job_state')!r} is not a Slurm 22.05 job state")
    return jobs


def nodes(data: dict) -> list[dict]:
    """The ``nodes`` list of ``sinfo --json``, every used field type-checked."""
    check_meta(data, "sinfo --json")
    found = data.get("nodes")
    if not isinstance(found, list):
        raise ShapeError("sinfo --json: no 'nodes' list")
    return [_check_fields(n, _NODE_TYPES, "sinfo --json") for n in found]
