"""Provisioning of the local cluster: packages, munge, config files, the Slurm daemons.

This is ``dlcluster``'s imperative shell around :mod:`slurm_plugin.localcluster.cluster` (which renders the
configs). Packages, munge and fake GPUs are set up by the shell scripts in
``slurm_plugin/localcluster/provision/`` that ``vagrant/Vagrantfile`` runs too, so the local cluster and the
VMs share one recipe. Daemons are started directly (no systemd here) and stopped only by the PID
files this cluster's config names, after checking that the PID still is that daemon.

Failure leaves nothing half-done: options and ports are checked before anything is written,
configs are written atomically, and when a start fails every daemon this call started is stopped
and the previous config files are put back.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slurm_plugin.localcluster import cluster
from slurm_plugin.localcluster import netns
from slurm_plugin.localcluster import rootfs
from slurm_plugin.common.atomic import is_special, write_atomically
from slurm_plugin.slurm.client import SlurmClient, SlurmError, SlurmRefused
from slurm_plugin.localcluster.cluster import ClusterSpec

SCRIPTS = Path(__file__).with_name("provision")
LUA = Path(__file__).parents[1] / "job_submit.lua"
_ROOT = Path("/var/lib/dlcluster")


class ProvisionError(RuntimeError):
    """Bringing the cluster up or down failed; the message says what and where to look."""


@dataclass(frozen=True)
class Daemon:
    """A daemon of the cluster: its PID file and the executable name its cmdline must show."""

    label: str
    pidfile: Path
    exe: str


def daemons(spec: ClusterSpec, *, left: bool = False) -> list[Daemon]:
    """Every daemon the cluster runs (slurmdbd first, slurmctld, then the slurmd's).

    ``left``: also a slurmdbd that an earlier ``up --with-dbd`` left (its PID file is there)
    when the cluster is now without one, so that a restart without accounting stops it."""
    run = spec.state_dir / "run"
    dbd = Daemon("slurmdbd", run / "slurmdbd.pid", "slurmdbd")
    out = [dbd] if spec.with_dbd or (left and dbd.pidfile.exists()) else []
    out.append(Daemon("slurmctld", run / "slurmctld.pid", "slurmctld"))
    out += [Daemon(f"slurmd {n}", run / f"slurmd-{n}.pid", "slurmd") for n in spec.node_names]
    return out


def pid_of(d: Daemon) -> int | None:
    """The live PID recorded for ``d``, or None (no file, dead process, or PID reused by another program)."""
    try:
        pid = int(d.pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, ValueError):
        return None
    return pid if os.path.basename(cmdline.decode(errors="replace")) == d.exe else None


def _env(spec: ClusterSpec) -> dict[str, str]:
    """This process's environment pointed at the cluster: SLURM_CONF, and the release's
    commands first on PATH for a cluster run from a root filesystem (``dlcluster env``)."""
    return {**os.environ, **cluster_env(spec)}


def cluster_env(spec: ClusterSpec) -> dict[str, str]:
    """The variables that point Slurm's commands at the cluster: ``SLURM_CONF`` and, for a
    release run from a root filesystem, ``PATH`` with the wrappers of its commands first."""
    env = {"SLURM_CONF": str(spec.slurm_conf)}
    if spec.bin_dir is not None:
        rest = [p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                if p and p != str(spec.bin_dir)]
        env["PATH"] = os.pathsep.join([str(spec.bin_dir), *rest])
    return env


def _script(name: str, *args: str) -> str:
    proc = subprocess.run(["bash", str(SCRIPTS / name), *args], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise ProvisionError((proc.stderr.strip() or proc.stdout.strip() or f"{name} failed").splitlines()[-1]
                             if proc.returncode != 4 else proc.stderr.strip())
    return proc.stdout.strip()


def host_release() -> str:
    """The Slurm release this host's Debian ships (``22.05`` on Debian 12, ``24.11`` on 13).
    Raises :class:`ProvisionError` on any other system."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        text = ""
    release = rootfs.host_release(text)
    if release is None:
        name = next((line.split("=", 1)[1].strip('"') for line in text.splitlines()
                     if line.startswith("PRETTY_NAME=")), "this system")
        raise ProvisionError(f"dlcluster needs Debian 12 (bookworm) or 13 (trixie); {name} is not supported")
    return release


def check_platform() -> None:
    """Raise :class:`ProvisionError` unless this is Debian 12 or 13 and we are root."""
    host_release()
    if os.geteuid() != 0:
        raise ProvisionError("dlcluster must run as root (it installs packages and starts Slurm's daemons)")


def ensure_rootfs(spec: ClusterSpec, log=print) -> None:
    """Build the cluster's root filesystem once (mmdebstrap(1) from the host's Debian archive,
    25-30 s and about 220 MB here) unless a finished one is kept; nothing for the host's release.
    A build that fails or is stopped leaves no root filesystem that looks finished; an ``up``
    that finds another one building the same root filesystem waits for it (a lock file beside
    it) and uses what it built."""
    root = spec.rootfs_dir
    if root is None or rootfs.ready(root):
        return
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.with_name(root.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not rootfs.ready(root):
            _build_rootfs(spec, root, log)


def _build_rootfs(spec: ClusterSpec, root: Path, log) -> None:
    suite = rootfs.RELEASE_SUITES[spec.slurm]
    log(f"building a Debian {suite} root filesystem for Slurm {spec.slurm} in {root} (once)")
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    argv = rootfs.mmdebstrap_argv(spec.slurm, partial, rootfs.mirror(rootfs.read_sources()))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        raise ProvisionError(f"mmdebstrap could not build the {suite} root filesystem: {last}")
    os.rename(partial, root)
    rootfs.finish(root, spec.slurm)


def busy_ports(spec: ClusterSpec) -> list[int]:
    """Ports of ``spec`` that something else already listens on (127.0.0.1)."""
    busy = []
    for port in spec.ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                busy.append(port)
    return busy


def running(spec: ClusterSpec) -> dict[str, int | None]:
    """``{label: pid or None}`` for every daemon of the cluster."""
    return {d.label: pid_of(d) for d in daemons(spec)}


def _write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    write_atomically(path, text, mode=mode)
    if not is_special(path):
        os.chmod(os.path.realpath(path), mode)   # dlcluster's own files: its mode, always


def desired_files(spec: ClusterSpec) -> dict[Path, tuple[str, int]]:
    """The config files ``up`` writes: path → (text, mode)."""
    files = {
        spec.conf_dir / "slurm.conf": (cluster.render_slurm_conf(spec, socket.gethostname()), 0o644),
        spec.conf_dir / "gres.conf": (cluster.render_gres_conf(spec), 0o644),
        spec.conf_dir / "job_submit.lua": (LUA.read_text(), 0o644),
    }
    if spec.with_dbd:
        files[spec.conf_dir / "slurmdbd.conf"] = (cluster.render_slurmdbd_conf(spec), 0o600)
    cgroup = cluster.render_cgroup_conf(spec)
    if cgroup is not None:
        files[spec.conf_dir / "cgroup.conf"] = (cgroup, 0o644)
    if spec.rootfs_dir is not None and spec.bin_dir is not None:
        for command in rootfs.COMMANDS:
            files[spec.bin_dir / command] = (rootfs.wrapper_text(spec.rootfs_dir, command), 0o755)
        for daemon in rootfs.DAEMONS:
            files[spec.bin_dir / daemon] = (rootfs.daemon_wrapper_text(
                spec.rootfs_dir, spec.conf_dir, SCRIPTS / "chroot.sh", daemon), 0o755)
    return files


def _configs_match(spec: ClusterSpec) -> bool:
    for path, (text, _mode) in desired_files(spec).items():
        try:
            if path.read_text() != text:
                return False
        except OSError:
            return False
    return True


@contextmanager
def _on_cluster(spec: ClusterSpec) -> Iterator[None]:
    """Point the client's Slurm commands at this cluster for the block (:func:`cluster_env`)."""
    values = cluster_env(spec)
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _active_jobs(spec: ClusterSpec) -> list[int]:
    """Ids of the cluster's active jobs, or [] when slurmctld does not answer."""
    with _on_cluster(spec):
        try:
            return [j.job_id for j in SlurmClient(timeout_s=10).jobs() if j.is_active]
        except SlurmError:
            return []


def clear_jobs(spec: ClusterSpec, timeout_s: float = 60.0) -> list[int]:
    """Cancel every active job of the running cluster and wait until none is active.

    For a disposable cluster that must start empty (``dlcluster up --clear``, the test suite):
    slurmctld restores the jobs of its saved state (StateSaveLocation) when it starts, so a run
    that was killed, or a machine stopped mid-run, leaves its jobs, a held job among them, in the
    next run's queue (slurmctld(8), ``-c`` clears that state, but only at a start).

    Returns the ids of the jobs cancelled (``[]``: there were none). Raises
    :class:`ProvisionError` when slurmctld does not answer, or when jobs are still active after
    ``timeout_s`` seconds (it names them).
    """
    with _on_cluster(spec):
        client = SlurmClient(timeout_s=10)
        try:
            ids = [j.job_id for j in client.jobs() if j.is_active]
            client.cancel(ids)
        except SlurmError as exc:
            raise ProvisionError(f"could not cancel the jobs of cluster {spec.name!r}: {exc}") from exc
        deadline = time.monotonic() + timeout_s
        left = ids
        while left:
            if time.monotonic() > deadline:
                shown = ", ".join(map(str, left[:10])) + (" ..." if len(left) > 10 else "")
                raise ProvisionError(
                    f"{len(left)} job(s) of cluster {spec.name!r} still active {timeout_s:g} s after "
                    f"scancel ({shown}); see {spec.state_dir}/log/slurmctld.log")
            time.sleep(0.2)
            try:
                left = [j.job_id for j in client.jobs() if j.is_active]
            except SlurmError:
                pass
    return ids


def up(spec: ClusterSpec, *, install: bool = True, timeout_s: float = 90.0, force: bool = False,
       clear: bool = False, log=print) -> str:
    """Bring the cluster up (idempotent). Returns a one-line summary.

    A healthy cluster with the same configuration is left as it is. A running cluster whose
    configuration differs is restarted, but only when it has no active jobs (or ``force``).
    ``clear`` (implies ``force``): start empty: drained nodes are resumed (:func:`_ready`) and,
    once the nodes are up, every job left in the cluster, running or restored from slurmctld's
    saved state, is cancelled (:func:`clear_jobs`). Raises :class:`cluster.SpecError` for bad
    options and :class:`ProvisionError` for anything that failed (after stopping what this
    call started and restoring the previous config files).
    """
    resumed: list[str] | None = [] if clear else None
    summary = _up(spec, install=install, timeout_s=timeout_s, force=force or clear, resumed=resumed,
                  log=log)
    if not clear:
        return summary
    if resumed:
        summary += f"; resumed drained node(s) {', '.join(resumed)}"
    cleared = clear_jobs(spec)
    if not cleared:
        return summary + "; no jobs left from before"
    shown = ", ".join(map(str, cleared[:10])) + (" ..." if len(cleared) > 10 else "")
    return summary + f"; cancelled {len(cleared)} job(s) left from before ({shown})"


def _up(spec: ClusterSpec, *, install: bool, timeout_s: float, force: bool,
        resumed: list[str] | None, log) -> str:
    spec.validate()
    check_platform()
    state = running(spec)
    left = [d for d in daemons(spec, left=True) if d.label not in state and pid_of(d)]
    if left:   # up without --with-dbd after up --with-dbd: accounting goes, and so its daemon
        log(f"stopping the slurmdbd of cluster {spec.name!r}: it now runs without accounting "
            "(sacct and history need --with-dbd)")
        state.update({d.label: pid_of(d) for d in left})
    if all(state.values()) and _configs_match(spec) and _ready(spec, 5.0, resumed):
        return f"cluster {spec.name!r} already up: {spec.nodes} nodes, SLURM_CONF={spec.slurm_conf}"
    if any(state.values()):
        missing = [label for label, pid in state.items() if not pid]
        why = (f"{', '.join(missing)} not running" if missing else
               "its configuration differs" if not _configs_match(spec) else
               "it does not answer")
        active = [] if force else _active_jobs(spec)
        if active:
            shown = ", ".join(map(str, active[:10])) + (" ..." if len(active) > 10 else "")
            raise ProvisionError(
                f"cluster {spec.name!r} is running {len(active)} active job(s) ({shown}) and needs "
                f"a restart ({why}): restarting it would requeue or strand them. Wait for them, "
                "cancel them, or pass --force"
            )
        log(f"restarting cluster {spec.name!r} ({why})")
        stop_daemons(spec)
    busy = busy_ports(spec)
    if busy:
        raise ProvisionError(
            f"port(s) {', '.join(map(str, busy))} already in use; choose another --port-base "
            f"(cluster {spec.name!r} uses {spec.port_base} and {spec.port_base + 101}..)"
        )
    if install:
        _script("install.sh", *(["--with-dbd"] if spec.with_dbd else []),
                *(["--no-slurm"] if spec.rootfs_dir else []), *(["--netns"] if spec.netns else []))
    ensure_rootfs(spec, log)
    for sub in ("state", "log", "run"):
        (spec.state_dir / sub).mkdir(parents=True, exist_ok=True)
    for node in spec.node_names:
        (spec.state_dir / "spool" / node).mkdir(parents=True, exist_ok=True)
    _ROOT.mkdir(parents=True, exist_ok=True)
    _script("fakegpu.sh", str(spec.dev_dir), str(spec.gpus_per_node))
    if _script("munge.sh") == "started":
        (_ROOT / "munged.started").write_text("dlcluster started munged\n")
    spec.conf_dir.mkdir(parents=True, exist_ok=True)
    if spec.bin_dir is not None:
        spec.bin_dir.mkdir(parents=True, exist_ok=True)
    backups = {p: (p.read_text() if p.exists() else None) for p in desired_files(spec)}
    try:
        _network(spec)
        for path, (text, mode) in desired_files(spec).items():
            _write_atomic(path, text, mode)
        if spec.with_dbd:
            _start_dbd(spec)
        # slurmctld refuses to start when its saved ClusterName file ("s24" without slurmdbd,
        # "s24|995" with the id slurmdbd gave) does not match the accounting it now has; the
        # state directory is this cluster's alone, so the file may go (slurmctld(8) says so)
        (spec.state_dir / "state" / "clustername").unlink(missing_ok=True)
        _start(spec, ["slurmctld", "-f", str(spec.slurm_conf)], "slurmctld")
        for node in spec.node_names:
            _start(spec, ["slurmd", "-f", str(spec.slurm_conf), "-N", node], f"slurmd {node}", node=node)
        if not _ready(spec, timeout_s, resumed):
            raise ProvisionError(
                f"nodes not idle after {timeout_s:g} s; see {spec.state_dir}/log/slurmctld.log"
            )
    except BaseException:
        stop_daemons(spec)
        if spec.netns:
            netns.teardown(spec)
        for path, old in backups.items():
            if old is None:
                path.unlink(missing_ok=True)
            else:
                _write_atomic(path, old, desired_files(spec)[path][1])
        raise
    return f"cluster {spec.name!r} up: {spec.nodes} nodes x {spec.gpus_per_node} GPUs, SLURM_CONF={spec.slurm_conf}"


def _network(spec: ClusterSpec) -> None:
    """``--netns``: the nodes' namespaces, veth pairs and bridge (:func:`netns.setup`); without
    it, those an earlier ``up --netns`` of this cluster left are removed."""
    try:
        if spec.netns:
            netns.setup(spec)
        elif netns.namespaces(spec):
            netns.teardown(spec)
    except netns.NetnsError as exc:
        raise ProvisionError(str(exc)) from exc


def _daemon_argv(spec: ClusterSpec, argv: list[str], node: str | None = None) -> list[str]:
    """The command that starts daemon ``argv`` (``["slurmd", "-N", "node1"]``): the host's
    ``/usr/sbin`` one, or the root filesystem's, chrooted in a private mount namespace by
    ``provision/chroot.sh`` (:mod:`slurm_plugin.localcluster.rootfs`); a slurmd of a ``--netns`` cluster
    (``node``) in its node's network namespace (:func:`netns.exec_prefix`)."""
    exe = [f"/usr/sbin/{argv[0]}", *argv[1:]]
    if spec.rootfs_dir is None:
        return (netns.exec_prefix(spec, node) if node else []) + exe
    return ["unshare", "-m", "bash", str(SCRIPTS / "chroot.sh"), str(spec.rootfs_dir),
            str(spec.conf_dir), *exe]


def _start(spec: ClusterSpec, argv: list[str], label: str, node: str | None = None) -> None:
    proc = subprocess.run(_daemon_argv(spec, argv, node), env=_env(spec), capture_output=True,
                          text=True, timeout=60)
    if proc.returncode != 0:
        raise ProvisionError(f"{label} did not start: {(proc.stderr or proc.stdout).strip()}")
    d = next(d for d in daemons(spec) if d.label == label)
    deadline = time.monotonic() + 15
    while pid_of(d) is None:
        if time.monotonic() > deadline:
            raise ProvisionError(f"{label} exited at start; see {spec.state_dir}/log/")
        time.sleep(0.1)


def _ready(spec: ClusterSpec, timeout_s: float, resumed: list[str] | None = None) -> bool:
    """Wait until slurmctld answers and every node is up (idle, or busy with old jobs).

    ``resumed``: also return the cluster's drained nodes to service (``State=RESUME``) and list
    there the names of those seen drained that are drained no more. slurmctld restores a node's
    DRAIN state, with its reason, from its saved state (slurmctld(8), ``-c``), and a drained
    node never becomes idle by itself (DOWN nodes do: ``ReturnToService=2``). The resume is
    asked again at each read while a node shows DRAIN: slurmctld may refuse it for a node that
    has not registered yet ("Invalid node state specified") or take it and still answer so."""
    client = SlurmClient(timeout_s=10)
    deadline = time.monotonic() + timeout_s
    seen_drained: list[str] = []
    with _on_cluster(spec):
        while True:
            try:
                nodes = [n for n in client.nodes() if n.name in spec.node_names]
                if resumed is not None:
                    drained = [n.name for n in nodes if "DRAIN" in {f.upper() for f in n.state_flags}
                               or n.state.lower() in ("drained", "draining")]
                    seen_drained += [name for name in drained if name not in seen_drained]
                    resumed[:] = [name for name in seen_drained if name not in drained]
                    if drained:
                        try:
                            client.resume_nodes(drained)
                        except SlurmRefused:
                            pass   # not registered yet: asked again at the next read
                ok = {n.name for n in nodes if n.usable and n.state.lower() in ("idle", "mixed", "allocated")}
                if set(spec.node_names) <= ok:
                    return True
            except SlurmError:
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


def _dbd_answers(env: dict[str, str], timeout_s: float = 30.0) -> bool:
    """Whether slurmdbd answers ``sacctmgr show cluster``; a sacctmgr that hangs past
    ``timeout_s`` (a slurmdbd that accepted nothing yet) is no answer, not an exception."""
    try:
        return subprocess.run(["sacctmgr", "-i", "-n", "show", "cluster"], env=env, capture_output=True,
                              timeout=timeout_s).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def _start_dbd(spec: ClusterSpec) -> None:
    Path("/run/mysqld").mkdir(exist_ok=True)
    shutil.chown("/run/mysqld", "mysql", "mysql")
    if subprocess.run(["mariadb", "-e", "select 1"], capture_output=True).returncode != 0:
        subprocess.Popen(
            ["/usr/sbin/mariadbd", "--user=mysql", "--skip-networking", "--socket=/run/mysqld/mysqld.sock",
             "--pid-file=/run/mysqld/mysqld.pid"],
            stdout=open(spec.state_dir / "log" / "mariadb.log", "ab"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        (_ROOT / "mariadb.started").write_text("dlcluster started mariadbd\n")
        deadline = time.monotonic() + 30
        while subprocess.run(["mariadb", "-e", "select 1"], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise ProvisionError(f"MariaDB did not start; see {spec.state_dir}/log/mariadb.log")
            time.sleep(0.2)
    db = f"slurm_acct_db_{spec.name}"
    sql = (f"CREATE DATABASE IF NOT EXISTS {db}; CREATE USER IF NOT EXISTS 'slurm'@'localhost' "
           f"IDENTIFIED BY 'slurmpw'; GRANT ALL ON {db}.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;")
    subprocess.run(["mariadb", "-e", sql], check=True, capture_output=True)
    _start(spec, ["slurmdbd"], "slurmdbd")
    env = _env(spec)

    def mgr(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["sacctmgr", "-i", "-n", *args], env=env, capture_output=True, text=True, timeout=30)

    deadline = time.monotonic() + 30
    while not _dbd_answers(env):
        if time.monotonic() > deadline:
            raise ProvisionError(f"slurmdbd does not answer; see {spec.state_dir}/log/slurmdbd.log")
        time.sleep(0.2)
    if spec.name not in mgr("show", "cluster", "format=cluster").stdout.split():
        mgr("add", "cluster", spec.name)
    if "research" not in mgr("show", "account", "format=account").stdout.split():
        mgr("add", "account", "research", "Description=dlcluster", "Organization=dlcluster")
    if "root" not in mgr("show", "user", "format=user").stdout.split():
        mgr("add", "user", "root", "Account=research", "DefaultAccount=research")


def stop_daemons(spec: ClusterSpec, timeout_s: float = 20.0) -> list[str]:
    """SIGTERM every live daemon of the cluster, wait, then SIGKILL; remove their PID files.

    Returns the labels of the daemons that were stopped.
    """
    live = [(d, pid) for d in daemons(spec, left=True) if (pid := pid_of(d))]
    for _d, pid in live:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    for d, pid in live:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, 9)
    for d in daemons(spec, left=True):
        d.pidfile.unlink(missing_ok=True)
    _kill_stepds(spec)
    return [d.label for d, _ in live]


def _kill_stepds(spec: ClusterSpec) -> None:
    """slurmstepd processes outlive slurmd: kill those whose spool dir is this cluster's."""
    marker = str(spec.state_dir / "spool")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() != "slurmstepd":
                continue
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd.startswith(marker):
            try:
                os.kill(int(proc.name), 9)
            except ProcessLookupError:
                pass


def other_clusters_up(spec: ClusterSpec) -> list[str]:
    """Names of other dlcluster clusters on this machine with a daemon alive: slurmctld, a
    slurmd or slurmdbd (a cluster whose slurmctld is stopped for an outage, ``dlcluster ctl
    stop``, still needs munged)."""
    names = []
    if _ROOT.exists():
        for d in _ROOT.iterdir():
            run = d / "run"
            if d.name == spec.name or not run.is_dir():
                continue
            for pidfile in sorted(run.glob("*.pid")):   # slurmctld, slurmdbd, slurmd-NODE
                exe = pidfile.stem.split("-", 1)[0]
                if exe in ("slurmctld", "slurmd", "slurmdbd") and pid_of(Daemon(exe, pidfile, exe)):
                    names.append(d.name)
                    break
    return names


def _recorded_clusters(names: list[str]) -> list[ClusterSpec]:
    """The specs of the named running clusters, as their slurm.conf files record them."""
    found = []
    for name in names:
        spec = ClusterSpec(name=name)
        try:
            found.append(cluster.recorded(spec, spec.slurm_conf.read_text()))
        except OSError:
            continue
    return found


def down(spec: ClusterSpec, *, purge: bool = False, log=print) -> str:
    """Cancel the cluster's jobs, stop its daemons (by PID), and munged/MariaDB if ``up`` started
    them and no other cluster still needs them. ``purge`` also deletes state, logs and configs."""
    if running(spec).get("slurmctld"):
        with _on_cluster(spec):
            try:
                c = SlurmClient(timeout_s=10)
                c.cancel([j.job_id for j in c.jobs() if j.is_active])
            except SlurmError as exc:
                log(f"could not cancel jobs: {exc}")
    stopped = stop_daemons(spec)
    try:
        links = netns.teardown(spec) if spec.netns or netns.namespaces(spec) else []
    except (netns.NetnsError, OSError, ValueError) as exc:
        log(f"could not remove the network namespaces: {exc}")
        links = []
    if links:
        stopped.append(f"network namespaces and links {' '.join(links)}")
    others = other_clusters_up(spec)
    if not others:
        for flag, pidfile, exe in (
            (_ROOT / "mariadb.started", Path("/run/mysqld/mysqld.pid"), "mariadbd"),
            (_ROOT / "munged.started", Path("/run/munge/munged.pid"), "munged"),
        ):
            if flag.exists():
                d = Daemon(exe, pidfile, exe)
                if (pid := pid_of(d)) is not None:
                    os.kill(pid, 15)
                    stopped.append(exe)
                flag.unlink(missing_ok=True)
    if purge:
        if spec.rootfs_dir is not None and not any(
                other.rootfs_dir == spec.rootfs_dir for other in _recorded_clusters(others)):
            shutil.rmtree(spec.rootfs_dir, ignore_errors=True)
        if spec.with_dbd or (spec.conf_dir / "slurmdbd.conf").exists():
            subprocess.run(["mariadb", "-e", f"DROP DATABASE IF EXISTS slurm_acct_db_{spec.name}"],
                           capture_output=True)
        shutil.rmtree(spec.state_dir, ignore_errors=True)
        for path in desired_files(spec):
            path.unlink(missing_ok=True)
        (spec.conf_dir / "slurmdbd.conf").unlink(missing_ok=True)
    return f"cluster {spec.name!r} down" + (f" (stopped: {', '.join(stopped)})" if stopped else " (nothing was running)")


def ctl(spec: ClusterSpec, action: str) -> str:
    """Stop or start slurmctld alone (for outage tests). ``action`` is ``stop`` or ``start``."""
    d = next(d for d in daemons(spec) if d.label == "slurmctld")
    if action == "stop":
        pid = pid_of(d)
        if pid is None:
            return "slurmctld was not running"
        os.kill(pid, 15)
        deadline = time.monotonic() + 20
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, 9)
        d.pidfile.unlink(missing_ok=True)
        return f"slurmctld of {spec.name!r} stopped"
    if action == "start":
        if pid_of(d):
            return "slurmctld already running"
        _start(spec, ["slurmctld", "-f", str(spec.slurm_conf)], "slurmctld")
        if not _ready(spec, 60):
            raise ProvisionError(f"slurmctld started but nodes not ready; see {spec.state_dir}/log/slurmctld.log")
        return f"slurmctld of {spec.name!r} started"
    raise ProvisionError(f"ctl {action!r}: use stop or start")
