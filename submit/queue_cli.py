"""``dlqueue``: the thin shell around :mod:`submit.queue_view` (squeue-style view of GPU jobs).

It reads Slurm only through :meth:`slurm_plugin.slurm.client.SlurmClient.jobs` (``squeue --json``;
with ``-p``, once, :meth:`~slurm_plugin.slurm.client.SlurmClient.show_partitions` too)
and the daemon's public snapshot through :func:`prioritizer.daemon.snapshot.read_snapshot`
(never the private ledger), builds rows and a table with the pure functions of
:mod:`submit.queue_view`, and prints them once (plain text measured in display cells, fast at
10,000 jobs), as JSON (``--json``), or with ``--watch``: on a terminal refreshed in place with
:class:`rich.live.Live` (the rows that fit the screen), into a file or pipe only the rows that
changed. Every refresh is ONE ``squeue`` call whatever the filters (they are applied here), every
``--interval`` seconds (default 5, at least 1): a cluster of users each watching must not load
slurmctld. Snapshot path: ``--snapshot PATH``; else ``snapshot_path``
from the daemon config ``/etc/dlprio/dlprio.yaml`` (top level or its ``daemon:`` section) when
that file exists; else :data:`prioritizer.daemon.snapshot.DEFAULT_PATH`.

A snapshot whose ``cluster`` differs from this cluster's ClusterName (the ``slurm.conf`` of
``SLURM_CONF``) belongs to another cluster on the host and is ignored with a note. One older
than a few of the daemon's cycles (``snapshot.stale_after_s``) gets a note saying since when no
daemon updated it; when none of the jobs shown is in it, it is not used (:func:`stale_note`).

Exit codes (:class:`~slurm_plugin.common.exits.Exit`, README.md's table): 0 success (also without a daemon snapshot: the view says so); 2 bad arguments
(an unknown ``-u`` user or ``-p`` partition, an empty list item, a number out of range or not finite, a
``--snapshot`` that is not a regular file or is over 128 MiB included);
3 Slurm unreachable; 4 Slurm refused the request (its message is printed); 5 none of the jobs
``-j`` names is in the table (a note per job says why).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import getpass
import io
import json
import os
import pwd
import re
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from prioritizer import numbers
from slurm_plugin.common.exits import CliError
from prioritizer.paths import SYSTEM_CONFIG, beside, present
from prioritizer.daemon import forecast_text
from prioritizer.daemon import snapshot as public_snapshot
from prioritizer.daemon.snapshot import PublicSnapshot, SnapshotError
from slurm_plugin.common.cli import ArgumentParser, quiet_on_closed_stdout
from slurm_plugin.common.exits import Exit, epilog
from slurm_plugin.slurm.client import SlurmClient, SlurmError, SlurmUnreachable
from slurm_plugin.slurm.records import (ACTIVE_STATES, HOLDING_STATES, MAX_ARRAY_TASK_ID, MAX_JOB_ID,
                                        WAITING_STATES, array_task_in, decimal_at_most,
                                        parse_array_tasks)
from submit import queue_view as qv
from submit.ending import without_final_gc

if TYPE_CHECKING:  # rich's console loads for --watch only, yaml when the daemon config exists
    from rich.console import Console, Group

DAEMON_CONFIG = SYSTEM_CONFIG
WATCH_INTERVAL_S = 5.0
MIN_INTERVAL_S, MAX_INTERVAL_S = 1.0, 86400.0   # ≥ 1 s: each refresh is one squeue call
MAX_ITERATIONS = 10**9
MAX_SNAPSHOT_BYTES = public_snapshot.SNAPSHOT_MAX_BYTES   # the reader's own bound
_JOB_SELECTOR = re.compile(r"([1-9][0-9]*)(?:([+_])([0-9]+))?")
_FOLDED_ARRAY = re.compile(r"([0-9]+)_\[(.*)\]")   # an array's pending elements: 30_[5-9]


def default_snapshot_path(config_path: str = DAEMON_CONFIG) -> tuple[str, str]:
    """The snapshot path and a note ("" or why the config was not used).

    Reads ``snapshot_path`` (top level, or under ``daemon:``) of ``config_path`` when the file
    exists (a relative one from the config file's directory, as the daemon reads it); falls
    back to :data:`public_snapshot.DEFAULT_PATH` with a note when it is unreadable.
    """
    cfg = Path(config_path)
    if not present(cfg):   # a link to nothing is there: its read fails into the note below
        return public_snapshot.DEFAULT_PATH, ""
    import yaml

    try:
        data = yaml.safe_load(cfg.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        return public_snapshot.DEFAULT_PATH, f"{config_path} unreadable ({exc.__class__.__name__})"
    if isinstance(data, dict):
        for section in (data, data.get("daemon")):
            if isinstance(section, dict) and isinstance(section.get("snapshot_path"), str):
                return beside(config_path, section["snapshot_path"]), ""
    return public_snapshot.DEFAULT_PATH, ""


def snapshot_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be a snapshot without reading it (a device, FIFO or directory would
    hang or fill memory; a file over :data:`MAX_SNAPSHOT_BYTES` likewise), or ``None`` (also
    when it does not exist: that is "no daemon")."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return f"cannot stat ({exc.__class__.__name__})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size > MAX_SNAPSHOT_BYTES:
        return f"{st.st_size} bytes, over the {MAX_SNAPSHOT_BYTES // 2**20} MiB limit"
    return None


def load_snapshot(path: str, now: float, cluster: str | None = None
                  ) -> tuple[PublicSnapshot | None, str, object]:
    """Read the snapshot; return it (or ``None``), the note the view prints about it ("" for
    none) and the note's state key: equal keys mean the same condition (a stale snapshot's
    growing age is not a new condition), so ``--watch`` into a pipe prints a note only when it
    appears or its condition changes. A snapshot whose ``cluster`` is not ``cluster`` (this
    cluster's ClusterName) belongs to another cluster on the host and is ignored."""
    problem = snapshot_file_problem(path)
    if problem is not None:
        note = (f"daemon snapshot {path} unreadable ({problem}): "
                "queue and attained service are not shown")
        return None, note, note
    try:
        snap = public_snapshot.read_snapshot(path)
    except (SnapshotError, OSError, ValueError, AttributeError) as exc:
        note = (f"daemon snapshot {path} unreadable ({exc}): "
                "queue and attained service are not shown")
        return None, note, note
    if snap is None:
        note = (f"daemon snapshot not found at {path} (is dlprio running?): "
                "queue and attained service are not shown")
        return None, note, note
    if cluster is not None and snap.cluster is not None and snap.cluster != cluster:
        note = (f"daemon snapshot {path} is for cluster {snap.cluster!r}, not {cluster!r}: "
                "ignored (queue and attained service are not shown)")
        return None, note, note
    if not public_snapshot.is_current(snap.generated_at, now,
                                      public_snapshot.stale_after_s(snap.interval_s)):
        return snap, stale_note(snap, now, used=True), ("stale", snap.cycle)
    return snap, "", None


def stale_note(snap: PublicSnapshot, now: float, used: bool) -> str:
    """The note on a stale snapshot (``snapshot.stale_after_s``): what is known is when a
    daemon cycle last wrote it. ``used``: some job shown is in it (its QUEUE and ATTAINED are
    shown, from then); else the columns are left out, since none of the shown jobs has a
    value there."""
    written = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(snap.generated_at))
    if public_snapshot.ahead(snap.generated_at, now):
        since = (f"the dlprio daemon's snapshot was written at {written}, "
                 f"{qv.format_duration(snap.generated_at - now)} ahead of this host's clock "
                 f"(cycle {snap.cycle}; the clock was set back since, or runs behind the "
                 "daemon's), so its age is not known")
    else:
        since = (f"no dlprio daemon has updated its snapshot since {written} "
                 f"({qv.format_duration(now - snap.generated_at)} ago, cycle {snap.cycle})")
    if used:
        return since + ": QUEUE and ATTAINED are from then, blank for jobs it had not seen"
    return since + " and none of these jobs is in it: queue and attained service are not shown"


