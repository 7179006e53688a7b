"""The tenant rules (prioritizer/policy/tenants.py, tenant_preempt.py, tenant_decide.py) on
small clusters whose right answer is worked out by hand in each test's docstring."""

from __future__ import annotations

import math

import pytest

from policy_helpers import pending, running, snapshot
from prioritizer.policy.config import PolicyConfig
from prioritizer.policy.decide import decide
from prioritizer.policy.gittins import GittinsDistribution
from prioritizer.policy.model import Preemption
from prioritizer.policy.tenant_decide import Owner, decide_tenants
from prioritizer.policy.tenant_preempt import Holder, Walker, tenant_preemptions
from prioritizer.policy.tenants import (SHARED, Holdings, Tenancy, VirtualCluster, Waiting,
                                        check_tenancy, decay, fair_share, parse_tenancy,
                                        tenant_order)
from prioritizer.policy.validation import ConfigError

NOW = 1000.0
TWO = {"n0": 4, "n1": 4}
NLP_VISION = Tenancy((VirtualCluster("nlp", account="nlp", guaranteed_gpus=4),
                      VirtualCluster("vision", account="vision", guaranteed_gpus=4)))


def owners(**tenant_of: str) -> dict[int, Owner]:
    return {int(k[1:]): Owner(v, "u") for k, v in tenant_of.items()}


# -- reclaim --------------------------------------------------------------------------------

def test_reclaim_takes_back_a_whole_node_from_the_borrower() -> None:
    """2 nodes x 4 GPUs, nlp and vision guaranteed 4 each. vision holds all 8 with four
    2-GPU jobs: 1 (n0, queue 1, 5000 GPU·s), 2 (n0, queue 0, 100), 3 (n1, queue 1, 6000),
    4 (n1, queue 0, 200). nlp submits job 9 for 4 GPUs on one node: 0 + 4 <= 4, within its
    guarantee, vision borrows 4: reclaim. Both nodes would have 4 free once vision's jobs
    there are gone, so they fit alike: n1, whose first candidate in victim order, 3 (queue
    1, 6000 GPU·s), comes before n0's 1 (queue 1, 5000); on n1 in victim order 3, then 4:
    after 3 vision is at 6 > 4, still borrowing, so 4 may be taken; n1 then has 4 free."""
    jobs = [running(1, (2,), ("n0",), queue=1, attained=5000),
            running(2, (2,), ("n0",), queue=0, attained=100),
            running(3, (2,), ("n1",), queue=1, attained=6000),
            running(4, (2,), ("n1",), queue=0, attained=200),
            pending(9, (4,), submit=900)]
    own = owners(j1="vision", j2="vision", j3="vision", j4="vision", j9="nlp")
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, NLP_VISION, own)
    assert out.decisions.preemptions == (Preemption(9, (3, 4)),)
    assert out.preempt_reasons[9] == ("reclaim: nlp at 0 of 4 guaranteed GPUs takes back "
                                      "from vision at 8 of 4")


def test_reclaim_for_a_gang_frees_each_of_its_nodes() -> None:
    """2 nodes x 4 GPUs; vision (guarantee 4) holds all 8 with 1-GPU jobs 1-4 on n0 and 5-8
    on n1, job i with 100 x i GPU·s (all queue 0). nlp (guarantee 4) asks a gang of 2 + 2:
    within its guarantee. Were vision's jobs gone both nodes would have 4 free: the gang goes
    on n0 and n1, its first entry on n1, whose first candidate (8, the most service) comes
    first in victim order; on each, victims by most service until 2 are free: 8, 7 on n1
    (vision 8 -> 6), 4, 3 on n0 (6 -> 4; vision held 5 > 4 before job 3 was taken)."""
    jobs = [running(i, (1,), ("n0" if i <= 4 else "n1",), queue=0, attained=100.0 * i)
            for i in range(1, 9)] + [pending(9, (2, 2), submit=900)]
    own = {i: Owner("vision", "u") for i in range(1, 9)} | {9: Owner("nlp", "u")}
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, NLP_VISION, own)
    assert out.decisions.preemptions == (Preemption(9, (8, 7, 4, 3)),)


