"""Policy settings shared by the daemon (``dlprio run``) and the simulator (``dlprio simulate``).

One frozen dataclass, :class:`PolicyConfig`, holds every knob of the Tiresias policy
(docs/design.md, "Policy rules and their sources") and of the cost model the simulator applies.
Its field types (msgspec bounds, :mod:`prioritizer.policy.validation`) and :meth:`PolicyConfig.rules`
are the only copy of the rules, checked on every construction. The ``policy:`` section of a YAML file is read
through :meth:`PolicyConfig.from_mapping`, which raises
:class:`~prioritizer.policy.validation.ConfigError` with one line per problem naming the key
path (``policy.thresholds_gpu_s[1]``) and the allowed range. Units: seconds, and GPU·seconds for service.

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
* ``wait_guard = 0``: off, the paper's rule (no run is guarded beyond ``min_run_s``).
* ``requeue_guard = 0``: off, the paper's rule (a job may be preempted again at every run).
* ``preempt_gain = 0``: off, the paper's rule (a preemption need not repay its cost).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Mapping, get_args

import msgspec

from prioritizer.policy.validation import check, shown, validate

PolicyName = Literal["tiresias-las", "tiresias-gittins", "las", "fifo", "fifo-fit", "srtf"]
POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)
#: The policies only a replay runs: an oracle that knows each job's true duration, which no
#: real cluster does. The daemon's config check refuses them, so ``dlprio tune --output``
#: never writes one into a ``dlprio.yaml`` snippet.
SIMULATE_ONLY: tuple[str, ...] = ("srtf",)

#: A number of seconds (or GPU·s) >= 0; an int is taken as a float, a bool is refused, and
#: every float of a config must be finite (:func:`~prioritizer.policy.validation.check`).
Seconds = Annotated[float, msgspec.Meta(ge=0)]
#: A number > 0.
Positive = Annotated[float, msgspec.Meta(gt=0)]
#: The K-1 strictly increasing thresholds of K queues (a YAML list).
Thresholds = tuple[Positive, ...]
#: Seconds: Slurm's own requeue delay, ``cred_expire`` 120 s + 1 (see the module doc).
DEFAULT_REQUEUE_DELAY_S = 121.0


@dataclasses.dataclass(frozen=True)
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
        promoted_preempts: True (default, the paper's rule) lets a job that starvation
            promotion lifted above the queue of its whole attained service preempt others.
            False: such a job goes first to free GPUs but preempts no one, since by its
            whole attained service it is no shorter than the last-queue jobs it would
            evict, so each such preemption swaps long jobs at a checkpoint and requeue's
            cost (docs/simulator.md, "Who pays"). A tuning grid parameter.
        wait_guard: a RUNNING job is not preempted before it has run ``wait_guard ×`` as
            long as it waited before this run (since its submission or its last run's end,
            requeue delay included; ``min_run_s`` still applies if longer); 0 turns the
            guard off. With 1, every wait is repaid by a run at least as long, so a job's
            waits add up to at most its run time plus its last wait (docs/simulator.md,
            "The wait guard"). A tuning grid parameter.
        requeue_guard: a RUNNING job is not preempted while the seconds it spent without
            GPUs since its first start (its waits between runs, requeue delays included)
            exceed ``requeue_guard ×`` its run time so far (``JobView.attained_s``: all its
            runs, this one included; ``min_run_s`` still applies). A job's first run is
            never guarded by it (nothing lost yet), so every job may be preempted once;
            after that each wait must be repaid: at every preemption a job has lost at most
            ``requeue_guard ×`` its run time, so its JCT is at most its first wait, its last
            wait and ``(1 + requeue_guard) ×`` its run time (docs/simulator.md, "The requeue
            guard"). 0 turns it off. A tuning grid parameter.
        preempt_gain: a waiter preempts only when the preemption repays ``preempt_gain ×``
            its cost by the duration distribution the driver passes: with ``p`` the chance
            that the waiter ends within its quantum (the service up to its next queue
            threshold; ``GittinsDistribution.outlook``) and ``r`` the seconds it runs in it,
            ``p ×`` the shortest expected remaining time among its ``k`` victims must exceed
            ``preempt_gain × k ×`` (``r`` + ``checkpoint_overhead_s`` + ``requeue_delay_s``)
            (``victims.preemption_pays``). 0 turns it off, and so does the lack of a
            distribution. A tuning grid parameter (docs/simulator.md, "The gain rule").

    Raises:
        ConfigError: (a ``ValueError``) on construction with a bad value, one line per
            problem (``starve_knob: must be >= 0 (got -1)``); :meth:`from_mapping` puts the
            ``policy.`` section in front of each key.
    """

    policy: PolicyName = "tiresias-las"
    thresholds_gpu_s: Thresholds = (3250.0, 7200.0)
    thresholds_s: Thresholds = (3250.0, 7200.0)
    starve_knob: Seconds = 8.0
    min_run_s: Seconds = 60.0
    gittins_quantum_gpu_s: Positive = 3250.0
    checkpoint_overhead_s: Seconds = 15.0
    requeue_delay_s: Seconds = DEFAULT_REQUEUE_DELAY_S
    decision_interval_s: Seconds = 30.0
    preemption: bool = True
    promoted_preempts: bool = True
    wait_guard: Seconds = 0.0
    requeue_guard: Seconds = 0.0
    preempt_gain: Seconds = 0.0

    def __post_init__(self) -> None:
        check(self)

    def rules(self) -> Iterator[tuple[str, str]]:
        """The rules across values, as ``(key, message)`` pairs: thresholds increase strictly."""
        for name in ("thresholds_gpu_s", "thresholds_s"):
            values = getattr(self, name)
            if any(b <= a for a, b in zip(values, values[1:])):
                yield name, f"thresholds must increase strictly (got {shown(list(values))})"

    @property
    def uses_distribution(self) -> bool:
        """Whether decisions read a duration distribution: ``tiresias-gittins`` ranks by it,
        ``preempt_gain`` > 0 weighs preemptions by it (drivers pass one then)."""
        return self.policy == "tiresias-gittins" or self.preempt_gain > 0

    def zero_cost(self) -> PolicyConfig:
        """The same policy without modeled costs (``--zero-cost``): no checkpoint overhead,
        no requeue delay, decisions at every event, no thrash guard (it exists only
        because preemption costs something)."""
        return dataclasses.replace(self, checkpoint_overhead_s=0.0, requeue_delay_s=0.0,
                                   decision_interval_s=0.0, min_run_s=0.0)

    def with_cluster_requeue_delay(self, cluster_delay_s: float) -> PolicyConfig:
        """The same policy with the cluster's requeue delay (seconds: ``cred_expire`` + 1 from
        ``scontrol show config``, :func:`slurm_plugin.slurm.records.requeue_delay_s`) where
        ``requeue_delay_s`` is left at its default, 121 s (Slurm's own default delay); a value
        set otherwise is kept (a site may count its container start in it). ``self`` when
        nothing changes. The one home of this rule: the daemon and the commands that read
        the cluster from Slurm (``--cluster-from-slurm``) both apply it."""
        if self.requeue_delay_s != DEFAULT_REQUEUE_DELAY_S or cluster_delay_s == self.requeue_delay_s:
            return self
        return dataclasses.replace(self, requeue_delay_s=cluster_delay_s)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, prefix: str = "policy") -> PolicyConfig:
        """Build a config from a mapping (the ``policy:`` section of ``dlprio.yaml``, or the
        section plus command-line overrides). Missing keys take their defaults.

        Raises:
            ConfigError: (a ``ValueError``) one line per problem, each naming the key path
                under ``prefix`` and the allowed range, e.g.
                ``policy.starve_knob: must be >= 0 (got -1)``.
        """
        return validate(cls, data, prefix)
