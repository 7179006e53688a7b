"""Policy settings shared by the daemon (``dlprio run``) and the simulator (``dlprio simulate``).

One frozen dataclass, :class:`PolicyConfig`, holds every knob of the Tiresias policy
(docs/design.md, "Policy rules and their sources") and of the cost model the simulator applies.
The daemon loads the ``policy:`` section of its YAML file through
:meth:`PolicyConfig.from_mapping`, which validates names and types and raises a
``ValueError`` naming the offending key. Units: seconds, and GPU·seconds for service.

Sources of the defaults
-----------------------
* ``thresholds_gpu_s = (3250, 7200)``: 3 queues, the values in the Tiresias reference
  simulator's code (SymbioticLab/Tiresias, ``simulator/jobs.py`` queue limits); the paper
  (NSDI'19, section 6) also cites 2 queues at 3600 GPU·s.
* ``starve_knob = 8``: the paper's STARVELIMIT setting (section 4.2, "promotion knob").
* ``min_run_s = 60``: thrash guard; a job is not preempted in its first minute of a run.
* ``gittins_quantum_gpu_s = 3250``: service quantum Δ of the Gittins index, the first queue
  threshold (paper section 4.2 uses the queue width as Δ).
* ``checkpoint_overhead_s = 15``: checkpoint + restore per preemption; the seed notes measured
  1-27 s for CV models.
* ``requeue_delay_s = 121``: Slurm sets BeginTime = now + cred_expire + 1 on ``scontrol
  requeue`` (slurm.conf(5) ``AuthInfo cred_expire`` default 120 s).
* ``decision_interval_s = 30``: the daemon's default cycle (docs/design.md, "Ledger and daemon").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

POLICY_NAMES = ("tiresias-las", "tiresias-gittins", "las", "fifo", "fifo-fit", "srtf")


@dataclass(frozen=True)
class PolicyConfig:
    """Settings of one policy; every default is documented in the module docstring.

    Attributes:
        policy: one of :data:`POLICY_NAMES`.
        thresholds_gpu_s: increasing queue thresholds in GPU·s (K-1 values for K queues) used
            by ``tiresias-las`` and ``tiresias-gittins``.
        thresholds_s: increasing queue thresholds in seconds of run time for the 1D ``las``
            (the reference's ``dlas`` uses the same numbers as seconds).
        starve_knob: a PENDING job waiting ``>= starve_knob x`` its last run time goes back
            to queue 0; 0 disables promotion.
        min_run_s: a RUNNING job is never preempted before it has run this long (seconds).
        gittins_quantum_gpu_s: Δ of the Gittins index, GPU·s.
        checkpoint_overhead_s: seconds a preempted job keeps its GPUs without progress
            (checkpoint + restore, charged once per preemption). Simulator cost.
        requeue_delay_s: seconds a requeued job must wait before it may start again
            (Slurm BeginTime). Simulator cost.
        decision_interval_s: the daemon's cycle; preemptions happen only on multiples of it.
            Simulator cost; 0 means "at every event".
        preemption: False turns preemption off for every policy.
    """

    policy: str = "tiresias-las"
    thresholds_gpu_s: tuple[float, ...] = (3250.0, 7200.0)
    thresholds_s: tuple[float, ...] = (3250.0, 7200.0)
    starve_knob: float = 8.0
    min_run_s: float = 60.0
    gittins_quantum_gpu_s: float = 3250.0
    checkpoint_overhead_s: float = 15.0
    requeue_delay_s: float = 121.0
    decision_interval_s: float = 30.0
    preemption: bool = True

    def __post_init__(self) -> None:
        if self.policy not in POLICY_NAMES:
            raise ValueError(
                f"policy: unknown policy {self.policy!r}; valid: {', '.join(POLICY_NAMES)}")
        for name in ("thresholds_gpu_s", "thresholds_s"):
            values = getattr(self, name)
            if any(not math.isfinite(v) or v <= 0 for v in values):
                raise ValueError(f"{name}: thresholds must be finite and > 0, got {values}")
            if any(b <= a for a, b in zip(values, values[1:])):
                raise ValueError(f"{name}: thresholds must increase strictly, got {values}")
        for name in ("starve_knob", "min_run_s", "checkpoint_overhead_s", "requeue_delay_s",
                     "decision_interval_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name}: must be a finite number >= 0, got {value}")
        if not math.isfinite(self.gittins_quantum_gpu_s) or self.gittins_quantum_gpu_s <= 0:
            raise ValueError(
                f"gittins_quantum_gpu_s: must be > 0, got {self.gittins_quantum_gpu_s}")

    def zero_cost(self) -> PolicyConfig:
        """The same policy without modeled costs (``--zero-cost``): no checkpoint overhead,
        no requeue delay, decisions at every event, no thrash guard (it exists only
        because preemption costs something)."""
        return dataclasses.replace(self, checkpoint_overhead_s=0.0, requeue_delay_s=0.0,
                                   decision_interval_s=0.0, min_run_s=0.0)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PolicyConfig:
        """Build a config from a mapping (the ``policy:`` section of ``dlprio.yaml``).

        Missing keys take their defaults. Thresholds may be given as a list.

        Raises:
            ValueError: naming the key, for an unknown key, a wrong type or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"policy: expected a mapping, got {type(data).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, raw in data.items():
            if key not in fields:
                raise ValueError(
                    f"policy.{key}: unknown key; valid keys: {', '.join(sorted(fields))}")
            values[key] = _coerce(key, raw, type(getattr(cls(), key)))
        try:
            return cls(**values)
        except ValueError as exc:
            raise ValueError(f"policy.{exc}") from None


def _coerce(key: str, raw: Any, kind: type) -> Any:
    """Check ``raw`` against the type of the default; return the value to store."""
    if kind is bool:
        if not isinstance(raw, bool):
            raise ValueError(f"policy.{key}: expected true or false, got {raw!r}")
        return raw
    if kind is str:
        if not isinstance(raw, str):
            raise ValueError(f"policy.{key}: expected a string, got {raw!r}")
        return raw
    if kind is tuple:
        if not isinstance(raw, (list, tuple)) or not all(_is_number(v) for v in raw):
            raise ValueError(f"policy.{key}: expected a list of numbers, got {raw!r}")
        return tuple(float(v) for v in raw)
    if not _is_number(raw):
        raise ValueError(f"policy.{key}: expected a number, got {raw!r}")
    return float(raw)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
