"""The daemon with ``virtual_clusters``: one cycle against a recording Slurm, the answers
worked out by hand (the rules themselves: tests/prioritizer/policy/test_tenants.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon_unit_helpers import FakeSlurm, sinfo_node, squeue_job
from prioritizer.daemon import explain, tenants_view
from prioritizer.daemon.config import ConfigError, DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter
from prioritizer.daemon.loop import Daemon

T0 = 10_000.0
TENANTS = {"nlp": {"account": "nlp", "guaranteed_gpus": 8},
           "vision": {"account": "vision", "guaranteed_gpus": 8}}


def _daemon(tmp_path: Path, client: FakeSlurm, ledger: Ledger, **cfg: object) -> Daemon:
    config = DaemonConfig(ledger_path=str(tmp_path / "l.sqlite"),
                          snapshot_path=str(tmp_path / "snapshot.json"),
                          virtual_clusters=TENANTS, **cfg)  # type: ignore[arg-type]
    return Daemon(config, client, ledger, CycleAdapter(), clock=lambda: T0)  # type: ignore[arg-type]


def _gauge(daemon: Daemon, tenant: str, kind: str) -> float | None:
    return daemon.metrics.registry.get_sample_value(
        "dlprio_tenant_gpus", {"tenant": tenant, "kind": kind})


def test_reclaim_takes_back_the_borrowed_node(tmp_path: Path) -> None:
    """2 nodes x 8 GPUs. vision holds both: job 1 on node1 since 9000 (8,000 GPU·s, queue 2),
    job 2 on node2 since 100 (79,200 GPU·s). nlp's job 3 (8 GPUs) is within nlp's guarantee
    (0 + 8 <= 8) and vision borrows 8: reclaim. Both nodes would be free without vision's
    job there, so they fit alike, and the victim is the one Tiresias's victim order takes
    first: job 2, in the same queue with the most service (not job 1 on the lower node).
    Metrics: vision guaranteed 8, used 16, borrowed 8; nlp waiting 8."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)],
                       known_accounts={"nlp", "vision"})
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=9000, account="vision"),
                     squeue_job(2, "RUNNING", nodes="node2", start=100, account="vision"),
                     squeue_job(3, "PENDING", reason="Resources", account="nlp")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        daemon = _daemon(tmp_path, client, ledger)
        out = daemon.cycle()
        assert [(p.waiter, p.victims) for p in out.preemptions] == [(3, (2,))]
        assert [c[1] for c in client.calls if c[0] == "signal"] == [2]
        assert daemon.tenant_decisions is not None
        assert daemon.tenant_decisions.preempt_reasons[3] == (
            "reclaim: nlp at 0 of 8 guaranteed GPUs takes back from vision at 16 of 8")
        assert [(_gauge(daemon, "vision", k)) for k in ("guaranteed", "used", "borrowed",
                                                         "waiting")] == [8, 16, 8, 0]
        assert _gauge(daemon, "nlp", "waiting") == 8
        text = explain.explain(3, ledger, daemon.cfg, T0)
        assert ("tenants (last cycle): reclaim: nlp at 0 of 8 guaranteed GPUs takes back from "
                "vision at 16 of 8") in text.splitlines()
        assert ("tenants (last cycle): its GPUs go to job 3 (reclaim: nlp at 0 of 8 guaranteed "
                "GPUs takes back from vision at 16 of 8)") in explain.explain(
                    2, ledger, daemon.cfg, T0).splitlines()
        # vision: 16 of 16 GPUs is a dominant share of 1, weighted by 16 / 8: 2.000
        assert [line.split() for line in explain.tenant_table(ledger).splitlines()] == [
            ["TENANT", "GUARANTEED", "USED", "BORROWED", "WAITING", "FAIR_SHARE"],
            ["nlp", "8", "0", "0", "8", "0.000"],
            ["vision", "8", "16", "8", "0", "2.000"]]


