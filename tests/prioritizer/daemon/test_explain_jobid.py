"""``dlprio explain JOBID`` takes a job id as dlqueue/squeue print it: a hetjob component
``40+1`` is its leader's unit (40), and one the job does not have is exit 5; an array task
``40_3`` is its own unit under its own job id, which Slurm is asked for (squeue, then sacct;
here a fake client); when Slurm does not answer, the user is told how to find that id (exit
3, one line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.daemon.explain import ledger_job_id
from prioritizer.daemon.ledger import Ledger
from slurm_plugin.slurm.client import AccountingDisabled, SlurmUnreachable


@pytest.mark.parametrize("text, unit", [("40", 40), (" 40 ", 40), ("40+0", 40), ("40+1", 40), ("7+12", 7),
                                        ("0040", 40), ("4294967293", 4294967293)])
def test_plain_and_hetjob_ids_map_to_the_ledger_unit(text: str, unit: int) -> None:
    assert ledger_job_id(text) == unit


EXPECTED = ("expected a job id as dlqueue prints it: 40, 40+1 (hetjob component) or 40_3 "
            "(array task), at most 4294967293")


def _config(tmp_path: Path) -> str:
    ledger = tmp_path / "ledger.sqlite"
    Ledger(ledger).close()
    cfg = tmp_path / "dlprio.yaml"
    cfg.write_text(f"ledger_path: {ledger}\n")
    return str(cfg)


@pytest.mark.parametrize("job, message", [
    # brackets that name no elements (sbatch(1) --array grammar): no Slurm asked
    ("40_[9-5]", "JOBID 40_[9-5]: bad element '9-5'; expected array tasks as squeue prints them "
                 "(40_3, 40_[5-9], 40_[1,4-8:2])"),
    ("40_[1-4:0]", "JOBID 40_[1-4:0]: bad element '1-4:0'; expected array tasks as squeue "
                   "prints them (40_3, 40_[5-9], 40_[1,4-8:2])"),
    ("abc", f"JOBID 'abc': {EXPECTED}"),
    ("40+", f"JOBID '40+': {EXPECTED}"),
    # past a Slurm job id (uint32 below NO_VAL); a long one is echoed bounded: the first 60
    # characters of the repr (quote included) and the length, never 5,000 digits whole
    ("4294967294", f"JOBID '4294967294': {EXPECTED}"),
    ("9" * 5000, f"JOBID '{'9' * 59}… (5,000 characters): {EXPECTED}"),
    ("9" * 5000 + "+1", f"JOBID '{'9' * 59}… (5,002 characters): {EXPECTED}"),
    # an array form whose array id is past a Slurm id, or past any id's length: no 'squeue -j'
    # advice repeating 5,000 digits, the id echoed bounded like any other
    ("4294967294_3", f"JOBID '4294967294_3': {EXPECTED}"),
    ("40_" + "9" * 5000, f"JOBID '40_{'9' * 56}… (5,003 characters): {EXPECTED}"),
    ("9" * 5000 + "_3", f"JOBID '{'9' * 59}… (5,002 characters): {EXPECTED}"),
    # a digit of another script is not one squeue prints
    ("٤٠", f"JOBID '٤٠': {EXPECTED}"),
])
def test_array_tasks_and_garbage_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     job: str, message: str) -> None:
    assert main(["explain", job, "--config", _config(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"dlprio: {message}\n")


def test_one_task_and_several_tasks_are_told_the_same_commands() -> None:
    """``40_3`` and ``40_[5-9]`` (ArrayTask, shown when Slurm does not answer) both get the
    one line of find_task_ids, with their own text in the commands."""
    from prioritizer.daemon.explain import ArrayTask, find_task_ids, parse_job_id
    assert find_task_ids("40_3") == (
        "JOBID 40_3: array tasks are tracked by their own job id; find it with "
        "'squeue -h -o %A -j 40_3' (or 'sacct -X -n -o JobIDRaw -j 40_3'), then run "
        "'dlprio explain <that id>'")
    for text in ("40_3", "40_[5-9]"):
        with pytest.raises(ValueError) as caught:
            parse_job_id(text)
        assert str(caught.value) == find_task_ids(text)
        assert isinstance(caught.value, ArrayTask)
        assert caught.value.one == (text == "40_3")


def test_hetjob_component_is_looked_up_as_its_leader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    assert main(["explain", "40+1", "--config", cfg]) == 5      # exit 5 (NOT_FOUND): not in the (empty) ledger
    err = capsys.readouterr().err
    assert err.startswith(f"dlprio: job 40: not in the ledger {tmp_path / 'ledger.sqlite'}")


def _recorded(tmp_path: Path, *records: dict) -> str:
    """A config whose ledger holds the units of these squeue records, as a cycle records them."""
    from prioritizer.daemon.config import DaemonConfig
    from prioritizer.daemon.observe import record_units, units_from_jobs
    from slurm_plugin.slurm.shapes import job_from_json
    cfg = _config(tmp_path)
    base = {"job_state": "RUNNING", "user_name": "bob", "partition": "gpu", "node_count": 1,
            "nodes": "node1", "start_time": 100, "submit_time": 90, "requeue": True,
            "tres_per_node": "gres:gpu:8"}
    units = units_from_jobs([job_from_json({**base, **r}) for r in records], DaemonConfig())
    with Ledger(tmp_path / "ledger.sqlite") as ledger, ledger.transaction():
        record_units(None, ledger, units, 120)
    return cfg


def test_a_hetjob_component_it_does_not_have_is_one_line_exit_5(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recorded(tmp_path, {"job_id": 40, "het_job_id": 40, "het_job_offset": 0},
                    {"job_id": 41, "het_job_id": 40, "het_job_offset": 1, "tres_per_node": None},
                    {"job_id": 50})
    for job in ("40+1", "40+0", "40"):
        assert main(["explain", job, "--config", cfg]) == 0
        assert capsys.readouterr().out.startswith("job 40 (bob, gpu): RUNNING\n")
    for job, message in (
            ("40+5", "job 40 has components +0..+1; no +5"),
            ("40+2", "job 40 has components +0..+1; no +2"),
            ("50+1", "job 50 is no heterogeneous job (it has no +N components); no +1: run "
                     "'dlprio explain 50'")):
        assert main(["explain", job, "--config", cfg]) == 5      # as for a job not in the ledger
        assert capsys.readouterr() == ("", f"dlprio: {message}\n")


def test_a_ledger_that_never_recorded_components_explains_the_leader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows written before the ledger kept components (NULL until the daemon sees the job
    again): the component cannot be checked, the leader is explained as before."""
    import sqlite3
    cfg = _recorded(tmp_path, {"job_id": 40, "het_job_id": 40, "het_job_offset": 0})
    conn = sqlite3.connect(tmp_path / "ledger.sqlite")
    conn.execute("UPDATE jobs SET components = NULL")
    conn.commit()
    conn.close()
    assert main(["explain", "40+5", "--config", cfg]) == 0
    assert capsys.readouterr().out.startswith("job 40 (bob, gpu): RUNNING\n")


