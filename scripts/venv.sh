# The project's virtualenv and its interpreter; sourced by scripts/setup.sh (and its tests).
# The venv is made with Debian's /usr/bin/python3, never the first python3 on PATH: a root-only
# interpreter (pyenv's under /root, mode 700) leaves every other user with "bad interpreter:
# Permission denied" for the tools and for their jobs' .venv/bin/python.

SYSTEM_PYTHON=/usr/bin/python3

# others_cannot_run FILE: prints the first of FILE and the directories above it that other users
# may not pass (no o+x), or the missing FILE; prints nothing when others can run FILE.
others_cannot_run() {
  local p=$1
  if [ ! -e "$p" ]; then echo "$p (missing)"; return; fi
  while :; do
    if [ -z "$(find "$p" -maxdepth 0 -perm -o+x)" ]; then
      echo "$p (mode $(stat -c %a "$p"))"; return
    fi
    [ "$p" = / ] && return
    p=$(dirname "$p")
  done
}

# venv_problem VENV: one line saying why other users cannot run VENV's interpreter (symlinks
# resolved), or nothing when they can or VENV has no interpreter yet.
venv_problem() {
  local venv=$1 target blocked
  [ -e "$venv/bin/python" ] || [ -L "$venv/bin/python" ] || return 0
  target=$(readlink -m "$venv/bin/python")
  blocked=$(others_cannot_run "$target")
  if [ -n "$blocked" ]; then
    echo "its interpreter $target is not executable by other users: $blocked"
  fi
}

# ensure_venv WHO VENV [venv options...]: make VENV with $SYSTEM_PYTHON when it is missing, or
# when other users cannot run its interpreter (then it is removed and made again, and the line
# starting with WHO says why). A usable VENV is left alone.
ensure_venv() {
  local who=$1 venv=$2 problem
  shift 2
  problem=$(venv_problem "$venv")
  if [ -n "$problem" ]; then
    echo "$who: $venv: $problem; making it again with $SYSTEM_PYTHON"
    rm -rf -- "$venv"
  fi
  # the versioned interpreter (/usr/bin/python3.11), not the python3 link: a cluster whose Slurm
  # runs from a root filesystem (dlcluster --slurm) binds the host's python3.N into it for the
  # jobs, while its own python3 is another version (slurm_plugin/localcluster/provision/chroot.sh)
  if [ ! -x "$venv/bin/python" ]; then "$(readlink -f "$SYSTEM_PYTHON")" -m venv "$@" "$venv"; fi
}
