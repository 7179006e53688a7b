"""The daemon's configuration file (``dlprio.yaml``): load, validate, and name the bad key.

``dlprio run|once|explain|status`` read one YAML file: ``--config FILE``, else
``/etc/dlprio/dlprio.yaml``, else the packaged ``conf/dlprio.yaml`` (every key documented
there). The ``policy:`` section goes through :meth:`prioritizer.policy.config.PolicyConfig.from_mapping`
(the same settings ``dlprio simulate`` uses); the other keys say how the daemon talks to Slurm.
Errors are :class:`ConfigError` with the file, the dotted key and the fix, raised before the
loop starts. Units: seconds; ports are TCP ports (0 = off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

import yaml

from prioritizer.policy.config import PolicyConfig
from prioritizer.daemon.snapshot import DEFAULT_PATH as DEFAULT_SNAPSHOT_PATH

SYSTEM_PATH = Path("/etc/dlprio/dlprio.yaml")
PACKAGED_PATH = Path(__file__).resolve().parents[2] / "conf" / "dlprio.yaml"
MODES = ("priority", "partition")
PRIORITY_FIELDS = ("site_factor", "priority")
LOG_FORMATS = ("text", "json")


class ConfigError(ValueError):
    """The configuration is unusable; the message names the file and key."""


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
        partitions: partitions whose GPU jobs are managed; empty = all.
        queue_partitions: partition mode only: one partition per queue level, q0 first.
        exempt_partitions, exempt_accounts: jobs there are never preempted.
        max_grace_s: cap on a job's declared grace (seconds between signal and requeue).
        interval_s: seconds between cycles.
        backoff_max_s: longest wait after Slurm failures (doubling from ``interval_s``).
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
    """

    policy: PolicyConfig = field(default_factory=PolicyConfig)
    mode: str = "priority"
    priority_field: str = "site_factor"
    inqueue_span_s: int = 1_000_000
    partitions: tuple[str, ...] = ()
    queue_partitions: tuple[str, ...] = ()
    exempt_partitions: tuple[str, ...] = ()
    exempt_accounts: tuple[str, ...] = ()
    max_grace_s: float = 300.0
    interval_s: float = 30.0
    backoff_max_s: float = 300.0
    ledger_path: str = "/var/lib/dlprio/ledger.sqlite"
    snapshot_path: str = DEFAULT_SNAPSHOT_PATH
    metrics_port: int = 9464
    metrics_addr: str = "127.0.0.1"
    log_format: str = "text"
    slurm_timeout_s: float = 0.0
    gittins_samples: str = ""
    gittins_min_samples: int = 100
    gittins_refresh_s: float = 3600.0
    retention_days: float = 21.0
    lease_name: str = "dlprio-lease"
    lease_ttl_s: float = 0.0

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
    """``/etc/dlprio/dlprio.yaml`` when it exists, else the packaged ``conf/dlprio.yaml``."""
    return SYSTEM_PATH if SYSTEM_PATH.exists() else PACKAGED_PATH


