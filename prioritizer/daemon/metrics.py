"""Prometheus metrics of the daemon (prometheus_client), served on ``metrics_port``.

Series (names are part of the operator interface, docs/dlprio.md):

* ``dlprio_queue_length{queue, state}``: managed jobs per queue level and state (gauge);
* ``dlprio_attained_service_gpu_seconds``: histogram of the attained service (GPU·s) of the
  jobs managed at the last cycle (rebuilt each cycle, not accumulated);
* ``dlprio_preemptions_total``, ``dlprio_promotions_total``, ``dlprio_requeues_total``: counters;
* ``dlprio_cycle_duration_seconds``: histogram of cycle wall time (seconds);
* ``dlprio_slurm_errors_total{kind}``: Slurm failures by kind (``unreachable``, ``refused``);
* ``dlprio_last_cycle_timestamp_seconds``: epoch of the last successful cycle;
* ``dlprio_update_backoff_jobs``: jobs whose refused update waits out its backoff (gauge);
* ``dlprio_order_backlog_jobs``: pending jobs whose new value waits for a later cycle
  (``update_budget`` was spent; gauge);
* ``dlprio_auto_tune_replays_total{outcome}``: ``auto_tune`` replays by outcome (``switched``,
  ``kept``, ``skipped``, ``failed``, ``timeout``);
* ``dlprio_auto_tune_switches_total``: settings adopted by ``auto_tune`` (counter);
* ``dlprio_tenant_gpus{tenant, kind}``: with ``virtual_clusters``, GPUs per tenant of the
  last cycle (:data:`TENANT_KINDS`; a tenant no longer reported has no series).

One registry per daemon (not the global one), so tests can run several in one process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import HistogramMetricFamily, Metric

SERVICE_BUCKETS_GPU_S = (60, 300, 900, 3250, 7200, 14400, 43200, 86400, 259200, 604800)
#: The ``kind`` label values of ``dlprio_tenant_gpus``, in :meth:`Metrics.set_tenants`' order.
TENANT_KINDS = ("guaranteed", "used", "borrowed", "waiting")


class _ServiceHistogram:
    """A collector that reports the histogram of the latest per-job services."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def collect(self) -> Iterator[Metric]:
        counts = [sum(1 for v in self.values if v <= b) for b in SERVICE_BUCKETS_GPU_S]
        buckets = [(str(float(b)), c) for b, c in zip(SERVICE_BUCKETS_GPU_S, counts)]
        buckets.append(("+Inf", len(self.values)))
        yield HistogramMetricFamily(
            "dlprio_attained_service_gpu_seconds",
            "Attained service (GPU·s) of the managed jobs at the last cycle",
            buckets=buckets, sum_value=sum(self.values))


class Metrics:
    """The daemon's series in a private registry; :meth:`serve` opens the HTTP endpoint."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_length = Gauge("dlprio_queue_length", "Managed jobs per queue and state",
                                  ["queue", "state"], registry=r)
        self.preemptions = Counter("dlprio_preemptions", "Preemptions started", registry=r)
        self.promotions = Counter("dlprio_promotions", "Starving jobs promoted to queue 0",
                                  registry=r)
        self.requeues = Counter("dlprio_requeues", "Jobs requeued by the daemon", registry=r)
        self.cycle_duration = Histogram("dlprio_cycle_duration_seconds", "Cycle wall time",
                                        registry=r, buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30))
        self.slurm_errors = Counter("dlprio_slurm_errors", "Slurm command failures", ["kind"],
                                    registry=r)
        for kind in ("unreachable", "refused"):
            self.slurm_errors.labels(kind=kind)
        self.last_cycle = Gauge("dlprio_last_cycle_timestamp_seconds",
                                "Epoch of the last successful cycle", registry=r)
        self.update_backoff = Gauge("dlprio_update_backoff_jobs",
                                    "Jobs whose refused update is backing off", registry=r)
        self.order_backlog = Gauge("dlprio_order_backlog_jobs",
                                   "Pending jobs whose new value waits for a later cycle",
                                   registry=r)
        self.auto_tune_replays = Counter("dlprio_auto_tune_replays",
                                         "auto_tune replays by outcome", ["outcome"], registry=r)
        for outcome in ("switched", "kept", "skipped", "failed", "timeout"):
            self.auto_tune_replays.labels(outcome=outcome)
        self.auto_tune_switches = Counter("dlprio_auto_tune_switches",
                                          "Policy settings adopted by auto_tune", registry=r)
        self.tenant_gpus = Gauge("dlprio_tenant_gpus",
                                 "GPUs per tenant (virtual cluster): guaranteed, used, "
                                 "borrowed (used beyond the guarantee), waiting (pending demand)",
                                 ["tenant", "kind"], registry=r)
        self._tenants: set[str] = set()   # the tenants of the series set last
        self._service = _ServiceHistogram()
        r.register(self._service)  # type: ignore[arg-type]

    def set_queues(self, jobs: Iterable[tuple[int, str, float]], queues: int) -> None:
        """Update queue gauges and the service histogram from (queue, state, GPU·s) triples."""
        counts = {(q, s): 0 for q in range(queues) for s in ("PENDING", "RUNNING")}
        values = []
        for queue, state, service in jobs:
            counts[(queue, state)] = counts.get((queue, state), 0) + 1
            values.append(service)
        for (queue, state), n in counts.items():
            self.queue_length.labels(queue=str(queue), state=state).set(n)
        self._service.values = values

    def set_tenants(self, rows: Iterable[tuple[str, float, float, float, float]]) -> None:
        """Set ``dlprio_tenant_gpus`` from this cycle's ``(tenant, guaranteed, used, borrowed,
        waiting)`` GPUs and remove the series of every tenant not among them: a configured
        tenant is reported each cycle (0 when idle), the ``(shared)`` row only while a job of
        no tenant is managed, so its series go with its row instead of keeping the last value."""
        seen = set()
        for tenant, *gpus in rows:
            seen.add(tenant)
            for kind, value in zip(TENANT_KINDS, gpus):
                self.tenant_gpus.labels(tenant=tenant, kind=kind).set(value)
        for tenant in self._tenants - seen:
            for kind in TENANT_KINDS:
                self.tenant_gpus.remove(tenant, kind)
        self._tenants = seen

    def serve(self, port: int, addr: str) -> None:
        """Start the HTTP endpoint in a daemon thread (port 0: no endpoint). Raises OSError."""
        if port:
            start_http_server(port, addr=addr, registry=self.registry)
