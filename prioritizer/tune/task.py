"""One array task of ``dlprio tune --executor slurm``: ``python -m prioritizer.tune.task
WORKDIR INDEX`` replays task INDEX of ``WORKDIR/tasks.json`` and writes
``WORKDIR/result-INDEX.json`` (the figures, or ``{"error": ...}``), atomically."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prioritizer.tune.rank import Task, run_task
from slurm_plugin.atomic import write_atomically


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
