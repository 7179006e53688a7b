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


def dry_run(spec: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            *flags: str) -> tuple[str, list[str]]:
    """Run ``dlsubmit --dry-run``; check exit 0 and that stdout is the script rendered without
    any warning machinery; return (the spec path, the stderr lines)."""
    name = "job.json" if "jobName" in spec else "job.yaml"
    f = tmp_path / name
    f.write_text(json.dumps(spec) if name.endswith(".json") else yaml.safe_dump(spec))
    rc = cli.main([str(f), "--dry-run", *flags])
    out, err = capsys.readouterr()
    opts = RenderOptions(signal=flags[flags.index("--signal") + 1]) if "--signal" in flags \
        else RenderOptions()
    assert rc == 0 and out == render_sbatch(load.load(f), opts)
    return str(f), err.splitlines()


def test_min_succeeded_far_below_the_instances_is_warned(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec(roles={"worker": worker(8, completion={"minSucceededInstances": 1})})
    _, err = dry_run(spec, tmp_path, capsys)
    assert err == ["dlsubmit: warning: taskRoles.worker.completion.minSucceededInstances: 1 of 8 "
                   "instances: once 1 succeeded, the other 7 are stopped and the job reports "
                   "success; set it to 8 or -1 (all) unless that is meant"]


def test_min_succeeded_of_a_v1_role_names_the_v1_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"jobName": "j", "image": "img", "taskRoles": [
        {"name": "w", "taskNumber": 5, "cpuNumber": 1, "memoryMB": 10, "gpuNumber": 0,
         "command": "true", "minSucceededTaskCount": 2}]}
    _, err = dry_run(spec, tmp_path, capsys)
    assert err == ["dlsubmit: warning: taskRoles[0].minSucceededTaskCount: 2 of 5 instances: once "
                   "2 succeeded, the other 3 are stopped and the job reports success; set it to 5 "
                   "or -1 (all) unless that is meant"]


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


@pytest.mark.parametrize("command", [
    "torchrun --nproc-per-node 4 train.py", "python -m torch.distributed.run train.py",
    "python -m torch.distributed.launch train.py", "export NCCL_DEBUG=INFO\npython train.py"])
def test_usr1_in_the_spec_with_an_nccl_command_is_warned(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = v2_spec(roles={"m": worker(1), "w": worker(2, command)},
                   extras={"checkpoint": {"signal": "USR1"}})
    _, err = dry_run(spec, tmp_path, capsys)
    assert err == ["dlsubmit: warning: extras.checkpoint.signal: USR1 with an NCCL/torchrun "
                   "command (taskRoles.w.commands): NCCL may catch SIGUSR1 itself, so the "
                   "checkpoint signal may not reach the program; use USR2 (the default)"]


def test_usr1_from_the_command_line_names_the_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"jobName": "j", "image": "img", "taskRoles": [
        {"name": "w", "taskNumber": 2, "cpuNumber": 1, "memoryMB": 10, "gpuNumber": 0,
         "command": "torchrun train.py"}]}
    _, err = dry_run(spec, tmp_path, capsys, "--signal", "USR1")
    assert err == ["dlsubmit: warning: --signal (or the site's signal): USR1 with an NCCL/torchrun "
                   "command (taskRoles[0].command): NCCL may catch SIGUSR1 itself, so the "
                   "checkpoint signal may not reach the program; use USR2 (the default)"]


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
