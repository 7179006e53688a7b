"""Gittins index of a job from a duration distribution (pure; used by ``tiresias-gittins``).

Tiresias (NSDI'19, section 4.2, "2D-Gittins") ranks a job with attained service ``a`` by

    G(a) = P(S - a <= Δ | S > a) / E[min(S - a, Δ) | S > a]

where ``S`` is the total service (GPU·s) of a job drawn from the cluster's history and Δ the
service quantum: the chance of finishing within the next quantum per unit of service spent
on it. Higher index = higher priority. The reference simulator computed the expectation with
``S`` instead of ``S - a``; this module uses ``S - a`` (docs/design.md, "Policy rules and their sources"). The samples are
passed in by the driver (the policy does no I/O; see ``prioritizer.policy.durations`` for loading).
"""

from __future__ import annotations

import bisect
import math
from itertools import accumulate
from typing import Iterable


class GittinsDistribution:
    """Empirical service distribution with O(log n) index queries.

    Args:
        samples_gpu_s: total service of past jobs, GPU·s (any order; each > 0).

    Raises:
        ValueError: no samples, or a sample that is not a positive finite number.
    """

    def __init__(self, samples_gpu_s: Iterable[float]) -> None:
        data = sorted(float(s) for s in samples_gpu_s)
        if not data:
            raise ValueError("duration distribution: no samples")
        if not all(0 < x < math.inf for x in data):   # NaN sorts anywhere: check each
            raise ValueError("duration distribution: samples must be finite and > 0")
        self.samples = tuple(data)
        self._prefix = (0.0, *accumulate(data))  # _prefix[i] = sum(data[:i])

    def index(self, attained_gpu_s: float, quantum_gpu_s: float) -> float:
        """Gittins index G(a) (1 / GPU·s) for attained service ``a`` and quantum Δ.

        A job that has outlived every sample gets 0 (lowest priority): the history says
        nothing about it, and ranking it last is what the limit of the formula gives when
        the tail grows without bound.
        """
        a, delta = attained_gpu_s, quantum_gpu_s
        data, n = self.samples, len(self.samples)
        lo = bisect.bisect_right(data, a)          # first sample > a
        if lo == n:
            return 0.0
        hi = bisect.bisect_right(data, a + delta)  # first sample > a + Δ
        finishing = hi - lo
        within = self._prefix[hi] - self._prefix[lo] - a * finishing  # Σ (S - a), a < S <= a+Δ
        expected_cost = within + delta * (n - hi)                     # × n_tail, cancels below
        return finishing / expected_cost

    def mean_residual(self, attained_gpu_s: float) -> float:
        """Expected remaining service E[S - a | S > a] (GPU·s) of a job with attained
        service ``a``, over the samples above ``a``. A job that has outlived every sample
        gets ``a`` itself: the history says nothing about it, and a job that ran this long
        is taken to run about as long again (the tail of a heavy-tailed distribution)."""
        a = attained_gpu_s
        data, n = self.samples, len(self.samples)
        lo = bisect.bisect_right(data, a)          # first sample > a
        if lo == n:
            return a
        return (self._prefix[n] - self._prefix[lo]) / (n - lo) - a

    def outlook(self, attained_gpu_s: float, quantum_gpu_s: float) -> tuple[float, float]:
        """``(P(S - a <= Δ | S > a), E[min(S - a, Δ) | S > a])`` (GPU·s) for attained
        service ``a`` and quantum Δ (``inf``: no quantum, i.e. ``(1, mean_residual(a))``):
        the chance that a job ends within its next Δ and the service it gets in it, the two
        halves of :meth:`index`. Past every sample the job's remaining service is taken as
        ``a`` (as :meth:`mean_residual`)."""
        a, delta = attained_gpu_s, quantum_gpu_s
        data, n = self.samples, len(self.samples)
        lo = bisect.bisect_right(data, a)
        if lo == n:
            return (1.0, a) if a <= delta else (0.0, delta)
        if delta == float("inf"):
            return 1.0, (self._prefix[n] - self._prefix[lo]) / (n - lo) - a
        hi = bisect.bisect_right(data, a + delta)
        within = self._prefix[hi] - self._prefix[lo] - a * (hi - lo)
        return (hi - lo) / (n - lo), (within + delta * (n - hi)) / (n - lo)