def test_a_tenant_within_its_guarantee_is_never_a_victim_of_another() -> None:
    """vision holds 4 (its guarantee) on n0 in queue 2 (8000 GPU·s); nlp holds 4 on n1 and
    submits job 9 (1 GPU, new, queue 0). Tiresias alone preempts job 1 (queue 2 < queue 0's
    priority). With tenants nlp would be at 5 of 4: above its guarantee, no reclaim, and its
    own job 2 is in queue 0 as the waiter: no victim at all."""
    jobs = [running(1, (4,), ("n0",), queue=2, attained=8000),
            running(2, (4,), ("n1",), queue=0, attained=400),
            pending(9, (1,), submit=900)]
    snap = snapshot(TWO, jobs)
    assert decide(snap, PolicyConfig(), NOW).preemptions == (Preemption(9, (1,)),)
    out = decide_tenants(snap, PolicyConfig(), NOW, NLP_VISION,
                         owners(j1="vision", j2="nlp", j9="nlp"))
    assert out.decisions.preemptions == ()


def test_inside_a_tenant_tiresias_preempts_its_own_lower_queue() -> None:
    """The case above with nlp's job 2 in queue 2 (9000 GPU·s) instead: job 9 (queue 0)
    preempts its own tenant's job 2, never vision's job 1 (vision at its guarantee)."""
    jobs = [running(1, (4,), ("n0",), queue=2, attained=8000),
            running(2, (4,), ("n1",), queue=2, attained=9000),
            pending(9, (1,), submit=900)]
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, NLP_VISION,
                         owners(j1="vision", j2="nlp", j9="nlp"))
    assert out.decisions.preemptions == (Preemption(9, (2,)),)
    assert out.preempt_reasons[9] == "tiresias inside tenant: nlp's own jobs in a lower queue"


def test_no_reclaim_for_a_job_that_does_not_fit_its_guarantee() -> None:
    """nlp (guarantee 4) asks 8 GPUs (2 nodes x 4) while vision holds all 8: 0 + 8 > 4, the
    job is above nlp's guarantee, so nothing is taken back for it."""
    jobs = [running(1, (4,), ("n0",), queue=1, attained=5000),
            running(2, (4,), ("n1",), queue=1, attained=5000),
            pending(9, (4, 4), submit=900)]
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, NLP_VISION,
                         owners(j1="vision", j2="vision", j9="nlp"))
    assert out.decisions.preemptions == ()


def test_no_reclaim_for_gpus_a_borrower_ahead_would_take() -> None:
    """2 nodes x 4 GPUs; vision (guarantee 4) holds all 8 in queue 0 with 2-GPU jobs 1
    (400 GPU·s) and 2 (300) on n0, 3 (200) and 4 (100) on n1. Pending, all new, in
    Tiresias order by submit time: nlp's gang 10 (4 + 4), vision's 20 (2), nlp's 11 (2).
    The order: nlp's head, gang 10, is above nlp's guarantee (0 + 8 > 4) and goes by share
    (0/8 x 8/4 = 0); counted as started, nlp is at 8 and its job 11 by share 8/8 x 8/4 = 2,
    equal to vision's job 20 (8/8 x 8/4 = 2), which submitted first goes first: 10, 20, 11.
    Job 11 alone would fit in nlp's guarantee (0 + 2 <= 4), but a GPU it took back would go
    to job 20, ahead of it, at the end of the grace time (and be taken back again the next
    cycle): nothing is preempted. (Without that check: victim 1, on n0, the best fit.)"""
    jobs = [running(1, (2,), ("n0",), queue=0, attained=400),
            running(2, (2,), ("n0",), queue=0, attained=300),
            running(3, (2,), ("n1",), queue=0, attained=200),
            running(4, (2,), ("n1",), queue=0, attained=100),
            pending(10, (4, 4), submit=900), pending(20, (2,), submit=910),
            pending(11, (2,), submit=920)]
    own = owners(j1="vision", j2="vision", j3="vision", j4="vision", j10="nlp",
                 j20="vision", j11="nlp")
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, NLP_VISION, own)
    assert out.decisions.order == (10, 20, 11)
    assert out.tenant_order.why[11] == ("fair share", "nlp", 8.0, 4, 2.0)
    assert out.decisions.preemptions == ()


