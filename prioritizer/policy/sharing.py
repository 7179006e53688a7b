"""GPU sharing in the policy: shard jobs (a fraction of one GPU) and opportunistic jobs (pure).

Slurm's gres/shard (slurm_plugin/shard.py) lets a GPU serve either several shard jobs or one
whole-GPU job at a time. Opportunistic jobs (TGS, NSDI'23; AntMan, OSDI'20) run only on the GPU
time production jobs leave free and give it back the moment production needs it. Both are rules
around :func:`prioritizer.policy.decide.decide`, which sees only whole-GPU jobs: this module
rewrites the snapshot before it and the decisions after it, so that with no :class:`Share` the
call is ``decide`` itself, byte for byte.

Rules
-----
* **Attained service** of a shard job is its share of a GPU × time (:func:`service_gpus`): two
  0.5-GPU jobs running 100 s each attain 50 GPU·s, as one 1-GPU job running 50 s would.
* **A GPU hosting shard jobs is busy** for whole-GPU jobs: Slurm's GresUsed counts only whole
  GPUs, so such a GPU is taken out of ``gpus_free`` here.
* **Victim set of a shared GPU:** a whole-GPU waiter that needs such a GPU preempts all of that
  GPU's shard jobs together. They stand in ``decide`` as one 1-GPU *proxy* job on that node, as
  protected as the most protected of them: the least attained service (highest queue), the
  latest start (thrash guard), preemptible only if every one is. The shard jobs themselves keep
  their own queue states and are never victims one by one.
* **A pending shard job** is ordered like any job but neither fits nor preempts here: Slurm
  starts it where shards are free (its view has ``eligible_time`` = infinity in ``decide``).
* **Opportunistic jobs never delay production.** Their partition tier is put below every
  production job's (``2 × tier`` against ``2 × tier + 1``), so they come after production in
  the start order and never preempt production; and before ``decide`` chooses victims among
  production jobs, every production waiter that is blocked takes GPUs from running
  opportunistic jobs first (:func:`_opportunistic_first`), whatever their queue and however
  short their run: a production job never waits behind one.

Job ids of proxies are negative (``-1, -2, ...``) and never leave this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.model import Decisions, JobPhase, JobView, Preemption, Snapshot
from prioritizer.policy.placement import FreeMap


@dataclass(frozen=True)
class Share:
    """How one job uses GPUs beyond a whole-GPU production job.

    Attributes:
        share: fraction of one GPU (0 < share < 1) of a shard job (``--gres=shard:K``: K /
            shards per GPU); 0.0 for a whole-GPU job.
        gpu: for a RUNNING shard job, the index on its node of the GPU its shards come from
            (Slurm's ``gres_detail``: ``shard:2(IDX:0)``); None otherwise.
        opportunistic: the job's class (its checkpoint marker says ``class=opportunistic``).
    """

    share: float = 0.0
    gpu: int | None = None
    opportunistic: bool = False


def service_gpus(num_gpus: int, share: float) -> float:
    """GPUs a job's attained service counts per second: its share of one GPU for a shard job,
    else its GPUs (``service_gpus(1, 0.5)`` = 0.5; ``service_gpus(4, 0.0)`` = 4)."""
    return share if share > 0 else float(num_gpus)


@dataclass(frozen=True)
class _Proxy:
    """One stand-in of ``decide``: the jobs it preempts together."""

    members: tuple[int, ...]


def decide_shared(snapshot: Snapshot, config: PolicyConfig, now: float,
                  shares: Mapping[int, Share], **kw: Any) -> Decisions:
    """``decide`` with the sharing rules of the module docstring. ``shares``: job id ->
    :class:`Share` for shard and opportunistic jobs (absent: whole-GPU production). With no
    entry this is ``decide(snapshot, config, now, **kw)``. Preemptions name real job ids: the
    members of a shared GPU are its victims together."""
    if not shares:
        return decide(snapshot, config, now, **kw)
    kw.pop("previous", None)   # the memo holds views of this module's rewritten snapshot
    folded, proxies = _fold(snapshot, shares, now, config.min_run_s)
    first: list[Preemption] = []
    if config.preemption:
        order = decide(folded, replace(config, preemption=False), now, **kw).order
        first, folded = _opportunistic_first(folded, order, shares, proxies, now)
    d = decide(folded, config, now, **kw)
    return _unfold(d, proxies, first)


def _fold(snapshot: Snapshot, shares: Mapping[int, Share], now: float,
          min_run_s: float) -> tuple[Snapshot, dict[int, _Proxy]]:
    """The snapshot ``decide`` sees (module docstring) and the proxies in it."""
    tiered = any(s.opportunistic for s in shares.values())
    hosts: dict[tuple[str, int], list[JobView]] = {}
    jobs: list[JobView] = []
    for job in snapshot.jobs:
        s = shares.get(job.job_id)
        tier = (2 * job.tier + (0 if s is not None and s.opportunistic else 1)) if tiered else job.tier
        if s is None:
            jobs.append(job if tier == job.tier else replace(job, tier=tier))
        elif job.phase is JobPhase.PENDING and s.share > 0:
            jobs.append(replace(job, tier=tier, eligible_time=math.inf, gpus_per_node=(1,)))
        elif job.phase is JobPhase.RUNNING and s.share > 0:
            jobs.append(replace(job, tier=tier, nodes=(), gpus_per_node=(1,)))
            if len(job.nodes) == 1 and s.gpu is not None:
                hosts.setdefault((job.nodes[0], s.gpu), []).append(replace(job, tier=tier))
        elif job.phase is JobPhase.RUNNING and s.opportunistic:
            jobs.append(replace(job, tier=tier, nodes=()))
            hosts.setdefault((f"job {job.job_id}", -1), []).append(replace(job, tier=tier))
        else:
            jobs.append(replace(job, tier=tier))
    shared_on: dict[str, int] = {}
    proxies: dict[int, _Proxy] = {}
    for n, ((node, gpu), members) in enumerate(sorted(hosts.items()), start=1):
        if gpu >= 0:
            shared_on[node] = shared_on.get(node, 0) + 1
        proxies[-n] = _Proxy(tuple(m.job_id for m in members))
        jobs.append(_proxy(-n, members, shares, now, min_run_s))
    nodes = tuple(replace(v, gpus_free=max(v.gpus_free - shared_on.get(v.name, 0), 0))
                  if v.name in shared_on else v for v in snapshot.nodes)
    return Snapshot(nodes=nodes, jobs=tuple(jobs)), proxies


def _proxy(proxy_id: int, members: list[JobView], shares: Mapping[int, Share], now: float,
           min_run_s: float) -> JobView:
    """One stand-in for jobs preempted together: a shared GPU's shard jobs (1 GPU on their
    node), or one opportunistic whole-GPU job (its own GPUs and nodes)."""
    production = [m for m in members if not shares[m.job_id].opportunistic]
    guard = min(production or members, key=lambda m: (m.attained_gpu_s, m.job_id))
    starts = [m.run_start for m in production if m.run_start is not None]
    whole = len(members) == 1 and shares[members[0].job_id].share == 0
    return replace(
        guard, job_id=proxy_id,
        gpus_per_node=guard.gpus_per_node if whole else (1,),
        nodes=guard.nodes if whole else guard.nodes[:1],
        # opportunistic-only: no thrash guard (production never waits behind one)
        run_start=max(starts) if starts else now - min_run_s,
        preemptible=all(m.preemptible for m in members),
        releasing=all(m.releasing for m in members),
        tier=max(m.tier for m in members))


def _opportunistic_first(folded: Snapshot, order: tuple[int, ...], shares: Mapping[int, Share],
                         proxies: dict[int, _Proxy], now: float) -> tuple[list[Preemption], Snapshot]:
    """Production waiters (in ``order``) that do not fit take the GPUs of running
    opportunistic-only proxies, on the fewest such proxies of the nodes they fit on; those
    proxies become ``releasing`` in the returned snapshot, so ``decide`` counts their GPUs as
    coming free and chooses no other victim for those waiters."""
    index = {v.name: i for i, v in enumerate(folded.nodes)}
    free = FreeMap([v.gpus_free for v in folded.nodes])
    views = {j.job_id: j for j in folded.jobs}
    opp = [views[p] for p, px in proxies.items()
           if all(shares[m].opportunistic for m in px.members)
           and views[p].preemptible and not views[p].releasing and views[p].nodes]
    for j in folded.jobs:   # releasing jobs free their GPUs for the waiters
        if j.phase is JobPhase.RUNNING and j.releasing and j.nodes:
            free.add([index[n] for n in j.nodes], j.gpus_per_node)
    taken: set[int] = set()
    out: list[Preemption] = []
    for job_id in order:
        job = views[job_id]
        if job_id in shares or (job.eligible_time is not None and job.eligible_time > now):
            continue   # opportunistic and shard waiters take no one's GPUs here
        spot = free.place(job.gpus_per_node)
        if spot is not None:
            free.add(spot, [-g for g in job.gpus_per_node])
            continue
        trial, victims = free.copy(), []
        for p in sorted((v for v in opp if v.job_id not in taken),
                        key=lambda v: (-v.attained_gpu_s, v.job_id)):
            trial.add([index[n] for n in p.nodes], p.gpus_per_node)
            victims.append(p.job_id)
            spot = trial.place(job.gpus_per_node)
            if spot is not None:
                break
        if spot is None:
            continue
        for v in list(victims):   # drop, one at a time, those the waiter fits without
            if not _needed(v, victims, views, index, free, job.gpus_per_node):
                victims.remove(v)
        taken.update(victims)
        out.append(Preemption(job_id, tuple(victims)))
        for v in victims:
            free.add([index[n] for n in views[v].nodes], views[v].gpus_per_node)
        free.add(free.place(job.gpus_per_node) or (), [-g for g in job.gpus_per_node])
    if not out:
        return [], folded
    jobs = tuple(replace(j, releasing=True) if j.job_id in taken else j for j in folded.jobs)
    return out, replace(folded, jobs=jobs)


def _needed(victim: int, victims: list[int], views: Mapping[int, JobView], index: Mapping[str, int],
            free: FreeMap, need: tuple[int, ...]) -> bool:
    """Whether ``need`` no longer fits when ``victim`` is left out of ``victims``."""
    trial = free.copy()
    for v in victims:
        if v != victim:
            trial.add([index[n] for n in views[v].nodes], views[v].gpus_per_node)
    return trial.place(need) is None


def _unfold(d: Decisions, proxies: Mapping[int, _Proxy], first: list[Preemption]) -> Decisions:
    """``d`` in real job ids: proxies' states dropped, their preemptions naming their members,
    the opportunistic-first preemptions ahead of ``decide``'s."""
    def real(p: Preemption) -> Preemption:
        victims: list[int] = []
        for v in p.victims:
            victims.extend(proxies[v].members if v in proxies else (v,))
        return Preemption(p.waiter, tuple(victims))

    states = {k: v for k, v in d.states.items() if k not in proxies}
    return replace(d, states=states, preemptions=tuple(real(p) for p in (*first, *d.preemptions)),
                   changed=tuple(k for k in d.changed if k not in proxies), memo=None)
