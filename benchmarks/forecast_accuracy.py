"""Start-time forecast quality on the shipped traces (prints figures, asserts nothing).

For Philly's dense window (127 × 8) and ITP cluster04 (69 × 8), real nodes, the default costs
(15 s checkpoint, 121 s requeue, 30 s ticks, 60 s min run), each policy of ``--policies``:
``dlprio history check --forecasts``'s figures (:mod:`prioritizer.history.forecast_check`:
jobs that waited at least 10 min from the moment, median ``|p50 - actual| / wait``, share of
actual starts inside p10-p90, before p10 and after p90, each for the walk-forward calibrated
band and the draws' raw one, the naive "position × mean run time" error) and, with ``--plot``,
the calibration plot: per trace the share of actual starts at or before the forecast's p10,
p50 and p90 (ideal: 0.1, 0.5, 0.9), raw and calibrated, and the published p50 against the
actual wait. Below each trace's figures: the two candidate medians (the published one, the
draws' median clipped into the calibrated p10-p90, and the draws' median moved by the
residuals' median ratio), each with its median error and the share
of actual starts at or before it, and the share of calibrated bands whose p90 is open.
``--arrivals history`` draws later submissions in each draw as the daemon's
``forecast.arrivals: history`` does (:mod:`prioritizer.forecast.arrivals`); ``--traces``
picks the traces by name (comma-separated).

    .venv/bin/python benchmarks/forecast_accuracy.py [--moments 100] [--draws 20] \\
        [--policies tiresias-las] [--arrivals none|history] [--arrival-window-s 21600] \\
        [--traces "ITP cluster04 (69 × 8)"] [--plot docs/forecast-calibration.png]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from prioritizer.forecast.arrivals import DEFAULT_WINDOW_S
from prioritizer.history.forecast_check import (ARRIVALS, WAIT_BUCKETS, JobCheck,
                                                check_forecasts, report)
from prioritizer.policy.config import PolicyConfig
from prioritizer.sim.engine import Cluster
from prioritizer.sim.traces import read_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = {  # name: (path, --since, nodes)
    "Philly dense (127 × 8)": (ROOT / "data/traces/philly-15k/philly_data_training.csv",
                               4147200.0, 127),
    "ITP cluster04 (69 × 8)": (ROOT / "data/traces/itp-2021/cluster04.csv", None, 69),
}


def plot(results: dict[str, list[JobCheck]], path: str, arrivals: str) -> None:
    """The calibration plot (see module doc) of the checks that waited at least 10 min."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(results), figsize=(5.5 * len(results), 9.5), squeeze=False)
    for col, (name, checks) in enumerate(results.items()):
        kept = [c for c in checks if c.actual >= 600]
        ax = axes[0][col]
        levels = (0.1, 0.5, 0.9)
        for prefix, label in (("raw_", "draws' raw band"), ("", "calibrated band")):
            if not kept:
                break
            seen = [sum(c.actual <= getattr(c, f"{prefix}p{int(q * 100)}") for c in kept)
                    / len(kept) for q in levels]
            ax.plot(levels, seen, "o-", label=f"{label} (arrivals: {arrivals})")
        ax.plot((0, 1), (0, 1), "k--", label="ideal")
        ax.set(title=f"{name}: {len(kept)} forecasts", xlabel="forecast quantile",
               ylabel="share of actual starts at or before it", xlim=(0, 1), ylim=(0, 1))
        ax.legend(loc="upper left")
        ax = axes[1][col]
        hours = [c.actual / 3600 for c in kept]
        ax.loglog(hours, [max(c.p50, 1) / 3600 for c in kept], ".", alpha=0.4,
                  label="forecast p50")
        ax.loglog(hours, [max(c.naive, 1) / 3600 for c in kept], "x", alpha=0.3,
                  label="naive: position × mean run time")
        if hours:
            ax.plot((min(hours), max(hours)), (min(hours), max(hours)), "k--", label="exact")
        ax.set(xlabel="actual wait from the moment (h)", ylabel="predicted wait (h)")
        ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def p50_choices(checks: list[JobCheck]) -> str:
    """The two candidate medians of the checks that waited at least 10 min: the published
    p50 (the draws' median clipped into the calibrated p10-p90) and the draws' median moved
    by the residuals' median ratio; per candidate the median ``|p50 - actual| / wait``, the
    share of actual starts at or before it (ideal 50 %), and the median error by wait
    group; and the share of bands whose p90 is open (too many forecasts still waiting)."""
    kept = [c for c in checks if c.actual >= 600]
    if not kept:
        return "p50 choices: no job waited 10 min"
    candidates = {"p50 = draws' median clipped into the band": [c.p50 for c in kept],
                  "p50 = draws' median x residuals' median ratio": [c.shifted_p50
                                                                   for c in kept]}
    parts = []
    for label, p50s in candidates.items():
        errors = [abs(p - c.actual) / c.actual for p, c in zip(p50s, kept)]
        before = sum(c.actual <= p for p, c in zip(p50s, kept)) / len(kept)
        groups = []
        for name, low, high in WAIT_BUCKETS:
            inside = [e for e, c in zip(errors, kept) if low <= c.actual < high]
            groups.append(f"{name} {statistics.median(inside) * 100:.0f} %" if inside
                          else f"{name} -")
        parts.append(f"{label}: median error {statistics.median(errors) * 100:.0f} %, "
                     f"starts at or before it {before * 100:.0f} % ({', '.join(groups)})")
    opened = sum(math.isinf(c.p90) for c in kept) / len(kept)
    return "p50 choices: " + "; ".join(parts) + f"; open p90 (censoring): {opened * 100:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moments", type=int, default=100)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--policies", default="tiresias-las")
    parser.add_argument("--plot", metavar="OUT.png")
    parser.add_argument("--arrivals", default="none", choices=ARRIVALS,
                        help="future arrivals drawn in each draw (default none)")
    parser.add_argument("--arrival-window-s", type=float, default=DEFAULT_WINDOW_S)
    parser.add_argument("--traces", default=",".join(TRACES),
                        help="comma-separated trace names (default: both)")
    args = parser.parse_args()
    results = {}
    for policy in args.policies.split(","):
        for name, (path, since, nodes) in TRACES.items():
            if name not in args.traces.split(","):
                continue
            trace = read_trace(path, since=since)
            started = time.process_time()
            checks = check_forecasts(trace, Cluster(nodes, 8), PolicyConfig(policy=policy),
                                     args.moments, args.draws, arrivals=args.arrivals,
                                     arrival_window_s=args.arrival_window_s)
            cpu = time.process_time() - started
            data = report(checks, args.moments, args.draws, args.arrivals)["forecasts"]
            print(f"{name}, {policy}: {json.dumps(data)} ({cpu:.1f} s CPU)", flush=True)
            print(f"  {p50_choices(checks)}", flush=True)
            results[f"{name}, {policy}"] = checks
    if args.plot:
        plot(results, args.plot, args.arrivals)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
