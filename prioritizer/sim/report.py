"""Summaries, tables, CSV/JSON and plots of simulator results (``dlprio simulate`` output).

Pure functions from :class:`prioritizer.sim.engine.SimResult` to numbers and text, plus two
writers (jobs CSV, PNG plot with matplotlib's Agg backend). Percentiles are nearest-rank
(the p-th percentile of n sorted values is the value at rank ceil(p/100 × n)). Units: seconds,
GPU utilisation as a fraction of ``total GPUs × makespan``; a replay with GPU sharing adds
:data:`SHARING_KEYS` (:func:`sharing_summary`).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from pathlib import Path
from typing import Any, Sequence

from prioritizer.sim.engine import SimResult
from prioritizer.sim.windows import WORSE_RATIO, compare_windows, window_ratios
from slurm_plugin.common.atomic import save_figure, write_atomically

SUMMARY_KEYS = ("policy", "jobs", "skipped_jobs", "avg_jct_s", "median_jct_s", "p95_jct_s",
                "p99_jct_s", "makespan_s", "avg_queueing_delay_s", "preemptions", "promotions",
                "gpu_utilisation", "wall_s")
SHARING_KEYS = ("production_jobs", "production_avg_jct_s", "opportunistic_jobs",
                "opportunistic_avg_jct_s", "opportunistic_preemptions",
                "gpu_utilisation_arrival_window")
JOB_COLUMNS = ("job_id", "submit", "start", "end", "jct", "queueing_delay", "preemptions",
               "promotions")


def nearest_rank(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile of ``values`` (0 for an empty sequence)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(percent / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


def summarize(result: SimResult) -> dict[str, Any]:
    """The summary object of one replay, keys exactly :data:`SUMMARY_KEYS`.

    ``skipped_jobs`` counts rows the reader skipped (zero GPUs or duration) plus jobs that
    can never fit on the cluster (``result.unfittable_jobs``). A replay with shard or
    opportunistic jobs (``result.sharing``) also has the keys :data:`SHARING_KEYS`
    (:func:`sharing_summary`).
    """
    jcts = [j.jct for j in result.jobs]
    makespan = max((j.end for j in result.jobs), default=0.0) - min(
        (j.submit for j in result.jobs), default=0.0)
    capacity = result.total_gpus * makespan
    return {
        "policy": result.policy,
        "jobs": len(result.jobs),
        "skipped_jobs": result.skipped_jobs + result.unfittable_jobs,
        "avg_jct_s": statistics.fmean(jcts) if jcts else 0.0,
        "median_jct_s": statistics.median(jcts) if jcts else 0.0,
        "p95_jct_s": nearest_rank(jcts, 95),
        "p99_jct_s": nearest_rank(jcts, 99),
        "makespan_s": makespan,
        "avg_queueing_delay_s": statistics.fmean(j.queueing_delay for j in result.jobs)
        if jcts else 0.0,
        "preemptions": sum(j.preemptions for j in result.jobs),
        "promotions": sum(j.promotions for j in result.jobs),
        "gpu_utilisation": result.gpu_s_held / capacity if capacity else 0.0,
        "wall_s": result.wall_s,
    } | (sharing_summary(result) if result.sharing is not None else {})


def sharing_summary(result: SimResult) -> dict[str, Any]:
    """The :data:`SHARING_KEYS` of a replay with GPU sharing (``result.sharing`` set).

    Production jobs are all jobs but the opportunistic ones (shard jobs included); an average
    over no job is None (``null``; the table shows ``-``). ``gpu_utilisation_arrival_window``: GPU·s held between the first and the
    last submit over total GPUs × that span (None when all jobs arrive at once: no span); a shard job counts
    its share. Unlike ``gpu_utilisation`` (over the makespan) it leaves out the tail after the
    last arrival, where the cluster drains and sharing has nothing left to fill.
    """
    figures = result.sharing
    assert figures is not None
    opportunistic = [j for j in result.jobs if j.job_id in figures.opportunistic]
    production = [j for j in result.jobs if j.job_id not in figures.opportunistic]
    capacity = result.total_gpus * figures.window_s
    return {
        "production_jobs": len(production),
        "production_avg_jct_s": statistics.fmean(j.jct for j in production)
        if production else None,
        "opportunistic_jobs": len(opportunistic),
        "opportunistic_avg_jct_s": statistics.fmean(j.jct for j in opportunistic)
        if opportunistic else None,
        "opportunistic_preemptions": sum(j.preemptions for j in opportunistic),
        "gpu_utilisation_arrival_window": figures.window_gpu_s / capacity if capacity else None,
    }


def format_table(summaries: Sequence[dict[str, Any]], *, styled: bool = False) -> str:
    """The summary table, one row per policy, laid out by :mod:`prioritizer.tables` (``styled``:
    for a terminal; otherwise plain, never cropped), ending in a newline. Units in the headers
    (s; GPU util a fraction); with several policies, ``x`` columns give avg and p95 JCT as
    ratios to the first row."""
    head = ["policy", "jobs", "avg JCT s", "median s", "p95 s", "p99 s", "makespan s",
            "avg queue s", "preempt", "promote", "GPU util", "wall s"]
    compare = len(summaries) > 1
    if compare:
        head += ["avg x", "p95 x"]
    rows = []
    first = summaries[0] if summaries else None
    for s in summaries:
        row = [s["policy"], str(s["jobs"]), f"{s['avg_jct_s']:.1f}", f"{s['median_jct_s']:.1f}",
               f"{s['p95_jct_s']:.1f}", f"{s['p99_jct_s']:.1f}", f"{s['makespan_s']:.0f}",
               f"{s['avg_queueing_delay_s']:.1f}", str(s["preemptions"]), str(s["promotions"]),
               f"{s['gpu_utilisation']:.3f}", f"{s['wall_s']:.2f}"]
        if compare and first is not None:
            row += [_ratio(s["avg_jct_s"], first["avg_jct_s"]),
                    _ratio(s["p95_jct_s"], first["p95_jct_s"])]
        rows.append(row)
    from prioritizer import tables   # rich: imported only when a table is printed
    return tables.render(head, rows, head[1:], styled=styled)


def format_sharing_table(summaries: Sequence[dict[str, Any]], *, styled: bool = False) -> str:
    """The GPU-sharing table (summaries with :data:`SHARING_KEYS`): a title line, then one row
    per policy with production and all jobs' avg JCT, the opportunistic jobs' figures and GPU
    utilisation over the arrival window; ending in a newline."""
    head = ["policy", "prod jobs", "prod avg JCT s", "all avg JCT s", "opp jobs",
            "opp avg JCT s", "opp preempt", "GPU util arrivals"]
    rows = [[s["policy"], str(s["production_jobs"]), _seconds(s["production_avg_jct_s"]),
             f"{s['avg_jct_s']:.1f}", str(s["opportunistic_jobs"]),
             _seconds(s["opportunistic_avg_jct_s"]), str(s["opportunistic_preemptions"]),
             _fraction(s["gpu_utilisation_arrival_window"])] for s in summaries]
    from prioritizer import tables   # rich: imported only when a table is printed
    title = ("GPU sharing: production jobs (all but opportunistic) and opportunistic jobs; "
             "GPU util arrivals = GPU·s held from the first to the last submit over GPUs x that "
             "span\n")
    return title + tables.render(head, rows, head[1:], styled=styled)


def _fraction(value: float | None) -> str:
    """A utilisation cell: ``-`` where there is nothing to divide by."""
    return "-" if value is None else f"{value:.3f}"


def _seconds(value: float | None) -> str:
    """An average JCT cell: ``-`` over no job."""
    return "-" if value is None else f"{value:.1f}"


def window_comparison(results: Sequence[SimResult], baseline: str,
                      window_jobs: int) -> dict[str, dict[str, Any]]:
    """:func:`prioritizer.sim.windows.compare_windows` of replays of the same trace: jobs
    keyed by their trace row (``job_id``), in trace order."""
    return compare_windows({r.policy: {j.job_id: (j.submit, j.jct)
                                       for j in sorted(r.jobs, key=lambda j: j.job_id)}
                            for r in results}, baseline, window_jobs)


def format_windows_table(comparison: dict[str, dict[str, Any]], baseline: str,
                         window_jobs: int, *, styled: bool = False, what: str = "") -> str:
    """The "against BASELINE" table: a title line, then one row per policy other than the
    baseline (in ``comparison``'s order) with its avg JCT ratio, worst window ratio, windows
    over 1.03, hurt jobs (% of jobs) and number of windows; ending in a newline. ``what``
    follows the baseline's name in the title."""
    head = ["policy", "avg x", "worst window x", f"windows > {WORSE_RATIO:g}", "hurt jobs %",
            "windows"]
    rows = [[name, f"{c['avg_jct_ratio']:.3f}", f"{c['worst_window_ratio']:.3f}",
             str(c["windows_over_1_03"]), f"{c['hurt_jobs_share'] * 100:.1f}",
             str(len(c["windows"]))]
            for name, c in comparison.items() if name != baseline]
    from prioritizer import tables   # rich: imported only when a table is printed
    title = (f"against {baseline}{what}, per window of {window_jobs} jobs in submit order (a last "
             f"one under {window_jobs / 2:g} jobs joins the one before); hurt: JCT > 2x and "
             "> 1 h more than under the baseline\n")
    return title + tables.render(head, rows, head[1:], styled=styled)


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.3f}" if base else "-"


