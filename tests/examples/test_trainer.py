"""Tests of examples/trainer.py: checkpoint files, the log format, and the signal contract
(USR2 checkpoint and keep going, TERM checkpoint and exit 143, resume after a restart) run as
real processes."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from main_job_helpers import EXAMPLES, load_example

trainer = load_example("trainer")
TRAINER = str(EXAMPLES / "trainer.py")


# ------------------------------------------------------------------ pure parts
def test_checkpoint_round_trip_leaves_no_temporary_file(tmp_path: Path) -> None:
    weights = np.arange(4, dtype=np.float64)
    trainer.save_checkpoint(tmp_path / "ck", trainer.State(7, weights))
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["trainer-ckpt.npz"]
    state = trainer.load_checkpoint(tmp_path / "ck", features=4)
    assert state is not None and state.step == 7
    assert state.weights.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_second_checkpoint_replaces_the_first(tmp_path: Path) -> None:
    trainer.save_checkpoint(tmp_path, trainer.State(1, np.zeros(2)))
    trainer.save_checkpoint(tmp_path, trainer.State(2, np.ones(2)))
    state = trainer.load_checkpoint(tmp_path, features=2)
    assert state is not None and (state.step, state.weights.tolist()) == (2, [1.0, 1.0])


def test_no_checkpoint_means_fresh_start(tmp_path: Path) -> None:
    assert trainer.load_checkpoint(tmp_path, features=3) is None


@pytest.mark.parametrize("content", [b"not a zip", b""], ids=["garbage", "empty"])
def test_unreadable_checkpoint_names_the_file(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "trainer-ckpt.npz").write_bytes(content)
    with pytest.raises(trainer.TrainerError, match="trainer-ckpt.npz"):
        trainer.load_checkpoint(tmp_path, features=3)


def test_checkpoint_of_other_shape_is_refused(tmp_path: Path) -> None:
    trainer.save_checkpoint(tmp_path, trainer.State(3, np.zeros(5)))
    with pytest.raises(trainer.TrainerError, match="--features 3"):
        trainer.load_checkpoint(tmp_path, features=3)


@pytest.mark.parametrize(("env", "expected"), [
    ({}, 0),
    ({"SLURM_RESTART_COUNT": "2"}, 2),
    ({"DL_RESTART_COUNT": "1", "SLURM_RESTART_COUNT": "4"}, 1),
    ({"DL_RESTART_COUNT": "", "SLURM_RESTART_COUNT": "3"}, 3),
], ids=["none", "slurm", "dl-wins", "empty-dl"])
def test_restart_count_sources(env: dict[str, str], expected: int) -> None:
    assert trainer.restart_count(env) == expected


def test_restart_count_rejects_garbage() -> None:
    with pytest.raises(trainer.TrainerError, match="DL_RESTART_COUNT"):
        trainer.restart_count({"DL_RESTART_COUNT": "x"})


def test_parse_log_keeps_only_trainer_lines() -> None:
    text = ("== attempt 2 ==\n[trainer] start attempt=2 restart_count=1 step=12\n"
            "noise [trainer] start attempt=9\n[trainer] end attempt=2 reason=done\n")
    assert trainer.parse_log(text) == [
        {"event": "start", "attempt": "2", "restart_count": "1", "step": "12"},
        {"event": "end", "attempt": "2", "reason": "done"},
    ]


@pytest.mark.parametrize("argv", [
    ["--total-s", "0", "--checkpoint-dir", "x"],
    ["--total-s", "nan", "--checkpoint-dir", "x"],
    ["--total-s", "5", "--step-s", "-1", "--checkpoint-dir", "x"],
    ["--total-s", "5"],
], ids=["zero-total", "nan-total", "negative-step", "no-checkpoint-dir"])
def test_bad_options_exit_2_with_one_line(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("DL_CHECKPOINT_DIR", raising=False)
    assert trainer.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("trainer.py: ") and "\n" not in err


# ------------------------------------------------------------------ real processes
class Running:
    """A trainer process whose stdout lines are collected by a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, TRAINER, *args], stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, **env})
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, needle: str, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r} in {timeout_s} s; saw {self.seen}")

    def finish(self, timeout_s: float = 60.0) -> tuple[int, list[dict[str, str]]]:
        """Wait for exit; return (exit status, every event line of the run)."""
        rc = self.proc.wait(timeout=timeout_s)
        self.pump.join(timeout=timeout_s)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return rc, trainer.parse_log("".join(self.seen))


