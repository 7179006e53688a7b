"""The per-node bound of ``srtf``'s victim searches (``policy.fast.node_bound.NodeBound``), kept
across starts and ends and brought up to date lazily per GPU count, answers ``may_fit``
exactly as counting by hand does: for the j-th largest entry ``v`` of a need, at least j
nodes whose GPUs free plus those of the jobs there of a key above the waiter's that may be
victims (past ``min_run_s``) reach ``v`` (exactly when no victims were taken in the
decision, an upper bound otherwise). (A bound that answers False where a victim set
exists would drop a preemption; tests/prioritizer/policy/test_policy_scheduler.py checks whole decisions.)"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from prioritizer.policy.fast.node_bound import NodeBound
from prioritizer.policy.fast.records import Tracked
from prioritizer.policy.placement import FreeMap


def _by_hand(totals, jobs, key, need, free, now, min_run) -> bool:
    reach = [free[n] + sum(g for k, node, g, start in jobs
                           if node == n and k > key and now - start >= min_run)
             for n in range(len(totals))]
    return all(sum(1 for r in reach if r >= max(v, 1)) >= j for j, v in enumerate(need, 1))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=5), st.data())
def test_may_fit_counts_as_by_hand(totals, data: st.DataObject) -> None:
    bound = NodeBound(totals)
    running: dict[int, tuple[Tracked, float]] = {}
    for job_id in range(data.draw(st.integers(1, 30), label="steps")):
        used = [0] * len(totals)
        for rec, _ in running.values():
            for node, g in zip(rec.nodes, rec.shape):
                used[node] += g
        room = [n for n, t in enumerate(totals) if used[n] < t]
        if running and (not room or data.draw(st.booleans(), label="end")):
            victim = data.draw(st.sampled_from(sorted(running)), label="ends")
            bound.remove(running.pop(victim)[0])
        else:
            nodes = data.draw(st.lists(st.sampled_from(room), min_size=1, max_size=2,
                                       unique=True), label="nodes")
            shape = tuple(data.draw(st.integers(1, totals[n] - used[n])) for n in nodes)
            rec = Tracked(job_id, shape, 0.0, 100.0, True)
            rec.nodes = tuple(nodes)
            rec.run_start = float(data.draw(st.integers(0, 100), label="start"))
            # where the min_run_s guard counts from: the start, later under a wait guard
            rec.guard = rec.run_start + float(data.draw(st.sampled_from([0, 0, 40]),
                                                        label="guarded"))
            key = float(data.draw(st.integers(0, 20), label="key"))   # ties on purpose
            bound.add(rec, key)
            running[job_id] = (rec, key)
        # a query between events, on a free map the bound holds for: GPUs not held by a
        # running job are free or fewer (taken by starts), plus up to ``extra`` per node
        jobs = [(k, node, g, rec.guard) for rec, k in running.values()
                for node, g in zip(rec.nodes, rec.shape)]
        held = [sum(g for _, node, g, _ in jobs if node == n) for n in range(len(totals))]
        extra = data.draw(st.integers(0, 2), label="extra")
        free = [data.draw(st.integers(0, t - h + extra)) for t, h in zip(totals, held)]
        need = tuple(sorted(data.draw(st.lists(st.integers(1, max(totals)), min_size=1,
                                               max_size=3), label="need"), reverse=True))
        key = float(data.draw(st.integers(-1, 21), label="waiter key"))
        now, min_run = 100.0, float(data.draw(st.sampled_from([0, 30]), label="min_run"))
        fits = _by_hand(totals, jobs, key, need, free, now, min_run)
        answer = bound.may_fit(key, need, extra, FreeMap(free), now, min_run)
        # never False where a victim set may exist; exact without ``extra`` (with it, a
        # need of at most ``extra`` GPUs is not bounded at all)
        assert answer or not fits
        if extra == 0:
            assert answer == fits