def test_a_waiter_that_preempts_goes_ahead_of_the_jobs_that_would_take_its_gpus() -> None:
    """3 nodes x 4 GPUs, nlp and vision guaranteed 4 each. vision's job 1 holds n0 (queue 0);
    nlp's job 2 holds n1 (queue 1, 9000 GPU·s) and its job 3 n2 (queue 0, 100): nlp is at 8
    of 4. Pending: job 30 of no tenant (4 GPUs, submitted first) and nlp's job 9 (4 GPUs,
    new). By share job 30 goes first (its tenant holds nothing: share 0; nlp would be at 12,
    12/12 x 12/4 = 3), but it may take nothing back (no guarantee) and has no job of its own
    to preempt. Job 9 preempts its own tenant's job 2 (queue 1): n1's GPUs are nlp's, so job
    9 goes first in the order, else Slurm would start job 30 on them at the end of the grace
    time. The next decision, job 2 checkpointing (releasing): by share job 30 is first again
    (nlp at 4 + 4, share 8/12 x 12/4 = 2), and job 9 keeps the head only as a waiter GPUs
    are being freed for (``awaiting``, which the daemon reads from its open intents)."""
    three = {"n0": 4, "n1": 4, "n2": 4}
    jobs = [running(1, (4,), ("n0",), queue=0, attained=100),
            running(2, (4,), ("n1",), queue=1, attained=9000),
            running(3, (4,), ("n2",), queue=0, attained=100),
            pending(30, (4,), submit=890), pending(9, (4,), submit=900)]
    own = owners(j1="vision", j2="nlp", j3="nlp", j9="nlp")
    out = decide_tenants(snapshot(three, jobs), PolicyConfig(), NOW, NLP_VISION, own)
    assert out.tenant_order.order == (30, 9)
    assert out.decisions.preemptions == (Preemption(9, (2,)),)
    assert out.decisions.order == (9, 30)
    jobs[1] = running(2, (4,), ("n1",), queue=1, attained=9000, releasing=True)
    out = decide_tenants(snapshot(three, jobs), PolicyConfig(), NOW, NLP_VISION, own,
                         awaiting=(9,))
    assert (out.decisions.order, out.decisions.preemptions) == ((9, 30), ())
    out = decide_tenants(snapshot(three, jobs), PolicyConfig(), NOW, NLP_VISION, own)
    assert out.decisions.order == (30, 9)


def test_a_waiter_gpus_are_being_freed_for_takes_no_second_victim() -> None:
    """The case above with nlp's job 3 in queue 1 too (8000 GPU·s): a victim for job 9 as
    job 2 is. While job 2 checkpoints for job 9 (``awaiting``), the victim walk sees the order
    Slurm will: job 9 first, on the GPUs job 2 frees; job 30 after it (no tenant, nothing to
    take back). Walked in the share order instead, job 30 would take job 2's GPUs in the
    start model and job 9 would preempt job 3 as well: two victims signalled for one 4-GPU
    waiter."""
    three = {"n0": 4, "n1": 4, "n2": 4}
    jobs = [running(1, (4,), ("n0",), queue=0, attained=100),
            running(2, (4,), ("n1",), queue=1, attained=9000, releasing=True),
            running(3, (4,), ("n2",), queue=1, attained=8000),
            pending(30, (4,), submit=890), pending(9, (4,), submit=900)]
    own = owners(j1="vision", j2="nlp", j3="nlp", j9="nlp")
    out = decide_tenants(snapshot(three, jobs), PolicyConfig(), NOW, NLP_VISION, own,
                         awaiting=(9,))
    assert (out.decisions.order, out.decisions.preemptions) == ((9, 30), ())
    # no preemption in flight for job 9: job 30 is first and takes job 2's GPUs, so job 9
    # (queue 0) takes its own tenant's job 3 (queue 1)
    out = decide_tenants(snapshot(three, jobs), PolicyConfig(), NOW, NLP_VISION, own)
    assert out.decisions.preemptions == (Preemption(9, (3,)),)


