"""job_submit.lua's slurm_job_modify: an update is judged on the job as the update leaves it.

Each field comes from job_desc when the update sets it, else from job_rec (the job as it is).
Slurm's job_rec has no requeue field (it reads nil), so a job that becomes guarded with its
requeue unknown gets requeue=1 written into the update. Runs the script in Lua 5.1 (lupa,
tests/lua_helpers.py); the submit-time rules are in tests/slurm_plugin/test_lua_job_submit.py.
"""

from __future__ import annotations

import pytest

from lua_helpers import CODES, NO_VAL, NO_VAL16, load

GPU = "gres:gpu:4"
DENIED = CODES["ESLURM_ACCESS_DENIED"]
# uid 0 is root in /etc/passwd: it stands for the job's owner (job records of 22.05: user_id)
CPU_IN_GPU = {"job_id": 7, "partition": "gpu", "user_id": 0}
GPU_IN_DEBUG = {"job_id": 8, "partition": "debug", "user_id": 0, "tres_per_node": GPU}
GUARDED = {"job_id": 9, "partition": "gpu", "user_id": 0, "tres_per_node": GPU}

# every field through which an update gives a job GPUs, as job_desc carries it
GPU_UPDATES = [
    ("tres_per_node", "gres:gpu:4"),     # scontrol update TresPerNode=gres:gpu:4
    ("gres", "gres:gpu:2"),              # scontrol update Gres=gpu:2 (job_desc.gres reads tres_per_node)
    ("tres_per_job", "gres:gpu:8"),      # TresPerJob (--gpus)
    ("tres_per_socket", "gres:gpu:1"),   # TresPerSocket (--gpus-per-socket)
    ("tres_per_task", "gres:gpu:a100:1"),  # TresPerTask (--gpus-per-task)
]


@pytest.mark.parametrize("tres_field, value", GPU_UPDATES, ids=[f for f, _ in GPU_UPDATES])
def test_giving_a_job_gpus_in_a_managed_partition_is_guarded(tres_field: str, value: str):
    p = load()
    assert p.modify(p.desc(**{tres_field: value}, requeue=0), CPU_IN_GPU) == DENIED
    assert p.log[1:] == ["dl job_submit: refused update of job 7: requeue=0 (GPU jobs here must be requeueable);"
                     " ask the admins to exempt your user or account"]
    d = p.desc(**{tres_field: value})
    assert p.modify(d, CPU_IN_GPU) == 0
    assert d.requeue == 1  # the job's own requeue cannot be read: the update turns it on


def test_moving_a_gpu_job_into_a_managed_partition_is_guarded():
    p = load()
    d = p.desc(partition="gpu")
    assert p.modify(d, GPU_IN_DEBUG) == 0 and d.requeue == 1
    assert p.log[-1] == "dl job_submit: requeue of job 8 set to 1: the update makes it a guarded GPU job"
    assert p.modify(p.desc(partition="gpu", requeue=0), GPU_IN_DEBUG) == DENIED
    d = p.desc(partition="gpu", requeue=1)
    assert p.modify(d, GPU_IN_DEBUG) == 0 and d.requeue == 1
    # a move between unmanaged partitions, or of a CPU job, is left alone
    d = p.desc(partition="debug2")
    assert p.modify(d, GPU_IN_DEBUG) == 0 and d.requeue == NO_VAL16
    d = p.desc(partition="gpu")
    assert p.modify(d, {**GPU_IN_DEBUG, "tres_per_node": "gres:gpu:0"}) == 0 and d.requeue == NO_VAL16


def test_the_marker_of_a_job_entering_the_guard_is_checked_and_capped():
    p = load()
    bad = {**GPU_IN_DEBUG, "comment": "dl:v1;signal=USR2;grace=soon"}
    assert p.modify(p.desc(partition="gpu"), bad) == CODES["ERROR"]
    assert p.log[-1].startswith("dl job_submit: refused update of job 8: malformed checkpoint marker")
    long = {**CPU_IN_GPU, "comment": "dl:v1;signal=USR2;grace=5000 ckpt"}
    d = p.desc(tres_per_node=GPU)
    assert p.modify(d, long) == 0 and d.comment == "dl:v1;signal=USR2;grace=300 ckpt"
    # the update's own comment wins over the job's
    d = p.desc(partition="gpu", comment="dl:v1;signal=USR1;grace=60")
    assert p.modify(d, bad) == 0 and d.comment == "dl:v1;signal=USR1;grace=60"
    # a job guarded already keeps what root set: a nice update does not cap it
    d = p.desc(nice=10)
    assert p.modify(d, {**GUARDED, "comment": "dl:v1;signal=USR2;grace=5000"}) == 0 and d.comment is None


def test_leaving_the_guard_frees_requeue():
    p = load()
    assert p.modify(p.desc(partition="debug", requeue=0), GUARDED) == 0
    assert p.modify(p.desc(tres_per_node="", requeue=0), GUARDED) == 0  # TresPerNode= clears the GPUs
    assert p.modify(p.desc(tres_per_node="gres:gpu:0", requeue=0), GUARDED) == 0
    assert p.modify(p.desc(tres_per_node="gres:gpu:1", requeue=0), GUARDED) == DENIED


def test_exemption_is_read_from_the_job_as_the_update_leaves_it():
    p = load({"exempt_accounts": "{ interactive = true }"})
    exempt = {**GUARDED, "account": "interactive"}
    assert p.modify(p.desc(requeue=0), exempt) == 0
    # moving the job to a non-exempt account makes it guarded: requeue on, Requeue=0 refused
    d = p.desc(account="research")
    assert p.modify(d, exempt) == 0 and d.requeue == 1
    assert p.modify(p.desc(account="research", requeue=0), exempt) == DENIED
    # and the other way: the update's exempt account lets it turn requeue off
    assert p.modify(p.desc(account="interactive", requeue=0), GUARDED) == 0
    # an exempt job entering the guard keeps its requeue as it is
    d = p.desc(partition="gpu")
    assert p.modify(d, {**GPU_IN_DEBUG, "account": "interactive"}) == 0 and d.requeue == NO_VAL16


def test_time_limit_rule_holds_for_a_job_entering_the_guard():
    p = load({"require_time_limit": "true"})
    assert p.modify(p.desc(partition="gpu"), {**GPU_IN_DEBUG, "time_limit": NO_VAL}) == CODES["ESLURM_MISSING_TIME_LIMIT"]
    assert p.log[-1] == ("dl job_submit: refused update of job 8: GPU jobs need a time limit here:"
                         " set TimeLimit in the same update")
    assert p.modify(p.desc(partition="gpu", time_limit=60), {**GPU_IN_DEBUG, "time_limit": NO_VAL}) == 0
    assert p.modify(p.desc(partition="gpu"), {**GPU_IN_DEBUG, "time_limit": 600}) == 0


@pytest.mark.parametrize("release, shown", [("22.05", False), ("23.02", True)])
def test_update_refusals_reach_the_user_from_23_02(release: str, shown: bool):
    p = load(release=release)
    assert p.modify(p.desc(partition="gpu", requeue=0), GPU_IN_DEBUG) == DENIED
    assert p.modify(p.desc(priority=5), GUARDED) == DENIED
    expected = ["refused update of job 8: requeue=0 (GPU jobs here must be requeueable);"
                " ask the admins to exempt your user or account",
                "refused update of job 9: priority is set by the dlprio scheduler"]
    assert p.log[1:] == ["dl job_submit: " + m for m in expected]  # [0]: the load line
    assert p.user_msgs == (expected if shown else [])