# 40 steps of 0.05 s: the run lasts about 2 s.
ARGS = ["--total-s", "2", "--step-s", "0.05", "--checkpoint-every", "0", "--samples", "256",
        "--features", "16"]


def test_uninterrupted_run_does_all_steps(tmp_path: Path) -> None:
    run = Running(ARGS, {"DL_CHECKPOINT_DIR": str(tmp_path)})
    rc, events = run.finish()
    assert rc == 0
    assert [e["event"] for e in events] == ["start", "end"]
    assert events[0]["total_steps"] == "40" and events[0]["step"] == "0"
    assert events[1]["reason"] == "done" and events[1]["step"] == "40"
    # the nominal length, the last step's included (the simulator's duration of the job)
    assert float(events[1]["time"]) - float(events[0]["time"]) >= 2.0 - 0.01
    assert not (tmp_path / "trainer-ckpt.npz").exists()   # no signal, no periodic checkpoint


def test_periodic_checkpoints_every_n_steps(tmp_path: Path) -> None:
    args = ["--total-s", "1", "--step-s", "0.05", "--checkpoint-every", "7", "--samples", "64",
            "--features", "4"]
    rc, events = Running(args, {"DL_CHECKPOINT_DIR": str(tmp_path)}).finish()
    assert rc == 0
    # 20 steps: checkpoints after steps 7 and 14 (not after the last step).
    assert [e["step"] for e in events if e["event"] == "checkpoint"] == ["7", "14"]
    assert all(e["reason"] == "periodic" for e in events if e["event"] == "checkpoint")


def test_usr2_checkpoints_and_keeps_training(tmp_path: Path) -> None:
    run = Running(ARGS, {"DL_CHECKPOINT_DIR": str(tmp_path)})
    run.wait_for("[trainer] start")
    run.proc.send_signal(signal.SIGUSR2)
    line = run.wait_for("reason=signal")
    rc, events = run.finish()
    assert rc == 0
    step = int(trainer.parse_log(line)[0]["step"])
    saved = trainer.load_checkpoint(tmp_path, features=16)
    assert saved is not None and saved.step == step and 0 <= step <= 40
    assert events[-1]["event"] == "end" and events[-1]["reason"] == "done" and events[-1]["step"] == "40"


def test_terminate_then_restart_resumes_and_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    reference = Running(ARGS, {"DL_CHECKPOINT_DIR": str(tmp_path / "ref")})
    ref_rc, ref_events = reference.finish()
    assert ref_rc == 0

    ck = str(tmp_path / "ck")
    first = Running(ARGS, {"DL_CHECKPOINT_DIR": ck, "SLURM_RESTART_COUNT": "0"})
    first.wait_for("[trainer] start")
    first.proc.send_signal(signal.SIGUSR2)
    first.wait_for("reason=signal")
    first.proc.send_signal(signal.SIGTERM)
    rc1, ev1 = first.finish()
    assert rc1 == 143
    killed_at = int(ev1[-1]["step"])
    assert ev1[-1] == {"event": "end", "attempt": "1", "reason": "terminated", "step": str(killed_at),
                       "time": ev1[-1]["time"]}
    assert ev1[-2]["event"] == "checkpoint" and ev1[-2]["reason"] == "terminate"

    second = Running(ARGS, {"DL_CHECKPOINT_DIR": ck, "SLURM_RESTART_COUNT": "1"})
    rc2, ev2 = second.finish()
    assert rc2 == 0
    assert ev2[0]["event"] == "start" and ev2[0]["attempt"] == "2" and ev2[0]["step"] == str(killed_at)
    assert ev2[1]["event"] == "resume" and ev2[1]["step"] == str(killed_at)
    assert ev2[-1]["reason"] == "done" and ev2[-1]["step"] == "40"
    # Full-batch gradient descent is deterministic: resuming at a step boundary gives the
    # same model as never stopping.
    assert ev2[-1]["loss"] == ref_events[-1]["loss"]
    assert float(ev1[-1]["time"]) <= float(ev2[0]["time"])
