"""GPU-sharing workloads derived from a trace of whole-GPU jobs (Philly), by fixed rules.

**Extra opportunistic load** (:func:`opportunistic_mix`), as TGS (NSDI'23) and AntMan
(OSDI'20) evaluate sharing: opportunistic jobs are work offered *beside* the production load,
work that would otherwise wait for idle GPUs, and each uses only part of a GPU.

* Production stream: the trace's first ``production_jobs`` jobs, unchanged (whole-GPU
  production jobs). Their arrival window is [0, S], S the last one's submit time.
* Candidates: the trace's 1-GPU jobs after those, window by window: a job submitted in
  [k·S, (k+1)·S) (k = 1, 2, ...) is moved to submit - k·S, so every window of the trace after
  the production one is laid over it. Whole windows are taken until the candidates' offered
  load reaches ``load`` or the trace ends. A candidate's offered load is ``share`` × its
  duration cut at S (after the move) over ``total_gpus`` × S.
* Thinning, evenly in trace order: with p = min(1, ``load`` / the candidates' offered load),
  the n-th candidate (n = 1, 2, ...) is kept when floor(n·p) > floor((n-1)·p) (a share p of
  the candidates: the kept jobs offer about ``load``).
* Each kept candidate becomes an opportunistic shard job of ``share`` GPU (default 0.5) with
  its moved submit time and its trace duration (it runs as long on its share as on a GPU).

The mix is sorted by submit time (production first at equal times, then trace order), job
ids 0.. in that order; names stay the trace's ids. ``benchmarks/bench_sharing.py`` replays it
against :func:`production_alone` (the cluster without sharing: the extra work is not run,
since without the opportunistic class it would compete with production) and against
:func:`whole_gpus` (opportunistic jobs each holding a whole GPU: what the shards add).

**Split** (:func:`sharing_mix`): number the trace's 1-GPU jobs 1, 2, 3, ... in trace order
(submit time, ties in file order). The n-th becomes

* a shard job of ``share`` GPU (default 0.5) when n is a multiple of ``shard_every``;
* an opportunistic job when n is a multiple of ``opportunistic_every`` (it may be a shard
  job too).

Multi-GPU jobs stay whole-GPU production jobs. Submit times and durations are the trace's (a
shard job is taken to run as long on its share as on a whole GPU).

The comparison ``benchmarks/bench_sharing.py --mix split`` prints: the mix replayed with
sharing, against :func:`production_alone` (the mix's production jobs only, each shard job on a
whole GPU: the cluster without sharing).

Both rules read only GPU counts, durations and places in the trace, never an outcome of a
replay.
"""

from __future__ import annotations

from dataclasses import replace

from prioritizer.sim.traces import Trace, TraceJob


def opportunistic_mix(trace: Trace, production_jobs: int, total_gpus: int, load: float,
                      share: float = 0.5) -> Trace:
    """The extra-opportunistic-load mix of ``trace`` (module doc): its first
    ``production_jobs`` jobs and opportunistic ``share``-GPU jobs offering about ``load`` (GPU·s
    over ``total_gpus`` × the production arrival window; the thinning keeps a share of the
    candidates, not of their load, and less when the trace runs out).

    Raises:
        ValueError: ``production_jobs`` not below the trace's length, the production jobs all
            at one submit time, ``total_gpus`` < 1, ``load`` <= 0 or ``share`` outside (0, 1).
    """
    if not 0 < production_jobs < len(trace.jobs):
        raise ValueError(f"production_jobs must be between 1 and {len(trace.jobs) - 1}, "
                         f"got {production_jobs}")
    if total_gpus < 1 or not load > 0 or not 0 < share < 1:
        raise ValueError("total_gpus must be >= 1, load > 0 and share between 0 and 1")
    production = trace.jobs[:production_jobs]
    span = production[-1].submit
    if span <= 0:
        raise ValueError("the production jobs all arrive at once: no arrival window")
    candidates: list[TraceJob] = []
    offered, window = 0.0, 1
    for job in trace.jobs[production_jobs:]:
        k = int(job.submit // span)
        if k > window:   # a window is complete: stop once it brought enough
            if offered >= load:
                break
            window = k
        if job.num_gpus != 1:
            continue
        moved = job.submit - k * span
        candidates.append(replace(job, submit=moved, share=share, opportunistic=True))
        offered += share * min(job.duration, span - moved) / (total_gpus * span)
    p = min(1.0, load / offered) if offered else 0.0
    kept = [job for n, job in enumerate(candidates, 1) if int(n * p) > int((n - 1) * p)]
    merged = sorted([(j.submit, 0, i, j) for i, j in enumerate(production)]
                    + [(j.submit, 1, i, j) for i, j in enumerate(kept)],
                    key=lambda entry: entry[:3])
    return replace(trace, jobs=tuple(replace(job, job_id=i)
                                     for i, (*_, job) in enumerate(merged)))


def whole_gpus(trace: Trace) -> Trace:
    """``trace`` with every shard job on a whole GPU (``share`` 0), classes unchanged."""
    return replace(trace, jobs=tuple(replace(j, share=0.0) for j in trace.jobs))


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
