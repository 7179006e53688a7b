"""Live cycle time of the dlprio daemon with many pending jobs (prints figures, asserts nothing).

Submits N pending GPU jobs (``--begin=now+2hours``, so they stay pending) to the cluster that
SLURM_CONF names, then times full daemon cycles (observe → decide → act) on a fresh ledger:
the first cycle (every job new: ledger rows + one ``scontrol update`` per distinct value) and
steady cycles (nothing changed: nothing sent). Also times the parts: one ``squeue --json`` +
``sinfo --json``, and ``decide`` alone. Cancels its jobs at the end.

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/bench_daemon_cycle.py [N]
"""

from __future__ import annotations

import io
import statistics
import sys
import tempfile
import time

from prioritizer.daemon.loop import Daemon
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.log import EventLog
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.observe import observe
from prioritizer.policy.decide import decide
from slurm_plugin.client import SlurmClient

SCRIPT = "#!/bin/bash\ntrue\n"


def main(n: int = 1000) -> None:
    client = SlurmClient(timeout_s=60)
    ids: list[int] = []
    t0 = time.perf_counter()
    try:
        for i in range(n):
            ids.append(client.submit(SCRIPT, [f"--job-name=bench-{i}", "--gres=gpu:1",
                                              "--begin=now+2hours", "--output=/dev/null"]))
        print(f"submitted {n} pending jobs in {time.perf_counter() - t0:.1f} s")
        with tempfile.TemporaryDirectory() as tmp:
            cfg = DaemonConfig(ledger_path=f"{tmp}/ledger.sqlite",
                               snapshot_path=f"{tmp}/snapshot.json", metrics_port=0)
            with Ledger(cfg.ledger_path) as ledger:
                log = EventLog(stream=io.StringIO())
                daemon = Daemon(cfg, client, ledger, log)
                t = time.perf_counter()
                daemon.cycle()
                first = time.perf_counter() - t
                sent = log.stream.getvalue().count("event=order_set")  # type: ignore[union-attr]
                calls = len({line.split("value=")[1] for line in
                             log.stream.getvalue().splitlines() if "order_set" in line})  # type: ignore[union-attr]
                steady = []
                for _ in range(5):
                    t = time.perf_counter()
                    daemon.cycle()
                    steady.append(time.perf_counter() - t)
                reads = []
                for _ in range(5):
                    t = time.perf_counter()
                    client.jobs()
                    client.nodes()
                    reads.append(time.perf_counter() - t)
                obs = observe(client, ledger, cfg, time.time())
                t = time.perf_counter()
                decide(obs.snapshot, cfg.policy, time.time())
                dec = time.perf_counter() - t
        print(f"managed pending jobs: {len(obs.snapshot.jobs)}")
        print(f"first cycle (all new, {sent} jobs updated in {calls} scontrol calls): {first:.2f} s")
        print(f"steady cycle (nothing to send), median of 5: {statistics.median(steady):.2f} s "
              f"(min {min(steady):.2f}, max {max(steady):.2f})")
        print(f"  squeue --json + sinfo --json, median of 5: {statistics.median(reads):.2f} s")
        print(f"  decide() alone: {dec * 1000:.1f} ms")
    finally:
        for k in range(0, len(ids), 200):
            client.cancel(ids[k:k + 200])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
