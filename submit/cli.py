"""``dlsubmit``: an OpenPAI job spec (v1 JSON / v2 YAML) to one gang sbatch script, submitted.

Pipeline: submit/load.py (file -> validated job model) -> submit/render.py (job -> script, pure)
-> ``slurm_plugin.slurm.client.SlurmClient.submit`` (the only door to Slurm, docs/design.md, code rule 4).
``--dry-run`` prints the script and needs no Slurm at all. Exit status
(:class:`~slurm_plugin.common.exits.Exit`, README.md's table):

* 0: submitted (prints the job id) or rendered (``--dry-run``).
* 1: stdout could not be written (disk full, closed at the start; a job submitted before the
  failure keeps running: ``squeue`` shows it).
* 2: a problem in the spec, the file or the options (one line per problem, naming the field
  path or ``file:line:column``); nothing is submitted.
* 3: Slurm could not be reached (``Slurm unreachable: ...``, e.g. slurmctld down or a missing
  ``SLURM_CONF`` file); 4: Slurm refused the job (``Slurm refused the job: ...``); Slurm's own
  message is shown verbatim. With several specs, the code of the first spec that got no job.
* 130 / 143: interrupted by SIGINT / SIGTERM (see below).

Several specs in one call (``dlsubmit a.yaml b.yaml``) are all validated and rendered first
(with ``--dry-run`` the scripts print in order, each preceded by the header line
``#dlsubmit-spec 2/3 bytes=4711 b.yaml`` giving the exact size of the script that follows, see
:func:`separator` and :func:`split_dry_run`);
if any has a problem nothing is submitted. They are then submitted concurrently (up to
:data:`SUBMIT_THREADS` sbatch calls at once, taken in spec order). stdout has one record per
spec, in spec order, each printed and flushed as soon as it and every spec before it are done:
the job id or :data:`NO_JOB` (``--json``: ``{"spec", "job_id", "error", "script"}``); a spec
Slurm refused is named on stderr (exit 4) while the others stay submitted. SIGINT/SIGTERM: no
further sbatch starts, the running ones finish, every record is printed, stderr names the specs
not submitted, exit 130/143 (128 + the signal). ``sbatch`` runs with a clean environment
(submit/environ.py; a warning says so when dlsubmit runs inside a job). Every submission carries
a unique token in its ``--comment`` (after the checkpoint marker); when ``sbatch`` reports a
timeout the token is looked up (``squeue``/``sacct``) before anything is decided, so a job that
was queued despite the timeout is reported, never submitted twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, NoReturn

from slurm_plugin.common.cli import ArgumentParser, quiet_on_closed_stdout, visible
from slurm_plugin.common.wording import utf8_text
from slurm_plugin.common.exits import Exit, epilog, signalled
from submit import advice, environ, load, mounts, node_shape, params, secrets
from submit.ending import without_final_gc
from submit.errors import SpecError
from submit.options import DEFAULT_VC, RUNTIMES, RenderOptions, check_fields, load_site
from submit.render import contract_comment, render_sbatch

TOKEN_PREFIX = "dlsubmit-token="
LOOKUP_TRIES, LOOKUP_WAIT_S = 3, 2.0
SUBMIT_THREADS = 4
"""After an sbatch timeout: look the token up this many times, this far apart (slurmctld may
still be writing the job when the first look comes)."""


_SPEC_SUFFIXES = (".yaml", ".yml", ".json")


class _Parser(ArgumentParser):
    """dlsubmit's parser: a usage error caused by a spec file whose name starts with '-'
    (``dlsubmit -spec.yaml``, which argparse takes for an unknown option) says how to name
    that file instead of argparse's message (``the following arguments are required``)."""

    def error(self, message: str) -> NoReturn:
        words = getattr(self, "_words", [])
        for word in words[:words.index("--")] if "--" in words else words:
            if self._spec_taken_for_option(word):
                self.fail(f"{visible(word)}: taken for an option (it starts with '-'); for a spec "
                          f"file of that name write 'dlsubmit -- {visible(word)}' or "
                          f"'dlsubmit ./{visible(word)}'")
        super().error(message)

    def _spec_taken_for_option(self, word: str) -> bool:
        """Whether ``word`` starts with '-', is none of the options (nor an abbreviation or
        ``--opt=value`` of one), and is an existing file or ends as a spec file does."""
        if not word.startswith("-") or word == "-":
            return False
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if any(o == name or (name.startswith("--") and o.startswith(name))
               for o in self._option_string_actions):
            return False
        return word.lower().endswith(_SPEC_SUFFIXES) or os.path.isfile(word)