def test_no_reclaim_for_a_job_the_start_order_puts_behind_a_borrower() -> None:
    """The victim walk alone: vision (guarantee 4) holds 8 on 2 nodes x 4 (jobs 1 and 2, 4
    GPUs each); nlp's job 11 (2 GPUs, nlp at 0 of 4) fits in nlp's guarantee, but the start
    order placed it by the share rule (``by_guarantee`` False), behind a job of another
    tenant that would take what a reclaim frees: nothing is taken back. The same walker
    placed by the guarantee rule takes back job 1 (first on the best-fit node n0)."""
    holders = [Holder(1, "vision", (4,), (0,), 0.0, 400.0),
               Holder(2, "vision", (4,), (1,), 0.0, 300.0)]
    behind = Walker(11, "nlp", (2,), 0.0, by_guarantee=False)
    assert tenant_preemptions([behind], holders, [0, 0], NLP_VISION) == ([], {})
    found, _ = tenant_preemptions([behind._replace(by_guarantee=True)], holders, [0, 0],
                                  NLP_VISION)
    assert found == [Preemption(11, (1,))]


# -- the order across tenants ------------------------------------------------------------

def _holding(**gpus: float) -> Holdings:
    h = Holdings()
    for tenant, g in gpus.items():
        h.add(tenant, "u", g)
    return h


def test_drf_order_above_the_guarantees() -> None:
    """16 GPUs; A guaranteed 8 holds 10, B guaranteed 4 holds 4; Tiresias order a1, a2, b1,
    b2 (1 GPU each). Both are above their guarantee: weighted shares A = 10/16 x 16/8 = 1.25,
    B = 4/16 x 16/4 = 1.0: b1. Then B = 5/16 x 4 = 1.25, tied with A: the earlier in the
    Tiresias order, a1; A = 11/16 x 2 = 1.375 > 1.25: b2; then a2."""
    ten = Tenancy((VirtualCluster("A", account="a", guaranteed_gpus=8),
                   VirtualCluster("B", account="b", guaranteed_gpus=4)))
    waiting = [Waiting(1, "A", "u", 1), Waiting(2, "A", "u", 1), Waiting(3, "B", "u", 1),
               Waiting(4, "B", "u", 1)]
    out = tenant_order(waiting, ten, _holding(A=10, B=4), (16.0, 0.0, 0.0))
    assert out.order == (3, 1, 4, 2)
    assert out.reason(3) == ("fair share: B has the smallest weighted share 1.000 "
                              "(at 4 of 4 guaranteed GPUs, counting the jobs ahead of it)")


def test_a_job_within_its_guarantee_goes_before_any_share() -> None:
    """A (guarantee 8) holds 2, B (guarantee 8) holds 10 of 16: B's 1-GPU job 1 is first in
    the Tiresias order, A's 4-GPU job 2 second. 2 + 4 <= 8: job 2 is within A's guarantee
    and goes first; then B's (10 + 1 > 8: fair share)."""
    ten = Tenancy((VirtualCluster("A", account="a", guaranteed_gpus=8),
                   VirtualCluster("B", account="b", guaranteed_gpus=8)))
    out = tenant_order([Waiting(1, "B", "u", 1), Waiting(2, "A", "u", 4)], ten,
                       _holding(A=2, B=10), (16.0, 0.0, 0.0))
    assert out.order == (2, 1)
    assert out.reason(2) == ("guarantee: A at 2 of 8 guaranteed GPUs, counting the jobs ahead "
                             "of it")


