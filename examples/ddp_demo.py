#!/usr/bin/env python3
"""``./demo.sh --ddp``: a real PyTorch DDP job preempted once across namespaced nodes, and
bitwise the same as a run never interrupted.

On its own ``dlcluster up --netns`` cluster (name ``ddpdemo``, port base 13700, subnet
10.53.132.0/24, 6 nodes, every node its own address) it submits examples/specs/ddp-torch-2x2.yaml
twice with ``dlsubmit``: a *victim* and a *reference*. Once the victim trained a few steps it
is preempted as ``dlprio`` does it (``scancel --signal=USR2 --batch``, then ``scontrol requeue``
once its checkpoint is written), and its first nodes are drained so the second attempt runs on
other nodes, with another ``MASTER_ADDR``. At the end it prints where each attempt ran, the
steps and losses side by side, and whether the final weights are equal bit for bit; then it
resumes the nodes and takes the cluster down (``--purge``: it is the demo's alone). About 2-3
minutes. Exit status 0 when the runs match, 1 otherwise. Needs root and torch (``.venv/bin/pip install -e '.[torch]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "specs" / "ddp-torch-2x2.yaml"
NAME, PORT = "ddpdemo", 13700
STEP = re.compile(r"^\[ddp\] step (\d+) loss (\S+)$", re.M)
START = re.compile(r"^\[ddp\] start rank=(\d+) world=\d+ addr=(\S+) master=([^:\s]+):\d+ attempt=(\d+)", re.M)
DONE = re.compile(r"^\[ddp\] done steps=\d+ sha256=([0-9a-f]{64})$", re.M)
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


def run(*argv: str, check: bool = True) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise SystemExit(f"ddp_demo: {' '.join(argv)}: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def dlcluster(*args: str) -> str:
    return run(sys.executable, "-m", "slurm_plugin.localcluster.cli", *args, "--name", NAME)


def squeue(job_id: int) -> tuple[str, str]:
    """(state, node list) of a job, from ``squeue`` or, once it left the queue, ``scontrol``."""
    out = run("scontrol", "show", "job", "-o", str(job_id), check=False)
    state = re.search(r"\bJobState=(\S+)", out)
    nodes = re.search(r"\bNodeList=(\S+)", out)
    return (state[1] if state else "UNKNOWN"), (nodes[1] if nodes else "")


def wait(what: str, probe, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"ddp_demo: timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.5)


def submit(out: Path, tag: str) -> tuple[int, Path]:
    stdout = run(sys.executable, "-m", "submit.cli", str(SPEC), "--json", "--output", str(out / f"{tag}-%j.out"),
                 "--checkpoint-root", str(out / f"ckpt-{tag}"))
    job_id = json.loads(stdout)["job_id"]
    return job_id, out / f"{tag}-{job_id}.out"


def text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def report(victim_log: str, reference_log: str) -> bool:
    """Print where each attempt ran and the two runs side by side; True when they match bitwise."""
    for attempt in sorted({int(m[4]) for m in START.finditer(victim_log)}):
        ranks = sorted((int(m[1]), m[2], m[3]) for m in START.finditer(victim_log) if int(m[4]) == attempt)
        print(f"victim attempt {attempt}: master {ranks[0][2]}; ranks at "
              + ", ".join(f"{r}@{addr}" for r, addr, _ in ranks))
    ours, theirs = STEP.findall(victim_log), STEP.findall(reference_log)
    resumed = re.search(r"^\[ddp\] resume step=(\d+)$", victim_log, re.M)
    print(f"{'step':>4}  {'victim loss':<22}{'reference loss':<22}same")
    for (step, loss), (_, ref) in zip(ours, theirs):
        mark = "  <- resumed here" if resumed and int(step) == int(resumed[1]) + 1 else ""
        print(f"{step:>4}  {loss:<22}{ref:<22}{'yes' if loss == ref else 'NO'}{mark}")
    steps = [int(s) for s, _ in ours]
    once = steps == list(range(1, len(steps) + 1)) and len(ours) == len(theirs)
    a, b = DONE.search(victim_log), DONE.search(reference_log)
    same = bool(a and b and a[1] == b[1]) and ours == theirs
    print(f"each step once across attempts: {'yes' if once else 'NO'}")
    print(f"final weights sha256: victim {a[1] if a else '-'}\n"
          f"                      reference {b[1] if b else '-'}")
    print(f"bitwise equal weights and loss curve: {'YES' if same else 'NO'}")
    return same and once


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", action="store_true", help="leave the ddpdemo cluster up at the end")
    args = p.parse_args(argv)
    print(dlcluster("up", "--port-base", str(PORT), "--nodes", "6", "--netns", "--cred-expire", "5", "--clear").strip())
    os.environ["SLURM_CONF"] = f"/etc/slurm-{NAME}/slurm.conf"
    os.environ["PYTHONPATH"] = str(ROOT)
    out = Path(tempfile.mkdtemp(prefix="ddp-demo-"))
    os.chdir(ROOT)
    try:
        victim, victim_log = submit(out, "victim")
        wait("the victim to run", lambda: squeue(victim)[0] == "RUNNING")
        first = run("scontrol", "show", "hostnames", squeue(victim)[1]).split()
        reference, reference_log = submit(out, "reference")
        print(f"victim job {victim} on {','.join(first)}, reference job {reference}; logs in {out}")
        wait("the victim's step 5", lambda: "[ddp] step 5 loss" in text(victim_log))
        print("preempting the victim: USR2 to its batch shell (its checkpoint signal)")
        run("scancel", "--signal=USR2", "--batch", str(victim))
        wait("the victim's checkpoint", lambda: "[ddp] checkpoint step=" in text(victim_log), 60)
        print(f"checkpoint written; draining {','.join(first)} and requeueing the victim")
        run("scontrol", "update", f"NodeName={','.join(first)}", "State=DRAIN", "Reason=ddp demo")
        run("scontrol", "requeue", "incomplete", str(victim))
        for job_id in (victim, reference):
            wait(f"job {job_id} to end", lambda: squeue(job_id)[0] in ENDED, 300)
        print(f"victim {squeue(victim)[0]}, reference {squeue(reference)[0]}\n")
        return 0 if report(victim_log.read_text(), reference_log.read_text()) else 1
    finally:
        run("scontrol", "update", "NodeName=node[1-6]", "State=RESUME", check=False)
        if not args.keep:
            print(dlcluster("down", "--purge").strip())


if __name__ == "__main__":
    sys.exit(main())
