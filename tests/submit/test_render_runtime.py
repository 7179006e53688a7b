"""The script's fixed runtime (submit/runtime.py) run by real bash against fake ``srun``/``scontrol``.

These tests need no cluster: ``srun`` is replaced by a small bash program that starts the tasks
locally (each in its own process group, which gets the signals srun forwards, as Slurm's
proctrack signals a task's whole process tree) with the variables Slurm would set (``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``,
``CUDA_VISIBLE_DEVICES`` = all GPUs of the step on the node) and ``scontrol`` answers
``show hostnames``/``show node`` and records ``requeue`` (then ends the batch shell, as Slurm's
requeue does). The same behaviours are checked with real Slurm in tests/live/test_submit_live.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from submit import load
from submit.options import RenderOptions
from submit.render import render_sbatch
from submit.runtime import PORT_ENV_NAMES, ROLE_ENV_NAMES
from submit_helpers import v2_spec

FAKE_SRUN = r"""#!/bin/bash
ntasks=1 per=1 gres=none
while [[ $1 == -* ]]; do
  case $1 in --ntasks=*) ntasks=${1#*=};; --ntasks-per-node=*) per=${1#*=};; --gres=*) gres=${1#*=};; esac
  shift
done
n=0; [[ $gres == none ]] || n=${gres##*:}
devs=$( ((n > 0)) && seq -s, 10 $((10 + n - 1)) )
pids=()
trap 'kill -s USR2 -- "${pids[@]}" 2>/dev/null' USR2
stop() {
  if [[ -n ${FAKE_SRUN_FORCE:-} ]]; then
    # srun's "forcing job termination": the step's SIGKILL reaches the commands, the tasks'
    # own shells outlive it for a while (an order Slurm 26.05 showed under proctrack/linuxproc)
    for p in "${pids[@]}"; do pkill -KILL -P "${p#-}"; done
    sleep 3
    kill -s KILL -- "${pids[@]}" 2>/dev/null; exit 137
  fi
  kill -s TERM -- "${pids[@]}" 2>/dev/null; exit 143
}
trap stop TERM
for ((i = 0; i < ntasks; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$((i % per)) SLURM_NODEID=$((i / per)) SLURMD_NODENAME=n$((i / per)) \
    CUDA_VISIBLE_DEVICES=$devs setsid "$@" &
  pids+=(-$!)
done
rc=0
for p in "${pids[@]}"; do
  while :; do wait "${p#-}"; r=$?; kill -0 "${p#-}" 2>/dev/null || break; done
  (( r )) && rc=$r
done
exit $rc
"""

FAKE_SCONTROL = r"""#!/bin/bash
case "$1 $2" in
  "show hostnames") tr ',' '\n' <<< "$3" ;;
  "show node") echo "NodeName=$4 Arch=x86_64 NodeAddr=10.0.0.${4#n} NodeHostName=h" ;;
  requeue*) echo "$2" >> "$FAKE_REQUEUES"; kill -TERM "$PPID" ;;
esac
"""


#: squeue -h -j ID -o %L: the job's time left as Slurm prints it, or slurmctld not answering
FAKE_SQUEUE = r"""#!/bin/bash
if [[ -n ${FAKE_SQUEUE_FAIL:-} ]]; then
  echo "squeue: error: Unable to contact slurm controller (connect failure)" >&2; exit 1
fi
echo "${FAKE_TIME_LEFT:-UNLIMITED}"
"""


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL), ("squeue", FAKE_SQUEUE)):
        (d / name).write_text(text)
        (d / name).chmod(0o755)
    return d


def script_env(tmp_path: Path, fake_bin: Path, restart: int = 0, nodelists: tuple[str, ...] = ("n0",),
               extra_env: dict[str, str] | None = None) -> dict[str, str]:
    env = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "SLURM_JOB_ID": "77", **(extra_env or {}),
           "SLURM_RESTART_COUNT": str(restart), "SLURM_JOB_USER": "alice",
           "SLURM_JOB_NODELIST": nodelists[0], "FAKE_REQUEUES": str(tmp_path / "requeues")}
    for i, nl in enumerate(nodelists):
        env[f"SLURM_JOB_NODELIST_HET_GROUP_{i}"] = nl
    return env


def run_script(spec: dict, tmp_path: Path, fake_bin: Path, restart: int = 0,
               nodelists: tuple[str, ...] = ("n0",),
               extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    env = script_env(tmp_path, fake_bin, restart, nodelists, extra_env)
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def signal_when_ready(script: str, env: dict[str, str]) -> tuple[int, str]:
    """Run the batch script; send it USR2 once the payload prints READY; (exit status, output)."""
    proc = subprocess.Popen(["bash", "-c", script], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.strip() == "READY":
            break
    proc.send_signal(signal.SIGUSR2)
    try:
        rest, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return proc.returncode, "".join(seen) + rest


def signal_until(script: str, env: dict[str, str], until: str, to_task: bool = False) -> str:
    """Run the batch script, send it USR2 once the payload prints READY, read its output up to
    the first line holding ``until`` (at most 60 s), then kill it; the output read. With
    ``to_task`` the signal goes to the task's process group (the payload prints ``PGID n``
    before READY) instead of the batch shell: as ``scancel --signal`` without ``--batch``
    signals the job's steps, the tasks' processes, and not the batch shell."""
    proc = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen: list[str] = []
    timer = threading.Timer(60, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    group = 0
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("PGID "):
                group = int(line.split()[1])
            if line.strip() == "READY":
                if to_task:
                    os.killpg(group, signal.SIGUSR2)
                else:
                    proc.send_signal(signal.SIGUSR2)
            if until in line:
                break
    finally:
        timer.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return "".join(seen)


def signalled_run(tmp_path: Path, fake_bin: Path, commands: list[str], until: str,
                  grace: int | None = 600, env: dict[str, str] | None = None) -> str:
    """The output of a one-instance job running ``commands`` (the first prints READY), sent
    USR2 once READY shows, up to the first line holding ``until`` (:func:`signal_until`);
    ``grace``: the checkpoint grace in seconds (None: the default 60)."""
    extras = {"checkpoint": {"grace": grace}} if grace is not None else {}
    spec = v2_spec(roles={"main": {**role(commands[0]), "commands": commands}}, extras=extras)
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    return signal_until(script, {**script_env(tmp_path, fake_bin), **(env or {})}, until)


#: a program without a handler for the checkpoint signal: USR2's default action kills it
NO_HANDLER = (f"{shlex.quote(sys.executable)} -c "
              + shlex.quote("import time; print('READY', flush=True); time.sleep(20)"))


def role(cmd: str, instances: int = 1, gpu: int = 0, **kw: object) -> dict:
    return {"instances": instances, "resourcePerInstance": {"cpu": 1, "memoryMB": 10, "gpu": gpu},
            "commands": [cmd], **kw}


def rows(text: str) -> list[dict[str, str]]:
    return [dict(kv.split("=", 1) for kv in line.split()[1:])
            for line in text.splitlines() if line.startswith("ENV ")]


def test_environment_of_a_two_role_job(tmp_path: Path, fake_bin: Path) -> None:
    line = ('echo "ENV role=$PAI_CURRENT_TASK_ROLE_NAME rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK '
            'node_rank=$NODE_RANK master=$MASTER_ADDR:$MASTER_PORT gpus=$CUDA_VISIBLE_DEVICES '
            'mine=${DL_TASK_GPUS:-} hosts=$PAI_TASK_ROLE_w_HOST_LIST ports=$PAI_PORT_LIST_w_1_p '
            'idx=$PAI_TASK_INDEX '
            'own=$PAI_CONTAINER_HOST_IP:$PAI_CONTAINER_HOST_PORT"')
    spec = v2_spec(roles={"m": role(line), "w": role(line, instances=3, gpu=4,
                                                     resourcePerInstance={"cpu": 1, "memoryMB": 10,
                                                                          "gpu": 4, "ports": {"p": 2}})})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n5", "n1,n2"))
    assert rc == 0, out
    got = sorted((r["role"], r["rank"], r["local"], r["node_rank"], r["gpus"], r["mine"],
                  r["idx"]) for r in rows(out))
    # w: 3 x 4 GPUs -> 2 per node on 2 nodes; fake step GPUs on a node are 10..17. Device
    # contract (docs/dlsubmit.md): every task sees its node's GPUs, DL_TASK_GPUS are the
    # positions in that list the task owns: LOCAL_RANK x 4 .. LOCAL_RANK x 4 + 3.
    node = "10,11,12,13,14,15,16,17"
    assert got == [("m", "0", "0", "0", "", "", "0"),
                   ("w", "1", "0", "1", node, "0,1,2,3", "0"), ("w", "2", "1", "1", node, "4,5,6,7", "1"),
                   ("w", "3", "0", "2", node, "0,1,2,3", "2")]
    # the job's block: MASTER_PORT, then 1 port for m's task and 1 + 2 ("p": 2) for each w
    # task: 11 ports; job 77 takes block 77 from the port floor (with Linux's default range:
    # 10000 + 77 x 11 = 10847). m's task owns M+1; w task i owns M+2+3i, its "p" ports follow.
    m = block_start(77, 11)
    assert {r["master"] for r in rows(out)} == {f"10.0.0.5:{m}"}
    assert {r["world"] for r in rows(out)} == {"4"}
    assert {r["hosts"] for r in rows(out)} == {f"10.0.0.1:{m + 2},10.0.0.1:{m + 5},10.0.0.2:{m + 8}"}
    assert {r["ports"] for r in rows(out)} == {f"{m + 6},{m + 7}"}
    assert sorted(r["own"] for r in rows(out)) == [f"10.0.0.1:{m + 2}", f"10.0.0.1:{m + 5}",
                                                   f"10.0.0.2:{m + 8}", f"10.0.0.5:{m + 1}"]


def test_the_role_variables_are_exactly_the_runtime_templates(tmp_path: Path, fake_bin: Path) -> None:
    """Every PAI_* variable a task gets that is named after a role is one of
    ``ROLE_ENV_NAMES`` / ``PORT_ENV_NAMES`` (which the submit-time length check reads), and
    every such name reaches the task: the templates and the batch shell agree."""
    line = 'env | grep -o "^PAI_[A-Za-z0-9_]*" | sed "s/^/NAME /"'
    ports = {"cpu": 1, "memoryMB": 10, "gpu": 0, "ports": {"qport": 1, "rport": 2}}
    spec = v2_spec(roles={"alpha": role(line), "beta": role(line, instances=2, resourcePerInstance=ports)})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n5", "n1,n2"))
    assert rc == 0, out
    seen = {ln.split()[1] for ln in out.splitlines() if ln.startswith("NAME ")}
    expected = {t.format(role="alpha", index=0) for t in ROLE_ENV_NAMES}
    expected |= {t.format(role="beta", index=i) for t in ROLE_ENV_NAMES for i in (0, 1)}
    expected |= {t.format(role="beta", index=i, label=label)
                 for t in PORT_ENV_NAMES for i in (0, 1) for label in ("qport", "rport")}
    assert {n for n in seen if "alpha" in n or "beta" in n} == expected


def ephemeral_range() -> tuple[int, int]:
    """This machine's ``net.ipv4.ip_local_port_range`` (the runtime reads the same file)."""
    lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(lo), int(hi)