def test_tenant_series_no_longer_reported_go(tmp_path: Path) -> None:
    """Job 4 (2 GPUs, account of no tenant) runs: dlprio status lists a (shared) row, and
    Prometheus has its series. Once it ended the row goes, and so do its series, instead of
    reading 2 GPUs used and borrowed for ever; the configured tenants' stay, at 0."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 2), sinfo_node("node2", 0)],
                       known_accounts={"nlp", "vision"})
    client.squeue = [squeue_job(4, "RUNNING", nodes="node1", gpus=2, start=9000)]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        daemon = _daemon(tmp_path, client, ledger)
        daemon.cycle()
        assert [_gauge(daemon, "(shared)", k) for k in ("guaranteed", "used", "borrowed",
                                                         "waiting")] == [0, 2, 2, 0]
        client.squeue = []
        daemon.cycle()
        assert [row.name for row in tenants_view.recorded_rows(ledger)] == ["nlp", "vision"]
    assert [_gauge(daemon, "(shared)", k) for k in ("guaranteed", "used", "borrowed",
                                                     "waiting")] == [None] * 4
    assert [_gauge(daemon, t, k) for t in ("nlp", "vision")
            for k in ("guaranteed", "used", "borrowed", "waiting")] == [8, 0, 0, 0] * 2


def test_a_pending_array_waits_with_every_element(tmp_path: Path) -> None:
    """squeue folds an array's pending elements into one record: ``1963_[1-3]`` (2 GPUs each)
    waits for 6 GPUs, ``1983_[2-9%2]`` (1 GPU each; %2 limits how many run at once) for 8,
    besides element 1983_1 running; dlprio status and dlqueue show the same rows."""
    from slurm_plugin.slurm.shapes import job_from_json

    def array(job_id: int, tasks: str, gpus: int, account: str) -> object:
        return job_from_json({
            "job_id": job_id, "array_job_id": job_id, "array_task_string": tasks,
            "job_state": "PENDING", "state_reason": "Resources", "user_name": "alice",
            "partition": "gpu", "account": account, "tres_per_node": f"gres:gpu:{gpus}",
            "node_count": 1, "submit_time": 10, "requeue": True})
    client = FakeSlurm(sinfo=[sinfo_node("node1", 1), sinfo_node("node2", 0)],
                       known_accounts={"nlp", "vision"})
    client.squeue = [array(1963, "1-3", 2, "nlp"), array(1983, "2-9%2", 1, "vision"),
                     squeue_job(1984, "RUNNING", nodes="node1", gpus=1, start=9000,
                                account="vision")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        daemon = _daemon(tmp_path, client, ledger)
        daemon.cycle()
        assert [(r.name, r.used, r.waiting) for r in tenants_view.recorded_rows(ledger)] == [
            ("nlp", 0, 6), ("vision", 1, 8)]
    assert (_gauge(daemon, "nlp", "waiting"), _gauge(daemon, "vision", "waiting")) == (6, 8)


def test_a_tenant_at_its_guarantee_is_no_victim(tmp_path: Path) -> None:
    """nlp holds node1 (job 1 since 9990: 80 GPU·s, queue 0), vision node2 (job 2 since 100:
    queue 2). nlp's job 3 (8 GPUs, queue 0): pure Tiresias preempts job 2; with tenants nlp
    would be at 16 of 8 (no reclaim), vision is at its guarantee, and nlp's own job is in
    job 3's queue: no preemption."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)],
                       known_accounts={"nlp", "vision"})
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=9990, account="nlp"),
                     squeue_job(2, "RUNNING", nodes="node2", start=100, account="vision"),
                     squeue_job(3, "PENDING", reason="Resources", account="nlp")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        assert _daemon(tmp_path, client, ledger).cycle().preemptions == ()
        assert [c for c in client.calls if c[0] in ("signal", "requeue")] == []


def test_checked_against_the_cluster_at_the_first_cycle(tmp_path: Path) -> None:
    """Guarantees of 16 GPUs on an 8-GPU cluster, an account slurmdbd does not know: one
    line each, before anything is sent to Slurm."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 0)], known_accounts={"nlp"})
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with pytest.raises(ConfigError) as err:
            _daemon(tmp_path, client, ledger).cycle()
    assert str(err.value).splitlines() == [
        "virtual_clusters: guaranteed_gpus sum to 16, above the cluster's 8 GPUs; lower them "
        "so that every guarantee can be met at once",
        "virtual_clusters.vision.account: 'vision' is not an account slurmdbd knows; add it "
        "(sacctmgr add account vision) or fix the name"]
    assert client.calls == []


def test_a_slurmdbd_outage_leaves_the_accounts_unchecked_and_the_daemon_running(
        tmp_path: Path) -> None:
    """slurmdbd down, slurmctld up: sacctmgr cannot connect. slurmctld schedules without
    slurmdbd, so the daemon's first cycle checks what it can (the guarantees: 16 of 16 GPUs,
    fine), logs that the accounts go unchecked, and decides: the reclaim case above."""
    import json
    from log_helpers import captured
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)], dbd_down=True)
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=9000, account="vision"),
                     squeue_job(2, "RUNNING", nodes="node2", start=100, account="vision"),
                     squeue_job(3, "PENDING", reason="Resources", account="nlp")]
    with Ledger(tmp_path / "l.sqlite") as ledger, captured("json") as (log, stream):
        config = DaemonConfig(ledger_path=str(tmp_path / "l.sqlite"),
                              snapshot_path=str(tmp_path / "snapshot.json"),
                              virtual_clusters=TENANTS)  # type: ignore[arg-type]
        out = Daemon(config, client, ledger, log, clock=lambda: T0).cycle()  # type: ignore[arg-type]
    assert [(p.waiter, p.victims) for p in out.preemptions] == [(3, (2,))]
    [line] = [json.loads(x) for x in stream.getvalue().splitlines() if "accounts_unchecked" in x]
    assert line["level"] == "WARNING" and "Connection refused" in line["error"]


def test_a_bad_key_of_one_tenant_hides_no_rule_broken_by_another() -> None:
    """docs/dlprio.md: rules that tie two keys are checked whenever the keys each reads are
    valid on their own. teama's keys are valid and break a rule (guarantee above max_gpus): it
    is told beside teamb's unknown key and teamc's negative guarantee. teamc, invalid, is in
    no rule: its account overlaps teama's, which is not told until its guarantee is fixed."""
    with pytest.raises(ConfigError) as err:
        DaemonConfig(virtual_clusters={  # type: ignore[arg-type]
            "teama": {"account": "teama", "guaranteed_gpus": 30, "max_gpus": 8},
            "teamb": {"account": "teamb", "guaranteed_gpus": 2, "bogus": 1},
            "teamc": {"account": "teama", "guaranteed_gpus": -1}})
    assert str(err.value).splitlines() == [
        "virtual_clusters.teamb.bogus: unknown key; allowed: account, partition, qos, "
        "guaranteed_gpus, max_gpus, user_limit_factor, users",
        "virtual_clusters.teamc.guaranteed_gpus: must be a whole number >= 0, got -1",
        "virtual_clusters.teama: guaranteed_gpus 30 above max_gpus 8; raise max_gpus or "
        "lower the guarantee"]