class _Slurm:
    """squeue's records (``down``: slurmctld does not answer) and sacct's (None: no
    slurmdbd), as the client returns them; ``asked``: the commands run."""

    def __init__(self, squeue: list, sacct: list | None = None, down: bool = False) -> None:
        self.squeue, self.sacct, self.down, self.asked = squeue, sacct, down, []

    def jobs(self, *, job_ids: list[int]) -> list:
        self.asked.append(("squeue", job_ids))
        if self.down:
            raise SlurmUnreachable(["squeue"], "slurm_load_jobs error: Unable to contact slurm "
                                   "controller (connect failure)")
        return [j for j in self.squeue if j.job_id in job_ids or j.array_job_id in job_ids]

    def accounting_jobs(self, job_ids: list[int]) -> list:
        self.asked.append(("sacct", job_ids))
        if self.sacct is None:
            raise AccountingDisabled(["sacct"], "Slurm accounting storage is disabled")
        return list(self.sacct)


def _slurm(monkeypatch: pytest.MonkeyPatch, slurm: _Slurm) -> _Slurm:
    from prioritizer.daemon import cli
    monkeypatch.setattr(cli, "SlurmClient", lambda timeout_s: slurm)
    return slurm


def _element(job_id: int, task: int | None, pending: str = "") -> object:
    from slurm_plugin.slurm.shapes import job_from_json
    return job_from_json({"job_id": job_id, "job_state": "PENDING" if pending else "RUNNING",
                          "array_job_id": 1963, "array_task_id": task,
                          "array_task_string": pending})


