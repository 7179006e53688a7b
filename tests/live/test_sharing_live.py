"""GPU sharing on the live cluster (needs GPU shards: ``dlcluster up --shards 4``): two 0.5-GPU
jobs share one GPU (the same device in ``CUDA_VISIBLE_DEVICES`` and in Slurm's
``gres_detail``), a whole-GPU waiter preempts both through the checkpoint contract (USR2, grace,
requeue) once they are in a lower queue, and an opportunistic job is requeued the moment a
production job needs its GPU, though both are in queue 0 and it ran for seconds only. And
``dlsubmit`` reads the shards per GPU from the nodes: examples/specs/half-gpu.yaml runs on half
of one GPU, which it sees in ``CUDA_VISIBLE_DEVICES``.

Every GPU but one is held by a job that cannot be requeued (``--no-requeue``: never a victim),
so the jobs of the test all want that one GPU. The tests use the cluster ``SLURM_CONF`` points at
when its GPUs have shards; else they bring up their own small one (``dlcluster up --name
shardsRRRR --port-base P --slurm R --nodes 1 --gpus-per-node 2 --shards 4``, of the current
cluster's release R, P 7800 + 10 per release: live_helpers.per_release_port, about 15 s) and
take it down after."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon_helpers import CKPT_SCRIPT, DaemonProc, Jobs, ledger_rows, live_jobs, write_config
from live_helpers import per_release_port, wait_file, wait_for, wait_state
from slurm_plugin import shard
from slurm_plugin.slurm.client import SlurmClient, SlurmError

pytestmark = [pytest.mark.live, pytest.mark.releases]
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = "#!/bin/bash\necho \"cvd=$CUDA_VISIBLE_DEVICES\"\n" + CKPT_SCRIPT.split("\n", 1)[1]


_NAME, _, _PORT = os.environ.get("DLTEST_SHARD_CLUSTER", "shards:7800").partition(":")


def shard_cluster_args(release: tuple[int, int]) -> list[str]:
    """The cluster brought up when the current one has no shards, of the current cluster's
    release, one name and port per release (``DLTEST_SHARD_CLUSTER=NAME:PORT`` names another
    NAME and base PORT)."""
    return ["--name", "%s%d%02d" % (_NAME, *release),
            "--port-base", str(per_release_port(int(_PORT), release)),
            "--slurm", "%d.%02d" % release]


def _has_shards() -> bool:
    try:
        return any(n.shards_total for n in SlurmClient(timeout_s=20).nodes())
    except SlurmError:   # no cluster answers there: bring one up
        return False


@pytest.fixture(scope="module")
def shard_cluster(slurm_release: tuple[int, int]) -> Iterator[None]:
    """The current cluster if it has GPU shards, else a 1-node one of 2 GPUs x 4 shards of the
    same Slurm release."""
    if _has_shards():
        yield
        return
    cli = [sys.executable, "-m", "slurm_plugin.localcluster.cli"]
    args = shard_cluster_args(slurm_release)
    names = args[:4]
    up = subprocess.run([*cli, "up", *args, "--nodes", "1", "--gpus-per-node", "2",
                         "--shards", "4", "--clear"], capture_output=True, text=True, timeout=240)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        env = subprocess.run([*cli, "env", *names], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        with pytest.MonkeyPatch.context() as mp:
            for line in env.splitlines():
                key, _, value = line.removeprefix("export ").partition("=")
                mp.setenv(key, shlex.split(value)[0] if value else "")
            assert _has_shards()
            yield
    finally:
        subprocess.run([*cli, "down", *names], capture_output=True, timeout=120)


@pytest.fixture
def jobs(shard_cluster: None, tmp_path: Path) -> Iterator[Jobs]:
    with live_jobs(tmp_path) as j:
        yield j


def _submit(jobs: Jobs, name: str, gres: str, comment: str | None = "dl:v1;signal=USR2;grace=5",
            extra: tuple[str, ...] = ()) -> tuple[int, Path]:
    log = jobs.workdir / f"{name}.log"
    args = [f"--job-name=shr-{name}", f"--output={log}", "--open-mode=append", f"--gres={gres}",
            "--ntasks=1", f"--export=ALL,CK_DIR={jobs.workdir},STEPS=300", *extra]
    args += ["--requeue", f"--comment={comment}"] if comment else ["--no-requeue"]
    job_id = jobs.client.submit(SCRIPT, args)
    jobs.ids.append(job_id)
    return job_id, log


def _one_gpu_left(jobs: Jobs) -> tuple[str, int]:
    """Hold every GPU but one with jobs that are never victims; returns (node, shards per GPU)."""
    nodes = [n for n in jobs.client.nodes() if n.gpus_total and n.usable]
    per_gpu = shard.shards_per_gpu(nodes[0].gpus_total, nodes[0].shards_total)
    assert per_gpu >= 2, ("this test needs GPU shards (2 or more per GPU) on the cluster: "
                          "dlcluster up --shards 4")
    held = []
    for i, n in enumerate(nodes):
        keep = 1 if i == 0 else 0
        if n.gpus_total - keep:
            held.append(_submit(jobs, f"hold-{n.name}", f"gpu:{n.gpus_total - keep}", None,
                                (f"--nodelist={n.name}",))[0])
    for h in held:
        wait_state(jobs.client, h, {"RUNNING"}, 30)
    return nodes[0].name, per_gpu


def test_shard_jobs_share_a_gpu_and_are_preempted_together_and_opportunistic_jobs_yield(
        jobs: Jobs, tmp_path: Path) -> None:
    node, per_gpu = _one_gpu_left(jobs)
    half = f"shard:{per_gpu // 2}"
    (s1, log1), (s2, log2) = _submit(jobs, "s1", half), _submit(jobs, "s2", half)
    for log in (log1, log2):
        wait_file(log, r"^start ", 30)   # USR2 traps set before the daemon may signal them
    cfg = write_config(tmp_path / "dlprio.yaml", policy={"thresholds_gpu_s": [4, 100000]})
    daemon = DaemonProc(cfg).start()
    try:
        for s in (s1, s2):
            wait_state(jobs.client, s, {"RUNNING"}, 30)
        detail = {j.job_id: j.gpu_indices for j in jobs.client.jobs(job_ids=[s1, s2], detail=True)}
        assert detail[s1] == detail[s2] and len(detail[s1][0]) == 1     # the same one GPU
        cvd = [re.search(r"^cvd=.*$", wait_file(p, r"^cvd=", 20), re.M).group(0) for p in (log1, log2)]
        assert cvd[0] == cvd[1] == f"cvd={detail[s1][0][0]}"   # fake GPUs: index = device
        # 0.5 GPU each: 4 GPU·s after 8 s: both in queue 1; the whole-GPU waiter is in queue 0
        wait_for(lambda: all(ledger_rows(cfg).get(s, {}).get("queue") == 1 for s in (s1, s2)), 40,
                 "both shard jobs in queue 1")
        waiter, _ = _submit(jobs, "whole", "gpu:1")
        wait_state(jobs.client, waiter, {"RUNNING"}, 45)
        for s, log in ((s1, log1), (s2, log2)):
            assert jobs.client.job(s).restart_count == 1
            assert "checkpoint" in log.read_text()   # USR2 reached the batch script before the requeue
    finally:
        daemon.stop()
    jobs.client.cancel([s1, s2, waiter])
    wait_for(lambda: not any(j.is_active for j in jobs.client.jobs(job_ids=[s1, s2, waiter])), 30,
             "the first jobs to end")
    # an opportunistic job on the free GPU; a production job arrives: both in queue 0, the
    # opportunistic job started seconds ago (min_run 600 s would keep a production one)
    (tmp_path / "phase2").mkdir()
    cfg2 = write_config(tmp_path / "phase2" / "dlprio.yaml",
                        policy={"thresholds_gpu_s": [100000, 200000], "min_run_s": 600})
    opp, opp_log = _submit(jobs, "opp", "gpu:1", "dl:v1;signal=USR2;grace=5;class=opportunistic")
    wait_state(jobs.client, opp, {"RUNNING"}, 30)
    wait_file(opp_log, r"^start ", 20)   # its USR2 trap is set
    daemon = DaemonProc(cfg2).start()
    try:
        prod, _ = _submit(jobs, "prod", "gpu:1")
        wait_state(jobs.client, prod, {"RUNNING"}, 40)
        assert jobs.client.job(opp).restart_count == 1 and "checkpoint" in opp_log.read_text()
    finally:
        daemon.stop()


def test_dlsubmit_reads_the_shards_per_gpu_and_the_half_gpu_job_sees_one_device(
        jobs: Jobs, tmp_path: Path) -> None:
    nodes = [n for n in jobs.client.nodes() if n.gpus_total and n.usable]
    per_gpu = shard.shards_per_gpu(nodes[0].gpus_total, nodes[0].shards_total)
    assert per_gpu >= 2 and per_gpu % 2 == 0, "this test needs an even shard count per GPU: dlcluster up --shards 4"
    proc = subprocess.run(
        [sys.executable, "-m", "submit.cli", "examples/specs/half-gpu.yaml", "--json",
         "--output", str(tmp_path / "half-%j.out"), "--checkpoint-root", str(tmp_path / "ckpt")],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    job_id = json.loads(proc.stdout)["job_id"]
    jobs.ids.append(job_id)
    job = wait_state(jobs.client, job_id, {"RUNNING"}, 30)
    assert job.shards_per_node == per_gpu // 2 and job.gpus == 0          # 0.5 GPU as shards
    text = wait_file(tmp_path / f"half-{job_id}.out", r"CUDA_VISIBLE_DEVICES=\d", 30)
    (detail,) = [j.gpu_indices for j in jobs.client.jobs(job_ids=[job_id], detail=True)]
    assert f"CUDA_VISIBLE_DEVICES={detail[0][0]}\n" in text and len(detail[0]) == 1
