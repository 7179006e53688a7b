"""The Slurm client: the one module of tiresias-slurm that runs Slurm's commands.

Everything that reads or changes Slurm (``sbatch``, ``squeue``, ``sinfo``, ``scontrol``,
``scancel``, ``sacct``) goes through :class:`SlurmClient` (docs/design.md, code rule 4). Commands run as
argument lists, never through a shell, each with a timeout. Jobs are read with ONE formatted
``squeue --Format`` call (:data:`slurm_plugin.slurm.records.SQUEUE_FIELDS`; about 20× cheaper than
``squeue --json`` at 10,000 jobs), nodes with ONE formatted ``sinfo --Node --Format`` call
(:data:`slurm_plugin.slurm.records.SINFO_FIELDS`); both parsed into the typed records :class:`Job` and
:class:`Node`. ``jobs(detail=True)`` reads ``squeue --json`` for the one field only JSON has
(GPU indices). Filters are applied here, never by squeue (22.05 ignores ``-u/-t/-j/-p`` in JSON
mode), so every caller pays one read whatever it filters.

Slurm releases: :meth:`SlurmClient.slurm_release` asks ``squeue --version`` once per client and
looks the release up in :data:`slurm_plugin.slurm.shapes.RELEASES` (22.05, 24.11, 26.05 live;
25.05 and 25.11 through the data parser they share); any other release is refused with one line
before anything is read. JSON is asked for in the release's declared data parser
(``--json=v0.0.42`` from 24.11 on) and decoded strictly into its declared shape: an answer of
another shape raises :class:`SlurmShapeUnknown` (nothing half-parsed).

Errors are typed so that callers can tell what to do:

* :class:`SlurmUnreachable`: slurmctld did not answer (down, restarting, timeout): retry later.
* :class:`JobUnknown`: Slurm does not know the job id (ended and purged, or never existed).
* :class:`SlurmRefused`: Slurm understood and said no; ``message`` is Slurm's own text.

The environment is passed through unchanged, so ``SLURM_CONF`` selects the cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from slurm_plugin.slurm import records
from slurm_plugin.slurm import shapes as slurm_shapes
from slurm_plugin.slurm.records import Job, Node, ShapeError
from slurm_plugin.common.exits import Exit

if TYPE_CHECKING:  # loaded by the sacct readers only (dlsubmit's one sbatch does not need it)
    from slurm_plugin.slurm.accounting import AccountingRecord

__all__ = [
    "Job",
    "Node",
    "SlurmClient",
    "SlurmError",
    "SlurmUnreachable",
    "JobUnknown",
    "SlurmRefused",
    "SlurmShapeUnknown",
    "AccountingDisabled",
]

_UNREACHABLE_PATTERNS = (
    "unable to contact slurm controller",
    "connection refused",
    "socket timed out",
    "communication connection failure",
    "slurm_persist_conn_open",
    "zero bytes were transmitted or received",
    "unable to establish a connection",
    "slurmctld: no response",
)
_UNKNOWN_JOB_PATTERNS = ("invalid job id", "job id not found", "does not exist")


#: The commands whose output the client reads as data (``_run`` sets ``SLURM_BITSTR_LEN=0``).
_READS = frozenset({"squeue", "sacct", "sinfo", "scontrol"})


class SlurmError(Exception):
    """Base of the client's errors.

    Attributes:
        argv: the command that failed.
        message: Slurm's own message (stderr, or stdout when stderr was empty), stripped.
    """

    def __init__(self, argv: Sequence[str], message: str) -> None:
        self.argv = list(argv)
        self.message = message.strip()
        super().__init__(f"{argv[0]}: {self.message}" if argv else self.message)


class SlurmUnreachable(SlurmError):
    """slurmctld did not answer, or the command timed out: the caller should back off and retry."""


class JobUnknown(SlurmError):
    """Slurm does not know the job id."""


class SlurmRefused(SlurmError):
    """Slurm refused the request; ``message`` is Slurm's text, shown to users verbatim."""


