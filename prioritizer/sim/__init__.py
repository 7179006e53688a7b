"""The simulator ``dlprio simulate``: replay a job trace with the same ``prioritizer.policy``.

Input: a trace (Philly, ITP, Helios, Tiresias CSV formats) and a cluster shape; the engine applies
arrivals, starts, ends and preemptions to a modeled cluster; output: per-job JCT, summaries
(avg/median/p95 JCT, queueing delay, makespan), CSV and plots. It never imports the daemon.
"""
