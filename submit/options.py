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
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_plugin import marker
from slurm_plugin.common.cli import visible
from slurm_plugin.names import (SLURM_NAME_RE, SLURM_NAME_RULE,  # one rule for every Slurm name
                                SLURM_NAMES_RULE, slurm_names)
from submit.errors import SpecError

RUNTIMES = ("none", "pyxis", "apptainer")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class VirtualCluster:
    """Where an OpenPAI ``virtualCluster`` runs on Slurm (site config ``virtual_clusters``):
    any of ``partition``, ``account``, ``qos`` (``None`` = the cluster's default)."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None


_VC_KEYS = ("partition", "account", "qos")
#: keys of a ``virtual_clusters`` entry that dlprio reads (tenants: guarantees and limits,
#: ``prioritizer.policy.tenants``) and that placing a job does not need: accepted, not used
_TENANT_KEYS = ("guaranteed_gpus", "max_gpus", "user_limit_factor", "users")

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
        max_array_size: the cluster's ``MaxArraySize`` (slurm.conf(5): default 1001, at most
            4000001; array indexes run 0..max-1); a job array (``gangAllocation: false``) with
            more elements is refused before submission.
        max_script_size: the cluster's ``SchedulerParameters=max_script_size`` in bytes
            (slurm.conf(5): default 4 MB); a larger batch script is refused before submission.
        shards_per_gpu: GPU shards per GPU on the site's nodes (gres.conf ``Name=shard``,
            slurm_plugin/shard.py); a fractional ``gpu`` asks for that fraction of them. 0 =
            read from the partition's nodes at submit (``sinfo`` Gres), no sharding when they
            have none; 1..1024 when set.
        port_floor: lowest port a job's rendezvous block may use (``MASTER_PORT`` and the tasks'
            ports, submit/runtime.py); blocks lie between it and the node's ephemeral range
            (``net.ipv4.ip_local_port_range``, 32768 by default). Default 10000, above the
            well-known and most registered service ports (IANA); 1025..65535.
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
    max_array_size: int = 1001
    max_script_size: int = 4 * 1024 * 1024
    port_floor: int = 10000
    shards_per_gpu: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "virtual_clusters", _virtual_clusters(self.virtual_clusters, []))
        problems = [msg for _, msg in check_fields(dataclasses.asdict(self) | {
            "virtual_clusters": self.virtual_clusters})]
        if problems:
            raise SpecError(problems)

    def virtual_cluster(self, name: str | None) -> VirtualCluster:
        """The placement of OpenPAI virtual cluster ``name``; ``None`` (the spec names none) is
        :data:`DEFAULT_VC`, as OpenPAI and ``PAI_JOB_VC_NAME`` take it, and ``default`` without a
        site entry is Slurm's defaults. Raises :class:`SpecError` listing the known names."""
        name = DEFAULT_VC if name is None else name
        if name == DEFAULT_VC and DEFAULT_VC not in self.virtual_clusters:
            return VirtualCluster()
        if name not in self.virtual_clusters:
            known = sorted({DEFAULT_VC, *self.virtual_clusters})
            raise SpecError([f"virtualCluster {name!r}: not a virtual cluster of this site "
                             f"(known: {', '.join(known)}; admins map them in the site config's "
                             "virtual_clusters)"])
        return self.virtual_clusters[name]


NODE_SHAPE = {"gpus_per_node": 1024, "cores_per_node": 100_000, "mem_per_node_mib": 2**30,
              "max_array_size": 4_000_001, "max_script_size": 2**31 - 1}
"""Whole-number fields (node shape, Slurm limits) and their largest accepted value (each at
least 1; MaxArraySize may not exceed 4000001, slurm.conf(5))."""


PORT_FLOOR_RANGE = (1025, 65535)
"""Accepted ``port_floor`` values: above the privileged ports (below 1024 only root may bind)."""