ARRAY = [{"job_id": 1970, "array_job_id": 1963, "array_task_id": 1},
         {"job_id": 1963, "array_job_id": 1963, "array_task_string": "2-9", "job_state": "PENDING",
          "start_time": 0, "nodes": ""}]


@pytest.mark.parametrize("job, unit", [("1963_1", 1970), ("1963_5", 1963), ("1963_9", 1963)],
                         ids=["started", "pending", "pending-last"])
def test_an_array_task_is_explained_under_the_job_id_squeue_gives_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        job: str, unit: int) -> None:
    """Task 1 runs as job 1970; tasks 2-9 wait in the array's record (1963), one unit."""
    cfg = _recorded(tmp_path, *ARRAY)
    slurm = _slurm(monkeypatch, _Slurm([_element(1970, 1), _element(1963, None, "2-9")]))
    assert main(["explain", job, "--config", cfg]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"array task {job} is job {unit}"
    assert out[1].startswith(f"job {unit} (bob, gpu): ")
    assert slurm.asked == [("squeue", [1963])]


def test_an_ended_array_task_is_found_in_sacct(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace
    cfg = _recorded(tmp_path, *ARRAY)
    slurm = _slurm(monkeypatch, _Slurm([], [
        SimpleNamespace(job_id=1969, array_job_id=1963, array_task_id=0),
        SimpleNamespace(job_id=1970, array_job_id=1963, array_task_id=1)]))
    assert main(["explain", "1963_1", "--config", cfg]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == ["array task 1963_1 is job 1970",
                                                        "job 1970 (bob, gpu): RUNNING"]
    assert slurm.asked == [("squeue", [1963]), ("sacct", [1963])]


ADVICE = ("dlprio: JOBID 1963_1: array tasks are tracked by their own job id; find it with "
          "'squeue -h -o %A -j 1963_1' (or 'sacct -X -n -o JobIDRaw -j 1963_1'), then run "
          "'dlprio explain <that id>'\n")


@pytest.mark.parametrize("slurm, code", [(_Slurm([], down=True), 3), (_Slurm([], sacct=None), 4)],
                         ids=["slurmctld-down", "no-slurmdbd"])
def test_without_slurms_answer_an_array_task_is_the_commands_to_find_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        slurm: _Slurm, code: int) -> None:
    """slurmctld does not answer: exit 3 (SLURM_UNREACHABLE); squeue lists no such task and
    sacct answers "accounting storage is disabled": exit 4 (SLURM_REFUSED), as README's table
    has accounting disabled. Either way one line: the commands that find the job id."""
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, slurm)
    assert main(["explain", "1963_1", "--config", cfg]) == code
    assert capsys.readouterr() == ("", ADVICE)


def test_an_array_task_slurm_does_not_know_is_exit_5(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, _Slurm([_element(1970, 1)], []))
    assert main(["explain", "1963_4", "--config", cfg]) == 5
    assert capsys.readouterr() == ("", "dlprio: job 1963_4: neither squeue nor sacct knows "
                                       "this array task\n")


@pytest.mark.parametrize("job", ["1963_[2-9]", "1963_[3-4]", "1963_[2-9%2]", "1963_[4-8:2]"])
def test_tasks_that_all_wait_in_the_pending_record_are_explained_as_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        job: str) -> None:
    """Tasks 2-9 wait in the array's record 1963 (one unit): any of them, as squeue or dlqueue
    print it (a throttle, a step), is that unit."""
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, _Slurm([_element(1970, 1), _element(1963, None, "2-9")]))
    assert main(["explain", job, "--config", cfg]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [f"array tasks {job} are job 1963", "job 1963 (bob, gpu): PENDING"]


@pytest.mark.parametrize("job", ["1963_[1-9]", "1963_[1,5]", "1963_[1-3:2]"])
def test_tasks_of_several_jobs_are_listed_with_their_ids_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        job: str) -> None:
    """Task 1 runs as job 1970, tasks 2-9 wait as 1963: two jobs, each named with how squeue
    shows it, and no explanation of either."""
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, _Slurm([_element(1970, 1), _element(1963, None, "2-9")]))
    assert main(["explain", job, "--config", cfg]) == 2
    assert capsys.readouterr() == ("", f"dlprio: JOBID {job}: these array tasks are 2 jobs: "
                                       "1963 (1963_[2-9]), 1970 (1963_1); run 'dlprio explain "
                                       "<job id>' for one\n")