def build_parser(*, specs_required: bool = True) -> argparse.ArgumentParser:
    """dlsubmit's parser (``specs_required=False``: the specs may all come after ``--``,
    :func:`parse_args`)."""
    p = _Parser(   # its usage errors: one line, exit 2 (Exit.BAD_INPUT)
        prog="dlsubmit",
        description="Turn an OpenPAI job spec (v1 JSON with // comments, or v2 YAML) into one "
        "gang sbatch script and submit it. Exit status: 0 submitted or rendered, 1 stdout "
        "could not be written, 2 problem in "
        "the spec, file or options, 3 Slurm unreachable, 4 Slurm refused the job, 130/143 "
        "interrupted (SIGINT/SIGTERM). stdout: one record per spec, in order (the job id, or - "
        "when it got no job).",
        epilog=epilog([Exit.OK, Exit.FAILED, Exit.BAD_INPUT, Exit.SLURM_UNREACHABLE,
                       Exit.SLURM_REFUSED, Exit.SIGINT, Exit.SIGTERM]),
    )
    p.add_argument("spec", metavar="JOB.yaml|JOB.json", nargs="+" if specs_required else "*",
                   help="job spec file(s); several are validated together, then submitted in order")
    p.add_argument("--dry-run", action="store_true",
                   help="print the sbatch script instead of submitting (needs no Slurm)")
    p.add_argument("--json", action="store_true",
                   help='print one JSON object per spec: {"spec", "job_id" (int or null), '
                   '"error" (null or the reason), "script"}')
    p.add_argument("--partition", metavar="P", help="Slurm partition (default: the cluster's)")
    p.add_argument("--param", metavar="k=v", action="append", default=[],
                   help="override a v2 parameter (<%% $parameters.k %%>) or a v1 jobEnvs entry; "
                   "repeatable")
    p.add_argument("--container-runtime", choices=RUNTIMES,
                   help="run each role's image with pyxis (srun --container-image), apptainer "
                   "(apptainer exec --nv) or not at all (default: none, or the site config)")
    p.add_argument("--gpus-per-node", type=int, metavar="N",
                   help="GPUs per node for packing (default: the partition's largest node, else 8)")
    p.add_argument("--cores-per-node", type=int, metavar="N",
                   help="cores per node for packing (default: the partition's largest node, else 16)")
    p.add_argument("--mem-per-node", type=int, metavar="MiB",
                   help="memory per node for packing, MiB (default: the partition's largest "
                   "node, else 64000)")
    p.add_argument("--shards-per-gpu", type=int, metavar="N",
                   help="GPU shards per GPU for a fractional gpu (default: the site config, "
                   "else the partition's nodes)")
    p.add_argument("--cluster-shape", action="store_true",
                   help="with --dry-run, pack for the partition's largest node as Slurm lists "
                   "it (a submit always asks; --dry-run alone packs for the defaults)")
    p.add_argument("--gpu-type", metavar="TYPE", help="GRES type when the spec names none (e.g. a100)")
    p.add_argument("--signal", metavar="SIG", help="checkpoint signal (default USR2; spec extras.checkpoint wins)")
    p.add_argument("--grace", type=int, metavar="SECONDS",
                   help="seconds between checkpoint signal and requeue (default 60)")
    p.add_argument("--enforce-binding", action="store_true", default=None,
                   help="add --gres-flags=enforce-binding to GPU roles (CPU-GPU affinity)")
    p.add_argument("--checkpoint-root", metavar="DIR",
                   help="directory for per-job checkpoint dirs (default $SLURM_SUBMIT_DIR/dl-checkpoints)")
    p.add_argument("--output", metavar="PATTERN", help="sbatch --output pattern (default slurm-%%j.out)")
    p.add_argument("--site-config", metavar="FILE",
                   help="site YAML with option defaults (default $DLSUBMIT_CONFIG)")
    p.add_argument("--account", metavar="A", help="Slurm account (default: the virtual cluster's, else yours)")
    p.add_argument("--qos", metavar="Q", help="Slurm QOS (default: the virtual cluster's, else yours)")
    p.add_argument("--secrets", metavar="FILE",
                   help="NAME=VALUE lines (mode 0600) for <%% $secrets.NAME %%>; read by the job "
                   "at run time, never written into the script")
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """dlsubmit's arguments, specs and options in any order (``dlsubmit a.yaml --dry-run
    b.yaml``); every word after the first ``--`` is a spec (``dlsubmit -- -spec.yaml``).
    ``--`` is split off here: Python 3.11's ``parse_intermixed_args`` loses the words after
    it. Raises SystemExit (status 2) after a one-line usage error."""
    words = list(sys.argv[1:] if argv is None else argv)
    after: list[str] = []
    at = words.index("--") if "--" in words else -1
    if at >= 0 and not (at and _takes_value(build_parser(), words[at - 1])):
        words, after = words[:at], words[at + 1:]   # '--' as an option's value: refused below
    args = build_parser(specs_required=not after).parse_intermixed_args(words)
    args.spec = [*args.spec, *after]
    return args


