"""The job's environment (v1 ``jobEnvs``): it reaches the user's command and nothing else.

The batch shell's own machinery never runs under it: were the entries exported at the top of
the script, ``jobEnvs: {"PATH": "/opt/conda/bin"}`` would end the job with ``mkdir: command not
found``, and ``SLURM_JOB_ID``, ``DL_SIGNAL``, ``DL_ROLE_COMMAND`` would replace the script's own
values (a requeue of another job's id, a trap on KILL, another command). The entries travel in
the plain array ``DL_JOB_ENV`` and each task applies them with ``env`` to its command's shell
alone (submit/runtime.py); names Slurm or the runtime set for the tasks are refused at submit
time (``submit.runtime.reserved_env``). The scripts run under real bash with the fake ``srun``
and ``scontrol`` of tests/submit/test_render_runtime.py; no cluster is needed.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from submit import cli, load, runtime
from submit.model import Job, Role
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit.validation import SpecError
from submit_helpers import HOSTILE
from test_render_runtime import fake_bin, rows, run_script  # noqa: F401 (fake_bin: a fixture)


def v1(envs: dict, command: str = "true", tasks: int = 1) -> dict:
    return {"jobName": "envs", "image": "img", "jobEnvs": envs,
            "taskRoles": [{"name": "main", "taskNumber": tasks, "cpuNumber": 1, "memoryMB": 10,
                           "gpuNumber": 0, "command": command}]}


def job_section(script: str) -> str:
    return script.split("# ---- this job ----\n", 1)[1].split("read -r -d ''", 1)[0]


# ---- (a) the environment reaches the command, never the machinery ----

def test_a_path_without_the_system_directories_reaches_only_the_command(
        tmp_path: Path, fake_bin: Path) -> None:
    """The new user's case: PATH=/opt/conda/bin. The batch shell still finds mkdir, date,
    scontrol and srun; each task's command sees exactly the PATH of the spec (literal, not
    expanded, as OpenPAI sets a container's environment)."""
    cmd = 'printf "ENV path=%s rank=%s\\n" "$PATH" "$RANK"'
    rc, out = run_script(v1({"PATH": "/opt/conda/bin"}, cmd, tasks=2), tmp_path, fake_bin)
    assert rc == 0, out
    assert "command not found" not in out
    assert sorted(r["rank"] for r in rows(out)) == ["0", "1"]
    assert [r["path"] for r in rows(out)] == ["/opt/conda/bin", "/opt/conda/bin"]
    assert "attempt 0 end: succeeded: all instances completed" in out
    assert sorted(p.name for p in (tmp_path / "ck" / "77" / ".dlsubmit" / "attempt-0").iterdir()) == [
        "0.0", "0.1"]


def test_the_batch_shell_neither_exports_nor_sets_the_job_environment() -> None:
    """Run the job section of the script: PATH and the other entries are unchanged there, and
    the entries are only words of the array the tasks hand to ``env``."""
    envs = {"PATH": "/opt/conda/bin", "IFS": "x", "BASH_ENV": "/tmp/rc", "MYVAR": "v"}
    script = render_sbatch(load.to_job(v1(envs)), RenderOptions())
    assert not re.search(r"(?m)^export (PATH|IFS|BASH_ENV|MYVAR)\b", script)
    show = 'printf "%s\\0" "$PATH" "${IFS-unset}" "${BASH_ENV-unset}" "${MYVAR-unset}" "${DL_JOB_ENV[@]}"'
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", job_section(script) + "\n" + show], env=env,
                         capture_output=True, check=True).stdout.decode().split("\0")[:-1]
    assert out == ["/usr/bin:/bin", " \t\n", "unset", "unset",
                   "PATH=/opt/conda/bin", "IFS=x", "BASH_ENV=/tmp/rc", "MYVAR=v"]
    # the runtime applies them in the task prologue, to the command's shell, after its own work
    prologue = runtime.TASK_PROLOGUE
    assert prologue.index('dl_run=(/usr/bin/env "${@:14}" /bin/bash)') > prologue.index("dl_cmd=$8")
    assert '"${dl_run[@]}" -c' in prologue


