"""dlsubmit against the live cluster: real sbatch, srun, signals, requeue.

The cluster is the one SLURM_CONF names (``dlcluster up``: 4 nodes x 8 fake a100 GPUs, 2 sockets
x 8 cores, 64000 MiB; Slurm sets CUDA_VISIBLE_DEVICES from gres; hetjobs start through backfill,
bf_interval=5; a requeued job waits cred_expire=10 s before it may start again). Jobs are submitted
with ``dlsubmit`` in-process; every test polls with timeouts and cancels what it left behind.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import corpus
from live_helpers import logged_calls, logging_path, wait_cluster_idle, wait_file, wait_for
from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin.slurm.records import Job
from submit import load
from submit.cli import main
from submit.options import RenderOptions
from submit.quoting import slurm_name
from submit.render import render_sbatch
from submit_helpers import HOSTILE, PAI_DIR

pytestmark = pytest.mark.live
PREFIX = "dlsub-"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


class Submitter:
    """Submits specs with ``dlsubmit`` and remembers the ids for clean-up."""

    def __init__(self, client: SlurmClient, tmp: Path) -> None:
        self.client, self.tmp, self.ids = client, tmp, []

    def __call__(self, spec: dict[str, Any], *flags: str, name: str = "job") -> tuple[int, Path]:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        out = self.tmp / f"{name}-%j.out"
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main([str(path), "--json", "--output", str(out),
                       "--checkpoint-root", str(self.tmp / "ckpt"), *flags])
        assert rc == 0
        job_id = json.loads(buf.getvalue())["job_id"]
        assert isinstance(job_id, int)
        self.ids.append(job_id)
        return job_id, self.tmp / f"{name}-{job_id}.out"

    def ended(self, job_id: int, timeout_s: float = 120) -> Job:
        def probe() -> Job | None:
            for j in self.client.jobs(job_ids=[job_id]):
                if j.job_id == job_id and j.state in ENDED:
                    return j
            return None
        return wait_for(probe, timeout_s, f"job {job_id} to end", interval_s=0.5)


@pytest.fixture
def submit(tmp_path: Path) -> Iterator[Submitter]:
    client = SlurmClient(timeout_s=20)
    wait_cluster_idle(client, 240)
    s = Submitter(client, tmp_path)
    yield s
    active = [j.job_id for j in client.jobs(job_ids=s.ids) if j.is_active] if s.ids else []
    if active:
        client.cancel(active)


def spec(name: str, roles: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"protocolVersion": 2, "name": PREFIX + name, "type": "job", "taskRoles": roles, **top}


def role(command: str, instances: int = 1, gpu: int = 0, cpu: int = 1, **kw: Any) -> dict[str, Any]:
    return {"instances": instances, "resourcePerInstance": {"cpu": cpu, "memoryMB": 500, "gpu": gpu},
            "commands": [command], **kw}


def fields(text: str, tag: str) -> list[dict[str, str]]:
    """Lines ``TAG k=v k=v`` of a job log as dicts."""
    return [dict(kv.split("=", 1) for kv in line.split()[1:])
            for line in text.splitlines() if line.startswith(tag + " ")]


FIXTURE_SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "specs"


def _test_only(path: Path, tmp_path: Path) -> str:
    job = load.load(path)
    # a spec may name its authors' virtual cluster: map it to this cluster's defaults
    vcs = {job.virtual_cluster: {}} if job.virtual_cluster else None
    secrets = tmp_path / "secrets"
    secrets.write_text("".join(f"{s}=x\n" for s in job.secrets))
    script = render_sbatch(job, RenderOptions(virtual_clusters=vcs), str(secrets))
    return SlurmClient(timeout_s=30).test_only(script)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURE_SPECS.iterdir()
                                        if p.suffix in (".json", ".jsonc", ".yaml") and not p.name.startswith("bad-")))
def test_fixture_specs_pass_sbatch_test_only(name: str, tmp_path: Path) -> None:
    assert "to start at" in _test_only(FIXTURE_SPECS / name, tmp_path)


@pytest.mark.corpus
@pytest.mark.parametrize("name", [p.name for p in corpus.files(PAI_DIR, ".json", ".jsonc", ".yaml")
                                  if "jinja" not in p.name])
def test_pai_jobs_pass_sbatch_test_only(name: str, tmp_path: Path) -> None:
    assert "to start at" in _test_only(PAI_DIR / name, tmp_path)


@pytest.mark.releases
def test_typed_gres_and_binding_pass_sbatch_test_only() -> None:
    """The pyxis example rendered for runtime none: gpu:a100:N, enforce-binding, USR2@120."""
    example = Path(__file__).resolve().parents[2] / "examples" / "specs" / "pyxis-registry-image.yaml"
    script = render_sbatch(load.load(example), RenderOptions())
    assert "#SBATCH --gres-flags=enforce-binding" in script
    assert "to start at" in SlurmClient(timeout_s=30).test_only(script)


ENV_LINE = ('echo "ENV role=$PAI_CURRENT_TASK_ROLE_NAME rank=$RANK world=$WORLD_SIZE '
            'local=$LOCAL_RANK master=$MASTER_ADDR:$MASTER_PORT node=$SLURMD_NODENAME '
            'gpus=$CUDA_VISIBLE_DEVICES nodegpus=${DL_NODE_GPUS:-} mine=${DL_TASK_GPUS:-}"')


@pytest.mark.releases
def test_two_roles_run_as_one_hetjob(submit: Submitter) -> None:
    job_id, log = submit(spec("het", {"chief": role(ENV_LINE), "worker": role(ENV_LINE, instances=2)}))
    assert submit.ended(job_id, 90).state == "COMPLETED"
    comps = [j for j in submit.client.jobs(job_ids=[job_id]) if j.het_job_id == job_id]
    assert sorted(j.het_job_offset for j in comps) == [0, 1]
    rows = fields(log.read_text(), "ENV")
    assert sorted(int(r["rank"]) for r in rows) == [0, 1, 2]
    assert {r["world"] for r in rows} == {"3"}
    chief_node = next(j for j in comps if j.het_job_offset == 0).node_list[0]
    addr = {n.name: n.address for n in submit.client.nodes()}[chief_node]
    assert {r["master"].split(":")[0] for r in rows} == {addr}
    assert len({r["master"] for r in rows}) == 1
    assert sorted(r["role"] for r in rows) == ["chief", "worker", "worker"]


def test_four_instances_of_two_gpus_share_one_node(submit: Submitter) -> None:
    job_id, log = submit(spec("gang4x2", {"w": role(ENV_LINE, instances=4, gpu=2)}))
    assert submit.ended(job_id, 90).state == "COMPLETED"
    rows = fields(log.read_text(), "ENV")
    assert len({r["node"] for r in rows}) == 1
    assert sorted(int(r["local"]) for r in rows) == [0, 1, 2, 3]
    node_gpus = rows[0]["nodegpus"].split(",")
    assert len(node_gpus) == 8
    # device contract (docs/dlsubmit.md): every task sees the node's 8 GPUs of the job; task k
    # owns positions 2k, 2k+1 of that list (DL_TASK_GPUS); together they cover the node
    for r in rows:
        assert r["gpus"].split(",") == node_gpus
        k = int(r["local"])
        assert r["mine"] == f"{2 * k},{2 * k + 1}"
    assert sorted(int(p) for r in rows for p in r["mine"].split(",")) == list(range(8))


@pytest.mark.releases
def test_two_instances_of_eight_gpus_take_two_nodes(submit: Submitter) -> None:
    job_id, log = submit(spec("gang2x8", {"w": role(ENV_LINE, instances=2, gpu=8)}))
    assert submit.ended(job_id, 90).state == "COMPLETED"
    rows = fields(log.read_text(), "ENV")
    assert len({r["node"] for r in rows}) == 2
    assert [len(r["gpus"].split(",")) for r in rows] == [8, 8]


# The trap is set, and one step made, before RUNNING is printed: the test signals as soon as it
# reads RUNNING.
CKPT_PROGRAM = r'''start=0; [ -f "$DL_CHECKPOINT_DIR/step" ] && start=$(cat "$DL_CHECKPOINT_DIR/step")
step=$start
trap 'echo $step > "$DL_CHECKPOINT_DIR/step"; echo "CKPT step=$step"' USR2
echo "RESUME from=$start restart=$DL_RESTART_COUNT"
if [ "$DL_RESTART_COUNT" -ge 1 ]; then exit 0; fi
step=$((step+1)); echo RUNNING
while [ $step -lt 100000 ]; do step=$((step+1)); sleep 0.05; done'''


@pytest.mark.releases
def test_checkpoint_signal_requeue_resume(submit: Submitter) -> None:
    job_id, log = submit(spec("ckpt", {"main": role(CKPT_PROGRAM, gpu=1)},
                              extras={"checkpoint": {"grace": 30}}))
    wait_file(log, r"^RESUME from=0 restart=0$", 60)
    wait_file(log, r"^RUNNING$", 30)
    submit.client.signal(job_id, "USR2", batch_only=True)
    text = wait_file(log, r"^CKPT step=\d+$", 30)
    step = fields(text, "CKPT")[0]["step"]
    assert int(step) > 0
    submit.client.requeue(job_id)
    final = submit.ended(job_id, 120)
    assert (final.state, final.restart_count) == ("COMPLETED", 1)
    text = log.read_text()
    assert f"RESUME from={step} restart=1" in text
    assert re.search(r"^\[dlsubmit\] attempt 0 start: .*failed attempts 0", text, re.M)
    assert re.search(r"^\[dlsubmit\] attempt 1 start: .*restart count 1, failed attempts 0", text, re.M)
    assert "got SIGUSR2, forwarded it to the payload" in text


#: writes its checkpoint on USR2 and exits 3 (the contract allows either keeping on or that)
CKPT_EXIT = r'''trap 'echo CKPT > "$DL_CHECKPOINT_DIR/ck.$PAI_TASK_INDEX"; echo CKPT; exit 3' USR2
echo RUNNING; for i in $(seq 600); do sleep 0.1; done'''


@pytest.mark.releases
def test_a_plain_scancel_signal_reaches_the_tasks_and_is_taken_as_the_checkpoint_signal(
        submit: Submitter) -> None:
    """``scancel --signal=USR2 JOB``, as users type it, without ``--batch``: Slurm signals the
    job's steps, not the batch shell (scancel(1)). Both ranks checkpoint and exit 3; the batch
    shell learns of the signal from the tasks and waits for the requeue (grace + 30 s), where
    it once ended the job FAILED with its checkpoints written."""
    job_id, log = submit(spec("plainsig", {"main": role(CKPT_EXIT, instances=2, gpu=1)},
                              extras={"checkpoint": {"grace": 30}}))
    wait_file(log, r"^RUNNING$", 60)
    wait_for(lambda: len(re.findall(r"^RUNNING$", log.read_text(), re.M)) == 2, 30,
             "both ranks running")
    subprocess.run(["scancel", "--signal=USR2", str(job_id)], check=True, timeout=30)
    text = wait_file(log, r"waiting for the requeue", 60)
    assert ("the tasks got SIGUSR2, not this batch shell (scancel --signal without --batch); "
            "taken as the checkpoint signal") in text
    assert "forwarded it to the payload" not in text and "spent" not in text
    ckpt = submit.tmp / "ckpt" / str(job_id)
    assert sorted(p.name for p in ckpt.glob("ck.*")) == ["ck.0", "ck.1"], text
    assert submit.client.job(job_id).state == "RUNNING"


def test_a_checkpoint_signal_that_reaches_the_task_after_its_command_ended_still_counts(
        submit: Submitter) -> None:
    """Slurm signals a step's processes one at a time: a command that traps the checkpoint
    signal may checkpoint and exit before its task's shell gets the signal. Here the command
    exits 3 and its task's shell gets SIGUSR2 a second later; the task waits for it, leaves its
    mark, and the batch shell waits for the requeue instead of ending the job FAILED."""
    late = '( sleep 1; kill -s USR2 "$PPID" ) & echo EXITING; exit 3'
    job_id, log = submit(spec("latesig", {"main": role(late)}, extras={"checkpoint": {"grace": 30}}))
    text = wait_file(log, r"waiting for the requeue|end: failed", 60)
    assert "taken as the checkpoint signal" in text, text
    assert "waiting for the requeue" in text and "end: failed" not in text, text
    assert submit.client.job(job_id).state == "RUNNING"


@pytest.mark.releases
def test_the_time_limit_warning_ends_the_job_timeout_not_requeued(
        submit: Submitter, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2-minute time limit (sbatch reads ``SBATCH_TIMELIMIT``) and a 60 s grace: Slurm's
    ``--signal=B:USR2@60`` comes 60-120 s before the limit. The payload (``sleep``, no handler)
    dies of it; the next command does not run, the script does not requeue the job, and Slurm
    ends it TIMEOUT at the limit (restart count 0)."""
    monkeypatch.setenv("SBATCH_TIMELIMIT", "2")
    job_id, log = submit(spec("timelimit", {"main": {**role("sleep 600"),
                                                     "commands": ["sleep 600", "echo NEXT-RAN"]}},
                              extras={"checkpoint": {"grace": 60}}), name="timelimit")
    final = submit.ended(job_id, 300)
    text = log.read_text()
    assert (final.state, final.restart_count) == ("TIMEOUT", 0), text
    assert re.search(r"got SIGUSR2 \d+ s before the job's time limit", text), text
    assert "waiting for the time limit" in text
    assert "NEXT-RAN" not in text and "requeueing" not in text


