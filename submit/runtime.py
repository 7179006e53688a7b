"""The fixed bash text of every dlsubmit script: batch-side runtime and per-task prologue.

``submit/render.py`` writes the job's own values (names, commands, sizes; every user string
single-quoted) as bash variables and appends :data:`RUNTIME`, which is the same for every job and
holds no user text. What it does, in order (sources: sbatch(1), srun(1), docs/dlsubmit.md
"The preemption contract"):

1. Prints the attempt marker ``[dlsubmit] attempt N start ...`` (N = ``SLURM_RESTART_COUNT``).
2. Chooses the job's port block (``dl_pick_port``: from the site's port floor up to the node's
   ephemeral range, the block the job id picks or the next one whose ports no socket of the node
   holds, /proc/net/tcp, tcp6, udp, udp6; docs/dlsubmit.md "Ports"). Exports
   ``DL_RESTART_COUNT``, ``DL_CHECKPOINT_DIR`` (``<root>/<job id>``, the same across requeues),
   ``MASTER_ADDR`` (``NodeAddr`` of the first node of role 0, from ``scontrol show node``),
   ``MASTER_PORT`` (the block's first port), ``WORLD_SIZE`` and the OpenPAI variables
   (``PAI_TASK_ROLE_<role>_HOST_LIST``, ``PAI_HOST_IP_<role>_<i>``,
   ``PAI_PORT_LIST_<role>_<i>_<label>``, ...). Ports are numbered from ``MASTER_PORT + 1``:
   each task of each role gets a block of ``1 + declared ports``; the first is the task's own
   port (``PAI_CONTAINER_HOST_PORT``, the port in ``HOST_LIST``), the declared labels follow.
   Every variable of OpenPAI's runtime list is exported (docs/dlsubmit.md). Then the
   rendezvous check list: ``SLURM_JOB_ID``, one address per node of each role (``scontrol
   show hostnames`` must succeed and return hosts), ``MASTER_ADDR``/``MASTER_PORT``/
   ``WORLD_SIZE``, every ``PAI_HOST_IP_*`` and ``HOST_LIST`` non-empty; otherwise
   ``[dlsubmit] cannot start: ...`` and exit 1 before any payload. Secrets named by the job
   are read from the ``--secrets`` file (mode re-checked) into the environment of the tasks.
3. Starts one ``srun`` per role in the background, each in its own process group (``set -m``),
   with :data:`TASK_PROLOGUE` as ``bash -c`` text and the role's command as an argument. The
   prologue sets ``RANK``/``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` (ranks of the task's role on its
   node)/``NODE_RANK``/``PAI_TASK_INDEX`` and the task's own
   ``PAI_CURRENT_*``/``PAI_CONTAINER_*`` variables, and names on stderr any of the task's own
   ports a socket of its node already holds (:data:`BUSY_PORTS`); GPU tasks keep the node's
   ``CUDA_VISIBLE_DEVICES`` (``LOCAL_RANK`` picks; ``DL_TASK_GPUS`` lists the positions the task
   owns; ``extras.gpuIsolation: task`` narrows instead) and get ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
   It fills ``<% $secrets.NAME %>`` in the command text, runs the command (again, up to the
   role's ``taskRetryCount`` times while it fails and the job is not being stopped) and records
   the final exit status in a per-attempt file. The job is being stopped once the task's shell got
   the checkpoint signal or SIGTERM/SIGINT/SIGHUP (scancel, time limit, requeue, slurmstepd
   ending the step), or the batch shell's ``gang.stop`` file exists (step 4); a command killed by
   a signal waits up to 3 s for either before it is run again (srun's SIGKILL of the step can
   reach the command before anything reaches its shell). A stopped task then kills what its
   command left in the task's process group with a parent outside it (re-parented, so out of
   Slurm's reach under ``proctrack/linuxproc``). The job's environment (v1 ``jobEnvs``) arrives as
   ``NAME=VALUE`` arguments and is applied by ``env`` to the command's shell alone, so a
   ``PATH``, ``LD_PRELOAD``, ``IFS`` or ``BASH_ENV`` there changes the user's command and nothing
   of this runtime; names this runtime or Slurm set for the tasks are refused at submit time
   (:func:`reserved_env`). The shell that runs the command traps the
   checkpoint signal (its children get the default action back at exec), so it survives the
   signal and keeps waiting for the program: a shell killed by it would orphan the program
   outside the step, where Slurm's kill at requeue cannot reach it under
   ``proctrack/linuxproc`` (seen on ``dlcluster``: a requeued trainer ran on to the end). Once
   the program ends, the trap runs: a program that failed after the signal (killed by it, having
   no handler, or exiting non-zero) ends the task with its status, and no later command of the
   list runs (``cmd; upload`` would otherwise report the preempted job a success); one that
   exited 0 is finished, and the commands after it run. The shell's own signal may come after
   the program's end (a step's processes are not signalled at one instant: seen on Slurm 26.05,
   the trap ran after the next command had started): a command that failed with the signal's
   status (128 + its number) makes the shell wait up to a second for that signal (an ``ERR``
   trap), and once the signal came any failure ends the task. A program the signal killed
   while the shell's trap is the user's own (``trap ... USR2`` in the command) decides
   nothing: the user's script handles the signal.
4. Polls those files once a second and applies the completion policy (``min_failed`` failed
   instances of a role fail the job, ``min_succeeded`` succeeded ones end it successfully;
   OpenPAI FrameworkController semantics; after the checkpoint signal failures decide nothing
   until every instance has ended, since a rank that exits non-zero there has checkpointed while
   others may still be writing theirs); once a job is decided the script writes
   ``gang.stop`` in that directory, then sends SIGTERM to every srun (srun then kills its step).
5. On the checkpoint signal (``--signal=B:<SIG>@<grace>`` or ``scancel --batch --signal``) the trap
   forwards the signal to every payload process group (srun passes it on to all tasks) and keeps
   waiting. A payload that then succeeds (exit 0) is finished: the job ends at once (a dropped
   preemption costs nothing). A payload that fails after the signal was preempted: the script
   waits for the scheduler's requeue until ``grace + 30`` s after the signal, then requeues
   itself. Preempted attempts never count as failures. A signal that comes at most
   ``grace + 65`` s before the job's time limit (squeue's time left, else
   ``SLURM_JOB_END_TIME``) is Slurm's own warning of the limit (``--signal`` is sent up to 60 s
   early, sbatch(1)): the script then waits for the limit, so the job ends TIMEOUT, never
   requeued by itself.
6. A failed attempt increments ``<checkpoint dir>/.dlsubmit/failures``; while that count is within
   the retry budget the script requeues itself (``scontrol requeue``), otherwise it exits 1.
"""