class SlurmShapeUnknown(SlurmError):
    """Slurm answered in a shape this version of tiresias-slurm does not parse (another Slurm
    release, or a field with an unexpected value). Nothing may be concluded from such a read:
    the daemon writes nothing to its ledger and acts on nothing until it parses again."""


def slurm_exit(exc: SlurmError) -> Exit:
    """The exit status of a command that ends on ``exc``: :attr:`Exit.SLURM_UNREACHABLE` when
    Slurm did not answer (:class:`SlurmUnreachable`), else :attr:`Exit.SLURM_REFUSED` (Slurm
    answered with an error, or in a shape that cannot be read)."""
    return Exit.SLURM_UNREACHABLE if isinstance(exc, SlurmUnreachable) else Exit.SLURM_REFUSED


class _Errors(msgspec.Struct):
    """What every ``--json`` answer of every declared parser has: its ``errors`` list (entries
    ``{"error": ..., "source": ...}`` and more; their text is what is read)."""

    errors: list[Any] = []


#: slurmdbd's answer to a sacct query that matches no job: an empty answer, not a failure
NOTHING_FOUND = "Nothing found with query"


class AccountingDisabled(SlurmRefused):
    """The cluster keeps no accounting (``AccountingStorageType=accounting_storage/none``, no
    slurmdbd): ``sacct`` answers "Slurm accounting storage is disabled"."""


