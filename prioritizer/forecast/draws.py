"""Remaining run time of each job for one forecast draw (pure; the caller seeds the RNG).

What the cluster knows of job lengths at the forecast moment is two kinds of observation:
the total service (GPU·s) of every job that has ended (the learned duration distribution,
:class:`prioritizer.policy.gittins.GittinsDistribution`, the samples the Gittins policy uses),
and the service attained so far by every job still running or waiting after a run, whose
total is known only to be larger: a *right-censored* observation. The distribution of total
service is their **Kaplan-Meier** estimate (:class:`ServiceSurvival`; Kaplan & Meier, JASA
1958), the standard estimator under right censoring. The ended jobs alone would lean short:
at any moment the long jobs are the ones still running (the inspection paradox), and a
forecast drawn from them alone puts every end, and so every start, too early. The censored
jobs belong beside ended jobs of the same cluster only: with samples from elsewhere (the
packaged ones, a file) the caller passes none (:func:`prioritizer.forecast.forecast.forecast`,
``learned``).

A job's total service ``S`` is drawn from that estimate *conditioned on what the job has
attained*: above its attained service ``a``, each ended sample with its Kaplan-Meier mass,
so the remaining service is ``S - a`` and the remaining run time ``(S - a) / GPUs`` seconds.
The mass the estimate leaves beyond the largest ended sample (still-running jobs have run
longer than any ended one) stands for "longer than every ended job": a draw there gets
``2 · max(largest sample, a)`` in all, so a job that has outlived every sample is given as
much again as it has attained (the history says nothing about it, and "half done" is the
median guess of a job whose age is all that is known). A run ends at its Slurm time limit at
the latest, so the remaining run time is at most ``time_limit_s`` minus the current run's
length (``time_limit_s`` for a pending job). A job whose ``remaining_s`` is known keeps it
(and is not counted as censored: its end is known).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Sequence
from itertools import accumulate

from prioritizer.forecast.world import ForecastJob


def needs_draw(job: ForecastJob) -> bool:
    """Whether ``job``'s remaining run time is unknown (drawn in each draw)."""
    return job.remaining_s is None


class ServiceSurvival:
    """The Kaplan-Meier estimate of total service (GPU·s) from ended and censored jobs.

    Args:
        ended_gpu_s: total service of the ended jobs, GPU·s, each > 0 (non-empty).
        censored_gpu_s: service attained so far by jobs that have not ended, GPU·s (those
            not above 0 say nothing and are skipped).

    The estimate puts mass only on the ended samples: at each distinct value ``x`` with
    ``d`` ended there and ``n`` observations (ended or censored) at or above it, the
    survival steps down by the factor ``1 - d / n``. :attr:`tail` is what it leaves beyond
    the largest ended sample (0 when no censored job has run longer).
    """

    def __init__(self, ended_gpu_s: Iterable[float], censored_gpu_s: Iterable[float] = ()
                 ) -> None:
        ended = sorted(ended_gpu_s)
        if not ended:
            raise ValueError("duration samples: none")
        censored = sorted(c for c in censored_gpu_s if c > 0)
        values: list[float] = []
        masses: list[float] = []
        survival, at_risk = 1.0, len(ended) + len(censored)
        i = j = 0
        while i < len(ended):
            x = ended[i]
            while j < len(censored) and censored[j] < x:   # censored below x: out of the risk set
                j += 1
                at_risk -= 1
            d = bisect.bisect_right(ended, x, i) - i
            mass = survival * d / at_risk
            values.append(x)
            masses.append(mass)
            survival -= mass
            at_risk -= d
            i += d
        self.values = tuple(values)
        self._cumulative = tuple(accumulate(masses))
        self.tail = max(survival, 0.0)

    def total(self, attained_gpu_s: float, rng: random.Random) -> float:
        """One draw of a job's total service (GPU·s) given it has attained ``attained_gpu_s``
        (module doc)."""
        a = attained_gpu_s
        values, cumulative = self.values, self._cumulative
        lo = bisect.bisect_right(values, a)         # first sample > a
        below = cumulative[lo - 1] if lo else 0.0
        above = cumulative[-1] - below + self.tail
        if lo < len(values) and above > 0:
            k = bisect.bisect_left(cumulative, below + rng.random() * above, lo)
            if k < len(values):
                return values[k]
        return 2.0 * max(values[-1], a)


def survival_of(samples: Sequence[float], jobs: Iterable[ForecastJob]) -> ServiceSurvival:
    """The :class:`ServiceSurvival` of the ended jobs' ``samples`` (GPU·s) and the attained
    service of the ``jobs`` of a forecast whose end is unknown."""
    return ServiceSurvival(samples, (j.attained_gpu_s for j in jobs if needs_draw(j)))


def remaining_s(job: ForecastJob, survival: ServiceSurvival, now: float,
                rng: random.Random) -> float:
    """Remaining run time of ``job`` in seconds for one draw (see module doc).

    Args:
        job: the job at the forecast moment.
        survival: the distribution of total service (:func:`survival_of`).
        now: the forecast moment, s.
        rng: the draw's random source.
    """
    if job.remaining_s is not None:
        return max(job.remaining_s, 0.0)
    a = job.attained_gpu_s
    left = (survival.total(a, rng) - a) / job.gpus
    if job.time_limit_s is not None:
        ran = now - job.run_start if job.phase == "running" and job.run_start is not None else 0.0
        left = min(left, max(job.time_limit_s - ran, 0.0))
    return left