from __future__ import annotations

RESERVED_ENV_PREFIXES = {
    "SLURM_": "Slurm sets SLURM_* in every task, and srun and sbatch read them as options",
    "SLURMD_": "Slurm sets SLURMD_* in every task",
    "DL_": "DL_* is dlsubmit's own namespace (the checkpoint and requeue contract, DL_CHECKPOINT_DIR, "
           "DL_TASK_RETRY, ...)",
    "PAI_": "dlsubmit sets the OpenPAI runtime variables PAI_* in every task",
    "dl_": "dl_* are the task shell's own variables (the shell that runs the command sets "
           "dl_c, dl_n, ... over a value the job gives)",
}
"""Name prefixes a job's environment may not use, with the reason (docs/dlsubmit.md, "The job's
own environment"). tests/submit/test_dlsubmit_job_envs.py checks that every name :data:`RUNTIME` and
:data:`TASK_PROLOGUE` export is covered here or in :data:`RESERVED_ENV_NAMES`."""

RESERVED_ENV_NAMES = {
    **dict.fromkeys(("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR",
                     "MASTER_PORT"),
                    "dlsubmit sets it in every task for the distributed-training rendezvous"),
    **dict.fromkeys(("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"),
                    "the GPU device contract sets it in every task (extras.gpuIsolation: task "
                    "narrows CUDA_VISIBLE_DEVICES)"),
    **dict.fromkeys(("GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES"),
                    "Slurm's gres/gpu plugin sets it to the GPUs of every task's step"),
}
"""Single names a job's environment may not use, with the reason."""


ROLE_ENV_NAMES = ("PAI_TASK_ROLE_TASK_COUNT_{role}", "PAI_RESOURCE_{role}",
                  "PAI_MIN_FAILED_TASK_COUNT_{role}", "PAI_MIN_SUCCEEDED_TASK_COUNT_{role}",
                  "PAI_HOST_IP_{role}_{index}", "PAI_TASK_ROLE_{role}_HOST_LIST")
"""The variables :data:`RUNTIME` exports per role (``{role}``: the role's identifier,
``{index}``: an instance index), as :meth:`str.format` templates. tests/submit/test_runtime.py
checks that they are exactly the role variables the batch shell exports."""

PORT_ENV_NAMES = ("PAI_PORT_LIST_{role}_{index}_{label}", "PAI_{role}_{index}_{label}_PORT")
"""The variables :data:`RUNTIME` exports per port label of a role's instance, as templates."""


def reserved_env(name: str) -> str | None:
    """Why ``name`` may not be a job environment variable (it would replace what Slurm or this
    runtime give every task), or ``None`` when it may."""
    if name in RESERVED_ENV_NAMES:
        return RESERVED_ENV_NAMES[name]
    return next((why for prefix, why in RESERVED_ENV_PREFIXES.items() if name.startswith(prefix)),
                None)


BUSY_PORTS = r"""dl_busy_ports() {
  # DL_BUSY[port]=1 for the local port of every TCP and UDP socket of this node's network
  # namespace, IPv4 and IPv6, in any state (/proc/net, proc(5): needs no ss, lsof or python3)
  local f sl addr rest
  DL_BUSY=()
  for f in /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6; do
    [[ -r $f ]] || continue
    { read -r sl; while read -r sl addr rest; do
        [[ $addr =~ :([0-9A-Fa-f]{4})$ ]] && DL_BUSY[16#${BASH_REMATCH[1]}]=1
      done; } < "$f"
  done
  return 0
}
"""
"""Bash function shared by :data:`RUNTIME` (the master node's port choice) and
:data:`TASK_PROLOGUE` (each task's check of its own ports)."""