def _takes_value(parser: argparse.ArgumentParser, word: str) -> bool:
    """Whether ``word`` is an option (or an abbreviation of one) that takes a value."""
    actions = parser._option_string_actions   # argparse keeps no public map of its options
    found = [a for o, a in actions.items() if o == word or (word.startswith("--") and o.startswith(word))]
    return bool(found) and all(a.nargs != 0 for a in found)


_FLAG_TO_OPTION = {
    "partition": "partition", "container_runtime": "container_runtime",
    "gpus_per_node": "gpus_per_node", "cores_per_node": "cores_per_node",
    "mem_per_node": "mem_per_node_mib", "shards_per_gpu": "shards_per_gpu", "gpu_type": "gpu_type", "signal": "signal",
    "grace": "grace_s", "enforce_binding": "enforce_binding",
    "checkpoint_root": "checkpoint_root", "output": "output", "account": "account", "qos": "qos",
}


def options_from_args(args: argparse.Namespace) -> RenderOptions:
    """Site file values, then command-line flags. Raises :class:`SpecError` with every bad
    value, each line naming where it came from (``FILE: key ...`` or ``--flag ...``)."""
    return _options_and_given(args)[0]


def _options_and_given(args: argparse.Namespace) -> tuple[RenderOptions, set[str]]:
    """:func:`options_from_args` and the node-shape fields the site file or a flag set."""
    if os.environ.get("DLSUBMIT_CONFIG") == "" and args.site_config is None:
        # an empty option value already stopped the parse (slurm_plugin.common.cli.ArgumentParser)
        raise SpecError(["DLSUBMIT_CONFIG: empty; name a site config file or unset it"])
    site = args.site_config if args.site_config is not None else os.environ.get("DLSUBMIT_CONFIG")
    values: dict[str, Any] = dict(load_site(site))
    flags = {}
    for flag, field in _FLAG_TO_OPTION.items():
        v = getattr(args, flag)
        if v is not None:
            values[field] = flags[field] = v
    flag_of = {field: "--" + flag.replace("_", "-") for flag, field in _FLAG_TO_OPTION.items()}
    problems = [flag_of[field] + line[len(field):] for field, line in check_fields(flags)]
    if problems:
        raise SpecError(problems)
    return RenderOptions(**values), node_shape.given_fields(values, flags)


