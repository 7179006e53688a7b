#!/bin/bash
# Make sure munged runs with a key (idempotent). Prints "started" when this call started it,
# "running" when it was already up. Used by `dlcluster up` and vagrant/.
# Usage: munge.sh [KEYFILE_TO_INSTALL]
set -euo pipefail
if [ -S /run/munge/munge.socket.2 ] && munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  echo running; exit 0
fi
if [ -n "${1:-}" ]; then install -o munge -g munge -m 400 "$1" /etc/munge/munge.key; fi
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 755 /run/munge
rm -f /run/munge/munged.pid
runuser -u munge -- /usr/sbin/munged
for _ in $(seq 100); do
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then echo started; exit 0; fi
  sleep 0.1
done
echo "munge.sh: munged did not come up (see /var/log/munge/munged.log)" >&2
exit 1
