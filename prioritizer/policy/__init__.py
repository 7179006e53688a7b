"""The policy, pure: no Slurm, no clock, no I/O beyond reading the packaged duration samples.

Input: a :class:`~prioritizer.policy.model.Snapshot` of jobs and nodes at a time ``now``; output:
:class:`~prioritizer.policy.model.Decisions` (queue, order, starts, preemptions) from ``decide``.
The daemon (``prioritizer.daemon``) and the simulator (``prioritizer.sim``) both call it.
"""
