"""The ``extras`` keys dlsubmit reads, shared by v1 and v2 specs.

OpenPAI leaves ``extras`` open for plugins (``com.microsoft.pai.runtimeplugin``,
``hivedScheduler``): unknown keys are kept and ignored. The keys below are validated:
``gangAllocation`` (OpenPAI protocol v2 schema), and dlsubmit's own ``placement``, ``gpuType``,
``enforceBinding``, ``gpuIsolation`` (``node``: every task sees its node's GPUs of the job and
``LOCAL_RANK`` picks, the default; ``task``: each task sees only its own GPUs) and ``checkpoint``
(signal and grace of the checkpoint contract, same grammar as slurm_plugin/marker.py) and
``opportunistic`` (``true``: the job only uses GPUs production jobs leave free and is preempted
first; its marker carries ``class=opportunistic``).
"""

from __future__ import annotations

from typing import Any, Literal

from slurm_plugin import marker
from submit.options import SLURM_NAME_RE as _GRES_TYPE_RE  # one rule for every Slurm name
from submit.validation import Bool, Int, OpenStruct, Struct
from submit.validation import marker as field_type


def _signal(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("must be a string")
    try:
        return marker.make(v, 60).signal
    except marker.MarkerError:
        raise ValueError(f"must be one of {', '.join(marker.ALLOWED_SIGNALS)}") from None


def _gpu_type(v: Any) -> str:
    if not isinstance(v, str):   # worded with the fix when YAML read a number (gpuType: 100)
        raise ValueError("must be a string")
    if not _GRES_TYPE_RE.match(v):
        raise ValueError("must be a GRES type name ([A-Za-z0-9_.-]+, not starting with -), e.g. a100")
    return v


Signal = field_type("Signal", str, _signal)
"""A checkpoint signal name (slurm_plugin/marker.py's grammar), kept in its short form (``USR2``)."""
GresType = field_type("GresType", str, _gpu_type)


class Checkpoint(Struct, kw_only=True):
    """``extras.checkpoint``: ``{signal: USR2, grace: 60}`` (seconds)."""

    signal: Signal | None = None  # type: ignore[valid-type]
    grace: Int(1, marker.MAX_GRACE_S) | None = None  # type: ignore[valid-type]


class Extras(OpenStruct, kw_only=True):
    """Validated view of ``extras``; other keys are left alone."""

    gangAllocation: Bool = True  # type: ignore[valid-type]
    placement: Literal["consolidate", "spread"] = "consolidate"
    gpuType: GresType | None = None  # type: ignore[valid-type]
    enforceBinding: Bool | None = None  # type: ignore[valid-type]
    gpuIsolation: Literal["node", "task"] = "node"
    checkpoint: Checkpoint | None = None
    opportunistic: Bool = False  # type: ignore[valid-type]
