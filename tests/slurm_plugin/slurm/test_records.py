"""Parsing of real Slurm 22.05 ``squeue --json`` (tests/data/sample-squeue.json, recorded on a
dlcluster-like 4-node cluster) and of formatted sinfo records into typed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_plugin.slurm import records
from slurm_plugin.slurm.records import SINFO_FIELDS, filter_jobs, gpu_indices, gpus_in_tres, node_from_fields
from slurm_plugin.slurm.shapes import job_from_json

DATA = Path(__file__).parents[2] / "data"


@pytest.fixture(scope="module")
def squeue() -> dict:
    return json.loads((DATA / "sample-squeue.json").read_text())


def test_running_gang_job(squeue: dict) -> None:
    job = job_from_json(squeue["jobs"][0])
    assert job.job_id == 13
    assert job.name == "running-gang"
    assert job.user == "root"
    assert job.state == "RUNNING"
    assert job.gpus_per_node == 4
    assert job.gpus == 8
    assert job.node_count == 2
    assert job.node_list == ("node1", "node2")
    assert job.gpu_indices == ((0, 1, 2, 3), (0, 1, 2, 3))
    assert job.start_time == 1795949343
    assert job.submit_time == 1795949339
    assert job.time_limit_s == 600  # squeue says 10 minutes
    assert job.requeue is True
    assert job.het_job_id is None and job.array_job_id is None
    assert job.unit_id == 13


def test_pending_job_has_requested_shape(squeue: dict) -> None:
    job = job_from_json(squeue["jobs"][1])
    assert job.state == "PENDING"
    assert job.gpus_per_node == 8 and job.node_count == 4 and job.gpus == 32
    assert job.start_time is None or job.start_time > 0
    assert job.gpu_indices == ()
    assert job.node_list == ()


def _node(**kw: str) -> list[str]:
    """One formatted sinfo record (values in SINFO_FIELDS order) of a 16-core, 8-GPU node."""
    rec = {"name": "node1", "address": "node1", "state": "idle", "partition": "gpu*",
           "cpus": "16", "sockets": "2", "cores": "8", "memory": "64000",
           "gres": "gpu:a100:8(S:0-1)", "gres_used": "gpu:a100:0(IDX:N/A)"}
    rec.update(kw)
    return [rec[k] for k, _ in SINFO_FIELDS]


def test_node_gpu_totals() -> None:
    node = node_from_fields(_node())
    assert (node.name, node.state, node.gpus_total, node.gpus_used, node.gpu_type) == (
        "node1", "idle", 8, 0, "a100")
    assert (node.sockets, node.cores_per_socket, node.cpus, node.partitions) == (2, 8, 16, ("gpu",))
    assert node.gpus_free == 8


@pytest.mark.parametrize(
    "tres,expected",
    [("gres:gpu:4", 4), ("gres:gpu:a100:2", 2), ("cpu=2,mem=1G,node=1,gres/gpu=8", 8), ("cpu=2,node=1", 0), ("", 0),
     # the count left out asks for one GPU (sbatch --gres=gpu; 22.05 and 24.11 spellings)
     ("gres:gpu", 1), ("gres/gpu", 1), ("gres/gpu:a100", 1),
     # several types add up; a TRES total is not counted again beside its typed items
     ("gres/gpu:a100:2,gres/gpu:v100:1", 3), ("cpu=1,gres/gpu=2,gres/gpu:a100=2", 2),
     ("gres/gpu:a100=2", 2),
     # other GRES whose names start alike are no GPUs
     ("gres/gpumem:10G", 0), ("gres/gpu:a100:2,gres/shard:4", 2)],
)
def test_gpus_in_tres(tres: str, expected: int) -> None:
    assert gpus_in_tres(tres) == expected


@pytest.mark.parametrize(
    "detail,expected",
    [("gpu:a100:4(IDX:0-3)", (0, 1, 2, 3)), ("gpu:a100:3(IDX:0,2,5)", (0, 2, 5)),
     ("gpu:4(IDX:1-2,6-7)", (1, 2, 6, 7)), ("gpu:a100:0(IDX:N/A)", ()),
     # one item per GRES of the job (gres_ctld_job_build_details): every GPU item counts,
     # other GRES do not, whatever their place
     ("gpu:a100:1(IDX:0),gpu:v100:1(IDX:4)", (0, 4)), ("nic:1(IDX:0),gpu:2(IDX:2-3)", (2, 3)),
     ("gpu:2(IDX:0-1),gpumem:10G(IDX:0-1)", (0, 1)), ("shard:2(IDX:1)", (1,))],
)
def test_gpu_indices(detail: str, expected: tuple[int, ...]) -> None:
    assert gpu_indices(detail) == expected


def test_node_gres_counts_with_a_suffix() -> None:
    """A node's GRES counts that are whole multiples of 1024 print with a suffix (gres.c
    ``_get_suffix``): 8 GPUs of 128 shards each are ``shard:1K``, 1024 shards."""
    node = node_from_fields(_node(gres="gpu:a100:8(S:0-1),shard:1K(S:0-1)",
                                  gres_used="gpu:a100:2(IDX:0-1),shard:0(0/128,0/128)"))
    assert (node.gpus_total, node.gpus_used, node.shards_total) == (8, 2, 1024)
    assert node_from_fields(_node(gres="gpu:2K", gres_used="gpu:1K(IDX:0-1023)")).gpus_used == 1024


@pytest.mark.parametrize("state,active", [
    # squeue(1) JOB STATE CODES: held in the queue, or holding a stopped allocation
    ("RESV_DEL_HOLD", True), ("SPECIAL_EXIT", True), ("STOPPED", True), ("REQUEUE_HOLD", True),
    ("SUSPENDED", True), ("PREEMPTED", False), ("REVOKED", False), ("DEADLINE", False)])
def test_held_and_stopped_jobs_are_active(squeue: dict, state: str, active: bool) -> None:
    job = job_from_json({**squeue["jobs"][0], "job_state": state})
    assert (job.state, job.is_active) == (state, active)
    assert (state in records.WAITING_STATES or state in records.HOLDING_STATES) is active


def test_node_down_has_no_free_gpus() -> None:
    node = node_from_fields(_node(state="down", gres="gpu:8", gres_used="gpu:0"))
    assert node.gpus_total == 8 and node.gpus_free == 0
    drained = node_from_fields(_node(state="idle+drain", gres="gpu:8", gres_used="gpu:0"))
    assert drained.state_flags == ("DRAIN",) and drained.gpus_free == 0


@pytest.mark.parametrize("state,free", [
    ("idle", 8), ("idle+POWERED_DOWN", 8), ("idle+PLANNED", 8), ("mixed+COMPLETING", 8),
    # sinfo(1) NODE STATE CODES: no new job of any user
    ("idle+MAINTENANCE+RESERVED", 0), ("idle+RESERVED", 0), ("idle+INVALID_REG", 0),
    ("idle+POWERING_DOWN", 0), ("down+REBOOT_ISSUED", 0), ("idle+REBOOT_ISSUED", 0),
    ("idle+PERFCTRS", 0), ("mixed+DRAIN", 0), ("idle+NOT_RESPONDING", 0)])
def test_a_node_in_a_reservation_or_invalid_offers_no_gpu(state: str, free: int) -> None:
    assert node_from_fields(_node(state=state)).gpus_free == free


def test_filters_apply_in_client(squeue: dict) -> None:
    jobs = [job_from_json(j) for j in squeue["jobs"]]
    assert [j.job_id for j in filter_jobs(jobs, states=["pending"])] == [15]
    assert [j.job_id for j in filter_jobs(jobs, job_ids=[13])] == [13]
    assert filter_jobs(jobs, users=["nobody"]) == []
    assert [j.job_id for j in filter_jobs(jobs, partitions=["low"])] == [13, 15]


@pytest.mark.parametrize(("fields", "per_node", "total"), [
    ({"tres_per_node": "gres:gpu:4", "node_count": 2}, 4, 8),
    ({"tres_per_job": "gres/gpu:3", "node_count": 2}, 2, 3),
    ({"tres_per_task": "gres/gpu=1", "tasks": 4}, 4, 4),
    ({"tres_per_socket": "gres/gpu:1", "sockets_per_node": 2, "node_count": 2}, 2, 4),
    ({"tres_per_socket": "gres/gpu:1"}, 1, 1),
    ({"tres_alloc_str": "cpu=1,node=1,gres/gpu=2"}, 2, 2),
    ({}, 0, 0)],
    ids=["per-node", "per-job", "per-task", "per-socket", "per-socket-no-sockets", "alloc", "cpu"])
def test_gpus_counted_as_the_formatted_read_counts_them(fields: dict, per_node: int,
                                                        total: int) -> None:
    job = job_from_json({"job_id": 5, "job_state": "RUNNING", **fields})
    assert (job.gpus_per_node, job.gpus) == (per_node, total)


def test_hetjob_component_unit_id() -> None:
    raw = {"job_id": 21, "het_job_id": 20, "het_job_offset": 1, "job_state": "PENDING",
           "tres_per_node": "gres:gpu:2", "node_count": 1}
    job = job_from_json(raw)
    assert job.unit_id == 20 and job.het_job_offset == 1 and job.gpus == 2
    assert records.filter_jobs([job], job_ids=[20]) == [job]


@pytest.mark.parametrize(("text", "inside", "outside"), [
    ("5-9", [5, 6, 9], [4, 10]),
    ("1,3,5,7,9%2", [1, 3, 9], [2, 4, 10]),   # Slurm 22.05's form of --array=1-9:2%2
    ("3,5,7-8", [3, 5, 7, 8], [4, 6, 9]),
    ("0-20:5", [0, 5, 20], [1, 4, 21]),
    ("12%3", [12], [3, 11]),
    ("0-6:0", [0, 3, 6], [7]),                 # no step of 0: every element
    ("", [], [0, 1]),
    ("x-y,4", [4], [0])])
def test_array_task_in_the_folded_pending_elements(text: str, inside: list[int],
                                                   outside: list[int]) -> None:
    from slurm_plugin.slurm.records import array_task_in

    assert [t for t in inside + outside if array_task_in(text, t)] == inside


@pytest.mark.parametrize(("text", "count"), [
    ("1-3", 3), ("2-9%2", 8),                  # the throttle limits what runs, not what waits
    ("1,3,5,7,9%2", 5), ("3,5,7-8", 4), ("0-20:5", 5), ("12%3", 1),
    ("", 1), ("x-y,4", 1)])                    # at least the record itself
def test_array_task_count_is_every_pending_element(text: str, count: int) -> None:
    assert records.array_task_count(text) == count