def _split_ids(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (``30_[5-9,12],31`` is two ids)."""
    ids, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            ids.append(text[start:i])
            start = i + 1
    return [*ids, text[start:]]


def _folded_tasks(selector: str) -> tuple[int, list[range]] | None:
    """``(30, ranges)`` for a folded id ``30_[5-9]``; None for another form or bad elements."""
    m = _FOLDED_ARRAY.fullmatch(selector)
    if m is None or not _element_ok(m.group(1)):
        return None
    try:
        return int(m.group(1)), parse_array_tasks(m.group(2))
    except ValueError:
        return None


def _element_ok(selector: str) -> bool:
    """``12``, ``12+1`` or ``12_3`` with numbers Slurm can give: a job id or hetjob offset of
    at most :data:`MAX_JOB_ID`, an element index of at most ``MAX_ARRAY_TASK_ID``."""
    m = _JOB_SELECTOR.fullmatch(selector)
    return m is not None and decimal_at_most(m.group(1), MAX_JOB_ID) and (
        m.group(2) is None
        or decimal_at_most(m.group(3), MAX_ARRAY_TASK_ID if m.group(2) == "_" else MAX_JOB_ID))


def _id_list(text: str) -> list[str]:
    """Job ids as dlqueue prints them: ``12``, ``12+1`` (hetjob component), ``12_3`` (array
    element), ``12_[1-5,9%2]`` (an array's pending elements as squeue folds them); separated by
    commas outside brackets, none empty; leading zeros dropped as squeue does (``012_03`` is
    ``12_3``). Raises CliError (one line, exit 2) naming a bad one as given."""
    given = _split_ids(text)
    # numbers as squeue reads them (strtol): 012_03 is 12_3
    ids = [re.sub(r"(?<![0-9])0+(?=[0-9])", "", x) for x in given]   # text: no int() limit
    bad = [x for x, c in zip(given, ids) if not (_element_ok(c) or _folded_tasks(c))]
    if bad:
        raise CliError(
            f"-j/--jobs: {_shown(bad[0])} is not a job id (ids are 12, 12+1 for a hetjob "
            "component, 12_3 for an array element or 12_[1-5] for its pending elements, "
            "comma-separated: -j 12,15+1)")
    return ids


def _lead(selector: str) -> int:
    """The job or array id a selector starts with (``30`` of ``30_[5-9]``)."""
    return int(re.match(r"[0-9]+", selector).group())   # type: ignore[union-attr]


def _job_filter(selectors: list[str]) -> tuple[list[int], Callable[[str], bool] | None]:
    """The ids to ask :meth:`SlurmClient.jobs` for (leaders / array ids) and a test of a row's
    JOBID for the ``+``/``_`` selectors (``None`` when every selector is a plain id). An array
    element ``30_6`` also selects the row of the array's pending elements when they hold it:
    squeue folds them into one row, ``30_[5-9]`` (:func:`array_task_in`). A folded id
    ``30_[5-9]`` selects the elements it names, each like ``30_6``."""
    plain = {int(s) for s in selectors if s.isdigit()}
    compound = {s for s in selectors if not s.isdigit()}
    base = sorted(plain | {_lead(s) for s in compound})
    if not compound:
        return base, None
    elements: dict[int, list[range]] = {}
    for s in compound:
        m = _JOB_SELECTOR.fullmatch(s)
        if m is not None and m.group(2) == "_":
            task = int(m.group(3))
            elements.setdefault(int(m.group(1)), []).append(range(task, task + 1))
        elif (folded := _folded_tasks(s)) is not None:
            elements.setdefault(folded[0], []).extend(folded[1])

    def keep(display_id: str) -> bool:
        if display_id in compound:
            return True
        m = _JOB_SELECTOR.fullmatch(display_id)
        if m is not None and m.group(2) == "_":
            return any(int(m.group(3)) in r for r in elements.get(int(m.group(1)), ()))
        folded = _FOLDED_ARRAY.fullmatch(display_id)
        if folded is None:
            return False
        wanted = elements.get(int(folded.group(1)), [])
        try:
            pending = parse_array_tasks(folded.group(2))
        except ValueError:   # squeue wrote something else: test each wanted element
            return any(array_task_in(folded.group(2), t) for r in wanted for t in r)
        return any(_overlap(a, b) for a in wanted for b in pending)
    return base, keep


def _overlap(a: range, b: range) -> bool:
    """Whether two ranges share an element (walks the shorter one)."""
    short, other = (a, b) if len(a) <= len(b) else (b, a)
    return any(t in other for t in short)


def _states(text: str) -> frozenset[str] | None:
    try:
        return qv.parse_states(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _names(text: str) -> list[str]:
    """A comma-separated list of names, none empty (``-u ''`` or ``-u a,,b`` is a mistake, not
    "everybody")."""
    names = text.split(",")
    if any(not n.strip() for n in names):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)}: empty name in the list (comma-separated names, e.g. alice,bob)")
    return names


def _shown(text: str) -> str:
    """``text`` as an error line echoes it: quoted, escaped and cut past 80 characters
    (:func:`slurm_plugin.common.wording.shown`, as ``dlprio explain`` echoes a JOBID), so a
    5,000-digit id is one short line. Imported here, on the error path only: the validation
    module (with msgspec) would add about 30 ms to every dlqueue start."""
    from slurm_plugin.common.wording import shown
    return shown(text)


def _shown_list(names: list[str], most: int = 5) -> str:
    """The first ``most`` of ``names``, each as :func:`_shown` echoes it, then ``and N more``."""
    more = f" and {len(names) - most:,} more" if len(names) > most else ""
    return ", ".join(map(_shown, names[:most])) + more


def _user_name(name: str) -> str | None:
    """The user name for ``name`` (a user name or a numeric uid) from the passwd database (NSS,
    so LDAP users count), or ``None``: squeue(1) ``-u`` takes either form and answers unknown
    ones with "Invalid user"."""
    try:
        return pwd.getpwuid(int(name)).pw_name if name.isdigit() else pwd.getpwnam(name).pw_name
    except (KeyError, OverflowError):
        return None


class _Given(argparse.Action):
    """Store the value and note the option as given (``args.given``): an option that only
    means something with another one (``--interval`` without ``--watch``) is an error."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="dlqueue", description="Slurm jobs in the order they will start, with the dlprio "
        "queue (QUEUE, Q0 = highest) and attained service (ATTAINED(GPU·s): GPUs x seconds "
        "run, summed over all runs) when the daemon's snapshot is there. WAIT: time waited "
        "for the current or next run.",
        epilog=epilog([Exit.OK, Exit.FAILED, Exit.BAD_INPUT, Exit.SLURM_UNREACHABLE,
                       Exit.SLURM_REFUSED]))
    p.add_argument("-u", "--user", type=_names,
                   help="only these users (names or uids, comma-separated; unknown ones exit 2)")
    p.add_argument("--me", action="store_true", help="only the current user's jobs")
    p.add_argument("-p", "--partition", type=_names,
                   help="only these partitions (comma-separated; unknown ones exit 2)")
    p.add_argument("-t", "--states", type=_states, default=ACTIVE_STATES,
                   help="states, squeue codes or words (PD,R,CG...) or 'all'; "
                        "default: jobs not finished")
    p.add_argument("-j", "--jobs", type=_id_list, help="only these job ids (comma-separated)")
    p.add_argument("--snapshot", help="daemon snapshot file (default: snapshot_path of "
                   f"{DAEMON_CONFIG}, else {public_snapshot.DEFAULT_PATH})")
    p.add_argument("--json", action="store_true", help="print a JSON list for scripts")
    p.add_argument("--watch", action="store_true",
                   help="refresh until Ctrl-C: in place on a terminal, only the changed rows "
                        "into a file or pipe")
    p.add_argument("--interval", type=numbers.arg_type("--interval", numbers.parse_float,
                                                       MIN_INTERVAL_S, MAX_INTERVAL_S),
                   default=WATCH_INTERVAL_S, action=_Given,
                   help=f"seconds between refreshes with --watch (default {WATCH_INTERVAL_S:g}; "
                        f"{MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}; each refresh is one squeue "
                        "call)")
    p.set_defaults(given=frozenset())
    p.add_argument("--iterations", type=numbers.count("--iterations", MAX_ITERATIONS),
                   help="with --watch: stop after N refreshes")
    return p


class _View:
    """One fetch of Slurm + snapshot → rows and notes (the only I/O of a refresh)."""

    def __init__(self, args: argparse.Namespace, client: SlurmClient) -> None:
        self.args, self.client = args, client
        users = list(args.user or [])
        if args.me:
            users.append(getpass.getuser())
        self.users = users or None
        self.path: str
        self.config_note: str
        self.job_ids: list[int] | None
        self.keep_id: Callable[[str], bool] | None
        self.path, self.config_note = ((args.snapshot, "") if args.snapshot
                                       else default_snapshot_path())
        self.job_ids, self.keep_id = (_job_filter(args.jobs) if args.jobs is not None
                                      else (None, None))
        self.cluster = public_snapshot.local_cluster_name()
        self.notes_key: tuple[object, ...] = ()

    def fetch(self) -> tuple[list[qv.QueueRow], PublicSnapshot | None, list[str]]:
        """Rows, the snapshot used (or ``None``) and the notes; :attr:`notes_key` is set to
        the notes' state (see :func:`load_snapshot`)."""
        now = time.time()
        jobs = self.client.jobs(users=self.users, states=self.args.states,
                                job_ids=self.job_ids, partitions=self.args.partition)
        snap, note, key = load_snapshot(self.path, now, self.cluster)
        if snap is not None and snap.forecast is not None and key == ("stale", snap.cycle):
            # the daemon stopped updating: its forecast is not current, whatever its age
            snap = dataclasses.replace(snap, forecast=forecast_text.expired(snap.forecast))
        rows = qv.build_rows(jobs, snap, int(now))
        if (snap is not None and key == ("stale", snap.cycle)
                and all(r.queue is None for r in rows)):
            # an old daemon's snapshot that knows none of these jobs (a daemon stopped after
            # its jobs ended): nothing of it applies, so the view is the one without a daemon
            note, key = stale_note(snap, now, used=False), ("stale, unused", snap.cycle)
            snap, rows = None, qv.build_rows(jobs, None, int(now))
        stale = (snap is not None and snap.forecast is not None
                 and not forecast_text.is_fresh(snap.forecast, now))
        late = ""
        if stale and snap is not None and snap.forecast is not None:
            made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(snap.forecast["made_at"]))
            late = (f"the start-time forecast was made at {made}, too long ago (the daemon "
                    "is stopped or late): START is blank")
        notes = [n for n in (self.config_note, note, late) if n]
        self.notes_key = (self.config_note, key, stale)
        if self.keep_id is not None:
            plain = {int(s) for s in self.args.jobs if s.isdigit()}
            rows = [r for r in rows if self.keep_id(r.display_id) or _plain_match(r, plain)]
        if self.args.jobs is not None:
            shown = _plain_ids(rows)
            unmatched = [s for s in self.args.jobs if not _selects_any(s, rows, shown)]
            notes += [_unmatched_note(s) for s in unmatched]
            self.notes_key += (tuple(unmatched),)
        return rows, snap, notes


