"""``dlqueue``: the thin shell around :mod:`submit.queue_view` (squeue-style view of GPU jobs).

It reads Slurm only through :meth:`slurm_plugin.client.SlurmClient.jobs` (``squeue --json``)
and the daemon's public snapshot through :func:`prioritizer.daemon.snapshot.read_snapshot`
(never the private ledger), builds rows and a table with the pure functions of
:mod:`submit.queue_view`, and prints them once (plain text measured in display cells, fast at
10,000 jobs), as JSON (``--json``), or with ``--watch``: on a terminal refreshed in place with
:class:`rich.live.Live` (the rows that fit the screen), into a file or pipe only the rows that
changed. Every refresh is ONE ``squeue`` call whatever the filters (they are applied here), every
``--interval`` seconds (default 5): a cluster of users each watching must not load slurmctld. Snapshot path: ``--snapshot PATH``; else ``snapshot_path``
from the daemon config ``/etc/dlprio/dlprio.yaml`` (top level or its ``daemon:`` section) when
that file exists; else :data:`prioritizer.daemon.snapshot.DEFAULT_PATH`.

Exit codes: 0 success (also without a daemon snapshot: the view says so); 2 bad arguments
(an unknown ``-u`` user included);
3 Slurm unreachable; 4 Slurm refused the request (its message is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import pwd
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from prioritizer.daemon import snapshot as public_snapshot
from prioritizer.daemon.snapshot import PublicSnapshot, SnapshotError
from slurm_plugin.cli_util import ArgumentParser, quiet_on_closed_stdout
from slurm_plugin.client import SlurmClient, SlurmError, SlurmUnreachable
from slurm_plugin.records import ACTIVE_STATES
from submit import queue_view as qv
from submit.ending import without_final_gc

if TYPE_CHECKING:  # rich's console loads for --watch only, yaml when the daemon config exists
    from rich.console import Console, Group

DAEMON_CONFIG = "/etc/dlprio/dlprio.yaml"
EXIT_USAGE, EXIT_UNREACHABLE, EXIT_REFUSED = 2, 3, 4
STALE_AFTER_S = 300
WATCH_INTERVAL_S = 5.0


def default_snapshot_path(config_path: str = DAEMON_CONFIG) -> tuple[str, str]:
    """The snapshot path and a note ("" or why the config was not used).

    Reads ``snapshot_path`` (top level, or under ``daemon:``) of ``config_path`` when the file
    exists; falls back to :data:`public_snapshot.DEFAULT_PATH` with a note when it is unreadable.
    """
    cfg = Path(config_path)
    if not cfg.exists():
        return public_snapshot.DEFAULT_PATH, ""
    import yaml

    try:
        data = yaml.safe_load(cfg.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        return public_snapshot.DEFAULT_PATH, f"{config_path} unreadable ({exc.__class__.__name__})"
    if isinstance(data, dict):
        for section in (data, data.get("daemon")):
            if isinstance(section, dict) and isinstance(section.get("snapshot_path"), str):
                return section["snapshot_path"], ""
    return public_snapshot.DEFAULT_PATH, ""


def load_snapshot(path: str, now: float) -> tuple[PublicSnapshot | None, str]:
    """Read the snapshot; return it (or ``None``) and the note the view prints about it."""
    try:
        snap = public_snapshot.read_snapshot(path)
    except (SnapshotError, OSError, ValueError, AttributeError) as exc:
        return None, (f"daemon snapshot {path} unreadable ({exc}): "
                      "queue and attained service are not shown")
    if snap is None:
        return None, (f"daemon snapshot not found at {path} (is dlprio running?): "
                      "queue and attained service are not shown")
    age = now - snap.generated_at
    if age > STALE_AFTER_S:
        return snap, (f"daemon snapshot is {qv.format_duration(age)} old (cycle {snap.cycle}); "
                      "the daemon may be down: QUEUE and ATTAINED are as of then, blank for "
                      "jobs it has not seen")
    return snap, ""


def _id_list(text: str) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of job ids (e.g. -j 12,15)") from None
    if not ids or any(i <= 0 for i in ids):
        raise argparse.ArgumentTypeError(f"{text!r}: job ids are positive integers (e.g. -j 12,15)")
    return ids


def _states(text: str) -> frozenset[str] | None:
    try:
        return qv.parse_states(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
        return value
    return parse


def _names(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def _user_name(name: str) -> str | None:
    """The user name for ``name`` (a user name or a numeric uid) from the passwd database (NSS,
    so LDAP users count), or ``None``: squeue(1) ``-u`` takes either form and answers unknown
    ones with "Invalid user"."""
    try:
        return pwd.getpwuid(int(name)).pw_name if name.isdigit() else pwd.getpwnam(name).pw_name
    except (KeyError, OverflowError):
        return None


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="dlqueue", description="Slurm jobs in the order they will start, with the dlprio "
        "queue (QUEUE, Q0 = highest) and attained service (ATTAINED(GPU·s): GPUs x seconds "
        "run, summed over all runs) when the daemon's snapshot is there. WAIT: time waited "
        "for the current or next run.",
        epilog="exit codes: 0 ok, 2 bad arguments, 3 Slurm unreachable, 4 Slurm refused")
    p.add_argument("-u", "--user", type=_names,
                   help="only these users (names or uids, comma-separated; unknown ones exit 2)")
    p.add_argument("--me", action="store_true", help="only the current user's jobs")
    p.add_argument("-p", "--partition", type=_names, help="only these partitions")
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
    p.add_argument("--interval", type=_positive(float), default=WATCH_INTERVAL_S,
                   help=f"seconds between refreshes with --watch (default {WATCH_INTERVAL_S:g}; "
                        "each refresh is one squeue call)")
    p.add_argument("--iterations", type=_positive(int),
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
        self.path, self.config_note = ((args.snapshot, "") if args.snapshot
                                       else default_snapshot_path())

    def fetch(self) -> tuple[list[qv.QueueRow], PublicSnapshot | None, list[str]]:
        now = time.time()
        jobs = self.client.jobs(users=self.users, states=self.args.states,
                                job_ids=self.args.jobs, partitions=self.args.partition)
        snap, note = load_snapshot(self.path, now)
        notes = [n for n in (self.config_note, note) if n]
        return qv.build_rows(jobs, snap, int(now)), snap, notes


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
    room = max(height - 3 - len(notes), 1)
    shown = rows[:room]
    table = qv.build_queue_table(shown, width, show_service=snap is not None, fit=True)
    title = Text(f"dlqueue {stamp}: {len(rows)} jobs, every {view.args.interval:g} s")
    more = ([Text(f"... {len(rows) - len(shown)} more (dlqueue without --watch lists all)",
                  style="dim")] if len(shown) < len(rows) else [])
    return Group(title, table, *more, *(Text(qv.visible(n), style="dim") for n in notes))


def _watch(view: _View, console: Console) -> int:
    """Refresh ``--iterations`` times (or until Ctrl-C). On a terminal the frame is redrawn in
    place; into a file or pipe, the first refresh prints the table and later ones only what
    changed (:func:`submit.queue_view.changes`), each under a time stamp."""
    from rich.live import Live

    limit = view.args.iterations
    done = 0
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    before: dict[str, tuple[object, ...]] | None = None
    last_error = last_notes = None
    with live if live is not None else contextlib.nullcontext():
        while True:
            if live is not None:
                live.update(_screen(view, console.width, console.height), refresh=True)
            else:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                try:
                    rows, snap, notes = view.fetch()
                    before, text = qv.changes(before, rows, show_service=snap is not None)
                    last_error = None
                except SlurmError as exc:
                    text, notes = "", last_notes or []
                    if exc.message != last_error:
                        text = f"Slurm error: {qv.visible(exc.message)} (retrying)\n"
                    last_error = exc.message
                if notes != last_notes:
                    text += "".join(qv.visible(n) + "\n" for n in notes)
                    last_notes = notes
                if text:
                    sys.stdout.write(f"--- dlqueue {stamp}\n{text}")
                    sys.stdout.flush()
            done += 1
            if limit is not None and done >= limit:
                return 0
            time.sleep(view.args.interval)


@quiet_on_closed_stdout  # `dlqueue | head`: the reader left early, which is not an error
@without_final_gc
def main(argv: list[str] | None = None) -> int:
    """Run ``dlqueue``; return the exit code (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and args.watch:
        parser.error("--json and --watch cannot be combined (run --json in a loop instead)")
    if args.iterations is not None and not args.watch:
        parser.error("--iterations needs --watch")
    known = {u: _user_name(u) for u in args.user or []}
    unknown = [u for u, name in known.items() if name is None]
    if unknown:  # squeue says "Invalid user"; an empty table would look like "no jobs"
        parser.error(f"-u/--user: unknown user {', '.join(map(repr, unknown))} "
                     "(not in the passwd database)")
    args.user = [known[u] for u in args.user or []]
    view = _View(args, SlurmClient())
    try:
        return _run(view)
    except KeyboardInterrupt:
        return 0


def _run(view: _View) -> int:
    """Fetch once and print (table or JSON), or watch; Slurm errors become exit codes."""
    args = view.args
    try:
        if args.watch:
            from rich.console import Console

            return _watch(view, Console(highlight=False, emoji=False, markup=False))
        rows, snap, notes = view.fetch()
    except SlurmUnreachable as exc:
        print(f"dlqueue: Slurm unreachable: {qv.visible(exc.message)}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except SlurmError as exc:
        print(f"dlqueue: Slurm refused: {qv.visible(exc.message)}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        for n in notes:
            print(f"dlqueue: {qv.visible(n)}", file=sys.stderr)
        # one object per line through the C encoder (indent= would use the slow Python one),
        # one encoder for all (json.dumps builds a new one per call when given options)
        encode = json.JSONEncoder(ensure_ascii=False).encode
        items = [encode(r) for r in qv.json_rows(rows)]
        print("[\n" + ",\n".join(items) + "\n]" if items else "[]")
        return 0
    sys.stdout.write(qv.render_text(rows, show_service=snap is not None))
    for n in notes:
        print(qv.visible(n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
