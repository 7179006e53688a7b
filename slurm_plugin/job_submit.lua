-- job_submit/lua for tiresias-slurm (minimal placeholder policy: accept every job).
-- Replaced by the full site guard (issue 6): requeue defaults, grace cap, daemon-owned fields.
function slurm_job_submit(job_desc, part_list, submit_uid)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
