"""What the incremental scheduler's helpers read of it (:class:`SchedulerState`): the few
attributes and bounds that :class:`~prioritizer.policy.fast.one_node.OneNodeVictims` and
:class:`~prioritizer.policy.fast.quiet.QuietProof` need, so that they depend on this small
interface and not on ``Scheduler`` itself (``policy.fast.incremental``, which owns them).
Units: seconds, GPUs. No I/O.
"""

from __future__ import annotations

from typing import Any, Protocol

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.placement import FreeMap
from prioritizer.policy.fast.node_bound import NodeBound
from prioritizer.policy.fast.records import Tracked


class SchedulerState(Protocol):
    """The scheduler as its helpers see it (``Scheduler`` has each of these)."""

    #: the policy's settings (``min_run_s``: the thrash guard of ``may_be_victim``)
    config: PolicyConfig
    #: every job the scheduler tracks, by id
    jobs: dict[int, Tracked]
    #: free GPUs per node now
    free: FreeMap
    #: per job shape (GPUs per node): the eligible pending jobs' ``(sort key, id)``, in
    #: start order
    groups: dict[tuple[int, ...], list[tuple[Any, int]]]
    #: ids of the jobs checkpointing (signalled, still holding their GPUs)
    grace: dict[int, None]
    #: how many tracked jobs are not preemptible
    fixed: int
    #: how many tracked jobs have no oracle duration
    no_oracle: int
    #: the per-node bound (``srtf`` on real nodes), or None
    node_bound: NodeBound | None

    def room_above(self, now: float) -> Any:
        """``(level) -> GPUs`` of preemptible running jobs above a level at ``now``, or
        None (see ``FastSearch.above``)."""

    def victim_bound(self, now: float, fitted: list[Any]) -> Any:
        """``(level, need, extra, soon) -> bool`` (``FastSearch.may_fit``) at ``now``, or
        None; it keeps in ``fitted[0]`` the ``(level, need, extra)`` it last let pass."""

    def due_proof(self, now: float, fitted: list[Any]) -> Any:
        """``(level, need, soon) -> bool`` (``FastSearch.due``) at ``now``, or None."""

    def clear_of_ends(self, now: float, level: float) -> bool:
        """Whether no oracle end of a preemptible running job lies within ``2 × SLACK_S``
        of ``now + level``."""
