"""The replay matrix behind the simulator's regression fixtures.

``tests/fixtures/regression/<case>.csv.gz`` holds the ``--jobs-csv`` output of each case as
produced once by the simulator that called ``decide()`` from scratch at every event (``scripts/regression_fixtures.py make``); the
simulator must keep producing the very same bytes (``scripts/regression_fixtures.py check``
for the whole matrix, ``tests/prioritizer/sim/test_sim_regression.py`` for a fast subset).
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "regression"
TRACES = ROOT / "data" / "traces"

POLICIES = ("fifo", "fifo-fit", "srtf", "las", "tiresias-las", "tiresias-gittins")

#: trace key -> (simulate arguments naming the trace and the cluster)
TRACE_ARGS = {
    "60job-n2g4": ["--trace", str(TRACES / "tiresias" / "60_job.csv"),
                   "--cluster", str(TRACES / "tiresias" / "n2g4.csv")],
    "60job-n4g4": ["--trace", str(TRACES / "tiresias" / "60_job.csv"),
                   "--cluster", str(TRACES / "tiresias" / "n4g4.csv")],
    "itp-69x8": ["--trace", str(TRACES / "itp-2021" / "cluster04.csv"),
                 "--nodes", "69", "--gpus-per-node", "8"],
    "philly-127x8": ["--trace", str(TRACES / "philly-15k" / "philly_data_training.csv"),
                     "--since", "4147200", "--nodes", "127", "--gpus-per-node", "8"],
}
PLACEMENTS = ("count", "consolidate")
COSTS = ("zero", "costs")


class Case(NamedTuple):
    """One replay: trace+cluster key, placement, cost model, policy."""

    trace: str
    placement: str
    cost: str
    policy: str

    @property
    def name(self) -> str:
        return f"{self.trace}-{self.placement}-{self.cost}-{self.policy}"

    @property
    def fixture(self) -> Path:
        return FIXTURES / f"{self.name}.csv.gz"

    def argv(self, jobs_csv: str) -> list[str]:
        """``dlprio`` arguments that write this case's per-job CSV to ``jobs_csv``."""
        extra = ["--zero-cost"] if self.cost == "zero" else []
        return ["simulate", *TRACE_ARGS[self.trace], "--placement", self.placement, *extra,
                "--policy", self.policy, "--jobs-csv", jobs_csv, "--json"]


def all_cases() -> list[Case]:
    """The full matrix, small traces first, then the real traces case by case."""
    small = [Case(t, p, c, pol) for t in ("60job-n2g4", "60job-n4g4")
             for p, c, pol in itertools.product(PLACEMENTS, COSTS, POLICIES)]
    big = [Case(t, p, c, pol)
           for (p, c), pol, t in itertools.product(
               [("count", "zero"), ("consolidate", "costs"), ("count", "costs"),
                ("consolidate", "zero")], POLICIES, ("itp-69x8", "philly-127x8"))]
    return small + big


#: The fast subset the default tests replay (test_sim_regression.py; test_compiled.py with the
#: compiled policy): every 60_job.csv case and three ITP cluster04 cases that exercise
#: preemption, promotion, checkpoint grace and requeue delays.
DEFAULT = [c for c in all_cases() if c.trace.startswith("60job")] + [
    Case("itp-69x8", "count", "zero", "tiresias-las"),
    Case("itp-69x8", "consolidate", "costs", "srtf"),
    Case("itp-69x8", "count", "zero", "tiresias-gittins"),
]


def write_fixture(path: Path, data: bytes) -> None:
    """Gzip ``data`` into ``path`` reproducibly (no timestamp, no file name in the header)."""
    with path.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                               mtime=0, compresslevel=9) as out:
        out.write(data)


def read_fixture(path: Path) -> bytes:
    """The stored per-job CSV bytes of one fixture."""
    return gzip.decompress(path.read_bytes())