def block_start(job_id: int, size: int, floor: int = 10000) -> int:
    """The first port of job ``job_id``'s block of ``size`` ports when none is in use: blocks of
    ``size`` from ``floor`` up to the ephemeral range, block ``job_id mod (blocks)``."""
    lo, _ = ephemeral_range()
    return floor + job_id % ((lo - floor) // size) * size


def test_min_failed_stops_the_rest(tmp_path: Path, fake_bin: Path) -> None:
    cmd = 'if [ "$PAI_TASK_INDEX" = 1 ]; then exit 4; fi; sleep 50'
    rc, out = run_script(v2_spec(roles={"w": role(cmd, instances=3)}), tmp_path, fake_bin)
    assert rc == 1
    assert "attempt 0 end: failed: 1 failed instance(s) of role w (minFailed 1); retry budget 0 spent" in out


def test_an_unlimited_retry_budget_is_logged_as_unlimited(tmp_path: Path, fake_bin: Path) -> None:
    """v1 ``retryCount: -2`` (OpenPAI's "retry without limit"): every failed attempt is requeued
    and the job log says ``unlimited``, never the internal -1."""
    spec = {"jobName": "j", "image": "img", "retryCount": -2,
            "taskRoles": [{"name": "main", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100,
                           "gpuNumber": 0, "command": "exit 3"}]}
    rc, out = run_script(spec, tmp_path, fake_bin, restart=5)
    assert rc != 0
    assert "failed attempts 0 (retry budget unlimited)" in out
    assert "failed attempt 1 of retry budget unlimited; requeueing job 77" in out
    assert "budget -1" not in out


def test_min_failed_off_lets_failures_pass(tmp_path: Path, fake_bin: Path) -> None:
    spec = v2_spec(roles={"w": role("exit 4", instances=2, completion={"minFailedInstances": -1})})
    rc, out = run_script(spec, tmp_path, fake_bin)
    assert rc == 0 and "end: succeeded: all instances completed" in out


def test_min_succeeded_ends_the_job(tmp_path: Path, fake_bin: Path) -> None:
    spec = v2_spec(roles={"master": role("true", completion={"minSucceededInstances": 1}),
                          "worker": role("sleep 50", instances=2)})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n0", "n1"))
    assert rc == 0
    assert "end: succeeded: 1 succeeded instance(s) of role master (minSucceeded 1)" in out


def test_retry_budget_requeues_then_gives_up(tmp_path: Path, fake_bin: Path) -> None:
    spec = v2_spec(roles={"main": role("exit 3")}, jobRetryCount=2)
    failures = tmp_path / "ck" / "77" / ".dlsubmit" / "failures"
    requeues = tmp_path / "requeues"
    for attempt in (0, 1):
        rc, out = run_script(spec, tmp_path, fake_bin, restart=attempt)
        assert rc != 0
        assert f"failed attempt {attempt + 1} of retry budget 2; requeueing job 77" in out
        assert failures.read_text() == f"{attempt + 1}\n"
    assert requeues.read_text() == "77\n77\n"
    rc, out = run_script(spec, tmp_path, fake_bin, restart=2)
    assert rc == 1 and "retry budget 2 spent" in out
    assert requeues.read_text() == "77\n77\n"


def test_array_element_runs_its_own_instance(tmp_path: Path, fake_bin: Path) -> None:
    line = 'echo "ENV role=$PAI_CURRENT_TASK_ROLE_NAME idx=$PAI_TASK_INDEX rank=$RANK master=$MASTER_ADDR"'
    spec = v2_spec(roles={"a": role(line), "b": role(line, instances=3)}, extras={"gangAllocation": False})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n3",),
                         extra_env={"SLURM_ARRAY_JOB_ID": "70", "SLURM_ARRAY_TASK_ID": "2"})
    assert rc == 0, out
    assert rows(out) == [{"role": "b", "idx": "1", "rank": "2", "master": "10.0.0.3"}]


