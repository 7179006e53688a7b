#!/bin/bash
# Run COMMAND chrooted into ROOT, a Debian root filesystem holding another Slurm release
# (slurm_plugin/localcluster/rootfs.py says how such a cluster runs). Meant to be started as
# `unshare -m chroot.sh ROOT CONF_DIR COMMAND...`: every mount below is made in that private
# mount namespace and ends with the last process in it (a daemon and the jobs it starts);
# nothing is mounted in the host's namespace. Bound to the same paths inside ROOT: /proc, /sys,
# /dev; the host's data directories (every top-level directory that is not part of the
# operating system: /home, /root, /tmp, /srv, a checkout's top directory, ...); /var/tmp;
# /var/lib/dlcluster (state, logs, the commands' wrappers); CONF_DIR (slurm.conf); munge's and
# MariaDB's sockets (/run/munge, /run/mysqld, also as /run/mariadbd). The host's /etc is bound
# read-only at /run/dlcluster-host-etc and ROOT's /etc/passwd, group, hosts and hostname are
# links into it, so users and node names resolve as on the host, also users added after the
# daemons started (useradd replaces /etc/passwd by another file: a bind of the file itself would
# keep showing the old one).
set -euo pipefail
root=$1; conf_dir=$2; shift 2
[ -f "$root/.dlcluster-rootfs" ] || { echo "chroot.sh: $root is not a finished root filesystem" >&2; exit 2; }
# no mount below may reach the namespace this one was copied from, whatever propagation unshare(1)
# was asked for: make every mount private (a no-op where they already are)
mount --make-rprivate /
bind_dir() {  # bind_dir PATH: the host's directory PATH at the same place inside ROOT
  [ -d "$1" ] && [ ! -L "$1" ] || return 0
  mkdir -p "$root$1"
  mount --rbind "$1" "$root$1"
}
bind_file() {  # bind_file PATH: the host's file PATH over ROOT's own
  [ -f "$1" ] || return 0
  [ -e "$root$1" ] || : > "$root$1"
  mount --bind "$1" "$root$1"
}
for dir in /proc /sys /dev; do bind_dir "$dir"; done
for dir in /*; do
  case "$dir" in
    /bin|/boot|/dev|/etc|/lib|/lib32|/lib64|/libx32|/lost+found|/proc|/run|/sbin|/sys|/usr|/var) ;;
    *) bind_dir "$dir" ;;
  esac
done
for dir in /var/tmp /var/lib/dlcluster "$conf_dir" /run/munge /run/mysqld; do bind_dir "$dir"; done
# MariaDB's client library of newer suites looks for the socket in /run/mariadbd (sid)
if [ -d /run/mysqld ]; then mkdir -p "$root/run/mariadbd"; mount --bind /run/mysqld "$root/run/mariadbd"; fi
# the host's Python interpreters that the root filesystem lacks (a checkout's .venv links to
# /usr/bin/python3.N, scripts/venv.sh), with their standard library: jobs run the user's venv
# (a host interpreter runs on a root filesystem whose C library is as new as the host's or newer)
for exe in /usr/bin/python3.[0-9]*; do
  case "$exe" in *-config|*m) continue ;; esac
  [ -f "$exe" ] && [ ! -s "$root$exe" ] || continue   # empty: the mount point left by an earlier bind
  bind_file "$exe"
  bind_dir "/usr/lib/$(basename "$exe")"
done
mkdir -p "$root/run/dlcluster-host-etc"
mount --bind /etc "$root/run/dlcluster-host-etc"
mount -o remount,ro,bind "$root/run/dlcluster-host-etc"
for name in passwd group hosts hostname; do
  [ "$(readlink "$root/etc/$name" || true)" = "/run/dlcluster-host-etc/$name" ] ||
    ln -sfn "/run/dlcluster-host-etc/$name" "$root/etc/$name"
done
exec chroot "$root" "$@"