def test_ended_tasks_of_several_jobs_are_listed_from_sacct(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from types import SimpleNamespace
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, _Slurm([], [SimpleNamespace(job_id=1969 + t, array_job_id=1963, array_task_id=t)
                                    for t in range(12)]))
    assert main(["explain", "1963_[0-11]", "--config", cfg]) == 2
    assert capsys.readouterr().err == (
        "dlprio: JOBID 1963_[0-11]: these array tasks are 12 jobs: 1969 (1963_0), 1970 (1963_1), "
        "1971 (1963_2), 1972 (1963_3), 1973 (1963_4), 1974 (1963_5), 1975 (1963_6), "
        "1976 (1963_7), 1977 (1963_8), 1978 (1963_9), and 2 more; run 'dlprio explain "
        "<job id>' for one\n")


def test_several_tasks_without_slurms_answer_are_the_commands_to_find_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, _Slurm([], down=True))
    assert main(["explain", "1963_[2-9]", "--config", cfg]) == 3
    assert capsys.readouterr() == ("", ADVICE.replace("1963_1", "1963_[2-9]"))


def test_several_tasks_slurm_does_not_know_are_exit_5(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recorded(tmp_path, *ARRAY)
    _slurm(monkeypatch, _Slurm([_element(1970, 1), _element(1963, None, "2-9")], []))
    assert main(["explain", "1963_[10-12]", "--config", cfg]) == 5
    assert capsys.readouterr() == ("", "dlprio: job 1963_[10-12]: neither squeue nor sacct knows "
                                       "these array tasks\n")


def test_a_plain_id_needs_no_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _recorded(tmp_path, *ARRAY)
    slurm = _slurm(monkeypatch, _Slurm([], down=True))
    assert main(["explain", "1970", "--config", cfg]) == 0
    assert capsys.readouterr().out.startswith("job 1970 (bob, gpu): RUNNING\n")
    assert slurm.asked == []


def test_a_range_lists_tasks_squeue_forgot_beside_those_it_shows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Task 1 runs (squeue, job 1970); task 0 ended past MinJobAge, so only sacct has it (job
    1969). The range names both jobs. (A stand-in for Slurm: on the test cluster a task
    leaves squeue only after MinJobAge, 300 s.)"""
    from types import SimpleNamespace
    cfg = _recorded(tmp_path, *ARRAY)
    slurm = _slurm(monkeypatch, _Slurm([_element(1970, 1)], [
        SimpleNamespace(job_id=1969, array_job_id=1963, array_task_id=0),
        SimpleNamespace(job_id=1970, array_job_id=1963, array_task_id=1)]))
    assert main(["explain", "1963_[0-1]", "--config", cfg]) == 2
    assert capsys.readouterr() == ("", "dlprio: JOBID 1963_[0-1]: these array tasks are 2 "
                                       "jobs: 1969 (1963_0), 1970 (1963_1); run 'dlprio explain "
                                       "<job id>' for one\n")
    assert slurm.asked == [("squeue", [1963]), ("sacct", [1963])]
    # without slurmdbd the tasks squeue shows still answer
    _slurm(monkeypatch, _Slurm([_element(1970, 1)], sacct=None))
    assert main(["explain", "1963_[0-1]", "--config", cfg]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "array tasks 1963_[0-1] are job 1970"
