--[[
tiresias-slurm site guard: Slurm job_submit/lua plugin (Slurm 22.05, Lua 5.1).

Place: slurmctld runs this for every submission (slurm_job_submit) and every update
(slurm_job_modify) before the job exists or changes. It keeps GPU jobs in the partitions that
dlprio manages fit for preemption and keeps dlprio's own levers out of users' hands:

  1. requeue on: an unset requeue becomes 1; --no-requeue is refused unless the user or the
     account is exempt (dlprio preempts by `scontrol requeue`).
  2. the checkpoint marker in --comment, `dl:v1;signal=<SIG>;grace=<seconds>[ free text]`
     (grammar: slurm_plugin/marker.py; keep both in step): a malformed marker is refused, a
     grace above the site maximum is lowered to it. A job without a marker is left alone: this
     script never adds a signal (an untrapped USR2 would kill the job; job_submit/lua of 22.05
     cannot see or set --signal anyway).
  3. SiteFactor, priority and admin_comment belong to dlprio (it runs as root and sets them with
     `scontrol update`): users may not set them. nice stays the user's. A hold (priority 0) and
     a release are still allowed. Who refuses what in 22.05 (tests/test_lua_live.py): this script
     refuses --priority at submit (slurmctld silently drops a plain user's, keeps an Operator's)
     and Priority, AdminComment (which slurmctld allows Admins) on update; slurmctld refuses a
     plain user's SiteFactor and AdminComment updates before this script runs, and hands an
     update's SiteFactor to slurm_job_modify as NO_VAL, so an Operator's `scontrol update
     SiteFactor=` is stopped by nothing here: keep AdminLevel=Operator for the people who run dlprio.
  4. optional: GPU jobs without --time are refused (require_time_limit below).

Root and the users in privileged_users (SlurmUser, the daemon's account) pass untouched.
Sources: Slurm job_submit_plugins.html; fields as exported by job_submit_lua.c of 22.05
(requeue, comment, site_factor, priority, admin_comment, time_limit, tres_per_*, nice);
slurm.log_user reaches the submitting user only from slurm_job_submit (not from modify before
23.02, see SchedMD's etc/job_submit.lua.example).
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

-- Parse the marker. Returns nil (no marker), or a table {signal, grace, head, rest}, or
-- false and a message (malformed). Mirrors marker.parse(): the prefix makes it a marker.
local function parse_marker(comment)
  if comment == nil or comment:sub(1, #MARKER_PREFIX) ~= MARKER_PREFIX then return nil end
  local sig, grace, rest = comment:match("^dl:v1;signal=([A-Z0-9]+);grace=([0-9]+)(.*)$")
  if not sig or not (rest == "" or rest == "\n" or rest:sub(1, 1) == " ") then
    return false, string.format("comment %q: expected 'dl:v1;signal=<SIG>;grace=<seconds>'", comment)
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
  return { signal = sig, grace = g, rest = rest }
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

-- GPUs one item asks for: 0 when it names another GRES (or gpu:0).
local function item_gpus(item)
  local rest = item:gsub("%(.*%)$", "")
  rest = rest:match("^gres[:/](.*)$") or rest
  local spec, value = rest:match("^([^=]+)=(.*)$")
  if spec then
    if spec:match("^([^:]+)") ~= "gpu" then return 0 end
    return parse_count(value) or 1
  end
  local fields = {}
  for f in rest:gmatch("[^:]+") do fields[#fields + 1] = f end
  if fields[1] ~= "gpu" then return 0 end
  if #fields == 1 then return 1 end
  return parse_count(fields[#fields]) or 1  -- "gpu:a100": a type, count 1
end

-- Total GPUs named in any of the given tres_per_* strings (nil and "" count 0).
local function gpu_count(...)
  local total = 0
  for i = 1, select("#", ...) do
    local tres = select(i, ...)
    if type(tres) == "string" then
      for item in tres:gmatch("[^,]+") do total = total + item_gpus(item) end
    end
  end
  return total
end

local function is_gpu_job(j)
  return gpu_count(j.tres_per_node, j.tres_per_job, j.tres_per_task, j.tres_per_socket) > 0
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

-- Marker check and cap on job_desc.comment (submit and modify). Returns nil or (rc, msg).
local function guard_comment(job_desc)
  local m, err = parse_marker(job_desc.comment)
  if m == false then
    return slurm.ERROR, "malformed checkpoint marker: " .. err
  end
  if m then
    local new = capped_comment(m)
    if new then
      slurm.log_info("%sgrace %d capped at %d s", TAG, m.grace, SITE.max_grace_s)
      job_desc.comment = new
    end
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
  local rc, msg = guard_comment(job_desc)
  if rc then return refuse(rc, "refused: " .. msg, true) end
  if job_desc.requeue == 0 then
    local account = job_desc.account or job_desc.default_account
    if not is_exempt(job_desc.user_name, account) then
      return refuse(slurm.ESLURM_ACCESS_DENIED,
        "refused: --no-requeue: GPU jobs here must be requeueable (the scheduler preempts by requeue);"
          .. " ask the admins to exempt your user or account", true)
    end
  elseif job_desc.requeue == nil or job_desc.requeue == slurm.NO_VAL16 then
    job_desc.requeue = 1
  end
  if SITE.require_time_limit and (job_desc.time_limit == nil or job_desc.time_limit == slurm.NO_VAL) then
    return refuse(slurm.ESLURM_MISSING_TIME_LIMIT,
      "refused: GPU jobs need a time limit here: add --time (e.g. --time=24:00:00)", true)
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if PRIVILEGED[modify_uid] then return slurm.SUCCESS end
  local now = partitions_of(job_rec.partition, nil)
  local wanted = partitions_of(job_desc.partition, nil)
  if not any_in(now, SITE.managed_partitions) and not any_in(wanted, SITE.managed_partitions) then
    return slurm.SUCCESS
  end
  -- 22.05 cannot pass a message to the user from here: the reason goes to slurmctld's log.
  local field = daemon_field(job_desc, true)
  if field then
    return refuse(slurm.ESLURM_ACCESS_DENIED, "refused update of job " .. tostring(job_rec.job_id)
      .. ": " .. field .. " is set by the dlprio scheduler", false)
  end
  if #wanted > 0 and (any_in(wanted, SITE.queue_partitions) or any_in(now, SITE.queue_partitions)) then
    return refuse(slurm.ESLURM_ACCESS_DENIED, "refused update of job " .. tostring(job_rec.job_id)
      .. ": the dlprio scheduler moves jobs between its queue partitions", false)
  end
  if job_desc.requeue == 0 and is_gpu_job(job_rec)
      and not is_exempt(job_rec.user_name or passwd_name(job_rec.user_id), job_rec.account) then
    return refuse(slurm.ESLURM_ACCESS_DENIED, "refused update of job " .. tostring(job_rec.job_id)
      .. ": requeue=0 (GPU jobs here must be requeueable)", false)
  end
  local rc, msg = guard_comment(job_desc)
  if rc then return refuse(rc, "refused update of job " .. tostring(job_rec.job_id) .. ": " .. msg, false) end
  return slurm.SUCCESS
end

-- Exposed for the unit tests (tests/test_lua_job_submit.py); Slurm ignores it.
dl_job_submit_internals = {
  parse_marker = parse_marker, capped_comment = capped_comment, is_gpu_job = is_gpu_job, gpu_count = gpu_count,
  SITE = SITE, PRIVILEGED = PRIVILEGED,
}

slurm.log_info("%sloaded (max grace %d s, require time limit: %s)", TAG, SITE.max_grace_s,
  tostring(SITE.require_time_limit))
return slurm.SUCCESS