def _cluster_nodes() -> Any:
    """``nodes(partition)`` for submit/node_shape.py, asking this cluster's Slurm."""
    from slurm_plugin.slurm.client import SlurmClient

    return node_shape.ask_slurm(SlurmClient())


#: options only read as file names, never written into the script
_READ_ONLY_PATHS = frozenset({"spec", "site_config"})


def _check_utf8(args: argparse.Namespace) -> None:
    """Refuse an option value that is not UTF-8 text (a byte the locale could not decode reaches
    Python as a lone surrogate): every option but the spec files and ``--site-config`` is
    written into the batch script, which Slurm and the job read as UTF-8, as the spec files
    themselves must be. Raises :class:`SpecError`, one line per option."""
    problems = []
    for dest, value in vars(args).items():
        if dest in _READ_ONLY_PATHS:
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and not utf8_text(v):
                problems.append(f"--{dest.replace('_', '-')} {visible(v)}: not UTF-8 text; the "
                                "batch script holds it as UTF-8: give it in UTF-8")
    if problems:
        raise SpecError(problems)


def sbatch_partition(opts: RenderOptions, job: Any, flag: bool) -> tuple[str | None, str]:
    """The partition sbatch will put the job in, and where it comes from for messages:
    ``SBATCH_PARTITION`` when set (sbatch(1): input environment variables override the
    script's ``#SBATCH`` options, where dlsubmit writes ``--partition``), else ``--partition``
    (``flag``: given on the command line) or the site config's, else the virtual cluster's;
    None: Slurm's default partition. A list (``a,b``) is read as the nodes of all of them."""
    if os.environ.get("SBATCH_PARTITION"):
        return os.environ["SBATCH_PARTITION"], "SBATCH_PARTITION"
    if opts.partition:
        return opts.partition, "--partition" if flag else "the site config's partition"
    vc = job.virtual_cluster or DEFAULT_VC
    return (opts.virtual_cluster(job.virtual_cluster).partition,
            f"the site config's virtual_clusters.{vc}.partition")


def _render_all(args: argparse.Namespace) -> tuple[RenderOptions, list[tuple[str, Any, str]]]:
    """The options, and (spec path, job, script) for every spec. Raises :class:`SpecError`
    with every problem of every spec (prefixed by the spec's name when there are several)."""
    _check_utf8(args)
    opts, given = _options_and_given(args)
    overrides = params.parse_overrides(args.param)
    ask = None if args.dry_run and not args.cluster_shape else _cluster_nodes()
    origin = {field: f"--{field.replace('_', '-')}" for field in ("gpu_type", "shards_per_gpu")
              if getattr(args, field) is not None}
    out, problems, notes = [], [], []
    for path in args.spec:
        try:
            job = load.load(path, overrides)
            # a named secrets file is checked even when the spec references no secret
            sfile = secrets.check(args.secrets, job.secrets) if args.secrets else None
            mounts.check(job, opts, os.getcwd())   # sbatch runs here: the job's submit dir
            mounts.check_writable(opts, os.getcwd())
            part, origin["partition"] = sbatch_partition(opts, job, args.partition is not None)
            shape = node_shape.choose(opts, given, part, ask, job, origin)
            # a submit to an unreachable Slurm fails and says so: no note about the shape then
            if shape.note and shape.note not in notes and not (shape.unreachable and not args.dry_run):
                notes.append(shape.note)
            out.append((path, job, render_sbatch(job, shape.opts, sfile if job.secrets else None)))
        except SpecError as exc:
            name = visible(path)  # a file's own problems already start with its name
            problems += [f"{name}: {p}" if len(args.spec) > 1 and not p.startswith(name + ":")
                         else p for p in exc.problems]
    if problems:
        raise SpecError(problems)
    for note in notes:
        print(f"dlsubmit: note: {note}", file=sys.stderr)
    return opts, out


