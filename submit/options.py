"""Site settings and per-run options for rendering: node shape, container runtime, contract.

Defaults match the cluster ``dlcluster`` starts (4 nodes x 8 GPUs, 16 cores, 64000 MiB) and the
contract in docs/design.md, "dlsubmit mapping" (``USR2``, 60 s grace). A site can keep its own values in a YAML
file named by ``--site-config`` or ``$DLSUBMIT_CONFIG`` (keys are the field names below); command
line flags override the file, and the spec (``extras``) overrides the site for signal, grace and
binding.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slurm_plugin import marker
from submit.validation import SpecError

RUNTIMES = ("none", "pyxis", "apptainer")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class RenderOptions:
    """How to render a job for one site.

    Attributes:
        partition: ``--partition`` or ``None`` for the cluster default.
        container_runtime: ``none``, ``pyxis`` (``srun --container-image``) or ``apptainer``.
        gpus_per_node, cores_per_node, mem_per_node_mib: node shape used for packing.
        gpu_type: GRES type used when the spec names none (``None`` = any type).
        signal, grace_s: checkpoint contract defaults (signal name, seconds).
        enforce_binding: add ``--gres-flags=enforce-binding`` to GPU roles.
        checkpoint_root: directory holding one checkpoint directory per job; ``None`` means
            ``$SLURM_SUBMIT_DIR/dl-checkpoints`` at run time.
        output: ``--output`` pattern, ``None`` for Slurm's default ``slurm-%j.out``.
        default_fs_uri: value of ``PAI_DEFAULT_FS_URI``.
    """

    partition: str | None = None
    container_runtime: str = "none"
    gpus_per_node: int = 8
    cores_per_node: int = 16
    mem_per_node_mib: int = 64000
    gpu_type: str | None = None
    signal: str = "USR2"
    grace_s: int = 60
    enforce_binding: bool = False
    checkpoint_root: str | None = None
    output: str | None = None
    default_fs_uri: str = ""

    def __post_init__(self) -> None:
        problems = []
        if self.container_runtime not in RUNTIMES:
            problems.append(f"container_runtime {self.container_runtime!r}: must be one of "
                            + ", ".join(RUNTIMES))
        for name in ("gpus_per_node", "cores_per_node", "mem_per_node_mib"):
            v = getattr(self, name)
            if type(v) is not int or v < (0 if name == "gpus_per_node" else 1):
                problems.append(f"{name} {v!r}: must be a positive integer")
        try:
            marker.make(self.signal, self.grace_s)
        except marker.MarkerError as exc:
            problems.append(str(exc))
        for name in ("partition", "checkpoint_root", "output"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or _CONTROL.search(v)):
                problems.append(f"{name} {v!r}: must be a string without control characters")
        if problems:
            raise SpecError(problems)


def load_site(path: str | Path | None) -> dict[str, Any]:
    """Read a site YAML file into option overrides (``{}`` when ``path`` is ``None``).

    Raises :class:`SpecError` for an unreadable file or unknown keys.
    """
    if path is None:
        return {}
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError([f"{path}: cannot read site config: {exc}"]) from None
    known = {f.name for f in dataclasses.fields(RenderOptions)}
    if not isinstance(data, dict) or set(data) - known:
        extra = sorted(set(data) - known) if isinstance(data, dict) else ["(not a mapping)"]
        raise SpecError([f"{path}: unknown site keys {extra}; allowed: {', '.join(sorted(known))}"])
    return data
