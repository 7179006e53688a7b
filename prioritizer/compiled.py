"""The policy compiled for replays: built with mypyc outside the source tree, used by the
replay commands only (``dlprio simulate``, ``tune``, ``history``), never by the daemon.

Why: a replay spends its time in the policy's event loop (docs/simulator.md, "Speed");
compiling the unchanged policy modules (:data:`MODULES`) with mypyc (part of mypy) takes
13-25 % of the instructions off a replay (docs/simulator.md, "Speed"), with the per-job
CSV byte-identical (``tests/prioritizer/test_compiled.py`` checks the regression fixtures against it).

How it stays safe:

* **Out of the source tree.** ``dlprio compile`` builds into
  ``<root>/<fingerprint>/`` (:func:`compiled_root`: ``$DLPRIO_COMPILED_DIR``, else
  ``$XDG_CACHE_HOME/tiresias-slurm/compiled``, else ``~/.cache/tiresias-slurm/compiled``).
  Nothing is written beside the ``.py`` files, so an editable install never imports a stale
  extension in place of an edited module.
* **Checked against the sources.** The fingerprint (:func:`fingerprint`) hashes every
  ``.py`` file of ``prioritizer/policy`` (the compiled modules and those whose types and
  ``Final`` constants they were compiled against) and the interpreter's extension ABI. A
  build is used only when its fingerprint is the current one; after an edit, replays run
  the interpreted policy until ``dlprio compile`` is run again.
* **Replays only.** :func:`activate` is called by ``dlprio``'s entry point
  (:func:`prioritizer.cli.entry`) for the replay commands
  (:data:`prioritizer.cli.REPLAY_COMMANDS`) and by tune's array task
  (:mod:`prioritizer.tune.task`), before anything imports the policy.
  The daemon imports the interpreted modules, so compiled code's run-time type checks
  (mypyc raises ``TypeError`` where an annotation is not met) never reach production.
* **Not under a Python subclass.** ``simulate --tenants`` extends the scheduler in Python
  (:func:`extends_scheduler`), which mypyc refuses for a compiled class: it runs interpreted.

``DLPRIO_COMPILED`` chooses: ``auto`` (default: the current build when there is one),
``on`` (it must be used: exit 2 with the fix when missing or unloadable), ``off`` (always
interpreted). Process pools (``--compare``, ``tune``) fork with the loaded modules; Slurm
array tasks inherit the environment, so a build in a shared ``DLPRIO_COMPILED_DIR`` serves
a whole sweep.

Building needs a C compiler, the Python headers (Debian: ``gcc libc6-dev python3-dev``) and
mypy (``pip install 'tiresias-slurm[compiled]'``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

from prioritizer.command import CliError, Exit
from slurm_plugin.common.cli import visible

#: The policy modules compiled, in import order (``model``, ``config``, ``validation``,
#: ``gittins`` and ``durations`` stay interpreted: the scheduler builds ``JobView`` objects
#: without their ``__init__``, and the configs are read once).
MODULES: tuple[str, ...] = tuple(
    f"prioritizer.policy.{name}"
    for name in ("placement", "victims", "victim_search", "preemption", "memo", "decide",
                 "fast.records", "fast.node_bound", "fast.victim_order", "fast.search",
                 "fast.state", "fast.one_node", "fast.quiet", "fast.start_walk", "fast.waiters",
                 "fast.queue_room",
                 "fast.queue_victims", "fast.incremental"))

#: ``DLPRIO_COMPILED`` values.
MODES = ("auto", "on", "off")
ENV_MODE, ENV_DIR = "DLPRIO_COMPILED", "DLPRIO_COMPILED_DIR"
MANIFEST = "manifest.json"
#: mypyc's shared module of a multi-module build (``<hash>__mypyc``), beside the package.
_SHARED = re.compile(r"[0-9a-f]+__mypyc")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
#: A work directory of a build (``.build-*``) untouched this long was left by a killed build.
STALE_WORK_S = 3600.0
#: mypyc's options and mypy's flags, part of the fingerprint (a build with other options is
#: another build). The modules compiled must type-check; those they import are analysed for
#: their types but their own typing is not this build's concern (``--follow-imports=silent``).
MYPYC_OPTIONS = {"opt_level": "3", "debug_level": "1"}
MYPY_FLAGS = ("--follow-imports=silent",)

_BUILD_SCRIPT = """\
import sys
from setuptools import setup
from mypyc.build import mypycify
setup(name="dlprio-compiled-policy", script_args=["build_ext", "--inplace"],
      ext_modules=mypycify(sys.argv[2:], **__import__("json").loads(sys.argv[1])))
