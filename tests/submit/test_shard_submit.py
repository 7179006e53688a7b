"""Fractional GPUs and opportunistic jobs at submission: a spec's ``gpu: 0.5`` becomes
``--gres=shard:K`` (slurm_plugin/shard.py), ``extras.opportunistic`` a ``class=opportunistic``
checkpoint marker (slurm_plugin/marker.py), and job_submit.lua reads that marker as Python does
(tests/slurm_plugin/test_lua_job_submit.py checks the grammar exhaustively)."""

from __future__ import annotations

import pytest

from lua_helpers import CODES, load as load_lua
from slurm_plugin import marker, shard
from slurm_plugin.slurm import records
from submit import spec_v1, spec_v2
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit.validation import SpecError
from submit_helpers import option, sbatch_directives, v2_spec


def half_gpu_spec(gpu: object = 0.5, instances: int = 1, **extras: object) -> dict:
    return v2_spec(roles={"main": {"instances": instances, "resourcePerInstance":
                                   {"cpu": 1, "memoryMB": 100, "gpu": gpu},
                                   "commands": ["true"]}}, extras=extras)


@pytest.mark.parametrize(("share", "per_gpu", "shards"), [
    (0.5, 4, 2), (0.25, 4, 1), (0.75, 4, 3), (0.5, 2, 1),
    (0.33, 3, 1),    # 0.99 shards: within 0.02 of one shard
    (0.667, 3, 2),   # 2.001 shards
    (0.125, 8, 1),
], ids=["half-of-4", "quarter-of-4", "three-quarters-of-4", "half-of-2", "third-written-0.33",
        "two-thirds-written-0.667", "eighth-of-8"])
def test_shard_count_is_the_fraction_times_shards_per_gpu(share: float, per_gpu: int, shards: int) -> None:
    assert shard.shard_count(share, per_gpu) == shards


@pytest.mark.parametrize(("share", "per_gpu", "message"), [
    (0.3, 4, "0.3 of a GPU is not a step of this site's 4 shards per GPU; use one of 0.25, 0.5, 0.75"),
    (0.5, 3, "0.5 of a GPU is not a step of this site's 3 shards per GPU; use one of 0.333, 0.667"),
    (0.1, 4, "0.1 of a GPU is not a step of this site's 4 shards per GPU; use one of 0.25, 0.5, 0.75"),
    (0.5, 1, "0.5 of a GPU is not a step of this site's 1 shards per GPU; use one of "),
    (0.5, 0, "0.5 of a GPU needs GPU shards, and how many a GPU has is not known here (no "
             "node's Gres was read): give dlsubmit --shards-per-gpu N or shards_per_gpu in the "
             "site config"),
], ids=["0.3-on-4", "half-on-3", "below-one-shard", "one-shard-per-gpu", "no-shards"])
def test_a_fraction_the_site_cannot_give_is_named_with_its_steps(share: float, per_gpu: int,
                                                                message: str) -> None:
    with pytest.raises(shard.ShardError) as e:
        shard.shard_count(share, per_gpu)
    assert str(e.value) == message


@pytest.mark.parametrize(("text", "shards"), [
    ("gpu:2(S:0),shard:8(S:0)", 8),            # sinfo Gres, 2 GPUs x 4 shards
    ("gpu:a100:4(S:0-1),shard:a100:16(S:0-1)", 16),
    ("gres:shard:2", 2),                        # 22.05 tres_per_node
    ("gres/shard:3", 3),                        # 24.11 and 26.05 tres_per_node
    ("cpu=1,mem=100M,node=1,billing=1,gres/shard=2", 2),   # tres_alloc
    ("gres/gpu:1", 0), ("gpu:8", 0), ("", 0), (None, 0),
])
def test_shards_are_read_from_every_gres_and_tres_form(text: str | None, shards: int) -> None:
    assert shard.shards_in_gres(text) == shards


def test_a_node_with_shards_says_how_many() -> None:
    fields = ["n1", "127.0.0.1", "idle", "gpu*", "8", "1", "8", "16000",
              "gpu:2(S:0),shard:8(S:0)", "gpu:0(IDX:N/A),shard:0(0/4,0/4)"]
    node = records.node_from_fields(fields)
    assert (node.gpus_total, node.shards_total, shard.shards_per_gpu(node.gpus_total, node.shards_total)) == (2, 8, 4)


def test_half_gpu_v2_spec_renders_two_of_four_shards_and_one_visible_device() -> None:
    job = spec_v2.to_job(half_gpu_spec())
    assert (job.roles[0].gpus, job.roles[0].gpu_share, job.opportunistic) == (0, 0.5, False)
    script = render_sbatch(job, RenderOptions(shards_per_gpu=4))
    args = sbatch_directives(script)[0]
    assert option(args, "gres") == ["shard:2"]
    assert option(args, "comment") == ["dl:v1;signal=USR2;grace=60"]
    assert "DL_ROLE_GPUS=('1')" in script and "DL_ROLE_GRES=('shard:2')" in script
    assert "DL_ROLE_RESOURCE=('0.5,1,100,64')" in script
    assert "--gres-flags" not in script


