"""One array task of ``dlprio tune --executor slurm``: ``python -m prioritizer.tune.task
WORKDIR INDEX`` replays task INDEX of ``WORKDIR/tasks.json`` and writes
``WORKDIR/result-INDEX.json`` (the figures, or ``{"error": ...}``), atomically. Run as a
program, it first imports the compiled policy as ``dlprio tune`` does
(:func:`prioritizer.compiled.activate`; the task inherits ``DLPRIO_COMPILED``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prioritizer.command import CliError
from prioritizer.compiled import activate

if __name__ == "__main__":   # an array task: the compiled policy, when built, before it loads
    try:
        activate()
    except CliError as exc:   # DLPRIO_COMPILED=on without a build: task-<i>.out says so
        print(f"dlprio tune task: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)

from prioritizer.tune.rank import Task, run_task  # noqa: E402  (after activate)
from slurm_plugin.common.atomic import write_atomically  # noqa: E402


def main(argv: list[str]) -> int:
    workdir, index = Path(argv[0]), int(argv[1])
    spec = json.loads((workdir / "tasks.json").read_text())[index]
    try:
        out: dict = run_task(Task(**spec))
    except ValueError as exc:
        out = {"error": str(exc)}
    write_atomically(workdir / f"result-{index}.json", json.dumps(out))
    return 0 if "error" not in out else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