def _plain_ids(rows: list[qv.QueueRow]) -> set[int]:
    """Every plain id that selects one of ``rows`` (:func:`_plain_keys`)."""
    return {key for r in rows for key in _plain_keys(r)}


def _selects_any(selector: str, rows: list[qv.QueueRow], plain_ids: set[int]) -> bool:
    """Whether the ``-j`` selector ``selector`` selects one of ``rows`` (``plain_ids``: their
    :func:`_plain_ids`)."""
    if selector.isdigit():
        return int(selector) in plain_ids
    keep = _job_filter([selector])[1]
    return keep is not None and any(keep(r.display_id) for r in rows)


def _unmatched_note(selector: str) -> str:
    """The note for a ``-j`` id that selects no row (``squeue -j`` would say nothing, or
    "Invalid job id specified" once Slurm has forgotten the job)."""
    return (f"job {selector}: not in the table: no such job, or it ended, or -u/-p/-t leave "
            f"it out (-t all adds jobs that ended within Slurm's MinJobAge, sacct -j "
            f"{_lead(selector)} older ones)")


def _plain_keys(row: qv.QueueRow) -> tuple[int, ...]:
    """The plain ids that select ``row``: its own, and its hetjob leader's or its array's
    (the leading number of its JOBID), as :meth:`SlurmClient.jobs` matches them."""
    lead = _JOB_SELECTOR.match(row.display_id)
    return (row.job_id,) if lead is None else (row.job_id, int(lead.group(1)))


