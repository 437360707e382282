-- Minimal burst_buffer.lua for Slurm 22.05 burst_buffer/lua (CI smoke test).
-- Every slurm_bb_* function the 22.05 plugin calls is defined; each one logs
-- to the slurmctld log and appends a line to /tmp/bb_trace.log.
lua_script_name = "burst_buffer.lua"

local function trace(fmt, ...)
    local args = {...}
    for i = 1, select("#", ...) do args[i] = tostring(args[i]) end
    local line = string.format(fmt, unpack(args, 1, select("#", ...)))
    slurm.log_info("%s: %s", lua_script_name, line)
    local f = io.open("/tmp/bb_trace.log", "a")
    if f then f:write(os.date("%H:%M:%S "), line, "\n"); f:close() end
end

local function stage_dir(job_id) return "/tmp/bb_stage/job_" .. job_id end

-- synchronous, at submit: validate the #BB_LUA directives; an error rejects the job.
-- Slurm 22.05 passes only job_script here (uid/gid arrive as nil).
function slurm_bb_job_process(job_script, uid, gid)
    trace("job_process script=%s uid=%s gid=%s", job_script, uid, gid)
    return slurm.SUCCESS
end

-- synchronous, at start-up and periodically: optional pools as JSON
function slurm_bb_pools()
    return slurm.SUCCESS, '{"pools":[{"id":"localpool","quantity":1000,"granularity":1}]}'
end

-- asynchronous, while pending
function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
    trace("setup job=%s pool=%s size=%s", job_id, tostring(pool), tostring(bb_size))
    os.execute("mkdir -p " .. stage_dir(job_id) .. " && chown " .. uid .. ":" .. gid .. " " .. stage_dir(job_id))
    return slurm.SUCCESS
end

function slurm_bb_data_in(job_id, job_script, uid, gid)
    trace("data_in job=%s", job_id)
    os.execute("echo staged-in > " .. stage_dir(job_id) .. "/in.txt")
    return slurm.SUCCESS
end

function slurm_bb_real_size(job_id, uid, gid)
    trace("real_size job=%s", job_id)
    return slurm.SUCCESS
end

-- synchronous, job is RUNNING+CONFIGURING: lines written to path_file become job env vars
function slurm_bb_paths(job_id, job_script, path_file, uid, gid)
    trace("paths job=%s path_file=%s", job_id, path_file)
    local f = io.open(path_file, "w")
    if f then f:write("BB_STAGE_DIR=" .. stage_dir(job_id) .. "\n"); f:close() end
    return slurm.SUCCESS
end

function slurm_bb_pre_run(job_id, job_script, uid, gid)
    trace("pre_run job=%s", job_id)
    return slurm.SUCCESS
end

function slurm_bb_post_run(job_id, job_script, uid, gid)
    trace("post_run job=%s", job_id)
    return slurm.SUCCESS
end

function slurm_bb_data_out(job_id, job_script, uid, gid)
    trace("data_out job=%s", job_id)
    local out = "/tmp/bb_stage/out_" .. job_id
    os.execute("rm -rf " .. out .. " && cp -r " .. stage_dir(job_id) .. " " .. out)
    return slurm.SUCCESS
end

function slurm_bb_job_teardown(job_id, job_script, hurry, uid, gid)
    trace("teardown job=%s hurry=%s", job_id, hurry)
    os.execute("rm -rf " .. stage_dir(job_id))
    return slurm.SUCCESS
end

-- "scontrol show bbstat ARGS"
function slurm_bb_get_status(uid, gid, ...)
    return slurm.SUCCESS, "localci burst buffer ok\n"
end
