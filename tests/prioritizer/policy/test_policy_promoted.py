"""``PolicyConfig.promoted_preempts``: a job that starvation promotion lifted above the queue of
its whole attained service preempts no one when it is False (it still starts first on free
GPUs); new jobs, and promoted ones whose whole service keeps them in their queue, preempt as
before. Cases worked out by hand on one 8-GPU node (thresholds 3250/7200 GPU·s; ``las``:
3250/7200 s)."""

from __future__ import annotations

import pytest

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.durations import load_distribution
from prioritizer.policy.model import Preemption
from tests.policy_helpers import pending, running, snapshot

NOW = 10_000.0
# 8 GPUs in the last queue since 0 s: 80,000 GPU·s attained, past its first minute
HOLDER = running(1, (8,), ("n0",), queue=2, attained=80_000.0)


def _promoted(whole_gpu_s: float) -> object:
    """8-GPU job promoted to queue 0 at 9,000 s with ``whole_gpu_s`` attained in all."""
    return pending(2, (8,), queue=0, queue_entry_time=9_000.0, attained_gpu_s=whole_gpu_s,
                   attained_s=whole_gpu_s / 8, service_base_gpu_s=whole_gpu_s,
                   last_run_s=1_000.0, last_run_end=1_000.0)


@pytest.mark.parametrize(("policy", "waiter", "allowed", "preempts"), [
    # whole service 50,000 GPU·s: the last queue by it (>= 7200), lifted to queue 0
    ("tiresias-las", "lifted", True, True),
    ("tiresias-las", "lifted", False, False),
    ("las", "lifted", False, False),            # 6,250 s >= 3250 s: queue 1 by it, lifted
    # whole service 2,000 GPU·s < 3250: queue 0 by it as well, not lifted
    ("tiresias-las", "short", False, True),
    ("tiresias-las", "new", False, True),
    ("tiresias-gittins", "new", False, True),
], ids=lambda v: str(v))
def test_promoted_job_preempts_only_when_allowed(policy: str, waiter: str, allowed: bool,
                                                 preempts: bool) -> None:
    job = {"lifted": _promoted(50_000.0), "short": _promoted(2_000.0),
           "new": pending(2, (8,), submit=9_500.0)}[waiter]
    config = PolicyConfig(policy=policy, promoted_preempts=allowed)  # type: ignore[arg-type]
    d = decide(snapshot({"n0": 8}, [HOLDER, job]), config, NOW,  # type: ignore[list-item]
               distribution=load_distribution())
    assert d.order == (2,)
    assert d.preemptions == ((Preemption(2, (1,)),) if preempts else ())


def test_lifted_job_still_starts_first_on_free_gpus() -> None:
    """Two waiters and 8 free GPUs: the promoted one is first in the order and takes them."""
    later = pending(3, (8,), submit=9_500.0)
    d = decide(snapshot({"n0": 8}, [_promoted(50_000.0), later]),  # type: ignore[list-item]
               PolicyConfig(promoted_preempts=False), NOW)
    assert d.order == (2, 3) and d.preemptions == ()
