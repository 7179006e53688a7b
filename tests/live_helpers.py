"""Helpers for live tests: polling with timeouts (never fixed sleeps) and the current cluster."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from slurm_plugin.slurm.client import SlurmClient, SlurmError
from slurm_plugin.slurm.records import Job

T = TypeVar("T")


def wait_for(probe: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.25) -> T:
    """Call ``probe`` until it returns a truthy value; raise AssertionError after ``timeout_s``.

    Slurm errors inside ``probe`` count as "not yet" (the controller may be restarting).
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            value = probe()
            if value:
                return value
            last = value
        except SlurmError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def wait_state(client: SlurmClient, job_id: int, states: set[str], timeout_s: float = 60) -> Job:
    """Wait until job ``job_id`` is in one of ``states``; return its record."""
    def probe() -> Job | None:
        for j in client.jobs(job_ids=[job_id]):
            if j.job_id == job_id and j.state in states:
                return j
        return None
    return wait_for(probe, timeout_s, f"job {job_id} in {sorted(states)}")


def wait_file(path: Path, pattern: str, timeout_s: float = 60) -> str:
    """Wait until ``path`` exists and its text matches regex ``pattern``; return the text."""
    rx = re.compile(pattern, re.M)

    def probe() -> str | None:
        try:
            text = path.read_text()
        except OSError:
            return None
        return text if rx.search(text) else None
    return wait_for(probe, timeout_s, f"{path} to match {pattern!r}")


def slurm_conf() -> Path:
    return Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))


def cluster_name() -> str:
    """ClusterName of the cluster SLURM_CONF names (as `dlcluster --name` takes it)."""
    for line in slurm_conf().read_text().splitlines():
        if line.startswith("ClusterName="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"no ClusterName in {slurm_conf()}")


#: the releases ./test.sh runs live tests on, in the order of :func:`per_release_port`'s offsets
RELEASES = ((22, 5), (24, 11), (26, 5))


def per_release_port(base: int, release: tuple[int, int]) -> int:
    """``--port-base`` of a throw-away cluster a test brings up: ``base`` + 10 per release
    (22.05: +0, 24.11: +10, 26.05: +20, any other: +30), since ./test.sh runs the live subsets
    of two releases at once. A 1-node cluster listens on ``port_base``, ``+2`` (slurmdbd) and
    ``+101`` (its slurmd), so bases 10 apart never share a port."""
    return base + 10 * (RELEASES.index(release) if release in RELEASES else len(RELEASES))


def per_cluster_user(stem: str) -> str:
    """A Linux user name of the cluster SLURM_CONF names (``stem`` + the cluster's name, at most
    32 characters): tests that add a user with ``useradd`` and remove it after run on two
    clusters at once and must not remove each other's. Without a cluster (a run that collects
    the live tests only to deselect them) the stem alone."""
    return f"{stem}{cluster_name() if slurm_conf().exists() else ''}"[:32]


#: jobs that kept a whole :func:`wait_cluster_idle` from ending: id -> how it stood then
_outlasted: dict[int, str] = {}


def _describe(job: Job) -> str:
    return f"{job.job_id} {job.name!r} {job.state} ({job.reason}), user {job.user}"


def wait_cluster_idle(client: SlurmClient, timeout_s: float = 120, prefix: str | None = None) -> None:
    """Wait until no active job (optionally: no active job whose name starts with ``prefix``).

    On a timeout the AssertionError names the jobs still active. A later call whose active jobs
    all outlasted such an earlier wait (a job restored from a killed run, held forever) fails at
    once, naming them and the fix, instead of waiting out its own timeout: one stuck job must not
    cost every live test of the run its timeout.
    """
    def active() -> list[Job]:
        return [j for j in client.jobs() if j.is_active and (prefix is None or j.name.startswith(prefix))]

    last: list[Job] = []

    def probe() -> bool:
        nonlocal last
        last = active()
        return not last

    if _outlasted:
        try:
            probe()
        except SlurmError:
            pass
        if last and all(j.job_id in _outlasted for j in last):
            raise AssertionError(
                "the cluster still has jobs that outlasted an earlier wait for no active jobs: "
                + "; ".join(_outlasted[j.job_id] for j in last)
                + " (cancel them, or start the test cluster empty: `dlcluster up --clear`)")
    try:
        wait_for(probe, timeout_s, "the cluster to have no active jobs")
    except AssertionError as exc:
        _outlasted.update((j.job_id, _describe(j)) for j in last)
        raise AssertionError(f"{exc}; still active: " + "; ".join(map(_describe, last))) from None


SLURM_COMMANDS = ("sbatch", "squeue", "scontrol", "sinfo", "sacct", "sprio", "sshare", "sstat",
                  "scancel", "srun", "salloc")


def logging_path(tmp_path: Path) -> tuple[str, Path]:
    """A PATH whose Slurm commands are the real ones behind a line that logs each call
    (``NAME ARGS``) to the returned file, so a test sees every command a tool runs against the
    live cluster (everything else behaves as without it)."""
    bin_dir, log = tmp_path / "slurm-bin", tmp_path / "slurm-calls.log"
    bin_dir.mkdir()
    log.touch()
    for name in SLURM_COMMANDS:
        real = shutil.which(name)
        if real is None:
            continue
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> {shlex.quote(str(log))}\n'
                        f'exec {shlex.quote(real)} "$@"\n')
        shim.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}", log


def logged_calls(log: Path) -> list[str]:
    """The calls :func:`logging_path` logged, one a line (split on newlines only: arguments may
    hold characters, such as squeue's field separators, that str.splitlines also splits at)."""
    return log.read_text().split("\n")[:-1]