def test_every_problem_against_the_cluster_at_once_named_by_the_file(tmp_path: Path) -> None:
    """``dlprio run``/``once`` check the config against the cluster before anything else
    (names_check.preflight): a partition typo and the tenants' problems come together, one line
    each, each behind the config file's name as the file's own problems are."""
    from prioritizer.daemon.names_check import preflight
    client = FakeSlurm(sinfo=[sinfo_node("node1", 0)], known_accounts={"nlp"},
                       partitions={"gpu": {}})
    config = DaemonConfig(partitions=("gpux",), virtual_clusters=TENANTS)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as err:
        preflight(config, client, "/etc/dlprio/dlprio.yaml")   # type: ignore[arg-type]
    assert str(err.value).splitlines() == [
        "/etc/dlprio/dlprio.yaml: partitions: 'gpux' is not a partition of the cluster "
        "(it has: gpu); fix the name",
        "/etc/dlprio/dlprio.yaml: virtual_clusters: guaranteed_gpus sum to 16, above the "
        "cluster's 8 GPUs; lower them so that every guarantee can be met at once",
        "/etc/dlprio/dlprio.yaml: virtual_clusters.vision.account: 'vision' is not an account "
        "slurmdbd knows; add it (sacctmgr add account vision) or fix the name"]
    assert client.calls == []


def test_dlqueue_shows_the_tenants_of_the_snapshot(tmp_path: Path) -> None:
    """The public snapshot carries the per-tenant GPUs (the reclaim case above), dlqueue
    prints them under its table."""
    from prioritizer.daemon.snapshot import read_snapshot
    from submit.queue_view import render_tenants
    client = FakeSlurm(sinfo=[sinfo_node("node1", 8), sinfo_node("node2", 8)],
                       known_accounts={"nlp", "vision"})
    client.squeue = [squeue_job(1, "RUNNING", nodes="node1", start=9000, account="vision"),
                     squeue_job(2, "RUNNING", nodes="node2", start=100, account="vision"),
                     squeue_job(3, "PENDING", reason="Resources", account="nlp")]
    with Ledger(tmp_path / "l.sqlite") as ledger:
        _daemon(tmp_path, client, ledger).cycle()
    snap = read_snapshot(tmp_path / "snapshot.json")
    assert snap is not None
    assert [line.split() for line in render_tenants(snap.tenants).splitlines()] == [
        ["TENANT", "GUARANTEED", "USED", "BORROWED", "WAITING", "FAIR_SHARE"],
        ["nlp", "8", "0", "0", "8", "0.000"],
        ["vision", "8", "16", "8", "0", "2.000"]]