def test_retry_budget_counts_failed_attempts(submit: Submitter) -> None:
    job_id, log = submit(spec("retry", {"main": role('echo "RUN restart=$DL_RESTART_COUNT"; exit 3')},
                              jobRetryCount=2))
    final = submit.ended(job_id, 150)
    assert (final.state, final.restart_count) == ("FAILED", 2)
    text = log.read_text()
    assert [r["restart"] for r in fields(text, "RUN")] == ["0", "1", "2"]
    assert "failed attempt 1 of retry budget 2; requeueing" in text
    assert "failed attempt 2 of retry budget 2; requeueing" in text
    assert "attempt 2 end: failed: 1 failed instance(s) of role main (minFailed 1); retry budget 2 spent" in text


def test_completion_min_failed_stops_the_role(submit: Submitter) -> None:
    cmd = 'if [ "$PAI_TASK_INDEX" = 1 ]; then exit 1; fi; sleep 300'
    job_id, log = submit(spec("minfail", {"w": role(cmd, instances=3)}))
    final = submit.ended(job_id, 90)
    assert final.state == "FAILED"
    assert "end: failed: 1 failed instance(s) of role w (minFailed 1)" in log.read_text()


def test_completion_min_succeeded_ends_the_job(submit: Submitter) -> None:
    roles = {"master": role("echo MASTER done", completion={"minSucceededInstances": 1}),
             "worker": role("sleep 300", instances=2, completion={"minFailedInstances": -1})}
    job_id, log = submit(spec("minsucc", roles))
    final = submit.ended(job_id, 90)
    assert final.state == "COMPLETED"
    assert "end: succeeded: 1 succeeded instance(s) of role master (minSucceeded 1)" in log.read_text()