def test_dominant_share_counts_cpus_and_memory() -> None:
    """32 GPUs, 256 CPUs, 1,000,000 MiB; A and B guaranteed 8 each, both above it. A holds
    10 GPUs, 20 CPUs (dominant: GPUs 10/32 = 0.3125); B holds 9 GPUs but 160 CPUs (dominant:
    CPUs 160/256 = 0.625). A's job goes first although A holds more GPUs."""
    ten = Tenancy((VirtualCluster("A", account="a", guaranteed_gpus=8),
                   VirtualCluster("B", account="b", guaranteed_gpus=8)))
    h = Holdings()
    h.add("A", "u", 10, 20, 0)
    h.add("B", "u", 9, 160, 0)
    out = tenant_order([Waiting(1, "B", "u", 1), Waiting(2, "A", "u", 1)], ten, h,
                       (32.0, 256.0, 1_000_000.0))
    assert out.order == (2, 1)


def test_decayed_usage() -> None:
    """1000 GPU·s decays to 500 after one half-life; 1 GPU held for one half-life h from
    nothing adds h/ln2 x (1 - 1/2) = 3600 / 0.693147 / 2 = 2596.85 GPU·s."""
    assert decay((1000.0, 0.0, 0.0), (0.0, 0.0, 0.0), 3600, 3600)[0] == pytest.approx(500.0)
    assert decay((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), 3600, 3600)[0] == pytest.approx(2596.85,
                                                                                  abs=0.01)


def test_a_team_that_had_the_cluster_all_night_waits_in_the_morning() -> None:
    """16 GPUs, half-life 3600 s, A and B guaranteed 8 each and holding 2 each now. A held
    8 GPUs for ever: decayed usage 8 x h/ln2, a decayed share of 8/16 = 0.5; B none. Weighted:
    A = (2/16 + 0.5) x 16/8 = 1.25, B = 2/16 x 2 = 0.25. Without the half-life both are 0.25
    and A's job, first in the Tiresias order, goes first; with it B's does."""
    span = 3600 / math.log(2)
    assert fair_share((2, 0, 0), (8 * span, 0, 0), (16, 0, 0), 8, 3600) == pytest.approx(1.25)
    vcs = (VirtualCluster("A", account="a", guaranteed_gpus=8),
           VirtualCluster("B", account="b", guaranteed_gpus=8))
    waiting = [Waiting(1, "A", "u", 8), Waiting(2, "B", "u", 8)]
    usage = {"A": (8 * span, 0.0, 0.0)}
    now_only = tenant_order(waiting, Tenancy(vcs), _holding(A=2, B=2), (16.0, 0, 0), usage)
    assert now_only.order == (1, 2)
    decayed = tenant_order(waiting, Tenancy(vcs, 3600.0), _holding(A=2, B=2), (16.0, 0, 0), usage)
    assert decayed.order == (2, 1)


def test_user_limit_holds_back_one_user_only() -> None:
    """A guaranteed 4 with user_limit_factor 0.5: a user holds at most ceil(0.5 x 4) = 2
    GPUs. alice holds 2: her job 1 is held back; bob's job 2 starts."""
    ten = Tenancy((VirtualCluster("A", account="a", guaranteed_gpus=4, user_limit_factor=0.5),))
    h = Holdings()
    h.add("A", "alice", 2)
    out = tenant_order([Waiting(1, "A", "alice", 1), Waiting(2, "A", "bob", 1)], ten, h,
                       (8.0, 0, 0))
    assert (out.order, out.held) == ((2,), (1,))
    assert out.reason(1) == ("user limit: user alice holds 2 GPUs, counting the jobs ahead of "
                             "it; 1 more would pass the user limit 2")


def test_max_gpus_is_never_passed() -> None:
    """A guaranteed 4, max_gpus 6, holds 5: job 1 (2 GPUs) would make 7 > 6, held back; job 2
    (1 GPU) makes 6, in the order; then job 3 (1 GPU) would make 7: held back too."""
    ten = Tenancy((VirtualCluster("A", account="a", guaranteed_gpus=4, max_gpus=6),))
    out = tenant_order([Waiting(1, "A", "u", 2), Waiting(2, "A", "u", 1),
                        Waiting(3, "A", "u", 1)], ten, _holding(A=5), (16.0, 0, 0))
    assert (out.order, out.held) == ((2,), (1, 3))


