--[[
tiresias-slurm site guard: Slurm job_submit/lua plugin (Slurm 22.05, Lua 5.1).

Place: slurmctld runs this for every submission (slurm_job_submit) and every update
(slurm_job_modify) before the job exists or changes. It keeps GPU jobs in the partitions that
dlprio manages fit for preemption and keeps dlprio's own levers out of users' hands:

  1. requeue on: an unset requeue becomes 1; --no-requeue is refused unless the user or the
     account is exempt (dlprio preempts by `scontrol requeue`).
  2. the checkpoint marker in --comment,
     `dl:v1;signal=<SIG>;grace=<seconds>[;class=production|opportunistic][ free text]` (grammar: slurm_plugin/marker.py; keep both in step): a malformed marker is refused, a
     grace above the site maximum is lowered to it. A job without a marker is left alone: this
     script never adds a signal (an untrapped USR2 would kill the job; job_submit/lua of 22.05
     cannot see or set --signal anyway).
  3. SiteFactor, priority and admin_comment belong to dlprio (it runs as root and sets them with
     `scontrol update`): users may not set them. nice stays the user's. A hold (priority 0) and
     a release are still allowed. Who refuses what in 22.05 (tests/live/test_lua_live.py): this script
     refuses --priority at submit (slurmctld silently drops a plain user's, keeps an Operator's)
     and Priority, AdminComment (which slurmctld allows Admins) on update; slurmctld refuses a
     plain user's SiteFactor and AdminComment updates before this script runs, and hands an
     update's SiteFactor to slurm_job_modify as NO_VAL, so an Operator's `scontrol update
     SiteFactor=` is stopped by nothing here: keep AdminLevel=Operator for the people who run dlprio.
  4. optional: GPU jobs without --time are refused (require_time_limit below).

Root and the users in privileged_users (SlurmUser, the daemon's account) pass untouched.

Updates (slurm_job_modify) are judged on the job as the update leaves it: each field from
job_desc when the update sets it, else from job_rec. A job that becomes guarded by the update
(moved into a managed partition, given GPUs, or moved off an exempt account) has rules 1, 2
and 4 checked as at submission on that merged view; a job guarded already has them checked on
what the update sets (the rest passed when it became guarded).

Facts of the Lua API this relies on (SchedMD/slurm source: the 22.05-era and 24.11-era
src/lua/slurm_lua.c, the newest src/plugins/job_submit/lua/job_submit_lua.c; and `strings` of
the installed 22.05.8 job_submit_lua.so):
- job_desc fields: job_submit_lua.c, _get_job_req_field: a string the request leaves unset
  reads nil ("" clears it on update); numbers read NO_VAL (time_limit, priority, site_factor)
  or NO_VAL16 (requeue) when unset; `gres` reads tres_per_node.
- job_rec fields: slurm_lua.c, slurm_lua_job_record_field (22.05 and 24.11; the newest
  job_submit_lua.c still reads job_rec through it): partition, account, comment, time_limit, user_id,
  user_name, tres_per_job, tres_per_node, tres_per_socket, tres_per_task, and gres (=
  tres_per_node). There is no requeue field in any of them (it reads nil): a job's current
  requeue cannot be seen from here, so a job that becomes guarded with requeue unknown gets
  requeue=1 written into the update (update_job applies a set job_desc.requeue).
- slurm.log_user reaches the user from slurm_job_submit in every release, from
  slurm_job_modify only from 23.02 (SchedMD bug 14539, as OleHolmNielsen/Slurm_tools
  plugins/README.md reports; the current job_modify hands user_msg back as err_msg). 23.02 also
  started registering every Slurm error code in the slurm table (bug 14500, same README;
  _register_slurm_output_errtab in slurm_lua.c) where 22.05 registers eight ESLURM_* names (ACCESS_DENIED, ..., MISSING_TIME_LIMIT):
  that is how this script tells the releases apart (UPDATE_MESSAGES below). On 22.05 an
  update's refusal is only in slurmctld's log.
Sources: Slurm job_submit_plugins.html; SchedMD's etc/job_submit.lua.example.
--]]

-- ======================= site settings: edit here =======================
local SITE = {
  -- partitions whose GPU jobs dlprio manages (mode `priority`: gpu; mode `partition`: q0..q2)
  managed_partitions = { gpu = true, q0 = true, q1 = true, q2 = true },
  -- partitions dlprio moves pending jobs between (mode `partition`): users may not move jobs there
  queue_partitions = { q0 = true, q1 = true, q2 = true },
  max_grace_s = 300,            -- grace cap in seconds; keep equal to max_grace_s in dlprio.yaml
  require_time_limit = false,   -- true: refuse GPU jobs submitted without --time
  exempt_users = {},            -- e.g. { alice = true }: may submit --no-requeue
  exempt_accounts = {},         -- e.g. { interactive = true }
  privileged_users = { "root", "slurm" },  -- names resolved to uids from passwd_file at load
  passwd_file = "/etc/passwd",
}
-- ========================================================================

local MARKER_PREFIX = "dl:v1;"
local MARKER_SIGNALS = { USR1 = true, USR2 = true, TERM = true, INT = true, HUP = true, URG = true }
local MARKER_MAX_GRACE = 86400
local MARKER_CLASSES = { production = true, opportunistic = true }
local TAG = "dl job_submit: "

-- passwd_file as two maps: name -> uid and uid -> name (empty when unreadable).
local function read_passwd()
  local uid_of, name_of = {}, {}
  local f = io.open(SITE.passwd_file, "r")
  if not f then return uid_of, name_of end
  for line in f:lines() do
    local name, uid = line:match("^([^:]+):[^:]*:(%d+):")
    if name then
      uid_of[name] = tonumber(uid)
      name_of[tonumber(uid)] = name
    end
  end
  f:close()
  return uid_of, name_of
end

-- Root plus privileged_users, resolved once when slurmctld loads the script.
local PRIVILEGED = { [0] = true }
do
  local uid_of = read_passwd()
  for _, name in ipairs(SITE.privileged_users) do
    if uid_of[name] then PRIVILEGED[uid_of[name]] = true end
  end
end

-- User name of a uid (job records of 22.05 carry user_id, not user_name); read when needed.
local function passwd_name(uid)
  local _, name_of = read_passwd()
  return name_of[uid]
end

-- Parse the marker. Returns nil (no marker), or a table {signal, grace, class, rest}, or
-- false and a message (malformed). Mirrors marker.parse(): the prefix makes it a marker.
local function parse_marker(comment)
  if comment == nil or comment:sub(1, #MARKER_PREFIX) ~= MARKER_PREFIX then return nil end
  local sig, grace, rest = comment:match("^dl:v1;signal=([A-Z0-9]+);grace=([0-9]+)(.*)$")
  local class, after = "production", rest
  if rest ~= nil and rest:sub(1, 7) == ";class=" then
    class, after = rest:match("^;class=([a-z]*)(.*)$")
  end
  if not sig or not (after == "" or after == "\n" or after:sub(1, 1) == " ") then
    return false, string.format(
      "comment %q: expected 'dl:v1;signal=<SIG>;grace=<seconds>[;class=opportunistic]'", comment)
  end
  if not MARKER_CLASSES[class] then
    return false, string.format("class '%s': must be one of production, opportunistic", class)
  end
  local name = sig
  if name:sub(1, 3) == "SIG" then name = name:sub(4) end
  if not MARKER_SIGNALS[name] then
    return false, string.format("signal '%s': must be one of USR1, USR2, TERM, INT, HUP, URG", sig)
  end
  local g = tonumber(grace)
  if g < 1 or g > MARKER_MAX_GRACE then
    return false, string.format("grace %s: must be whole seconds in 1..%d", grace, MARKER_MAX_GRACE)
  end
  return { signal = sig, grace = g, class = class, rest = rest }
end

-- The comment with grace lowered to the site maximum (nil when nothing to change).
local function capped_comment(m)
  if m.grace <= SITE.max_grace_s then return nil end
  return string.format("dl:v1;signal=%s;grace=%d%s", m.signal, SITE.max_grace_s, m.rest)
end

-- GPU counts as slurmctld 22.05 hands them to this script: job_desc.tres_per_node (--gres,
-- --gpus-per-node), tres_per_job (--gpus), tres_per_socket (--gpus-per-socket), tres_per_task
-- (--gpus-per-task), each a comma list of "gres:<name>[:<type>][:<count>]" (count 1 when left out,
-- "gres:gpu:0" asks for none, K/M/G/T/P multiply by 1024^n as in slurm.conf(5) Gres=). The TRES form
-- "gres/gpu[:type]=N" of later Slurm versions and the bare "gpu:N" are read too.
local COUNT_SUFFIX = { [""] = 1, k = 1024, m = 1024 ^ 2, g = 1024 ^ 3, t = 1024 ^ 4, p = 1024 ^ 5 }

local function parse_count(text)
  local n, suffix = text:match("^(%d+)([kKmMgGtTpP]?)$")
  if not n then return nil end
  return tonumber(n) * COUNT_SUFFIX[suffix:lower()]
end

-- Units of GRES `name` (gpu, shard) one item asks for: 0 when it names another GRES (or gpu:0).
local function item_count(item, name)
  local rest = item:gsub("%(.*%)$", "")
  rest = rest:match("^gres[:/](.*)$") or rest
  local spec, value = rest:match("^([^=]+)=(.*)$")
  if spec then
    if spec:match("^([^:]+)") ~= name then return 0 end
    return parse_count(value) or 1
  end
  local fields = {}
  for f in rest:gmatch("[^:]+") do fields[#fields + 1] = f end
  if fields[1] ~= name then return 0 end
  if #fields == 1 then return 1 end
  return parse_count(fields[#fields]) or 1  -- "gpu:a100": a type, count 1
end

-- Total units of GRES `name` in any of the given tres_per_* strings (nil and "" count 0).
local function gres_count(name, ...)
  local total = 0
  for i = 1, select("#", ...) do
    local tres = select(i, ...)
    if type(tres) == "string" then
      for item in tres:gmatch("[^,]+") do total = total + item_count(item, name) end
    end
  end
  return total
end

-- Total GPUs named in any of the given tres_per_* strings (nil and "" count 0).
local function gpu_count(...)
  return gres_count("gpu", ...)
end

-- A job on GPUs: whole GPUs or GPU shards (gres/shard, a share of one GPU; preempted alike).
-- job_desc.gres and job_rec.gres read tres_per_node (header): counted once either way.
local function is_gpu_job(j)
  return gpu_count(j.tres_per_node, j.tres_per_job, j.tres_per_task, j.tres_per_socket, j.gres) > 0
    or gres_count("shard", j.tres_per_node, j.tres_per_job, j.tres_per_task, j.tres_per_socket, j.gres) > 0
end

-- The partitions a job goes to: its own list, else the default partition from part_list.
local function partitions_of(name, part_list)
  local out = {}
  if name ~= nil and name ~= "" then
    for p in name:gmatch("[^,]+") do out[#out + 1] = p end
  elseif part_list ~= nil then
    for pname, part in pairs(part_list) do
      if part.flag_default == 1 then out[#out + 1] = part.name or pname end
    end
  end
  return out
end

local function any_in(list, set)
  for _, p in ipairs(list) do if set[p] then return true end end
  return false
end

local function is_exempt(user, account)
  return (user ~= nil and SITE.exempt_users[user] == true)
      or (account ~= nil and SITE.exempt_accounts[account] == true)
end

-- First daemon-owned field the request sets, or nil. Hold (0) and release (INFINITE) are
-- the user's own priority moves (scontrol hold/release).
local function daemon_field(j, allow_release)
  if j.site_factor ~= nil and j.site_factor ~= slurm.NO_VAL then return "SiteFactor" end
  local p = j.priority
  if p ~= nil and p ~= slurm.NO_VAL and p ~= 0 and not (allow_release and p == slurm.INFINITE) then
    return "priority"
  end
  if j.admin_comment ~= nil then return "admin_comment" end
  return nil
end

local function refuse(rc, msg, to_user)
  slurm.log_info("%s%s", TAG, msg)
  if to_user then slurm.log_user("%s", msg) end
  return rc
end

-- 23.02+: slurm.log_user works in slurm_job_modify (see the header for how this is told).
local UPDATE_MESSAGES = slurm.ESLURM_INVALID_PARTITION_NAME ~= nil

local REFUSAL = {
  submit = {
    requeue = "--no-requeue: GPU jobs here must be requeueable (the scheduler preempts by requeue);"
      .. " ask the admins to exempt your user or account",
    time = "GPU jobs need a time limit here: add --time (e.g. --time=24:00:00)",
  },
  update = {
    requeue = "requeue=0 (GPU jobs here must be requeueable); ask the admins to exempt your user or account",
    time = "GPU jobs need a time limit here: set TimeLimit in the same update",
  },
}

-- Rules 1, 2 and 4 on `job` (comment, requeue, time_limit, user_name, account; a nil field is
-- not checked). Defaults and caps are written to `target` (the job_desc); set_requeue: an unset
-- requeue becomes 1. Returns nil or (rc, message).
local function guard_gpu_job(job, target, set_requeue, texts)
  local m, err = parse_marker(job.comment)
  if m == false then return slurm.ERROR, "malformed checkpoint marker: " .. err end
  if m then
    local new = capped_comment(m)
    if new then
      slurm.log_info("%sgrace %d capped at %d s", TAG, m.grace, SITE.max_grace_s)
      target.comment = new
    end
  end
  if job.requeue == 0 then
    if not is_exempt(job.user_name, job.account) then return slurm.ESLURM_ACCESS_DENIED, texts.requeue end
  elseif set_requeue and (job.requeue == nil or job.requeue == slurm.NO_VAL16) then
    target.requeue = 1
  end
  if SITE.require_time_limit and job.time_limit == slurm.NO_VAL then
    return slurm.ESLURM_MISSING_TIME_LIMIT, texts.time
  end
  return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if PRIVILEGED[submit_uid] then return slurm.SUCCESS end
  if not any_in(partitions_of(job_desc.partition, part_list), SITE.managed_partitions) then
    return slurm.SUCCESS
  end
  local field = daemon_field(job_desc, false)
  if field then
    return refuse(slurm.ESLURM_ACCESS_DENIED,
      "refused: " .. field .. " is set by the dlprio scheduler, not at submission (nice is yours)", true)
  end
  if not is_gpu_job(job_desc) then return slurm.SUCCESS end
  local job = { comment = job_desc.comment, requeue = job_desc.requeue, user_name = job_desc.user_name,
                account = job_desc.account or job_desc.default_account,
                time_limit = job_desc.time_limit or slurm.NO_VAL }
  local rc, msg = guard_gpu_job(job, job_desc, true, REFUSAL.submit)
  if rc then return refuse(rc, "refused: " .. msg, true) end
  return slurm.SUCCESS
end

-- What an update leaves unset: strings nil, these numbers their NO_VAL (header).
local UNSET = { requeue = slurm.NO_VAL16, time_limit = slurm.NO_VAL }
-- Fields that say whose job it is and whether it is guarded, and the fields rules 1, 2, 4 read.
local WHO_FIELDS = { "partition", "account", "tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket", "gres" }
local RULE_FIELDS = { "comment", "requeue", "time_limit" }

local function set_by(job_desc, name)
  local v = job_desc[name]
  if v == UNSET[name] then return nil end
  return v
end

-- The job as the update leaves it: each field from job_desc when the update sets it, else from
-- job_rec. With rules_from_rec false, the rule fields hold only what the update sets.
local function after_update(job_desc, job_rec, rules_from_rec)
  local job = { user_name = job_rec.user_name or passwd_name(job_rec.user_id) }
  for _, name in ipairs(WHO_FIELDS) do
    local v = set_by(job_desc, name)
    if v == nil then v = job_rec[name] end
    job[name] = v
  end
  for _, name in ipairs(RULE_FIELDS) do
    local v = set_by(job_desc, name)
    if v == nil and rules_from_rec then v = job_rec[name] end
    job[name] = v
  end
  return job
end

-- A GPU job in a managed partition.
local function guarded(job)
  return is_gpu_job(job) and any_in(partitions_of(job.partition, nil), SITE.managed_partitions)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if PRIVILEGED[modify_uid] then return slurm.SUCCESS end
  local now = partitions_of(job_rec.partition, nil)
  local wanted = partitions_of(job_desc.partition, nil)
  if not any_in(now, SITE.managed_partitions) and not any_in(wanted, SITE.managed_partitions) then
    return slurm.SUCCESS
  end
  local prefix = "refused update of job " .. tostring(job_rec.job_id) .. ": "
  local field = daemon_field(job_desc, true)
  if field then
    return refuse(slurm.ESLURM_ACCESS_DENIED, prefix .. field .. " is set by the dlprio scheduler", UPDATE_MESSAGES)
  end
  if #wanted > 0 and (any_in(wanted, SITE.queue_partitions) or any_in(now, SITE.queue_partitions)) then
    return refuse(slurm.ESLURM_ACCESS_DENIED, prefix .. "the dlprio scheduler moves jobs between its queue partitions",
      UPDATE_MESSAGES)
  end
  local before = after_update({}, job_rec, true)
  local after = after_update(job_desc, job_rec, true)
  if not guarded(after) then return slurm.SUCCESS end
  local exempt_after = is_exempt(after.user_name, after.account)
  local entering = not guarded(before) or (is_exempt(before.user_name, before.account) and not exempt_after)
  local job = entering and after or after_update(job_desc, job_rec, false)
  local requeue_unknown = entering and not exempt_after and job.requeue == nil
  local rc, msg = guard_gpu_job(job, job_desc, requeue_unknown, REFUSAL.update)
  if rc then return refuse(rc, prefix .. msg, UPDATE_MESSAGES) end
  if requeue_unknown then
    slurm.log_info("%srequeue of job %s set to 1: the update makes it a guarded GPU job", TAG, tostring(job_rec.job_id))
  end
  return slurm.SUCCESS
end

-- Exposed for the unit tests (tests/slurm_plugin/test_lua_job_submit.py); Slurm ignores it.
dl_job_submit_internals = {
  parse_marker = parse_marker, capped_comment = capped_comment, is_gpu_job = is_gpu_job, gpu_count = gpu_count,
  SITE = SITE, PRIVILEGED = PRIVILEGED,
}

slurm.log_info("%sloaded (max grace %d s, require time limit: %s)", TAG, SITE.max_grace_s,
  tostring(SITE.require_time_limit))
return slurm.SUCCESS
