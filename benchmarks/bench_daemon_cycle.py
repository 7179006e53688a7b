"""Live cycle time of the dlprio daemon and dlqueue at the size of a real site (prints figures,
asserts nothing).

Tops the cluster that SLURM_CONF names up to N GPU jobs of this benchmark (named ``bench-*``):
``--running R`` of them run (1 GPU, ``sleep``), the rest stay pending (``--begin=now+2hours``).
Then, on a fresh ledger each repeat, it times the first daemon cycle (every job new: ledger
rows + ``scontrol update`` of at most ``update_budget`` jobs, head of the start order first;
``--budget`` to change it, 0 = every job at once), the cycles that send the rest of that
backlog, steady cycles (nothing to send: wall and CPU time), the parts (the squeue read with
the previous read's records reused and with every record parsed, ``sinfo --json``,
``decide``), the daemon's peak memory, and ``dlqueue`` / ``dlqueue --json`` end to end. The
machine is shared, so every figure is the minimum (and median) over ``--repeats`` runs. ``--keep`` leaves the jobs for a larger N next time (the
table of docs/dlprio.md "Scale" was measured 1,000 → 5,000 → 10,000 that way); otherwise the
benchmark's jobs are cancelled at the end.

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/bench_daemon_cycle.py N \\
        [--running 32] [--repeats 3] [--budget B] [--keep]
    ... bench_daemon_cycle.py --memory-probe DIR B   # one daemon process alone, on the jobs there

The cluster needs ``MaxJobCount`` above N (``dlcluster`` sets 25,000).
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prioritizer.daemon import act
from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import configure
from prioritizer.daemon.loop import Daemon
from prioritizer.daemon.observe import observe
from prioritizer.policy.decide import decide
from slurm_plugin.slurm.client import SlurmClient

SCRIPT = "#!/bin/bash\nsleep 7200\n"
PREFIX = "bench-"


def top_up(client: SlurmClient, n: int, running: int) -> list[int]:
    """Submit jobs until the cluster holds ``n`` active bench jobs (``running`` of them able to
    start at once); returns the ids of all bench jobs."""
    have = [j for j in client.jobs() if j.name.startswith(PREFIX) and j.is_active]
    n_run = sum(1 for j in have if not j.name.startswith(PREFIX + "p"))
    todo = [(f"{PREFIX}r{i}", []) for i in range(max(running - n_run, 0))]
    todo += [(f"{PREFIX}p{i}", ["--begin=now+2hours"])
             for i in range(max(n - len(have) - len(todo), 0))]
    t0 = time.perf_counter()

    def one(item: tuple[str, list[str]]) -> int:
        name, extra = item
        return client.submit(SCRIPT, [f"--job-name={name}", "--gres=gpu:1", "--output=/dev/null",
                                      *extra])

    with ThreadPoolExecutor(4) as pool:
        new = list(pool.map(one, todo))
    if todo:
        print(f"submitted {len(todo)} jobs in {time.perf_counter() - t0:.1f} s")
    return [j.job_id for j in have] + new


CPU: list[float] = []   # process CPU seconds of each timed call (see timed)


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls; their CPU seconds in this process go to :data:`CPU`
    (on a shared machine the wall time includes waiting for a core; the CPU time does not)."""
    out = []
    CPU.clear()
    for _ in range(repeats):
        c, t = time.process_time(), time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
        CPU.append(time.process_time() - c)
    return out