TASK_PROLOGUE = r"""set -u
""" + BUSY_PORTS + r"""dl_r=$1
export PAI_CURRENT_TASK_ROLE_NAME=$2
dl_ident=$3
dl_index=${7:-${SLURM_PROCID:-0}}
export LOCAL_RANK=${SLURM_LOCALID:-0}
export PAI_TASK_INDEX=$dl_index PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX=$dl_index
export RANK=$(( $4 + dl_index ))
export NODE_RANK=$(( $5 + ${SLURM_NODEID:-0} ))
dl_var=PAI_HOST_IP_${dl_ident}_$dl_index
export PAI_CURRENT_CONTAINER_IP=${!dl_var:-}
export PAI_CONTAINER_HOST_IP=$PAI_CURRENT_CONTAINER_IP
export PAI_CONTAINER_HOST_PORT=$(( MASTER_PORT + 1 + $9 + dl_index * ${10} ))
dl_var=PAI_TASK_ROLE_TASK_COUNT_$dl_ident
export PAI_CURRENT_TASK_ROLE_TASK_COUNT=${!dl_var}
# ranks of this role on this node: tasks go to nodes in blocks of argument 13 (block
# distribution), so only the role's last node can hold fewer; an array element is alone
dl_left=$(( PAI_CURRENT_TASK_ROLE_TASK_COUNT - dl_index / ${13} * ${13} ))
export LOCAL_WORLD_SIZE=$(( dl_left < ${13} ? dl_left : ${13} ))
[[ -n ${7:-} ]] && LOCAL_WORLD_SIZE=1
dl_var=PAI_RESOURCE_$dl_ident
IFS=, read -r PAI_CURRENT_TASK_ROLE_GPU_COUNT PAI_CURRENT_TASK_ROLE_CPU_COUNT \
  PAI_CURRENT_TASK_ROLE_MEM_MB PAI_CURRENT_TASK_ROLE_SHM_MB <<< "${!dl_var}"
export PAI_CURRENT_TASK_ROLE_GPU_COUNT PAI_CURRENT_TASK_ROLE_CPU_COUNT
export PAI_CURRENT_TASK_ROLE_MEM_MB PAI_CURRENT_TASK_ROLE_SHM_MB
dl_var=PAI_MIN_FAILED_TASK_COUNT_$dl_ident
export PAI_CURRENT_TASK_ROLE_MIN_FAILED_TASK_COUNT=${!dl_var}
dl_var=PAI_MIN_SUCCEEDED_TASK_COUNT_$dl_ident
export PAI_CURRENT_TASK_ROLE_MIN_SUCCEEDED_TASK_COUNT=${!dl_var}
dl_plist= dl_own=$PAI_CONTAINER_HOST_PORT
for dl_spec in ${12:-}; do
  dl_label=${dl_spec%%:*} dl_var=PAI_PORT_LIST_${dl_ident}_${dl_index}_${dl_spec%%:*}
  export "PAI_CONTAINER_HOST_${dl_label}_PORT_LIST=${!dl_var:-}"
  [[ $dl_label == ssh ]] && export PAI_CONTAINER_SSH_PORT=${!dl_var%%,*}
  dl_plist+=";$dl_label:${!dl_var:-}" dl_own+=",${!dl_var:-}"
done
export PAI_CONTAINER_HOST_PORT_LIST=${dl_plist#;}
# the batch shell chose the job's ports free on the master node; on any node, say which of this
# task's own ports something else already holds (the command still starts)
dl_busy_ports
dl_taken=
IFS=, read -r -a dl_ports <<< "$dl_own"
for dl_p in "${dl_ports[@]}"; do
  [[ $dl_p =~ ^[0-9]+$ && -n ${DL_BUSY[dl_p]:-} ]] && dl_taken+=" $dl_p"
done
[[ -n $dl_taken ]] && printf '[dlsubmit] warning: %s %s: port(s)%s already in use on %s; a program that binds one will fail\n' \
  "$2" "$dl_index" "$dl_taken" "${SLURMD_NODENAME:-$HOSTNAME}" >&2
if (( $6 > 0 )); then
  export DL_NODE_GPUS=${CUDA_VISIBLE_DEVICES:-}
  IFS=, read -r -a dl_devs <<< "$DL_NODE_GPUS"
  dl_first=$(( LOCAL_RANK * $6 )) DL_TASK_GPUS=
  if [[ $DL_GPU_ISOLATION == task ]]; then
    dl_mine=("${dl_devs[@]:dl_first:$6}") dl_first=0
    CUDA_VISIBLE_DEVICES=$(IFS=,; printf '%s' "${dl_mine[*]}")
  fi
  for ((dl_i = dl_first; dl_i < dl_first + $6; dl_i++)); do DL_TASK_GPUS+=,$dl_i; done
  export CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER=PCI_BUS_ID DL_TASK_GPUS=${DL_TASK_GPUS#,}
else
  export CUDA_VISIBLE_DEVICES=
fi
dl_cmd=$8
for dl_name in ${DL_SECRET_LIST:-}; do
  dl_var=DL_SECRET_$dl_name
  dl_cmd=${dl_cmd//"<% \$secrets.$dl_name %>"/"${!dl_var}"}
  unset "$dl_var"
done
unset DL_SECRET_LIST
dl_run=(/bin/bash)
# the job's environment (v1 jobEnvs, NAME=VALUE from argument 14 on) reaches only the command's
# shell: env(1) sets it after this prologue's work, so PATH, LD_PRELOAD, IFS or BASH_ENV there
# change the user's command, never the machinery around it
(( $# > 13 )) && dl_run=(/usr/bin/env "${@:14}" /bin/bash)
dl_stopping() {
  # true once the job is being stopped, so the command must not run again: this shell got a
  # termination signal (scancel, time limit, requeue, preemption, slurmstepd ending the step),
  # or the batch shell decided the job and is stopping the gang (it writes gang.stop first; the
  # glob reads the directory, which a shared file system revalidates)
  [[ -n $dl_stop ]] && return 0
  local f=("$DL_STATUS_DIR"/gang.sto[p])
  [[ -e ${f[0]} ]] && dl_stop=decided
  [[ -n $dl_stop ]]
}
dl_reap() {
  # SIGKILL what the command left behind in this task's process group: a process of the group
  # whose parent is outside it (re-parented when its shell ended, out of reach of Slurm under
  # proctrack/linuxproc), other than the tasks' own shells, whose parent is the step's
  local f line pid ppid pgrp top=$$ step
  local -A grp=() par=()
  for f in /proc/[0-9]*/stat; do
    { read -r line < "$f"; } 2>/dev/null || continue
    pid=${f#/proc/} pid=${pid%/stat} line=${line##*) } # state ppid pgrp ...
    line=${line#* } ppid=${line%% *} line=${line#* } pgrp=${line%% *}
    par[$pid]=$ppid grp[$pid]=$pgrp
  done
  pgrp=${grp[$$]:-}
  [[ -n $pgrp ]] || return 0
  while [[ ${grp[${par[$top]:-0}]:-} == "$pgrp" ]]; do top=${par[$top]}; done
  step=${par[$top]:-0}
  for pid in "${!grp[@]}"; do
    [[ ${grp[$pid]} == "$pgrp" && ${par[$pid]} != "$step" && ${grp[${par[$pid]}]:-} != "$pgrp" ]] &&
      kill -s KILL "$pid" 2>/dev/null
  done
  return 0
}
dl_sig=0 dl_stop=
trap 'dl_stop=SIGTERM' TERM
trap 'dl_stop=SIGINT' INT
trap 'dl_stop=SIGHUP' HUP
trap 'dl_sig=1' "$DL_SIGNAL"
# the command writes to this task's stderr (dl_err); bash's own report of it ending by a signal
# ("Terminated" and this line's text, on scancel or a requeue) is not the user's: dropped, the
# exit status says it
exec {dl_err}>&2
for ((dl_try = 0; ; dl_try++)); do
  { DL_TASK_RETRY=$dl_try DL_CMD=$dl_cmd "${dl_run[@]}" -c 'dl_n=$1; [[ $dl_n =~ ^[0-9]+$ ]] || dl_n=$(kill -l "$1"); dl_g=0; trap '\''dl_s=$?; dl_g=1; (( dl_s == 0 )) || exit "$dl_s"'\'' "$1"; trap '\''dl_s=$?; if (( !dl_g && dl_s == 128 + dl_n )); then sleep 1 & wait "$!"; fi; (( dl_g )) && exit "$dl_s"'\'' ERR; set --; dl_c=$DL_CMD; unset DL_CMD; eval "$dl_c"' "dl-$dl_ident" "$DL_SIGNAL" 2>&"$dl_err" {dl_err}>&-; } 2>/dev/null
  dl_rc=$?
  # a failed command may be the first sign of a stop or a checkpoint signal under way: Slurm
  # signals a step's processes one at a time (proctrack/linuxproc walks the process tree), so
  # the command may end of its signal, or of its own trap's exit, before this shell gets its
  # own; a shared file system shows gang.stop late. A few seconds for either to show, so that a
  # stopped task is not run again and a signalled one leaves its mark below. A killed command
  # that would be run again waits longer: the stop may be another task's failure, whose status
  # comes these 3 s after its exit and the batch shell's decision a second or so later
  dl_wait=0
  (( dl_rc != 0 )) && dl_wait=3
  (( dl_rc > 128 && dl_try < ${11:-0} )) && dl_wait=10
  for ((dl_i = 0; dl_i < dl_wait && !dl_sig; dl_i++)); do
    dl_stopping && break
    sleep 1 & wait "$!"
  done
  (( dl_rc == 0 || dl_sig || dl_try >= ${11:-0} )) && break
  if dl_stopping; then
    printf '[dlsubmit] %s %s: exit %s while the job is being stopped (%s); not run again\n' \
      "$2" "$dl_index" "$dl_rc" "$dl_stop" >&2
    break
  fi
  printf '[dlsubmit] %s %s: exit %s, task retry %s of %s\n' "$2" "$dl_index" "$dl_rc" $((dl_try + 1)) "${11}" >&2
done
dl_status=$DL_STATUS_DIR/$dl_r.$dl_index
# this task got the checkpoint signal (the batch shell's forward, or scancel --signal without
# --batch, which signals the job's steps and not the batch shell): said before its status, so
# that the batch shell reads it with the status (dl_step_signalled)
(( dl_sig )) && : > "$DL_STATUS_DIR/signalled.$dl_r.$dl_index"
printf '%s\n' "$dl_rc" > "$dl_status.$$" && mv -f -- "$dl_status.$$" "$dl_status"
dl_stopping && dl_reap
exit "$dl_rc"
"""

