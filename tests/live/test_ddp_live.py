"""A real PyTorch DDP job (examples/ddp_train.py, examples/specs/ddp-torch-2x2.yaml) on a
``dlcluster up --netns`` cluster, where every node has its own address.

The module brings up its own cluster (``ddpnet``, port base 13600, subnet 10.53.32.0/24, 4 nodes
of 8 GPUs) beside the suite's and takes it down. Both runs of the first test use the example spec
with fewer and shorter steps (``--steps 24 --step-s 0.75``), the same for both. The preemption is
the daemon's (``dlprio run``, the fast config of tests/daemon_helpers.py, 3 s cycles): the victim and the
reference fill the cluster, the victim falls to queue 1, and a waiter of 2 whole nodes arrives;
the daemon signals the victim, waits its grace time and requeues it. The waiter then holds the
victim's first nodes, so the second attempt starts on the reference's two nodes once the
reference ends, with another ``MASTER_ADDR``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from daemon_helpers import DaemonProc, ledger_rows, open_ledger, write_config
from live_helpers import wait_for
from slurm_plugin.localcluster import netns
from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin.localcluster.cluster import ClusterSpec
from slurm_plugin.slurm.records import Job
from torch_check import TORCH

if TORCH:   # else every test fails with the fix (tests/conftest.py); the rest still collect
    import torch

pytestmark = [pytest.mark.live, pytest.mark.torch]

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "specs" / "ddp-torch-2x2.yaml"
CLUSTER = ClusterSpec(name="ddpnet", port_base=13600, netns=True)
CLI = [sys.executable, "-m", "slurm_plugin.localcluster.cli"]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
STEPS = 24   # the test's --steps
STEP = re.compile(r"^\[ddp\] step (\d+) loss (\S+)$", re.M)
START = re.compile(r"^\[ddp\] start rank=(\d+) world=4 addr=(\S+) master=([^:\s]+):\d+ attempt=(\d+)", re.M)
HOSTS = re.compile(r"^\[hosts\] attempt=(\d+) rank=(\d+) ip=(\S+) list=(\S+)$", re.M)
DONE = re.compile(rf"^\[ddp\] done steps={STEPS} sha256=([0-9a-f]{{64}})$", re.M)


def dlcluster(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args, "--name", CLUSTER.name], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def netns_cluster() -> Iterator[SlurmClient]:
    """The module's own 4-node --netns cluster; SLURM_CONF points at it for the module."""
    dlcluster("down", "--purge")
    up = dlcluster("up", "--port-base", str(CLUSTER.port_base), "--nodes", "4", "--netns",
                   "--cred-expire", "5", "--no-install", "--clear")
    assert up.returncode == 0, up.stderr
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(CLUSTER.slurm_conf)
    try:
        yield SlurmClient(timeout_s=20)
    finally:
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        down = dlcluster("down", "--purge")
        assert down.returncode == 0, down.stderr
        # down removed the cluster's namespaces and every link with its alias
        assert netns.namespaces(CLUSTER) == []
        links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout)
        assert [x["ifname"] for x in links if x.get("ifalias") == CLUSTER.link_alias] == []


