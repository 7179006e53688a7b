"""The replay speed-ups of the policy: the same decisions as ``prioritizer.policy.decide``,
kept up to date by events instead of recomputed from a snapshot.

:class:`~prioritizer.policy.fast.incremental.Scheduler` holds the policy's state between
decisions (the simulator and the forecast drive it); ``one_node`` and ``quiet`` are its
victim-search shortcuts for ``srtf`` on real nodes, and
:class:`~prioritizer.policy.fast.search.FastSearch` is the search strategy it hands to
``find_preemptions``. Every rule comes from ``prioritizer.policy``; nothing here decides
differently (the property tests compare each decision with ``decide``). The rules never
import this package, and neither does the daemon (import-linter contracts in pyproject.toml).
"""
