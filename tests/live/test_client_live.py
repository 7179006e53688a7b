"""The Slurm client against the live cluster.

Each test submits real jobs to the cluster that SLURM_CONF names (4 nodes x 8 fake GPUs from
`dlcluster up`), polls with timeouts and cancels its jobs at the end.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from live_helpers import cluster_name, wait_cluster_idle, wait_file, wait_for, wait_state
from slurm_plugin.slurm.client import JobUnknown, SlurmClient, SlurmRefused, SlurmUnreachable

pytestmark = [pytest.mark.live, pytest.mark.releases]


@pytest.fixture
def client() -> Iterator[SlurmClient]:
    c = SlurmClient(timeout_s=20)
    wait_cluster_idle(c, 180)  # the tests below need the whole cluster
    mine: list[int] = []
    c.submitted = mine  # type: ignore[attr-defined]
    yield c
    active = [j.job_id for j in c.jobs(job_ids=mine) if j.is_active] if mine else []
    if active:
        c.cancel(active)


def submit(c: SlurmClient, script: str) -> int:
    """Submit; a script that names no ``--output`` writes to /dev/null (never ``slurm-N.out``
    in the directory pytest runs in, the checkout)."""
    job_id = c.submit(script, [] if "--output=" in script else ["--output=/dev/null"])
    c.submitted.append(job_id)  # type: ignore[attr-defined]
    return job_id


def script(*sbatch: str, body: str) -> str:
    return "#!/bin/bash\n" + "".join(f"#SBATCH {s}\n" for s in sbatch) + body + "\n"


def test_gpu_job_gets_its_allocated_gpus(client: SlurmClient, tmp_path: Path) -> None:
    out = tmp_path / "cvd.out"
    jid = submit(client, script("--gres=gpu:3", f"--output={out}", "--job-name=t-cvd",
                                body='echo "CVD=$CUDA_VISIBLE_DEVICES"; sleep 4'))
    wait_state(client, jid, {"RUNNING"}, 30)
    running = client.jobs(job_ids=[jid], detail=True)[0]   # GPU indices: only in the JSON read
    assert running.gpus == 3 and running.gpus_per_node == 3
    assert len(running.gpu_indices) == 1 and len(running.gpu_indices[0]) == 3
    wait_state(client, jid, {"COMPLETED"}, 30)
    cvd = wait_file(out, r"^CVD=").strip().split("=", 1)[1]
    # fake devices are numbered like real ones: CUDA_VISIBLE_DEVICES lists Slurm's GPU indices
    assert tuple(int(x) for x in cvd.split(",")) == running.gpu_indices[0]


def test_two_node_gang_job_runs_on_two_nodes(client: SlurmClient, tmp_path: Path) -> None:
    out = tmp_path / "gang.out"
    jid = submit(client, script("--nodes=2", "--ntasks-per-node=1", "--gres=gpu:8", f"--output={out}",
                                "--job-name=t-gang",
                                body='srun bash -c \'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"\''))
    job = wait_state(client, jid, {"RUNNING", "COMPLETED"}, 30)
    assert job.node_count == 2 and job.gpus == 16
    wait_state(client, jid, {"COMPLETED"}, 30)
    lines = sorted(wait_file(out, r"(?s)node.*\n.*node").split("\n")[:2])
    nodes = {line.split()[0] for line in lines}
    assert len(nodes) == 2
    assert all(line.split()[1] == "0,1,2,3,4,5,6,7" for line in lines)


def test_priority_update_reorders_pending_jobs(client: SlurmClient) -> None:
    whole = ("--nodes=4", "--ntasks-per-node=1", "--gres=gpu:8")
    blocker = submit(client, script(*whole, "--job-name=t-blocker", body="sleep 300"))
    wait_state(client, blocker, {"RUNNING"}, 30)
    first = submit(client, script(*whole, "--job-name=t-first", body="sleep 300"))
    second = submit(client, script(*whole, "--job-name=t-second", body="sleep 300"))
    wait_state(client, second, {"PENDING"}, 10)
    before = {j.job_id: j.priority for j in client.jobs(job_ids=[first, second])}
    client.set_priority([second], 500000)
    after = {j.job_id: j.priority for j in client.jobs(job_ids=[first, second])}
    assert after[second] == 500000 and after[first] == before[first]
    client.cancel([blocker])
    started = wait_state(client, second, {"RUNNING"}, 60)
    assert client.job(first).state == "PENDING"
    assert started.start_time is not None


def test_signal_reaches_batch_shell_trap(client: SlurmClient, tmp_path: Path) -> None:
    out = tmp_path / "sig.out"
    body = ("trap 'echo got USR2; exit 0' USR2\necho ready\n"
            "for i in $(seq 600); do sleep 0.1; done\necho no-signal")
    jid = submit(client, script("--gres=gpu:1", f"--output={out}", "--job-name=t-sig", body=body))
    wait_state(client, jid, {"RUNNING"}, 30)
    wait_file(out, r"^ready$", 30)
    client.signal(jid, "USR2", batch_only=True)
    assert "got USR2" in wait_file(out, r"^got USR2$", 30)
    wait_state(client, jid, {"COMPLETED"}, 30)


def test_requeue_restarts_with_restart_count_one(client: SlurmClient, tmp_path: Path) -> None:
    out = tmp_path / "rq.out"
    body = 'echo "start restart=${SLURM_RESTART_COUNT:-0}"\nsleep 300'
    jid = submit(client, script("--gres=gpu:1", "--requeue", "--open-mode=append", f"--output={out}",
                                "--job-name=t-requeue", body=body))
    wait_state(client, jid, {"RUNNING"}, 30)
    wait_file(out, r"start restart=0", 30)
    client.requeue(jid)
    # cred_expire (10 s on dlcluster) + 1 s of BeginTime, then it starts again
    wait_file(out, r"start restart=1", 90)
    assert client.job(jid).restart_count == 1


def test_unknown_job_and_refusal_are_typed(client: SlurmClient) -> None:
    with pytest.raises(JobUnknown):
        client.requeue(99999999)
    with pytest.raises(SlurmRefused) as exc:
        client.submit(script("--gres=gpu:9", "--job-name=t-refused", "--output=/dev/null",
                             body="true"))
    assert "configuration" in exc.value.message.lower() or "requested node" in exc.value.message.lower()


def test_unreachable_while_slurmctld_is_stopped(client: SlurmClient) -> None:
    name = cluster_name()
    dlcluster = [sys.executable, "-m", "slurm_plugin.localcluster.cli"]
    subprocess.run([*dlcluster, "ctl", "stop", "--name", name], check=True, timeout=60)
    try:
        quick = SlurmClient(timeout_s=15)
        with pytest.raises(SlurmUnreachable):
            quick.jobs()
        with pytest.raises(SlurmUnreachable):
            quick.nodes()
    finally:
        subprocess.run([*dlcluster, "ctl", "start", "--name", name], check=True, timeout=120)
    nodes = wait_for(lambda: client.nodes(), 60, "nodes after restart")
    assert len(nodes) >= 1 and all(n.gpus_total > 0 for n in nodes)


#: Every way sbatch(1) asks for GPUs, with the GPUs per node and in all that each job (or each
#: record: a hetjob component, an array element) holds, worked out from the request on 4 nodes
#: of 2 sockets x 8 GPUs. A pending array is one record, its elements folded (``5_[0-1]``).
GPU_REQUESTS = [
    (("--gres=gpu",), [(1, 1)]),
    (("--gres=gpu:2",), [(2, 2)]),
    (("--gres=gpu:a100",), [(1, 1)]),
    (("--gres=gpu:a100:3",), [(3, 3)]),
    (("--gpus=3",), [(3, 3)]),
    (("--gpus-per-node=2", "--nodes=2"), [(2, 4)]),
    (("--gpus-per-task=1", "--ntasks=3", "--nodes=1"), [(3, 3)]),
    (("--gpus-per-socket=1", "--sockets-per-node=2"), [(2, 2)]),
    (("--gres=gpu:1", "--array=0-1"), {"pending": [(1, 1)], "running": [(1, 1), (1, 1)]}),
    (("--gres=gpu:1", "hetjob", "--gres=gpu:2"), [(1, 1), (2, 2)]),
]


@pytest.mark.parametrize("when", ["pending", "running"])
def test_every_way_of_asking_for_gpus_counts(client: SlurmClient, when: str) -> None:
    """Pending (held by a begin time) and running, every request form reads as the GPUs it asks
    for: a count left out is one GPU, per socket counts x sockets per node, per task x tasks."""
    later = ["--begin=now+1hour"] if when == "pending" else []
    submitted = []
    for request, expected in GPU_REQUESTS:
        first, *rest = request
        lines = [first, *later]
        for opt in rest:
            lines.append(opt)
            if opt == "hetjob":
                lines += later
        if isinstance(expected, dict):
            expected = expected[when]
        submitted.append((submit(client, script(*lines, body="sleep 300")), expected))
    state = {"pending": {"PENDING"}, "running": {"RUNNING"}}[when]
    for job_id, expected in submitted:
        def records(job_id: int = job_id) -> list | None:
            mine = sorted(client.jobs(job_ids=[job_id]), key=lambda j: j.job_id)
            return mine if len(mine) == len(expected) and all(j.state in state for j in mine) else None
        found = wait_for(records, 60, f"job {job_id} {when}")
        assert [(j.gpus_per_node, j.gpus) for j in found] == expected, job_id
    client.cancel([job_id for job_id, _ in submitted])


def test_an_allocation_without_a_batch_script_reads_as_not_batch(client: SlurmClient) -> None:
    """salloc's allocation (no batch script: ``scontrol requeue`` cannot restart it, so it is
    never a victim) reads ``batch`` False, an sbatch job True (squeue -O BatchFlag)."""
    name = f"alloc-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(["salloc", "--no-shell", f"--job-name={name}", "--gres=gpu:1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    alloc = wait_for(lambda: next((j for j in client.jobs() if j.name == name), None), 30,
                     "the allocation in squeue")
    client.submitted.append(alloc.job_id)  # type: ignore[attr-defined]
    batch = submit(client, script("--gres=gpu:1", body="sleep 300"))
    assert (alloc.batch, wait_state(client, batch, {"RUNNING", "PENDING"}, 30).batch) == (False, True)