def test_held_back_jobs_come_last_in_the_daemon_order() -> None:
    """decide_tenants writes held-back jobs after every other (Slurm's GrpTRES is the cap)."""
    ten = Tenancy((VirtualCluster("A", account="a", guaranteed_gpus=2, max_gpus=2),))
    jobs = [pending(1, (2,), submit=1), pending(2, (4,), submit=2)]
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, ten,
                         owners(j1="A", j2=SHARED))
    assert out.decisions.order == (1, 2)
    jobs = [pending(1, (4,), submit=1), pending(2, (4,), submit=2)]
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(), NOW, ten, owners(j1="A", j2=SHARED))
    assert out.decisions.order == (2, 1)


# -- config ---------------------------------------------------------------------------------

def test_tenant_of_matches_every_named_key() -> None:
    ten = parse_tenancy({"nlp": {"account": "nlp", "guaranteed_gpus": 8},
                         "vision": {"account": "cv", "qos": "big", "guaranteed_gpus": 8}})
    assert ten.tenant_of("nlp", "gpu", None) == "nlp"
    assert ten.tenant_of("cv", "gpu", "big") == "vision"
    assert ten.tenant_of("cv", "gpu", "normal") == SHARED


def test_account_names_are_compared_as_slurm_keeps_them_in_lower_case() -> None:
    """Slurm keeps account names in lower case (``sacctmgr add account AdmNLP`` stores
    ``admnlp``; squeue reports that): a tenant written ``AdmNLP`` owns the jobs of ``admnlp``,
    is an account slurmdbd knows, and overlaps a tenant of ``admnlp``."""
    ten = parse_tenancy({"nlp": {"account": "AdmNLP", "guaranteed_gpus": 8}})
    assert ten.tenant_of("admnlp", "gpu", None) == "nlp"
    assert check_tenancy(ten, 32, known_accounts=["admnlp"]) == []
    assert check_tenancy(ten, 32, known_accounts=["admcv"]) == [
        "virtual_clusters.nlp.account: 'AdmNLP' is not an account slurmdbd knows; add it "
        "(sacctmgr add account admnlp) or fix the name"]
    ten = parse_tenancy({"a": {"account": "NLP"}, "b": {"account": "nlp"}})
    assert check_tenancy(ten) == [
        "virtual_clusters.b: a job could belong to both 'a' and 'b' (a job of account 'nlp' "
        "matches both); give them distinct accounts or distinct partitions"]


def test_config_problems_one_line_each() -> None:
    ten = parse_tenancy({"nlp": {"account": "nlp", "guaranteed_gpus": 24, "max_gpus": 16},
                         "vision": {"account": "nlp", "guaranteed_gpus": 16},
                         "empty": {"guaranteed_gpus": 0}})
    assert check_tenancy(ten, cluster_gpus=32, known_accounts=["nlp"]) == [
        "virtual_clusters: guaranteed_gpus sum to 40, above the cluster's 32 GPUs; lower them "
        "so that every guarantee can be met at once",
        "virtual_clusters.nlp: guaranteed_gpus 24 above max_gpus 16; raise max_gpus or lower "
        "the guarantee",
        "virtual_clusters.vision: a job could belong to both 'nlp' and 'vision' (a job of "
        "account 'nlp' matches both); give them distinct accounts or distinct partitions",
        "virtual_clusters.empty: names no account, partition or users; no job would "
        "belong to it"]
    ten = parse_tenancy({"cv": {"account": "vision", "user_limit_factor": 2}})
    assert check_tenancy(ten, 32, known_accounts=["nlp"]) == [
        "virtual_clusters.cv: user_limit_factor needs guaranteed_gpus > 0 (a user may hold "
        "factor x guaranteed_gpus GPUs: none here)",
        "virtual_clusters.cv.account: 'vision' is not an account slurmdbd knows; add it "
        "(sacctmgr add account vision) or fix the name"]


