"""``auto_tune:``: the daemon re-tunes its policy settings on its own finished jobs, safely.

Every ``auto_tune.period_s`` ``dlprio run`` starts one replay in a child process
(:mod:`prioritizer.tune.daemon_replay`, ``nice`` 10): the jobs that ended in the last
``history_days`` days (from the ledger, Slurm accounting or a history CSV) replayed by
``prioritizer.sim.engine.simulate`` on the cluster's shape under the settings in force and under
every point of ``auto_tune.grid`` (the machinery of ``dlprio tune --grid``,
:mod:`prioritizer.tune`), every job ordered by the policy alone: ``virtual_clusters`` are not
replayed, and with them each replay's ``auto_tune_replay_started`` says so (its ``note``).
A cycle never waits for it: each cycle only looks whether the child has written its result (:meth:`AutoTuner.poll`); a child still running after ``budget_s`` is
stopped and the settings in force stay.

The switching decision (:func:`choose`) is pure: a grid point is adopted only when its replayed
avg JCT is at least ``min_gain`` (a fraction) below the settings in force, its p95 JCT at
most ``max_p95_rise`` (a fraction) above theirs, *and* it clears the no-regret bars of ``dlprio
tune --walk-forward`` on the same replay against ``fifo-fit`` in windows of 200 jobs
(``max_hurt_share``, ``max_worst_window``; :class:`prioritizer.sim.windows.Bars`). Every replay's outcome is logged
(``auto_tune_switch``, ``auto_tune_kept``, ``auto_tune_failed``) and counted
(``dlprio_auto_tune_replays_total{outcome}``, ``dlprio_auto_tune_switches_total``); the settings in
force, the last switch and the last replay are kept in the ledger's ``meta`` table
(:data:`META_SETTINGS`, :data:`META_LAST`, :data:`META_SWITCHES`), so that a restarted daemon
keeps them and ``dlprio status`` / ``dlprio explain`` show them.

Manual settings: the adopted values replace the ``policy:`` section's values of the tuned keys
only while ``auto_tune.enabled`` is true and that section is the one they were tuned from; an
operator who edits ``policy:`` (or turns ``auto_tune`` off) gets exactly the file's settings at
the next start, until a later replay clears both bars again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prioritizer.daemon.config import DaemonConfig
from prioritizer.config_file import LEARNED_SAMPLES
from prioritizer.daemon.ledger import Ledger
from prioritizer.daemon.log import CycleAdapter, event
from prioritizer.daemon.metrics import Metrics
from prioritizer.policy import validation
from prioritizer.policy.config import DEFAULT_REQUEUE_DELAY_S, PolicyConfig
from prioritizer.policy.tenants import NOT_REPLAYED
from prioritizer.grid import PARAMETERS, label
from prioritizer.sim.windows import Bars, least_regret, regret

META_SETTINGS = "auto_tune_settings"   # JSON: the adopted setting, its base, figures, time
META_LAST = "auto_tune_last"           # JSON: the last replay's outcome
META_SWITCHES = "auto_tune_switches"   # count of switches made
META_STARTED = "auto_tune_started_at"  # epoch of the last replay started


@dataclass(frozen=True)
class Verdict:
    """What :func:`choose` decided.

    Attributes:
        switch: adopt ``candidates[index]``.
        index: the best candidate that clears the p95 bar (None: none does).
        gain: fraction of the current avg JCT that candidate saves (negative: it loses).
        p95_rise: fraction its p95 JCT rises over the current one (negative: it falls).
        reason: one line for the log, ``status`` and ``explain``.
    """

    switch: bool
    index: int | None
    gain: float
    p95_rise: float
    reason: str


def choose(current: Mapping[str, float], candidates: Sequence[Mapping[str, float]],
           min_gain: float, max_p95_rise: float, bars: Bars | None = None) -> Verdict:
    """The switching decision (pure).

    Args:
        current: the replay of the settings in force: ``avg_jct_s``, ``p95_jct_s`` (seconds).
        candidates: the replays of the grid points, same keys, and with ``bars`` also
            ``hurt_jobs_share`` and ``worst_window_ratio`` against the baseline.
        min_gain: least fraction of ``current``'s avg JCT a switch must save (0..1).
        max_p95_rise: largest fraction ``current``'s p95 JCT may rise by (0..1).
        bars: the no-regret bars (:class:`prioritizer.sim.windows.Bars`, as ``dlprio tune
            --walk-forward`` ranks with them), or None.

    A candidate is allowed when ``p95 <= current p95 × (1 + max_p95_rise)`` and it clears
    ``bars``; the allowed one with the lowest avg JCT (ties: lower p95, then the first in the
    grid) is adopted when ``1 − avg / current avg >= min_gain`` and the gain is above 0. When
    none is allowed the settings in force stay (a switch needs a point that clears every bar).
    """
    cur_avg, cur_p95 = current["avg_jct_s"], current["p95_jct_s"]
    limit = cur_p95 * (1 + max_p95_rise)
    within = [i for i, c in enumerate(candidates) if c["p95_jct_s"] <= limit + 1e-9]
    if not within:
        return Verdict(False, None, 0.0, 0.0,
                       f"every grid point raises the p95 JCT above {limit:.1f} s "
                       f"({cur_p95:.1f} s + max_p95_rise {max_p95_rise:g})")
    allowed = [i for i in within if bars is None or bars.clears(candidates[i])]
    if not allowed:
        assert bars is not None
        least = min(within, key=lambda i: (*least_regret(candidates[i]), i))
        return Verdict(False, None, 0.0, 0.0,
                       f"no grid point within the p95 bar clears the no-regret bars "
                       f"({bars.describe()}); the least regret has {regret(candidates[least])}")
    best = min(allowed, key=lambda i: (candidates[i]["avg_jct_s"], candidates[i]["p95_jct_s"], i))
    b = candidates[best]
    gain = 1 - b["avg_jct_s"] / cur_avg if cur_avg > 0 else 0.0
    rise = b["p95_jct_s"] / cur_p95 - 1 if cur_p95 > 0 else 0.0
    saved = (f"{gain:+.1%} saved" if gain > 0 else "no gain" if gain == 0
             else f"{-gain:.1%} longer")
    figures = (f"avg JCT {cur_avg:.1f} -> {b['avg_jct_s']:.1f} s ({saved}), "
               f"p95 {cur_p95:.1f} -> {b['p95_jct_s']:.1f} s")
    if gain > 0 and gain >= min_gain - 1e-12:
        return Verdict(True, best, gain, rise, f"{figures}: clears min_gain {min_gain:g} "
                       f"and max_p95_rise {max_p95_rise:g}")
    why = (f"below min_gain {min_gain:g}" if gain > 0
           else "nothing saved over the settings in force")
    return Verdict(False, best, gain, rise, f"best grid point {figures}: {why}")


def apply_setting(base: PolicyConfig, setting: Mapping[str, Any]) -> PolicyConfig:
    """``base`` with a grid setting (``{"thresholds": [1000, 5000], "knob": 4}``) applied.
    Raises ConfigError (a ValueError) for a value the policy refuses."""
    changes: dict[str, Any] = {PARAMETERS[k]: (tuple(v) if isinstance(v, list) else v)
                               for k, v in setting.items()}
    return validation.replace(base, **changes)


def _policy_key(policy: PolicyConfig) -> str:
    return json.dumps(dataclasses.asdict(policy), sort_keys=True)


def _adopted(cfg: DaemonConfig, ledger: Ledger) -> dict[str, Any] | None:
    """The ledger's adopted record while ``auto_tune`` is enabled (None: none, or not what
    this module wrote), whatever ``policy:`` section it was tuned from."""
    raw = ledger.meta(META_SETTINGS)
    if not cfg.auto_tune.enabled or not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:   # not what this module wrote: the config's settings
        return None
    return record if isinstance(record, dict) else None


def in_force(cfg: DaemonConfig, ledger: Ledger) -> tuple[PolicyConfig, dict[str, Any] | None]:
    """The policy settings in force and the adopted record (None: the config's own): the
    ledger's adopted setting when ``auto_tune`` is enabled and it was tuned from the config's
    present ``policy:`` section; else ``cfg.policy`` (see the module doc)."""
    record = _adopted(cfg, ledger)
    if record is None or record.get("base") != _policy_key(cfg.policy):
        return cfg.policy, None
    try:
        return apply_setting(cfg.policy, record["setting"]), record
    except ValueError:
        return cfg.policy, None


def dropped(cfg: DaemonConfig, ledger: Ledger) -> dict[str, Any] | None:
    """The adopted record that no longer applies, because it was tuned from another
    ``policy:`` section than the config's present one (an edit since: the config's own
    settings are in force again, module doc); None when there is none."""
    record = _adopted(cfg, ledger)
    return None if record is None or record.get("base") == _policy_key(cfg.policy) else record


def status_line(cfg: DaemonConfig, ledger: Ledger) -> str | None:
    """One line for ``dlprio status`` / ``explain`` while ``auto_tune`` is enabled (None when
    it is off: the config's ``policy:`` section is in force): the settings in force and where
    they come from, the switches made and the last replay's outcome."""
    if not cfg.auto_tune.enabled:
        return None
    policy, record = in_force(cfg, ledger)
    switches = int(ledger.meta(META_SWITCHES) or 0)
    gone = dropped(cfg, ledger) if record is None else None
    where = (f"tuned {_ts(record['at'])}: {record['label']} ({record['reason']})" if record
             else f"the config's policy section (the switch to {gone.get('label')} was "
             "dropped: the section changed since it was tuned)" if gone
             else "the config's policy section (no switch adopted)")
    line = (f"auto_tune: on; thresholds {'/'.join(f'{t:g}' for t in policy.thresholds_gpu_s)} "
            f"GPU·s, knob {policy.starve_knob:g}, min_run {policy.min_run_s:g} s from {where}; "
            f"{switches} switch(es)")
    last = ledger.meta(META_LAST)
    if last:
        rec = json.loads(last)
        line += f"; last replay {_ts(rec['at'])}: {rec['outcome']}: {rec['reason']}"
        if rec.get("in_force") is not None and not _same_settings(rec["in_force"], policy):
            line += " (measured against other settings than those now in force)"
    return line


def _same_settings(recorded: str, policy: PolicyConfig) -> bool:
    """Whether the settings a replay compared with (``recorded``, the daemon's policy as
    :func:`_policy_key` wrote it) are ``policy``, the config's with the adopted setting. The
    daemon replaces a ``requeue_delay_s`` left at its default with the cluster's
    (:meth:`~prioritizer.policy.config.PolicyConfig.with_cluster_requeue_delay`), which a
    reader without Slurm does not know: that key is then not compared."""
    try:
        then = json.loads(recorded)
    except ValueError:
        return False
    now = json.loads(_policy_key(policy))
    if policy.requeue_delay_s == DEFAULT_REQUEUE_DELAY_S and isinstance(then, dict):
        then.pop("requeue_delay_s", None)
        now.pop("requeue_delay_s", None)
    return bool(then == now)


def _ts(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


class AutoTuner:
    """The daemon side: starts the replay child when due, reads its result, adopts or keeps.

    Args:
        cfg: the daemon configuration (``cfg.auto_tune`` enabled).
        ledger, log, metrics: the daemon's.
        slurm_timeout_s: the timeout of the child's Slurm calls (sinfo, sacct).
    """

    def __init__(self, cfg: DaemonConfig, ledger: Ledger, log: CycleAdapter, metrics: Metrics,
                 slurm_timeout_s: float) -> None:
        self.cfg, self.ledger, self.log, self.metrics = cfg, ledger, log, metrics
        self.slurm_timeout_s = slurm_timeout_s
        self.child: subprocess.Popen[bytes] | None = None
        self.workdir: Path | None = None
        self.started = 0.0          # monotonic start of the child
        self.base: PolicyConfig | None = None   # the settings in force the child compares with

    def poll(self, now: float, policy: PolicyConfig) -> PolicyConfig | None:
        """Once per cycle (never blocks): collect a finished child, stop one past its budget,
        start one when due. Returns the new settings when a replay cleared both bars."""
        adopted = None
        if self.child is not None:
            if self.child.poll() is None:
                if time.monotonic() - self.started > self.cfg.auto_tune.budget_s:
                    self._stop()
                    self._record(now, "timeout", f"replay still running after budget_s "
                                 f"{self.cfg.auto_tune.budget_s:g} s; stopped, settings kept",
                                 logging.WARNING)
                return None
            adopted = self._collect(now)
        started = float(self.ledger.meta(META_STARTED) or 0)
        if now - started >= self.cfg.auto_tune.period_s:
            try:
                self._start(now, adopted or policy)
            except OSError as exc:   # no temporary directory, no process: this period's replay
                self.child = None
                self._cleanup()
                self._record(now, "failed", f"replay not started: {exc}", logging.ERROR)
        return adopted

    def close(self) -> None:
        """Stop a running child (the daemon is stopping) and remove its files."""
        if self.child is not None:
            self._stop()

    # ------------------------------------------------------------------ the child
    def _start(self, now: float, policy: PolicyConfig) -> None:
        at = self.cfg.auto_tune
        self.workdir = Path(tempfile.mkdtemp(prefix="dlprio-auto-tune-"))
        request = {"history": at.history, "ledger_path": self.cfg.ledger_path,
                   "since": now - at.history_days * 86400, "until": now, "grid": at.grid,
                   "policy": dataclasses.asdict(policy), "min_jobs": at.min_jobs,
                   "max_hurt_share": at.max_hurt_share, "max_worst_window": at.max_worst_window,
                   "slurm_timeout_s": self.slurm_timeout_s,
                   "gittins_samples": (self.cfg.gittins_samples if self.cfg.gittins_samples
                                       in ("", LEARNED_SAMPLES) else
                                       os.path.abspath(self.cfg.gittins_samples)),
                   "gittins_min_samples": self.cfg.gittins_min_samples}
        (self.workdir / "request.json").write_text(json.dumps(request))
        self.ledger.set_meta(META_STARTED, repr(now))
        with open(self.workdir / "replay.err", "wb") as err:
            self.child = subprocess.Popen(
                [sys.executable, "-m", "prioritizer.tune.daemon_replay", str(self.workdir)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=True, env=os.environ.copy())
        self.started, self.base = time.monotonic(), policy
        extra: dict[str, Any] = {"note": NOT_REPLAYED} if self.cfg.virtual_clusters else {}
        event(self.log, "auto_tune_replay_started", pid=self.child.pid, history=at.history,
              history_days=at.history_days, grid=at.grid, **extra)

    def _stop(self) -> None:
        assert self.child is not None
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()
        self.child = None
        self._cleanup()

    def _cleanup(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _collect(self, now: float) -> PolicyConfig | None:
        assert self.child is not None and self.workdir is not None and self.base is not None
        code, self.child = self.child.returncode, None
        try:
            result = json.loads((self.workdir / "result.json").read_text())
        except (OSError, ValueError):
            err = (self.workdir / "replay.err").read_text(errors="replace").strip().splitlines()
            result = {"error": f"replay exited {code} without a result"
                      + (f": {err[-1]}" if err else "")}
        self._cleanup()
        if "error" in result:
            self._record(now, "failed", result["error"], logging.ERROR)
            return None
        if "skipped" in result:
            self._record(now, "skipped", result["skipped"])
            return None
        candidates = result["candidates"]
        at = self.cfg.auto_tune
        bars = Bars(**result["bars"]) if result.get("bars") else None
        verdict = choose(result["current"], [c["figures"] for c in candidates],
                         at.min_gain, at.max_p95_rise, bars)
        jobs = int(result["jobs"])
        if not verdict.switch or verdict.index is None:
            self._record(now, "kept", f"{jobs} jobs: {verdict.reason}")
            return None
        setting = candidates[verdict.index]["setting"]
        try:   # on the settings the replay compared with: the cluster's requeue delay kept
            policy = apply_setting(self.base, setting)
        except ValueError as exc:
            self._record(now, "failed", f"grid point refused: {exc}", logging.ERROR)
            return None
        name = label({k: tuple(v) if isinstance(v, list) else v for k, v in setting.items()})
        reason = f"{jobs} jobs replayed: {verdict.reason}"
        self.ledger.set_meta(META_SETTINGS, json.dumps(
            {"setting": setting, "label": name, "base": _policy_key(self.cfg.policy), "at": now,
             "reason": reason}))
        self.ledger.set_meta(META_SWITCHES, str(int(self.ledger.meta(META_SWITCHES) or 0) + 1))
        self.metrics.auto_tune_switches.inc()
        self._record(now, "switched", f"to {name}; {reason}")
        event(self.log, "auto_tune_switch", to=name, jobs=jobs,
              avg_jct_s=round(candidates[verdict.index]["figures"]["avg_jct_s"], 1),
              was_avg_jct_s=round(result["current"]["avg_jct_s"], 1),
              gain=round(verdict.gain, 4), p95_rise=round(verdict.p95_rise, 4))
        return policy

    def _record(self, now: float, outcome: str, reason: str, level: int = logging.INFO) -> None:
        self.metrics.auto_tune_replays.labels(outcome=outcome).inc()
        self.ledger.set_meta(META_LAST, json.dumps({
            "at": now, "outcome": outcome, "reason": reason,
            "in_force": None if self.base is None else _policy_key(self.base)}))
        if outcome != "switched":
            event(self.log, f"auto_tune_{outcome}", level=level, reason=reason)