def submit(tmp_path: Path, spec: Path, tag: str) -> tuple[int, Path]:
    """Submit ``spec`` from the repository root with ``dlsubmit``; returns (job id, its output file)."""
    proc = subprocess.run(
        [sys.executable, "-m", "submit.cli", str(spec), "--json", "--output", str(tmp_path / f"{tag}-%j.out"),
         "--checkpoint-root", str(tmp_path / f"ckpt-{tag}")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["job_id"]
    return job_id, tmp_path / f"{tag}-{job_id}.out"


def spec_with(tmp_path: Path, name: str, commands: list[str]) -> Path:
    """The example spec with ``commands`` (each may use ``{train}``, the spec's own command)."""
    spec = yaml.safe_load(SPEC.read_text())
    train = spec["taskRoles"]["worker"]["commands"][0]
    spec["taskRoles"]["worker"]["commands"] = [c.format(train=train) for c in commands]
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def job(client: SlurmClient, job_id: int) -> Job:
    return next(j for j in client.jobs(job_ids=[job_id]) if j.job_id == job_id)


def ended(client: SlurmClient, job_id: int) -> Job | None:
    j = job(client, job_id)
    return j if j.state in ENDED else None


def node_names(client: SlurmClient, job_id: int) -> list[str]:
    return list(job(client, job_id).node_list)


def addr(node: str) -> str:
    return CLUSTER.node_addr(int(node.removeprefix("node")))


def text_of(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_preempted_ddp_job_moves_nodes_and_ends_bitwise_as_an_uninterrupted_run(
        netns_cluster: SlurmClient, tmp_path: Path) -> None:
    client = netns_cluster
    spec = spec_with(tmp_path, "short.yaml", [
        'echo "[hosts] attempt=$DL_RESTART_COUNT rank=$RANK ip=$PAI_CURRENT_CONTAINER_IP list=$PAI_TASK_ROLE_worker_HOST_LIST"',
        f"{{train}} --steps {STEPS} --step-s 0.75"])
    # 3 s cycles; the spec's grace (20 s) capped at 5 s (the checkpoint takes a step): the
    # requeue comes well before the reference, which started after the victim, ends
    cfg = write_config(tmp_path / "dlprio.yaml", interval_s=3, slurm_timeout_s=0)
    daemon = DaemonProc(cfg)
    victim = reference = waiter = None
    try:
        daemon.start()
        victim, victim_log = submit(tmp_path, spec, "victim")
        wait_for(lambda: job(client, victim).state == "RUNNING" and bool(node_names(client, victim)), 60,
                 "the victim to run")
        first = node_names(client, victim)
        reference, reference_log = submit(tmp_path, spec, "reference")
        wait_for(lambda: job(client, reference).state == "RUNNING", 60, "the reference to run")
        # 16 GPUs pass queue 0's 40 GPU·s in 2.5 s; the victim, started first, has the most service
        wait_for(lambda: ledger_rows(cfg).get(victim, {}).get("queue") == 1
                 and "[ddp] step 2 loss" in text_of(victim_log), 60, "the victim in queue 1, at step 2")
        waiter = client.submit("#!/bin/bash\nsleep 300\n", [
            "--job-name=ddp-waiter", f"--output={tmp_path}/waiter.out", "--nodes=2", "--gres=gpu:8",
            "--ntasks-per-node=1"])
        wait_for(lambda: "[ddp] checkpoint step=" in text_of(victim_log), 60, "the victim's checkpoint")
        wait_for(lambda: job(client, victim).restart_count == 1, 30, "the daemon's requeue")
        wait_for(lambda: job(client, waiter).state == "RUNNING", 60, "the waiter to run")
        waiter_nodes = node_names(client, waiter)
        wait_for(lambda: job(client, victim).state == "RUNNING", 120, "the second attempt to run")
        second = node_names(client, victim)
        client.cancel([waiter])
        for job_id in (reference, victim):
            wait_for(lambda: ended(client, job_id), 120, f"job {job_id} to end", interval_s=1)
    finally:
        client.cancel([j for j in (victim, reference, waiter) if j is not None and not ended(client, j)])
        assert daemon.stop() == 0, daemon.text()[-3000:]

    # the daemon preempted the victim once, for the waiter, after the grace time
    with open_ledger(cfg) as ledger:
        (intent,) = ledger.intents(victim)
        assert ledger.intents(reference) == []
    assert (intent.waiter, intent.signal, intent.grace_s, intent.outcome) == (waiter, "USR2", 5, "requeued")
    assert intent.requeue_at is not None and intent.deadline is not None
    assert intent.requeue_at >= intent.deadline
    assert sorted(waiter_nodes) == sorted(first)

    log, ref = victim_log.read_text(), reference_log.read_text()
    assert job(client, victim).state == job(client, reference).state == "COMPLETED", log[-3000:]
    assert job(client, victim).restart_count == 1
    # the second attempt ran on the other two nodes, with the other master address, found by every rank
    assert len(first) == len(second) == 2 and not set(first) & set(second), (first, second)
    starts = {(int(m[4]), int(m[1])): (m[2], m[3]) for m in START.finditer(log)}
    assert sorted(starts) == [(a, r) for a in (0, 1) for r in range(4)], log[-3000:]
    for attempt, nodes in ((0, first), (1, second)):
        assert {starts[attempt, r][1] for r in range(4)} == {addr(nodes[0])}
        assert sorted(starts[attempt, r][0] for r in range(4)) == sorted(addr(n) for n in nodes for _ in (0, 1))
    # dlsubmit's rendezvous: every rank's address and its own port (MASTER_PORT + 1 + rank) per attempt
    masters = dict(re.findall(r"^\[dlsubmit\] attempt (\d+) start: .*, master [^:\s]+:(\d+),", log, re.M))
    hosts = {(int(a), int(r)): (ip, hl) for a, r, ip, hl in HOSTS.findall(log)}
    for attempt, nodes in ((0, first), (1, second)):
        port = int(masters[str(attempt)])
        expected = [f"{addr(nodes[r // 2])}:{port + 1 + r}" for r in range(4)]
        assert {r: hosts[attempt, r] for r in range(4)} == {
            r: (addr(nodes[r // 2]), ",".join(expected)) for r in range(4)}
    checkpointed = int(re.search(r"^\[ddp\] checkpoint step=(\d+)$", log, re.M)[1])
    assert f"[ddp] resume step={checkpointed}" in log
    # each step once across attempts, with the reference's loss to the last bit (repr of the float)
    steps = [(int(s), loss) for s, loss in STEP.findall(log)]
    assert [s for s, _ in steps] == list(range(1, STEPS + 1)), [s for s, _ in steps]
    assert steps == [(int(s), loss) for s, loss in STEP.findall(ref)]
    assert DONE.search(log)[1] == DONE.search(ref)[1]
    ours = torch.load(tmp_path / "ckpt-victim" / str(victim) / "ddp-final.pt", weights_only=True)
    theirs = torch.load(tmp_path / "ckpt-reference" / str(reference) / "ddp-final.pt", weights_only=True)
    assert list(ours) == list(theirs) == ["0.weight", "0.bias", "3.weight", "3.bias"]
    for name in ours:
        assert ours[name].numpy().tobytes() == theirs[name].numpy().tobytes(), name


def test_a_rank_that_dies_fails_the_whole_gang_at_once(netns_cluster: SlurmClient, tmp_path: Path) -> None:
    """Rank 3 is killed (SIGKILL) once rank 0 logged step 3; the others wait in a collective
    for it (the gloo timeout is 120 s): the batch script's completion policy (one failed
    instance fails the job) stops them, and the job ends FAILED without waiting for that timeout."""
    client = netns_cluster
    out_file = f"{tmp_path}/dies-$SLURM_JOB_ID.out"
    path = spec_with(tmp_path, "dies.yaml", [
        "{train} --steps 400 & pid=$!",
        f"if [ \"$RANK\" = 3 ]; then until grep -q '^\\[ddp\\] step 3 loss' \"{out_file}\"; do sleep 0.2; done; "
        "kill -9 $pid; fi",
        "wait $pid"])
    job_id, out = submit(tmp_path, path, "dies")
    try:
        done = wait_for(lambda: ended(client, job_id), 100, "the gang to fail", interval_s=1)
    finally:
        if not ended(client, job_id):
            client.cancel([job_id])
    log = out.read_text()
    assert done.state == "FAILED", log[-3000:]
    steps = [int(s) for s, _ in STEP.findall(log)]
    assert 3 <= max(steps) < 400, log[-3000:]
    assert re.search(r"attempt 0 end: .*fail", log), log[-3000:]