def test_overlap_is_told_by_account_and_partition_only() -> None:
    """Only account and partition tell tenants apart (dlprio reads no QOS from squeue): a
    QOS-only tenant shares no key with an account tenant and matches no job, so it is reported
    once, on its own; an account tenant and a partition tenant share the jobs of that account
    in that partition; distinct accounts, or distinct partitions, part two tenants."""
    ten = parse_tenancy({"nlp": {"account": "nlp"}, "vision": {"qos": "high"},
                         "cv": {"partition": "a100"}, "cv2": {"account": "cv", "partition": "a100"},
                         "cv3": {"account": "cv", "partition": "h100"}})
    assert check_tenancy(ten) == [
        "virtual_clusters.vision: names no account, partition or users; no job would belong "
        "to it (dlprio matches no job by QOS)",
        "virtual_clusters.cv: a job could belong to both 'nlp' and 'cv' (a job of account "
        "'nlp' in partition 'a100' matches both); give them distinct accounts or distinct "
        "partitions",
        "virtual_clusters.cv2: a job could belong to both 'cv' and 'cv2' (a job of account "
        "'cv' in partition 'a100' matches both); give them distinct accounts or distinct "
        "partitions"]


def test_parse_refuses_bad_values() -> None:
    with pytest.raises(ConfigError) as err:
        parse_tenancy({"a": {"account": "x;y", "guaranteed_gpus": -1, "user_limit_factor": 0,
                             "gpus": 3}}, half_life_s=-5)
    assert str(err.value).splitlines() == [
        "virtual_clusters.a.gpus: unknown key; allowed: account, partition, qos, "
        "guaranteed_gpus, max_gpus, user_limit_factor, users",
        "virtual_clusters.a.account: must be a Slurm name ([A-Za-z0-9_.-]+), got 'x;y'",
        "virtual_clusters.a.guaranteed_gpus: must be a whole number >= 0, got -1",
        "virtual_clusters.a.user_limit_factor: must be a number > 0, got 0",
        "fair_share_half_life_s: must be seconds >= 0, got -5"]


def test_dlsubmit_reads_the_same_section() -> None:
    """dlsubmit places a job by account/partition/qos and accepts the tenant keys beside."""
    from submit.options import RenderOptions, VirtualCluster as Placement
    section = {"nlp": {"account": "nlp", "qos": "big", "guaranteed_gpus": 8, "max_gpus": 16,
                       "user_limit_factor": 1.5, "users": ["ann"]}}
    assert RenderOptions(virtual_clusters=section).virtual_cluster("nlp") == Placement(
        account="nlp", qos="big")
    assert parse_tenancy(section).tenants == (VirtualCluster(
        "nlp", account="nlp", qos="big", users=("ann",), guaranteed_gpus=8, max_gpus=16,
        user_limit_factor=1.5),)


@pytest.mark.parametrize(("attained", "gain", "preempts"), [
    (4_900.0, 1.0, False), (8_000.0, 1.0, True), (4_900.0, 0.0, True)])
def test_inside_a_tenant_the_gain_rule_weighs_the_preemption(attained: float, gain: float,
                                                             preempts: bool) -> None:
    """The case above with ``preempt_gain`` 1 (0: off) and the samples 1,000, 5,000 and 20,000 GPU·s:
    job 9 (1 GPU, new) ends within its 3,250 GPU·s quantum with p 1/3 and runs 2,500 s in
    it, so a 1-GPU victim must have more than 3 × (2,500 + 136) = 7,908 s left. nlp's job 2
    holds 1 GPU on n1 (its other 3 held by nlp's job 3 in queue 0): at 4,900 GPU·s
    (queue 1) it has 12,500 - 4,900 = 7,600 s left, at 8,000 (queue 2) 12,000 s."""
    jobs = [running(1, (4,), ("n0",), queue=2, attained=8000),
            running(2, (1,), ("n1",), queue=1 if attained < 7_200 else 2, attained=attained),
            running(3, (3,), ("n1",), queue=0, attained=300),
            pending(9, (1,), submit=900)]
    out = decide_tenants(snapshot(TWO, jobs), PolicyConfig(preempt_gain=gain), NOW, NLP_VISION,
                         owners(j1="vision", j2="nlp", j3="nlp", j9="nlp"),
                         distribution=GittinsDistribution([1_000.0, 5_000.0, 20_000.0]))
    assert out.decisions.preemptions == ((Preemption(9, (2,)),) if preempts else ())