def _submit(script: str, extra_args: list[str], env: dict[str, str]) -> int:
    from slurm_plugin.slurm.client import SlurmClient

    return SlurmClient().submit(script, extra_args, env=env)


def _find(token: str) -> list[int]:
    from slurm_plugin.slurm.client import SlurmClient

    return SlurmClient().find_by_comment(token)


def _maybe_queued(message: str) -> bool:
    """Did sbatch give up waiting for an answer (so slurmctld may have queued the job)? A
    refused connection or a missing SLURM_CONF means the request never arrived."""
    low = message.lower()
    return "timed out" in low or "no answer within" in low


def _lookup(token: str) -> list[int] | None:
    """Job ids carrying ``token`` (``None`` when Slurm could not be asked)."""
    from slurm_plugin.slurm.client import SlurmError

    found: list[int] | None = None
    for attempt in range(LOOKUP_TRIES):
        try:
            found = _find(token)
        except SlurmError:
            found = None
        if found:
            return found
        if attempt + 1 < LOOKUP_TRIES:
            time.sleep(LOOKUP_WAIT_S)
    return found


def _submit_one(job: Any, script: str, opts: RenderOptions,
                env: dict[str, str], stop: Any = None) -> tuple[int | None, str]:
    """Submit once; returns (job id, "") or (None, error line). Never submits twice. When
    dlsubmit was interrupted (``stop.signum``) while sbatch ran (Ctrl-C reaches sbatch too), a
    failed sbatch is looked up by its token once, so a job queued anyway is still reported."""
    from slurm_plugin.slurm.client import SlurmError, SlurmUnreachable

    token = TOKEN_PREFIX + os.urandom(16).hex()  # 128 random bits (uuid4's, without its import)
    comment = f"{contract_comment(job, opts)} {token}"
    try:
        return _submit(script, [f"--comment={comment}"], env), ""
    except SlurmError as exc:
        if stop is not None and stop.signum:
            return _after_interrupt(token, exc.message)
        if isinstance(exc, SlurmUnreachable):
            return _after_unreachable(token, exc.message)
        return None, f"{REFUSED}{exc.message}"


def _after_interrupt(token: str, message: str) -> tuple[int | None, str]:
    """sbatch failed after a SIGINT/SIGTERM: was the job queued anyway? (one token look-up)"""
    from slurm_plugin.slurm.client import SlurmError

    try:
        found = _find(token)
    except SlurmError:
        return None, (f"interrupted while sbatch ran ({message}); before submitting again, "
                      f"look for {token} in `squeue --me -o '%i %k'`")
    if found:
        return found[0], ""
    return None, f"not submitted: interrupted while sbatch ran ({message})"


def _after_unreachable(token: str, message: str) -> tuple[int | None, str]:
    """sbatch could not reach Slurm: (job id, "") when the job was queued anyway, else
    (None, error line)."""
    if not _maybe_queued(message):
        return None, f"{UNREACHABLE}{message}"
    found = _lookup(token)
    if found:
        print(f"dlsubmit: warning: sbatch said '{message}', but job {found[0]} carries this "
              f"submission's token ({token}): it was queued once; not submitting again",
              file=sys.stderr)
        return found[0], ""
    if found is None:
        return None, (f"{UNREACHABLE}{message}; could not check whether the job was "
                      f"queued: before submitting again, look for {token} in "
                      "`squeue --me -o '%i %k'`")
    return None, (f"{UNREACHABLE}{message}; no job carries this submission's token "
                  f"({token}), so nothing was queued")


SEPARATOR_PREFIX = "#dlsubmit-spec "