def load(path: str | Path | None = None) -> DaemonConfig:
    """Read and validate a config file (``None``: :func:`default_path`).

    Raises:
        ConfigError: unreadable file, bad YAML, unknown key, wrong type or value.
    """
    p = Path(path) if path is not None else default_path()
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({exc})".replace("\n", " ")) from None
    try:
        return from_mapping(data or {})
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def from_mapping(data: Any) -> DaemonConfig:
    """Build a :class:`DaemonConfig` from parsed YAML. Raises :class:`ConfigError`."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"expected a mapping of keys at the top level, got {type(data).__name__}")
    known = {f.name: f for f in fields(DaemonConfig)}
    defaults = DaemonConfig()
    values: dict[str, Any] = {}
    for key, raw in data.items():
        if key not in known:
            raise ConfigError(f"{key}: unknown key; valid keys: {', '.join(sorted(known))}")
        if key == "policy":
            try:
                values[key] = PolicyConfig.from_mapping(raw or {})
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            continue
        values[key] = _coerce(key, raw, getattr(defaults, key))
    cfg = DaemonConfig(**values)
    _check(cfg)
    return cfg


def _coerce(key: str, raw: Any, default: Any) -> Any:
    if isinstance(default, tuple):
        if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
            raise ConfigError(f"{key}: expected a list of names, got {raw!r}")
        return tuple(raw)
    if isinstance(default, str):
        if not isinstance(raw, str):
            raise ConfigError(f"{key}: expected a string, got {raw!r}")
        return raw
    if isinstance(default, bool) or not isinstance(raw, (int, float)) or isinstance(raw, bool):
        raise ConfigError(f"{key}: expected a number, got {raw!r}")
    if isinstance(default, int) and not isinstance(raw, int):
        raise ConfigError(f"{key}: expected a whole number, got {raw!r}")
    if not math.isfinite(raw):
        raise ConfigError(f"{key}: must be finite, got {raw!r}")
    return raw


def _check(cfg: DaemonConfig) -> None:
    if cfg.policy.policy == "srtf":
        raise ConfigError("policy.policy: srtf needs every job's true duration (an oracle); "
                          "it exists for `dlprio simulate` only")
    if cfg.mode not in MODES:
        raise ConfigError(f"mode: {cfg.mode!r} is not one of {', '.join(MODES)}")
    if cfg.priority_field not in PRIORITY_FIELDS:
        raise ConfigError(f"priority_field: {cfg.priority_field!r} is not one of "
                          f"{', '.join(PRIORITY_FIELDS)}")
    if cfg.log_format not in LOG_FORMATS:
        raise ConfigError(f"log_format: {cfg.log_format!r} is not one of {', '.join(LOG_FORMATS)}")
    if cfg.mode == "partition" and len(cfg.queue_partitions) != cfg.queues:
        raise ConfigError(
            f"queue_partitions: mode partition needs one partition per queue ({cfg.queues} "
            f"queues from policy thresholds), got {list(cfg.queue_partitions)}")
    if cfg.lease_ttl_s and cfg.lease_ttl_s < 2 * cfg.interval_s:
        raise ConfigError(f"lease_ttl_s: must be >= 2 × interval_s ({2 * cfg.interval_s:g} s) or "
                          f"0 (auto), got {cfg.lease_ttl_s}")
    if cfg.lease_name and not all(c.isalnum() or c in "-_." for c in cfg.lease_name):
        raise ConfigError(f"lease_name: letters, digits, '-', '_', '.' only, got {cfg.lease_name!r}")
    if cfg.retention_days < 0:
        raise ConfigError(f"retention_days: must be >= 0 (0 = keep forever), got {cfg.retention_days}")
    if cfg.slurm_timeout_s < 0:
        raise ConfigError(f"slurm_timeout_s: must be > 0 seconds (0 = auto), got {cfg.slurm_timeout_s}")
    if cfg.gittins_min_samples < 1:
        raise ConfigError(f"gittins_min_samples: must be >= 1, got {cfg.gittins_min_samples}")
    for key in ("interval_s", "max_grace_s", "gittins_refresh_s"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(f"{key}: must be > 0 seconds, got {getattr(cfg, key)}")
    if cfg.slurm_timeout_s >= cfg.interval_s:
        raise ConfigError(f"slurm_timeout_s: must be shorter than interval_s ({cfg.interval_s} s) "
                          f"so that a hung Slurm call cannot stretch a cycle, got "
                          f"{cfg.slurm_timeout_s}")
    if cfg.backoff_max_s < cfg.interval_s:
        raise ConfigError(f"backoff_max_s: must be >= interval_s ({cfg.interval_s}), "
                          f"got {cfg.backoff_max_s}")
    if not 1 <= cfg.inqueue_span_s <= 100_000_000:
        raise ConfigError(f"inqueue_span_s: must be 1..100000000 seconds, got {cfg.inqueue_span_s}")
    if not 0 <= cfg.metrics_port <= 65535:
        raise ConfigError(f"metrics_port: must be 0 (off) or a TCP port, got {cfg.metrics_port}")
    for key in ("ledger_path", "snapshot_path"):
        if not getattr(cfg, key):
            raise ConfigError(f"{key}: must name a file")