def _plain_match(row: qv.QueueRow, plain: set[int]) -> bool:
    """Whether ``row`` is selected by one of the plain ids ``plain``."""
    return any(key in plain for key in _plain_keys(row))


def _screen(view: _View, width: int, height: int) -> Group:
    """One --watch frame on a terminal: a title line, the rows that fit the screen (wrapped to
    its width), the notes; a Slurm error is one line."""
    from rich.console import Group
    from rich.text import Text

    stamp = time.strftime("%H:%M:%S")
    try:
        rows, snap, notes = view.fetch()
    except SlurmError as exc:
        return Group(Text(f"dlqueue {stamp}: Slurm error: {qv.visible(exc.message)} "
                          "(retrying)", style="red"))
    show = {"show_service": snap is not None, "show_start": _show_start(snap)}
    title = Text(f"dlqueue {stamp}: {len(rows)} jobs, every {view.args.interval:g} s")
    tail = [Text(qv.visible(n), style="dim") for n in notes]
    count = min(len(rows), max(height - 3 - len(notes), 1))
    while True:   # as many rows as fit, counting the lines wrapped cells and notes take
        shown = rows[:count]
        hidden = qv.watch_layout(shown, width, **show).hidden
        more = ([Text(f"... {len(rows) - len(shown)} more (dlqueue without --watch lists all)",
                      style="dim")] if len(shown) < len(rows) else [])
        left_out = ([Text(f"not shown at {width} columns: {', '.join(hidden)} (widen the "
                          "terminal or run dlqueue without --watch)", style="dim")]
                    if hidden else [])
        frame = Group(title, qv.build_queue_table(shown, width, fit=True, **show), *more,
                      *left_out, *tail)
        if count <= 1 or _height(frame, width) <= height:
            return frame
        count -= 1