def separator(path: str, index: int, total: int, script: str) -> str:
    """The header line printed before EACH script of a multi-spec ``--dry-run``:
    ``#dlsubmit-spec 2/3 bytes=4711 b.yaml``: the spec's number, how many, the exact UTF-8 size
    of the script that follows (so a reader splits by size, whatever a user's command holds,
    ``#dlsubmit-spec`` lookalikes included), and the name with control characters escaped (one
    bash comment line; no line of a rendered script itself starts with ``#dlsubmit-spec``)."""
    size = len(script.encode("utf-8", "surrogatepass"))
    return f"{SEPARATOR_PREFIX}{index}/{total} bytes={size} {visible(path)}"


def split_dry_run(text: str) -> list[tuple[str, str]]:
    """Split a multi-spec ``--dry-run`` output into (escaped spec name, script) pairs (the
    reader the header format is made for). Raises ``ValueError`` on text not in that format."""
    data, out = text.encode("utf-8", "surrogatepass"), []
    while data:
        line, _, data = data.partition(b"\n")
        head = line.decode("utf-8", "surrogatepass")
        if not head.startswith(SEPARATOR_PREFIX):
            raise ValueError(f"expected a {SEPARATOR_PREFIX.strip()} line, got {head[:60]!r}")
        _, _, size_word, name = head.split(" ", 3)
        size = int(size_word.removeprefix("bytes="))
        out.append((name, data[:size].decode("utf-8", "surrogatepass")))
        data = data[size:]
    return out


NO_JOB = "-"
"""The plain-output line of a spec that got no job (refused, unreachable, or not submitted
because dlsubmit was interrupted); the reason is on stderr, naming the spec."""

NOT_STARTED = "not submitted: dlsubmit was interrupted first"
"""The ``--json`` ``error`` of a spec whose sbatch never started because of SIGINT/SIGTERM."""

UNREACHABLE, REFUSED = "Slurm unreachable: ", "Slurm refused the job: "
"""How the error line of a spec that got no job starts; its exit status follows it
(:func:`_error_exit`)."""


def _error_exit(error: str) -> Exit:
    """The exit status of a spec whose submission ended with the error line ``error``."""
    return Exit.SLURM_UNREACHABLE if error.startswith(UNREACHABLE) else Exit.SLURM_REFUSED


class _Interrupted(Exception):
    """A SIGINT/SIGTERM arrived before anything was submitted."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Stop:
    """What the SIGINT/SIGTERM handler sets: the signal number, and whether submitting started
    (before that, the handler ends the run at once; after it, no new sbatch starts, the ones
    running finish and are reported)."""

    def __init__(self) -> None:
        self.signum = 0
        self.submitting = False

    def handler(self, signum: int, _frame: object) -> None:
        self.signum = self.signum or signum
        if not self.submitting:
            raise _Interrupted(signum)


def _signal_name(signum: int) -> str:
    import signal

    return signal.Signals(signum).name


def _with_signals(stop: _Stop) -> dict[int, Any]:
    """Install ``stop.handler`` for SIGINT and SIGTERM (main thread only); returns the old ones."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, stop.handler) for s in (signal.SIGINT, signal.SIGTERM)}


def _block_stop_signals() -> None:
    """Pool threads block SIGINT/SIGTERM, so the kernel delivers them to the main thread (whose
    handler runs at once, even while it waits for a result), and the ``sbatch`` each thread starts
    inherits the mask: a Ctrl-C sent to the whole terminal process group does not kill an sbatch
    half-way; it finishes and its job id is reported (signal(7): a child inherits the mask)."""
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _restore_signals(old: dict[int, Any]) -> None:
    import signal

    for s, h in old.items():
        signal.signal(s, h)


def _record(path: str, job_id: int | None, error: str, script: str, args: argparse.Namespace) -> str:
    """The one stdout record of a spec (see the module doc): the id or ``-``, or one JSON
    object ``{"spec", "job_id", "error", "script"}``."""
    if args.json:
        return json.dumps({"spec": path, "job_id": job_id, "error": error or None, "script": script})
    return NO_JOB if job_id is None else str(job_id)


