"""A Gittins duration distribution learned from a cluster's own finished jobs.

``dlprio simulate --durations-from TRACE`` takes the GPU·s of every job of ``TRACE`` (any
format the trace readers know, e.g. a ``dlprio history export``; a trace row is a finished job,
so running jobs never enter) as the samples of :class:`prioritizer.policy.gittins.GittinsDistribution`.
Below ``min_samples`` the packaged distribution (``prioritizer.policy.durations``) is used
instead and the returned note says so: a handful of jobs is no distribution.
:class:`Durations` names the source of a replay's distribution for ``dlprio tune`` (and its
walk-forward points) and the daemon's ``auto_tune`` replays, as plain data an array task can
carry.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def samples_ended_by(trace: Trace, until: float | None) -> list[float]:
    """GPU·s of the jobs of ``trace`` that could have ended by ``until`` (seconds of trace
    time): submitted and run at or before it (``submit + duration <= until``); every job
    when ``until`` is None (a history of finished jobs). A job still running at ``until``
    in every schedule is never seen, as a daemon would not yet have seen it end; a job that
    waited may be counted a little before its real end."""
    return [j.num_gpus * j.duration for j in trace.jobs
            if j.num_gpus > 0 and j.duration > 0
            and (until is None or j.submit + j.duration <= until)]


@dataclass(frozen=True)
class Durations:
    """Where a replay's Gittins distribution comes from (``tiresias-gittins`` ranks by it,
    ``preempt_gain`` weighs preemptions by it), as ``dlprio tune`` and the daemon's
    ``auto_tune`` give it: ``file``, a samples CSV (``--durations``, ``gittins_samples:
    FILE``); ``trace``, a trace whose jobs are learned from (``--durations-from``);
    ``history``, learned from the replayed trace's own jobs that ended by ``until``
    (``--durations-from-history``, ``gittins_samples: history``: what the daemon knows at
    that moment); none of them: the packaged samples. ``min_samples``: fewest jobs a learned
    distribution needs, else the packaged one."""

    file: str | None = None
    trace: str | None = None
    history: bool = False
    until: float | None = None
    min_samples: int = MIN_SAMPLES

    def distribution(self, replayed: Trace | None = None) -> tuple[GittinsDistribution, str]:
        """The distribution and a one-line note of where it came from; ``replayed``: the
        trace being replayed, unwindowed (needed with ``history``).

        Raises:
            ValueError: the samples file or trace cannot be read (one line naming it).
        """
        if self.file:
            from prioritizer.samplesfile import load_distribution as load_file
            return load_file(self.file), f"Gittins samples from {self.file}"
        if self.trace:
            from prioritizer.sim.traces import TraceError, read_trace
            try:
                source = read_trace(self.trace)
            except TraceError as exc:
                raise ValueError(str(exc)) from None
            return learned_distribution(samples_from_trace(source), self.min_samples, self.trace)
        if self.history:
            if replayed is None:
                raise ValueError("a distribution learned from history needs the replayed trace")
            where = "the history" + ("" if self.until is None else
                                     f" ended by {self.until:g} s of trace time")
            return learned_distribution(samples_ended_by(replayed, self.until),
                                        self.min_samples, where)
        return load_distribution(), "the packaged Gittins samples (yarn-gput1000.csv)"
