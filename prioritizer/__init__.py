"""Tiresias-style prioritisation for Slurm GPU jobs, in three packages along one pipeline.

``policy`` (pure: model, config, the 2D-LAS/Gittins decision, placement) is shared by
``daemon`` (Slurm in, ledger of attained service, priorities and preemptions out) and ``sim``
(job traces in, the same decisions replayed on a modeled cluster, JCT figures out).
"""
