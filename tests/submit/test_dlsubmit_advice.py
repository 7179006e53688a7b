"""Valid specs that are almost surely wrong (submit/advice.py): one stderr line each, naming the
field; exit 0 and the same script as without the warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from submit import cli, load
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit_helpers import v2_spec


def worker(instances: int, command: str = "python train.py", **kw: object) -> dict:
    return {"instances": instances, "resourcePerInstance": {"cpu": 1, "memoryMB": 10, "gpu": 0},
            "commands": [command], **kw}


def v1(tasks: int, command: str = "true", **role_kw: object) -> dict:
    return {"jobName": "j", "image": "img", "taskRoles": [
        {"name": "w", "taskNumber": tasks, "cpuNumber": 1, "memoryMB": 10, "gpuNumber": 0,
         "command": command, **role_kw}]}


def dry_run(spec: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            *flags: str) -> tuple[str, list[str]]:
    """Run ``dlsubmit --dry-run``; check exit 0 and that stdout is the script ``render_sbatch``
    gives for the same spec; return (the spec path, the stderr lines)."""
    name = "job.json" if "jobName" in spec else "job.yaml"
    f = tmp_path / name
    f.write_text(json.dumps(spec) if name.endswith(".json") else yaml.safe_dump(spec))
    # the node shape given, so that the dry run's note on the default shape is not printed
    shape = ["--gpus-per-node", "8", "--cores-per-node", "16", "--mem-per-node", "64000"]
    rc = cli.main([str(f), "--dry-run", *shape, *flags])
    out, err = capsys.readouterr()
    opts = RenderOptions(signal=flags[flags.index("--signal") + 1]) if "--signal" in flags \
        else RenderOptions()
    assert rc == 0 and out == render_sbatch(load.load(f), opts)
    return str(f), err.splitlines()


MIN_SUCCEEDED = ("{field}: {n} of {m} instances: once {n} succeeded, the other {rest} are stopped "
                 "and the job reports success; set it to {m} or -1 (all) unless that is meant")
USR1 = ("{field}: USR1 with an NCCL/torchrun command ({command}): NCCL may catch SIGUSR1 itself, "
        "so the checkpoint signal may not reach the program; use USR2 (the default)")


@pytest.mark.parametrize(("spec", "flags", "line"), [
    (v2_spec(roles={"worker": worker(8, completion={"minSucceededInstances": 1})}), [],
     MIN_SUCCEEDED.format(field="taskRoles.worker.completion.minSucceededInstances", n=1, m=8,
                          rest=7)),
    (v1(5, minSucceededTaskCount=2), [],
     MIN_SUCCEEDED.format(field="taskRoles[0].minSucceededTaskCount", n=2, m=5, rest=3)),
    *[(v2_spec(roles={"m": worker(1), "w": worker(2, command)},
               extras={"checkpoint": {"signal": "USR1"}}), [],
       USR1.format(field="extras.checkpoint.signal", command="taskRoles.w.commands"))
      for command in ("torchrun --nproc-per-node 4 train.py",
                      "python -m torch.distributed.run train.py",
                      "python -m torch.distributed.launch train.py",
                      "export NCCL_DEBUG=INFO\npython train.py")],
    (v1(2, "torchrun train.py"), ["--signal", "USR1"],
     USR1.format(field="--signal (or the site's signal)", command="taskRoles[0].command")),
], ids=["min-succeeded-v2", "min-succeeded-v1", "usr1-torchrun", "usr1-distributed-run",
        "usr1-distributed-launch", "usr1-nccl-env", "usr1-flag"])
def test_a_suspect_value_is_one_warning_naming_its_field(
        spec: dict, flags: list[str], line: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert dry_run(spec, tmp_path, capsys, *flags)[1] == [f"dlsubmit: warning: {line}"]


@pytest.mark.parametrize("spec", [
    v2_spec(roles={"worker": worker(8, completion={"minSucceededInstances": 4})}),   # half
    v2_spec(roles={"worker": worker(8, completion={"minSucceededInstances": -1})}),
    v2_spec(roles={"chief": worker(1, completion={"minSucceededInstances": 1}), "worker": worker(8)}),
    v2_spec(roles={"worker": worker(8, completion={"minSucceededInstances": 1})},   # array: no
            extras={"gangAllocation": False}),                                      # policy
    v2_spec(roles={"worker": worker(2, "torchrun train.py")}),                      # USR2
    v2_spec(roles={"worker": worker(2)}, extras={"checkpoint": {"signal": "USR1"}}),  # no NCCL
], ids=["half", "off", "chief", "array", "torchrun-usr2", "usr1-no-nccl"])
def test_what_is_meant_gets_no_warning(spec: dict, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert dry_run(spec, tmp_path, capsys)[1] == []


def test_both_warnings_come_one_line_each_and_a_submission_goes_ahead(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    spec = v2_spec(roles={"w": worker(4, "torchrun t.py", completion={"minSucceededInstances": 1})},
                   extras={"checkpoint": {"signal": "USR1"}})
    f = tmp_path / "job.yaml"
    f.write_text(yaml.safe_dump(spec))
    rc = cli.main([str(f)])
    out, err = capsys.readouterr()
    assert (rc, out, len(calls)) == (0, "7\n", 1)
    assert [line.split(": ")[2] for line in err.splitlines()] == [
        "taskRoles.w.completion.minSucceededInstances", "extras.checkpoint.signal"]


def test_a_flag_the_spec_overrides_is_named_not_dropped_silently(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """extras.checkpoint wins over --signal and --grace (docs/dlsubmit.md): a typed flag that it
    overrides with another value is said to be unused; the same value, or no flag, is silent."""
    spec = v2_spec(roles={"w": worker(1)}, extras={"checkpoint": {"signal": "USR2", "grace": 20}})
    _, err = dry_run(spec, tmp_path, capsys, "--signal", "SIGUSR1", "--grace", "90")
    assert err == [
        "dlsubmit: warning: --signal SIGUSR1: not used: the spec's extras.checkpoint.signal (USR2) "
        "wins; change it there",
        "dlsubmit: warning: --grace 90: not used: the spec's extras.checkpoint.grace (20 s) wins; "
        "change it there"]
    assert dry_run(spec, tmp_path, capsys, "--signal", "sigusr2", "--grace", "20")[1] == []
    # a spec without extras.checkpoint takes the flags
    assert dry_run(v2_spec(roles={"w": worker(1)}), tmp_path, capsys, "--signal", "USR1")[1] == []


def test_a_role_that_gives_no_gpu_count_is_warned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """v2's gpu may be left out (0, the schema's default): on a GPU cluster that is almost surely
    a forgotten field; ``gpu: 0`` says a CPU role is meant."""
    no_gpu = worker(1)
    del no_gpu["resourcePerInstance"]["gpu"]
    spec = v2_spec(roles={"ps": worker(1), "trainer": no_gpu})
    assert dry_run(spec, tmp_path, capsys)[1] == [
        "dlsubmit: warning: taskRoles.trainer.resourcePerInstance.gpu: not given, so the role "
        "gets no GPU (CUDA_VISIBLE_DEVICES empty); write gpu: 0 if that is meant"]