def test_hostile_strings_round_trip(submit: Submitter, tmp_path: Path) -> None:
    pwned = Path("/tmp/pwned")
    existed = pwned.exists()
    jobs = []
    for i, text in enumerate(HOSTILE):
        command = (f"printf 'CMD<%s>\\n' {shlex.quote(text)}\n"
                   "printf 'ENV<%s>\\n' \"$MYENV\"\nprintf 'NAME<%s>\\n' \"$PAI_JOB_NAME\"\n"
                   "printf 'ROLE<%s>\\n' \"$PAI_CURRENT_TASK_ROLE_NAME\"")
        v1 = {"jobName": PREFIX + text, "image": "none", "jobEnvs": {"MYENV": text},
              "taskRoles": [{"name": text, "taskNumber": 1, "cpuNumber": 1, "memoryMB": 100,
                             "gpuNumber": 0, "command": command}]}
        jobs.append((text, *submit(v1, name=f"hostile{i}")))
    for text, job_id, log in jobs:
        final = submit.ended(job_id, 120)
        assert final.state == "COMPLETED", log.read_text()
        assert final.name == slurm_name(PREFIX + text)
        out = log.read_text()
        for tag, value in (("CMD", text), ("ENV", text), ("NAME", PREFIX + text), ("ROLE", text)):
            assert f"{tag}<{value}>" in out
    assert pwned.exists() == existed


