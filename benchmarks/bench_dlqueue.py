"""dlqueue speed at a real site's queue size on a live cluster (one refresh and
``--json`` at 10,000 jobs within 1 s).

With ``--fill N`` it first tops the cluster named by SLURM_CONF up to N active jobs: 32 one-GPU
jobs that run (``sleep``) and the rest held (``--hold``, 1 GPU each, 4 sbatch calls at once);
the cluster needs ``MaxJobCount`` above N (dlcluster sets 25,000). ``--clean`` cancels the jobs
it submitted (by their name prefix) and exits. Then it prints, as the minimum of ``--repeat``
runs (the machine is shared: the minimum is the least disturbed figure), wall and CPU time
(user + system of the command and its children, squeue included):

* ``python -c pass``: the floor any Python command pays;
* the formatted ``squeue`` read dlqueue makes, alone (Slurm's own share);
* ``dlqueue`` (table into a pipe) and ``dlqueue --json``, end to end (target: at most 1 s);
* ``dlqueue --watch``: seconds per refresh over ``--refreshes`` refreshes (``--interval`` 0.1).

The package's modules are byte-compiled first (what ``pip install`` does). Run::

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/bench_dlqueue.py --fill 10000
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from slurm_plugin.slurm import records
from slurm_plugin.slurm.client import SlurmClient

REPO = Path(__file__).resolve().parents[1]
DLQUEUE = str(Path(sys.executable).with_name("dlqueue"))
PREFIX = "benchq-"
RUNNING = 32


def fill(client: SlurmClient, n: int) -> None:
    """Submit jobs until the cluster holds ``n`` active jobs (ours and others')."""
    have = [j for j in client.jobs() if j.is_active]
    ours_running = sum(1 for j in have if j.name.startswith(PREFIX + "r"))
    todo = [(f"{PREFIX}r{i}", []) for i in range(max(RUNNING - ours_running, 0))]
    todo += [(f"{PREFIX}h{i}", ["--hold"]) for i in range(max(n - len(have) - len(todo), 0))]

    def one(item: tuple[str, list[str]]) -> int:
        name, extra = item
        return client.submit("#!/bin/bash\nsleep 7200\n",
                             [f"--job-name={name}", "--gres=gpu:1", "--output=/dev/null", *extra])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, todo))
    if todo:
        print(f"submitted {len(todo)} jobs in {time.perf_counter() - t0:.1f} s")


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall s, CPU s of the command and its children) of one run; output discarded."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime


def report(label: str, argv: list[str], repeat: int, env: dict[str, str] | None = None,
           per: int = 1, target: str = "") -> None:
    runs = [timed(argv, env) for _ in range(repeat)]
    wall = min(w for w, _ in runs) / per
    cpu = min(c for _, c in runs) / per
    print(f"{label:38s} min {wall * 1000:7.1f} ms  cpu min {cpu * 1000:7.1f} ms  (n={repeat}){target}")


def squeue_argv() -> list[str]:
    """The formatted read dlqueue makes (fields of records.SQUEUE_FIELDS, fixed separators)."""
    fields = ",".join(f"{t}:0\x1f" for _, t in records.SQUEUE_FIELDS)
    return ["squeue", "--noheader", "--all", "--states=all", f"--Format={fields}"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fill", type=int, metavar="N", help="top the cluster up to N active jobs first")
    ap.add_argument("--clean", action="store_true", help="cancel this benchmark's jobs and exit")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--refreshes", type=int, default=5)
    args = ap.parse_args()
    client = SlurmClient(timeout_s=120)
    if args.clean:
        ids = [j.job_id for j in client.jobs() if j.name.startswith(PREFIX) and j.is_active]
        for i in range(0, len(ids), 1000):
            client.cancel(ids[i:i + 1000])
        print(f"cancelled {len(ids)} jobs")
        return
    for pkg in ("submit", "slurm_plugin", "prioritizer"):
        compileall.compile_dir(REPO / pkg, quiet=1)
    if args.fill:
        fill(client, args.fill)
    jobs = client.jobs()
    active = sum(1 for j in jobs if j.is_active)
    running = sum(1 for j in jobs if j.state == "RUNNING")
    print(f"cluster: {active} active jobs ({running} running), {len(jobs)} rows in squeue; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    snap = ["--snapshot", "/nonexistent/bench-dlqueue/snapshot.json"]
    report("python -c pass (the floor)", [sys.executable, "-c", "pass"], args.repeat)
    report("squeue, dlqueue's formatted read", squeue_argv(), args.repeat,
           env={**os.environ, "SLURM_TIME_FORMAT": "%s"})
    report("dlqueue (one refresh, into a pipe)", [DLQUEUE, *snap], args.repeat, target="  target <= 1 s")
    report("dlqueue --json", [DLQUEUE, "--json", *snap], args.repeat, target="  target <= 1 s")
    report(f"dlqueue --watch, per refresh ({args.refreshes})",
           [DLQUEUE, "--watch", "--interval", "0.1", "--iterations", str(args.refreshes), *snap],
           max(1, args.repeat // 2), per=args.refreshes)


if __name__ == "__main__":
    main()
