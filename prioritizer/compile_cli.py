"""``dlprio compile``: build the compiled policy that replays use (:mod:`prioritizer.compiled`).

Exit codes: 0 built or already current (``--status``: a current build exists); 1 the compile
failed (the end of mypyc's log is shown, with the full log's path), or ``--status`` found no
current build; 2 mypy is not installed (named with the install command).
"""

from __future__ import annotations

import argparse
import sys

from prioritizer import compiled
from prioritizer.command import EXIT_FAILURE, EXIT_OK, Command


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        f"The build goes to ${compiled.ENV_DIR}, else $XDG_CACHE_HOME/tiresias-slurm/compiled, "
        f"else ~/.cache/tiresias-slurm/compiled, one directory per fingerprint of the policy "
        f"sources. dlprio simulate, tune and history use it while it matches the sources "
        f"(${compiled.ENV_MODE}=auto, the default; 'on' requires it, 'off' never uses it); "
        f"the daemon never does. Needs mypy (pip install 'tiresias-slurm[compiled]') and "
        f"gcc with the Python headers.")
    parser.add_argument("--force", action="store_true",
                        help="rebuild even when a current build exists")
    parser.add_argument("--prune", action="store_true",
                        help="also remove the builds for other policy sources (and failed "
                             "builds' logs) from the build directory")
    parser.add_argument("--status", action="store_true",
                        help="build nothing: say whether a current build exists (exit 0) "
                             "or not (exit 1)")


def run(args: argparse.Namespace) -> int:
    root = compiled.compiled_root()
    current = compiled.fingerprint()
    if args.status:
        if compiled.read_build(root / current) is not None:
            print(f"dlprio compile: current build: {root / current}")
            return EXIT_OK
        others = sorted(p.name[:12] for p in root.glob("*") if p.is_dir()
                        and not p.name.startswith(".") and compiled.read_build(p) is not None)
        stale = f"; builds for other sources: {', '.join(others)}" if others else ""
        print(f"dlprio compile: no build for these sources (fingerprint {current[:12]}) "
              f"in {root}{stale}; `dlprio compile` builds it")
        return EXIT_FAILURE
    target, built, warnings = compiled.build(root, force=args.force)
    for line in warnings:
        print(f"dlprio compile: mypyc: {line}", file=sys.stderr)
    if built:
        print(f"dlprio compile: built the compiled policy in {target}; dlprio simulate, "
              f"tune and history use it while the policy sources are unchanged")
    else:
        print(f"dlprio compile: up to date: {target} (--force rebuilds it)")
    if args.prune:
        removed = compiled.prune(root, keep=current)
        print(f"dlprio compile: removed {len(removed)} other build(s) and log(s) from {root}")
    return EXIT_OK


COMMAND = Command("compile", "build the compiled policy that replays use (mypyc)",
                  configure, run)
