"""Benchmark: one decision with tenants over 10,000 jobs on 1,000 nodes × 8 GPUs.

The ``storm`` and ``steady`` snapshots of ``bench_decide.py``, their jobs dealt round-robin to
4 tenants guaranteed a quarter of the GPUs each (2,000), timed under ``decide_tenants``
(``prioritizer.policy.tenant_decide``: ``decide`` plus the order across tenants and the victim
walk) beside plain ``decide``. Prints the median wall time of the repeats, the least CPU time
of the process over them (on a shared machine the figure least moved by other work, as
``bench_decide.py`` prints it) and the preemptions found; asserts nothing. Run: ``.venv/bin/python benchmarks/bench_decide_tenants.py
[--jobs N] [--nodes N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_decide import NOW, make_snapshot  # noqa: E402
from prioritizer.policy.config import PolicyConfig  # noqa: E402
from prioritizer.policy.decide import decide  # noqa: E402
from prioritizer.policy.tenant_decide import Owner, decide_tenants  # noqa: E402
from prioritizer.policy.tenants import Tenancy, VirtualCluster  # noqa: E402

TENANTS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    config = PolicyConfig()
    share = args.nodes * 8 // TENANTS
    tenancy = Tenancy(tuple(VirtualCluster(f"t{i}", account=f"t{i}", guaranteed_gpus=share)
                            for i in range(TENANTS)))
    for scenario in ("storm", "steady"):
        snap = make_snapshot(args.jobs, args.nodes, steady=scenario == "steady")
        owners = {j.job_id: Owner(f"t{j.job_id % TENANTS}", f"u{j.job_id % 50}")
                  for j in snap.jobs}
        for name, run in (("decide", lambda: decide(snap, config, NOW).preemptions),
                          ("decide_tenants", lambda: decide_tenants(
                              snap, config, NOW, tenancy, owners).decisions.preemptions)):
            times, cpu, found = [], [], ()
            for _ in range(args.repeat):
                started, started_cpu = time.perf_counter(), time.process_time()
                found = run()
                times.append(time.perf_counter() - started)
                cpu.append(time.process_time() - started_cpu)
            print(f"{scenario:<7} {name:<15} median {statistics.median(times) * 1000:8.1f} ms  "
                  f"cpu min {min(cpu) * 1000:8.1f} ms  {len(found)} preemptions")


if __name__ == "__main__":
    main()