def test_checkpoint_signal_is_forwarded_and_a_finished_payload_ends_at_once(
        tmp_path: Path, fake_bin: Path) -> None:
    """USR2 to the batch shell reaches the program; the program checkpoints, keeps going and
    exits 0, so the job ends without waiting for a requeue (grace is 600 s here)."""
    cmd = 'trap "echo CKPT" USR2; echo READY; for i in $(seq 30); do sleep 0.1; done; echo DONE'
    spec = v2_spec(roles={"main": role(cmd)}, extras={"checkpoint": {"grace": 600}})
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    rc, out = signal_when_ready(script, script_env(tmp_path, fake_bin))
    assert rc == 0, out
    assert "got SIGUSR2, forwarded it to the payload" in out
    assert "CKPT" in out and "DONE" in out
    assert "attempt 0 end: succeeded: all instances completed" in out
    assert not (tmp_path / "requeues").exists()


def test_checkpoint_signal_leaves_a_program_payload_inside_its_task(
        tmp_path: Path, fake_bin: Path) -> None:
    """The payload is a program that catches the signal itself (the trainer), not a shell with
    a trap. The shell that runs the user's command must survive the signal and keep waiting for
    it: once that shell died of USR2, the program was orphaned (outside the step, so Slurm's
    kill at requeue missed it; seen on dlcluster: an old attempt kept writing checkpoints), and
    the task reported a failure while the program still ran."""
    # the handler writes with os.write: print() in a handler raises "reentrant call" when the
    # signal lands while the main code is still inside its own print
    prog = ("import os, signal, sys, time; "
            "signal.signal(signal.SIGUSR2, lambda *a: os.write(1, b'CKPT\\n')); "
            "print('READY', flush=True); time.sleep(2); print('DONE', flush=True)")
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(prog)}"
    spec = v2_spec(roles={"main": role(cmd)}, extras={"checkpoint": {"grace": 600}})
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    rc, out = signal_when_ready(script, script_env(tmp_path, fake_bin))
    assert "CKPT" in out and "DONE" in out
    assert "User defined signal 2" not in out
    assert "attempt 0 end: succeeded: all instances completed" in out and rc == 0, out