def write_jobs_csv(results: Sequence[SimResult], path: str | Path) -> None:
    """Per-job CSV (columns :data:`JOB_COLUMNS`, plus ``policy`` first when several)."""
    several = len(results) > 1
    handle = io.StringIO()
    writer = csv.writer(handle)
    writer.writerow((("policy",) if several else ()) + JOB_COLUMNS)
    for result in results:
        for j in sorted(result.jobs, key=lambda j: j.job_id):
            row = [j.name, _num(j.submit), _num(j.start), _num(j.end), _num(j.jct),
                   _num(j.queueing_delay), j.preemptions, j.promotions]
            writer.writerow(([result.policy] if several else []) + row)
    write_atomically(path, handle.getvalue(), newline="")


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:.3f}"


def queue_axis_hours(results: Sequence[SimResult]) -> tuple[float, float]:
    """The queue-length panel's x range in hours: from the first job of the replay (time 0;
    with ``--since`` the trace is re-based so that the first kept job arrives at 0) to the end of
    the queue's activity, with 5 % to spare: the later of the last arrival and the last time a
    policy's queue became empty. A long job that runs on alone afterwards (Philly's last ends
    1,470 h in, its queues empty by 300 h) would only add a flat zero line."""
    end = max((j.submit for r in results for j in r.jobs), default=0.0)
    for r in results:
        waited = [i for i, (_, pending, _) in enumerate(r.queue_samples) if pending]
        if waited:
            last = waited[-1]
            after = r.queue_samples[last + 1:last + 2] or r.queue_samples[last:last + 1]
            end = max(end, after[0][0])
    return 0.0, max(end / 3600 * 1.05, 1 / 60)


