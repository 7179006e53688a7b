"""What one ``decide`` keeps for the next (``Decisions.memo``): per job its queue state and
sort key, reused when the next snapshot holds the very same ``JobView`` object. A speed-up
of the daemon's cycle beside the rules: ``decide`` gives the same result with or without it
(tests/prioritizer/policy/test_policy_incremental.py). No I/O.
"""

from __future__ import annotations

from typing import Any

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import JobView, QueueState


class Memo:
    """Per-job results of one decision that the next one may reuse (``Decisions.memo``).

    ``entries[job_id] = (view, state, key, watch)``: reused only for the very same
    ``JobView`` object (frozen, so identical inputs), under the same config and
    distribution, and only for states that do not depend on ``now``; ``watch`` marks a
    pending job in a lower queue whose starvation promotion must be re-checked at ``now``.
    """

    __slots__ = ("config", "distribution", "entries")

    def __init__(self, config: PolicyConfig, distribution: GittinsDistribution | None) -> None:
        self.config, self.distribution = config, distribution
        self.entries: dict[int, tuple[JobView, QueueState, Any, bool]] = {}

    @staticmethod
    def reusable(memo: Any, config: PolicyConfig,
                 distribution: GittinsDistribution | None) -> dict[int, Any]:
        """The entries of ``memo`` (a previous ``Decisions.memo``) if it was made under
        ``config`` and ``distribution``, else none."""
        if isinstance(memo, Memo) and memo.config == config and memo.distribution is distribution:
            return memo.entries
        return {}
