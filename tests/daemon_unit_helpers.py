"""Recording stand-ins for unit tests of the daemon's pure-ish logic (diffing, batching, the
preemption state machine). They record the calls the code would make; the live tests in
tests/live/test_daemon_live.py and tests/live/test_preempt_live.py check the same acts against Slurm."""

from __future__ import annotations

from dataclasses import dataclass, field

from prioritizer.policy.model import Snapshot
from prioritizer.daemon.observe import Observation, Unit
from slurm_plugin.slurm.client import JobUnknown, SlurmRefused, SlurmUnreachable


@dataclass
class RecordingClient:
    """Records (method, args); ``refuse`` ids make an update containing them fail like Slurm
    (rc=1 for the list); ``unreachable`` makes every call raise SlurmUnreachable."""

    calls: list[tuple] = field(default_factory=list)
    refuse: set[int] = field(default_factory=set)
    gone: set[int] = field(default_factory=set)
    unreachable: bool = False
    completed: set[int] = field(default_factory=set)
    requeue_flags: list[tuple[bool, bool]] = field(default_factory=list)

    def _check(self, ids: list[int]) -> None:
        if self.unreachable:
            raise SlurmUnreachable(["scontrol"], "Unable to contact slurm controller")
        if self.gone & set(ids):
            raise JobUnknown(["scontrol"], "Invalid job id specified")
        if self.refuse & set(ids):
            raise SlurmRefused(["scontrol"], "Job is no longer pending execution")

    def set_site_factor(self, ids: list[int], value: int) -> None:
        self.calls.append(("site_factor", list(ids), value))
        self._check(list(ids))

    def set_priority(self, ids: list[int], value: int) -> None:
        self.calls.append(("priority", list(ids), value))
        self._check(list(ids))

    def set_partition(self, ids: list[int], value: str) -> None:
        self.calls.append(("partition", list(ids), value))
        self._check(list(ids))

    def signal(self, job_id: int, sig: str, batch_only: bool = True) -> None:
        self.calls.append(("signal", job_id, sig))
        self._check([job_id])

    def requeue(self, job_id: int, *, incomplete: bool = False, hold: bool = False) -> None:
        self.calls.append(("requeue", job_id))
        self.requeue_flags.append((incomplete, hold))
        self._check([job_id])

    def release(self, ids: list[int]) -> None:
        self.calls.append(("release", list(ids)))

    def jobs(self, job_ids: list[int] | None = None) -> list:
        """What squeue shows after a requeue: ``completed`` ids as COMPLETED (the requeue
        found them ended), nothing for the others (the caller then trusts the requeue)."""
        from slurm_plugin.slurm.shapes import job_from_json
        return [job_from_json({"job_id": j, "job_state": "COMPLETED", "restart_cnt": 0})
                for j in (job_ids or []) if j in self.completed]


def unit(job_id: int, state: str = "RUNNING", *, start: float | None = 100.0, gpus: int = 8,
         restart: int = 0, marker: bool = True, partition: str = "gpu",
         end: float | None = None, reason: str = "None", account: str = "acct") -> Unit:
    from slurm_plugin.marker import CheckpointContract
    return Unit(job_id=job_id, user="alice", account=account, partition=partition, state=state,
                reason=reason,
                gpus_per_node=(gpus,), nodes=("node1",) if state == "RUNNING" else (),
                submit_time=50.0, start_time=start, end_time=end, eligible_time=None,
                restart_count=restart, requeue=True,
                contract=CheckpointContract("USR2", 30) if marker else None, priority=0)


def observation(now: float, *units: Unit) -> Observation:
    return Observation(now, Snapshot((), ()), {u.job_id: u for u in units}, ())


@dataclass
class FakeSlurm(RecordingClient):
    """A :class:`RecordingClient` that also answers what one daemon cycle reads: ``squeue``
    (Job records the test sets between cycles), ``sinfo`` (Node records), ``partitions``
    (``gpu`` of no tier unless the test sets others), an empty ``scontrol show config``.
    ``completing`` ids: ``scancel --signal`` fails for them as Slurm's does for a job already
    completing (ESLURM_ALREADY_DONE)."""

    squeue: list = field(default_factory=list)
    sinfo: list = field(default_factory=list)
    completing: set[int] = field(default_factory=set)
    known_accounts: set[str] | None = None   # sacctmgr's answer (None: no slurmdbd)
    dbd_down: bool = False   # slurmdbd does not answer sacctmgr (slurmctld does answer)
    partitions: dict = field(default_factory=lambda: {"gpu": {}})   # scontrol show partition

    def jobs(self, job_ids: list[int] | None = None) -> list:
        return [j for j in self.squeue if job_ids is None or j.unit_id in job_ids]

    def accounts(self) -> set[str]:
        if self.dbd_down:
            raise SlurmUnreachable(["sacctmgr"], "sacctmgr: error: _open_persist_conn: failed "
                                   "to open persistent connection to host:localhost:6819: "
                                   "Connection refused")
        if self.known_accounts is None:
            raise SlurmRefused(["sacctmgr"], "sacctmgr: error: Problem talking to the database")
        return set(self.known_accounts)

    def nodes(self) -> list:
        return list(self.sinfo)

    def show_partitions(self) -> dict:
        return dict(self.partitions)

    def show_config(self) -> dict:
        return {}

    def accounting_runs(self, job_id: int) -> list:
        return []

    def signal(self, job_id: int, sig: str, batch_only: bool = True) -> None:
        if job_id in self.completing:
            self.calls.append(("signal", job_id, sig))
            raise SlurmRefused(["scancel"], f"scancel: error: Kill job error on job id "
                               f"{job_id}: Job/step already completing or completed")
        super().signal(job_id, sig, batch_only)


def squeue_job(job_id: int, state: str, *, nodes: str = "", gpus: int = 8, start: int = 0,
               end: int = 0, reason: str = "None", restart: int = 0,
               account: str = "") -> object:
    """One squeue record of a batch job with a ``dl:v1`` marker (USR2, 60 s grace)."""
    from slurm_plugin.slurm.shapes import job_from_json
    return job_from_json({
        "job_id": job_id, "job_state": state, "user_name": "alice", "partition": "gpu",
        **({"account": account} if account else {}),
        "tres_per_node": f"gres:gpu:{gpus}", "node_count": 1, "nodes": nodes,
        "start_time": start, "end_time": end, "submit_time": 10, "requeue": True,
        "state_reason": reason, "restart_cnt": restart, "comment": "dl:v1;signal=USR2;grace=60"})


def sinfo_node(name: str, used: int, total: int = 8) -> object:
    """One GPU node as sinfo shows it, ``used`` of its ``total`` GPUs allocated."""
    from slurm_plugin.slurm.records import Node
    return Node(name, "127.0.0.1", "mixed", (), ("gpu",), 16, 2, 8, 64000, total, used, "a100")