def test_decayed_usage_is_kept_in_the_ledger(tmp_path: Path) -> None:
    """Half-life 3600 s. At T0 nothing is stored: usage 0, written with T0. One half-life
    later, vision having held 16 GPUs all along: 16 x 3600 / 0.693147 x (1 - 1/2) =
    16 x 5193.70 / 2 = 41,549.6 GPU·s (nlp, which never held a GPU, has no entry)."""
    from prioritizer.daemon.observe import Observation
    from prioritizer.policy.model import NodeView, Snapshot
    from prioritizer.policy.tenants import parse_tenancy
    from daemon_unit_helpers import unit
    from policy_helpers import running
    tenancy = parse_tenancy(TENANTS, 3600)
    jobs = (running(1, (8,), ("node1",), queue=0, attained=0.0),
            running(2, (8,), ("node2",), queue=0, attained=0.0))
    obs = Observation(T0, Snapshot((NodeView("node1", 8, 0), NodeView("node2", 8, 0)), jobs),
                      {1: unit(1, account="vision"), 2: unit(2, account="vision")}, ())
    with Ledger(tmp_path / "l.sqlite") as ledger:
        assert tenants_view.advance_usage(ledger, tenancy, obs, T0) == {
            "vision": (0.0, 0.0, 0.0)}
        later = tenants_view.advance_usage(ledger, tenancy, obs, T0 + 3600)
    assert later is not None
    assert later["vision"][0] == pytest.approx(41_549.6, abs=0.1) and "nlp" not in later


def test_partition_and_account_names_checked_at_the_first_cycle(tmp_path: Path) -> None:
    """A typo in partitions (the daemon would manage nothing), in exempt_partitions or
    exempt_accounts: one line each naming the key, before anything is sent to Slurm; names
    the cluster has pass (accounts unchecked without slurmdbd)."""
    client = FakeSlurm(sinfo=[sinfo_node("node1", 0, 16)], known_accounts={"nlp", "vision"},
                       partitions={"gpu": {}, "debug": {}})
    with Ledger(tmp_path / "l.sqlite") as ledger:
        with pytest.raises(ConfigError) as err:
            _daemon(tmp_path, client, ledger, partitions=("gpux", "gpu"),
                    exempt_partitions=("debgu",), exempt_accounts=("nlp", "ops")).cycle()
    assert str(err.value).splitlines() == [
        "partitions: 'gpux' is not a partition of the cluster (it has: debug, gpu); fix the name",
        "exempt_partitions: 'debgu' is not a partition of the cluster (it has: debug, gpu); "
        "fix the name",
        "exempt_accounts: 'ops' is not an account slurmdbd knows; add it "
        "(sacctmgr add account ops) or fix the name"]
    assert client.calls == []
    for extra, line in (   # mode partition's queue partitions; a tenant's partition
            ({"mode": "partition", "queue_partitions": ("gpu", "q1x", "debug")},
             "queue_partitions: 'q1x' is not a partition of the cluster (it has: debug, gpu); "
             "fix the name"),
            ({"virtual_clusters": {
                "nlp": {"account": "nlp", "partition": "gpu", "guaranteed_gpus": 8},
                "vision": {"partition": "visoin", "guaranteed_gpus": 8}}},
             "virtual_clusters.vision.partition: 'visoin' is not a partition of the cluster "
             "(it has: debug, gpu); fix the name")):
        with Ledger(tmp_path / "l1.sqlite") as ledger:
            config = DaemonConfig(ledger_path=str(tmp_path / "l1.sqlite"), **extra)  # type: ignore[arg-type]
            with pytest.raises(ConfigError) as err:
                Daemon(config, client, ledger, CycleAdapter(), clock=lambda: T0).cycle()  # type: ignore[arg-type]
        assert str(err.value).splitlines() == [line]
        assert client.calls == []
    client.known_accounts = None   # no slurmdbd: accounts are not checked
    with Ledger(tmp_path / "l2.sqlite") as ledger:
        _daemon(tmp_path, client, ledger, partitions=("gpu",), exempt_partitions=("debug",),
                exempt_accounts=("ops",)).cycle()


def test_a_tenant_of_users_only_is_refused_by_the_daemon() -> None:
    """``users:`` places trace jobs (``dlprio simulate --tenants``); the daemon tells tenants
    apart by account and partition, so a tenant naming only users would get no job there."""
    with pytest.raises(ConfigError) as err:
        DaemonConfig(virtual_clusters={"nlp": {"account": "nlp", "guaranteed_gpus": 8},
                                       "u4": {"users": ["alice"], "guaranteed_gpus": 8}})
    assert str(err.value).splitlines() == [
        "virtual_clusters.u4: names no account or partition, so the daemon would give it no job "
        "(users: is for traces, dlprio simulate --tenants); name the account or partition its "
        "jobs carry"]


def test_exempt_accounts_compared_as_slurm_keeps_them() -> None:
    """``exempt_accounts: [Ops]``: Slurm keeps the account as ``ops``; known, not refused."""
    from prioritizer.daemon.names_check import name_problems
    assert name_problems(DaemonConfig(exempt_accounts=("Ops",)), set(), {"ops"}) == []
    assert name_problems(DaemonConfig(exempt_accounts=("Opz",)), set(), {"ops"}) == [
        "exempt_accounts: 'Opz' is not an account slurmdbd knows; add it "
        "(sacctmgr add account opz) or fix the name"]
