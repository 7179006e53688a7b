"""``dlprio compile``: build the compiled policy that replays use (:mod:`prioritizer.compiled`).

Exit codes: 0 built or already current (``--status``: an intact current build exists); 1 the
compile failed (the end of mypyc's log is shown, with the full log's path), a policy source
cannot be read, or ``--status`` found no intact current build; 2 mypy or setuptools is not
installed (named with the install command), the build directory cannot be written, or bad
options. SIGTERM stops the compile and removes its work, like Ctrl-C.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from prioritizer import compiled
from prioritizer.command import CliError, Command, Exit
from slurm_plugin.common.exits import signalled
from slurm_plugin.common.cli import visible

EPILOG = f"""\
Where: ${compiled.ENV_DIR} (an absolute path), else
$XDG_CACHE_HOME/tiresias-slurm/compiled, else ~/.cache/tiresias-slurm/compiled;
one directory per fingerprint of the policy sources.
Used by: dlprio simulate, tune and history while the fingerprint matches
(${compiled.ENV_MODE}=auto, the default; 'on' requires it, 'off' never uses it).
The daemon (run, once, explain, status) never uses it.
Needs: mypy and setuptools (pip install -e '.[compiled]' in a checkout) and gcc
with the Python headers (Debian: apt-get install gcc libc6-dev python3-dev).
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("--force", action="store_true",
                        help="rebuild even when an intact current build exists")
    parser.add_argument("--prune", action="store_true",
                        help="also remove older builds (directories whose manifest names "
                             "another fingerprint), failed builds' logs and the work left by "
                             "killed builds")
    parser.add_argument("--status", action="store_true",
                        help="build nothing: say whether an intact current build exists "
                             "(exit 0) or not (exit 1)")


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(signalled(signum))   # unwinds: the compile is stopped, its work removed


def run(args: argparse.Namespace) -> int:
    if args.status and (args.force or args.prune):
        raise CliError("--status builds and removes nothing: leave out --force and --prune")
    root = compiled.compiled_root()
    current = compiled.fingerprint()
    if args.status:
        return _status(root, current)
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        target, built, warnings = compiled.build(root, force=args.force)
    finally:
        signal.signal(signal.SIGTERM, previous)
    for line in warnings:
        print(f"dlprio compile: mypyc: {line}", file=sys.stderr)
    if built:
        print(f"dlprio compile: built the compiled policy in {visible(target)}; dlprio "
              f"simulate, tune and history use it while the policy sources are unchanged")
    else:
        print(f"dlprio compile: up to date: {visible(target)} (--force rebuilds it)")
    if args.prune:
        removed = compiled.prune(root, keep=current)
        print(f"dlprio compile: removed {len(removed)} other build(s), log(s) and work "
              f"director(ies) from {visible(root)}")
    return Exit.OK


def _status(root: Path, current: str) -> int:
    files, problem = compiled.inspect(root / current)
    if files is not None:
        print(f"dlprio compile: current build: {visible(root / current)}")
        return Exit.OK
    if problem:
        print(f"dlprio compile: the build in {visible(root / current)} is damaged ({problem}); "
              f"`dlprio compile` rebuilds it")
        return Exit.FAILED
    try:
        others = sorted(p.name[:12] for p in (root.iterdir() if root.is_dir() else ())
                        if compiled.read_build(p) is not None)
    except OSError:   # an unreadable directory: nothing to list
        others = []
    stale = f"; builds for other sources: {', '.join(others)}" if others else ""
    print(f"dlprio compile: no build for these sources (fingerprint {current[:12]}) in "
          f"{visible(root)}{stale}; `dlprio compile` builds it")
    return Exit.FAILED


COMMAND = Command("compile", "build the compiled policy that replays use (mypyc)",
                  configure, run)