def test_sbatch_refusal_exits_4_with_its_message(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "job.json"
    f.write_text(json.dumps(spec("refused", {"main": role("true")})))
    # a partition that does not exist is dlsubmit's own finding (exit 2): it packs against the
    # partition's nodes before anything is submitted
    rc = main([str(f), "--partition", "no-such-partition"])
    _, err = capsys.readouterr()
    assert (rc, err) == (2, "dlsubmit: partition no-such-partition: sinfo lists no node in it (no "
                            "such partition, or one without nodes): name a partition that "
                            "'sinfo -s' lists\n")
    # so is a GPU type no node of the partition has (sbatch would refuse it naming no field)
    f.write_text(json.dumps(spec("refused", {"main": role("true", gpu=1)})))
    rc = main([str(f), "--gpu-type", "h999"])
    _, err = capsys.readouterr()
    assert (rc, err) == (2, "dlsubmit: --gpu-type: no node of partition gpu has GPUs of type "
                            "h999 (sinfo lists a100): set --gpu-type to a100, leave it out for "
                            "any type, or name a partition with h999 GPUs with --partition\n")
    # a reservation the cluster lacks (sbatch reads SBATCH_RESERVATION) is sbatch's refusal
    # (exit 4), passed on with its message
    monkeypatch.setenv("SBATCH_RESERVATION", "no-such-reservation")
    rc = main([str(f)])
    _, err = capsys.readouterr()
    assert rc == 4
    assert err == ("dlsubmit: Slurm refused the job: sbatch: error: Batch job submission "
                   "failed: Requested reservation is invalid\n")


def test_array_elements_map_to_role_instances(submit: Submitter) -> None:
    line = 'echo "ARR role=$PAI_CURRENT_TASK_ROLE_NAME index=$PAI_TASK_INDEX rank=$RANK world=$WORLD_SIZE"'
    job_id, _ = submit(spec("array", {"a": role(line), "b": role(line, instances=2)},
                            extras={"gangAllocation": False}), name="array")

    def all_ended() -> list[Job]:
        elems = [j for j in submit.client.jobs() if j.array_job_id == job_id]
        return elems if len(elems) == 3 and all(j.state in ENDED for j in elems) else []
    elems = wait_for(all_ended, 90, "3 array elements to end")
    assert {j.state for j in elems} == {"COMPLETED"}
    rows = [r for f in submit.tmp.glob("array-*.out") for r in fields(f.read_text(), "ARR")]
    assert sorted((r["role"], r["index"], r["rank"], r["world"]) for r in rows) == [
        ("a", "0", "0", "3"), ("b", "0", "1", "3"), ("b", "1", "2", "3")]


def test_hostile_output_and_checkpoint_paths(submit: Submitter, tmp_path: Path) -> None:
    """Paths with quotes, blanks, #, $(...), backticks and unicode (no % or backslash: sbatch
    gives those a meaning in --output patterns)."""
    odd = tmp_path / "it's \"odd\" #1 $(id) `id` ü"
    odd.mkdir()
    f = tmp_path / "paths.json"
    f.write_text(json.dumps(spec("paths", {"main": role('echo "CKPT<$DL_CHECKPOINT_DIR>"')})))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([str(f), "--json", "--output", str(odd / "log.out"), "--checkpoint-root", str(odd)])
    assert rc == 0
    job_id = json.loads(buf.getvalue())["job_id"]
    submit.ids.append(job_id)
    assert submit.ended(job_id, 60).state == "COMPLETED"
    assert f"CKPT<{odd}/{job_id}>" in (odd / "log.out").read_text()


def test_preemptions_do_not_spend_the_retry_budget(submit: Submitter) -> None:
    """Budget 1: attempt 0 is preempted (signal + requeue), attempts 1 and 2 fail; only the
    second failure spends the budget."""
    # the trap is set before RUN is printed: the test signals as soon as it reads RUN
    cmd = ('if [ "$DL_RESTART_COUNT" = 0 ]; then trap "echo CKPT" USR2; fi\n'
           'echo "RUN restart=$DL_RESTART_COUNT"\n'
           'if [ "$DL_RESTART_COUNT" = 0 ]; then sleep 300 & wait; sleep 300; fi\n'
           'exit 5')
    job_id, log = submit(spec("preempt-budget", {"main": role(cmd)}, jobRetryCount=1,
                              extras={"checkpoint": {"grace": 30}}))
    wait_file(log, r"^RUN restart=0$", 60)
    submit.client.signal(job_id, "USR2", batch_only=True)
    wait_file(log, r"^CKPT$", 30)
    submit.client.requeue(job_id)
    final = submit.ended(job_id, 150)
    assert (final.state, final.restart_count) == ("FAILED", 2)
    text = log.read_text()
    assert [r["restart"] for r in fields(text, "RUN")] == ["0", "1", "2"]
    assert re.search(r"attempt 1 start: .*failed attempts 0 \(retry budget 1\)", text)
    assert "failed attempt 1 of retry budget 1; requeueing" in text
    assert re.search(r"attempt 2 start: .*failed attempts 1 \(retry budget 1\)", text)
    assert "attempt 2 end: failed: 1 failed instance(s) of role main (minFailed 1); retry budget 1 spent" in text


@pytest.mark.releases
def test_every_rank_device_exists_with_real_srun(submit: Submitter) -> None:
    """With real srun: 4 instances x 1 GPU on one node. Slurm's gres/gpu plugin
    sets CUDA_VISIBLE_DEVICES per step; under dlsubmit's contract every task sees the node's GPUs
    of the job and torch's ``set_device(LOCAL_RANK)`` (PyTorch torchrun docs) needs
    LOCAL_RANK < len(CUDA_VISIBLE_DEVICES)."""
    cmd = ('IFS=, read -r -a d <<< "$CUDA_VISIBLE_DEVICES"; '
           'echo "DEV local=$LOCAL_RANK n=${#d[@]} ok=$(( LOCAL_RANK < ${#d[@]} )) '
           'order=$CUDA_DEVICE_ORDER mine=$DL_TASK_GPUS"')
    job_id, log = submit(spec("devices", {"w": role(cmd, instances=4, gpu=1)}), name="devices")
    assert submit.ended(job_id).state == "COMPLETED"
    got = sorted((r["local"], r["n"], r["ok"], r["order"], r["mine"]) for r in fields(log.read_text(), "DEV"))
    assert got == [(str(i), "4", "1", "PCI_BUS_ID", str(i)) for i in range(4)]


def test_dlsubmit_from_inside_a_job_gets_a_clean_environment(submit: Submitter, tmp_path: Path) -> None:
    """An outer 2-task GPU job runs dlsubmit; the inner job (1 task, 1 GPU)
    must see its own allocation, not the outer job's SLURM_NTASKS / CUDA_VISIBLE_DEVICES."""
    import sys

    inner = tmp_path / "inner.json"
    inner.write_text(json.dumps(spec("inner", {"w": role(
        'echo "INNER ntasks=$SLURM_NTASKS gpus=$CUDA_VISIBLE_DEVICES job=$SLURM_JOB_ID"', gpu=1)})))
    dl = shlex.quote(str(Path(sys.executable).with_name("dlsubmit")))
    cmd = (f'[[ $PAI_TASK_INDEX == 0 ]] || exit 0; {dl} {shlex.quote(str(inner))} '
           f'--output {shlex.quote(str(tmp_path / "inner-%j.out"))} '
           f'--checkpoint-root {shlex.quote(str(tmp_path / "ckpt"))} > {shlex.quote(str(tmp_path / "inner.id"))} '
           f'2> {shlex.quote(str(tmp_path / "inner.err"))}')
    job_id, log = submit(spec("outer", {"w": role(cmd, instances=2, gpu=2)}), name="outer")
    assert submit.ended(job_id).state == "COMPLETED", log.read_text()
    inner_id = int((tmp_path / "inner.id").read_text())
    submit.ids.append(inner_id)
    assert f"running inside job {job_id}" in (tmp_path / "inner.err").read_text()
    assert submit.ended(inner_id).state == "COMPLETED"
    [row] = fields((tmp_path / f"inner-{inner_id}.out").read_text(), "INNER")
    assert row["ntasks"] == "1" and row["job"] == str(inner_id)
    assert len(row["gpus"].split(",")) == 1


def test_secret_reaches_the_task_and_not_slurms_copy_of_the_script(submit: Submitter, tmp_path: Path) -> None:
    """The value is filled in at run time; ``scontrol write batch_script``
    (Slurm's stored copy) holds only the file's path."""
    sf = tmp_path / "secrets"
    sf.write_text("token=tok-4711\n")
    sf.chmod(0o600)
    job_id, log = submit(spec("secret", {"w": role('echo "SECRET v=<% $secrets.token %>"')}),
                         "--secrets", str(sf), name="secret")
    stored = tmp_path / "stored.sh"
    import subprocess

    subprocess.run(["scontrol", "write", "batch_script", str(job_id), str(stored)], check=True,
                   capture_output=True)
    assert "tok-4711" not in stored.read_text() and str(sf) in stored.read_text()
    assert submit.ended(job_id).state == "COMPLETED"
    assert fields(log.read_text(), "SECRET") == [{"v": "tok-4711"}]


def test_several_specs_in_one_call_all_or_nothing(submit: Submitter, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``dlsubmit a b c`` validates every spec before submitting any (a bad one:
    nothing reaches Slurm, exit 2), then submits each once; ids print in spec order."""
    tag = os.urandom(4).hex()  # this run's jobs only (squeue still lists earlier runs' ended ones)
    names = [f"multi-{tag}-{i}" for i in range(5)]
    paths = []
    for i, n in enumerate(names):
        paths.append(tmp_path / f"{i}.yaml")
        paths[-1].write_text(json.dumps(spec(n, {"main": role("sleep 120", gpu=1)})))
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps(spec(f"multi-{tag}-bad", {"main": role("true", gpu=-1)})))
    flags = ["--output", "/dev/null", "--checkpoint-root", str(tmp_path / "ckpt")]
    rc = main([*map(str, paths[:2]), str(bad), *map(str, paths[2:]), *flags])
    assert rc == 2 and capsys.readouterr().out == ""
    ours = [j for j in submit.client.jobs() if tag in j.name]
    assert ours == []
    rc = main([*map(str, paths), *flags])
    ids = [int(x) for x in capsys.readouterr().out.split()]
    submit.ids += ids
    assert rc == 0 and len(ids) == len(names)
    by_id = {j.job_id: j.name for j in submit.client.jobs(job_ids=ids)}
    assert [by_id[i] for i in ids] == [PREFIX + n for n in names]
    assert len([j for j in submit.client.jobs() if tag in j.name]) == len(names)


def test_one_sbatch_per_spec_and_no_other_slurm_command(submit: Submitter, tmp_path: Path) -> None:
    """dlsubmit's Slurm cost is one read of the node shapes per call (``scontrol show
    partition``, ``sinfo``: the largest node of the partition, see docs/dlsubmit.md) and one
    sbatch per spec (no squeue validation, no lookup unless sbatch timed out), counted through
    the real binaries."""
    path, log = logging_path(tmp_path)
    specs = []
    for i in range(3):
        specs.append(tmp_path / f"one-{i}.yaml")
        specs[-1].write_text(json.dumps(spec(f"one-sbatch-{i}", {"main": role("true")})))
    proc = subprocess.run([str(Path(sys.executable).with_name("dlsubmit")), *map(str, specs),
                           "--output", "/dev/null", "--checkpoint-root", str(tmp_path / "ckpt")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PATH": path})
    assert proc.returncode == 0, proc.stderr
    submit.ids += [int(x) for x in proc.stdout.split()]
    calls = logged_calls(log)
    assert len(submit.ids) == 3 and len(calls) == 5, calls
    assert calls[0] == "scontrol --all show partition --oneliner", calls
    assert calls[1].startswith("sinfo --noheader --Node --all --Format="), calls
    assert all(c.startswith("sbatch --parsable --comment=dl:v1;") for c in calls[2:]), calls


@pytest.fixture
def small_partition(submit: Submitter) -> Iterator[str]:
    """Partition ``dlsub_small`` of node1 alone (8 GPUs), beside ``gpu`` (4 nodes), created
    with scontrol and deleted after the test's jobs are gone."""
    submit.client.create_partition("dlsub_small", ["Nodes=node1", "MaxTime=INFINITE", "State=UP"])
    yield "dlsub_small"
    active = [j.job_id for j in submit.client.jobs(job_ids=submit.ids) if j.is_active]
    if active:
        submit.client.cancel(active)
    wait_for(lambda: not [j for j in submit.client.jobs(job_ids=submit.ids) if j.is_active], 60,
             "the test's jobs to leave dlsub_small")
    submit.client.delete_partition("dlsub_small")


@pytest.mark.releases
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_list_of_partitions_is_read_as_each_of_them(
        how: str, submit: Submitter, small_partition: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """sbatch(1) takes ``--partition gpu,dlsub_small`` (the job starts in whichever can run it
    first); a gang of 2 x 8 GPUs fits gpu though not dlsub_small (8 GPUs), so it is submitted
    and Slurm runs it; in dlsub_small alone it is refused before sbatch."""
    parts = f"gpu,{small_partition}"
    flags: tuple[str, ...] = ("--partition", parts)
    if how == "env":
        monkeypatch.setenv("SBATCH_PARTITION", parts)
        flags = ()
    job_id, _ = submit(spec("parts", {"w": role("true", instances=2, gpu=8)}), *flags)
    assert set(submit.client.job(job_id).partition.split(",")) <= {"gpu", small_partition}
    assert submit.ended(job_id, 90).state == "COMPLETED"
    monkeypatch.delenv("SBATCH_PARTITION", raising=False)
    f = submit.tmp / "small.json"
    f.write_text(json.dumps(spec("small", {"w": role("true", instances=2, gpu=8)})))
    capsys.readouterr()
    assert main([str(f), "--partition", small_partition]) == 2
    assert capsys.readouterr().err.startswith(
        f"dlsubmit: the job needs 16 GPUs at once (all instances start together) and partition "
        f"{small_partition} has 8 in all (1 nodes): it could never start")
