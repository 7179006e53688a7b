"""Which Slurm releases tiresias-slurm reads, and how each one is read.

Pure (no commands run here). The product reads Slurm three ways:

* **Formatted reads** of jobs and nodes (squeue(1) / sinfo(1) ``--Format``,
  :data:`slurm_plugin.records.SQUEUE_FIELDS` and :data:`~slurm_plugin.records.SINFO_FIELDS`).
  Their field names and texts are the same on 22.05, 24.11 and 26.05 (checked live on each by
  ``tests/live/test_client_live.py``), apart from TRES texts (``gres:gpu:2`` on 22.05,
  ``gres/gpu:2`` later), which :func:`slurm_plugin.records.gpus_in_tres` reads both ways.
* **JSON** of accounting (``sacct --json``, :mod:`slurm_plugin.accounting`). Its shape is the
  data parser's: 22.05 prints ``openapi/v0.0.38`` (plain numbers); from 23.02 on the commands
  take a data parser version (``--json=v0.0.42``), which prints numbers as objects
  (``{"set": true, "infinite": false, "number": N}``). Each declared parser is one set of
  msgspec Structs there; a release is read with the one it can be pinned to.
* **Text** of ``scontrol show`` (``--oneliner`` key=value pairs, the same on every release).

:data:`RELEASES` lists what is read. SchedMD's data parser lifetimes (rest_clients page):
v0.0.38 22.05–23.11, v0.0.40 23.11–25.05, v0.0.41 24.05–25.11, v0.0.42 24.11–26.05, v0.0.43
25.05–, v0.0.44 25.11–, v0.0.45 26.05–. So v0.0.42 serves 24.11, 25.05, 25.11 and 26.05;
23.02, 23.11 and 24.05 cannot be pinned to a declared parser and are refused with one line
naming the release, before anything is read. A field that silently parsed as 0 or "" would
make a running job look ended: every read is strict and raises
:class:`slurm_plugin.records.ShapeError` (the client's ``SlurmShapeUnknown``) on any other shape.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from slurm_plugin.records import ShapeError


@dataclass(frozen=True)
class Release:
    """How one Slurm release is read.

    Attributes:
        version: ``(major, minor)``, e.g. ``(24, 11)``.
        parser: the data parser its JSON is read with (``v0.0.38``, ``v0.0.42``).
        json_flag: the JSON option of its commands: ``--json`` (22.05 prints v0.0.38 and takes
            no version) or ``--json=v0.0.42`` (pinned).
        verified: how it was checked: ``live`` (a live cluster of the release runs the live
            tests) or ``schema`` (read through a pinned parser that a live release shares).
    """

    version: tuple[int, int]
    parser: str
    json_flag: str
    verified: str

    @property
    def name(self) -> str:
        """``24.11``."""
        return f"{self.version[0]}.{self.version[1]:02d}"


RELEASES: dict[tuple[int, int], Release] = {
    (22, 5): Release((22, 5), "v0.0.38", "--json", "live"),
    (24, 11): Release((24, 11), "v0.0.42", "--json=v0.0.42", "live"),
    (25, 5): Release((25, 5), "v0.0.42", "--json=v0.0.42", "schema"),
    (25, 11): Release((25, 11), "v0.0.42", "--json=v0.0.42", "schema"),
    (26, 5): Release((26, 5), "v0.0.42", "--json=v0.0.42", "live"),
}
#: Releases between the declared ones that no declared parser serves, with the reason.
REFUSED: dict[tuple[int, int], str] = {
    (23, 2): "its JSON is data parser v0.0.39 only",
    (23, 11): "its JSON is data parser v0.0.39/v0.0.40, neither declared here",
    (24, 5): "its JSON is data parser v0.0.40/v0.0.41, neither declared here",
}

_VERSION_RE = re.compile(r"^slurm(?:-wlm)?\s+(\d+)\.(\d+)\.(\d+)", re.IGNORECASE)


def parse_version(text: str, argv: Sequence[str] = ("squeue", "--version")) -> tuple[int, int, int]:
    """``slurm 22.05.8`` / ``slurm-wlm 24.11.5`` → ``(24, 11, 5)``; raises :class:`ShapeError`."""
    m = _VERSION_RE.match(text.strip())
    if not m:
        raise ShapeError(f"{' '.join(argv)}: cannot read a Slurm version from {text.strip()[:60]!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def release(version: tuple[int, int, int]) -> Release:
    """The :class:`Release` of ``version``; raises :class:`ShapeError` (one line naming the
    release, why, and what is read) for any release not in :data:`RELEASES`."""
    found = RELEASES.get(version[:2])
    if found is None:
        why = REFUSED.get(version[:2], "its output shapes are not declared here")
        known = ", ".join(r.name for r in RELEASES.values())
        raise ShapeError(f"Slurm {version[0]}.{version[1]:02d}.{version[2]} is not a release this "
                         f"version of tiresias-slurm reads ({why}; reads: {known}); nothing was changed")
    return found


def check_release(version: tuple[int, int, int]) -> None:
    """Raise :class:`ShapeError` unless ``version`` is read (:func:`release`)."""
    release(version)
