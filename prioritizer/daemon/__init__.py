"""The daemon ``dlprio run``: observe Slurm and the ledger, decide with ``prioritizer.policy``, act.

Input: ``squeue``/``sinfo`` through ``slurm_plugin.slurm.client`` and the durable ledger of attained
service; output: priorities (SiteFactor or queue partitions), preemptions (checkpoint signal →
grace → requeue), the public snapshot read by ``dlqueue``, logs and metrics.
"""
