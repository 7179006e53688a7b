"""The daemon's configuration file (``dlprio.yaml``): load, validate, and name the bad key.

Outside :mod:`prioritizer.daemon` (whose ``config`` module re-exports it) so that
``dlprio simulate``, ``history check`` and ``tune`` check a ``--config`` file with these very
rules (:func:`prioritizer.sim.cli.policy_section`) while the simulator never imports the daemon
(import contract, docs/design.md); nothing here reads Slurm, a ledger or a path.

``dlprio run|once|explain|status`` read one YAML file: ``--config FILE``, else
``/etc/dlprio/dlprio.yaml``, else the packaged ``conf/dlprio.yaml`` (every key documented
there). :class:`DaemonConfig` is a frozen dataclass checked like the policy's
(:mod:`prioritizer.policy.validation`); its ``policy:`` section is a
:class:`prioritizer.policy.config.PolicyConfig` (the same settings ``dlprio simulate`` uses); the
other keys say how the daemon talks to Slurm. Field types carry the allowed ranges,
:meth:`DaemonConfig.rules` the rules across keys. Errors are one :class:`ConfigError` (exit 2) with one line per
problem, ``FILE: KEY.PATH: allowed range or fix (got VALUE)``, raised before the loop starts.
Units: seconds; ports are TCP ports (0 = off).
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from msgspec import Meta

from prioritizer.numbers import MAX_SECONDS
from slurm_plugin.common.yamlfile import YamlFileError, read_yaml
from slurm_plugin.common.cli import visible
from slurm_plugin.common.readfile import PATH_MAX
from prioritizer.policy.config import SIMULATE_ONLY, PolicyConfig, Positive, Seconds
from prioritizer.policy.tenants import Tenancy, check_tenancy, parse_tenancy, read_tenancy
from prioritizer.policy.validation import ConfigError, Rule, RuleGroup, check, shown, validate
from prioritizer.paths import (LOCK_SUFFIX, SNAPSHOT as DEFAULT_SNAPSHOT_PATH, SQLITE_SIDES,
                              SYSTEM_CONFIG, beside, present)

__all__ = ["AutoTuneConfig", "ConfigError", "DaemonConfig", "PACKAGED_PATH", "SYSTEM_PATH", "default_path",
           "from_mapping", "load"]

SYSTEM_PATH = Path(SYSTEM_CONFIG)
#: The packaged config: ``conf/dlprio.yaml``, which a wheel carries as ``prioritizer/conf/dlprio.yaml``
#: (setup.py) and a checkout or an editable install has in the repository's ``conf/``.
PACKAGED_PATH = next((p for p in (Path(__file__).resolve().parent / "conf" / "dlprio.yaml",)
                      if p.is_file()), Path(__file__).resolve().parents[1] / "conf" / "dlprio.yaml")
Mode = Literal["priority", "partition"]
PriorityField = Literal["site_factor", "priority"]
LogFormat = Literal["text", "json"]
ForecastArrivals = Literal["none", "history"]
MODES, PRIORITY_FIELDS, LOG_FORMATS = get_args(Mode), get_args(PriorityField), get_args(LogFormat)
#: A non-empty string.
NonEmpty = Annotated[str, Meta(min_length=1)]
#: A Slurm partition or account name: Slurm separates names by commas (``-p gpu,debug``) and
#: has no name with one or with white space, so ``exempt_partitions: ["gpu,debug"]`` (or
#: ``"gpu debug"``) matched no running job and exempted nothing, without a word.
OneName = Annotated[NonEmpty, Rule(lambda v: not any(c == "," or c.isspace() for c in v),
                                   "one name per item, without ',' or white space "
                                   "(a YAML list: [gpu, debug])")]
#: A list of non-empty partition or account names.
Names = tuple[OneName, ...]
#: What every file path of the config must be: no NUL byte (no system call takes one), and
#: shorter than :data:`slurm_plugin.common.readfile.PATH_MAX` bytes, the final NUL counted (a longer
#: one can never be opened, and was echoed whole; a lone surrogate counted as its 3 bytes).
PathRules = (Rule(lambda v: "\0" not in v, "a path cannot hold a NUL byte (\\x00)"),
             Rule(lambda v: len(v.encode("utf-8", "surrogatepass")) < PATH_MAX,
                  f"a path must be shorter than {PATH_MAX} bytes (PATH_MAX)"))
#: A non-empty file path.
FilePath = Annotated[NonEmpty, *PathRules]
#: ``gittins_samples``: ``""`` (packaged), ``history``, or a file path.
SamplesPath = Annotated[str, *PathRules]
#: The word of ``gittins_samples`` for the distribution learned from the cluster's finished
#: jobs (:mod:`prioritizer.daemon.learned_gittins`); ``""`` is the packaged one.
LEARNED_SAMPLES = "history"
#: The words of ``auto_tune.history`` that name a source, not a file.
HISTORY_SOURCES = ("ledger", "sacct")
#: A wait or timeout of the daemon is at most :data:`prioritizer.numbers.MAX_SECONDS` (10^9 s,
#: about 31 years), the bound of every seconds option: past about 9.2 × 10^9 s Python's clock
#: overflows (``threading.Event.wait``, ``subprocess.run(timeout=...)`` raise OverflowError), so
#: ``interval_s: 1e300`` would crash the first cycle instead of failing here. A :class:`Rule`,
#: checked after the lower bound, so a negative value keeps its message.
AtMostMaxSeconds = Rule(lambda v: v <= MAX_SECONDS, f"must be <= {MAX_SECONDS:.0f} (about 31 years)")
#: Seconds >= 0 that the daemon waits on.
WaitSeconds = Annotated[Seconds, AtMostMaxSeconds]
#: Seconds > 0 that the daemon waits on.
WaitPositive = Annotated[Positive, AtMostMaxSeconds]
#: The most characters of ``lease_name``. Slurm refuses a job name or comment longer than 1024
#: characters ("Pathname of a file, directory or other parameter too long", ESLURM_PATHNAME_TOO_LONG;
#: reported for names in nextflow-io/nextflow#941, for comments in tgen/jetstream#51), and the
#: lease job's comment is the name plus ``;holder=HOST:PID;ledger=HOST:HASH;heartbeat=EPOCH``
#: (:mod:`prioritizer.daemon.lease`): two host names of up to 64 bytes (HOST_NAME_MAX), a pid,
#: 12 hex digits and an epoch, under 224 characters, so a name of 800 keeps the comment in bounds.
LEASE_NAME_MAX = 800
#: What a ``lease_name`` may hold: ASCII letters, digits, ``-``, ``_``, ``.``.
LEASE_NAME_CHARS = frozenset(string.ascii_letters + string.digits + "-_.")
#: The cluster lease's Slurm job name (:data:`LEASE_NAME_CHARS`, at most
#: :data:`LEASE_NAME_MAX`). Slurm itself takes almost any job name (``sbatch --job-name``
#: documents no character set; UTF-8 names pass through: PySlurm/pyslurm#33), but the lease
#: is found by comparing the name squeue prints with this one, on every host that runs a daemon
#: (:meth:`prioritizer.daemon.lease.ClusterLease.active`), and the name starts the comment
#: that :class:`~prioritizer.daemon.lease.LeaseInfo` splits at ``;`` and ``=``. So: no control
#: character or newline, no white space or comma (squeue's list separators), no ``;`` or ``=``
#: (the comment's); and ASCII only, since Python encodes the argv of sbatch and decodes the
#: output of squeue in each host's locale (a non-UTF-8 name broke a Slurm client under
#: ``LANG=C``: OSC/ood_core#838) and two spellings of one accented letter (NFC and NFD) are
#: two different names: two daemons on two hosts must find the same lease job.
LeaseName = Annotated[str, Rule(lambda v: set(v) <= LEASE_NAME_CHARS,
                                "ASCII letters, digits, '-', '_', '.' only, e.g. dlprio-lease "
                                "(the same name to squeue on every host)"),
                      Rule(lambda v: len(v) <= LEASE_NAME_MAX,
                           f"at most {LEASE_NAME_MAX} characters (Slurm refuses a job comment "
                           "past 1024, and the lease's comment holds the name)")]


#: The parameters ``auto_tune.grid`` may vary: those that keep the number of queues and the
#: policy (the order's encoding and ``queue_partitions`` are built for them).
AUTO_TUNE_PARAMETERS = ("thresholds", "knob", "min_run", "quantum")
#: A fraction: 0 <= x <= 1.
Fraction = Annotated[float, Meta(ge=0, le=1)]

#: ``auto_tune.max_hurt_share``: a fraction, or ``off``
HurtBar = Annotated[float | str, Rule(lambda v: v == "off" if isinstance(v, str) else 0 <= v <= 1,
                                      "a fraction from 0 to 1 (0.0005 = 0.05 % of the jobs), "
                                      "or off")]
#: ``auto_tune.max_worst_window``: a ratio > 0 and <= 10^6 (as ``dlprio tune
#: --max-worst-window``), ``oracle`` or ``off``
WorstWindowBar = Annotated[float | str,
                           Rule(lambda v: v in ("oracle", "off") if isinstance(v, str)
                                else 0 < v <= 1e6,
                                "a ratio > 0 and <= 1e6 (1.1: 10 % worse than fifo-fit), oracle "
                                "or off")]


@dataclass(frozen=True)
class AutoTuneConfig:
    """``auto_tune:``: the daemon re-tunes its policy settings on its own finished jobs
    (:mod:`prioritizer.daemon.auto_tune`).

    Attributes:
        enabled: off (false) by default; then the ``policy:`` section alone is in force.
        period_s: seconds between two replays of the history (the first on the first cycle).
        history_days: days of finished jobs replayed (jobs that ended in the last N days).
        history: where they come from: ``ledger`` (the daemon's own ledger), ``sacct``
            (Slurm accounting, as ``dlprio history export`` reads it), or the path of a
            history CSV (``dlprio history export``'s format) that an operator keeps current.
        grid: the settings tried, in ``dlprio tune --grid`` spelling
            (:data:`AUTO_TUNE_PARAMETERS` only).
        min_gain: the least fraction of avg JCT the replay must save against the settings in
            force to switch (0.05: the new settings' avg JCT is at most 95 % of it).
        max_p95_rise: the largest fraction the p95 JCT may rise against the settings in force
            (0: not at all).
        max_hurt_share: the no-regret bar on jobs hurt in the replay against ``fifo-fit``
            (JCT > 2 × and > 1 h more than under it, :mod:`prioritizer.sim.windows`): the
            largest share of the replayed jobs a grid point may hurt (0.0005 = 0.05 %), or
            ``off``.
        max_worst_window: the no-regret bar on windows of 200 jobs in submit order against
            ``fifo-fit``: the largest avg JCT ratio of a grid point's worst window, or
            ``oracle`` (the oracle ``srtf``'s own worst window on the same history, with the
            modeled costs and without the guards, at least 1.0), or ``off``.
        min_jobs: fewest finished GPU jobs a replay needs; fewer: nothing is replayed.
        budget_s: seconds a replay may take; past them its process is stopped and the
            settings in force stay.
    """

    enabled: bool = False
    period_s: WaitPositive = 86400.0
    history_days: Annotated[Positive, Rule(lambda v: v <= 3650, "must be <= 3650 (ten years)")] = 14.0
    history: FilePath = "ledger"
    grid: NonEmpty = "thresholds=1000/5000,3250/7200,10000/30000;knob=4,8,16"
    min_gain: Fraction = 0.05
    max_p95_rise: Fraction = 0.0
    max_hurt_share: HurtBar = 0.0005
    max_worst_window: WorstWindowBar = "oracle"
    min_jobs: Annotated[int, Meta(ge=1, le=10_000_000)] = 50
    budget_s: WaitPositive = 600.0

    def __post_init__(self) -> None:
        check(self)

    def rules(self) -> list[tuple[str, str]]:
        """The grid parses (``dlprio tune --grid`` rules) and varies only
        :data:`AUTO_TUNE_PARAMETERS`."""
        return self.grid_rule()

    def rule_groups(self) -> list[RuleGroup]:
        """:meth:`rules` with the keys each reads, so that the grid is checked beside a bad
        other key (:func:`prioritizer.policy.validation.check`)."""
        return [(("grid",), AutoTuneConfig.grid_rule)]

    def grid_rule(self) -> list[tuple[str, str]]:
        """The problem of ``grid`` (see :meth:`rules`), if any."""
        from prioritizer.grid import GridError, parse_grid
        try:
            grid = parse_grid(self.grid)
        except GridError as exc:
            return [("grid", str(exc).removeprefix("--grid: "))]
        other = [name for name in grid if name not in AUTO_TUNE_PARAMETERS]
        if other:
            return [("grid", f"{', '.join(other)} cannot be tuned by the daemon (it keeps the "
                     f"policy and its number of queues); tunable: "
                     f"{', '.join(AUTO_TUNE_PARAMETERS)} (got {shown(self.grid)})")]
        return []

    def parsed_grid(self) -> dict[str, list[Any]]:
        """The grid as ``{parameter: [values]}`` (checked at construction)."""
        from prioritizer.grid import parse_grid
        return parse_grid(self.grid)


@dataclass(frozen=True)
class ForecastConfig:
    """The ``forecast:`` section: start-time forecasts the daemon writes into the snapshot
    (:mod:`prioritizer.daemon.forecasts`), made in a child process, never in a cycle.

    Attributes:
        every_cycles: start a forecast every this many cycles (0 = no forecasts); one still
            running when the next is due is left to finish (the next starts after it).
        cpu_budget_s: CPU seconds one forecast may use: its draws stop before one that would
            overrun it at the mean CPU of those made (at least one draw is made, and a draw
            is not cut short).
        draws: the most draws (seeded duration draws, one replay each) of one forecast.
        horizon_s: how far ahead a forecast replays (s); a start beyond it is shown as
            ``>`` the horizon.
        arrivals: ``none`` (no job submitted later is counted) or ``history`` (each draw
            draws later submissions at the rate and of the sizes of the jobs submitted in the
            last ``arrival_window_s``: :mod:`prioritizer.forecast.arrivals`).
        arrival_window_s: the history window of ``arrivals: history`` (s); drawn arrivals
            come as far ahead as it looks back.
    """

    every_cycles: Annotated[int, Meta(ge=0, le=1_000_000)] = 10
    cpu_budget_s: WaitPositive = 2.0
    draws: Annotated[int, Meta(ge=1, le=1000)] = 20
    horizon_s: WaitPositive = 86400.0
    arrivals: ForecastArrivals = "none"
    arrival_window_s: WaitPositive = 21600.0

    def __post_init__(self) -> None:
        check(self)

    def rules(self) -> list[tuple[str, str]]:
        return []


@dataclass(frozen=True)
class DaemonConfig:
    """Everything ``dlprio run`` needs besides Slurm itself (see conf/dlprio.yaml).

    Attributes:
        policy: the policy settings (thresholds in GPU·s, starvation knob, ...).
        mode: ``priority`` (SiteFactor/priority per pending job) or ``partition`` (move
            pending jobs to ``queue_partitions[queue]``).
        priority_field: ``site_factor`` (keeps the site's other factors) or ``priority``
            (absolute priority: multifactor stops recomputing it).
        inqueue_span_s: seconds of queue-entry time that order jobs inside one queue
            (1 point per second); older entries than the span share the top value.
        update_budget: most pending jobs whose value (SiteFactor, priority, partition) one
            cycle sends to Slurm, head of the start order first; the rest go in the next
            cycles (a victim's value and a preemption's waiter never wait); 0 = no limit.
        partitions: partitions whose GPU jobs are managed; empty = all.
        queue_partitions: partition mode only: one partition per queue level, q0 first.
        exempt_partitions, exempt_accounts: jobs there are never preempted.
        max_grace_s: cap on a job's declared grace (seconds between signal and requeue).
        interval_s: seconds between cycles.
        backoff_max_s: longest wait after Slurm failures (doubling from ``interval_s``).
        forecast: the ``forecast:`` section (:class:`ForecastConfig`).
        ledger_path: the private sqlite ledger (mode 0600).
        snapshot_path: the world-readable snapshot for dlqueue.
        metrics_port: Prometheus endpoint port (0 = no endpoint).
        metrics_addr: address the endpoint binds to.
        log_format: ``text`` or ``json``.
        slurm_timeout_s: seconds one Slurm command may take (< ``interval_s``); 0 = auto,
            see :attr:`call_timeout_s`.
        gittins_samples: CSV of GPU·s samples for ``tiresias-gittins`` ("" = packaged;
            ``history`` = learned from finished jobs, see ``prioritizer.daemon.learned_gittins``).
        gittins_min_samples: fewest finished jobs ``history`` learns from (else packaged).
        gittins_refresh_s: seconds between re-learning the ``history`` distribution.
        retention_days: days a finished job stays in the ledger (0 = forever); the daemon
            prunes older ones once an hour.
        lease_name: name of the cluster lease job (one acting daemon per cluster,
            :mod:`prioritizer.daemon.lease`); "" = no cluster lease (ledger lock only).
        lease_ttl_s: seconds without a heartbeat before another daemon may take the lease
            over; 0 = auto (:attr:`lease_ttl`).
        auto_tune: the daemon's own re-tuning (:class:`AutoTuneConfig`; off by default).
        virtual_clusters: the tenants of a shared cluster (the section dlsubmit reads, with
            ``guaranteed_gpus``, ``max_gpus``, ``user_limit_factor``;
            :mod:`prioritizer.policy.tenants`); None: no tenants, Tiresias over all jobs.
        fair_share_half_life_s: half-life of the tenants' decayed usage (0: only what they
            hold now counts).

    Raises:
        ConfigError: (a ``ValueError``) on construction with a bad value, one line per
            problem; :func:`load` puts the file name in front of each.
    """

    policy: PolicyConfig = field(default_factory=PolicyConfig)
    mode: Mode = "priority"
    priority_field: PriorityField = "site_factor"
    inqueue_span_s: Annotated[int, Meta(ge=1, le=100_000_000)] = 1_000_000
    update_budget: Annotated[int, Meta(ge=0, le=1_000_000)] = 1000
    partitions: Names = ()
    queue_partitions: Names = ()
    exempt_partitions: Names = ()
    exempt_accounts: Names = ()
    max_grace_s: WaitPositive = 300.0
    interval_s: WaitPositive = 30.0
    backoff_max_s: WaitPositive = 300.0
    ledger_path: FilePath = "/var/lib/dlprio/ledger.sqlite"
    snapshot_path: FilePath = DEFAULT_SNAPSHOT_PATH
    metrics_port: Annotated[int, Meta(ge=0, le=65535)] = 9464
    metrics_addr: NonEmpty = "127.0.0.1"   # "" is no address: getaddrinfo fails at start
    log_format: LogFormat = "text"
    slurm_timeout_s: WaitSeconds = 0.0
    gittins_samples: SamplesPath = ""
    gittins_min_samples: Annotated[int, Meta(ge=1)] = 100
    gittins_refresh_s: WaitPositive = 3600.0
    retention_days: Seconds = 21.0
    lease_name: LeaseName = "dlprio-lease"
    lease_ttl_s: Annotated[float, AtMostMaxSeconds] = 0.0
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    auto_tune: AutoTuneConfig = field(default_factory=AutoTuneConfig)
    virtual_clusters: dict[str, Any] | None = None
    fair_share_half_life_s: Seconds = 0.0

    def __post_init__(self) -> None:
        check(self)

    @property
    def tenancy(self) -> Tenancy | None:
        """The tenants (None: no ``virtual_clusters``); valid once constructed."""
        if self.virtual_clusters is None:
            return None
        return parse_tenancy(self.virtual_clusters, self.fair_share_half_life_s)

    def rules(self) -> list[tuple[str, str]]:
        """Every rule that ties two keys, as ``(key, message)`` pairs; all broken ones are
        reported together."""
        return [problem for _, rule in self.rule_groups() for problem in rule(self)]

    def rule_groups(self) -> list[RuleGroup]:
        """:meth:`rules` one by one with the keys each reads: a rule whose keys are valid is
        checked beside a bad other key (:func:`prioritizer.policy.validation.check`)."""
        return [
            (("policy.policy",), DaemonConfig._oracle_rule),
            (("mode", "queue_partitions", "policy.policy", "policy.thresholds_s",
              "policy.thresholds_gpu_s"), DaemonConfig._partition_rule),
            (("lease_ttl_s", "interval_s"), DaemonConfig._lease_rule),
            (("slurm_timeout_s", "interval_s"), DaemonConfig._timeout_rule),
            (("auto_tune.enabled", "auto_tune.grid", "policy.policy",
              "policy.thresholds_gpu_s"), DaemonConfig.auto_tune_rules),
            (("virtual_clusters", "fair_share_half_life_s", "mode"),
             lambda cfg: _tenant_rules(cfg) if cfg.virtual_clusters is not None else []),
            (("backoff_max_s", "interval_s"), DaemonConfig._backoff_rule),
            (("snapshot_path", "ledger_path"), DaemonConfig._snapshot_rule)]

    def _oracle_rule(self) -> list[tuple[str, str]]:
        if self.policy.policy in SIMULATE_ONLY:
            return [("policy.policy", f"{self.policy.policy} needs every job's true duration "
                     "(an oracle); it exists for `dlprio simulate` only")]
        return []

    def _partition_rule(self) -> list[tuple[str, str]]:
        if self.mode == "partition" and len(self.queue_partitions) != self.queues:
            return [("queue_partitions", f"mode partition needs one partition per queue "
                     f"({self.queues} queues from policy thresholds) "
                     f"(got {shown(list(self.queue_partitions))})")]
        return []

    def _lease_rule(self) -> list[tuple[str, str]]:
        if self.lease_ttl_s and self.lease_ttl_s < 2 * self.interval_s:
            return [("lease_ttl_s", f"must be >= 2 × interval_s ({2 * self.interval_s:g} s) "
                     f"or 0 (auto) (got {self.lease_ttl_s:g})")]
        return []

    def _timeout_rule(self) -> list[tuple[str, str]]:
        if self.slurm_timeout_s >= self.interval_s:
            return [("slurm_timeout_s", f"must be < interval_s ({self.interval_s:g} s) so "
                     f"that a hung Slurm call cannot stretch a cycle, or 0 (auto) "
                     f"(got {self.slurm_timeout_s:g})")]
        return []

    def _backoff_rule(self) -> list[tuple[str, str]]:
        if self.backoff_max_s < self.interval_s:
            return [("backoff_max_s", f"must be >= interval_s ({self.interval_s:g} s) "
                     f"(got {self.backoff_max_s:g})")]
        return []

    def _snapshot_rule(self) -> list[tuple[str, str]]:
        ledger = os.path.abspath(self.ledger_path)
        if os.path.abspath(self.snapshot_path) in {
                ledger + side for side in ("", *SQLITE_SIDES, LOCK_SUFFIX)}:
            return [("snapshot_path", "must name another file than ledger_path and the files "
                     "kept beside it (-wal, -shm, -journal, .lock): each cycle replaces the "
                     "snapshot, which would replace that file "
                     f"(got {visible(self.snapshot_path)}, ledger_path "
                     f"{visible(self.ledger_path)})")]
        return []

    def auto_tune_rules(self) -> list[tuple[str, str]]:
        """An enabled ``auto_tune`` needs a threshold policy (``tiresias-las`` or
        ``tiresias-gittins``: the grid's thresholds are in GPU·s), grid thresholds with as
        many values as ``policy.thresholds_gpu_s`` (the number of queues stays), and a
        ``quantum`` in the grid only under ``tiresias-gittins`` (no other policy reads it)."""
        if not self.auto_tune.enabled:
            return []
        if self.policy.policy not in ("tiresias-las", "tiresias-gittins"):
            return [("auto_tune.enabled", f"needs policy tiresias-las or tiresias-gittins "
                     f"(got policy {self.policy.policy})")]
        grid = self.auto_tune.parsed_grid()
        if "quantum" in grid and self.policy.policy != "tiresias-gittins":
            return [("auto_tune.grid", f"quantum (the Gittins quantum) changes nothing under "
                     f"policy {self.policy.policy}; drop it, or use tiresias-gittins")]
        want = len(self.policy.thresholds_gpu_s)
        bad = [t for t in grid.get("thresholds", []) if len(t) != want]
        if bad:
            written = "/".join(f"{x:g}" for x in bad[0])
            return [("auto_tune.grid", f"every thresholds value needs {want} number(s), as "
                     f"policy.thresholds_gpu_s (the number of queues stays) (got {written})")]
        return []

    @property
    def call_timeout_s(self) -> float:
        """The timeout of one Slurm command: ``slurm_timeout_s``, or (0) half the interval,
        at most 10 s, so that a hung call never stretches a cycle past ``interval_s``."""
        return self.slurm_timeout_s or min(10.0, self.interval_s / 2)

    @property
    def lease_ttl(self) -> float:
        """``lease_ttl_s``, or (0) three intervals plus one Slurm call timeout."""
        return self.lease_ttl_s or 3 * self.interval_s + self.call_timeout_s

    @property
    def queues(self) -> int:
        """Number of queue levels K (thresholds + 1)."""
        thresholds = (self.policy.thresholds_s if self.policy.policy == "las"
                      else self.policy.thresholds_gpu_s)
        return len(thresholds) + 1


def default_path() -> Path:
    """``/etc/dlprio/dlprio.yaml`` when anything is there (:func:`prioritizer.paths.present`),
    else the packaged ``conf/dlprio.yaml``."""
    return SYSTEM_PATH if present(SYSTEM_PATH) else PACKAGED_PATH


def _tenant_rules(cfg: DaemonConfig) -> list[tuple[str, str]]:
    """The ``virtual_clusters`` problems that need no Slurm (the daemon checks the cluster's
    GPUs and slurmdbd's accounts at its first cycle): the daemon orders tenants' jobs by
    SiteFactor/priority only, and reads no QOS from squeue."""
    # the tenants whose keys are valid are checked beside the others' problems
    tenancy, lines = read_tenancy(cfg.virtual_clusters, cfg.fair_share_half_life_s)
    lines += check_tenancy(tenancy)
    lines += [f"virtual_clusters.{t.name}.qos: dlprio tells tenants apart by account and "
              "partition; name one of those instead" for t in tenancy.tenants if t.qos]
    lines += [f"virtual_clusters.{t.name}: names no account or partition, so the daemon "
              "would give it no job (users: is for traces, dlprio simulate --tenants); "
              "name the account or partition its jobs carry"
              for t in tenancy.tenants
              if (t.account, t.partition) == (None, None) and t.users and not t.qos]
    if cfg.mode != "priority" and isinstance(cfg.virtual_clusters, Mapping):
        lines.append("virtual_clusters: tenants need mode: priority (one value per job "
                     "carries the order across tenants)")
    return [tuple(line.split(": ", 1)) for line in lines]  # type: ignore[misc]


def load(path: str | Path | None = None) -> DaemonConfig:
    """Read and validate a config file (``None``: :func:`default_path`).

    Raises:
        ConfigError: unreadable file, bad YAML, or one line per unknown key, wrong type or
            value, each ``FILE: KEY.PATH: allowed range or fix (got VALUE)``.
    """
    p = Path(path) if path is not None else default_path()
    try:
        data = read_yaml(p)
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    try:
        cfg = from_mapping(data)
    except ConfigError as exc:
        raise ConfigError("\n".join(f"{visible(p)}: {line}" for line in str(exc).splitlines())
                          ) from None
    return files_beside(cfg, p)


def files_beside(cfg: DaemonConfig, source: str | Path) -> DaemonConfig:
    """``cfg`` with each relative file path it names (``ledger_path``, ``snapshot_path``,
    ``gittins_samples``, ``auto_tune.history``; not their words ``""``, ``history``,
    ``ledger``, ``sacct``) taken from the directory of the config file ``source``
    (:func:`prioritizer.paths.beside`)."""
    samples = cfg.gittins_samples
    history = cfg.auto_tune.history
    return replace(
        cfg, ledger_path=beside(source, cfg.ledger_path),
        snapshot_path=beside(source, cfg.snapshot_path),
        gittins_samples=(samples if samples in ("", LEARNED_SAMPLES)
                         else beside(source, samples)),
        auto_tune=(cfg.auto_tune if history in HISTORY_SOURCES
                   else replace(cfg.auto_tune, history=beside(source, history))))


def with_cycle_interval(data: Any) -> Any:
    """Parsed dlprio.yaml ``data`` with ``policy.decision_interval_s`` = ``interval_s`` where
    the policy section sets none: the daemon decides once a cycle, so every replay of its
    policy (forecasts, auto_tune, ``dlprio simulate --config``) ticks when it does; the policy's
    own default, 30 s, is the daemon's default cycle. Anything else (no mapping, an
    ``interval_s`` that is not a valid one) is returned as it is, for validation to name once."""
    if not isinstance(data, dict):
        return data
    interval, section = data.get("interval_s"), data.get("policy")
    try:   # nan compares false; a whole number past any float overflows
        valid = (not isinstance(interval, bool) and isinstance(interval, (int, float))
                 and 0 < float(interval) <= MAX_SECONDS)
    except OverflowError:
        valid = False
    if (not valid or not (section is None or isinstance(section, dict))
            or "decision_interval_s" in (section or {})):
        return data
    return {**data, "policy": {**(section or {}), "decision_interval_s": interval}}


def from_mapping(data: Any) -> DaemonConfig:
    """Build a :class:`DaemonConfig` from parsed YAML (``None``: all defaults;
    :func:`with_cycle_interval` applied).

    Raises:
        ConfigError: one line per problem, ``KEY.PATH: allowed range or fix (got VALUE)``.
    """
    return validate(DaemonConfig, with_cycle_interval(data))
