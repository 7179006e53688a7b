"""Slurm releases for the local cluster: the host's own, or one from a Debian root filesystem.

``dlcluster up --slurm RELEASE`` runs the release the host ships from the host's packages, and
any other one of :data:`RELEASE_SUITES` from a Debian root filesystem (the suite that ships that
release) that :func:`ensure` builds once with mmdebstrap(1) and keeps under :data:`CACHE`.

How such a cluster runs (verified on Debian 12 with trixie's 24.11.5 and sid's 26.05.5):

* **Daemons** (slurmctld, slurmd, slurmdbd) run chrooted into the root filesystem, each started
  by ``provision/chroot.sh`` in a private mount namespace (unshare(1) ``-m``) in which the host's
  data directories (``/home``, ``/root``, ``/tmp``, the checkout, the cluster's config and state
  directories), ``/proc``, ``/sys``, ``/dev``, munge's and MariaDB's sockets and the account
  files (``/etc/passwd``, ``/etc/group``) are bound to the same paths. Batch scripts and steps
  run there too: the commands a script calls (``scontrol``, ``srun``) are the release's own, and
  the user's paths are where the user left them. Nothing is mounted in the host's namespace.
* **Commands** (``squeue``, ``sbatch``, ...) run on the host, as any user, through small wrapper
  scripts (:func:`wrapper_text`) that start the release's binary with the release's own dynamic
  loader and libraries (ld.so(8) ``--library-path``), so no chroot (and no root) is needed.
  The wrappers live in the cluster's ``bin`` directory; ``dlcluster env`` puts it first on PATH.
* **Plugins**: the commands would load plugins from their built-in PluginDir, which on the host
  holds the host's release (Slurm refuses them: "Incompatible Slurm plugin"). slurm.conf names
  ``PluginDir`` under the root filesystem's path, and the root filesystem holds a symbolic link
  from that same path to ``/``, so the one path is right for the commands (host view) and for
  the daemons (chroot view). The wrappers' paths resolve the same way inside, so a job that
  inherits the wrappers on PATH still runs the right commands.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

#: Slurm release → the Debian suite whose ``slurm-wlm`` is that release (Debian's archive:
#: bookworm 22.05.8, trixie 24.11.5, sid 26.05.5).
RELEASE_SUITES: dict[str, str] = {"22.05": "bookworm", "24.11": "trixie", "26.05": "sid"}
#: Debian release (``VERSION_ID`` of os-release(5)) → the Slurm release its archive ships.
HOST_RELEASES: dict[str, str] = {"12": "22.05", "13": "24.11"}
#: Where the root filesystems are kept, one directory per suite.
CACHE = Path("/var/cache/dlcluster/rootfs")
#: Packages of a root filesystem: Slurm's daemons and commands, slurmdbd, munge's client
#: library (the daemons use the host's munged through its socket), bash and python3 for jobs.
PACKAGES = ("slurm-wlm", "slurm-client", "slurmdbd", "munge", "bash", "python3", "procps")
#: The commands a wrapper is written for (the release's /usr/bin).
COMMANDS = ("sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol",
            "sdiag", "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger")
#: The dynamic loader's file in a (merged-/usr) root filesystem of every suite.
LOADER = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
_LIBDIRS = ("usr/lib/x86_64-linux-gnu/slurm-wlm", "usr/lib/x86_64-linux-gnu",
            "lib/x86_64-linux-gnu")
#: The file that marks a finished root filesystem (written last by :func:`ensure`).
MARKER = ".dlcluster-rootfs"


class RootfsError(RuntimeError):
    """A root filesystem could not be built or used; the message says why and what to do."""


def host_release(os_release: str) -> str | None:
    """The Slurm release the host's Debian ships, from the text of ``/etc/os-release``
    (``ID=debian``, ``VERSION_ID="12"`` → ``"22.05"``); ``None`` on another system."""
    info = {k: _os_release_value(v) for k, _, v in
            (line.partition("=") for line in os_release.splitlines()) if k}
    if info.get("ID") != "debian":
        return None
    return HOST_RELEASES.get(info.get("VERSION_ID", ""))


def _os_release_value(text: str) -> str:
    """A value of os-release(5): shell syntax, bare or in double or single quotes."""
    try:
        words = shlex.split(text)
    except ValueError:
        return text.strip().strip("\"'")
    return words[0] if len(words) == 1 else text.strip()


def rootfs_dir(release: str) -> Path:
    """The root filesystem directory of ``release`` (``/var/cache/dlcluster/rootfs/trixie``)."""
    return CACHE / RELEASE_SUITES[release]


def plugin_dir(root: Path) -> str:
    """slurm.conf's PluginDir for a cluster run from ``root`` (the same path in both views)."""
    return str(root / _LIBDIRS[0])