def test_bash_env_and_ld_preload_act_on_the_command_shell_only(tmp_path: Path, fake_bin: Path) -> None:
    """BASH_ENV is read by the command's shell alone (once per task, not by every bash the
    script starts), LD_PRELOAD is loaded for it alone (the dynamic loader's
    complaint about the missing library comes once per task, not from every mkdir, sleep and
    date of the batch shell), and IFS changes nothing (bash resets an IFS it finds in its
    environment, and the batch shell never sees it)."""
    log = tmp_path / "bash_env.log"
    rc_file = tmp_path / "rc.sh"
    rc_file.write_text(f'printf "%s\\n" "$0" >> {log}\n')
    envs = {"BASH_ENV": str(rc_file), "LD_PRELOAD": "/nonexistent/dl-preload.so", "IFS": ":"}
    cmd = '[[ $IFS == $\' \\t\\n\' ]] && echo "ENV ifs=default"; echo "ENV preload=$LD_PRELOAD"'
    rc, out = run_script(v1(envs, cmd, tasks=2), tmp_path, fake_bin)
    assert rc == 0, out
    assert log.read_text().splitlines() == ["dl-main", "dl-main"]
    # one complaint per task, from its command's shell (the command runs builtins only)
    assert out.count("from LD_PRELOAD cannot be preloaded") == 2, out
    assert [r["ifs"] for r in rows(out) if "ifs" in r] == ["default", "default"]
    assert [r["preload"] for r in rows(out) if "preload" in r] == ["/nonexistent/dl-preload.so"] * 2
    assert "attempt 0 end: succeeded: all instances completed" in out


# ---- (c) hostile values stay inert ----

def test_hostile_values_arrive_byte_for_byte(tmp_path: Path, fake_bin: Path) -> None:
    values = [*HOSTILE, "", "A=B=C", "'", "\\", "--", "x\n"]
    envs = {f"V{i}": v for i, v in enumerate(values)}
    cmd = (f'for ((i = 0; i < {len(values)}; i++)); do v=V$i; '
           'printf "%s" "${!v}" > "$DL_CHECKPOINT_DIR/v$i"; done')
    rc, out = run_script(v1(envs, cmd), tmp_path, fake_bin)
    assert rc == 0, out
    got = [(tmp_path / "ck" / "77" / f"v{i}").read_text() for i in range(len(values))]
    assert got == values
    assert "pwned" not in out and "uid=" not in out


# ---- (b) reserved names are refused before anything is submitted ----