def test_v1_gpu_number_may_be_a_fraction() -> None:
    spec = {"jobName": "j", "image": "x", "taskRoles": [
        {"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100, "gpuNumber": 0.25,
         "command": "true"}]}
    script = render_sbatch(spec_v1.to_job(spec), RenderOptions(shards_per_gpu=8))
    assert option(sbatch_directives(script)[0], "gres") == ["shard:2"]


def test_opportunistic_job_carries_the_class_in_its_marker() -> None:
    job = spec_v2.to_job(half_gpu_spec(gpu=1, opportunistic=True))
    script = render_sbatch(job, RenderOptions())
    (comment,) = option(sbatch_directives(script)[0], "comment")
    assert comment == "dl:v1;signal=USR2;grace=60;class=opportunistic"
    parsed = marker.parse(comment)
    assert parsed is not None and parsed.opportunistic and parsed.grace_s == 60


@pytest.mark.parametrize(("spec", "opts", "problem"), [
    (half_gpu_spec(0.3), RenderOptions(shards_per_gpu=4),
     "taskRoles.main.resourcePerInstance.gpu: 0.3 of a GPU is not a step of this site's 4 shards "
     "per GPU; use one of 0.25, 0.5, 0.75"),
    (half_gpu_spec(0.5, instances=2), RenderOptions(shards_per_gpu=4),
     "taskRoles.main.instances: a role with a fraction of a GPU (0.5) runs one instance; ask for "
     "whole GPUs, or set extras.gangAllocation: false to run each instance on its own"),
    (half_gpu_spec(1.5), RenderOptions(shards_per_gpu=4), None),
], ids=["off-step", "several-instances", "above-one"])
def test_fractions_dlsubmit_cannot_ask_for_are_refused_by_field(spec: dict, opts: RenderOptions,
                                                                problem: str | None) -> None:
    with pytest.raises(SpecError) as e:
        render_sbatch(spec_v2.to_job(spec), opts)
    assert e.value.problems == [problem or "taskRoles.main.resourcePerInstance.gpu: must be an integer "
                                "in 0..1024 or a fraction of one GPU (0 < gpu < 1, e.g. 0.5)"]


def test_array_of_half_gpu_instances_asks_shards_per_element() -> None:
    job = spec_v2.to_job(half_gpu_spec(0.5, instances=3, gangAllocation=False))
    args = sbatch_directives(render_sbatch(job, RenderOptions(shards_per_gpu=2)))[0]
    assert option(args, "array") == ["0-2"] and option(args, "gres") == ["shard:1"]


@pytest.mark.parametrize(("comment", "rc", "kept"), [
    ("dl:v1;signal=USR2;grace=60;class=opportunistic", CODES["SUCCESS"],
     "dl:v1;signal=USR2;grace=60;class=opportunistic"),
    ("dl:v1;signal=USR2;grace=900;class=opportunistic note", CODES["SUCCESS"],
     "dl:v1;signal=USR2;grace=300;class=opportunistic note"),   # grace capped, class kept
    ("dl:v1;signal=USR2;grace=60;class=spot", CODES["ERROR"], None),
], ids=["accepted", "capped-keeps-class", "unknown-class"])
def test_job_submit_lua_reads_the_class(comment: str, rc: int, kept: str | None) -> None:
    p = load_lua()
    d = p.desc(tres_per_node="gres:shard:2", comment=comment)
    assert p.submit(d) == rc
    if kept is not None:
        assert d.comment == kept and d.requeue == 1   # a shard job is guarded as a GPU job
    else:
        assert p.user_msgs == ["refused: malformed checkpoint marker: class 'spot': must be one "
                               "of production, opportunistic"]


@pytest.mark.parametrize(("detail", "gpus"), [
    ("shard:2(2/4,0/4)", (0,)),          # 24.11: 2 of GPU 0's 4 shards
    ("shard:a100:1(0/4,1/4)", (1,)),
    ("shard:4(2/4,2/4)", (0, 1)),        # shards from two GPUs
    ("shard:2(IDX:0)", ()),              # 22.05's form: records.gpu_indices reads it
    ("gpu:a100:2(IDX:0-1)", ()), ("", ()),
])
def test_the_gpu_of_a_shard_job_is_read_from_the_per_gpu_detail(detail: str, gpus: tuple[int, ...]) -> None:
    assert shard.shard_gpus(detail) == gpus
    if detail == "shard:2(IDX:0)":
        assert records.gpu_indices(detail) == (0,)
