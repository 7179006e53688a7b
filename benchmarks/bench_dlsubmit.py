"""dlsubmit speed against plain sbatch on a live cluster (targets: docs/dlsubmit.md, "Speed").

Prints, as the minimum of ``--repeat`` runs (the machine is shared; the minimum is the least
disturbed figure):

* ``sbatch`` of the script dlsubmit renders for a 1-instance CPU spec (``sbatch --parsable``);
* ``dlsubmit SPEC`` end to end (a new Python process: imports, validation, render, sbatch);
* the difference (target: at most 100 ms);
* ``dlsubmit a.yaml b.yaml ...`` with ``--batch`` specs in one call: jobs per second
  (target: at least 50).

Each figure comes with the CPU seconds the command and its children used (the minimum too): on
a shared machine wall time includes waiting for a core, CPU time does not. Also printed: a bare
``python -c pass`` of the same interpreter (the floor any Python command pays). The package's
modules are byte-compiled first (``compileall``, what ``pip install`` does), so a development
checkout run with ``PYTHONDONTWRITEBYTECODE`` does not pay for compiling them on every call.

Every job it submits runs ``true`` and is cancelled at the end. Run with the cluster named by
SLURM_CONF::

    SLURM_CONF=/etc/slurm-NAME/slurm.conf .venv/bin/python benchmarks/bench_dlsubmit.py
"""

from __future__ import annotations

import argparse
import compileall
import resource
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
REPO = Path(__file__).resolve().parents[1]
CPU: dict[str, list[float]] = {}   # CPU seconds (user + system, children included) per label


def _timed(argv: list[str], stdin: str | None = None, label: str = "") -> tuple[float, str]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(label, []).append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    return wall, proc.stdout


def _cpu(label: str) -> str:
    return f"cpu min {min(CPU[label]) * 1000:7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()
    for pkg in ("submit", "slurm_plugin", "prioritizer"):
        compileall.compile_dir(REPO / pkg, quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-dlsubmit-"))
    spec = tmp / "job.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    flags = ["--output", str(tmp / "%j.out"), "--checkpoint-root", str(tmp / "ck")]
    ids: list[str] = []
    script = subprocess.run([DLSUBMIT, str(spec), "--dry-run", *flags], capture_output=True,
                            text=True, check=True).stdout
    sb, dl, py = [], [], []
    for _ in range(args.repeat):
        t, out = _timed(["sbatch", "--parsable"], script, "sbatch")
        sb.append(t)
        ids.append(out.strip().split(";")[0])
        t, out = _timed([DLSUBMIT, str(spec), *flags], label="dlsubmit")
        dl.append(t)
        ids.append(out.strip())
        py.append(_timed([sys.executable, "-c", "pass"], label="python")[0])
    specs = []
    for i in range(args.batch):
        p = tmp / f"job{i}.yaml"
        p.write_text(yaml.safe_dump({**SPEC, "name": f"bench{i}"}))
        specs.append(str(p))
    batch = []
    for _ in range(max(1, args.repeat // 2)):
        t, out = _timed([DLSUBMIT, *specs, *flags], label="batch")
        batch.append(t)
        ids += out.split()
    subprocess.run(["scancel", *ids], check=False)
    print(f"python -c pass (the floor)         min {min(py) * 1000:7.1f} ms  {_cpu('python')}")
    print(f"sbatch of the rendered script      min {min(sb) * 1000:7.1f} ms  {_cpu('sbatch')}  (n={len(sb)})")
    print(f"dlsubmit SPEC, end to end          min {min(dl) * 1000:7.1f} ms  {_cpu('dlsubmit')}  (n={len(dl)})")
    print(f"dlsubmit - sbatch                      {(min(dl) - min(sb)) * 1000:7.1f} ms  (target <= 100 ms)")
    print(f"dlsubmit {args.batch} specs in one call     min {min(batch):7.2f} s   "
          f"= {args.batch / min(batch):6.1f} jobs/s (target >= 50)  {_cpu('batch')}")


if __name__ == "__main__":
    main()