def _height(frame: object, width: int) -> int:
    """Lines ``frame`` takes on a screen ``width`` cells wide (wrapped cells included)."""
    from rich.console import Console
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, legacy_windows=False).print(frame)
    return len(buffer.getvalue().splitlines())


def _watch(view: _View, console: Console) -> int:
    """Refresh ``--iterations`` times (or until Ctrl-C). On a terminal the frame is redrawn in
    place; into a file or pipe, the first refresh prints the table and later ones only what
    changed (:func:`submit.queue_view.changes`), each under a time stamp."""
    from rich.live import Live

    limit = view.args.iterations
    done = 0
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    before: dict[str, tuple[object, ...]] | None = None
    last_error = None
    last_notes: list[str] = []
    last_key: object = None
    with live if live is not None else contextlib.nullcontext():
        while True:
            if live is not None:
                live.update(_screen(view, console.width, console.height), refresh=True)
            else:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                try:
                    rows, snap, notes = view.fetch()
                    key: object = view.notes_key
                    before, text = qv.changes(before, rows, show_service=snap is not None,
                                              show_start=_show_start(snap))
                    last_error = None
                except SlurmError as exc:
                    text, notes, key = "", last_notes, last_key
                    if exc.message != last_error:
                        text = f"Slurm error: {qv.visible(exc.message)} (retrying)\n"
                    last_error = exc.message
                if key != last_key:   # a note's clock (a stale snapshot's age) is no change
                    text += "".join(qv.visible(n) + "\n" for n in notes)
                    last_notes, last_key = notes, key
                if text:
                    sys.stdout.write(f"--- dlqueue {stamp}\n{text}")
                    sys.stdout.flush()
            done += 1
            if limit is not None and done >= limit:
                return Exit.OK
            time.sleep(view.args.interval)


