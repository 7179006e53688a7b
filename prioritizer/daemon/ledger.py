"""The daemon's durable memory: a private sqlite file (WAL, mode 0600) of runs, queues and intents.

``dlprio run`` is the only writer (it holds the lock in :mod:`prioritizer.daemon.lock`);
``dlprio explain``/``status`` read it. Per job it keeps the runs (start, end, GPUs) from which
attained service is computed (Tiresias NSDI'19 section 3: 2D service = GPUs × seconds, summed
over all runs), the queue level with its queue-entry time and the reason of the last change,
counters of promotions and preemptions, the last value the daemon gave Slurm (``applied``),
and *preemption intents* written before they are acted on (docs/design.md, "Ledger and daemon";
code rule 3). The service of an open run is counted from Slurm's own ``start_time``, never
from counting cycles; a requeued job keeps its earlier runs, whoever requeued it. Time a run
spends suspended (``scontrol suspend``, state SUSPENDED or STOPPED: the job keeps its
allocation but does not run) is not service: each run keeps the seconds it was suspended
(:class:`Run`), as Slurm's own time used does (squeue(1) ``TimeUsed``, sacct(1)
``Suspended``). Times are epoch seconds; service is GPU·seconds.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from prioritizer.daemon.ledger_values import WAY_OUT, first_bad_value
from prioritizer.paths import SQLITE_SIDES
from slurm_plugin.common.cli import visible

#: Ordered migrations: ``(version, statements)``; a ledger at ``PRAGMA user_version`` v gets
#: every migration above v, each in one transaction with its new version. Version 0 is the
#: ledger of releases without a schema version (before schema versions): migration 1 is that
#: schema with ``IF NOT EXISTS``, so it creates a new file and leaves such a ledger as it is.
#: Append only; never edit a released migration.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE IF NOT EXISTS jobs(
    job_id INTEGER PRIMARY KEY, user TEXT NOT NULL DEFAULT '', account TEXT NOT NULL DEFAULT '',
    partition TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT '', gpus INTEGER NOT NULL DEFAULT 0,
    submit_time REAL, restart_count INTEGER NOT NULL DEFAULT 0,
    queue INTEGER, queue_entry_time REAL, service_base_gpu_s REAL NOT NULL DEFAULT 0,
    promotions INTEGER NOT NULL DEFAULT 0, preemptions INTEGER NOT NULL DEFAULT 0,
    reason TEXT NOT NULL DEFAULT '', reason_time REAL, applied TEXT,
    last_seen REAL, ended_at REAL)""",
        """CREATE TABLE IF NOT EXISTS runs(
    job_id INTEGER NOT NULL, start REAL NOT NULL, end_time REAL, gpus INTEGER NOT NULL,
    last_seen REAL NOT NULL, end_source TEXT, PRIMARY KEY(job_id, start))""",
        """CREATE TABLE IF NOT EXISTS intents(
    id INTEGER PRIMARY KEY AUTOINCREMENT, job_id INTEGER NOT NULL, waiter INTEGER,
    created REAL NOT NULL, signal TEXT, grace_s REAL NOT NULL DEFAULT 0,
    restart_count INTEGER NOT NULL DEFAULT 0, signal_at REAL, deadline REAL,
    requeue_at REAL, done_at REAL, outcome TEXT)""",
    )),
    (2, (   # per-job backoff of refused updates; retention scans by end time
        "ALTER TABLE jobs ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE jobs ADD COLUMN retry_at REAL",
        "ALTER TABLE jobs ADD COLUMN refused TEXT",
        "CREATE INDEX IF NOT EXISTS jobs_ended_at ON jobs(ended_at)",
        "CREATE INDEX IF NOT EXISTS intents_job ON intents(job_id)",
    )),
    (3, (   # indexes on what each cycle looks up (active jobs, open runs, open intents)
        "CREATE INDEX IF NOT EXISTS jobs_active ON jobs(job_id) WHERE ended_at IS NULL",
        "CREATE INDEX IF NOT EXISTS runs_open ON runs(job_id) WHERE end_time IS NULL",
        "CREATE INDEX IF NOT EXISTS intents_open ON intents(id) WHERE done_at IS NULL",
    )),
    (4, (   # an intent whose victim was not running when its first act was due preempted
            # nothing: no longer counted (earlier daemons counted it)
        "UPDATE jobs SET preemptions = MAX(preemptions - (SELECT COUNT(*) FROM intents"
        " WHERE intents.job_id = jobs.job_id AND intents.outcome = 'not running'), 0)",
    )),
    (5, (   # a hetjob's number of components (dlprio explain 40+5); NULL: not seen since
        "ALTER TABLE jobs ADD COLUMN components INTEGER",
    )),
    (6, (   # what holds a waiting job as squeue says it (dlprio explain); NULL: not held
        "ALTER TABLE jobs ADD COLUMN held TEXT",
    )),
    (7, (   # the last cycle that saw a job held (NULL: none), and whether it is a job array's
            # pending record (0 until the daemon sees the job again): the stuck-waiter rule
        "ALTER TABLE jobs ADD COLUMN held_seen REAL",
        "ALTER TABLE jobs ADD COLUMN array_record INTEGER NOT NULL DEFAULT 0",
    )),
    (8, (   # time a run spent suspended, not service: seconds before suspended_at, the
            # start of the suspension going on (NULL: not suspended), and the part of the
            # seconds the daemon saw it STOPPED; older runs count none
        "ALTER TABLE runs ADD COLUMN suspended_s REAL NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN suspended_at REAL",
        "ALTER TABLE runs ADD COLUMN stopped_s REAL NOT NULL DEFAULT 0",
    )),
    (9, (   # the tenant rule that chose an intent's victim, in words (dlprio explain of the
            # victim and of its waiter); NULL: Tiresias's own order, or written before
        "ALTER TABLE intents ADD COLUMN rule TEXT",
    )),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


