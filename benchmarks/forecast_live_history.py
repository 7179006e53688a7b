"""Live: ``dlprio history check --forecasts`` on a history the cluster itself made under
``dlprio run`` (prints figures, asserts nothing).

On the cluster ``SLURM_CONF`` names (a ``dlcluster`` with slurmdbd, ``--with-dbd``; nothing
else may run jobs there), it starts ``dlprio run`` (2D-LAS, thresholds ``--thresholds``
GPU·s, 5 s cycles, 5 s checkpoint grace, a forecast every 2 cycles) on a scratch ledger and
submits ``--jobs`` checkpointing jobs (the live tests' script: one-second steps, USR2
checkpoint, resume after a requeue) of 1, 2 or 4 GPUs and ``--steps`` LOW,HIGH steps (seeded),
in bursts of ``--burst`` jobs ``--gap-s`` apart, so that jobs wait and the daemon preempts.
Midway it prints ``dlqueue`` (the START column). Once every job has ended it stops the
daemon, exports the history (``dlprio history export --ledger``) and runs

    dlprio history check --forecasts --trace history.csv --cluster-from-slurm \\
        --config dlprio.yaml --moments M [--json]

with the daemon's own policy section (whose cost keys are the cluster's: 5 s grace, 11 s
requeue delay = dlcluster's ``cred_expire`` 10 + 1, 5 s decisions) and prints its report and
JSON. A short wait counts: the report's figures are for waits of at least 10 minutes, so with
jobs of tens of seconds it also prints the figures over every forecast job that waited at least
``--min-wait-s`` (default 20 s), computed by the check's own summary. ``--min-samples`` is the
daemon's ``gittins_min_samples`` (default 100): below it the daemon and the check draw run
times from the packaged distribution (jobs of hours), far longer than these jobs.

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/forecast_live_history.py \\
        [--jobs 36] [--burst 12] [--gap-s 15] [--steps 10,45] [--moments 30] \\
        [--min-samples 100] [--seed 3]

About 6 minutes with the defaults on a 2-node, 4-GPU-per-node dlcluster.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]

from daemon_helpers import DaemonProc, dlprio, live_jobs, write_config  # noqa: E402
from live_helpers import wait_for  # noqa: E402

from prioritizer import numbers  # noqa: E402
from prioritizer.command import CliError  # noqa: E402
from prioritizer.history.forecast_check import check_forecasts, summary  # noqa: E402
from prioritizer.history.cli import cluster_of, min_samples_of, policy_config  # noqa: E402
from prioritizer.history.trace import read_rows  # noqa: E402
from prioritizer.sim.traces import read_trace  # noqa: E402

GPU_CHOICES = (1, 2, 4)


def pair(option: str) -> Callable[[str], tuple[int, int]]:
    """``LOW,HIGH`` whole numbers, 1 <= LOW <= HIGH (an argparse type; CliError otherwise)."""
    def parse(value: str) -> tuple[int, int]:
        try:
            low, high = (numbers.parse_int(x, 1, numbers.MAX_COUNT) for x in value.split(","))
        except ValueError:
            low = high = 0
        if not 1 <= low <= high:
            raise CliError(f"{option}: expected LOW,HIGH whole numbers with 1 <= LOW <= HIGH, "
                           f"got {value!r}")
        return low, high
    return parse


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options (module doc). A bad value raises :class:`CliError` naming the option."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=numbers.count("--jobs", 1000), default=36)
    parser.add_argument("--burst", type=numbers.count("--burst", 1000), default=12)
    parser.add_argument("--gap-s", type=numbers.arg_type("--gap-s", numbers.parse_float, 0.0, numbers.MAX_SECONDS), default=15.0)
    parser.add_argument("--steps", type=pair("--steps"), default=(10, 45),
                        help="LOW,HIGH steps of 1 s")
    parser.add_argument("--thresholds", type=pair("--thresholds"), default=(60, 100000),
                        help="the policy's two queue thresholds, GPU·s")
    parser.add_argument("--moments", type=numbers.count("--moments", 100_000), default=30)
    parser.add_argument("--min-samples", type=numbers.count("--min-samples", 1_000_000),
                        default=100, help="the daemon's gittins_min_samples: the fewest ended "
                        "jobs its forecasts (and the check's) learn run times from (default 100)")
    parser.add_argument("--min-wait-s", type=numbers.arg_type("--min-wait-s", numbers.parse_float, 0.0,
                                             numbers.MAX_SECONDS), default=20.0)
    parser.add_argument("--seed", type=int, default=3)
    return parser.parse_args(argv)


def run(*argv: str) -> str:
    done = subprocess.run(dlprio(*argv), capture_output=True, text=True, cwd=_ROOT)
    sys.stderr.write(done.stderr)
    if done.returncode:
        raise SystemExit(f"dlprio {' '.join(argv)}: exit {done.returncode}")
    return done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except CliError as exc:
        print(f"forecast_live_history: {exc}", file=sys.stderr)
        return 2
    if not os.environ.get("SLURM_CONF"):
        print("SLURM_CONF: not set; point it at a dlcluster with slurmdbd (dlcluster env "
              "--name NAME)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="fc-live-history-"))
    policy = {"policy": "tiresias-las", "thresholds_gpu_s": list(args.thresholds),
              "checkpoint_overhead_s": 5, "requeue_delay_s": 11, "decision_interval_s": 5}
    cfg = write_config(tmp / "dlprio.yaml", policy=policy,
                       gittins_min_samples=args.min_samples,
                       forecast={"every_cycles": 2, "cpu_budget_s": 2, "draws": 20})
    rng = random.Random(args.seed)
    started = time.time()
    with live_jobs(tmp) as jobs:
        since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
        daemon = DaemonProc(cfg).start()
        try:
            ids = []
            for i in range(args.jobs):
                job_id, _ = jobs.submit(f"f{i}", nodes=1, gpus_per_node=rng.choice(GPU_CHOICES),
                                        steps=rng.randint(*args.steps))
                ids.append(job_id)
                if i % args.burst == args.burst - 1 and i + 1 < args.jobs:
                    time.sleep(args.gap_s)
            time.sleep(20)   # a forecast or two made after the last submission
            print("$ dlqueue   (midway)")
            print(subprocess.run([sys.executable, "-c", "import sys; from submit.queue_cli "
                                  "import main; sys.exit(main())", "--snapshot",
                                  str(tmp / "snapshot.json")], text=True,
                                 capture_output=True, cwd=_ROOT).stdout.rstrip())
            wait_for(lambda: not [j for j in jobs.client.jobs(job_ids=ids) if j.is_active],
                     1200, "the workload to finish", interval_s=3)
        finally:
            daemon.stop()
    print(f"workload: {args.jobs} jobs in {time.time() - started:.0f} s")
    ledger = yaml.safe_load(cfg.read_text())["ledger_path"]
    out = tmp / "history.csv"
    wait_for(lambda: subprocess.run(
        dlprio("history", "export", "--since", since, "--ledger", ledger, "-o", str(out)),
        capture_output=True, cwd=_ROOT).returncode == 0
        and len([r for r in read_rows(str(out)) if int(r.job_id) in ids]) == args.jobs,
        120, "sacct to record every job", interval_s=3)
    rows = [r for r in read_rows(str(out)) if int(r.job_id) in ids]
    print(f"history: {len(rows)} jobs, {sum(r.preemptions for r in rows)} preemptions "
          f"({out})")
    base = ("history", "check", "--forecasts", "--trace", str(out), "--cluster-from-slurm",
            "--config", str(cfg), "--moments", str(args.moments))
    print(f"$ dlprio {' '.join(base)}")
    print(run(*base).rstrip())
    print(f"$ dlprio {' '.join(base)} --json")
    print(run(*base, "--json").rstrip())
    shape = argparse.Namespace(cluster_from_slurm=True, nodes=None, gpus_per_node=None)
    checks = check_forecasts(read_trace(str(out)), cluster_of(shape),
                             policy_config(None, str(cfg)), args.moments,
                             min_samples=min_samples_of(str(cfg)))
    every = summary(checks, args.min_wait_s)
    print(f"every forecast job waiting >= {args.min_wait_s:.0f} s: "
          + json.dumps({k: (round(v, 3) if isinstance(v, float) else v)
                        for k, v in every.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