@quiet_on_closed_stdout  # `dlqueue | head`: the reader left early, which is not an error
@without_final_gc
def main(argv: list[str] | None = None) -> int:
    """Run ``dlqueue``; return the exit code (see the module docstring)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CliError as exc:   # a number out of its range (prioritizer.numbers), one line
        parser.fail(str(exc))
    if args.json and args.watch:
        parser.error("--json and --watch cannot be combined (run --json in a loop instead)")
    for flag, given in (("--iterations", args.iterations is not None),
                        ("--interval", "interval" in args.given)):
        if given and not args.watch:
            parser.error(f"{flag} needs --watch")
    if args.snapshot is not None:
        problem = snapshot_file_problem(args.snapshot)
        if problem is not None:
            parser.error(f"--snapshot {qv.visible(args.snapshot)}: {problem} "
                         "(give the daemon's snapshot JSON file)")
    known = {u: _user_name(u) for u in args.user or []}
    unknown = [u for u, name in known.items() if name is None]
    if unknown:  # squeue says "Invalid user"; an empty table would look like "no jobs"
        parser.error(f"-u/--user: unknown user {_shown_list(unknown)} "
                     "(not in the passwd database)")
    args.user = [known[u] for u in args.user or []]
    view = _View(args, SlurmClient())
    try:
        return _run(view)
    except KeyboardInterrupt:
        return Exit.OK   # Ctrl-C ends a --watch: the normal way out


def _run(view: _View) -> int:
    """Fetch once and print (table or JSON), or watch; Slurm errors become exit codes."""
    args = view.args
    try:
        if args.partition:
            unknown = _unknown_partitions(view.client, args.partition)
            if unknown:   # an empty table would look like "no jobs there"
                print(f"dlqueue: -p/--partition: unknown partition {_shown_list(unknown)} "
                      "(scontrol show partition lists them)", file=sys.stderr)
                return Exit.BAD_INPUT
        if args.watch:
            from rich.console import Console

            return _watch(view, Console(highlight=False, emoji=False, markup=False))
        rows, snap, notes = view.fetch()
    except SlurmUnreachable as exc:
        print(f"dlqueue: Slurm unreachable: {qv.visible(exc.message)}", file=sys.stderr)
        return Exit.SLURM_UNREACHABLE
    except SlurmError as exc:
        print(f"dlqueue: Slurm refused: {qv.visible(exc.message)}", file=sys.stderr)
        return Exit.SLURM_REFUSED
    if args.json:
        for n in notes:
            print(f"dlqueue: {qv.visible(n)}", file=sys.stderr)
        # one object per line through the C encoder (indent= would use the slow Python one),
        # one encoder for all (json.dumps builds a new one per call when given options)
        encode = json.JSONEncoder(ensure_ascii=False).encode
        items = [encode(r) for r in qv.json_rows(rows)]
        print("[\n" + ",\n".join(items) + "\n]" if items else "[]")
        return _found(args, rows)
    sys.stdout.write(qv.render_text(rows, show_service=snap is not None,
                                    show_start=_show_start(snap)))
    if snap is not None and snap.tenants:
        sys.stdout.write("\n" + qv.render_tenants(snap.tenants))
    for n in notes:
        print(qv.visible(n))
    if args.jobs is not None:
        _forecast_details(rows, snap)
    return _found(args, rows)


def _found(args: argparse.Namespace, rows: list[qv.QueueRow]) -> int:
    """NOT_FOUND when ``-j`` named jobs and none of them is in the table (the notes say why),
    so that ``dlqueue -j ID || ...`` tells a job that is gone, as ``squeue -j ID`` does with
    "Invalid job id specified"; else OK."""
    return Exit.NOT_FOUND if args.jobs is not None and not rows else Exit.OK


def _unknown_partitions(client: SlurmClient, names: list[str]) -> list[str]:
    """The names of ``names`` that are no partition of the cluster (``scontrol --all show
    partition``, hidden ones included: one Slurm call, once per dlqueue, only with ``-p``;
    squeue answers an unknown one with an empty table)."""
    known = client.show_partitions()
    return [n for n in dict.fromkeys(names) if n not in known]


def _show_start(snap: PublicSnapshot | None) -> bool:
    """The START column: with a forecast in the snapshot (stale: blank cells and a note)."""
    return snap is not None and snap.forecast is not None


def _forecast_details(rows: list[qv.QueueRow], snap: PublicSnapshot | None) -> None:
    """``-j``: each waiting or running job's forecast lines (p10-p90 of start and finish, the
    jobs ahead, the chance of a preemption), or why there is none (``snap`` None: no current
    snapshot of this cluster, whose note the view printed)."""
    now = time.time()
    for row in rows:
        waiting = row.state in WAITING_STATES
        print(f"job {qv.visible(row.display_id)}:")
        if not waiting and row.state not in HOLDING_STATES:
            print(f"  forecast: none (the job has ended: {qv.visible(row.state)})")
            continue
        if snap is None:
            print("  forecast: none (no current dlprio snapshot of this cluster: see the note "
                  "above)")
            continue
        lines = forecast_text.detail_lines(snap.forecast, _unit_of(row), now,
                                           running=not waiting)
        for line in lines:
            print(f"  {line}")


def _unit_of(row: qv.QueueRow) -> int:
    """The schedulable unit of a row (a hetjob component's leader, from ``12+1``)."""
    head = row.display_id.split("+", 1)[0]
    return int(head) if "+" in row.display_id and head.isdigit() else row.job_id


if __name__ == "__main__":
    sys.exit(main())
