"""``dlcluster``: a real local Slurm cluster (22.05, 24.11 or 26.05) with fake GPUs, for
development, tests and demos.

Commands::

    dlcluster up [--slurm 22.05|24.11|26.05] [--nodes N] [--gpus-per-node G] [--gpu-type T] [--shards N]
                 [--with-dbd | --without-dbd] [--cred-expire S] [--name NAME] [--port-base PORT]
                 [--netns | --no-netns] [--no-install] [--force] [--clear]
    dlcluster env [--name NAME]
    dlcluster down [--name NAME] [--purge]
    dlcluster status [--name NAME] [--json]
    dlcluster ctl stop|start [--name NAME]

``--slurm``: the release (default: the host's own, 22.05 on Debian 12, 24.11 on Debian 13);
another one runs from a Debian root filesystem built once (slurm_plugin/localcluster/rootfs.py).
``env`` prints the shell lines that point Slurm's commands, and so every tool, at the cluster:
``eval "$(dlcluster env --name NAME)"``.

``--netns``: each slurmd runs in its own network namespace ``dlc-NAME-nodeI`` with its own
address ``10.H.L.(100+I)`` on a bridge ``dlPORTbr`` (``10.H.L.1``, slurmctld's side), where
``PORT = 256 H + L`` is the port base (8400: ``10.32.208.0/24``); so ``NodeAddr`` differs per node.
``down`` removes those namespaces and the links with the alias ``dlcluster:NAME`` (slurm_plugin/localcluster/netns.py).
Only the host's own release runs so (``--slurm`` another one with ``--netns`` is refused).

``up`` on a running cluster keeps its shape (Slurm release, nodes, GPUs per node, GPU type, shards,
slurmdbd, cred_expire, --netns, as its slurm.conf records them) for every option not given, and says what it kept;
an option that changes the shape is named with the old and the new value. A cluster that is not
running starts with the defaults (4 nodes x 8 a100 GPUs, no slurmdbd, cred_expire 10 s) and the
options given.

Exit status (:class:`~slurm_plugin.common.exits.Exit`, README.md's table): 0 done; 2 bad
option; 5 no such cluster here (``env``, ``down``, ``status``, ``ctl``: one line naming the
clusters that exist); 3/4 Slurm did not answer / refused a request
dlcluster needed; 1 anything else failed (the message says what; nothing is left half-started),
and ``status`` of a cluster whose daemons are not all running. Needs root and Debian 12 or 13.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from typing import Any

from slurm_plugin.localcluster import netns, provision
from slurm_plugin.common.cli import ArgumentParser, StdoutError, quiet_on_closed_stdout
from slurm_plugin.slurm.client import SlurmClient, SlurmError, slurm_exit
from slurm_plugin.common.exits import CliError, Exit, epilog
from slurm_plugin.localcluster.cluster import (DEFAULT_NAME, NAME_RE, ClusterSpec, SpecError, recorded,
                                               recorded_shape)
from slurm_plugin.localcluster.rootfs import RELEASE_SUITES


SHAPE = {"slurm": "--slurm", "nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "gpu_type": "--gpu-type",
         "shards_per_gpu": "--shards", "with_dbd": "--with-dbd", "cred_expire_s": "--cred-expire",
         "netns": "--netns"}
"""The ClusterSpec fields ``up`` sets from options, and the option of each."""


def _spec(args: argparse.Namespace) -> ClusterSpec:
    host = provision.host_release()
    kw: dict[str, Any] = {"name": args.name, "host_slurm": host, "slurm": host}
    for field in SHAPE:
        if getattr(args, field, None) is not None:
            kw[field] = getattr(args, field)
    kw["port_base"] = args.port_base if args.port_base is not None else (
        6817 if args.name == DEFAULT_NAME else 0)
    if kw["port_base"] == 0 and args.command != "up":
        kw["port_base"] = 6817  # replaced by the recorded SlurmctldPort below
    if kw["port_base"] == 0:
        raise SpecError(f"--port-base is required for a cluster named {args.name!r} (the default cluster uses 6817)")
    spec = ClusterSpec(**kw)
    if args.command != "up":
        spec = _recorded(spec)
    elif any(provision.running(spec).values()):
        spec = _sticky(spec, {f for f in SHAPE if getattr(args, f, None) is not None})
    return spec


def _shown(field: str, value: Any) -> str:
    """A shape field as the option that sets it (``--with-dbd`` / ``--without-dbd``)."""
    if field == "with_dbd":
        return "--with-dbd" if value else "--without-dbd"
    if field == "netns":
        return "--netns" if value else "--no-netns"
    return f"{SHAPE[field]} {value if value != '' else repr('')}"


def _sticky(spec: ClusterSpec, given: set[str]) -> ClusterSpec:
    """``spec`` of ``up`` on a running cluster: each :data:`SHAPE` field not in ``given`` from
    its slurm.conf; prints what was kept and what the options change."""
    try:
        shape = recorded_shape(spec.slurm_conf.read_text())
    except OSError:
        return spec
    kept = {f: shape[f] for f in SHAPE if f in shape and f not in given}
    changed = [f"{_shown(f, shape[f])} -> {_shown(f, getattr(spec, f)).split()[-1]}"
               for f in SHAPE if f in given and f in shape and shape[f] != getattr(spec, f)]
    if kept:
        print(f"dlcluster: cluster {spec.name!r} is running; kept from its slurm.conf: "
              + " ".join(_shown(f, v) for f, v in kept.items()) + " (an option changes it)")
    if changed:
        print(f"dlcluster: cluster {spec.name!r} is running; changing " + ", ".join(changed))
    return dataclasses.replace(spec, **kept)


def _recorded(spec: ClusterSpec) -> ClusterSpec:
    """For down/status/env/ctl: the cluster as its slurm.conf records it, if it exists."""
    try:
        text = spec.slurm_conf.read_text()
    except OSError:
        return spec
    return recorded(spec, text)


def known_clusters() -> list[str]:
    """Names of the clusters ``up`` made on this machine: the directories of the state root
    (``/var/lib/dlcluster``) that are cluster names, sorted."""
    root = ClusterSpec().state_dir.parent
    try:
        return sorted(d.name for d in root.iterdir() if NAME_RE.match(d.name) and d.is_dir())
    except OSError:
        return []


def existing(spec: ClusterSpec, leftovers: bool = False) -> ClusterSpec:
    """``spec`` if ``up`` made it here (its slurm.conf or its state directory exists, or with
    ``leftovers``, for ``down``, a network namespace of it that an ``up`` stopped midway left);
    else a :class:`CliError` (:attr:`Exit.NOT_FOUND`) naming the clusters that exist, for env,
    down, status and ctl, which would otherwise act on, or report about, a cluster that is not
    there."""
    if spec.slurm_conf.exists() or spec.state_dir.is_dir() or (
            leftovers and netns.namespaces(spec)):
        return spec
    names = known_clusters()
    there = (f"the clusters here: {', '.join(names)}; use --name with one of them, or start this "
             f"one with dlcluster up --name {spec.name}") if names else (
        f"there is none here; start it with dlcluster up --name {spec.name}")
    raise CliError(f"no dlcluster named {spec.name!r} exists ({spec.slurm_conf} and "
                   f"{spec.state_dir} are missing); {there}", Exit.NOT_FOUND)


def env_lines(spec: ClusterSpec) -> str:
    """``export NAME=VALUE`` lines (POSIX shell, values quoted) of :func:`provision.cluster_env`."""
    return "".join(f"export {key}={shlex.quote(value)}\n"
                   for key, value in provision.cluster_env(spec).items())


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="dlcluster", description=__doc__.split("\n\n")[0],
                       epilog=epilog([Exit.OK, Exit.FAILED, Exit.BAD_INPUT, Exit.SLURM_UNREACHABLE,
                                      Exit.SLURM_REFUSED, Exit.NOT_FOUND]))
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--name", default=DEFAULT_NAME,
                        help=f"cluster name (default {DEFAULT_NAME!r}: config in /etc/slurm; others in /etc/slurm-NAME)")
        sp.add_argument("--port-base", type=int, default=None,
                        help="SlurmctldPort; node i listens on PORT+100+i (default 6817; required with --name)")

    up = sub.add_parser("up", help="install Slurm if missing, write configs, start the daemons, wait until nodes are idle")
    common(up)
    kept = "; a running cluster keeps its own"
    up.add_argument("--slurm", choices=list(RELEASE_SUITES),
                    help="Slurm release (default: the host's own, 22.05 on Debian 12, 24.11 on Debian 13; "
                         f"another one runs from a Debian root filesystem built once{kept})")
    up.add_argument("--nodes", type=int, help=f"nodes node1..nodeN (default 4{kept})")
    up.add_argument("--gpus-per-node", type=int, help=f"fake GPUs per node (default 8{kept})")
    up.add_argument("--gpu-type", help=f"GRES type (default a100, '' for untyped{kept})")
    up.add_argument("--shards", dest="shards_per_gpu", type=int, metavar="N",
                    help=f"GPU shards per GPU (gres/shard) for fractional-GPU jobs (default 0: none{kept})")
    dbd = up.add_mutually_exclusive_group()
    dbd.add_argument("--with-dbd", action="store_true", default=None,
                     help=f"also MariaDB + slurmdbd (sacct, QOS) (default without{kept})")
    dbd.add_argument("--without-dbd", dest="with_dbd", action="store_false", default=None,
                     help="no slurmdbd: the cluster keeps no accounting")
    net = up.add_mutually_exclusive_group()
    net.add_argument("--netns", action="store_true", default=None,
                     help="each slurmd in its own network namespace with its own address on a bridge "
                          f"(10.H.L.0/24 from the port base: 256*H+L; host's release only) (default off{kept})")
    net.add_argument("--no-netns", dest="netns", action="store_false", default=None,
                     help="every node on 127.0.0.1")
    up.add_argument("--cred-expire", dest="cred_expire_s", type=int,
                    help="AuthInfo=cred_expire seconds; requeued jobs wait this + 1 s "
                    f"(default 10, Slurm's 120{kept})")
    up.add_argument("--no-install", action="store_true", help="do not run apt-get")
    up.add_argument("--force", action="store_true",
                    help="restart a running cluster with a changed configuration even if jobs are active")
    up.add_argument("--clear", action="store_true",
                    help="start empty: cancel every job left in the cluster, running or restored from "
                         "slurmctld's saved state by a run that was killed, and resume drained nodes "
                         "(implies --force; for tests)")
    env = sub.add_parser("env", help="print the shell lines (SLURM_CONF, PATH) that point Slurm's "
                                      "commands at the cluster: eval \"$(dlcluster env)\"")
    common(env)
    down = sub.add_parser("down", help="cancel jobs and stop the daemons this cluster started (by PID)")
    common(down)
    down.add_argument("--purge", action="store_true", help="also delete state, logs and configs")
    st = sub.add_parser("status", help="daemons and nodes")
    common(st)
    st.add_argument("--json", action="store_true")
    ctl = sub.add_parser("ctl", help="stop or start slurmctld alone (outage tests)")
    common(ctl)
    ctl.add_argument("action", choices=["stop", "start"])
    return p


def _status(spec: ClusterSpec, as_json: bool) -> int:
    procs = provision.running(spec)
    nodes = []
    if procs.get("slurmctld"):
        import os
        os.environ.update(provision.cluster_env(spec))
        try:
            nodes = [{"name": n.name, "state": n.state, "gpus": n.gpus_total, "gpus_used": n.gpus_used}
                     for n in SlurmClient(timeout_s=10).nodes()]
        except SlurmError as exc:
            print(f"slurmctld does not answer: {exc}", file=sys.stderr)
    if as_json:
        print(json.dumps({"name": spec.name, "slurm": spec.slurm, "slurm_conf": str(spec.slurm_conf),
                          "daemons": procs, "nodes": nodes}))
    else:
        print(f"cluster {spec.name!r}  Slurm {spec.slurm}  SLURM_CONF={spec.slurm_conf}")
        for label, pid in procs.items():
            print(f"  {label:<16} {'pid ' + str(pid) if pid else 'not running'}")
        for n in nodes:
            print(f"  {n['name']:<8} {n['state']:<10} gpus {n['gpus_used']}/{n['gpus']} used")
    up = all(procs.values())
    return Exit.OK if up else Exit.FAILED


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        spec = _spec(args)
        if args.command != "up":
            existing(spec, leftovers=args.command == "down")
        if args.command == "up":
            print(provision.up(spec, install=not args.no_install, force=args.force, clear=args.clear))
        elif args.command == "env":
            if not spec.slurm_conf.exists():
                raise CliError(f"no cluster {spec.name!r} here ({spec.slurm_conf} is missing): "
                               f"start it with dlcluster up --name {spec.name}", Exit.NOT_FOUND)
            sys.stdout.write(env_lines(spec))
        elif args.command == "down":
            print(provision.down(spec, purge=args.purge))
        elif args.command == "status":
            return _status(spec, args.json)
        elif args.command == "ctl":
            print(provision.ctl(spec, args.action))
    except CliError as exc:
        print(f"dlcluster: {exc}", file=sys.stderr)
        return exc.exit_code
    except SpecError as exc:
        print(f"dlcluster: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    except (BrokenPipeError, StdoutError):  # stdout's own failures: slurm_plugin.common.cli
        raise
    except SlurmError as exc:
        print(f"dlcluster: {exc}", file=sys.stderr)
        return slurm_exit(exc)
    except (provision.ProvisionError, OSError) as exc:
        print(f"dlcluster: {exc}", file=sys.stderr)
        return Exit.FAILED
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
