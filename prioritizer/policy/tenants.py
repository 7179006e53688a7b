"""Tenants (virtual clusters) of a shared cluster: the config and the order across tenants.

A site divides its GPUs between virtual clusters (OpenPAI's word; a *tenant*): each names the
Slurm ``account``, ``partition`` and/or ``qos`` its jobs carry (the keys ``dlsubmit`` renders
from the same ``virtual_clusters:`` section), a ``guaranteed_gpus`` it always gets back, an
optional ``max_gpus`` it never passes and an optional ``user_limit_factor`` (YARN capacity
scheduler: one user of the tenant holds at most ``factor x guaranteed_gpus``). GPUs nobody
guarantees are shared by all. A job belongs to the one tenant whose every named key matches
what squeue reports for it; a job no tenant matches belongs to :data:`SHARED` (guarantee 0).
Only ``account`` and ``partition`` tell tenants apart: dlprio reads no QOS from squeue, so a
tenant that names ``qos`` matches no job there (``qos`` places dlsubmit's jobs).
Traces name users instead (``users:``, simulator only).

The rules here (pure, used by the daemon and the simulator alike; the victim walk is in
:mod:`prioritizer.policy.tenant_preempt`):

* **guarantee first**: the next job is one whose tenant stays within its guarantee once it
  starts (``held + gpus <= guaranteed_gpus``), from the tenant furthest below its guarantee
  (smallest ``held / guaranteed``);
* **weighted DRF above the guarantees**: otherwise the next job comes from the tenant with the
  smallest dominant share (Ghodsi et al., NSDI'11: the largest of its GPU, CPU and memory
  shares of the cluster) divided by its weight ``max(guaranteed_gpus, 1) / cluster GPUs``; with
  ``fair_share_half_life_s`` the past counts as well, decayed as Slurm's fairshare decays usage
  (``PriorityDecayHalfLife``): the share is the tenant's decayed usage over the cluster's
  decayed capacity (``capacity x half-life / ln 2``) plus what it holds now;
* **inside a tenant**, its jobs keep the Tiresias order ``decide`` gave them;
* **caps**: a job that would take its tenant past ``max_gpus`` or its user past the user limit
  is held back (out of the order), whatever its rank.

Units: GPUs, CPUs, MiB of memory; usage in resource-seconds; times in seconds.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from prioritizer.policy.validation import ConfigError, not_text_message, read_as_not_text

#: The tenant of jobs no virtual cluster matches: guarantee 0, no cap.
SHARED = "(shared)"

#: Keys of one ``virtual_clusters`` entry: dlsubmit's placement keys, then the tenant's.
MATCH_KEYS = ("account", "partition", "qos")
TENANT_KEYS = ("guaranteed_gpus", "max_gpus", "user_limit_factor", "users")
#: What the replays of ``dlprio history check``, ``dlprio tune`` and the daemon's
#: ``auto_tune`` say of the virtual clusters they leave out
NOT_REPLAYED = ("virtual_clusters: not replayed; the replay orders all jobs by the policy "
                "alone (dlprio simulate --tenants FILE replays them)")
#: the most GPUs ``user_limit_factor x guaranteed_gpus`` may come to (2^31, far above any
#: cluster: a larger factor limits nothing and its product may not even be a finite number)
MAX_USER_CAP = 2**31
_NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")


def account_key(name: str) -> str:
    """The form in which Slurm keeps an account name: lower case (sacctmgr stores ``AdmNLP`` as
    ``admnlp`` and answers "Already existing account admnlp" to ``add account AdmNLP``; sbatch
    takes either; squeue, sacct and sshare report the lower case one). Compare account names
    by it, never as written."""
    return name.lower()


@dataclass(frozen=True)
class VirtualCluster:
    """One tenant.

    Attributes:
        name: the virtual cluster's name (the ``virtual_clusters`` key).
        account, partition, qos: Slurm names its jobs carry (None: any); a job belongs to it
            when every one given matches.
        users: trace user names (simulator only: traces carry no account).
        guaranteed_gpus: GPUs it gets back whenever it has jobs waiting that fit in them.
        max_gpus: GPUs it never passes (None: the cluster's).
        user_limit_factor: one user holds at most ``ceil(factor x guaranteed_gpus)`` GPUs
            (None: no user limit).
    """

    name: str
    account: str | None = None
    partition: str | None = None
    qos: str | None = None
    users: tuple[str, ...] = ()
    guaranteed_gpus: int = 0
    max_gpus: int | None = None
    user_limit_factor: float | None = None

    def matches(self, account: str | None, partition: str | None, qos: str | None) -> bool:
        """Whether a job with these Slurm fields belongs here (keys not given match all)."""
        return ((self.account is None or (account is not None
                                          and account_key(self.account) == account_key(account)))
                and (self.partition is None or self.partition == partition)
                and (self.qos is None or self.qos == qos)
                and (self.account, self.partition, self.qos) != (None, None, None))

    def user_cap(self) -> int | None:
        """GPUs one user of the tenant may hold, or None."""
        if self.user_limit_factor is None:
            return None
        cap = math.ceil(self.user_limit_factor * self.guaranteed_gpus)
        return cap if self.max_gpus is None else min(cap, self.max_gpus)


@dataclass(frozen=True)
class Tenancy:
    """Every tenant of a cluster and the fair-share memory (``fair_share_half_life_s``, 0:
    only what tenants hold now counts)."""

    tenants: tuple[VirtualCluster, ...]
    fair_share_half_life_s: float = 0.0
    by_name: dict[str, VirtualCluster] = field(init=False, compare=False, repr=False)
    by_user: dict[str, str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {t.name: t for t in self.tenants})
        object.__setattr__(self, "by_user", {u: t.name for t in self.tenants for u in t.users})

    def tenant_of(self, account: str | None, partition: str | None, qos: str | None) -> str:
        """The tenant of a job from what squeue reports (:data:`SHARED` if none matches;
        :func:`check_tenancy` refuses configs where two could)."""
        for tenant in self.tenants:
            if tenant.matches(account, partition, qos):
                return tenant.name
        return SHARED

    def tenant_of_user(self, user: str) -> str:
        """The tenant of a trace user (:data:`SHARED` if no ``users:`` list names it)."""
        return self.by_user.get(user, SHARED)

    def guarantee(self, name: str) -> int:
        tenant = self.by_name.get(name)
        return tenant.guaranteed_gpus if tenant is not None else 0

    def names(self) -> list[str]:
        """Tenant names in config order, then :data:`SHARED`."""
        return [t.name for t in self.tenants] + [SHARED]


def parse_tenancy(raw: Any, half_life_s: Any = 0.0, where: str = "virtual_clusters") -> Tenancy:
    """Read the ``virtual_clusters`` mapping (and ``fair_share_half_life_s``) of a YAML file.

    Raises:
        ConfigError: one line per problem naming ``virtual_clusters.NAME.KEY`` and the fix.
    """
    tenancy, problems = read_tenancy(raw, half_life_s, where)
    if problems:
        raise ConfigError("\n".join(problems))
    return tenancy


def read_tenancy(raw: Any, half_life_s: Any = 0.0, where: str = "virtual_clusters"
                 ) -> tuple[Tenancy, list[str]]:
    """The ``virtual_clusters`` mapping (and ``fair_share_half_life_s``) of a YAML file, as
    far as it is valid: the tenants whose keys are all valid, and one line per problem of the
    keys, naming ``virtual_clusters.NAME.KEY`` and the fix. The rules that tie keys together
    (:func:`check_tenancy`) can then be checked on the valid tenants beside those problems,
    so that a config's problems are all told at once."""
    problems: list[str] = []
    if not isinstance(raw, Mapping):
        return Tenancy(()), [f"{where}: must be a mapping of name -> {{account, partition, qos, "
                             "guaranteed_gpus, max_gpus, user_limit_factor, users}"]
    tenants = []
    for name, entry in raw.items():
        at = f"{where}.{name}"
        before = len(problems)
        if not isinstance(name, str) or not name or not name.isprintable() or name == SHARED:
            problems.append(f"{where} {name!r}: a name must be a non-empty printable string")
            continue
        if not isinstance(entry, Mapping):
            problems.append(f"{at}: must be a mapping with keys {', '.join(MATCH_KEYS + TENANT_KEYS)}")
            continue
        for key in entry:
            if key not in MATCH_KEYS + TENANT_KEYS:
                problems.append(f"{at}.{key}: unknown key; allowed: "
                                f"{', '.join(MATCH_KEYS + TENANT_KEYS)}")
        values: dict[str, Any] = {"name": name}
        for key in MATCH_KEYS:
            v = entry.get(key)
            if v is not None and read_as_not_text(v):   # account: 010 is the number 8
                problems.append(f"{at}.{key}: a Slurm name: {not_text_message(v, key)}")
            elif v is not None and (not isinstance(v, str) or not _NAME.match(v)):
                problems.append(f"{at}.{key}: must be a Slurm name ([A-Za-z0-9_.-]+), got {v!r}")
            values[key] = v
        users = entry.get("users", [])
        if isinstance(users, list):
            for i, u in enumerate(users):   # users: [010] is the number 8, [no] False
                if read_as_not_text(u):
                    problems.append(f"{at}.users[{i}]: a user name: "
                                    f"{not_text_message(u, 'users: [', optional=False)}")
            users = [u for u in users if not read_as_not_text(u)]
        if not isinstance(users, list) or not all(isinstance(u, str) and u.strip()
                                                  for u in users):
            problems.append(f"{at}.users: must be a list of user names (none empty)")
            users = []
        twice = sorted(u for u, n in Counter(map(str, users)).items() if n > 1)
        if twice:
            problems.append(f"{at}.users: {', '.join(map(repr, twice))} listed more than once; "
                            "list each user once")
        values["users"] = tuple(dict.fromkeys(str(u) for u in users))
        for key in ("guaranteed_gpus", "max_gpus"):
            v = entry.get(key, 0 if key == "guaranteed_gpus" else None)
            if v is not None and (type(v) is not int or v < 0):
                problems.append(f"{at}.{key}: must be a whole number >= 0, got {v!r}")
                v = 0
            values[key] = v
        f = entry.get("user_limit_factor")
        if f is not None and (type(f) not in (int, float) or not 0 < f < math.inf):
            problems.append(f"{at}.user_limit_factor: must be a number > 0, got {f!r}")
            f = None
        elif f is not None and f * values["guaranteed_gpus"] > MAX_USER_CAP:
            problems.append(f"{at}.user_limit_factor: {f!r} x guaranteed_gpus "
                            f"{values['guaranteed_gpus']} is above {MAX_USER_CAP:,} GPUs, more "
                            "than any cluster; leave user_limit_factor out for no user limit")
            f = None
        values["user_limit_factor"] = None if f is None else float(f)
        if len(problems) == before:
            tenants.append(VirtualCluster(**values))
    if type(half_life_s) not in (int, float) or not 0 <= half_life_s < math.inf:
        problems.append(f"fair_share_half_life_s: must be seconds >= 0, got {half_life_s!r}")
        half_life_s = 0.0
    return Tenancy(tuple(tenants), float(half_life_s)), problems


def check_tenancy(tenancy: Tenancy, cluster_gpus: int | None = None,
                  known_accounts: Iterable[str] | None = None,
                  where: str = "virtual_clusters") -> list[str]:
    """Problems of a tenancy against a cluster, one line each (empty: fine): guarantees
    above ``cluster_gpus`` (summed or alone), a guarantee above its own ``max_gpus``, a
    tenant naming no account, partition or user, two tenants one job could belong to,
    a user in two ``users:`` lists, an account slurmdbd does not know (``known_accounts``:
    ``sacctmgr``'s list, None: not checked)."""
    out = []
    total = sum(t.guaranteed_gpus for t in tenancy.tenants)
    if cluster_gpus is not None and total > cluster_gpus:
        out.append(f"{where}: guaranteed_gpus sum to {total}, above the cluster's {cluster_gpus} "
                   "GPUs; lower them so that every guarantee can be met at once")
    known = None if known_accounts is None else set(known_accounts)
    seen_users: dict[str, str] = {}
    for i, t in enumerate(tenancy.tenants):
        at = f"{where}.{t.name}"
        if t.max_gpus is not None and t.guaranteed_gpus > t.max_gpus:
            out.append(f"{at}: guaranteed_gpus {t.guaranteed_gpus} above max_gpus {t.max_gpus}; "
                       "raise max_gpus or lower the guarantee")
        if t.user_limit_factor is not None and t.guaranteed_gpus == 0:
            out.append(f"{at}: user_limit_factor needs guaranteed_gpus > 0 (a user may hold "
                       "factor x guaranteed_gpus GPUs: none here)")
        if (t.account, t.partition) == (None, None) and not t.users:
            out.append(f"{at}: names no account, partition or users; no job would belong to it"
                       + (" (dlprio matches no job by QOS)" if t.qos else ""))
        if (known is not None and t.account is not None
                and account_key(t.account) not in {account_key(a) for a in known}):
            out.append(f"{at}.account: {t.account!r} is not an account slurmdbd knows; "
                       f"add it (sacctmgr add account {account_key(t.account)}) or fix the name")
        for u in t.users:
            if u in seen_users:
                out.append(f"{at}.users: user {u!r} is in {seen_users[u]!r} too; "
                           "a user belongs to one virtual cluster")
            seen_users.setdefault(u, t.name)
        for other in tenancy.tenants[:i]:
            if (common := _overlap(t, other)) is not None:
                out.append(f"{at}: a job could belong to both {other.name!r} and {t.name!r} "
                           f"(a job of {common} matches both); give them distinct accounts "
                           "or distinct partitions")
    return out


def _overlap(a: VirtualCluster, b: VirtualCluster) -> str | None:
    """The jobs both tenants match, in words (``account 'nlp' in partition 'gpu'``), or None
    when none: a tenant matches a job when every account and partition it names is the job's,
    so two tenants share jobs unless both name an account and the two differ, or both a
    partition. Only account and partition tell tenants apart (dlprio reads no QOS from
    squeue); a tenant that names neither matches no job and is reported on its own."""
    if (a.account, a.partition) == (None, None) or (b.account, b.partition) == (None, None):
        return None
    account, partition = a.account or b.account, a.partition or b.partition
    other = b.account or a.account
    if ((account and other and account_key(account) != account_key(other))
            or partition != (b.partition or a.partition)):
        return None   # both name it, with distinct values
    return " in ".join(f"{key} {value!r}" for key, value in
                       (("account", account and account_key(account)), ("partition", partition))
                       if value is not None)


# -- shares --------------------------------------------------------------------------------

#: GPUs, CPUs, MiB of memory: what a job holds, a tenant holds, a cluster has.
Resources = tuple[float, float, float]


def dominant_share(held: Sequence[float], totals: Sequence[float]) -> float:
    """The largest of ``held[r] / totals[r]`` over resources with a total above 0 (DRF)."""
    return max([h / t for h, t in zip(held, totals) if t > 0], default=0.0)


def decay(usage: Sequence[float], held: Sequence[float], elapsed_s: float,
          half_life_s: float) -> Resources:
    """Decayed usage (resource-seconds) ``elapsed_s`` later, ``held`` held all that time:
    ``u x 2^(-t/h) + held x h/ln2 x (1 - 2^(-t/h))`` (the exact integral of usage decayed
    with half-life ``h``, as Slurm's ``PriorityDecayHalfLife``)."""
    keep = 0.5 ** (elapsed_s / half_life_s)
    gain = half_life_s / math.log(2) * (1.0 - keep)
    return (usage[0] * keep + held[0] * gain, usage[1] * keep + held[1] * gain,
            usage[2] * keep + held[2] * gain)


def fair_share(held: Sequence[float], usage: Sequence[float] | None, totals: Sequence[float],
               guaranteed_gpus: int, half_life_s: float) -> float:
    """A tenant's weighted share (smaller: next in line above the guarantees): its dominant
    share of what it holds now, plus with a half-life its dominant share of its decayed usage
    over the cluster's decayed capacity (``totals x h/ln2``), divided by its weight
    ``max(guaranteed_gpus, 1) / totals[0]``."""
    share = dominant_share(held, totals)
    if half_life_s > 0 and usage is not None:
        span = half_life_s / math.log(2)
        share += dominant_share(usage, [t * span for t in totals])
    return share * totals[0] / max(guaranteed_gpus, 1)


# -- the order across tenants --------------------------------------------------------------

class Waiting(NamedTuple):
    """A pending job as the tenant rules see it: its tenant, user and what it asks
    (``gpus``, ``cpus``, ``mem_mib``: totals over its nodes)."""

    job_id: int
    tenant: str
    user: str
    gpus: int
    cpus: float = 0.0
    mem_mib: float = 0.0


@dataclass
class Holdings:
    """What each tenant (and each ``(tenant, user)``) holds: GPUs, CPUs, MiB."""

    tenants: dict[str, list[float]] = field(default_factory=dict)
    users: dict[tuple[str, str], float] = field(default_factory=dict)

    def add(self, tenant: str, user: str, gpus: float, cpus: float = 0.0,
            mem_mib: float = 0.0, sign: int = 1) -> None:
        row = self.tenants.setdefault(tenant, [0.0, 0.0, 0.0])
        row[0] += sign * gpus
        row[1] += sign * cpus
        row[2] += sign * mem_mib
        self.users[tenant, user] = self.users.get((tenant, user), 0.0) + sign * gpus

    def gpus(self, tenant: str) -> float:
        row = self.tenants.get(tenant)
        return row[0] if row is not None else 0.0

    def copy(self) -> Holdings:
        return Holdings({k: list(v) for k, v in self.tenants.items()}, dict(self.users))


#: The rules of ``TenantOrder.why`` (``dlprio explain`` words them: ``TenantOrder.reason``).
GUARANTEE, SHARE, MAX_GPUS, USER_LIMIT = "guarantee", "fair share", "max_gpus", "user limit"


@dataclass(frozen=True)
class TenantOrder:
    """The order across tenants: ``order`` (job ids, first starts first), ``held`` (ids held
    back by ``max_gpus`` or the user limit, in Tiresias order), and per id the rule that
    placed it, ``why`` (:meth:`reason` words it): ``(GUARANTEE or SHARE, tenant, GPUs the
    tenant held at its turn, guarantee, weighted share)`` or ``(MAX_GPUS, tenant, held, job
    GPUs, max_gpus)`` or ``(USER_LIMIT, user, held by the user, job GPUs, user limit)``."""

    order: tuple[int, ...]
    held: tuple[int, ...]
    why: dict[int, tuple[str, str, float, int, float]]

    def reason(self, job_id: int) -> str:
        """The rule that placed ``job_id``, in words (``dlprio explain``)."""
        return reason_text(self.why[job_id])


def reason_text(why: Sequence[Any]) -> str:
    """A ``TenantOrder.why`` entry in words. The GPUs are those the tenant (or user) holds
    counting the jobs ahead in the order as started, as the rule counts them, which is more
    than it holds now while jobs of it wait ahead."""
    kind, who, have, n, x = why
    ahead = "counting the jobs ahead of it"
    if kind == GUARANTEE:
        return f"{GUARANTEE}: {who} at {have:g} of {n} guaranteed GPUs, {ahead}"
    if kind == SHARE:
        return (f"{SHARE}: {who} has the smallest weighted share {x:.3f} "
                f"(at {have:g} of {n} guaranteed GPUs, {ahead})")
    if kind == MAX_GPUS:
        return (f"{MAX_GPUS}: {who} holds {have:g} GPUs, {ahead}; {n} more would pass its "
                f"max_gpus {x:g}")
    return (f"{USER_LIMIT}: user {who} holds {have:g} GPUs, {ahead}; {n} more would pass the "
            f"user limit {x:g}")


def tenant_order(waiting: Sequence[Waiting], tenancy: Tenancy, holdings: Holdings,
                 totals: Resources, usage: Mapping[str, Sequence[float]] | None = None
                 ) -> TenantOrder:
    """Merge the tenants' pending jobs (``waiting``, in the Tiresias order ``decide`` gave)
    into one start order (module doc), each job assumed to start in its turn.

    Args:
        holdings: what the running jobs hold now (not changed).
        totals: the cluster's GPUs, CPUs, MiB.
        usage: decayed usage per tenant (resource-seconds, :func:`decay`), with a half-life.

    O(jobs x tenants).
    """
    held_now = holdings.copy()
    queues: dict[str, list[tuple[int, Waiting]]] = {}   # per tenant (rank, job) in order
    for i, one in enumerate(waiting):
        queues.setdefault(one.tenant, []).append((i, one))
    heads = {name: 0 for name in queues}
    specs = {name: tenancy.by_name.get(name) for name in queues}
    order: list[int] = []
    held: list[tuple[int, int]] = []   # (rank, job id)
    why: dict[int, tuple[str, str, float, int, float]] = {}
    half = tenancy.fair_share_half_life_s
    #: per tenant with a job left: (key, tenant, its next job, guarantee, GPUs held); keys
    #: are unique (the job's rank ends them) and only change when their own tenant's
    #: holdings do (the others are kept)
    keys: dict[str, tuple[tuple[int, float, int], str, Waiting, int, float]] = {}
    zero = [0.0, 0.0, 0.0]

    def refresh(name: str) -> None:
        queue, spec = queues[name], specs[name]
        i = heads[name]
        while i < len(queue):
            rank, job = queue[i]
            capped = _capped(job, spec, held_now)
            if capped is None:
                break
            held.append((rank, job.job_id))
            why[job.job_id] = capped
            i += 1
        else:
            heads[name] = i
            keys.pop(name, None)
            return
        heads[name] = i
        g = spec.guaranteed_gpus if spec is not None else 0
        row = held_now.tenants.get(name, zero)
        have = row[0]
        if g > 0 and have + job.gpus <= g:
            keys[name] = ((0, have / g, rank), name, job, g, have)
        else:
            share = fair_share(row, None if usage is None else usage.get(name), totals, g, half)
            keys[name] = ((1, share, rank), name, job, g, have)

    for name in queues:
        refresh(name)
    while keys:
        key, name, job, g, have = min(keys.values())
        order.append(job.job_id)
        why[job.job_id] = (GUARANTEE if key[0] == 0 else SHARE, name, have, g, key[1])
        held_now.add(name, job.user, job.gpus, job.cpus, job.mem_mib)
        heads[name] += 1
        refresh(name)
    held.sort()
    return TenantOrder(tuple(order), tuple(job_id for _, job_id in held), why)


def _capped(job: Waiting, spec: VirtualCluster | None, holdings: Holdings
            ) -> tuple[str, str, float, int, float] | None:
    """Why ``job`` may not start now (max_gpus or user limit) as ``TenantOrder.why`` holds
    it, or None."""
    if spec is None:
        return None
    have = holdings.gpus(job.tenant)
    if spec.max_gpus is not None and have + job.gpus > spec.max_gpus:
        return (MAX_GPUS, job.tenant, have, job.gpus, spec.max_gpus)
    cap = spec.user_cap()
    if cap is not None:
        mine = holdings.users.get((job.tenant, job.user), 0.0)
        if mine + job.gpus > cap:
            return (USER_LIMIT, job.user, mine, job.gpus, cap)
    return None