class LedgerVersionError(sqlite3.DatabaseError):
    """The ledger was written by a newer dlprio (its schema version is above ours)."""


class NotALedger(sqlite3.DatabaseError):
    """The file at ``ledger_path`` is no dlprio ledger: not an SQLite database, or one with
    other tables. Found before anything is written to it. The message names ``ledger_path``
    and its fix; ``path`` and ``what`` (what the file is instead) are there for a command
    given the file by an option (``--ledger``) to word its own line."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what
        super().__init__(f"{visible(path)}: not a dlprio ledger ({what}); give ledger_path "
                         "another file, or move this one away")


class LedgerDamaged(sqlite3.DatabaseError):
    """The ledger's SQLite file is damaged (``SQLITE_CORRUPT``, or a cell of the wrong type or
    range); the message is :func:`damaged`'s line, ``why`` what is damaged (SQLite's error or
    the bad cell), for a command given the file by an option to word its own line."""

    def __init__(self, message: str, why: object = None) -> None:
        self.why = why
        super().__init__(message)


def damaged(path: Path, why: object,
            way_out: str = "restore it from a backup, or move it away to start a new one (the "
                           "attained service it holds is then lost)") -> str:
    """The line for a damaged ledger file: the file, ``why`` (SQLite's ``SQLITE_CORRUPT``
    error, or the cell :func:`~prioritizer.daemon.ledger_values.first_bad_value` found) and the
    way out."""
    return f"{visible(path)}: the ledger is damaged ({why}); {way_out}"


#: The tables every ledger has, from schema version 0 on (a new file has none yet).
LEDGER_TABLES = frozenset({"meta", "jobs", "runs", "intents"})


def check_ledger(conn: sqlite3.Connection, path: Path) -> None:
    """Raise :class:`NotALedger` or :class:`LedgerDamaged` (one line naming ``path`` and the
    fix) unless ``conn`` holds a ledger of any version, or nothing yet."""
    try:
        tables = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")} - {"sqlite_sequence"}
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB":
            raise NotALedger(path, "not an SQLite database") from None
        raise LedgerDamaged(damaged(path, exc), exc) from None
    if tables and not LEDGER_TABLES <= tables:
        raise NotALedger(path, f"an SQLite database with the tables "
                               f"{', '.join(sorted(tables)[:5])}"
                               f"{', ...' if len(tables) > 5 else ''}")


def _file_state(path: Path) -> tuple[int, int, int, bool]:
    """What a writer changes: the file's inode, size and modification time (ns), and whether a
    ``-wal`` is beside it."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns, Path(f"{path}-wal").exists()