@pytest.mark.parametrize("root", ["--", "-ckpt", "--help"])
def test_a_checkpoint_root_starting_with_dash_works(root: str, tmp_path: Path, fake_bin: Path) -> None:
    """A relative root is the submit directory's; one starting with '-' reaches no command as an
    option (``mkdir: unrecognized option '--/77/...'``); the job sees it absolute."""
    spec = v2_spec(roles={"w": role('printf "%s\\n" "$DL_CHECKPOINT_DIR"')})
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=root))
    env = script_env(tmp_path, fake_bin) | {"SLURM_SUBMIT_DIR": str(tmp_path)}
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{tmp_path}/{root}/77\n" in proc.stdout
    assert (tmp_path / root / "77" / ".dlsubmit").is_dir()


def test_local_world_size_counts_the_ranks_of_the_role_on_each_node(tmp_path: Path,
                                                                    fake_bin: Path) -> None:
    """LOCAL_WORLD_SIZE (torchrun's name) is the number of ranks of the task's role on its node:
    w's 5 instances of 2 GPUs pack 3 per 8-GPU node (block distribution), so node 0 holds 3
    ranks and the last node 2; the one-instance role m holds 1 on its own node."""
    line = 'echo "ENV role=$PAI_CURRENT_TASK_ROLE_NAME idx=$PAI_TASK_INDEX local=$LOCAL_RANK lws=$LOCAL_WORLD_SIZE"'
    spec = v2_spec(roles={"m": role(line), "w": role(line, instances=5, gpu=2)})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n5", "n1,n2"))
    assert rc == 0, out
    got = sorted((r["role"], r["idx"], r["local"], r["lws"]) for r in rows(out))
    assert got == [("m", "0", "0", "1"), ("w", "0", "0", "3"), ("w", "1", "1", "3"),
                   ("w", "2", "2", "3"), ("w", "3", "0", "2"), ("w", "4", "1", "2")]