RESERVED = [("SLURM_JOB_ID", "Slurm sets SLURM_*"), ("SLURM_CONF", "Slurm sets SLURM_*"),
            ("SLURMD_NODENAME", "Slurm sets SLURMD_*"),
            ("DL_SIGNAL", "dlsubmit's own namespace"), ("DL_ROLE_COMMAND", "dlsubmit's own namespace"),
            ("DL_TASK_RETRY", "dlsubmit's own namespace"),
            ("PAI_JOB_NAME", "OpenPAI runtime variables"), ("PAI_HOST_IP_main_0", "OpenPAI runtime variables"),
            *[(n, "distributed-training rendezvous")
              for n in ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")],
            ("CUDA_VISIBLE_DEVICES", "GPU device contract"), ("CUDA_DEVICE_ORDER", "GPU device contract"),
            ("GPU_DEVICE_ORDINAL", "gres/gpu plugin"), ("ROCR_VISIBLE_DEVICES", "gres/gpu plugin"),
            # the command's shell sets these over the job's value (dl_c would hold the command)
            *[(n, "the task shell's own variables") for n in ("dl_c", "dl_n", "dl_g", "dl_s")]]


def test_a_job_environment_too_large_with_the_command_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each value is under MAX_ARG_STRLEN, but srun gets the command and every value as its
    arguments: 20 of 130,000 bytes would fail at run time with "Argument list too long". The
    sum is refused before anything is submitted; 5 of them pass."""
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    f = tmp_path / "job.json"
    big = {f"E{i:02d}": "v" * 130_000 for i in range(20)}
    f.write_text(json.dumps(v1(big)))
    assert cli.main([str(f)]) == 2 and calls == []
    size = sum(len(f"{k}={v}") + 1 for k, v in big.items()) + len("true") + 1
    assert capsys.readouterr().err == (
        f"dlsubmit: jobEnvs: {size} bytes with taskRoles[0].command, which each task gets "
        "together; at most 1048576 (Linux passes about 2 MiB of arguments and environment, "
        "ARG_MAX, and Slurm needs its share): keep long values in a file the job reads\n")
    f.write_text(json.dumps(v1(dict(list(big.items())[:5]))))
    assert cli.main([str(f)]) == 0 and len(calls) == 1


@pytest.mark.parametrize(("name", "why"), RESERVED, ids=[n for n, _ in RESERVED])
def test_a_reserved_name_is_exit_2_naming_field_and_name(
        name: str, why: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    f = tmp_path / "job.json"
    f.write_text(json.dumps(v1({"OK_VAR": "1", name: "x"})))
    rc = cli.main([str(f)])
    out, err = capsys.readouterr()
    assert (rc, out, calls) == (2, "", [])
    [line] = err.splitlines()
    assert line.startswith(f"dlsubmit: jobEnvs.{name} (key): {name} is reserved (")
    assert why in line
    assert line.endswith("; rename the variable: the job's environment may not replace what "
                         "Slurm or dlsubmit set for every task")


def test_with_several_specs_the_line_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "_submit", lambda s, *a: calls.append(s) or 7)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(v1({"A": "1"})))
    bad.write_text(json.dumps(v1({"DL_SIGNAL": "KILL", "RANK": "3"})))
    rc = cli.main([str(good), str(bad)])
    _, err = capsys.readouterr()
    assert (rc, calls) == (2, [])
    assert [line.split(" is reserved")[0] for line in err.splitlines()] == [
        f"dlsubmit: {bad}: jobEnvs.DL_SIGNAL (key): DL_SIGNAL",
        f"dlsubmit: {bad}: jobEnvs.RANK (key): RANK"]


@pytest.mark.parametrize("name", ["bad-name", "1X", "A B", "", "A=B", "PATH\n"])
def test_a_name_that_is_no_shell_identifier_is_still_refused(name: str) -> None:
    with pytest.raises(SpecError) as info:
        load.to_job(v1({name: "x"}))
    [line] = info.value.problems
    assert line.endswith(" (key): must be a shell variable name ([A-Za-z_][A-Za-z0-9_]*)")


def test_names_outside_the_reserved_families_are_accepted() -> None:
    names = ["PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "IFS", "BASH_ENV", "PYTHONPATH", "NCCL_DEBUG",
             "OMP_NUM_THREADS", "rank", "RANKS", "SLURMX", "MY_DL_X", "DL", "PAI", "_"]
    job = load.to_job(v1({n: n.lower() for n in names}), {"NCCL_DEBUG": "INFO"})
    assert job.envs == tuple((n, "INFO" if n == "NCCL_DEBUG" else n.lower()) for n in names)


def test_the_renderer_refuses_a_reserved_name_in_a_job_built_without_a_spec() -> None:
    role = Role(name="m", ident="m", instances=1, cpus=1, memory_mib=10, gpus=0, command="true")
    with pytest.raises(SpecError) as info:
        render_sbatch(Job(name="j", roles=(role,), envs=(("SLURM_JOB_ID", "1"), ("a-b", "2"))),
                      RenderOptions())
    assert [p.split(":")[:2] for p in info.value.problems] == [
        ["jobEnvs", " 'SLURM_JOB_ID' cannot be a job environment variable"],
        ["jobEnvs", " 'a-b' cannot be a job environment variable"]]


def test_every_variable_the_runtime_gives_the_tasks_is_reserved() -> None:
    """Derived from the runtime text itself: every upper-case name it assigns or exports
    (static names, and the fixed part of names built from a role, like ``PAI_HOST_IP_<role>_<i>``)
    is refused as a job environment name. ``IFS`` is the one exception: the runtime sets it for
    single ``read`` commands only, never for a task."""
    text = "\n".join(line for line in (runtime.RUNTIME + runtime.TASK_PROLOGUE).splitlines()
                     if not line.lstrip().startswith("#"))
    names = set(re.findall(r'(?<![\w$])"?([A-Z][A-Z0-9_]*)(?:\[[^]]*\])?\+?=', text))
    names |= set(re.findall(r"\bexport\s+([A-Z][A-Z0-9_]*)\b", text))
    names |= set(re.findall(r'"([A-Z][A-Z0-9_]*)\$', text))    # "PAI_HOST_IP_${id}_$i=..."
    assert {"RANK", "MASTER_PORT", "DL_CHECKPOINT_DIR", "PAI_HOST_IP_", "CUDA_DEVICE_ORDER"} <= names
    assert sorted(n for n in names if not runtime.reserved_env(n)) == ["IFS"]
