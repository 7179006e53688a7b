"""One daemon per ledger: an ``fcntl`` lock on ``<ledger>.lock`` that names its holder.

A second ``dlprio run`` (or ``once``) on the same ledger must refuse to act and say which
process holds it. ``flock`` is released by the kernel when the holder
dies, even by SIGKILL, so a crashed daemon never blocks its successor; the file keeps the
holder's pid for the message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from prioritizer.paths import LOCK_SUFFIX


class LockHeld(RuntimeError):
    """Another process holds the ledger lock; ``pid`` is its pid (None if unreadable)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        who = f"process {pid}" if pid else "another process"
        super().__init__(f"{path}: held by {who}; only one dlprio may act on a ledger")


class LedgerLock:
    """``with LedgerLock(ledger_path):`` holds the lock or raises :class:`LockHeld`."""

    def __init__(self, ledger_path: str | os.PathLike[str]) -> None:
        self.path = Path(str(ledger_path) + LOCK_SUFFIX)
        self.fd: int | None = None
        #: what :meth:`acquire` created: the lock file, and the missing directories above it
        self.made: list[Path] = []

    def acquire(self) -> None:
        missing = [d for d in (self.path.parent, *self.path.parent.parents) if not d.exists()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise LockHeld(self.path, int(text) if text.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        self.made = ([] if existed else [self.path]) + missing

    def discard(self) -> None:
        """For a ``run``/``once`` refused while it holds the lock: remove the lock file and
        the directories :meth:`acquire` created (those still empty), so a refusal leaves no
        trace; nothing that was there before."""
        for path in self.made:
            try:
                path.rmdir() if path.is_dir() else path.unlink()
            except OSError:   # a directory something else wrote into meanwhile stays
                break
        self.made = []

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> LedgerLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
