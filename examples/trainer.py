#!/usr/bin/env python3
"""A small real trainer that keeps the preemption contract: the payload of the main job.

``examples/main_job.py`` submits one PAI v2 spec per trace job through ``dlsubmit``; each spec's
command runs this program. It trains a logistic-regression model with numpy on synthetic data,
one real gradient-descent step (a few ms of work) per *nominal step*, then waits out the rest of
the step's nominal length, so 32 trainers on 2 cores still take their nominal time
(``--total-s``). It keeps the checkpoint contract of docs/dlsubmit.md (signal, grace,
``DL_CHECKPOINT_DIR``, requeue): on the checkpoint signal (USR2, forwarded by the dlsubmit
batch script to the payload's process group) and every ``--checkpoint-every`` steps it saves its step and
weights atomically (temporary file, fsync, rename) into ``$DL_CHECKPOINT_DIR``; after a requeue
(``$DL_RESTART_COUNT``, else ``$SLURM_RESTART_COUNT``) it resumes from the last checkpoint.

After a USR2 checkpoint it keeps training: the daemon requeues it at the end of the grace
period, and a job whose preemption is dropped (it may be about to finish) must not stop early.
SIGTERM (Slurm's kill at requeue or scancel) saves a checkpoint too and exits with 143.

Every event is one stdout line ``[trainer] <event> key=value ...`` (times in epoch seconds):
``start`` and ``end`` of each attempt, ``checkpoint`` (reason ``signal``, ``periodic``,
``terminate``), ``resume``. :func:`parse_log` reads them back (the main job's report and its
tests use it). Exit status: 0 finished, 2 bad arguments or unusable checkpoint, 143 terminated.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # 32 trainers share 2 cores: one BLAS thread each

import argparse  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

CHECKPOINT_NAME = "trainer-ckpt.npz"
LOG_PREFIX = "[trainer] "
EXIT_OK, EXIT_USAGE, EXIT_TERMINATED = 0, 2, 128 + signal.SIGTERM


class TrainerError(Exception):
    """A problem the user must fix (bad option, unreadable checkpoint); exit status 2."""


@dataclass
class State:
    """Training state: ``step`` steps done (0..total), ``weights`` of shape (features,)."""

    step: int
    weights: np.ndarray


def make_data(seed: int, samples: int, features: int) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic, linearly separable-ish data: X (samples, features), labels y (samples,) in {0, 1}."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, features))
    true_w = rng.standard_normal(features)
    y = (x @ true_w + 0.5 * rng.standard_normal(samples) > 0).astype(np.float64)
    return x, y


def train_step(weights: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float, iters: int) -> float:
    """``iters`` full-batch gradient steps of logistic regression, in place; returns the log-loss."""
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(x @ weights)))
        weights -= lr * (x.T @ (p - y)) / len(y)
    p = np.clip(1.0 / (1.0 + np.exp(-(x @ weights))), 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def save_checkpoint(directory: Path, state: State) -> Path:
    """Write ``state`` to ``directory/trainer-ckpt.npz`` atomically (temp file, fsync, rename).

    A reader (or a restart after a kill at any moment) sees the old checkpoint or the new one,
    never a partial file. Raises OSError when the directory is not writable.
    """
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / CHECKPOINT_NAME
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ckpt.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, step=np.int64(state.step), weights=state.weights)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def load_checkpoint(directory: Path, features: int) -> State | None:
    """The last checkpoint in ``directory``, or None when there is none.

    Raises:
        TrainerError: the file exists but is unreadable or its weights are not (features,).
    """
    path = directory / CHECKPOINT_NAME
    if not path.exists():
        return None
    try:
        with np.load(path) as data:
            step, weights = int(data["step"]), np.array(data["weights"], dtype=np.float64)
    except (OSError, ValueError, KeyError, EOFError) as exc:
        raise TrainerError(f"checkpoint {path}: unreadable ({exc}); delete it to start over") from None
    if weights.shape != (features,) or step < 0:
        raise TrainerError(f"checkpoint {path}: weights {weights.shape} / step {step} do not match "
                           f"--features {features}; delete it or pass the original options")
    return State(step, weights)


def log(event: str, **fields: object) -> None:
    """Print one ``[trainer] event k=v ...`` line and flush (Slurm appends it to the job log)."""
    parts = " ".join(f"{k}={v}" for k, v in fields.items())
    print(f"{LOG_PREFIX}{event} {parts}".rstrip(), flush=True)


def parse_log(text: str) -> list[dict[str, str]]:
    """The trainer's event lines in ``text`` (a job's whole output, all attempts appended).

    Returns one dict per line, ``{"event": "start", "attempt": "2", ...}`` (values are strings);
    other lines are ignored.
    """
    events = []
    for line in text.splitlines():
        if not line.startswith(LOG_PREFIX):
            continue
        words = line[len(LOG_PREFIX):].split()
        if not words:
            continue
        entry = {"event": words[0]}
        entry.update(w.split("=", 1) for w in words[1:] if "=" in w)
        events.append(entry)
    return events


def restart_count(env: dict[str, str]) -> int:
    """Requeues so far: ``DL_RESTART_COUNT`` (dlsubmit), else ``SLURM_RESTART_COUNT``, else 0."""
    for var in ("DL_RESTART_COUNT", "SLURM_RESTART_COUNT"):
        raw = env.get(var, "").strip()
        if raw:
            if not raw.isdigit():
                raise TrainerError(f"${var}={raw!r}: expected a whole number")
            return int(raw)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainer.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--total-s", type=float, required=True,
                   help="nominal training length in seconds (steps = total-s / step-s, rounded)")
    p.add_argument("--step-s", type=float, default=1.0, help="nominal length of one step, s (default 1)")
    p.add_argument("--checkpoint-every", type=int, default=10,
                   help="also checkpoint every N steps (default 10; 0 = only on signals)")
    p.add_argument("--checkpoint-dir", default=None,
                   help="checkpoint directory (default $DL_CHECKPOINT_DIR, which dlsubmit exports)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (default 0)")
    p.add_argument("--samples", type=int, default=4096, help="rows of synthetic data (default 4096)")
    p.add_argument("--features", type=int, default=256, help="features (default 256)")
    p.add_argument("--iters", type=int, default=8,
                   help="gradient iterations per step (default 8: about 3 ms on one core)")
    p.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    return p


def _checked(args: argparse.Namespace) -> tuple[int, Path]:
    """(total steps, checkpoint dir) from validated options. Raises :class:`TrainerError`."""
    for name in ("total_s", "step_s"):
        value = getattr(args, name)
        if not math.isfinite(value) or value <= 0:
            raise TrainerError(f"--{name.replace('_', '-')} {value}: must be a number > 0")
    for name in ("checkpoint_every", "samples", "features", "iters"):
        if getattr(args, name) < (0 if name == "checkpoint_every" else 1):
            raise TrainerError(f"--{name.replace('_', '-')} {getattr(args, name)}: out of range")
    directory = args.checkpoint_dir or os.environ.get("DL_CHECKPOINT_DIR", "")
    if not directory:
        raise TrainerError("no checkpoint directory: pass --checkpoint-dir or set $DL_CHECKPOINT_DIR")
    return max(1, round(args.total_s / args.step_s)), Path(directory)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        total_steps, ckpt_dir = _checked(args)
        restarts = restart_count(dict(os.environ))
        resumed = load_checkpoint(ckpt_dir, args.features)
    except TrainerError as exc:
        print(f"trainer.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # Signals are taken synchronously: blocked here, received by the wait between steps, so a
    # checkpoint always holds a whole step (never a half-updated weight vector).
    watched = {signal.SIGUSR2, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    x, y = make_data(args.seed, args.samples, args.features)
    state = resumed or State(0, np.zeros(args.features))
    attempt = restarts + 1
    log("start", attempt=attempt, restart_count=restarts, time=f"{time.time():.3f}",
        step=state.step, total_steps=total_steps, pid=os.getpid(),
        job_id=os.environ.get("SLURM_JOB_ID", "-"))
    if resumed is not None:
        log("resume", attempt=attempt, step=resumed.step, checkpoint=ckpt_dir / CHECKPOINT_NAME)
    loss = float("nan")
    while state.step < total_steps:
        deadline = time.monotonic() + args.step_s
        loss = train_step(state.weights, x, y, args.lr, args.iters)
        state.step += 1
        if args.checkpoint_every and state.step % args.checkpoint_every == 0 and state.step < total_steps:
            save_checkpoint(ckpt_dir, state)
            log("checkpoint", attempt=attempt, reason="periodic", step=state.step, time=f"{time.time():.3f}")
        while True:
            remaining = deadline - time.monotonic()   # the last step too: --total-s in all
            info = signal.sigtimedwait(watched, max(0.0, remaining))
            if info is None:
                break
            reason = "signal" if info.si_signo == signal.SIGUSR2 else "terminate"
            save_checkpoint(ckpt_dir, state)
            log("checkpoint", attempt=attempt, reason=reason, step=state.step, time=f"{time.time():.3f}")
            if info.si_signo == signal.SIGTERM:
                log("end", attempt=attempt, reason="terminated", step=state.step, time=f"{time.time():.3f}")
                return EXIT_TERMINATED
            if remaining <= 0:
                break
    log("end", attempt=attempt, reason="done", step=state.step, loss=f"{loss:.4f}",
        time=f"{time.time():.3f}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
