"""The policy compiled for replays: built with mypyc outside the source tree, used by the
replay commands only (``dlprio simulate``, ``tune``, ``history``), never by the daemon.

Why: a replay spends its time in the policy's event loop (docs/simulator.md, "Speed");
compiling the unchanged policy modules (:data:`MODULES`) with mypyc (part of mypy) takes
about a quarter of the instructions off a replay, with the per-job CSV byte-identical
(``tests/test_compiled.py`` checks the regression fixtures against it).

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
* **Replays only.** :func:`activate` is called by ``dlprio``'s entry point for the replay
  commands (:data:`prioritizer.cli.REPLAY_COMMANDS`) before anything imports the policy.
  The daemon imports the interpreted modules, so compiled code's run-time type checks
  (mypyc raises ``TypeError`` where an annotation is not met) never reach production.

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
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

from prioritizer.command import EXIT_FAILURE, CliError

#: The policy modules compiled, in import order (``model``, ``config``, ``validation``,
#: ``gittins`` and ``durations`` stay interpreted: the scheduler builds ``JobView`` objects
#: without their ``__init__``, and the configs are read once).
MODULES: tuple[str, ...] = tuple(
    f"prioritizer.policy.{name}"
    for name in ("placement", "decide", "one_node", "quiet", "incremental"))

#: ``DLPRIO_COMPILED`` values.
MODES = ("auto", "on", "off")
ENV_MODE, ENV_DIR = "DLPRIO_COMPILED", "DLPRIO_COMPILED_DIR"
MANIFEST = "manifest.json"
#: mypyc's shared module of a multi-module build (``<hash>__mypyc``), beside the package.
_SHARED = re.compile(r"[0-9a-f]+__mypyc")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
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


def fingerprint(source: Path | None = None) -> str:
    """Hex SHA-256 of every ``*.py`` of ``source`` (default :func:`policy_dir`), by name
    and content, with the extension suffix (``sysconfig`` ``EXT_SUFFIX``: interpreter
    version and platform) and :data:`MYPYC_OPTIONS`. Raises OSError if a file cannot be read."""
    source = policy_dir() if source is None else source
    digest = hashlib.sha256()
    digest.update(f"{sysconfig.get_config_var('EXT_SUFFIX')}\0".encode())
    digest.update(json.dumps([MYPYC_OPTIONS, MYPY_FLAGS], sort_keys=True).encode() + b"\0")
    for path in sorted(source.glob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def compiled_root(env: Mapping[str, str] = os.environ) -> Path:
    """Where builds live (one subdirectory per fingerprint); see the module doc."""
    if env.get(ENV_DIR):
        return Path(os.path.expanduser(env[ENV_DIR]))
    # os.path.expanduser never raises (Path.expanduser does without a home directory)
    cache = env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "tiresias-slurm" / "compiled"


def read_build(directory: Path) -> dict[str, Path] | None:
    """The extension file of every module name of the build in ``directory`` (the
    :data:`MODULES` and mypyc's shared runtime module), or None when there is no complete
    build there (no manifest, a missing file, another fingerprint's manifest, or a manifest
    that names another module or a file outside ``directory``)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        listed = dict(manifest["files"])
        if manifest["fingerprint"] != directory.name or not set(MODULES) <= set(listed):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    # only the policy's modules and mypyc's shared one, each a file of this directory
    if not all((name in MODULES or _SHARED.fullmatch(name)) and isinstance(file, str)
               and file == Path(file).name and file not in ("", ".", "..")
               for name, file in listed.items()):
        return None
    files = {name: directory / file for name, file in listed.items()}
    return files if all(path.is_file() for path in files.values()) else None


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


def activate(env: Mapping[str, str] = os.environ) -> str:
    """Import the compiled policy for this process when ``DLPRIO_COMPILED`` allows it and a
    build matches the current sources; returns ``"compiled"`` or ``"interpreted"``.

    Takes effect only before anything imports :data:`MODULES`; afterwards the process keeps
    the modules it has (a mix of compiled and interpreted classes would not work), and
    ``on`` then requires them to be compiled. Raises CliError (exit 2) for an unknown mode, and
    with ``on`` when there is no current build or it does not load; with ``auto`` a build
    that does not load is reported on stderr and the interpreted policy is used.
    """
    mode = env.get(ENV_MODE, "") or "auto"
    if mode not in MODES:
        raise CliError(f"{ENV_MODE}={mode!r}: not a mode; valid: {', '.join(MODES)}")
    if mode == "off":
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
    current = fingerprint()
    files = read_build(root / current)
    if files is None:
        if mode == "on":
            raise CliError(
                f"{ENV_MODE}=on: no compiled policy for these sources in {root} "
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
        problem = f"the compiled policy in {root / current} does not load ({exc})"
        if mode == "on":
            raise CliError(f"{ENV_MODE}=on: {problem}; rebuild it with `dlprio compile "
                           f"--force`, or unset {ENV_MODE}") from None
        print(f"dlprio: {problem}; using the interpreted policy "
              f"(`dlprio compile --force` rebuilds it)", file=sys.stderr)
        return "interpreted"
    return "compiled"


def build(root: Path, force: bool = False) -> tuple[Path, bool, list[str]]:
    """Build the current sources' compiled policy into ``root/<fingerprint>`` unless a
    complete build is there (or ``force``); returns (that directory, whether it was built,
    mypyc's warnings: each a ``file:line: warning: ...`` line, such as a generator
    expression compiled as a list, a performance trap this project's policy avoids).

    The sources are copied to a temporary directory under ``root`` and compiled there
    (``setup.py build_ext --inplace`` through mypyc); the extensions and the manifest are
    moved into place with one rename, so a failed or concurrent build never leaves a
    partial one. Raises CliError: exit 2 when mypy is not installed, exit 1 when the
    compile fails (the end of its log, whose path is named)."""
    try:
        import mypy.version
        import mypyc.build  # noqa: F401  (only that it is there)
    except ImportError:
        raise CliError("building the compiled policy needs mypy: pip install "
                       "'tiresias-slurm[compiled]' (and a C compiler with the Python "
                       "headers: apt-get install gcc libc6-dev python3-dev)") from None
    source = policy_dir()
    current = fingerprint(source)
    target = root / current
    if not force and read_build(target) is not None:
        return target, False, []
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        tree = work / "src" / "prioritizer" / "policy"
        tree.mkdir(parents=True)
        (tree.parent / "__init__.py").write_text("", encoding="utf-8")
        for path in source.glob("*.py"):
            shutil.copy2(path, tree / path.name)
        if fingerprint(tree) != current:
            raise CliError(f"{source} changed while it was copied; run `dlprio compile` again",
                           EXIT_FAILURE)
        log_path = work / "build.log"
        sources = [f"prioritizer/policy/{name.rpartition('.')[2]}.py" for name in MODULES]
        started = time.monotonic()
        with log_path.open("w", encoding="utf-8") as out:
            done = subprocess.run(
                [sys.executable, "-c", _BUILD_SCRIPT, json.dumps(MYPYC_OPTIONS), *MYPY_FLAGS,
                 *sources],
                cwd=work / "src", stdout=out, stderr=subprocess.STDOUT, check=False)
        if done.returncode != 0:
            kept = root / f"build-failed-{current[:12]}.log"
            shutil.copyfile(log_path, kept)
            tail = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
            raise CliError("mypyc could not compile the policy (full log: "
                           f"{kept}):\n" + "\n".join(tail), EXIT_FAILURE)
        warnings = [line for line in log_path.read_text(
            encoding="utf-8", errors="replace").splitlines() if ": warning: " in line]
        staging = work / "out"
        staging.mkdir()
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        files: dict[str, str] = {}
        # mypyc's shared module beside the package (top level), one shim per module
        for package, found in (("", work / "src"), ("prioritizer.policy.", tree)):
            for ext in found.glob(f"*{suffix}"):
                name = package + ext.name[:-len(suffix)]
                files[name] = f"{name}{suffix}"
                shutil.copy2(ext, staging / files[name])
        missing = [name for name in MODULES if name not in files]
        if missing:
            raise CliError(f"mypyc built no extension for {', '.join(missing)}", EXIT_FAILURE)
        (staging / MANIFEST).write_text(json.dumps({
            "fingerprint": current, "files": files, "mypy": mypy.version.__version__,
            "python": sys.version.split()[0], "options": MYPYC_OPTIONS,
            "build_seconds": round(time.monotonic() - started, 1),
        }, indent=2) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.rename(staging, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target, True, warnings


def prune(root: Path, keep: str) -> list[Path]:
    """Remove the builds in ``root`` other than fingerprint ``keep`` (directories named by a
    fingerprint) and the logs of failed builds; returns what was removed. Leaves anything
    else alone (a shared ``DLPRIO_COMPILED_DIR`` may hold other files)."""
    removed = []
    for path in sorted(root.glob("*")) if root.is_dir() else []:
        if path.is_dir() and not path.is_symlink() and _FINGERPRINT.fullmatch(path.name) \
                and path.name != keep:
            shutil.rmtree(path)
            removed.append(path)
        elif path.is_file() and re.fullmatch(r"build-failed-[0-9a-f]{12}\.log", path.name):
            path.unlink()
            removed.append(path)
    return removed