def test_local_world_size_of_an_array_element_is_one(tmp_path: Path, fake_bin: Path) -> None:
    line = 'echo "ENV idx=$PAI_TASK_INDEX lws=$LOCAL_WORLD_SIZE"'
    spec = v2_spec(roles={"w": role(line, instances=4)}, extras={"gangAllocation": False})
    rc, out = run_script(spec, tmp_path, fake_bin, nodelists=("n3",),
                         extra_env={"SLURM_ARRAY_JOB_ID": "70", "SLURM_ARRAY_TASK_ID": "2"})
    assert rc == 0, out
    assert rows(out) == [{"idx": "2", "lws": "1"}]


def test_a_program_killed_by_the_checkpoint_signal_runs_no_later_command(
        tmp_path: Path, fake_bin: Path) -> None:
    """A command list whose program has no handler for USR2: the signal kills the program
    (exit 140), and the next command (an upload, say) must not run and turn the preempted
    attempt into a success; the script waits for the requeue instead."""
    out = signalled_run(tmp_path, fake_bin, [NO_HANDLER, "echo NEXT-RAN"],
                        "waiting for the requeue")
    assert "got SIGUSR2, forwarded it to the payload" in out
    assert "payload ended after SIGUSR2 (failed: 1 failed instance(s) of role main" in out
    assert "NEXT-RAN" not in out and "succeeded" not in out


def test_a_program_that_finishes_on_the_signal_lets_the_next_command_run(
        tmp_path: Path, fake_bin: Path) -> None:
    """Exit 0 after the signal means finished (the contract): the command list goes on."""
    prog = ("import signal, sys, time; signal.signal(signal.SIGUSR2, lambda *a: sys.exit(0)); "
            "print('READY', flush=True); time.sleep(20)")
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(prog)}"
    out = signalled_run(tmp_path, fake_bin, [cmd, "echo NEXT-RAN"], "attempt 0 end")
    assert "NEXT-RAN" in out
    assert "attempt 0 end: succeeded: all instances completed" in out


