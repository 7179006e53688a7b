"""Parsing of real Slurm 22.05 JSON (tests/data/sample-*.json, recorded on a dlcluster-like
4-node cluster with slurmdbd; recorded as tests/data/sample-*.json) into typed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_plugin import records
from slurm_plugin.records import filter_jobs, gpu_indices, gpus_in_tres, job_from_json, node_from_json

DATA = Path(__file__).parent / "data"


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


def test_node_gpu_totals() -> None:
    data = json.loads((DATA / "sample-sinfo.json").read_text())
    node = node_from_json(data["nodes"][0])
    assert (node.name, node.state, node.gpus_total, node.gpus_used, node.gpu_type) == ("node1", "idle", 8, 0, "a100")
    assert (node.sockets, node.cores_per_socket, node.cpus) == (2, 8, 16)
    assert node.gpus_free == 8


@pytest.mark.parametrize(
    "tres,expected",
    [("gres:gpu:4", 4), ("gres:gpu:a100:2", 2), ("cpu=2,mem=1G,node=1,gres/gpu=8", 8), ("cpu=2,node=1", 0), ("", 0)],
)
def test_gpus_in_tres(tres: str, expected: int) -> None:
    assert gpus_in_tres(tres) == expected


@pytest.mark.parametrize(
    "detail,expected",
    [("gpu:a100:4(IDX:0-3)", (0, 1, 2, 3)), ("gpu:a100:3(IDX:0,2,5)", (0, 2, 5)),
     ("gpu:4(IDX:1-2,6-7)", (1, 2, 6, 7)), ("gpu:a100:0(IDX:N/A)", ())],
)
def test_gpu_indices(detail: str, expected: tuple[int, ...]) -> None:
    assert gpu_indices(detail) == expected


def test_node_down_has_no_free_gpus() -> None:
    node = node_from_json({"name": "n", "state": "down", "gres": "gpu:8", "gres_used": "gpu:0", "state_flags": []})
    assert node.gpus_total == 8 and node.gpus_free == 0
    drained = node_from_json({"name": "n", "state": "idle", "gres": "gpu:8", "gres_used": "gpu:0",
                              "state_flags": ["DRAIN"]})
    assert drained.gpus_free == 0


def test_filters_apply_in_client(squeue: dict) -> None:
    jobs = [job_from_json(j) for j in squeue["jobs"]]
    assert [j.job_id for j in filter_jobs(jobs, states=["pending"])] == [15]
    assert [j.job_id for j in filter_jobs(jobs, job_ids=[13])] == [13]
    assert filter_jobs(jobs, users=["nobody"]) == []
    assert [j.job_id for j in filter_jobs(jobs, partitions=["low"])] == [13, 15]


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
    from slurm_plugin.records import array_task_in

    assert [t for t in inside + outside if array_task_in(text, t)] == inside
