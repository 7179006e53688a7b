#!/bin/bash
# Install Debian packages quietly: one line saying what, apt's own output (debconf notes
# included) only in a log that is printed when apt fails. Usage: scripts/apt-install.sh WHO PKG...
# (WHO prefixes the line, e.g. "setup.sh"). Packages already installed are left alone.
set -euo pipefail
who=$1; shift
need=""
for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -z "$need" ]; then exit 0; fi
log=$(mktemp /tmp/apt-install.XXXXXX.log)
echo "$who: apt-get install$need (log: $log)"
export DEBIAN_FRONTEND=noninteractive DEBCONF_NONINTERACTIVE_SEEN=true
if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $need; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "$who: apt-get could not install:$need (log above, also in $log)" >&2
  exit 1
fi