def fmt(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    return (f"min {min(values) * scale:.2f} {unit}, median {statistics.median(values) * scale:.2f}"
            f" {unit} (n={len(values)})")


def run_cli(args: list[str]) -> None:
    exe = Path(sys.executable).with_name(args[0])
    subprocess.run([str(exe), *args[1:]], stdout=subprocess.DEVNULL, check=True)


def memory_probe(tmp: str, budget: int) -> None:
    """Run in a fresh process: a daemon's first cycle and 3 more; print its peak RSS."""
    cfg = DaemonConfig(ledger_path=f"{tmp}/probe.sqlite", snapshot_path=f"{tmp}/probe.json",
                       metrics_port=0, update_budget=budget)
    with Ledger(cfg.ledger_path) as ledger:
        daemon = Daemon(cfg, SlurmClient(timeout_s=120), ledger,
                        configure("text", io.StringIO()))
        for _ in range(4):
            daemon.cycle()
    print(peak_rss_mib())


def peak_rss_mib() -> float:
    """This process's peak resident memory (MiB): ``VmHWM`` of /proc/self/status, which counts
    this program's memory only. (``ru_maxrss`` is not used: a child started with vfork, as
    Python's subprocess does, inherits the parent's peak at exec, so a probe started by this
    large benchmark would report the benchmark's peak.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def daemon_peak_mib(tmp: str, budget: int) -> float:
    """Peak memory of a daemon process alone (not of this benchmark, which also submits)."""
    out = subprocess.run([sys.executable, __file__, "--memory-probe", tmp, str(budget)], check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def union_s(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by (start, end) spans (the update calls run in parallel)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def main() -> None:
    if sys.argv[1:2] == ["--memory-probe"]:
        memory_probe(sys.argv[2], int(sys.argv[3]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("n", type=int, nargs="?", default=1000)
    p.add_argument("--running", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--budget", type=int, default=DaemonConfig().update_budget,
                   help="update_budget of the daemon (0 = no limit; default: the config's)")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args()
    client = SlurmClient(timeout_s=120)
    ids = top_up(client, args.n, args.running)
    spans: list[tuple[float, float]] = []
    send = client._update

    def timed_update(*a: object, **k: object) -> None:   # Slurm's share of a cycle
        t = time.perf_counter()
        try:
            send(*a, **k)  # type: ignore[arg-type]
        finally:
            spans.append((t, time.perf_counter()))
    client._update = timed_update  # type: ignore[method-assign]
    try:
        firsts: list[float] = []
        first_cpu: list[float] = []
        update_s: list[float] = []
        backlog_cycles: list[int] = []
        backlog_s: list[float] = []
        steady: list[float] = []
        steady_cpu: list[float] = []
        sent = left = 0
        calls: set[str] = set()
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.repeats):
                cfg = DaemonConfig(ledger_path=f"{tmp}/ledger{r}.sqlite",
                                   snapshot_path=f"{tmp}/snapshot.json", metrics_port=0,
                                   update_budget=args.budget)
                with Ledger(cfg.ledger_path) as ledger:
                    stream = io.StringIO()
                    daemon = Daemon(cfg, client, ledger, configure("text", stream))
                    spans.clear()
                    firsts += timed(daemon.cycle, 1)
                    first_cpu += CPU
                    update_s.append(union_s(spans))
                    sent, left = len(daemon.pushed.accepted), daemon.backlog
                    calls = {line.split("value=")[1] for line in stream.getvalue().splitlines()
                             if "order_set" in line}
                    n_cycles, t0 = 0, time.perf_counter()
                    while daemon.backlog and n_cycles < 1000:   # the rest of the backlog
                        daemon.cycle()
                        n_cycles += 1
                    backlog_cycles.append(n_cycles)
                    backlog_s.append(time.perf_counter() - t0)
                    steady += timed(daemon.cycle, 3)
                    steady_cpu += CPU
            peak_mib = daemon_peak_mib(tmp, args.budget)
            with Ledger(cfg.ledger_path) as ledger:
                obs = observe(client, ledger, cfg, time.time())
            dec = timed(lambda: decide(obs.snapshot, cfg.policy, time.time()), args.repeats)
            squeue = timed(client.jobs, args.repeats)
            squeue_cpu = list(CPU)
            colds = iter([SlurmClient(timeout_s=120, _release=client._release)
                          for _ in range(args.repeats)])   # no record parsed before
            squeue_cold = timed(lambda: next(colds).jobs(), args.repeats)
            squeue_cold_cpu = list(CPU)
            sinfo = timed(client.nodes, args.repeats)
            env_snapshot = ["--snapshot", f"{tmp}/snapshot.json"]
            dlq = timed(lambda: run_cli(["dlqueue", *env_snapshot]), args.repeats)
            dlq_json = timed(lambda: run_cli(["dlqueue", "--json", *env_snapshot]), args.repeats)
        n_pending = sum(1 for v in obs.snapshot.jobs if v.phase.value == "PENDING")
        print(f"jobs managed: {len(obs.snapshot.jobs)} ({n_pending} pending); "
              f"update_budget {args.budget or 'none'}; pid {os.getpid()}")
        print(f"first cycle (all new; {sent} jobs updated, values {len(calls)}, {left} left "
              f"for later cycles): {fmt(firsts)}")
        print(f"  CPU time of the daemon process in it: {fmt(first_cpu)}")
        print(f"  of which the scontrol update calls (slurmctld's work, {act.SEND_WORKERS} "
              f"at a time): {fmt(update_s)}")
        print(f"  the rest (the daemon's own work and reads): "
              f"{fmt([f - u for f, u in zip(firsts, update_s)])}")
        print(f"backlog: {max(backlog_cycles)} more cycles to send every value, "
              f"{fmt(backlog_s)} in all")
        print(f"steady cycle (nothing to send): {fmt(steady)}")
        print(f"  CPU time of the daemon process in it: {fmt(steady_cpu)}")
        print(f"  squeue read (client.jobs, records as in the previous read): {fmt(squeue)}")
        print(f"    of which parsing (CPU time in this process): {fmt(squeue_cpu)}")
        print(f"  squeue read, every record parsed (a new client): {fmt(squeue_cold)}")
        print(f"    of which parsing (CPU time in this process): {fmt(squeue_cold_cpu)}")
        print(f"  sinfo --json (client.nodes): {fmt(sinfo)}")
        print(f"  decide() alone: {fmt(dec, 'ms', 1000)}")
        print(f"peak memory of a daemon process (VmHWM, first + 3 more cycles): "
              f"{peak_mib:.0f} MiB")
        print(f"dlqueue (one refresh, end to end): {fmt(dlq)}")
        print(f"dlqueue --json (end to end): {fmt(dlq_json)}")
        print("load average (1, 5, 15 min) at the end: "
              + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores")
    finally:
        if not args.keep:
            for k in range(0, len(ids), 500):
                client.cancel(ids[k:k + 500])


if __name__ == "__main__":
    main()
