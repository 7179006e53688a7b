"""How the views show a start-time forecast of the snapshot (pure: ``now`` is an argument).

``dlqueue``'s START column (:func:`start_cell`: the p50 start as ``~25m``, ``~3h``, ``~2d``;
``>24h`` beyond the horizon; ``now`` when due; ``n/a`` for a job that waits for something no
GPU freed ends, a hold, a dependency or its array's throttle), its ``--json`` field (:func:`json_field`) and
the lines of ``dlqueue -j ID`` and ``dlprio explain ID`` (:func:`detail_lines`: p10-p90 of
start and finish, the jobs ahead, the chance of a preemption). A forecast older than its
``stale_after_s``, or in a snapshot the daemon no longer updates (:func:`expired`), is never
shown as current: the views say it is stale instead. Snapshot
format: :mod:`prioritizer.daemon.forecasts`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from prioritizer.daemon.snapshot import ahead, is_current
from prioritizer.forecast.calibrate import MIN_KNOWN

Forecast = Mapping[str, Any]


def is_fresh(forecast: Forecast | None, now: float) -> bool:
    """Whether ``forecast`` exists and is current at ``now``: at most ``stale_after_s`` old,
    and not ahead of the clock (:func:`prioritizer.daemon.snapshot.is_current`)."""
    return forecast is not None and is_current(forecast["made_at"], now,
                                               forecast["stale_after_s"])


def expired(forecast: Forecast | None) -> dict[str, Any] | None:
    """``forecast`` marked stale whatever its age: what the views use when the snapshot
    itself is old (the daemon stopped), so that no forecast of a stopped daemon looks current."""
    return None if forecast is None else {**forecast, "stale_after_s": -1.0}


def entry(forecast: Forecast | None, job_id: int) -> Mapping[str, Any] | None:
    """The forecast of ``job_id`` (None: not in it)."""
    if forecast is None:
        return None
    found = forecast["jobs"].get(str(job_id))
    return found if isinstance(found, Mapping) else None


def span(seconds: float) -> str:
    """A duration as the views write it: ``25m`` under 90 minutes, ``3h`` under 48 hours,
    else ``2d`` (rounded; at least ``1m``)."""
    if seconds < 90 * 60:
        return f"{max(round(seconds / 60), 1)}m"
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600)}h"
    return f"{round(seconds / 86400)}d"


def age(seconds: float) -> str:
    """How long ago a forecast was made: ``7s`` under a minute, else as :func:`span` writes
    it (``1m``, ``25m``, ``3h``); never negative."""
    seconds = max(seconds, 0.0)
    return f"{int(seconds)}s" if seconds < 60 else span(seconds)


def when(at: float | None, now: float, horizon_s: float) -> str:
    """One forecast time relative to ``now``: ``now`` when due (within a minute), ``~25m``,
    ``>24h`` beyond the horizon (None)."""
    if at is None:
        return f">{span(horizon_s)}"
    if at - now < 60:
        return "now"
    return f"~{span(at - now)}"


def start_cell(forecast: Forecast | None, job_id: int, now: float, waiting: bool) -> str:
    """The START cell of a waiting job: its p50 start (for a job that ran when the forecast
    was made, preempted and requeued since: the p50 of its ``restart``, "" when no draw
    preempted it); "" for a running job, without a fresh forecast, or for a job the forecast
    does not hold; ``never`` when it fits on no node; ``n/a`` when it waits for something no
    GPU freed ends (``waits_for``)."""
    if not waiting or not is_fresh(forecast, now):
        return ""
    assert forecast is not None   # is_fresh
    found = entry(forecast, job_id)
    if found is None:
        return ""
    if "waits_for" in found:   # freed GPUs would not start it: not forecast
        return "n/a"
    if "restart" in found:   # it ran at the forecast: its next start after the preemption
        restart = found["restart"]
        return "" if restart is None else when(restart[1], now, forecast["horizon_s"])
    if found["start"] is None:
        return "never"
    return when(found["start"][1], now, forecast["horizon_s"])


def json_field(forecast: Forecast | None, job_id: int, now: float) -> dict[str, Any] | None:
    """``dlqueue --json``'s ``forecast`` of a job: ``made_at``, ``start`` (calibrated) and
    ``finish`` (``[p10, p50, p90]`` epoch s, ``null`` beyond the horizon or open; ``null``
    lists: fits on no node), ``calibrated`` (past forecasts the start band rests on, started
    or still waiting; 0: the draws' raw band), ``preempt_chance``, ``ahead``, ``horizon_s``, ``sharing`` (``shard``,
    ``opportunistic`` or ``opportunistic shard``: forecast as a whole-GPU production job;
    null for any other job),
    ``restart`` (a job running at the forecast: its next start after a preemption, over the
    draws that preempted it, ``null`` when none did; ``null`` for any other job),
    ``waits_for`` (a pending job not forecast: what it waits for, e.g. ``JobArrayTaskLimit``,
    ``Dependency``; ``null`` for any other job); None without a fresh forecast."""
    found = entry(forecast, job_id) if is_fresh(forecast, now) else None
    if found is None or forecast is None:
        return None
    return {"made_at": forecast["made_at"], "start": found["start"], "finish": found["finish"],
            "calibrated": found.get("calibrated", 0),
            "preempt_chance": found["preempt_chance"], "ahead": found["ahead"],
            "horizon_s": forecast["horizon_s"], "sharing": found.get("sharing"),
            "restart": found.get("restart"), "waits_for": found.get("waits_for")}


def _band(values: list[float | None] | None, now: float, horizon_s: float) -> str:
    if values is None:
        return "never (fits on no node)"
    low, mid, high = (when(v, now, horizon_s) for v in values)
    if low == high:   # every draw the same, as shown (known run times, or one draw)
        return low
    return f"{low} to {high} (median {mid})"


def calibration_note(found: Mapping[str, Any], forecast: Forecast) -> str:
    """Whether a waiting job's start band is calibrated on past outcomes (and whether its
    p90 is open: the past outcomes do not reach it yet), or the draws' raw band (and why: too
    few outcomes known, a median beyond the horizon, or the job was not waiting when the
    forecast was made, e.g. running since preempted)."""
    used = found.get("calibrated", 0)
    if used:
        note = f"band calibrated on {used} earlier forecasts (jobs started or still waiting)"
        raw = found.get("raw_start") or found["start"]
        open_ = [name for name, cal, own in zip(("p10", "p50", "p90"), found["start"], raw)
                 if cal is None and own is not None]
        if open_:
            note += (f"; {' and '.join(open_)} open (shown beyond the horizon): too many of "
                     "those jobs still wait to place it")
        return note
    known = forecast.get("known_outcomes", 0)
    if known >= MIN_KNOWN:
        if found["start"][1] is None:
            return "raw band of the draws: its median is beyond the horizon"
        return "raw band of the draws: the job was not waiting when the forecast was made"
    return (f"raw band of the draws (too narrow as a rule): {known} earlier forecasts' "
            f"outcomes known, {MIN_KNOWN} needed to calibrate it")


def detail_lines(forecast: Forecast | None, job_id: int, now: float, running: bool,
                 daemon_known: bool = True) -> list[str]:
    """The forecast lines of one job for ``dlqueue -j`` and ``dlprio explain``."""
    if forecast is None:
        why = ("the daemon has not made one yet" if daemon_known
               else "no daemon snapshot")
        return [f"forecast: none ({why})"]
    made = time.strftime("%H:%M:%S UTC", time.gmtime(forecast["made_at"]))
    ago = age(now - forecast["made_at"])
    if not is_fresh(forecast, now):
        if ahead(forecast["made_at"], now):
            return [f"forecast: STALE (made at {made}, {age(forecast['made_at'] - now)} ahead "
                    "of this host's clock: the clock was set back since, or runs behind the "
                    "daemon's): not shown"]
        return [f"forecast: STALE (made at {made}, {ago} ago; the daemon is stopped or "
                "late): not shown"]
    found = entry(forecast, job_id)
    if found is None:
        return [f"forecast: none for this job yet (the last one, made at {made}, predates it)"]
    horizon = forecast["horizon_s"]
    later = ("later submissions drawn from the recent ones"
             if forecast.get("arrivals") == "history" else "no job submitted later is counted")
    lines = [f"forecast: made at {made} ({ago} ago) from {forecast['draws']} duration draws; "
             f"{later}"]
    if forecast.get("horizon_cut"):
        lines.append(f"  it reaches {span(horizon)} ahead: forecast.cpu_budget_s ended its draw "
                     "there (a larger budget reaches further)")
    ran = "restart" in found   # running at the forecast, waiting now: preempted since
    if not running and "waits_for" in found:
        return lines + [f"  start: not forecast: it waits for {found['waits_for']}, which "
                        "no GPU freed ends (the forecast starts jobs as GPUs come free)"]
    if not running and ran:
        lines.append(_restart_line(found, now, horizon))
    elif not running:
        lines.append(f"  start: {_band(found['start'], now, horizon)}")
        if found["start"] is not None and "calibrated" in found:
            lines.append(f"    {calibration_note(found, forecast)}")
    lines.append(f"  finish: {_band(found['finish'], now, horizon)}")
    if not running and not ran:
        first = ", ".join(str(j) for j in found["first_ahead"])
        more = f" ({first}{', ...' if found['ahead'] > len(found['first_ahead']) else ''})" \
            if first else ""
        lines.append(f"  jobs ahead in the start order: {found['ahead']}{more}")
    lines.append(f"  preempted before it ends: {found['preempt_chance'] * 100:.0f} % of draws")
    lines.extend(not_modeled_lines(found, forecast))
    return lines


def _restart_line(found: Mapping[str, Any], now: float, horizon_s: float) -> str:
    """The start line of a job that ran when the forecast was made and waits now."""
    if found["restart"] is None:
        return ("  start: not forecast (the forecast was made while the job ran and no draw "
                "preempted it; the next forecast gives it)")
    share = found["preempt_chance"] * 100
    return (f"  start: {_band(found['restart'], now, horizon_s)}: its restart after the "
            f"preemption, in the {share:.0f} % of draws that preempted it (the forecast was "
            "made while it ran)")


#: what the forecast does with a job that shares GPUs (``sharing`` of its entry)
SHARING_NOTES = {
    "shard": ("GPU sharing is not modeled: this shard job is forecast as a job of one whole "
              "GPU (Slurm may start it sooner, on the free shards of a busy GPU)"),
    "opportunistic": ("GPU sharing is not modeled: this opportunistic job is forecast as a "
                      "production job (production jobs take its GPUs first: it may start "
                      "later and be preempted more often)"),
    "opportunistic shard": ("GPU sharing is not modeled: this opportunistic shard job is "
                            "forecast as a production job of one whole GPU (Slurm may start "
                            "it sooner, on the free shards of a busy GPU; production jobs "
                            "take its GPUs first: it may start later and be preempted more "
                            "often)"),
}


def not_modeled_lines(found: Mapping[str, Any], forecast: Forecast) -> list[str]:
    """The notes on what the forecast does not model: virtual clusters, when they order the
    jobs; GPU sharing: for a shard or opportunistic job what the forecast made of it, for
    another job how many such jobs it counted as whole-GPU production jobs (none when there
    are none)."""
    lines = []
    if forecast.get("tenants_not_modeled"):
        lines.append("  virtual clusters are not modeled: the forecast orders jobs by the policy "
                     "alone, so a job the tenant rules hold back (max_gpus, user limit) or put "
                     "first (guarantee, fair share) may start later or sooner than shown")
    kind = found.get("sharing")
    if kind in SHARING_NOTES:
        return lines + [f"  {SHARING_NOTES[kind]}"]
    others = forecast.get("sharing_jobs", 0)
    if others:
        lines.append(f"  {others} shard or opportunistic job(s) counted as whole-GPU production "
                     "jobs: GPU sharing is not modeled")
    return lines
