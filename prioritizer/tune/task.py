"""One array task of ``dlprio tune --executor slurm``: ``python -m prioritizer.tune.task
WORKDIR INDEX`` replays task INDEX of ``WORKDIR/tasks.json`` and writes
``WORKDIR/result-INDEX.json`` (the figures, or ``{"error": ...}``), atomically."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from prioritizer.tune.rank import Task, run_task


def main(argv: list[str]) -> int:
    workdir, index = Path(argv[0]), int(argv[1])
    spec = json.loads((workdir / "tasks.json").read_text())[index]
    try:
        out: dict = run_task(Task(**spec))
    except ValueError as exc:
        out = {"error": str(exc)}
    tmp = workdir / f".result-{index}.json"
    tmp.write_text(json.dumps(out))
    os.replace(tmp, workdir / f"result-{index}.json")
    return 0 if "error" not in out else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
