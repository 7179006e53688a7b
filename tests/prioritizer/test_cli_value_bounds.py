"""Bad numeric and name inputs: a number argparse would accept as a float/int that the command
cannot use (non-finite, 1e308, a 30-digit node count) and a job name Slurm would refuse
(over 1024 characters) are exit 2 naming the option or field, never a traceback (exit 1) nor a
half-submitted batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from prioritizer.cli import main as dlprio
from submit.queue_cli import main as dlqueue

HISTORY = ("job_id,user,account,partition,submit_time,eligible_time,num_gpu,num_nodes,work_gpu_s,"
           "duration,end_time,jct,state,attempts,ended_by,preemptions\n"
           "1,u,a,gpu,100,100,1,1,10,10,110,10,COMPLETED,1,self,0\n"
           "2,u,a,gpu,100,100,1,1,20,20,120,20,COMPLETED,1,self,0\n")


@pytest.mark.parametrize("value", ["1e308"])
def test_history_check_huge_dispatch_latency_is_refused(tmp_path: Path, value: str,
                                                        capsys: pytest.CaptureFixture) -> None:
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    rc = dlprio(["history", "check", "--trace", str(trace), "--nodes", "1", "--gpus-per-node",
                 "8", "--start-latency", "0", "--dispatch-latency", value])
    assert rc == 2
    assert "--dispatch-latency" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "1e308"])
def test_dlqueue_interval_non_finite_is_refused(value: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture) -> None:
    # must be refused before any Slurm call; no Slurm binary on PATH, so no cluster is touched
    # (on main: squeue is not found, exit 3, or with Slurm a traceback from time.sleep)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "none.conf"))
    with pytest.raises(SystemExit) as exc:
        dlqueue(["--watch", "--iterations", "2", "--interval", value])
    assert exc.value.code == 2
    assert "--interval" in capsys.readouterr().err


def test_simulate_huge_nodes_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace = tmp_path / "h.csv"
    trace.write_text(HISTORY)
    rc = dlprio(["simulate", "--trace", str(trace), "--nodes", "9" * 30, "--gpus-per-node", "8"])
    assert rc == 2
    assert "--nodes" in capsys.readouterr().err


def test_dlsubmit_refuses_a_name_slurm_will_refuse(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    """slurmctld refuses a job name over 1024 characters ('Pathname ... too long'); validation
    passes it, so `dlsubmit ok.yaml long.yaml` submits ok.yaml and fails long.yaml (exit 4, Slurm refused):
    several specs are then not all or nothing."""
    from submit.cli import main as dlsubmit

    spec = ('{"protocolVersion": 2, "name": "%s", "type": "job", "taskRoles": {"w": {"instances": 1,'
            ' "resourcePerInstance": {"cpu": 1, "memoryMB": 512, "gpu": 1}, "commands": ["true"]}}}')
    (tmp_path / "long.json").write_text(spec % ("L" * 1025))
    assert dlsubmit(["--dry-run", str(tmp_path / "long.json")]) == 2
    assert "name" in capsys.readouterr().err