LINE_STYLES = (("-", "o", 3.2), ("--", "s", 2.4), ("-.", "^", 1.8), (":", "D", 1.4),
               ((0, (5, 1, 1, 1, 1, 1)), "v", 1.1), ((0, (1, 3)), "x", 0.9))
"""(line style, marker, width) of the 1st, 2nd, ... policy: each next one thinner and drawn
above the ones before, so curves that coincide (two policies with the same schedule) all stay
visible."""


def line_style(index: int, points: int) -> dict[str, Any]:
    """matplotlib keyword arguments for the ``index``-th policy's line of ``points`` points
    (about 8 markers per line, whatever its length)."""
    style, marker, width = LINE_STYLES[index % len(LINE_STYLES)]
    return {"linestyle": style, "marker": marker, "linewidth": width, "markersize": 3 + width,
            "markevery": max(points // 8, 1), "fillstyle": "none", "zorder": 2 + index}


def write_plot(results: Sequence[SimResult], path: str | Path,
               comparison: dict[str, dict[str, Any]] | None = None,
               baseline: str | None = None) -> None:
    """PNG with the JCT CDF per policy (log x) and pending jobs over time per policy, the time
    axis from the first job of the replay to the end of the queue's activity
    (:func:`queue_axis_hours`); each policy has its own line style and marker
    (:data:`LINE_STYLES`). With a ``comparison`` (:func:`window_comparison`) a third panel
    gives each other policy's per-window avg JCT over ``baseline``'s (log y, a line at 1.0)
    against the window's first submit time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    panels = 3 if comparison else 2
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5))
    cdf, queue = axes[0], axes[1]
    for i, result in enumerate(results):
        jcts = sorted(max(j.jct, 1.0) for j in result.jobs)
        n = len(jcts)
        cdf.step(jcts, [(k + 1) / n for k in range(n)], where="post", label=result.policy,
                 **line_style(i, n))
        times = [t / 3600 for t, _, _ in result.queue_samples]
        queue.step(times, [p for _, p, _ in result.queue_samples], where="post",
                   label=result.policy, **line_style(i, len(times)))
    cdf.set_xscale("log")
    cdf.xaxis.set_minor_formatter(NullFormatter())
    cdf.set_xlabel("job completion time (s)")
    cdf.set_ylabel("fraction of jobs")
    cdf.set_title("JCT CDF")
    queue.set_xlim(*queue_axis_hours(results))
    queue.set_xlabel("time since the first job of the replay (h), to the last wait")
    queue.set_ylabel("pending jobs")
    queue.set_title("queue length")
    if comparison:
        _window_panel(axes[2], results, comparison, baseline)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def _minor_label(ax: Any, value: float) -> str:
    """The label of a minor tick (2-9 x a power of ten) on a log axis, as matplotlib's own
    ``LogFormatter`` chooses them but written plainly (``0.6``, not ``6e-01``): every minor
    tick over less than half a decade, those at 2, 3 and 5 over up to two decades, none beyond
    (so labels never pile up)."""
    low, high = sorted(ax.get_ylim())
    if value <= 0 or low <= 0:
        return ""
    decades = math.log10(high / low)
    digit = round(value / 10 ** math.floor(math.log10(value)), 6)
    if decades < 0.5 or (decades <= 2 and digit in (2, 3, 5)):
        return f"{value:g}"
    return ""


def _window_panel(ax: Any, results: Sequence[SimResult], comparison: dict[str, dict[str, Any]],
                  baseline: str | None) -> None:
    """Each policy's per-window ratio to the baseline, in the policies' line styles."""
    for i, result in enumerate(results):
        if result.policy == baseline or result.policy not in comparison:
            continue
        windows = comparison[result.policy]["windows"]
        ax.plot([w["first_submit_s"] / 3600 for w in windows], window_ratios(windows),
                label=result.policy, **line_style(i, len(windows)))
    ax.axhline(1.0, color="black", linewidth=0.8, label=f"{baseline} (baseline)")
    from matplotlib.ticker import FuncFormatter
    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")   # 0.5, 2 rather than 10^0 forms
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: _minor_label(ax, value)))
    ax.set_xlabel("window's first submit (h since the first job)")
    ax.set_ylabel(f"window avg JCT / {baseline}'s")
    ax.set_title("per-window JCT ratio")
