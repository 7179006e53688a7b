"""A Gittins duration distribution learned from a cluster's own finished jobs.

``dlprio simulate --durations-from TRACE`` takes the GPU·s of every job of ``TRACE`` (any
format the trace readers know, e.g. a ``dlprio history export``; a trace row is a finished job,
so running jobs never enter) as the samples of :class:`prioritizer.policy.gittins.GittinsDistribution`.
Below ``min_samples`` the packaged distribution (``prioritizer.policy.durations``) is used
instead and the returned note says so: a handful of jobs is no distribution.
"""

from __future__ import annotations

from prioritizer.policy.durations import load_distribution
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.sim.traces import Trace

#: Fewest samples a learned distribution needs (below: the packaged one, with a note).
MIN_SAMPLES = 100


def samples_from_trace(trace: Trace) -> list[float]:
    """Total service of each job, GPU·s (GPUs × duration s), in trace order."""
    return [j.num_gpus * j.duration for j in trace.jobs if j.num_gpus > 0 and j.duration > 0]


def learned_distribution(samples: list[float], min_samples: int = MIN_SAMPLES,
                         source: str = "trace") -> tuple[GittinsDistribution, str]:
    """The distribution of ``samples`` and a one-line note of where it came from; the packaged
    distribution when there are fewer than ``min_samples`` samples."""
    if len(samples) < min_samples:
        return load_distribution(), (
            f"only {len(samples)} finished job(s) in {source} (minimum {min_samples}): "
            "using the packaged distribution (yarn-gput1000.csv)")
    return GittinsDistribution(samples), (
        f"Gittins distribution learned from {len(samples)} finished job(s) in {source}")