def check_fields(values: dict[str, Any]) -> list[tuple[str, str]]:
    """Every problem of the option ``values`` (field name -> value; absent fields are not
    checked) as ``(field, line)`` pairs; each line starts with the field name (or its
    ``virtual_clusters.NAME.KEY`` path), so a caller can name the flag or file it came from."""
    out: list[tuple[str, str]] = []

    def bad(field: str, rule: str) -> None:
        out.append((field, f"{field} {values[field]!r}: {rule}"))

    if "container_runtime" in values and values["container_runtime"] not in RUNTIMES:
        bad("container_runtime", "must be one of " + ", ".join(RUNTIMES))
    for name, top in NODE_SHAPE.items():
        v = values.get(name, 1)
        if type(v) is not int or not 1 <= v <= top:
            bad(name, f"must be a whole number in 1..{top}")
    if "signal" in values:
        try:
            marker.make(values["signal"])
        except (marker.MarkerError, AttributeError):
            bad("signal", "must be one of " + ", ".join(marker.ALLOWED_SIGNALS))
    s = values.get("shards_per_gpu", 0)
    if type(s) is not int or not 0 <= s <= 1024:
        bad("shards_per_gpu", "must be a whole number in 0..1024 (0: read from the nodes)")
    f = values.get("port_floor", PORT_FLOOR_RANGE[0])
    if type(f) is not int or not PORT_FLOOR_RANGE[0] <= f <= PORT_FLOOR_RANGE[1]:
        bad("port_floor", f"must be a whole number in {PORT_FLOOR_RANGE[0]}..{PORT_FLOOR_RANGE[1]}")
    g = values.get("grace_s", 60)
    if type(g) is not int or not 1 <= g <= marker.MAX_GRACE_S:
        bad("grace_s", f"must be whole seconds in 1..{marker.MAX_GRACE_S}")
    if type(values.get("enforce_binding", False)) is not bool:
        bad("enforce_binding", "must be true or false")
    p = values.get("partition")   # a list, gpu,debug, as sbatch --partition takes it
    if p is not None and (not isinstance(p, str) or not slurm_names(p)):
        bad("partition", SLURM_NAMES_RULE)
    for name in ("account", "qos", "gpu_type"):
        v = values.get(name)
        if v is not None and (not isinstance(v, str) or not SLURM_NAME_RE.match(v)):
            bad(name, SLURM_NAME_RULE)
    for name in ("checkpoint_root", "output", "default_fs_uri"):
        v = values.get(name)
        if v is not None and (not isinstance(v, str) or _CONTROL.search(v)):
            bad(name, "must be a string without control characters")
        elif v == "" and name != "default_fs_uri":
            bad(name, "must not be empty (leave the key out for the default)")
    vc_problems: list[str] = []
    _virtual_clusters(values.get("virtual_clusters"), vc_problems)
    out += [("virtual_clusters", line) for line in vc_problems]
    return out


def _did_you_mean(key: Any, known: Any) -> str:
    close = difflib.get_close_matches(str(key), sorted(known), n=1)
    return f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(sorted(known))


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
        if not isinstance(entry, dict):
            problems.append(f"{where}: must be a mapping with keys partition, account, qos")
            continue
        unknown = [k for k in entry if k not in _VC_KEYS + _TENANT_KEYS]
        for k in unknown:
            problems.append(f"{where}.{k}: unknown key; "
                            f"{_did_you_mean(k, _VC_KEYS + _TENANT_KEYS)}")
        entry = {k: v for k, v in entry.items() if k in _VC_KEYS}
        bad = [k for k, v in entry.items()
               if v is not None and (not isinstance(v, str) or not SLURM_NAME_RE.match(v))]
        for k in bad:
            problems.append(f"{where}.{k} {entry[k]!r}: {SLURM_NAME_RULE}")
        if not bad and not unknown:
            out[name] = VirtualCluster(**entry)
    return out


def load_site(path: str | Path | None) -> dict[str, Any]:
    """Read a site YAML file into option overrides (``{}`` when ``path`` is ``None``).

    Raises :class:`SpecError` with one line per problem, each starting ``FILE:``: an unreadable
    file, YAML syntax (``FILE:LINE:COL: YAML syntax error: ...``, the spec loader's wording), a
    document that is not a mapping, every unknown key (with the nearest known one) and every bad
    value (naming the key and the allowed values)."""
    if path is None:
        return {}
    from submit.files import MAX_SMALL_BYTES, parse_text, read_limited

    raw, _ = read_limited(path, "site config ", MAX_SMALL_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([f"site config {visible(path)}: cannot read: {exc}"]) from None
    data = parse_text(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError([f"{path}: the site config must be a mapping of keys (e.g. "
                         f"'partition: gpu'), not a {type(data).__name__}"])
    known = {f.name for f in dataclasses.fields(RenderOptions)}
    problems = [f"{path}: {k}: unknown key; {_did_you_mean(k, known)}" for k in data if k not in known]
    try:
        problems += [f"{path}: {line}" for _, line in check_fields(
            {k: v for k, v in data.items() if k in known})]
    except RecursionError:   # a value nested past Python's recursion limit (its repr)
        problems.append(f"{path}: nested too deeply")
    if problems:
        raise SpecError(problems)
    return data
