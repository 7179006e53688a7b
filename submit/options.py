"""Site settings and per-run options for rendering: node shape, container runtime, contract.

Defaults match the cluster ``dlcluster`` starts (4 nodes x 8 GPUs, 16 cores, 64000 MiB) and the
contract in docs/design.md, "dlsubmit mapping" (``USR2``, 60 s grace). A site can keep its own values in a YAML
file named by ``--site-config`` or ``$DLSUBMIT_CONFIG`` (keys are the field names below); command
line flags override the file, and the spec (``extras``) overrides the site for signal, grace and
binding.

Every value is checked here, whichever door it came through (site file or flag), because each
one ends up in the batch script: names that Slurm parses (partition, account, QOS, GRES type)
must be Slurm names (``[A-Za-z0-9_.-]+``, no shell or ``#SBATCH`` syntax can hide in them); free
text (paths, ``--output``, ``default_fs_uri``) must hold no control character and is quoted by
the renderer for the layer it lands in (submit/quoting.py).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_plugin import marker
from submit.errors import SpecError

RUNTIMES = ("none", "pyxis", "apptainer")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SLURM_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
"""A Slurm name we pass on: partition, account, QOS, GRES type (letters, digits, ``_.-``)."""


@dataclass(frozen=True)
class VirtualCluster:
    """Where an OpenPAI ``virtualCluster`` runs on Slurm (site config ``virtual_clusters``):
    any of ``partition``, ``account``, ``qos`` (``None`` = the cluster's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None


DEFAULT_VC = "default"
"""The virtual cluster every OpenPAI install has; without a site entry it means Slurm's defaults."""


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
        account, qos: ``--account`` / ``--qos`` or ``None`` (the user's default).
        virtual_clusters: OpenPAI virtual cluster name -> :class:`VirtualCluster` (site config,
            a mapping of mappings with keys ``partition``, ``account``, ``qos``).
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
    account: str | None = None
    qos: str | None = None
    virtual_clusters: Any = None

    def __post_init__(self) -> None:
        problems = []
        vcs = _virtual_clusters(self.virtual_clusters, problems)
        object.__setattr__(self, "virtual_clusters", vcs)
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
        if type(self.enforce_binding) is not bool:
            problems.append(f"enforce_binding {self.enforce_binding!r}: must be true or false")
        for name in ("partition", "account", "qos", "gpu_type"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not SLURM_NAME_RE.match(v)):
                problems.append(f"{name} {v!r}: must be a Slurm name (letters, digits, _ . -)")
        for name in ("checkpoint_root", "output", "default_fs_uri"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or _CONTROL.search(v)):
                problems.append(f"{name} {v!r}: must be a string without control characters")
        if problems:
            raise SpecError(problems)

    def virtual_cluster(self, name: str | None) -> VirtualCluster:
        """The placement of OpenPAI virtual cluster ``name`` (``None`` and ``default`` without a
        site entry: Slurm's defaults). Raises :class:`SpecError` listing the known names."""
        if name is None or (name == DEFAULT_VC and DEFAULT_VC not in self.virtual_clusters):
            return VirtualCluster()
        if name not in self.virtual_clusters:
            known = sorted({DEFAULT_VC, *self.virtual_clusters})
            raise SpecError([f"virtualCluster {name!r}: not a virtual cluster of this site "
                             f"(known: {', '.join(known)}; admins map them in the site config's "
                             "virtual_clusters)"])
        return self.virtual_clusters[name]


def _virtual_clusters(raw: Any, problems: list[str]) -> dict[str, VirtualCluster]:
    """Validate the site's ``virtual_clusters`` mapping (see :class:`RenderOptions`)."""
    if raw is None:
        return {}
    if isinstance(raw, dict) and all(isinstance(v, VirtualCluster) for v in raw.values()):
        return dict(raw)
    if not isinstance(raw, dict):
        problems.append("virtual_clusters: must be a mapping of name -> {partition, account, qos}")
        return {}
    out = {}
    for name, entry in raw.items():
        where = f"virtual_clusters.{name}"
        if not isinstance(name, str) or not name or _CONTROL.search(name):
            problems.append(f"virtual_clusters {name!r}: a name must be a non-empty string")
            continue
        if not isinstance(entry, dict) or set(entry) - {"partition", "account", "qos"}:
            problems.append(f"{where}: must be a mapping with keys partition, account, qos")
            continue
        bad = [k for k, v in entry.items()
               if v is not None and (not isinstance(v, str) or not SLURM_NAME_RE.match(v))]
        for k in bad:
            problems.append(f"{where}.{k} {entry[k]!r}: must be a Slurm name (letters, digits, _ . -)")
        if not bad:
            out[name] = VirtualCluster(**entry)
    return out


def load_site(path: str | Path | None) -> dict[str, Any]:
    """Read a site YAML file into option overrides (``{}`` when ``path`` is ``None``).

    Raises :class:`SpecError` for an unreadable file or unknown keys.
    """
    if path is None:
        return {}
    import yaml

    from submit import yamlsafe

    try:
        data = yamlsafe.load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise SpecError([f"{path}: cannot read site config: {exc}"]) from None
    known = {f.name for f in dataclasses.fields(RenderOptions)}
    if not isinstance(data, dict) or set(data) - known:
        extra = sorted(set(data) - known) if isinstance(data, dict) else ["(not a mapping)"]
        raise SpecError([f"{path}: unknown site keys {extra}; allowed: {', '.join(sorted(known))}"])
    return data
