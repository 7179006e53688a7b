"""Remaining run time of each job for one forecast draw (pure; the caller seeds the RNG).

A job's total service ``S`` (GPU·s) is drawn from the learned duration distribution
(:class:`prioritizer.policy.gittins.GittinsDistribution`, the samples the Gittins policy uses)
*conditioned on what the job has attained*: uniformly among the samples above its attained
service ``a``, so the remaining service is ``S - a`` and the remaining run time
``(S - a) / GPUs`` seconds. A job that has outlived every sample is given as much again as it
has attained (``a / GPUs`` seconds: the history says nothing about it, and "half done" is the
median guess of a job whose age is all that is known). A run ends at its Slurm time limit at
the latest, so the remaining run time is at most ``time_limit_s`` minus the current run's
length (``time_limit_s`` for a pending job). A job whose ``remaining_s`` is known keeps it.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

from prioritizer.forecast.world import ForecastJob


def needs_draw(job: ForecastJob) -> bool:
    """Whether ``job``'s remaining run time is unknown (drawn in each draw)."""
    return job.remaining_s is None


def remaining_s(job: ForecastJob, samples: Sequence[float], now: float,
                rng: random.Random) -> float:
    """Remaining run time of ``job`` in seconds for one draw (see module doc).

    Args:
        job: the job at the forecast moment.
        samples: total service of past jobs, GPU·s, sorted ascending (non-empty).
        now: the forecast moment, s.
        rng: the draw's random source.
    """
    if job.remaining_s is not None:
        return max(job.remaining_s, 0.0)
    a = job.attained_gpu_s
    lo = bisect.bisect_right(samples, a)
    service = samples[rng.randrange(lo, len(samples))] - a if lo < len(samples) else a
    left = service / job.gpus
    if job.time_limit_s is not None:
        ran = now - job.run_start if job.phase == "running" and job.run_start is not None else 0.0
        left = min(left, max(job.time_limit_s - ran, 0.0))
    return left