@pytest.mark.parametrize(("left", "extra", "shown"), [
    ("0:50", {}, 50),                                   # squeue's %L, minutes:seconds
    ("1:05", {}, 65),
    ("0:50\n0:50", {}, 50),                        # a hetjob: one line per component
    ("", {"FAKE_SQUEUE_FAIL": "1"}, None),             # slurmctld away: SLURM_JOB_END_TIME
], ids=["squeue-50s", "squeue-65s", "hetjob", "end-time"])
def test_the_time_limit_warning_waits_for_the_limit_and_never_requeues(
        tmp_path: Path, fake_bin: Path, left: str, extra: dict[str, str],
        shown: int | None) -> None:
    """sbatch's --signal=B:USR2@60 comes 60-120 s before the time limit: the job is told to
    checkpoint, and then ends at its limit (TIMEOUT), not requeued by the script (grace 60 s:
    a signal up to 125 s before the limit is the limit's)."""
    env = {"FAKE_TIME_LEFT": left, **extra}
    if shown is None:
        env["SLURM_JOB_END_TIME"] = str(int(time.time()) + 40)
    out = signalled_run(tmp_path, fake_bin, [NO_HANDLER], "waiting for the time limit",
                        grace=None, env=env)
    limit = re.search(r"got SIGUSR2 (\d+) s before the job's time limit", out)
    assert limit is not None, out
    if shown is not None:
        assert int(limit.group(1)) == shown
    else:
        assert 30 <= int(limit.group(1)) <= 40
    assert "the job ends at its time limit (TIMEOUT), not requeued" in out
    assert "waiting for the time limit" in out and "requeue" not in out.split("not requeued")[-1]
    assert not (tmp_path / "requeues").exists()


@pytest.mark.parametrize("left", ["2:06", "1:00:00", "2-00:00:00", "UNLIMITED"])
def test_a_signal_well_before_the_time_limit_is_a_preemption(
        tmp_path: Path, fake_bin: Path, left: str) -> None:
    """126 s or more before the limit (grace 60 + 65), or without a limit, the signal is the
    scheduler's: the script waits for the requeue."""
    out = signalled_run(tmp_path, fake_bin, [NO_HANDLER], "waiting for the requeue",
                        grace=None, env={"FAKE_TIME_LEFT": left})
    assert "got SIGUSR2, forwarded it to the payload" in out
    assert "time limit" not in out


def test_a_rank_done_checkpointing_does_not_stop_the_gang_while_others_write_theirs(
        tmp_path: Path, fake_bin: Path) -> None:
    """Two ranks, ``minFailed`` 1: after the checkpoint signal rank 0 writes its checkpoint at
    once and exits 3, rank 1 takes 3 s to write its own and exits 3 too (the contract: write
    the checkpoint, then keep running or exit non-zero). Rank 0's exit must not stop the gang
    (SIGTERM to srun kills the step): both checkpoints are written, then the script waits for
    the requeue."""
    prog = ("import os, signal, sys, time\n"
            "i = os.environ['PAI_TASK_INDEX']; d = os.environ['DL_CHECKPOINT_DIR']\n"
            "def ck(*a):\n"
            "    time.sleep(3 if i == '1' else 0)\n"
            "    open(os.path.join(d, 'ck' + i), 'w').close(); sys.exit(3)\n"
            "signal.signal(signal.SIGUSR2, ck)\n"
            "open(os.path.join(d, 'ready' + i), 'w').close()\n"
            "while i == '1' and not os.path.exists(os.path.join(d, 'ready0')): time.sleep(0.05)\n"
            "if i == '1': print('READY', flush=True)\n"
            "time.sleep(30)\n")
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(prog)}"
    spec = v2_spec(roles={"main": role(cmd, instances=2)}, extras={"checkpoint": {"grace": 600}})
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    out = signal_until(script, script_env(tmp_path, fake_bin), "waiting for the requeue")
    assert sorted(p.name for p in (tmp_path / "ck" / "77").glob("ck*")) == ["ck0", "ck1"], out
    assert "payload ended after SIGUSR2 (failed: 2 failed instance(s) of role main" in out