RUNTIME = r"""
# ---- runtime: fixed text, the same in every dlsubmit script (see submit/runtime.py) ----
set -u
set -m
dl_log() { printf '[dlsubmit] %s\n' "$*"; }

""" + BUSY_PORTS + r"""dl_int() { local v=0; [[ -r $1 ]] && read -r v < "$1"; [[ $v =~ ^[0-9]+$ ]] || v=0; printf '%s' "$v"; }

dl_expand_pai() {
  local v=$1
  v=${v//'${PAI_DEFAULT_FS_URI}'/"$PAI_DEFAULT_FS_URI"}
  v=${v//'$PAI_DEFAULT_FS_URI'/"$PAI_DEFAULT_FS_URI"}
  v=${v//'$PAI_USERNAME'/"$PAI_USERNAME"}
  v=${v//'$PAI_USER_NAME'/"$PAI_USER_NAME"}
  v=${v//'$PAI_JOB_NAME'/"$PAI_JOB_NAME"}
  printf '%s' "$v"
}

dl_fail() { dl_log "cannot start: $*; the payload was not started"; exit 1; }

dl_require() {
  local v bad=()
  for v in "$@"; do [[ -n ${!v:-} ]] || bad+=("$v"); done
  (( ${#bad[@]} == 0 )) || dl_fail "rendezvous: empty or unset: ${bad[*]}"
}

dl_addrs() {
  local var=SLURM_JOB_NODELIST n line hosts
  (( DL_HET )) && var=SLURM_JOB_NODELIST_HET_GROUP_$1
  if [[ -z ${!var:-} ]]; then dl_log "rendezvous: $var is empty" >&2; return 1; fi
  if ! hosts=$(scontrol show hostnames "${!var}"); then
    dl_log "rendezvous: 'scontrol show hostnames ${!var}' failed" >&2; return 1
  fi
  if [[ -z ${hosts//[[:space:]]/} ]]; then
    dl_log "rendezvous: 'scontrol show hostnames ${!var}' returned no host" >&2; return 1
  fi
  for n in $hosts; do
    line=$(scontrol show node -o "$n" 2>/dev/null)
    if [[ $line =~ NodeAddr=([^[:space:]]+) ]]; then printf '%s\n' "${BASH_REMATCH[1]}"
    else printf '%s\n' "$n"; fi
  done
}

dl_read_secrets() {
  local f=$DL_SECRETS_FILE line name mode
  (( ${#DL_SECRET_NAMES[@]} )) || return 0
  [[ -f $f && -r $f ]] || dl_fail "secrets file $f is not a readable file"
  mode=$(stat -c %a -- "$f") || dl_fail "cannot stat secrets file $f"
  (( (8#$mode & 8#077) == 0 )) || dl_fail "secrets file $f has mode $mode; run chmod 600 on it"
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
    name=${line%%=*}
    for n in "${DL_SECRET_NAMES[@]}"; do
      [[ $n == "$name" ]] && export "DL_SECRET_$name=${line#*=}"
    done
  done < "$f"
  for name in "${DL_SECRET_NAMES[@]}"; do
    line=DL_SECRET_$name
    [[ -v $line ]] || dl_fail "secret $name is not in $f"
  done
  export DL_SECRET_LIST="${DL_SECRET_NAMES[*]}"
}

dl_check_mount() {
  # the checkpoint dir is the one path in a mount list (dl_launch): ',' and ':' separate its
  # entries and fields, and pyxis's list (enroot fstab) splits on whitespace (submit/mounts.py)
  local img bad=',:' what="',' or ':'"
  [[ $DL_CONTAINER == pyxis ]] && bad=',:[:space:]' what="',', ':' or whitespace"
  [[ $DL_CONTAINER == none ]] && return 0
  for img in "${DL_ROLE_IMAGE[@]}"; do
    [[ -n $img && $DL_CHECKPOINT_DIR == *[$bad]* ]] &&
      dl_fail "$DL_CONTAINER cannot mount the checkpoint dir $DL_CHECKPOINT_DIR: it holds" \
        "$what, separators of its mount list; submit from a directory without them or give" \
        "--checkpoint-root"
  done
  return 0
}

dl_pick_port() {
  # MASTER_PORT: the first port of a block of DL_PORT_BLOCK ports (MASTER_PORT, then every
  # task's ports) in the non-ephemeral range: from DL_PORT_FLOOR up to the start of this node's
  # ip_local_port_range (or, when that range starts below the floor, above its end). The job id
  # picks the block; a block holding a port in use on this node (the master node: the batch
  # shell runs on the job's first node) gives way to the next one. srun passes MASTER_PORT to
  # every task, so all ranks agree.
  local f=/proc/sys/net/ipv4/ip_local_port_range lo=32768 hi=60999 low high n b try p first
  if ! { [[ -r $f ]] && read -r lo hi < "$f" && [[ $lo =~ ^[0-9]+$ && $hi =~ ^[0-9]+$ ]]; }; then
    lo=32768 hi=60999
    dl_log "ports: cannot read $f; taking Linux's default ephemeral range $lo-$hi"
  fi
  low=$DL_PORT_FLOOR high=$lo
  (( lo > DL_PORT_FLOOR )) || low=$(( hi + 1 > DL_PORT_FLOOR ? hi + 1 : DL_PORT_FLOOR )) high=65536
  n=$(( (high - low) / DL_PORT_BLOCK ))
  (( n > 0 )) || dl_fail "ports: the job's $DL_PORT_BLOCK port(s) do not fit between the port" \
    "floor $DL_PORT_FLOOR and the ephemeral range $lo-$hi (net.ipv4.ip_local_port_range)"
  dl_busy_ports
  first=$(( SLURM_JOB_ID % n ))
  for ((try = 0; try < n; try++)); do
    b=$(( low + (first + try) % n * DL_PORT_BLOCK ))
    for ((p = b; p < b + DL_PORT_BLOCK; p++)); do [[ -n ${DL_BUSY[p]:-} ]] && continue 2; done
    (( try )) && dl_log "ports: $try block(s) of $DL_PORT_BLOCK from port" \
      "$(( low + first * DL_PORT_BLOCK )) hold ports in use on ${SLURMD_NODENAME:-$HOSTNAME};" \
      "MASTER_PORT is $b"
    MASTER_PORT=$b
    return 0
  done
  dl_fail "ports: every block of $DL_PORT_BLOCK port(s) in $low-$(( high - 1 )) holds a port in use"
}

dl_setup() {
  local r i j k n id spec label port list ports total=0 nodes=0 text
  local -a addrs required=(MASTER_ADDR MASTER_PORT WORLD_SIZE DL_CHECKPOINT_DIR PAI_JOB_NAME PAI_USER_NAME)
  dl_require SLURM_JOB_ID
  DL_JOB_KEY=$SLURM_JOB_ID DL_REQUEUE_ID=$SLURM_JOB_ID
  if [[ -n ${SLURM_ARRAY_JOB_ID:-} ]]; then
    DL_JOB_KEY=${SLURM_ARRAY_JOB_ID}_$SLURM_ARRAY_TASK_ID DL_REQUEUE_ID=$DL_JOB_KEY
  fi
  export DL_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}
  # a relative root is the submit directory's (sbatch starts the job there); made absolute so
  # no path handed to a command (or to the user's program) can start with '-'
  [[ $DL_CHECKPOINT_ROOT == /* ]] || DL_CHECKPOINT_ROOT=${SLURM_SUBMIT_DIR:-$PWD}/$DL_CHECKPOINT_ROOT
  export DL_CHECKPOINT_DIR=$DL_CHECKPOINT_ROOT/$DL_JOB_KEY
  dl_check_mount
  DL_STATE_DIR=$DL_CHECKPOINT_DIR/.dlsubmit
  export DL_STATUS_DIR=$DL_STATE_DIR/attempt-$DL_RESTART_COUNT
  if ! mkdir -p -- "$DL_STATUS_DIR"; then dl_log "cannot create $DL_STATUS_DIR"; exit 1; fi
  rm -f -- "$DL_STATUS_DIR"/*.*
  export DL_SIGNAL PAI_JOB_NAME=$DL_JOB_NAME
  export PAI_USER_NAME=${SLURM_JOB_USER:-$(id -un)}
  export PAI_USERNAME=$PAI_USER_NAME
  export PAI_DATA_DIR PAI_OUTPUT_DIR PAI_CODE_DIR
  PAI_DATA_DIR=$(dl_expand_pai "$PAI_DATA_DIR")
  PAI_OUTPUT_DIR=$(dl_expand_pai "$PAI_OUTPUT_DIR")
  PAI_CODE_DIR=$(dl_expand_pai "$PAI_CODE_DIR")
  export PAI_TASK_ROLE_COUNT=${#DL_ROLE_NAME[@]} PAI_JOB_TASK_ROLE_COUNT=${#DL_ROLE_NAME[@]}
  PAI_TASK_ROLE_LIST=$(IFS=,; printf '%s' "${DL_ROLE_NAME[*]}")
  export PAI_TASK_ROLE_LIST PAI_JOB_TASK_ROLE_LIST=$PAI_TASK_ROLE_LIST
  export PAI_JOB_VC_NAME=$DL_VC_NAME PAI_WORK_DIR=$PWD DL_GPU_ISOLATION
  DL_RANK0=() DL_NODE0=()
  for ((r = 0; r < ${#DL_ROLE_NAME[@]}; r++)); do
    DL_RANK0+=("$total") DL_NODE0+=("$nodes")
    total=$(( total + DL_ROLE_INSTANCES[r] )) nodes=$(( nodes + DL_ROLE_NODES[r] ))
  done
  export WORLD_SIZE=$total PAI_JOB_TASK_COUNT=$total
  dl_pick_port
  export MASTER_PORT
  DL_ONLY_ROLE=-1 DL_ONLY_INDEX=
  if (( ! DL_GANG )); then
    i=${SLURM_ARRAY_TASK_ID:-0}
    for ((r = 0; r < ${#DL_ROLE_NAME[@]}; r++)); do
      if (( i < DL_ROLE_INSTANCES[r] )); then DL_ONLY_ROLE=$r DL_ONLY_INDEX=$i; break; fi
      i=$(( i - DL_ROLE_INSTANCES[r] ))
    done
  fi
  for ((r = 0; r < ${#DL_ROLE_NAME[@]}; r++)); do
    id=${DL_ROLE_IDENT[r]} n=${DL_ROLE_INSTANCES[r]} list=
    export "PAI_TASK_ROLE_TASK_COUNT_$id=$n" "PAI_RESOURCE_$id=${DL_ROLE_RESOURCE[r]}"
    export "PAI_MIN_FAILED_TASK_COUNT_$id=${DL_ROLE_MIN_FAILED[r]}"
    export "PAI_MIN_SUCCEEDED_TASK_COUNT_$id=${DL_ROLE_MIN_SUCCEEDED[r]}"
    addrs=()
    if (( DL_GANG || r == DL_ONLY_ROLE )); then
      text=$(dl_addrs "$r") || dl_fail "rendezvous: no node addresses for role ${DL_ROLE_IDENT[r]}"
      mapfile -t addrs <<< "$text"
      (( DL_GANG && ${#addrs[@]} < DL_ROLE_NODES[r] )) &&
        dl_fail "rendezvous: ${#addrs[@]} node address(es) for the" \
          "${DL_ROLE_NODES[r]} node(s) of role ${DL_ROLE_IDENT[r]}"
    fi
    for ((i = 0; i < n; i++)); do
      if (( DL_GANG )); then j=$(( i / DL_ROLE_TASKS_PER_NODE[r] ))
      elif (( r == DL_ONLY_ROLE && i == DL_ONLY_INDEX )); then j=0
      else continue; fi
      port=$(( MASTER_PORT + 1 + DL_ROLE_PORT0[r] + i * DL_ROLE_PORTS_PER_TASK[r] ))
      export "PAI_HOST_IP_${id}_$i=${addrs[j]:-}"
      required+=("PAI_HOST_IP_${id}_$i")
      list+=,${addrs[j]:-}:$port
      for spec in ${DL_ROLE_PORTS[r]}; do
        label=${spec%%:*} ports=
        for ((k = 0; k < ${spec#*:}; k++)); do port=$(( port + 1 )) ports+=,$port; done
        export "PAI_PORT_LIST_${id}_${i}_$label=${ports#,}" "PAI_${id}_${i}_${label}_PORT=${ports#,}"
      done
    done
    export "PAI_TASK_ROLE_${id}_HOST_LIST=${list#,}"
    (( DL_GANG || r == DL_ONLY_ROLE )) && required+=("PAI_TASK_ROLE_${id}_HOST_LIST")
  done
  if (( DL_GANG )); then j=PAI_HOST_IP_${DL_ROLE_IDENT[0]}_0
  else j=PAI_HOST_IP_${DL_ROLE_IDENT[DL_ONLY_ROLE]}_$DL_ONLY_INDEX; fi
  export MASTER_ADDR=${!j:-}
  dl_require "${required[@]}"
  [[ $MASTER_PORT =~ ^[0-9]+$ ]] && (( MASTER_PORT > 0 && MASTER_PORT < 65536 )) ||
    dl_fail "rendezvous: MASTER_PORT=$MASTER_PORT is not a port"
  dl_read_secrets
}

dl_launch() {
  local r=$1 idx=${2:-}
  local -a cmd=(srun)
  (( DL_HET )) && cmd+=(--het-group="$r")
  cmd+=(--nodes="${DL_ROLE_NODES[r]}" --ntasks="${DL_ROLE_INSTANCES[r]}")
  [[ -n $idx ]] && cmd=(srun --nodes=1 --ntasks=1)
  cmd+=(--ntasks-per-node="${DL_ROLE_TASKS_PER_NODE[r]}" --cpus-per-task="${DL_ROLE_CPUS[r]}")
  cmd+=(--mem-per-cpu="${DL_ROLE_MEM_PER_CPU[r]}" --gres="${DL_ROLE_GRES[r]}")
  cmd+=(--distribution=block --kill-on-bad-exit=0)
  if [[ $DL_CONTAINER == pyxis && -n ${DL_ROLE_IMAGE[r]} ]]; then
    cmd+=(--container-image="${DL_ROLE_IMAGE[r]}" --container-mounts="$DL_CHECKPOINT_DIR")
  elif [[ $DL_CONTAINER == apptainer && -n ${DL_ROLE_IMAGE[r]} ]]; then
    cmd+=(apptainer exec --nv --bind="$DL_CHECKPOINT_DIR" "${DL_ROLE_IMAGE[r]}")
  fi
  cmd+=(/bin/bash -c "$DL_TASK_PROLOGUE" dl-task "$r" "${DL_ROLE_NAME[r]}" "${DL_ROLE_IDENT[r]}")
  cmd+=("${DL_RANK0[r]}" "${DL_NODE0[r]}" "${DL_ROLE_GPUS[r]}" "$idx" "${DL_ROLE_COMMAND[r]}")
  cmd+=("${DL_ROLE_PORT0[r]}" "${DL_ROLE_PORTS_PER_TASK[r]}" "${DL_ROLE_TASK_RETRIES[r]}")
  cmd+=("${DL_ROLE_PORTS[r]}" "${DL_ROLE_TASKS_PER_NODE[r]}" ${DL_JOB_ENV[@]+"${DL_JOB_ENV[@]}"})
  exec "${cmd[@]}"
}

dl_time_left() {
  # seconds until the job's time limit (squeue's %L: [days-][hours:]minutes:seconds), from
  # SLURM_JOB_END_TIME (24.11 and later) when squeue does not answer; nothing when it has none
  local t
  t=$(squeue -h -j "$SLURM_JOB_ID" -o %L 2>/dev/null) || t=
  t=${t%%$'\n'*}   # a hetjob: one line per component, the same limit
  if [[ $t =~ ^(([0-9]+)-)?(([0-9]+):)?([0-9]+):([0-9]+)$ ]]; then
    printf '%s' $(( ((10#${BASH_REMATCH[2]:-0} * 24 + 10#${BASH_REMATCH[4]:-0}) * 60 \
      + 10#${BASH_REMATCH[5]}) * 60 + 10#${BASH_REMATCH[6]} ))
  elif [[ -z $t && ${SLURM_JOB_END_TIME:-} =~ ^[1-9][0-9]*$ ]]; then
    printf '%s' $(( SLURM_JOB_END_TIME - $(date +%s) ))
  fi
}

dl_forward() {
  local p first=$(( ! DL_SIGNALLED ))
  for p in "${DL_PIDS[@]}"; do kill -s "$DL_SIGNAL" -- "-$p" 2>/dev/null; done
  DL_SIGNALLED=1
  if (( first )); then
    DL_SIGNAL_AT=$(date +%s)
    # sbatch's --signal=B:SIG@grace comes grace to grace + 60 s before the time limit (Slurm
    # checks once a minute, sbatch(1)): the job ends at its limit, and is not requeued
    DL_TIME_LEFT=$(dl_time_left)
    [[ $DL_TIME_LEFT =~ ^-?[0-9]+$ ]] && (( DL_TIME_LEFT <= DL_GRACE_S + 65 )) && DL_AT_LIMIT=1
  fi
  if (( DL_AT_LIMIT )); then
    dl_log "attempt $DL_RESTART_COUNT: got SIG$DL_SIGNAL $DL_TIME_LEFT s before the job's time" \
      "limit, forwarded it to the payload; the job ends at its time limit (TIMEOUT), not requeued"
  else
    dl_log "attempt $DL_RESTART_COUNT: got SIG$DL_SIGNAL, forwarded it to the payload"
  fi
  return 0
}

dl_step_signalled() {
  # a task got the checkpoint signal that this shell did not (scancel --signal=SIG without
  # --batch or --full signals the job's steps only, scancel(1)): the same contract, so the
  # job is being checkpointed: a rank that then fails has written its checkpoint, and the
  # job waits for its requeue (as after dl_forward), never ends FAILED
  (( DL_SIGNALLED )) && return 0
  local f=("$DL_STATUS_DIR"/signalled.[0-9]*)
  [[ -e ${f[0]} ]] || return 0
  DL_SIGNALLED=1 DL_SIGNAL_AT=$(date +%s)
  dl_log "attempt $DL_RESTART_COUNT: the tasks got SIG$DL_SIGNAL, not this batch shell" \
    "(scancel --signal without --batch); taken as the checkpoint signal"
  return 0
}

dl_alive() {
  local p
  for p in "${DL_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
  return 1
}

dl_decide() {
  local r f rc n pass
  local -a ok=() bad=()
  for ((r = 0; r < ${#DL_ROLE_NAME[@]}; r++)); do
    ok[r]=0 bad[r]=0
    for f in "$DL_STATUS_DIR/$r".*; do
      [[ -f $f ]] || continue
      rc=$(dl_int "$f")
      if [[ $rc == 0 ]]; then ok[r]=$(( ok[r] + 1 )); else bad[r]=$(( bad[r] + 1 )); fi
    done
    n=${DL_ROLE_INSTANCES[r]}
    (( DL_GANG )) || n=$(( r == DL_ONLY_ROLE ? 1 : 0 ))
    [[ ${1:-} == final ]] && bad[r]=$(( n - ok[r] ))
  done
  # after the statuses: a task writes its signal mark before its status, so a status read
  # above comes with its mark
  dl_step_signalled
  for pass in failed succeeded; do
    # after the checkpoint signal a rank that exits non-zero has checkpointed (the contract):
    # the others may still be writing theirs, so no failure stops the gang until all have ended
    [[ $pass == failed && ${1:-} != final ]] && (( DL_SIGNALLED )) && continue
    for ((r = 0; r < ${#DL_ROLE_NAME[@]}; r++)); do
      if [[ $pass == failed ]] && (( DL_ROLE_MIN_FAILED[r] > 0 && bad[r] >= DL_ROLE_MIN_FAILED[r] )); then
        DL_OK=0 DL_DECISION="failed: ${bad[r]} failed instance(s) of role ${DL_ROLE_IDENT[r]} (minFailed ${DL_ROLE_MIN_FAILED[r]})"
        return 0
      fi
      if [[ $pass == succeeded ]] && (( DL_GANG && DL_ROLE_MIN_SUCCEEDED[r] > 0 && ok[r] >= DL_ROLE_MIN_SUCCEEDED[r] )); then
        DL_OK=1 DL_DECISION="succeeded: ${ok[r]} succeeded instance(s) of role ${DL_ROLE_IDENT[r]} (minSucceeded ${DL_ROLE_MIN_SUCCEEDED[r]})"
        return 0
      fi
    done
  done
  if [[ ${1:-} == final ]]; then DL_OK=1 DL_DECISION="succeeded: all instances completed"; return 0; fi
  return 1
}

dl_wait_payload() {
  local p deadline=$(( $(date +%s) + ${1:-1000000000} ))
  while dl_alive && (( $(date +%s) < deadline )); do sleep 1 & wait "$!"; done
  for p in "${DL_PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null && kill -s KILL -- "-$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  return 0
}

dl_requeue_self() {
  dl_log "attempt $DL_RESTART_COUNT end: $1; requeueing job $DL_REQUEUE_ID"
  if ! scontrol requeue "$DL_REQUEUE_ID"; then dl_log "requeue refused"; exit 1; fi
  local deadline=$(( $(date +%s) + 300 ))
  while (( $(date +%s) < deadline )); do sleep 1 & wait "$!"; done
  exit 1
}

dl_main() {
  local failures p budget=$DL_RETRY_BUDGET
  if (( DL_RETRY_BUDGET < 0 )); then budget=unlimited; fi
  DL_SIGNALLED=0 DL_SIGNAL_AT=0 DL_PIDS=() DL_DECISION= DL_OK=0 DL_AT_LIMIT=0 DL_TIME_LEFT=
  trap dl_forward "$DL_SIGNAL"
  dl_setup
  failures=$(dl_int "$DL_STATE_DIR/failures")
  dl_log "attempt $DL_RESTART_COUNT start: job $DL_JOB_KEY, restart count $DL_RESTART_COUNT," \
    "failed attempts $failures (retry budget $budget), checkpoint dir $DL_CHECKPOINT_DIR," \
    "master $MASTER_ADDR:$MASTER_PORT, world size $WORLD_SIZE"
  if (( DL_GANG )); then
    for ((r = 0; r < ${#DL_ROLE_NAME[@]}; r++)); do dl_launch "$r" & DL_PIDS+=("$!"); done
  else
    dl_launch "$DL_ONLY_ROLE" "$DL_ONLY_INDEX" & DL_PIDS+=("$!")
  fi
  while dl_alive; do
    dl_decide && break
    sleep 1 & wait "$!"
  done
  if [[ -n $DL_DECISION ]]; then
    # the tasks run no command again once this file exists (TASK_PROLOGUE, dl_stopping)
    : > "$DL_STATUS_DIR/gang.stop"
    for p in "${DL_PIDS[@]}"; do kill -s TERM -- "-$p" 2>/dev/null; done
    dl_wait_payload 30
  else
    dl_wait_payload
    dl_decide final
  fi
  if (( DL_SIGNALLED && ! DL_OK && DL_AT_LIMIT )); then
    dl_log "attempt $DL_RESTART_COUNT: payload ended after SIG$DL_SIGNAL ($DL_DECISION);" \
      "waiting for the time limit"
    while (( $(date +%s) < DL_SIGNAL_AT + DL_TIME_LEFT + 300 )); do sleep 1 & wait "$!"; done
    dl_log "attempt $DL_RESTART_COUNT end: still running 300 s past the time limit; exiting"
    exit 1
  fi
  if (( DL_SIGNALLED && ! DL_OK )); then
    dl_log "attempt $DL_RESTART_COUNT: payload ended after SIG$DL_SIGNAL ($DL_DECISION); waiting for the requeue"
    while (( $(date +%s) < DL_SIGNAL_AT + DL_GRACE_S + 30 )); do sleep 1 & wait "$!"; done
    dl_requeue_self "checkpointed, no requeue arrived"
  fi
  if (( DL_OK )); then dl_log "attempt $DL_RESTART_COUNT end: $DL_DECISION"; exit 0; fi
  failures=$(( failures + 1 ))
  printf '%s\n' "$failures" > "$DL_STATE_DIR/failures"
  if (( DL_RETRY_BUDGET < 0 || failures <= DL_RETRY_BUDGET )); then
    dl_requeue_self "$DL_DECISION; failed attempt $failures of retry budget $budget"
  fi
  dl_log "attempt $DL_RESTART_COUNT end: $DL_DECISION; retry budget $DL_RETRY_BUDGET spent"
  exit 1
}

dl_main
"""
