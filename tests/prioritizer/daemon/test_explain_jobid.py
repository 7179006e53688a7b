"""``dlprio explain JOBID`` takes a job id as dlqueue/squeue print it: a hetjob component
``40+1`` is its leader's unit (40), and one the job does not have is exit 5; an array task
``40_3`` is its own unit under its own job id, so the user is told how to find that id (exit
2, one line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main
from prioritizer.daemon.explain import ledger_job_id
from prioritizer.daemon.ledger import Ledger


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
    ("40_3", "JOBID 40_3: array tasks are tracked by their own job id; find it with 'squeue -h -o %A -j 40_3' "
             "(or 'sacct -X -n -o JobIDRaw -j 40_3'), then run 'dlprio explain <that id>'"),
    ("40_[5-9]", "JOBID 40_[5-9]: array tasks are tracked by their own job id; find it with "
                 "'squeue -h -o %A -j 40_[5-9]' (or 'sacct -X -n -o JobIDRaw -j 40_[5-9]'), then run "
                 "'dlprio explain <that id>'"),
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
