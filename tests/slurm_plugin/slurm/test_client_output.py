"""SlurmClient reads what Slurm's commands really print: bytes that are not UTF-8, a job array's
whole task expression, one ``scontrol ping`` line per controller, sacct's ids of hetjob
components and array elements.

The commands are small scripts in ``bin_dir`` that print what the man pages and Slurm's source
say each command prints (named in each test); no cluster is needed, so a fake stands in for
squeue, scontrol and sacct here (the live suites read the real ones).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from slurm_plugin.slurm.client import SlurmClient
from slurm_plugin.slurm.records import SQUEUE_FIELDS

DATA = Path(__file__).parents[2] / "data"
#: squeue(1)/sacct(1) SLURM_BITSTR_LEN: "The default value is 64 bytes"; a longer task
#: expression is cut to 64 bytes ending in "..." (Slurm's own unit test of
#: xlate_array_task_str expects this very text for the even tasks 0-98)
FULL_TASKS = ",".join(str(i) for i in range(0, 100, 2))
CUT_TASKS = FULL_TASKS[:61] + "..."

FAKE_SQUEUE = r'''#!{python}
import json, os, sys
args = sys.argv[1:]
out = sys.stdout.buffer
if args == ["--version"]:
    out.write(b"slurm 22.05.8\n")
    sys.exit(0)
if "--json" in args:
    data = json.loads(open({sample!r}).read())
    text = json.dumps(data).replace('"running-gang"', '"caf@"').encode()
    out.write(text.replace(b"caf@", b"caf\xe9"))
    sys.exit(0)
fmt = args[-1].split("=", 1)[1]
suffixes = [part.split(":0", 1)[1] for part in fmt.split(",")]
record = json.loads({record!r})
bitstr = os.environ.get("SLURM_BITSTR_LEN")
record["array_task"] = {full!r} if bitstr == "0" else {cut!r}
for key, suffix in zip({keys!r}, suffixes):
    out.write(record[key].encode("latin-1") + suffix.encode())
out.write(b"\n")
'''


def _record() -> dict[str, str]:
    """One pending array's meta record (values in SQUEUE_FIELDS order), its name in Latin-1."""
    rec = {k: "N/A" for k, _ in SQUEUE_FIELDS}
    rec.update(job_id="10", array_job_id="10", state="PENDING", reason="Priority", user="bob",
               partition="gpu", tres_per_node="gres:gpu:1", node_count="1", nodes="",
               submit_time="90", start_time="0", end_time="0", eligible_time="90",
               time_limit="UNLIMITED", restart_count="0", requeue="1", priority="5",
               name="caf\xe9", comment="(null)")
    return rec


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SlurmClient:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.delenv("SLURM_BITSTR_LEN", raising=False)
    fake = tmp_path / "squeue"
    fake.write_text(FAKE_SQUEUE.format(
        python=sys.executable, sample=str(DATA / "sample-squeue.json"),
        record=json.dumps(_record()), full=FULL_TASKS, cut=CUT_TASKS,
        keys=[k for k, _ in SQUEUE_FIELDS]))
    fake.chmod(0o755)
    return SlurmClient(bin_dir=str(tmp_path), timeout_s=20)


def test_a_job_name_that_is_not_utf8_is_read(client: SlurmClient) -> None:
    """squeue prints a job's name as the bytes it was given (``#SBATCH -J`` of a Latin-1
    script; src/squeue/print.c ``_print_str``): the job is read, the byte shown as U+FFFD."""
    [job] = client.jobs()
    assert job.name == "caf\ufffd"


def test_a_job_name_that_is_not_utf8_in_json_is_replaced(client: SlurmClient) -> None:
    """``squeue --json`` with such a name is no valid UTF-8: the byte reads as U+FFFD and the
    rest of the answer as it is."""
    jobs = client.jobs(detail=True)
    assert jobs[0].name == "caf\ufffd" and jobs[0].gpu_indices == ((0, 1, 2, 3), (0, 1, 2, 3))


def test_the_whole_array_task_expression_is_read(client: SlurmClient) -> None:
    """With ``SLURM_BITSTR_LEN=0`` squeue prints the task expression at any length
    (squeue(1)); the 64-byte default would end it in "..." and lose the tasks after it."""
    [job] = client.jobs()
    assert job.array_task_string == FULL_TASKS


@pytest.mark.parametrize("answer,up", [
    ("Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is DOWN\n", True),
    ("Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n", True),
    ("Slurmctld(primary) at ctl1 is UP\n", True),
    ("Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is DOWN\n", False),
])
def test_ping_is_up_when_some_controller_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 answer: str, up: bool) -> None:
    """scontrol ping prints one line per controller (scontrol.c ``_print_ping``): a primary
    with a backup that is down, or a backup serving for a primary that is down, is up."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    fake = tmp_path / "scontrol"
    fake.write_text(f"#!/bin/sh\nprintf '{answer}'\n")
    fake.chmod(0o755)
    assert SlurmClient(bin_dir=str(tmp_path), timeout_s=20).ping() is up


def test_find_by_comment_counts_a_hetjob_and_an_array_once(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """sacct's JobID prints a hetjob's components as ``31+0``, ``31+1`` and an array's elements
    as ``100_3`` (sacct(1)), as squeue's ``%i`` does: each job is found once, by its leader's or
    its array's id."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    (tmp_path / "squeue").write_text("#!/bin/sh\nprintf '40|other\\n'\n")
    (tmp_path / "sacct").write_text(
        "#!/bin/sh\ncase \"$*\" in *JobID,Comment*) "
        "printf '31+0|dlsubmit:abc\\n31+1|dlsubmit:abc\\n100_3|dlsubmit:abc\\n100_4|dlsubmit:abc\\n';; "
        "*) exit 1;; esac\n")
    for name in ("squeue", "sacct"):
        (tmp_path / name).chmod(0o755)
    assert SlurmClient(bin_dir=str(tmp_path), timeout_s=20).find_by_comment("dlsubmit:abc") == [31, 100]


def test_sbatch_gets_the_environment_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch passes its environment on to the job (``--export=ALL``): the reads' own
    SLURM_BITSTR_LEN is not added to it."""
    monkeypatch.delenv("SLURM_CONF", raising=False)
    seen = tmp_path / "seen"
    fake = tmp_path / "sbatch"
    fake.write_text(f"#!/bin/sh\nprintf '%s' \"${{SLURM_BITSTR_LEN-unset}}\" > {seen}\necho 77\n")
    fake.chmod(0o755)
    assert SlurmClient(bin_dir=str(tmp_path), timeout_s=20).submit("#!/bin/sh\n", env={"PATH": "/usr/bin:/bin"}) == 77
    assert seen.read_text() == "unset"