def test_a_program_killed_by_the_checkpoint_signal_ends_its_task_when_the_shell_s_comes_later(
        tmp_path: Path, fake_bin: Path) -> None:
    """The program dies of USR2 and the shell running the command list gets the signal 0.3 s
    later (a step's processes are signalled one by one): the shell waits for it after the
    program's status (128 + 12), and the next command does not run."""
    killed = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import os, signal, subprocess; "
        "subprocess.Popen(['sh', '-c', 'sleep 0.3; kill -USR2 %d' % os.getppid()]); "
        "os.kill(os.getpid(), signal.SIGUSR2)")
    spec = v2_spec(roles={"main": {**role(killed), "commands": [killed, "echo NEXT-RAN"]}})
    rc, out = run_script(spec, tmp_path, fake_bin)
    assert "NEXT-RAN" not in out, out
    assert rc == 1 and "attempt 0 end: failed: 1 failed instance(s) of role main" in out, out


def test_a_command_s_own_signal_trap_keeps_the_list_going_when_a_child_dies_of_the_signal(
        tmp_path: Path, fake_bin: Path) -> None:
    """The user's command sets its own USR2 trap (it handles the checkpoint itself); a child
    it runs dies of USR2 and the shell gets USR2 too: the user's trap runs, the command list
    goes on, and the job succeeds, as without the wait for the shell's signal."""
    child = "sh -c 'kill -USR2 $PPID; kill -USR2 $$'"
    cmd = f'trap "echo CKPT" USR2; {child}; echo DONE'
    spec = v2_spec(roles={"main": {**role(cmd), "commands": [cmd, "echo NEXT-RAN"]}})
    rc, out = run_script(spec, tmp_path, fake_bin)
    assert rc == 0, out
    assert "CKPT" in out and "DONE" in out and "NEXT-RAN" in out, out


def test_the_checkpoint_signal_sent_to_the_steps_only_is_taken_as_the_checkpoint_signal(
        tmp_path: Path, fake_bin: Path) -> None:
    """``scancel --signal=USR2 JOB`` without ``--batch`` signals the job's steps, not the batch
    shell (scancel(1)): the ranks write their checkpoint and exit 3, as the contract allows.
    The batch shell learns it from the tasks (their signal marks) and waits for the requeue, as
    after its own signal, instead of ending the job FAILED with its checkpoint written."""
    prog = ("import os, signal, sys, time\n"
            "d = os.environ['DL_CHECKPOINT_DIR']\n"
            "def ck(*a):\n"
            "    open(os.path.join(d, 'ck' + os.environ['PAI_TASK_INDEX']), 'w').close()\n"
            "    os._exit(3)\n"
            "signal.signal(signal.SIGUSR2, ck)\n"
            "print('PGID', os.getpgrp(), flush=True)\n"
            "print('READY', flush=True)\n"
            "time.sleep(30)\n")
    cmd = f"{shlex.quote(sys.executable)} -c {shlex.quote(prog)}"
    spec = v2_spec(roles={"main": role(cmd)}, extras={"checkpoint": {"grace": 600}})
    script = render_sbatch(load.to_job(spec), RenderOptions(checkpoint_root=str(tmp_path / "ck")))
    out = signal_until(script, script_env(tmp_path, fake_bin), "waiting for the requeue",
                       to_task=True)
    assert (tmp_path / "ck" / "77" / "ck0").exists(), out
    assert ("[dlsubmit] attempt 0: the tasks got SIGUSR2, not this batch shell (scancel --signal "
            "without --batch); taken as the checkpoint signal") in out
    assert ("[dlsubmit] attempt 0: payload ended after SIGUSR2 (failed: 1 failed instance(s) of "
            "role main (minFailed 1)); waiting for the requeue") in out
    assert "spent" not in out and "end: failed" not in out


def test_a_failure_without_any_checkpoint_signal_still_ends_the_job(
        tmp_path: Path, fake_bin: Path) -> None:
    """No signal, a rank exits 3: no signal mark, the job fails at once (retry budget 0)."""
    rc, out = run_script(v2_spec(roles={"main": role("exit 3")}), tmp_path, fake_bin)
    assert rc == 1 and "taken as the checkpoint signal" not in out
    assert ("attempt 0 end: failed: 1 failed instance(s) of role main (minFailed 1); retry "
            "budget 0 spent") in out, out
