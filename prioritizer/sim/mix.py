"""A GPU-sharing workload derived from a trace of whole-GPU jobs (Philly), by a fixed rule.

Rule (:func:`sharing_mix`): number the trace's 1-GPU jobs 1, 2, 3, ... in trace order
(submit time, ties in file order). The n-th becomes

* a shard job of ``share`` GPU (default 0.5) when n is a multiple of ``shard_every``;
* an opportunistic job when n is a multiple of ``opportunistic_every`` (it may be a shard
  job too).

Multi-GPU jobs stay whole-GPU production jobs. Submit times and durations are the trace's (a
shard job is taken to run as long on its share as on a whole GPU). The rule reads only a job's
GPU count and its place in the trace, never an outcome of a replay.

The comparison ``benchmarks/bench_sharing.py`` prints: the mix replayed with sharing, against
:func:`production_alone` (the mix's production jobs only, each shard job on a whole GPU: the
cluster without sharing).
"""

from __future__ import annotations

from dataclasses import replace

from prioritizer.sim.traces import Trace


def sharing_mix(trace: Trace, shard_every: int = 2, opportunistic_every: int = 4,
                share: float = 0.5) -> Trace:
    """``trace`` with the module doc's rule applied (job ids and order unchanged)."""
    if shard_every < 1 or opportunistic_every < 1:
        raise ValueError("shard_every and opportunistic_every must be >= 1")
    if not 0 < share < 1:
        raise ValueError(f"share must be between 0 and 1, got {share}")
    jobs, n = [], 0
    for job in trace.jobs:
        if job.num_gpus == 1:
            n += 1
            job = replace(job, share=share if n % shard_every == 0 else 0.0,
                          opportunistic=n % opportunistic_every == 0)
        jobs.append(job)
    return replace(trace, jobs=tuple(jobs))


def production_alone(trace: Trace) -> Trace:
    """The production jobs of ``trace``, each on whole GPUs (shard jobs on one GPU), job ids
    renumbered 0.. in order (the cluster without sharing). A job's ``name`` stays its trace
    id, so results pair with the mix's by name."""
    kept = [j for j in trace.jobs if not j.opportunistic]
    return replace(trace, jobs=tuple(replace(j, job_id=i, share=0.0)
                                     for i, j in enumerate(kept)))