"""


def policy_dir() -> Path:
    """The directory of the ``prioritizer.policy`` sources this process imports."""
    spec = importlib.util.find_spec("prioritizer.policy")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def _sources(directory: Path) -> list[Path]:
    """The module sources of ``directory`` and its sub-packages (``fast/``): ``*.py`` except
    hidden names (an editor's lock or backup file such as ``.#decide.py``, which no import
    can name), sorted."""
    return sorted(p for p in directory.rglob("*.py")
                  if not any(part.startswith(".") for part in p.relative_to(directory).parts))


def fingerprint(source: Path | None = None) -> str:
    """Hex SHA-256 of every module source of ``source`` (default :func:`policy_dir`), by
    name and content, with the extension suffix (``sysconfig`` ``EXT_SUFFIX``: interpreter
    version and platform), :data:`MYPYC_OPTIONS` and :data:`MYPY_FLAGS`. Raises CliError
    (exit 1) naming a source that cannot be read."""
    source = policy_dir() if source is None else source
    digest = hashlib.sha256()
    digest.update(f"{sysconfig.get_config_var('EXT_SUFFIX')}\0".encode())
    digest.update(json.dumps([MYPYC_OPTIONS, MYPY_FLAGS], sort_keys=True).encode() + b"\0")
    for path in _sources(source):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read the policy source {visible(path)} "
                           f"({exc.strerror or exc})", Exit.FAILED) from None
        digest.update(f"{path.relative_to(source).as_posix()}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def compiled_root(env: Mapping[str, str] = os.environ) -> Path:
    """Where builds live (one subdirectory per fingerprint): ``$DLPRIO_COMPILED_DIR``, else
    ``$XDG_CACHE_HOME/tiresias-slurm/compiled`` (a relative ``XDG_CACHE_HOME`` is ignored, as
    the XDG base directory specification says), else ``~/.cache/tiresias-slurm/compiled``.
    A blank ``DLPRIO_COMPILED_DIR`` counts as unset; a relative one raises CliError (exit 2):
    every process of a sweep (array tasks start in their own directory) must find the same
    builds."""
    given = env.get(ENV_DIR, "").strip()
    if given:
        root = os.path.expanduser(given)
        if not os.path.isabs(root):
            raise CliError(f"{ENV_DIR}={visible(given)}: not an absolute path; give the "
                           f"directory from / (every replay of a sweep must find it)")
        return Path(root)
    cache = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        # os.path.expanduser never raises (Path.expanduser does without a home directory)
        cache = os.path.expanduser("~/.cache")
    return Path(cache) / "tiresias-slurm" / "compiled"


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def inspect(directory: Path) -> tuple[dict[str, Path] | None, str]:
    """The build in ``directory``: (the extension file of every module name, ``""``) when it
    is complete and intact; (None, ``""``) when there is none; (None, the problem) when there
    is a damaged one. Intact: a manifest naming this fingerprint, every :data:`MODULES` and
    only them and mypyc's shared module, each a regular file of ``directory`` (no link) with
    the size and SHA-256 recorded when it was built (a truncated extension would crash the
    process that maps it, with SIGBUS, instead of failing to import)."""
    try:
        if not directory.exists() and not directory.is_symlink():
            return None, ""
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"no {MANIFEST}"
    except (OSError, ValueError) as exc:
        return None, f"{MANIFEST} unreadable ({exc.__class__.__name__})"
    if not isinstance(manifest, dict) or manifest.get("fingerprint") != directory.name:
        return None, f"{MANIFEST} is not this build's"
    listed, sums = manifest.get("files"), manifest.get("sha256")
    if not isinstance(listed, dict) or not isinstance(sums, dict) \
            or not set(MODULES) <= set(listed):
        return None, f"{MANIFEST} does not list the policy modules"
    files: dict[str, Path] = {}
    for name, file in listed.items():
        if not (name in MODULES or _SHARED.fullmatch(name)):
            return None, f"{MANIFEST} names '{visible(name)}', which is not a policy module"
        if not isinstance(file, str) or file != Path(file).name or file in ("", ".", "..") \
                or "\0" in file:
            return None, f"{MANIFEST} names a file outside the build: '{visible(file)}'"
        path = files[name] = directory / file
        try:
            if path.is_symlink() or not path.is_file():
                return None, f"{visible(file)} is not a regular file"
            if _sha256(path) != sums.get(file):
                return None, f"{visible(file)} is not the file that was built"
        except OSError as exc:
            return None, f"{visible(file)} unreadable ({exc.strerror or exc})"
    return files, ""


def read_build(directory: Path) -> dict[str, Path] | None:
    """:func:`inspect`'s files, or None when there is no intact build."""
    return inspect(directory)[0]