def wrapper_text(root: Path, command: str) -> str:
    """A ``/bin/sh`` script that runs ``command`` of the release in ``root`` on the host: the
    release's loader with its libraries first (ld.so(8) ``--library-path``, ``--argv0`` so that
    messages name the command). The loader is named by its file in ``usr/lib``: bookworm's
    ``lib64/ld-linux-x86-64.so.2`` is an absolute link (to ``/lib/...``) that the host resolves
    to its own loader, and a newer host's loader with bookworm's C library aborts ("stack
    smashing detected")."""
    loader = shlex.quote(str(root / LOADER))
    libs = shlex.quote(":".join(str(root / d) for d in _LIBDIRS))
    exe = shlex.quote(str(root / "usr/bin" / command))
    return ("#!/bin/sh\n"
            f"# {command} of the Slurm release in {str(root)!r} (written by dlcluster up)\n"
            f"exec {loader} --library-path {libs} --argv0 {shlex.quote(command)} {exe} \"$@\"\n")


#: The daemons a root-only wrapper is written for (started in the root filesystem, as ``up``
#: starts them: a throw-away slurmctld of a test, ``slurmd -C``).
DAEMONS = ("slurmctld", "slurmd", "slurmdbd")


def daemon_wrapper_text(root: Path, conf_dir: Path, chroot_script: Path, daemon: str) -> str:
    """A ``/bin/sh`` script that runs ``daemon`` of the release in ``root`` as ``dlcluster up``
    does: in a private mount namespace, chrooted by ``chroot_script`` with ``conf_dir`` bound
    (root only: unshare(1) and chroot(2) need it)."""
    args = " ".join(shlex.quote(str(a)) for a in (chroot_script, root, conf_dir))
    return ("#!/bin/sh\n"
            f"# {daemon} of the Slurm release in {str(root)!r}, chrooted (written by dlcluster up)\n"
            f"exec unshare -m bash {args} {shlex.quote('/usr/sbin/' + daemon)} \"$@\"\n")


def mirror(sources: dict[str, str]) -> str:
    """The Debian archive URL the host's apt uses, from its source files ``{path: text}``
    (deb822 ``URIs:`` lines of ``*.sources`` or one-line ``deb URL SUITE ...`` entries), the
    first one that is not a security archive; Debian's default when none is found."""
    for path in sorted(sources):
        for line in sources[path].splitlines():
            words = line.split()
            url = ""
            if path.endswith(".sources") and words[:1] == ["URIs:"] and len(words) > 1:
                url = words[1]
            elif words[:1] == ["deb"]:
                url = next((w for w in words[1:] if "://" in w), "")
            if url and "security" not in url:
                return url
    return "http://deb.debian.org/debian"


def read_sources() -> dict[str, str]:
    """The host's apt source files (``/etc/apt/sources.list`` and ``sources.list.d/*``)."""
    found: dict[str, str] = {}
    paths = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in paths:
        if path.suffix in (".list", ".sources") and path.is_file():
            try:
                found[str(path)] = path.read_text(errors="replace")
            except OSError:
                continue
    return found


def ready(root: Path) -> bool:
    """Whether ``root`` is a finished root filesystem (its marker was written last)."""
    return (root / MARKER).is_file()


def mmdebstrap_argv(release: str, target: Path, url: str) -> list[str]:
    """The mmdebstrap(1) command that builds ``release``'s root filesystem into ``target``
    (sid's Release file may be past its Valid-Until date in a snapshot archive)."""
    suite = RELEASE_SUITES[release]
    argv = ["mmdebstrap", "--variant=apt", f"--include={','.join(PACKAGES)}"]
    if suite == "sid":
        argv.append("--aptopt=Acquire::Check-Valid-Until \"false\"")
    return [*argv, suite, str(target), url]


def finish(root: Path, release: str) -> None:
    """Make a freshly built root filesystem usable: the link from its own path to ``/`` (see the
    module docstring) and the marker file, written last."""
    link = Path(str(root) + str(root))
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink("/", link)
    (root / MARKER).write_text(f"slurm {release}, suite {RELEASE_SUITES[release]}\n")