def open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only view of the ledger at ``path`` that creates nothing beside it, checked by
    :func:`check_ledger` and :func:`check_values`.

    While a writer has the ledger open (a ``-wal`` beside it: a writer keeps one while it has
    the file open), a plain read-only connection: SQLite's locks keep its reads consistent,
    and the ``-wal`` and ``-shm`` it uses are the writer's. Otherwise an in-memory copy of the
    file read as immutable (https://sqlite.org/uri.html, ``immutable``): a read-only open of a
    WAL database would create the ``-wal`` and ``-shm`` files, and fail in a directory this
    user cannot write. An immutable read takes no lock, so a writer that starts during it could
    show it half-written pages: the copy is kept only when the file's inode, size and
    modification time, and the absence of a ``-wal``, are the same after it as before; else it
    is taken again, and after three changes the locked read is used."""
    for _ in range(3):
        before = _file_state(path)
        if before[3]:
            break
        disk = sqlite3.connect(readonly_uri(path) + "&immutable=1", uri=True)
        copy = sqlite3.connect(":memory:")
        try:
            check_ledger(disk, path)
            disk.backup(copy)
        except sqlite3.DatabaseError:
            copy.close()
            if _file_state(path) != before:
                continue
            raise
        finally:
            disk.close()
        if _file_state(path) == before:
            return _checked(copy, path)
        copy.close()
    conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=10)
    try:
        check_ledger(conn, path)
    except BaseException:
        conn.close()
        raise
    return _checked(conn, path)


def check_values(conn: sqlite3.Connection, path: Path) -> None:
    """Raise :class:`LedgerDamaged` (one line naming ``path``, the table, row and column, and
    the way out) when a cell of the ledger holds a value of the wrong type or out of range
    (:mod:`prioritizer.daemon.ledger_values`)."""
    try:
        why = first_bad_value(conn)
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_CORRUPT":
            raise LedgerDamaged(damaged(path, exc), exc) from None
        raise
    if why is not None:
        raise LedgerDamaged(damaged(path, why, WAY_OUT), why)


def _checked(conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
    """``conn`` once :func:`check_values` passes (closed when it raises)."""
    try:
        check_values(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def check_file(path: Path) -> None:
    """Raise :class:`NotALedger`, :class:`LedgerDamaged` or :class:`LedgerVersionError` unless
    the existing file at ``path`` is a ledger this dlprio may write (or empty). Reads only: a
    writer calls it before it locks, creates or migrates anything."""
    disk = open_read_only(path)
    try:
        check_version(path, schema_version(disk))
    finally:
        disk.close()


def schema_version(conn: sqlite3.Connection) -> int:
    """``PRAGMA user_version`` of an open ledger (0: written before versions existed)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_version(path: Path, version: int) -> None:
    """Raise :class:`LedgerVersionError` (one line naming the fix) for a newer ledger."""
    if version > SCHEMA_VERSION:
        raise LedgerVersionError(
            f"{path}: ledger schema version {version} is newer than this dlprio reads "
            f"({SCHEMA_VERSION}); run the dlprio release that wrote it, or move the file away "
            "to start a new ledger")


def migrate(conn: sqlite3.Connection, path: Path) -> list[int]:
    """Bring the ledger to :data:`SCHEMA_VERSION`, one transaction per migration, never
    dropping a row. Returns the versions applied. Raises :class:`LedgerVersionError`."""
    current = schema_version(conn)
    check_version(path, current)
    applied = []
    for version, statements in MIGRATIONS:
        if version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            for stmt in statements:
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {int(version)}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied.append(version)
    return applied


@dataclass(frozen=True)
class Run:
    """One run of a job: ``start``/``end`` epoch s (``end`` None while open), ``gpus`` GPUs (a shard
    job: its share of one GPU, e.g. 0.5).

    Time suspended (schema version 8; 0 and None in older ledgers): ``suspended_s`` seconds
    the run spent suspended or stopped before ``suspended_at``, the epoch s its current
    suspension began (None: not suspended now); ``stopped_s``, of ``suspended_s``, the seconds
    the daemon saw it STOPPED, which Slurm's time used counts as run. The observe step keeps
    them from Slurm's time used (:func:`prioritizer.daemon.suspension.suspension`), the rebuild
    from sacct's ``Suspended``."""

    job_id: int
    start: float
    end: float | None
    gpus: float
    last_seen: float
    end_source: str | None
    suspended_s: float = 0.0
    suspended_at: float | None = None
    stopped_s: float = 0.0

    def gpu_seconds(self, now: float) -> float:
        """GPU·s of this run, time suspended not counted; an open run counts up to ``now``."""
        return self.gpus * self.seconds(now)

    def seconds(self, now: float) -> float:
        """Seconds this run ran (open run: up to ``now``), time suspended not counted, never
        negative."""
        end = self.end if self.end is not None else now
        return max(end - self.start - self.suspended(now), 0.0)

    def suspended(self, now: float) -> float:
        """Seconds this run spent suspended (open run: up to ``now``; a run that ended while
        suspended: up to its end)."""
        if self.suspended_at is None:
            return self.suspended_s
        end = self.end if self.end is not None else now
        return self.suspended_s + max(end - self.suspended_at, 0.0)


@dataclass(frozen=True)
class JobRow:
    """The ledger's row of one job (see the ``jobs`` table); ``queue`` None until decided.
    ``refusals``/``retry_at``/``refused``: consecutive refused updates, when the next may be
    sent (epoch s) and Slurm's last refusal text (schema version 2; defaults when older).
    ``components``: the job's hetjob components, 1 for a plain job (schema version 5; None
    when older, or not seen since). ``held``: what holds it as squeue said when the daemon last
    saw it, its held state word or, pending, the reason of a hold (``JobHeldAdmin``, ``job
    requeued in held state``; :attr:`prioritizer.daemon.observe.Unit.hold`); None when not held
    (schema version 6; None when older). ``held_seen``: the last cycle that saw it held (epoch
    s; None: none did), ``array_record``: 1 for a job array's pending record
    (:attr:`prioritizer.daemon.observe.Unit.array_record`), else 0 (schema version 7; None and
    0 when older, and 0 until the daemon sees the job again)."""

    job_id: int
    user: str
    account: str
    partition: str
    state: str
    gpus: float
    submit_time: float | None
    restart_count: int
    queue: int | None
    queue_entry_time: float | None
    service_base_gpu_s: float
    promotions: int
    preemptions: int
    reason: str
    reason_time: float | None
    applied: str | None
    last_seen: float | None
    ended_at: float | None
    refusals: int = 0
    retry_at: float | None = None
    refused: str | None = None
    components: int | None = None
    held: str | None = None
    held_seen: float | None = None
    array_record: int = 0


#: Outcomes of intents that preempted their victim (requeued, or signalled to checkpoint and
#: ended in its grace time); every other outcome (refused, ended before the signal or the
#: requeue, not running) preempted nothing and is not counted in ``jobs.preemptions``.
PREEMPTED_OUTCOMES = frozenset({"requeued", "ended in grace"})


@dataclass(frozen=True)
class Intent:
    """A preemption intent: written before acting, finished exactly once.

    Steps: created → (``signal_at`` set before the signal is sent, ``deadline`` = signal +
    grace) → ``requeue_at`` set before ``scontrol requeue`` → ``done_at`` + ``outcome``.
    ``restart_count`` is the job's Slurm restart count when the intent was written, so a
    recovering daemon can tell whether a requeue it may have sent took effect.
    """

    id: int
    job_id: int
    waiter: int | None
    created: float
    signal: str | None
    grace_s: float
    restart_count: int
    signal_at: float | None
    deadline: float | None
    requeue_at: float | None
    done_at: float | None
    outcome: str | None
    rule: str | None = None
    """the tenant rule that chose the victim (``reclaim: nlp at 0 of 16 guaranteed GPUs takes
    back from vision at 24 of 16``); None: Tiresias's own order"""


def readonly_uri(path: str | os.PathLike[str]) -> str:
    """The SQLite URI that opens ``path`` read-only: ``file://`` + the absolute path with every
    byte but letters, digits and ``/-._~`` percent-encoded, then ``?mode=ro``.

    A path is not a URI: SQLite (https://sqlite.org/uri.html) ends the file name at ``?``
    (query) or ``#`` (fragment) and decodes ``%XX``, so ``file:/d?x/l.sqlite?mode=ro`` would open
    ``/d`` read-write, creating it. Encoding the file-system bytes (``os.fsencode``) keeps a name
    that is not UTF-8 too; an absolute path makes a leading ``//`` an empty authority."""
    return "file://" + urllib.parse.quote(os.fsencode(os.path.abspath(path)), safe="/") + "?mode=ro"


def check_readable(path: Path) -> None:
    """Raise :class:`PermissionError` (one line naming ``path`` and the fix) when this user may
    not read the ledger at ``path``: the daemon writes it 0600, and SQLite would only say
    "unable to open database file"."""
    if not os.access(path, os.R_OK):
        raise PermissionError(
            f"{visible(path)}: this user may not read the ledger (mode 0600, the daemon's "
            "user's): run dlprio status, explain and once --dry-run as that user or root; "
            "dlqueue shows the queue to every user")


class Ledger:
    """One open ledger file. Not thread-safe; one writer process (the lock holder)."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False,
                 scratch: bool = False) -> None:
        """Open (create when missing, mode 0600) the ledger at ``path``.

        A writable open upgrades an older ledger in place (:func:`migrate`; ``migrated`` lists
        the versions applied); a read-only open reads any version up to ours. ``scratch``: a
        writable copy in memory of the ledger at ``path`` (read once, read-only), or an empty
        ledger when there is none; nothing is ever written to ``path`` or its directory
        (``dlprio once --dry-run``).

        Raises:
            LedgerVersionError: the ledger is newer than this dlprio (nothing is changed).
            NotALedger: the file is not a ledger (nothing is changed).
            LedgerDamaged: the ledger's file is damaged.
            OSError / sqlite3.Error: the file cannot be created or read.
        """
        self.path = Path(path)
        self._active: tuple[int, list[JobRow]] | None = None
        self._fields = _JOB_FIELDS   # the JobRow columns this ledger's jobs table has
        self.migrated: list[int] = []
        if scratch:
            self.conn = sqlite3.connect(":memory:", isolation_level=None)
            try:
                if self.path.exists():
                    check_readable(self.path)
                    disk = open_read_only(self.path)
                    try:
                        check_version(self.path, schema_version(disk))
                        disk.backup(self.conn)
                    finally:
                        disk.close()
                self.migrated = migrate(self.conn, self.path)
            except BaseException:
                self.conn.close()
                raise
            self.conn.isolation_level = "DEFERRED"   # BEGIN DEFERRED, what "" means
        elif readonly:
            if not self.path.exists():
                raise FileNotFoundError(f"{visible(self.path)}: no ledger (has the daemon run?)")
            check_readable(self.path)
            self.conn = open_read_only(self.path)
            try:
                check_version(self.path, schema_version(self.conn))
            except LedgerVersionError:
                self.conn.close()
                raise
            if not self.conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type='table' AND name='intents'").fetchone():
                self.conn.close()
                raise FileNotFoundError(f"{visible(self.path)}: not a ledger yet (has the daemon run?)")
            # an older ledger read as it is (never migrated read-only): its missing columns
            # take JobRow's defaults
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(jobs)")}
            self._fields = tuple(f for f in _JOB_FIELDS if f in have)
        else:
            if self.path.exists():   # checked before anything is written to it
                check_file(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            os.close(fd)
            os.chmod(self.path, 0o600)
            self.conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            try:
                check_version(self.path, schema_version(self.conn))
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=FULL")
                self.migrated = migrate(self.conn, self.path)
            except BaseException:
                self.conn.close()
                raise
            self.conn.isolation_level = "DEFERRED"   # back to sqlite3's implicit transactions
            for side in SQLITE_SIDES:
                side_path = Path(str(self.path) + side)
                if side_path.exists():
                    os.chmod(side_path, 0o600)
        self.conn.row_factory = sqlite3.Row

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self.close()
        if (isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, LedgerDamaged)
                and getattr(exc, "sqlite_errorname", "") == "SQLITE_CORRUPT"):
            raise LedgerDamaged(damaged(self.path, exc), exc) from exc

    # ------------------------------------------------------------------ meta
    def meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row["value"] if row else default

    def set_meta(self, key: str, value: str) -> None:
        with self.conn:
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", (key, value))

    def next_cycle(self) -> int:
        """Increment and return the persistent cycle counter (1 for the first cycle)."""
        cycle = int(self.meta("cycle", "0") or 0) + 1
        self.set_meta("cycle", str(cycle))
        return cycle

    def note_observed(self, now: float) -> None:
        """Record the time of this cycle's read of Slurm (no commit: inside the cycle's
        :meth:`transaction`). Views say how old the ledger is from it."""
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('observed_at', ?)",
                          (repr(float(now)),))

    def observed_at(self) -> float | None:
        """Epoch s of the daemon's last read of Slurm, None before the first one."""
        raw = self.meta("observed_at")
        return float(raw) if raw else None

    def prune(self, before: float) -> int:
        """Delete jobs that ended before ``before`` (epoch s) with their runs and finished
        intents (retention; a job with an open intent is kept). Returns the jobs deleted."""
        with self.conn:
            ids = [r[0] for r in self.conn.execute(
                "SELECT job_id FROM jobs WHERE ended_at IS NOT NULL AND ended_at < ? AND job_id"
                " NOT IN (SELECT job_id FROM intents WHERE done_at IS NULL)", (before,))]
            for table in ("runs", "intents", "jobs"):
                self.conn.executemany(f"DELETE FROM {table} WHERE job_id=?", [(j,) for j in ids])
        return len(ids)

    # ------------------------------------------------------------------ jobs
    def upsert_job(self, job_id: int, *, user: str, account: str, partition: str, state: str,
                   gpus: float, submit_time: float | None, restart_count: int, now: float,
                   components: int = 1, held: str | None = None,
                   array_record: bool = False) -> None:
        """Record what Slurm shows of a job now (no commit; call inside :meth:`transaction`)."""
        self.conn.execute(
            _UPSERT_JOB,
            (job_id, user, account, partition, state, gpus, submit_time, restart_count,
             components, held, int(array_record), now))

    def mark_ended(self, job_id: int, state: str, at: float) -> None:
        """The job left Slurm's active states (or squeue) at ``at``."""
        self.conn.execute("UPDATE jobs SET state=?, ended_at=? WHERE job_id=?", (state, at, job_id))

    def job(self, job_id: int) -> JobRow | None:
        row = self.conn.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        return JobRow(**dict(row)) if row else None

    def jobs(self, *, active_only: bool = False) -> list[JobRow]:
        """Every job the ledger knows (``active_only``: not ended), by id.

        The active rows are remembered until this connection next changes a row
        (``total_changes``; never a read made inside an open transaction): one cycle asks for
        them several times with no write between, and at 10,000 jobs each read costs tens of
        ms. Rows are frozen, so sharing them is safe.
        """
        if not active_only:
            return self._job_rows(f"SELECT {', '.join(self._fields)} FROM jobs ORDER BY job_id", ())
        changes = self.conn.total_changes
        if self._active is None or self._active[0] != changes or self.conn.in_transaction:
            rows = self._job_rows(f"SELECT {', '.join(self._fields)} FROM jobs WHERE ended_at IS NULL"
                                  " ORDER BY job_id", ())
            # inside an open transaction the rows may yet be rolled back: not remembered
            self._active = None if self.conn.in_transaction else (changes, rows)
            return rows
        return list(self._active[1])

    def _job_rows(self, sql: str, args: tuple) -> list[JobRow]:
        cur = self.conn.cursor()
        cur.row_factory = None   # plain tuples in JobRow's field order: no per-row dict
        if self._fields is not _JOB_FIELDS:
            return [JobRow(**dict(zip(self._fields, r))) for r in cur.execute(sql, args)]
        return [_job_row(r) for r in cur.execute(sql, args)]

    def set_queue(self, job_id: int, queue: int, entry: float, base_gpu_s: float,
                  reason: str | None, now: float, promoted: bool) -> None:
        """Persist a decision's queue state; ``reason`` None keeps the last reason."""
        self.conn.execute(
            "UPDATE jobs SET queue=?, queue_entry_time=?, service_base_gpu_s=?,"
            " promotions=promotions+?, reason=COALESCE(?, reason),"
            " reason_time=CASE WHEN ? IS NULL THEN reason_time ELSE ? END WHERE job_id=?",
            (queue, entry, base_gpu_s, int(promoted), reason, reason, now, job_id))

    def set_applied(self, job_ids: Iterable[int], value: str | None) -> None:
        """Remember the value (SiteFactor, priority or partition) last given to Slurm."""
        self.conn.executemany("UPDATE jobs SET applied=? WHERE job_id=?",
                              [(value, j) for j in job_ids])

    def note_refused(self, refused: Iterable[tuple[int, str]], now: float, base_s: float,
                     cap_s: float) -> None:
        """Slurm refused an update of each ``(job, Slurm's text)``: count it and set the next
        try to ``now + min(cap_s, base_s × 2^(refusals so far))`` (no commit)."""
        self.conn.executemany(
            "UPDATE jobs SET refused=?, retry_at=? + MIN(?, ? * (1 << MIN(refusals, 20))),"
            " refusals=refusals+1 WHERE job_id=?",
            [(text, now, cap_s, base_s, job_id) for job_id, text in refused])

    def clear_refused(self, job_ids: Iterable[int]) -> None:
        """Slurm accepted an update of these jobs: their backoff ends (no commit)."""
        self.conn.executemany(
            "UPDATE jobs SET refusals=0, retry_at=NULL, refused=NULL WHERE job_id=? AND refusals>0",
            [(j,) for j in job_ids])

    def backing_off(self, now: float) -> set[int]:
        """Active jobs whose next update try is after ``now`` (refused before)."""
        return {r[0] for r in self.conn.execute(
            "SELECT job_id FROM jobs WHERE ended_at IS NULL AND retry_at > ?", (now,))}

    # ------------------------------------------------------------------ runs
    def runs(self, job_id: int) -> list[Run]:
        """The job's runs, oldest first."""
        return [_run(r) for r in self.conn.execute(
            "SELECT * FROM runs WHERE job_id=? ORDER BY start", (job_id,))]

    def all_runs(self) -> dict[int, list[Run]]:
        """Runs of every job, oldest first (one query; used once per cycle)."""
        out: dict[int, list[Run]] = {}
        for r in self.conn.execute("SELECT * FROM runs ORDER BY job_id, start"):
            out.setdefault(r["job_id"], []).append(_run(r))
        return out

    def open_runs(self) -> dict[int, Run]:
        """The open run of each job that has one."""
        return {r["job_id"]: _run(r) for r in
                self.conn.execute("SELECT * FROM runs WHERE end_time IS NULL")}

    def start_run(self, job_id: int, start: float, gpus: float, now: float) -> None:
        """Open a run at Slurm's ``start`` (idempotent: same start = same run)."""
        self.conn.execute(_START_RUN, (job_id, start, gpus, now))

    def close_run(self, job_id: int, start: float, end: float, source: str,
                  suspended_s: float | None = None) -> None:
        """Close the run at ``end`` (clamped to ``start``); ``source`` says where ``end``
        came from (``slurm`` end_time, ``sacct``, ``requeue``, ``last_seen``).
        ``suspended_s``: the seconds Slurm says the run spent suspended in all (None: keep
        what the ledger has)."""
        self.conn.execute(
            "UPDATE runs SET end_time=MAX(?, start), end_source=?,"
            " suspended_s=COALESCE(?, suspended_s),"
            " suspended_at=CASE WHEN ? IS NULL THEN suspended_at END"
            " WHERE job_id=? AND start=? AND end_time IS NULL",
            (end, source, suspended_s, suspended_s, job_id, start))

    def set_suspended(self, rows: Iterable[tuple[int, float, float, float | None, float]]
                      ) -> None:
        """Set the time suspended of open runs: ``(job_id, start, suspended_s, suspended_at,
        stopped_s)`` each (see :class:`Run`; no commit)."""
        self.conn.executemany(
            "UPDATE runs SET suspended_s=?, suspended_at=?, stopped_s=? WHERE job_id=?"
            " AND start=? AND end_time IS NULL",
            [(s, at, stopped, j, start) for j, start, s, at, stopped in rows])

    def service(self, job_id: int, now: float) -> tuple[float, float]:
        """(attained GPU·s, attained s) of the job at ``now``: sum over its runs, time
        suspended not counted."""
        runs = self.runs(job_id)
        return (sum(r.gpu_seconds(now) for r in runs), sum(r.seconds(now) for r in runs))

    # ------------------------------------------------------------------ intents
    def add_intent(self, job_id: int, waiter: int | None, signal: str | None, grace_s: float,
                   restart_count: int, now: float, rule: str | None = None) -> int:
        """Write (and commit) a preemption intent (``rule``: :attr:`Intent.rule`); count the
        preemption. Returns its id."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO intents(job_id, waiter, created, signal, grace_s, restart_count, rule)"
                " VALUES(?,?,?,?,?,?,?)",
                (job_id, waiter, now, signal, grace_s, restart_count, rule))
            self.conn.execute("UPDATE jobs SET preemptions=preemptions+1 WHERE job_id=?", (job_id,))
        return int(cur.lastrowid or 0)

    def open_intents(self) -> list[Intent]:
        """Intents not finished yet, oldest first."""
        return [Intent(**dict(r)) for r in self.conn.execute(
            "SELECT * FROM intents WHERE done_at IS NULL ORDER BY id")]

    def intents(self, job_id: int) -> list[Intent]:
        return [Intent(**dict(r)) for r in self.conn.execute(
            "SELECT * FROM intents WHERE job_id=? ORDER BY id", (job_id,))]

    def intents_for(self, waiter: int) -> list[Intent]:
        """The intents made for ``waiter`` (its victims), oldest first."""
        return [Intent(**dict(r)) for r in self.conn.execute(
            "SELECT * FROM intents WHERE waiter=? ORDER BY id", (waiter,))]

    def mark_signal(self, intent_id: int, at: float | None, deadline: float | None) -> None:
        """Commit ``signal_at``/``deadline`` (None, None: the signal did not go out)."""
        with self.conn:
            self.conn.execute("UPDATE intents SET signal_at=?, deadline=? WHERE id=?",
                              (at, deadline, intent_id))

    def mark_requeue(self, intent_id: int, at: float | None) -> None:
        """Commit ``requeue_at`` (before the requeue call; None: it was refused)."""
        with self.conn:
            self.conn.execute("UPDATE intents SET requeue_at=? WHERE id=?", (at, intent_id))

    def finish_intent(self, intent_id: int, at: float, outcome: str,
                      uncount: bool = False) -> None:
        """Commit the intent as done with ``outcome`` (``requeued``, ``ended in grace``...).
        ``uncount``: nothing was preempted (Slurm refused, the job had ended or was not
        running): the job's preemption counter, raised by :meth:`add_intent`, goes back down
        (every outcome but :data:`PREEMPTED_OUTCOMES`)."""
        with self.conn:
            cur = self.conn.execute(
                "UPDATE intents SET done_at=?, outcome=? WHERE id=? AND done_at IS NULL",
                (at, outcome, intent_id))
            if uncount and cur.rowcount:
                self.conn.execute(
                    "UPDATE jobs SET preemptions=MAX(preemptions-1, 0) WHERE job_id="
                    "(SELECT job_id FROM intents WHERE id=?)", (intent_id,))

    def refused_victims(self) -> dict[int, int]:
        """{job id: restart count} of jobs whose signal or requeue Slurm refused during the run
        with that restart count: they are not chosen as victims again in that run."""
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT job_id, MAX(restart_count) FROM intents WHERE outcome LIKE 'signal refused:%'"
            " OR outcome LIKE 'requeue refused:%' GROUP BY job_id")}

    def requeued_for(self) -> dict[int, float]:
        """{waiter job id: epoch s} when the last preemption made for it requeued its victim:
        the intent's ``requeue_at`` (written as the requeue went out; its ``done_at`` is
        later when a restarted daemon finished the intent), else its ``done_at``."""
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT waiter, MAX(COALESCE(requeue_at, done_at)) FROM intents"
            " WHERE outcome = 'requeued' AND waiter IS NOT NULL GROUP BY waiter")}

    def completing_victims(self) -> dict[int, int]:
        """{job id: restart count} of victims whose checkpoint signal Slurm refused because the
        job was already completing (intent outcome ``ended before signal: ...``): during that
        run of it, its GPUs are about to be freed (``JobView.releasing``)."""
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT job_id, MAX(restart_count) FROM intents"
            " WHERE outcome LIKE 'ended before signal:%' GROUP BY job_id")}

    # ------------------------------------------------------------------ cycle write path (bulk)
    # One observe pass per cycle writes through these, inside ONE transaction, with the same
    # prepared statements for every job (executemany): no per-job query.
    def jobs_by_id(self, job_ids: Iterable[int]) -> dict[int, JobRow]:
        """Rows of these jobs (ended ones too), in chunks of 500 ids per query."""
        ids = list(job_ids)
        out: dict[int, JobRow] = {}
        for k in range(0, len(ids), 500):
            chunk = ids[k:k + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._job_rows(f"SELECT {', '.join(self._fields)} FROM jobs WHERE job_id IN ({marks})",
                                      tuple(chunk)):
                out[row.job_id] = row
        return out

    def upsert_jobs(self, rows: Iterable[tuple]) -> None:
        """:meth:`upsert_job` for many jobs: tuples ``(job_id, user, account, partition, state,
        gpus, submit_time, restart_count, components, held, array_record, now)`` (no commit)."""
        self.conn.executemany(_UPSERT_JOB, rows)

    def touch_active(self, now: float) -> None:
        """Set ``last_seen`` of every job not ended to ``now``, and ``held_seen`` of those held
        (one statement; observe calls it after its upserts and after ending the jobs it did
        not see)."""
        self.conn.execute("UPDATE jobs SET last_seen=:now, held_seen=CASE WHEN held IS NOT NULL"
                          " THEN :now ELSE held_seen END WHERE ended_at IS NULL", {"now": now})

    def start_runs(self, runs: Iterable[tuple[int, float, float, float]]) -> None:
        """:meth:`start_run` for many ``(job_id, start, gpus, now)`` (no commit)."""
        self.conn.executemany(_START_RUN, runs)

    def active_runs(self) -> dict[int, list[Run]]:
        """Runs of the jobs not ended, oldest first (one query; the cycle's snapshot needs no
        finished job's history)."""
        out: dict[int, list[Run]] = {}
        for r in self.conn.execute(
                "SELECT runs.* FROM runs JOIN jobs ON jobs.job_id = runs.job_id"
                " WHERE jobs.ended_at IS NULL ORDER BY runs.job_id, runs.start"):
            out.setdefault(r["job_id"], []).append(_run(r))
        return out

    # ------------------------------------------------------------------ transactions
    def transaction(self) -> sqlite3.Connection:
        """``with ledger.transaction():`` commits the block at once (or rolls it back)."""
        return self.conn


_JOB_FIELDS = tuple(f.name for f in fields(JobRow))


def _job_row(values: tuple) -> JobRow:
    """A :class:`JobRow` from a row of the :data:`_JOB_FIELDS` columns, without the frozen dataclass's
    per-field ``object.__setattr__`` (3× faster at 10,000 rows a cycle; JobRow has no
    ``__post_init__``, so the result equals ``JobRow(*values)``)."""
    row = object.__new__(JobRow)
    row.__dict__.update(zip(_JOB_FIELDS, values))
    return row
_UPSERT_JOB = (
    "INSERT INTO jobs(job_id, user, account, partition, state, gpus, submit_time,"
    " restart_count, components, held, array_record, last_seen)"
    " VALUES(?,?,?,?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT(job_id) DO UPDATE SET user=excluded.user, account=excluded.account,"
    " partition=excluded.partition, state=excluded.state, gpus=excluded.gpus,"
    " submit_time=excluded.submit_time, restart_count=excluded.restart_count,"
    " components=excluded.components, held=excluded.held,"
    " array_record=excluded.array_record, last_seen=excluded.last_seen,"
    " ended_at=NULL")
_START_RUN = ("INSERT INTO runs(job_id, start, gpus, last_seen) VALUES(?,?,?,?)"
              " ON CONFLICT(job_id, start) DO UPDATE SET last_seen=excluded.last_seen")


def _run(r: sqlite3.Row) -> Run:
    try:
        suspended = r["suspended_s"], r["suspended_at"], r["stopped_s"]
    except IndexError:   # an older ledger read as it is (schema version < 8): none counted
        suspended = 0.0, None, 0.0
    return Run(job_id=r["job_id"], start=r["start"], end=r["end_time"], gpus=r["gpus"],
               last_seen=r["last_seen"], end_source=r["end_source"], suspended_s=suspended[0],
               suspended_at=suspended[1], stopped_s=suspended[2])