class _Finder(importlib.abc.MetaPathFinder):
    """Serves the modules of one build from their extension files, ahead of the source."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = dict(files)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


def _forget(names: Sequence[str]) -> None:
    """Drop half-loaded modules so that the source ones are imported instead."""
    for name in names:
        sys.modules.pop(name, None)
        parent, _, child = name.rpartition(".")
        if parent in sys.modules and hasattr(sys.modules[parent], child):
            delattr(sys.modules[parent], child)


def _fallback(mode: str, problem: str) -> str:
    """``on``: CliError (exit 2) with the fix; ``auto``: the problem on stderr, and the
    interpreted policy."""
    if mode == "on":
        raise CliError(f"{ENV_MODE}=on: {problem}; rebuild it with `dlprio compile --force`, "
                       f"or unset {ENV_MODE}")
    print(f"dlprio: {problem}; using the interpreted policy (`dlprio compile --force` "
          f"rebuilds it)", file=sys.stderr)
    return "interpreted"


def extends_scheduler(words: Sequence[str]) -> bool:
    """Whether the command line ``words`` (``dlprio``'s arguments) is a replay that extends the
    policy's scheduler with a Python subclass: ``simulate --tenants FILE`` (or
    ``--tenants=FILE``), whose :class:`prioritizer.sim.tenant_sched.TenantScheduler` mypyc
    refuses over a compiled ``Scheduler`` (``TypeError: interpreted classes cannot inherit from
    compiled``). Such a replay runs the interpreted policy."""
    return bool(words) and words[0] == "simulate" and any(
        w == "--tenants" or w.startswith("--tenants=") for w in words[1:])


def activate(env: Mapping[str, str] = os.environ, words: Sequence[str] = ()) -> str:
    """Import the compiled policy for this process when ``DLPRIO_COMPILED`` allows it and a
    build matches the current sources; returns ``"compiled"`` or ``"interpreted"``. A command
    line ``words`` that extends the scheduler (:func:`extends_scheduler`) is interpreted:
    with ``on`` a CliError (exit 2) names why.

    Takes effect only before anything imports :data:`MODULES`; afterwards the process keeps
    the modules it has (a mix of compiled and interpreted classes would not work), and
    ``on`` then requires them to be compiled. Raises CliError (exit 2) for an unknown mode
    or a relative ``DLPRIO_COMPILED_DIR``, and with ``on`` when there is no intact current
    build or it does not load; with ``auto`` a damaged build, one that does not load, or a
    policy source that cannot be read is reported on stderr and the interpreted policy is
    used (no build at all is not reported).
    """
    mode = env.get(ENV_MODE, "") or "auto"
    if mode not in MODES:
        raise CliError(f"{ENV_MODE}={visible(mode)!r}: not a mode; valid: {', '.join(MODES)}")
    if mode == "off":
        return "interpreted"
    if extends_scheduler(words):
        if mode == "on":
            raise CliError(f"{ENV_MODE}=on: simulate --tenants replays with the interpreted "
                           "policy (its tenant scheduler extends the policy's in Python, which "
                           f"a compiled class does not allow); set {ENV_MODE}=auto or off")
        return "interpreted"
    loaded = [name for name in MODULES if name in sys.modules]
    if loaded:   # imported before: the process keeps what it has
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        if all(str(getattr(sys.modules[name], "__file__", "")).endswith(suffix)
               for name in loaded):
            return "compiled"
        if mode == "on":
            raise CliError(f"{ENV_MODE}=on: {loaded[0]} was imported before the compiled "
                           f"policy could be")
        return "interpreted"
    root = compiled_root(env)
    try:
        current = fingerprint()
    except CliError as exc:
        return _fallback(mode, str(exc))
    here = root / current
    files, problem = inspect(here)
    if problem:
        return _fallback(mode, f"the compiled policy in {visible(here)} is damaged ({problem})")
    if files is None:
        if mode == "on":
            raise CliError(
                f"{ENV_MODE}=on: no compiled policy for these sources in {visible(root)} "
                f"(fingerprint {current[:12]}); build it with `dlprio compile`, or unset "
                f"{ENV_MODE}")
        return "interpreted"
    finder = _Finder(files)
    sys.meta_path.insert(0, finder)
    try:
        for name in MODULES:
            importlib.import_module(name)
    except ImportError as exc:
        sys.meta_path.remove(finder)
        _forget(list(files))
        return _fallback(mode, f"the compiled policy in {visible(here)} does not load "
                               f"({visible(exc)})")
    return "compiled"


def _needs() -> str:
    """What building lacks among mypy (with mypyc) and setuptools, as a message; "" if none."""
    missing = []
    for module, package in (("mypyc.build", "mypy"), ("setuptools", "setuptools")):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    if not missing:
        return ""
    return (f"building the compiled policy needs {' and '.join(missing)}: "
            "pip install -e '.[compiled]' in a checkout (pip install "
            "'tiresias-slurm[compiled]' otherwise), and a C compiler with the Python headers "
            "(Debian: apt-get install gcc libc6-dev python3-dev)")


def _unwritable(root: Path, exc: OSError) -> CliError:
    return CliError(f"build directory {visible(root)}: {exc.strerror or exc}; set {ENV_DIR} to "
                    f"a directory you can write", Exit.BAD_INPUT)


def _compile(work: Path, log_path: Path) -> int:
    """Run mypyc on the copied sources in ``work/src``; its exit status. The compile runs in
    its own session so that an interrupted ``dlprio compile`` (Ctrl-C, SIGTERM) stops it and
    the compilers it started too."""
    sources = [f"{name.replace('.', '/')}.py" for name in MODULES]
    with log_path.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _BUILD_SCRIPT, json.dumps(MYPYC_OPTIONS), *MYPY_FLAGS,
             *sources], cwd=work / "src", stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            return proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


def _failed(root: Path, current: str, log_path: Path) -> CliError:
    """The error of a compile that failed: the end of its log, kept beside the builds."""
    kept = root / f"build-failed-{current[:12]}.log"
    shutil.copyfile(log_path, kept)
    text = log_path.read_text(encoding="utf-8", errors="replace")
    tail = [visible(line) for line in text.splitlines()[-15:]]
    hint = ""
    # setuptools' words for a compiler that could not run: "error: command 'X' failed"
    # (older) or "error: Command '['X', ...]' returned non-zero exit status N." (newer)
    if re.search(r"error: command '[^']*' failed|error: Command '\[.*\]' returned non-zero",
                 text, re.I):
        hint = ("\nthe C compiler did not run: install gcc and the Python headers (Debian: "
                "apt-get install gcc libc6-dev python3-dev), or name a compiler in CC")
    return CliError(f"mypyc could not compile the policy (full log: {visible(kept)}):\n"
                    + "\n".join(tail) + hint, Exit.FAILED)


def _install(staging: Path, target: Path, work: Path) -> None:
    """Move the finished build to ``target``: whatever is there (an old or damaged build, a
    link) is first moved aside into ``work``, so readers see one build or the other for the
    span of two renames. A concurrent build that got there first is kept."""
    if target.exists() or target.is_symlink():
        os.rename(target, work / "replaced")
    try:
        os.rename(staging, target)
    except OSError:
        if read_build(target) is None:
            raise


def build(root: Path, force: bool = False) -> tuple[Path, bool, list[str]]:
    """Build the current sources' compiled policy into ``root/<fingerprint>`` unless an
    intact build is there (or ``force``; a damaged one is rebuilt); returns (that directory,
    whether it was built, mypyc's warnings: each a ``file:line: warning: ...`` line, such as
    a generator expression compiled as a list, a performance trap this project's policy
    avoids).

    The sources are copied to a temporary directory under ``root`` and compiled there
    (``setup.py build_ext --inplace`` through mypyc); the extensions and the manifest (with
    each file's SHA-256) are moved into place by rename, so a failed, interrupted or
    concurrent build never leaves a partial one. Raises CliError: exit 2 when mypy or
    setuptools is missing or ``root`` cannot be written, exit 1 when the compile fails (the
    end of its log, whose path is named)."""
    lacking = _needs()
    if lacking:
        raise CliError(lacking)
    import mypy.version

    source = policy_dir()
    current = fingerprint(source)
    target = root / current
    if not force and read_build(target) is not None:
        return target, False, []
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    except OSError as exc:
        raise _unwritable(root, exc) from None
    try:
        tree = work / "src" / "prioritizer" / "policy"
        tree.mkdir(parents=True)
        (tree.parent / "__init__.py").write_text("", encoding="utf-8")
        for path in _sources(source):
            copy = tree / path.relative_to(source)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
        if fingerprint(tree) != current:
            raise CliError(f"{visible(source)} changed while it was copied; run `dlprio "
                           f"compile` again", Exit.FAILED)
        log_path = work / "build.log"
        started = time.monotonic()
        if _compile(work, log_path) != 0:
            raise _failed(root, current, log_path)
        warnings = [visible(line) for line in log_path.read_text(
            encoding="utf-8", errors="replace").splitlines() if ": warning: " in line]
        staging = work / "out"
        staging.mkdir()
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        files: dict[str, str] = {}
        # mypyc's shared module beside the package (top level), one shim per module
        for package, found in (("", work / "src"), ("prioritizer.policy.", tree),
                               ("prioritizer.policy.fast.", tree / "fast")):
            for ext in found.glob(f"*{suffix}"):
                name = package + ext.name[:-len(suffix)]
                files[name] = f"{name}{suffix}"
                shutil.copy2(ext, staging / files[name])
        missing = [name for name in MODULES if name not in files]
        if missing:
            raise CliError(f"mypyc built no extension for {', '.join(missing)}", Exit.FAILED)
        (staging / MANIFEST).write_text(json.dumps({
            "fingerprint": current, "files": files,
            "sha256": {file: _sha256(staging / file) for file in files.values()},
            "mypy": mypy.version.__version__, "python": sys.version.split()[0],
            "options": MYPYC_OPTIONS, "build_seconds": round(time.monotonic() - started, 1),
        }, indent=2) + "\n", encoding="utf-8")
        _install(staging, target, work)
    except OSError as exc:
        raise _unwritable(root, exc) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target, True, warnings


def prune(root: Path, keep: str, now: float | None = None) -> list[Path]:
    """Remove from ``root`` the builds other than fingerprint ``keep`` (directories named by
    a fingerprint whose manifest names that fingerprint), the logs of failed builds, and the
    work directories of builds killed more than :data:`STALE_WORK_S` ago; returns what was
    removed. Anything else stays (a shared ``DLPRIO_COMPILED_DIR`` may hold other files).
    Raises CliError (exit 2) when something cannot be removed."""
    now = time.time() if now is None else now
    removed = []
    try:
        entries = sorted(root.iterdir()) if root.is_dir() else []
        for path in entries:
            if path.is_symlink():
                continue
            if path.is_dir() and _FINGERPRINT.fullmatch(path.name) and path.name != keep \
                    and _built_for(path):
                shutil.rmtree(path)
            elif path.is_dir() and path.name.startswith(".build-") \
                    and now - path.stat().st_mtime > STALE_WORK_S:
                shutil.rmtree(path)
            elif path.is_file() and re.fullmatch(r"build-failed-[0-9a-f]{12}\.log", path.name):
                path.unlink()
            else:
                continue
            removed.append(path)
    except OSError as exc:
        raise _unwritable(root, exc) from None
    return removed


def _built_for(directory: Path) -> bool:
    """Whether ``directory`` holds a build (intact or not): its manifest names it."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("fingerprint") == directory.name
