"""The check of the names ``dlprio.yaml`` gives Slurm's partitions and accounts.

A typo in ``partitions`` leaves the daemon managing nothing (no job is in a partition the
cluster does not have), one in ``exempt_partitions`` or ``exempt_accounts`` leaves jobs
preemptible that the site meant to keep, one in a virtual cluster's ``partition`` leaves the
tenant without jobs, one in ``queue_partitions`` (mode partition) makes every move fail; the
first three show nowhere else. So ``dlprio run`` and ``once`` (``run`` waiting for Slurm to
answer first; a :class:`prioritizer.daemon.loop.Daemon` made unchecked checks in its first
cycle), before they observe or send anything, check them against the cluster (:func:`preflight`, with the
virtual clusters' guarantees and accounts): partitions against ``scontrol show partition``, accounts against
slurmdbd's (``sacctmgr list account``; skipped with no slurmdbd to ask, or while it does not
answer, as the tenants' accounts are).
"""

from __future__ import annotations

import logging

from prioritizer.daemon.config import DaemonConfig
from prioritizer.daemon.log import CycleAdapter, event
from prioritizer.policy.tenants import Tenancy, account_key, check_tenancy
from prioritizer.policy.validation import ConfigError
from slurm_plugin.common.cli import visible
from slurm_plugin.slurm.client import SlurmClient, SlurmError, SlurmUnreachable


def name_problems(cfg: DaemonConfig, partitions: set[str],
                  accounts: set[str] | None) -> list[str]:
    """One line per name the cluster lacks (pure): ``partitions``: the cluster's partition
    names; ``accounts``: slurmdbd's account names, None when there is no slurmdbd to ask."""
    there = ", ".join(sorted(partitions)) or "none"
    out = [f"{key}: {name!r} is not a partition of the cluster (it has: {there}); fix the name"
           for key, names in _partition_keys(cfg)
           for name in names if name not in partitions]
    if accounts is not None:
        known = {account_key(a) for a in accounts}
        out += [f"exempt_accounts: {name!r} is not an account slurmdbd knows; add it "
                f"(sacctmgr add account {account_key(name)}) or fix the name"
                for name in cfg.exempt_accounts if account_key(name) not in known]
    return out


def _partition_keys(cfg: DaemonConfig) -> list[tuple[str, tuple[str, ...]]]:
    """(config key, partition names) of every key that names partitions: ``partitions``,
    ``exempt_partitions``, ``queue_partitions`` in mode partition (the daemon moves jobs
    there) and each virtual cluster's ``partition`` (a typo: the tenant has no job)."""
    keys = [("partitions", tuple(cfg.partitions)),
            ("exempt_partitions", tuple(cfg.exempt_partitions))]
    if cfg.mode == "partition":
        keys.append(("queue_partitions", tuple(cfg.queue_partitions)))
    tenancy = cfg.tenancy
    if tenancy is not None:
        keys += [(f"virtual_clusters.{t.name}.partition", (t.partition,))
                 for t in tenancy.tenants if t.partition is not None]
    return keys


def known_accounts(client: SlurmClient, log: CycleAdapter | None = None) -> set[str] | None:
    """slurmdbd's account names (``sacctmgr list account``), None when there is no slurmdbd
    to ask (Slurm then knows no accounts to check against) or it does not answer: sacctmgr
    talks to slurmdbd alone, and slurmctld schedules without it, so a slurmdbd outage must not
    keep the daemon from starting; the names then go unchecked, logged to ``log``
    (``accounts_unchecked``, WARNING)."""
    try:
        return client.accounts()
    except SlurmUnreachable as exc:
        if log is not None:
            event(log, "accounts_unchecked", level=logging.WARNING, error=exc.message,
                  why="slurmdbd did not answer; the accounts of exempt_accounts and "
                      "virtual_clusters are not checked against it")
        return None
    except SlurmError:
        return None


def tenancy_problems(tenancy: Tenancy, gpus: int, accounts: set[str] | None) -> list[str]:
    """The virtual clusters' problems on a cluster of ``gpus`` GPUs: guarantees against them,
    accounts against slurmdbd's ``accounts`` (skipped when None: no slurmdbd to ask); one
    line each."""
    return check_tenancy(tenancy, gpus, accounts)


def preflight(cfg: DaemonConfig, client: SlurmClient, source: str | None = None,
              log: CycleAdapter | None = None) -> None:
    """Every check of ``dlprio.yaml`` against the cluster (:func:`check_names`, and the virtual
    clusters against the cluster's GPUs, every node's as observe reads them), made before
    ``dlprio run``/``once`` take the cluster lease or open the ledger, so that a config they
    refuse leaves nothing behind: no lease job, no ledger rebuilt from sacct (``run`` started
    while Slurm does not answer makes them in its first cycle). Reads Slurm only.

    Args:
        source: the config file, put in front of each line as
            :func:`prioritizer.config_file.load` names its own problems (None: as they are).
        log: where a slurmdbd that does not answer is logged (:func:`known_accounts`).

    Raises:
        ConfigError: one line per problem, all of them together.
        SlurmUnreachable: ``run`` then leaves the checks to its first cycle, once Slurm answers.
    """
    partitions = (set(client.show_partitions())
                  if any(names for _, names in _partition_keys(cfg)) else set())
    accounts = (known_accounts(client, log)
                if cfg.exempt_accounts or cfg.tenancy is not None else None)
    problems = name_problems(cfg, partitions, accounts)
    if cfg.tenancy is not None:
        problems += tenancy_problems(cfg.tenancy, sum(n.gpus_total for n in client.nodes()),
                                     accounts)
    if problems:
        where = "" if source is None else f"{visible(source)}: "
        raise ConfigError("\n".join(where + line for line in problems))
