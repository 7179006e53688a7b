"""dlsubmit speed against plain sbatch on a live cluster (issue 15 targets).

Prints, as the minimum of ``--repeat`` runs (the machine is shared; the minimum is the least
disturbed figure):

* ``sbatch`` of the script dlsubmit renders for a 1-instance CPU spec (``sbatch --parsable``);
* ``dlsubmit SPEC`` end to end (a new Python process: imports, validation, render, sbatch);
* the difference (target: at most 100 ms);
* ``dlsubmit a.yaml b.yaml ...`` with ``--batch`` specs in one call: jobs per second
  (target: at least 50).

Every job it submits runs ``true`` and is cancelled at the end. Run with the cluster named by
SLURM_CONF::

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/bench_dlsubmit.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SPEC = {"protocolVersion": 2, "name": "bench", "type": "job",
        "taskRoles": {"main": {"instances": 1, "resourcePerInstance": {"cpu": 1, "memoryMB": 100, "gpu": 0},
                               "commands": ["true"]}}}
DLSUBMIT = str(Path(sys.executable).with_name("dlsubmit"))


def _timed(argv: list[str], stdin: str | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-dlsubmit-"))
    spec = tmp / "job.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    flags = ["--output", str(tmp / "%j.out"), "--checkpoint-root", str(tmp / "ck")]
    ids: list[str] = []
    script = subprocess.run([DLSUBMIT, str(spec), "--dry-run", *flags], capture_output=True,
                            text=True, check=True).stdout
    sb, dl = [], []
    for _ in range(args.repeat):
        t, out = _timed(["sbatch", "--parsable"], script)
        sb.append(t)
        ids.append(out.strip().split(";")[0])
        t, out = _timed([DLSUBMIT, str(spec), *flags])
        dl.append(t)
        ids.append(out.strip())
    specs = []
    for i in range(args.batch):
        p = tmp / f"job{i}.yaml"
        p.write_text(yaml.safe_dump({**SPEC, "name": f"bench{i}"}))
        specs.append(str(p))
    batch = []
    for _ in range(max(1, args.repeat // 2)):
        t, out = _timed([DLSUBMIT, *specs, *flags])
        batch.append(t)
        ids += out.split()
    subprocess.run(["scancel", *ids], check=False)
    print(f"sbatch of the rendered script      min {min(sb) * 1000:7.1f} ms  (n={len(sb)})")
    print(f"dlsubmit SPEC, end to end          min {min(dl) * 1000:7.1f} ms  (n={len(dl)})")
    print(f"dlsubmit - sbatch                      {(min(dl) - min(sb)) * 1000:7.1f} ms  (target <= 100 ms)")
    print(f"dlsubmit {args.batch} specs in one call     min {min(batch):7.2f} s   "
          f"= {args.batch / min(batch):6.1f} jobs/s (target >= 50)")


if __name__ == "__main__":
    main()