def _submit_all(args: argparse.Namespace, opts: RenderOptions, rendered: list[tuple[str, Any, str]],
                stop: _Stop) -> int:
    """Submit every rendered spec, printing (and flushing) each spec's record as soon as it and
    every spec before it are done, so stdout is always in spec order. Returns the exit status."""
    from concurrent.futures import ThreadPoolExecutor

    many = len(rendered) > 1
    outer = environ.inside_job(os.environ)
    if outer:
        print(f"dlsubmit: warning: running inside job {outer}; the new job gets a clean "
              "environment (that job's SLURM_*, SRUN_*, CUDA_VISIBLE_DEVICES are not passed on)",
              file=sys.stderr)
    env = environ.clean(os.environ)

    def one(r: tuple[str, Any, str]) -> tuple[int | None, str]:
        if stop.signum:
            return None, NOT_STARTED
        return _submit_one(r[1], r[2], opts, env, stop)

    status = Exit.OK
    submitted: list[str] = []
    missed: list[str] = []
    # sbatch calls are independent: several at once (slurmctld serialises what must be); the
    # pool takes specs in order, so at most SUBMIT_THREADS run ahead of the one printed next
    with ThreadPoolExecutor(max_workers=min(SUBMIT_THREADS, len(rendered)),
                            initializer=_block_stop_signals) as pool:
        futures = [pool.submit(one, r) for r in rendered]
        for (path, _, script), fut in zip(rendered, futures):
            job_id, error = fut.result()
            if error and error != NOT_STARTED:  # those are listed once, in the summary
                print(f"dlsubmit: {visible(path) + ': ' if many else ''}{error}", file=sys.stderr)
                status = status or _error_exit(error)
            (submitted if job_id is not None else missed).append(path)
            print(_record(path, job_id, error, script, args), flush=True)
    if stop.signum:
        print(f"dlsubmit: interrupted by {_signal_name(stop.signum)}: {len(submitted)} of "
              f"{len(rendered)} spec(s) submitted (their ids are on stdout); not submitted: "
              + (", ".join(visible(p) for p in missed) or "none"), file=sys.stderr)
        return signalled(stop.signum)
    return status


@quiet_on_closed_stdout
@without_final_gc
def main(argv: list[str] | None = None) -> int:
    """Run dlsubmit; returns the exit status (0, 1, 2, 3, 4, 130 or 143, see the module doc)."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    stop = _Stop()
    old = _with_signals(stop)
    try:
        return _run(args, stop)
    except _Interrupted as exc:
        print(f"dlsubmit: interrupted by {_signal_name(exc.signum)} before anything was "
              "submitted", file=sys.stderr)
        return signalled(exc.signum)
    finally:
        _restore_signals(old)


def _run(args: argparse.Namespace, stop: _Stop) -> int:
    try:
        opts, rendered = _render_all(args)
    except SpecError as exc:
        for line in exc.problems:
            print(f"dlsubmit: {line}", file=sys.stderr)
        return Exit.BAD_INPUT
    many = len(rendered) > 1
    for path, job, _ in rendered:
        for w in (*job.warnings, *advice.warnings(job, opts),
                  *advice.flag_warnings(job, args.signal, args.grace)):
            print(f"dlsubmit: warning: {visible(path) + ': ' if many else ''}{w}", file=sys.stderr)
    if not args.dry_run:
        stop.submitting = True
        if stop.signum:  # arrived between the checks above and here
            raise _Interrupted(stop.signum)
        return _submit_all(args, opts, rendered, stop)
    for i, (path, _, script) in enumerate(rendered):
        if args.json:
            print(json.dumps({"spec": path, "job_id": None, "error": None, "script": script}))
        else:
            if many:
                print(separator(path, i + 1, len(rendered), script))
            sys.stdout.write(script)
    return Exit.OK


if __name__ == "__main__":
    raise SystemExit(main())
