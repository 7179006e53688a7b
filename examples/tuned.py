"""The dlprio run's settings, as an admin would get them: ``dlprio tune`` on the history before
the workload.

The history is the :data:`HISTORY_JOBS` jobs of the trace submitted just before the workload's
first job, scaled the same way as the workload (the same time factor ``k``, floor and cap,
:func:`prioritizer.sim.workload.scale_by`), so that the tuned thresholds are in the live run's
GPU·s. The grid is a site's usual one (:data:`SITE_THRESHOLDS_GPU_S`, GPU·s of the trace's own
time, divided by ``k`` and rounded; starvation knobs :data:`KNOBS`), replayed on the live
cluster's shape with the demo config's policy and modeled costs (``dlprio tune --config``; its
"current config" is the grid point of Tiresias's 3,250/7,200 and knob 8, so the demo config's
own thresholds are never what is chosen). The best grid point's ``policy:`` keys (``dlprio tune
--output``) replace the demo config's; the rest of the demo config stays. Nothing here looks at
the workload itself.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from prioritizer.sim import workload
from prioritizer.sim.traces import TraceJob

HISTORY_JOBS = 200
#: Queue thresholds (GPU·s of the trace's time) a site would try: Tiresias's 3,250/7,200 and
#: one step of about 3x either side.
SITE_THRESHOLDS_GPU_S = ((1000.0, 5000.0), (3250.0, 7200.0), (10000.0, 30000.0),
                         (30000.0, 100000.0))
KNOBS = (4, 8, 16)


class TuneError(RuntimeError):
    """``dlprio tune`` failed or the history is empty (the message says which)."""


def grid(k: float) -> str:
    """The ``--grid`` text: :data:`SITE_THRESHOLDS_GPU_S` divided by ``k`` (whole GPU·s, at least
    1, each pair kept strictly increasing) and :data:`KNOBS`."""
    pairs = ["/".join(map(str, _pair(t, k))) for t in SITE_THRESHOLDS_GPU_S]
    return f"thresholds={','.join(dict.fromkeys(pairs))};knob={','.join(map(str, KNOBS))}"


def _pair(thresholds: tuple[float, float], k: float) -> list[int]:
    a = max(1, round(thresholds[0] / k))
    return [a, max(a + 1, round(thresholds[1] / k))]


def history(before: Sequence[TraceJob], k: float, cap_s: float) -> list[workload.ScaledJob]:
    """The last :data:`HISTORY_JOBS` jobs of ``before``, scaled by ``k`` (floor, ``cap_s``)."""
    return workload.scale_by(list(before[-HISTORY_JOBS:]), k, cap_s=cap_s)


def tune(before: Sequence[TraceJob], k: float, cap_s: float, base: Path, nodes: int,
         gpus_per_node: int, out: Path, dlprio: Path,
         say: Callable[[str], None] = print) -> Path:
    """Run ``dlprio tune`` on the scaled history and write ``out/dlprio-tuned.yaml``: ``base``
    with the best grid point's ``policy:`` keys. ``say`` gets tune's ranking. Returns the path.

    Raises:
        TuneError: no job before the workload, or ``dlprio tune`` failed (its message).
    """
    jobs = history(before, k, cap_s)
    if not jobs:
        raise TuneError("no job before the workload to tune on")
    data = yaml.safe_load(base.read_text()) or {}
    start = {**(data.get("policy") or {}), "thresholds_gpu_s": _pair(SITE_THRESHOLDS_GPU_S[1], k),
             "starve_knob": 8}
    tune_base = out / "tune-base.yaml"
    tune_base.write_text(yaml.safe_dump({**data, "policy": start}, sort_keys=False))
    trace = out / "history-trace.csv"
    workload.write_tiresias_csv(jobs, trace)
    snippet = out / "tuned-policy.yaml"
    argv = [str(dlprio), "tune", "--trace", str(trace), "--grid", grid(k), "--config", str(tune_base),
            "--nodes", str(nodes), "--gpus-per-node", str(gpus_per_node), "--output", str(snippet)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TuneError(f"dlprio tune exited {proc.returncode}: {proc.stderr.strip()}")
    for line in proc.stdout.rstrip("\n").splitlines():
        say(f"  {line}")
    data.setdefault("policy", {}).update(yaml.safe_load(snippet.read_text())["policy"])
    path = out / "dlprio-tuned.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