@dataclass
class SlurmClient:
    """Runs Slurm's commands for the current ``SLURM_CONF`` cluster.

    Args:
        timeout_s: seconds each command may take before it counts as :class:`SlurmUnreachable`.
        bin_dir: directory of the Slurm binaries (``""`` = search ``PATH``).
        run_as: user name to run the commands as (``runuser -u NAME --``; root only), e.g. a
            test user submitting through job_submit.lua; ``""`` = the current user.
    """

    timeout_s: float = 30.0
    bin_dir: str = ""
    run_as: str = ""
    _release: slurm_shapes.Release | None = field(default=None, repr=False, compare=False)
    #: the last formatted read's jobs by their record's text (see _jobs_formatted), and the
    #: secret token that stands for each call's separator token in that text
    _parsed: dict[str, Job] = field(default_factory=dict, repr=False, compare=False)
    _key_token: str = field(default_factory=lambda: os.urandom(8).hex(), repr=False,
                            compare=False)

    # ----------------------------------------------------------------- plumbing
    def _run(self, argv: Sequence[str], input_text: str | None = None,
             env: dict[str, str] | None = None) -> str:
        """Run one Slurm command; return its stdout. Raises the typed errors above.

        ``env``: the command's whole environment (``None`` = this process's); a read
        (:data:`_READS`) gets ``SLURM_BITSTR_LEN=0``, so a job array's task expression is
        printed whole (squeue(1), sacct(1): by default it "will be limited to 64 bytes" and ends
        in ``...``), while ``sbatch``'s environment, which a job inherits, is left as given. A
        ``SLURM_CONF`` naming a missing or unreadable file fails at once with
        :class:`SlurmUnreachable` (Slurm's commands would retry it for 60 s, see
        :func:`conf_problem`). Slurm prints the bytes users gave (a job name from a Latin-1
        script): the output is read as UTF-8, a byte that is none replaced by U+FFFD, so every
        text read can be shown, logged and written as JSON.
        """
        env = dict(os.environ if env is None else env)
        if argv[0] in _READS:
            env["SLURM_BITSTR_LEN"] = "0"
        problem = conf_problem(env.get("SLURM_CONF"))
        if problem:
            raise SlurmUnreachable(argv, problem)
        cmd = [self.bin_dir.rstrip("/") + "/" + argv[0] if self.bin_dir else argv[0], *argv[1:]]
        if self.run_as:
            cmd = ["runuser", "-u", self.run_as, "--", *cmd]
        try:
            proc = subprocess.run(
                cmd,
                input=input_text,
                env=env,
                capture_output=True,
                encoding="utf-8",
                errors="replace",
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmUnreachable(argv, _timeout_message(self.timeout_s, exc)) from exc
        except FileNotFoundError as exc:
            raise SlurmUnreachable(argv, f"command not found: {cmd[0]}") from exc
        if proc.returncode != 0:
            raise _classify(argv, proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}")
        # Some 22.05 commands print the controller error on stderr yet exit 0 with empty JSON.
        if not proc.stdout.strip() and _is_unreachable(proc.stderr):
            raise SlurmUnreachable(argv, proc.stderr)
        return proc.stdout

    def _json(self, argv: Sequence[str]) -> str:
        """Run a ``--json`` command; return its answer, unparsed, once its ``errors`` list is
        known to be empty (the caller decodes it with its release's declared shape), or, from
        ``sacct``, to hold only :data:`NOTHING_FOUND` (no job matched). Any other non-empty
        list raises the typed error of its text (:func:`_classify`); text that is no JSON raises
        :class:`SlurmRefused`, JSON that is no object :class:`SlurmShapeUnknown`."""
        out = self._run(argv)
        try:
            head = msgspec.json.decode(out, type=_Errors)
        except msgspec.ValidationError as exc:
            raise SlurmShapeUnknown(argv, f"{argv[0]} --json: {exc}") from exc
        except msgspec.DecodeError as exc:
            raise SlurmRefused(argv, f"unparseable JSON from {argv[0]}: {exc}") from exc
        if head.errors and argv[0] == "sacct" and all(
                isinstance(e, dict) and e.get("error") == NOTHING_FOUND for e in head.errors):
            return out   # no job matched: its "jobs" list is empty, whatever slurmctld's state
        if head.errors:
            text = "; ".join(
                f"{e.get('source', '')}: {e.get('error', e)}" if isinstance(e, dict) else str(e)
                for e in head.errors
            )
            err = _classify(argv, text)
            # 22.05 reports a lost controller in JSON mode only as "Unspecified error" from
            # slurm_load_*, with exit status 0: ask `scontrol ping` which it is.
            if isinstance(err, SlurmRefused) and not self.ping():
                raise SlurmUnreachable(argv, f"{text} (slurmctld does not answer scontrol ping)")
            raise err
        return out

    # ----------------------------------------------------------------- reading
    def jobs(
        self,
        *,
        users: Iterable[str] | None = None,
        states: Iterable[str] | None = None,
        job_ids: Iterable[int] | None = None,
        partitions: Iterable[str] | None = None,
        detail: bool = False,
    ) -> list[Job]:
        """All jobs squeue shows (finished ones included for ``MinJobAge``), filtered here.

        Args:
            users: keep jobs of these user names.
            states: keep jobs whose ``state`` is one of these (e.g. ``{"PENDING", "RUNNING"}``).
            job_ids: keep these ids; a hetjob component matches its own id or its leader's id,
                an array element its own id or its array's id.
            partitions: keep jobs whose partition (any of a comma-separated list) is one of these.
            detail: read ``squeue --json`` (costly) to fill ``gpu_indices``; else the formatted
                read, where ``gpu_indices`` is empty.
        Returns:
            Jobs in squeue's order. Raises :class:`SlurmUnreachable` when slurmctld is down,
            :class:`SlurmShapeUnknown` when the answer does not parse (never a partial list).
        """
        if detail:
            release = self.slurm_release()
            argv = ["squeue", release.json_flag, "--all", "--states=all"]
            data = self._json(argv)
            try:
                jobs = slurm_shapes.jobs_from_json(data, release)
            except ShapeError as exc:
                raise SlurmShapeUnknown(argv, str(exc)) from exc
        else:
            jobs = self._jobs_formatted()
        return records.filter_jobs(jobs, users=users, states=states, job_ids=job_ids, partitions=partitions)

    def _jobs_formatted(self) -> list[Job]:
        """Every job (all states, hidden partitions too) from one ``squeue --Format`` call
        (:meth:`_formatted`). A record whose text is the same as in the previous read is not
        parsed again: its (frozen) Job is reused (most of a site's jobs do not change between
        two daemon cycles; a running job's does, its ``TimeUsed`` growing, so the jobs parsed
        again each cycle are about the running ones, as many as the cluster's GPUs allow)."""
        self.slurm_release()
        argv = ["squeue", "--noheader", "--all", "--states=all"]
        chunks, fs = self._formatted(argv, records.SQUEUE_FIELDS)
        jobs = []
        before, parsed = self._parsed, {}
        for i, chunk in enumerate(chunks):
            job = before.get(chunk)
            if job is None:
                values = chunk.split(fs)
                if len(values) != len(records.SQUEUE_FIELDS):
                    raise SlurmShapeUnknown(argv, f"squeue: record {i + 1} has {len(values)} "
                                            f"fields, expected {len(records.SQUEUE_FIELDS)}")
                try:
                    job = records.job_from_fields(values)
                except ShapeError as exc:
                    raise SlurmShapeUnknown(argv, str(exc)) from exc
            parsed[chunk] = job
            jobs.append(job)
        self._parsed = parsed
        return jobs

    def _formatted(self, argv: list[str], fields: Sequence[tuple[str, str]]) -> tuple[list[str], str]:
        """The records of one formatted read (squeue(1)/sinfo(1) ``--Format``/``-O`` with
        ``fields``, ``(key, type)`` pairs) as texts, and the field separator within them.

        Each field ends with a separator made of a fresh random token (64 bits) per call, each
        record with another, so no user text (job name, comment, path: anything, newlines
        included) can be taken for a separator; a record that does not start a line, or text
        after the last record, is a :class:`SlurmShapeUnknown`, never a guess. Times print as
        epoch seconds (``SLURM_TIME_FORMAT=%s``). The call's token is replaced by this client's
        secret one (never shown to anyone), so a record reads the same in every call and two
        different records never look alike: the texts can key a parse cache.
        """
        token = os.urandom(8).hex()
        fs, rs = f"\x1f{token}\x1f", f"\x1e{token}\x1e"
        fmt = ",".join(f"{t}:0{fs}" for _, t in fields[:-1]) + f",{fields[-1][1]}:0{rs}"
        env = {**os.environ, "SLURM_TIME_FORMAT": "%s"}
        out = self._run([*argv, f"--Format={fmt}"], env=env).replace(token, self._key_token)
        fs, rs = f"\x1f{self._key_token}\x1f", f"\x1e{self._key_token}\x1e"
        chunks = out.split(rs)
        del out   # 10,000 records: megabytes, not needed past the split
        tail = chunks.pop()
        if tail.strip():
            raise SlurmShapeUnknown(argv, f"{argv[0]}: output does not end with a record: {tail[:80]!r}")
        for i in range(1, len(chunks)):
            if not chunks[i].startswith("\n"):
                raise SlurmShapeUnknown(argv, f"{argv[0]}: record {i + 1} does not start a line")
            chunks[i] = chunks[i][1:]
        return chunks, fs

    def slurm_release(self) -> slurm_shapes.Release:
        """The Slurm release this client's commands talk to, read once per client from
        ``squeue --version`` (:meth:`slurm_version`) and looked up in
        :data:`slurm_shapes.RELEASES`. Raises :class:`SlurmShapeUnknown` for a release whose
        shapes are not declared (nothing is read from it)."""
        if self._release is None:
            version = self.slurm_version()
            try:
                self._release = slurm_shapes.release(version)
            except ShapeError as exc:
                raise SlurmShapeUnknown(["squeue", "--version"], str(exc)) from exc
        return self._release

    def slurm_version(self) -> tuple[int, int, int]:
        """Slurm's release as ``(major, minor, micro)`` from ``squeue --version`` (``slurm
        22.05.8`` → ``(22, 5, 8)``). Raises :class:`SlurmShapeUnknown` on any other answer."""
        argv = ["squeue", "--version"]
        try:
            return slurm_shapes.parse_version(self._run(argv), argv)
        except ShapeError as exc:
            raise SlurmShapeUnknown(argv, str(exc)) from exc

    def job(self, job_id: int) -> Job:
        """One job by id (a hetjob leader returns component 0). Raises :class:`JobUnknown`."""
        for j in self.jobs():
            if j.job_id == job_id:
                return j
        raise JobUnknown(["squeue", "--json"], f"job {job_id} not in squeue")

    def nodes(self, *, partitions: Iterable[str] | None = None) -> list[Node]:
        """All nodes from one formatted ``sinfo --Node --Format`` read
        (:data:`records.SINFO_FIELDS`, the same on every release), one record per node,
        optionally only those in these partitions."""
        argv = ["sinfo", "--noheader", "--Node", "--all"]
        chunks, fs = self._formatted(argv, records.SINFO_FIELDS)
        found = []
        for i, chunk in enumerate(chunks):
            values = chunk.split(fs)
            if len(values) != len(records.SINFO_FIELDS):
                raise SlurmShapeUnknown(argv, f"sinfo: record {i + 1} has {len(values)} fields, "
                                        f"expected {len(records.SINFO_FIELDS)}")
            try:
                found.append(records.node_from_fields(values))
            except ShapeError as exc:
                raise SlurmShapeUnknown(argv, str(exc)) from exc
        wanted = set(partitions) if partitions is not None else None
        return [n for n in records.merge_partitions(found)
                if wanted is None or wanted & set(n.partitions)]

    def ping(self) -> bool:
        """True when some slurmctld answers ``scontrol ping`` (never raises): one line per
        controller, ``Slurmctld(primary) at ctl1 is UP`` / ``Slurmctld(backup) at ctl2 is
        DOWN``; a backup that serves while the primary is down is up too."""
        try:
            out = self._run(["scontrol", "ping"])
        except SlurmError:
            return False
        return any(line.rstrip().endswith(" is UP") for line in out.splitlines())

    def show_config(self) -> dict[str, str]:
        """``scontrol show config`` as ``{Key: value}`` (e.g. ``PriorityWeightAge``)."""
        out = self._run(["scontrol", "show", "config"])
        conf: dict[str, str] = {}
        for line in out.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() and " " not in key.strip():
                conf[key.strip()] = value.strip()
        return conf

    def accounts(self) -> set[str]:
        """The account names slurmdbd knows (``sacctmgr --noheader --parsable2 list account
        format=account``); raises as any command (no slurmdbd: SlurmError)."""
        out = self._run(["sacctmgr", "--noheader", "--parsable2", "list", "account",
                         "format=account"])
        return {line.strip() for line in out.splitlines() if line.strip()}

    def show_partitions(self) -> dict[str, dict[str, str]]:
        """``scontrol --all show partition --oneliner`` as ``{name: {Key: value}}``
        (``PriorityTier``, ``Nodes``, ``PreemptMode``, ...). Values are Slurm's text; none
        contains a space. ``--all``: also the partitions configured ``Hidden=YES`` and those
        unavailable to the caller's group, which scontrol(1) leaves out for a user who is not
        root without it (squeue and sinfo are read with ``--all`` likewise)."""
        parts: dict[str, dict[str, str]] = {}
        for line in self._run(["scontrol", "--all", "show", "partition", "--oneliner"]).splitlines():
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "PartitionName" in fields:
                parts[fields["PartitionName"]] = fields
        return parts

    def accounting_runs(self, job_id: int) -> list[AccountingRecord]:
        """Every attempt of one job (its own records, not its hetjob components') from
        ``sacct --duplicates --json -j JOB_ID`` (needs slurmdbd), one
        :class:`~slurm_plugin.slurm.accounting.AccountingRecord` per run in sacct's order (``start``
        and ``end`` in epoch s). Raises as :meth:`accounting`."""
        return [r for r in self._sacct(["-j", str(job_id)]) if r.job_id == job_id]

    def accounting(self, start: str, end: str = "now") -> list[AccountingRecord]:
        """Every attempt of every job in a window: ``sacct --duplicates --json --allusers
        --starttime START --endtime END`` (sacct(1): jobs in any state during the window).

        Args:
            start, end: times in a form sacct(1) takes (``2026-11-01T00:00:00``, ``now-7days``).
        Returns:
            One :class:`~slurm_plugin.slurm.accounting.AccountingRecord` per attempt (per hetjob
            component); fold them with :func:`slurm_plugin.slurm.accounting.fold_jobs`.
        Raises:
            AccountingDisabled: the cluster has no slurmdbd; SlurmUnreachable: slurmdbd down.
        """
        return self._sacct(["--starttime", start, "--endtime", end])

    def accounting_jobs(self, job_ids: Sequence[int]) -> list[AccountingRecord]:
        """Every attempt of the given jobs (hetjob leaders bring their components):
        ``sacct --duplicates --json --allusers -j a,b,c`` (with ``-j`` sacct's window starts at
        the epoch, sacct(1) ``--starttime``). Raises as :meth:`accounting`."""
        if not job_ids:
            return []
        return self._sacct(["-j", ",".join(str(int(j)) for j in job_ids)])

    def _sacct(self, selection: list[str]) -> list[AccountingRecord]:
        """``sacct --duplicates <json flag> --allusers SELECTION``, parsed with the release's
        declared shape (:func:`slurm_plugin.slurm.accounting.records_from_json`); a cluster without
        slurmdbd raises :class:`AccountingDisabled`, another shape :class:`SlurmShapeUnknown`.
        A selection that holds no job is ``[]`` (slurmdbd answers it with the error
        :data:`NOTHING_FOUND` and an empty ``jobs`` list; :meth:`_json` lets that pass)."""
        release = self.slurm_release()
        argv = ["sacct", "--duplicates", release.json_flag, "--allusers", *selection]
        try:
            data = self._json(argv)
        except SlurmRefused as exc:
            if "accounting storage is disabled" in exc.message.lower():
                raise AccountingDisabled(argv, exc.message) from None
            raise
        from slurm_plugin.slurm import accounting as sacct_records

        try:
            return sacct_records.records_from_json(data, release)
        except ShapeError as exc:
            raise SlurmShapeUnknown(argv, str(exc)) from exc

    # ----------------------------------------------------------------- changing
    def submit(self, script_text: str, extra_args: Sequence[str] = (),
               env: dict[str, str] | None = None) -> int:
        """Submit a batch script (given as text on stdin) with ``sbatch --parsable``.

        ``env``: sbatch's whole environment (``None`` = this process's); sbatch passes it on to
        the job (``--export=ALL``). Returns the job id (a hetjob's leader id). Raises
        :class:`SlurmRefused` with sbatch's message when the script or request is rejected.
        """
        out = self._run(["sbatch", "--parsable", *extra_args], input_text=script_text, env=env)
        first = out.strip().splitlines()[-1] if out.strip() else ""
        m = re.match(r"^(\d+)(?:;\S+)?$", first)
        if not m:
            raise SlurmRefused(["sbatch"], f"unexpected sbatch output: {out!r}")
        return int(m.group(1))

    def find_by_comment(self, text: str) -> list[int]:
        """Ids of this user's jobs whose ``--comment`` contains ``text``: pending/running ones
        from ``squeue --me -o '%i|%k'`` (``%k`` is the comment, squeue(1)), then ended ones from
        ``sacct -X -P --format=JobID,Comment`` over the last day (sacct keeps the comment only
        with ``AccountingStoreFlags=job_comment``; without slurmdbd that part is skipped).
        A hetjob or array counts once, by its leader's or its array's id: both print a
        component as ``31+1`` and an element as ``100_3`` (sacct's ``JobIDRaw`` would give each
        its own id). Raises :class:`SlurmUnreachable` when squeue gets no answer."""
        found: list[int] = []
        out = self._run(["squeue", "-h", "--me", "-o", "%i|%k"])
        try:
            out += self._run(["sacct", "-n", "-X", "-P", "--format=JobID,Comment", "-S", "now-1days"])
        except SlurmError:
            pass
        for line in out.splitlines():
            job, _, comment = line.partition("|")
            m = re.match(r"^(\d+)", job.strip())
            if m and text in comment and int(m.group(1)) not in found:
                found.append(int(m.group(1)))
        return found

    def test_only(self, script_text: str) -> str:
        """``sbatch --test-only``: Slurm's verdict text without submitting. Raises :class:`SlurmRefused`."""
        argv = ["sbatch", "--test-only"]
        cmd = argv
        try:
            proc = subprocess.run(cmd, input=script_text, capture_output=True, encoding="utf-8", errors="replace",
                                  timeout=self.timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise SlurmUnreachable(argv, f"no answer within {self.timeout_s:g} s") from exc
        text = (proc.stderr + proc.stdout).strip()
        if proc.returncode != 0 or "to start at" not in text:
            raise _classify(argv, text or f"exit {proc.returncode}")
        return text

    def _update(self, job_ids: Sequence[int | str], field: str, value: str | int) -> None:
        if not job_ids:
            return
        ids = ",".join(str(j) for j in job_ids)
        self._run(["scontrol", "update", f"jobid={ids}", f"{field}={value}"])

    def update(self, job_ids: Sequence[int | str], field: str, value: str | int) -> None:
        """``scontrol update jobid=a,b Field=value`` in ONE call (any field scontrol(1) takes).

        Raises :class:`SlurmRefused` with Slurm's text (e.g. a job_submit plugin's refusal).
        """
        self._update(job_ids, field, value)

    def set_priority(self, job_ids: Sequence[int | str], value: int) -> None:
        """Set the absolute priority of pending jobs, all ids in ONE ``scontrol update`` call.

        An operator-set priority is fixed: multifactor stops recomputing it (scontrol(1)).
        Raises :class:`SlurmRefused`/:class:`JobUnknown`; Slurm still updates the valid ids.
        """
        self._update(job_ids, "Priority", int(value))

    def set_site_factor(self, job_ids: Sequence[int | str], value: int) -> None:
        """Set the SiteFactor of jobs in ONE call; multifactor adds it to the priority at once."""
        self._update(job_ids, "SiteFactor", int(value))

    def set_partition(self, job_ids: Sequence[int | str], partition: str) -> None:
        """Move pending jobs to ``partition`` in ONE call (running jobs cannot be moved)."""
        self._update(job_ids, "Partition", partition)

    def signal(self, job_id: int | str, signal: str, batch_only: bool = True) -> None:
        """Send ``signal`` (e.g. ``"USR2"``) with ``scancel --signal``; to the batch shell only
        (``--batch``) or to every step and the batch shell (``--full``)."""
        scope = "--batch" if batch_only else "--full"
        self._run(["scancel", f"--signal={signal}", scope, str(job_id)])

    def requeue(self, job_id: int | str, *, incomplete: bool = False, hold: bool = False) -> None:
        """``scontrol requeue``: the batch script restarts from the top with the same id
        (hetjobs only through their leader; array elements as ``ARRAYID_TASKID``).

        ``incomplete``: ``scontrol requeue incomplete`` (22.05 scontrol(1)): only a job that has
        not completed (CONFIGURING, RUNNING, STOPPED, SUSPENDED) is requeued; a plain requeue of
        a job that just completed runs it again. Slurm answers rc 0 either way: read the job
        after to know which happened. ``hold``: ``requeuehold`` (the job waits held until
        :meth:`release`). Raises :class:`SlurmRefused` ("Requested operation is presently
        disabled" for ``--no-requeue`` jobs) or :class:`JobUnknown`.
        """
        argv = ["scontrol", "requeuehold" if hold else "requeue"]
        self._run([*argv, *(["incomplete"] if incomplete else []), str(job_id)])

    def release(self, job_ids: Sequence[int | str]) -> None:
        """``scontrol release`` held jobs (one call)."""
        if job_ids:
            self._run(["scontrol", "release", ",".join(str(j) for j in job_ids)])

    def cancel(self, job_ids: Sequence[int | str]) -> None:
        """``scancel`` the given jobs (one call)."""
        if job_ids:
            self._run(["scancel", *[str(j) for j in job_ids]])

    def resume_nodes(self, names: Sequence[str]) -> None:
        """``scontrol update NodeName=a,b State=RESUME`` (one call; operator): drained nodes
        take jobs again (scontrol(1), "State=RESUME"). Raises :class:`SlurmRefused` for a node
        that is not drained or down ("Invalid node state specified")."""
        if names:
            self._run(["scontrol", "update", f"NodeName={','.join(names)}", "State=RESUME"])


    def create_partition(self, name: str, options: Sequence[str] = ()) -> None:
        """``scontrol create PartitionName=NAME OPT=VAL ...`` (operator; kept in slurmctld's
        state, not in slurm.conf). Raises :class:`SlurmRefused` (e.g. the name exists)."""
        self._run(["scontrol", "create", f"PartitionName={name}", *options])

    def delete_partition(self, name: str) -> None:
        """``scontrol delete PartitionName=NAME`` (refused while jobs are active in it)."""
        self._run(["scontrol", "delete", f"PartitionName={name}"])


def conf_problem(path: str | None) -> str | None:
    """Why the ``SLURM_CONF`` file ``path`` cannot be used, in Slurm's words, or ``None``.

    Slurm 22.05's commands answer a missing file with ``s_p_parse_file: cannot stat file ...,
    retrying in 1sec up to 60sec`` (measured on this project's machine) and so outlive any
    timeout; checking first turns that into an immediate, clear error. ``None`` or ``""``
    (Slurm's built-in default path) is not checked.
    """
    if not path:
        return None
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        verb = "cannot stat file" if isinstance(exc, FileNotFoundError) else "cannot read file"
        return f"SLURM_CONF: {verb} {path}: {exc.strerror or exc}"
    return None


def _timeout_message(timeout_s: float, exc: subprocess.TimeoutExpired) -> str:
    """``no answer within N s``, followed by the last line the command wrote on stderr."""
    err: str | bytes = exc.stderr or b""
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    last = err.strip().splitlines()[-1] if err.strip() else ""
    return f"no answer within {timeout_s:g} s" + (f" ({last})" if last else "")


def _is_unreachable(text: str) -> bool:
    low = text.lower()
    return any(p in low for p in _UNREACHABLE_PATTERNS)


_MISMATCH_HINT = ("the Slurm commands on PATH are another release than the cluster's plugins "
                  "(slurm.conf PluginDir): put the cluster's commands first on PATH; for a "
                  "dlcluster cluster: eval \"$(dlcluster env --name NAME)\"")


def _classify(argv: Sequence[str], message: str) -> SlurmError:
    low = message.lower()
    if "incompatible slurm plugin" in low or "incompatible plugin version" in low:
        return SlurmRefused(argv, f"{message.strip().splitlines()[0]}: {_MISMATCH_HINT}")
    if _is_unreachable(message):
        return SlurmUnreachable(argv, message)
    if any(p in low for p in _UNKNOWN_JOB_PATTERNS):
        return JobUnknown(argv, message)
    return SlurmRefused(argv, message)
