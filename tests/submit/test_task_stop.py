"""A task stopped with its gang is never run again and leaves no process (submit/runtime.py).

``taskRetryCount`` reruns a *failed* instance's command. An instance whose command dies because
the job is being stopped (the completion policy decided, scancel, time limit, requeue, srun
ending the step) has not failed: its shell must not start the command again, and nothing the
command left may outlive the task (a process re-parented to init is out of reach of Slurm under
proctrack/linuxproc). The scripts run under real bash with the fake ``srun``/``scontrol`` of
test_render_runtime.py; tests/live/test_submit_live.py runs the same job on Slurm.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from submit import load
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit_helpers import v2_spec
from test_render_runtime import fake_bin, role, run_script, script_env  # noqa: F401

HOSTILE_ROOT = "c k$(touch x)*[p]'\""


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_healthy_role_is_not_retried_when_the_policy_stops_the_gang(tmp_path: Path,
                                                                       fake_bin: Path) -> None:
    """Role a fails, minFailed 1 decides the job; srun's SIGKILL of the step reaches b's command
    while b's shell lives on: b's shell reads the decision and starts no task retry."""
    spec = v2_spec(roles={
        "a": role('sleep 1; echo "a fails now"; exit 1'),
        "b": role('echo "b start try=$DL_TASK_RETRY"; sleep 60', taskRetryCount=3)})
    script = render_sbatch(load.to_job(spec),
                           RenderOptions(checkpoint_root=str(tmp_path / HOSTILE_ROOT)))
    env = script_env(tmp_path, fake_bin, nodelists=("n0", "n1")) | {"FAKE_SRUN_FORCE": "1"}
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "task retry" not in out
    assert out.count("b start try=") == 1
    assert "b 0: exit 137 while the job is being stopped (decided); not run again" in out
    assert "end: failed: 1 failed instance(s) of role a (minFailed 1)" in out
    assert not (tmp_path / "x").exists()


def test_a_terminated_task_is_not_retried_and_its_children_die(tmp_path: Path,
                                                                fake_bin: Path) -> None:
    """SIGTERM to the task's process group (Slurm's scancel, time limit or requeue): the command
    dies, its shell starts no task retry, says so in one line of its own and kills the child
    the command left behind (it ignores SIGTERM and was re-parented to init)."""
    cmd = '(trap "" TERM; echo "READY $BASHPID"; exec sleep 300 >/dev/null 2>&1) & wait'
    spec = v2_spec(roles={"w": role(cmd, taskRetryCount=2)})
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    proc = subprocess.Popen(["bash", "-c", script], env=script_env(tmp_path, fake_bin),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    child = 0
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("READY "):
                child = int(line.split()[1])
                break
        os.killpg(os.getpgid(child), signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
        out = "".join(seen) + rest
        deadline = time.monotonic() + 5
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child), "the command's child outlived its task"
        assert proc.returncode == 1, out
        assert "task retry" not in out
        assert "w 0: exit 143 while the job is being stopped (SIGTERM); not run again" in out
        # bash's own report of the command's end (the task shell's line, "Terminated") is not
        # the user's output
        assert "Terminated" not in out and "DL_TASK_RETRY=" not in out, out
    finally:
        proc.kill()
        if child and alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_command_killed_on_its_own_is_retried(tmp_path: Path, fake_bin: Path) -> None:
    """A command killed by a signal while nothing stops the job (the kernel's OOM killer) failed:
    it is run again after the few seconds a stop under way would need to show."""
    cmd = ('echo x >> "$DL_CHECKPOINT_DIR/runs"; '
           'if [ "$DL_TASK_RETRY" = 0 ]; then kill -KILL $$; fi')
    rc, out = run_script(v2_spec(roles={"w": role(cmd, taskRetryCount=1)}), tmp_path, fake_bin)
    assert rc == 0, out
    assert "w 0: exit 137, task retry 1 of 1" in out
    assert len((tmp_path / "ck" / "77" / "runs").read_text().splitlines()) == 2
