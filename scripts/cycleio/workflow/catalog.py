"""The study's expected file inventory: every file each job writes, with its expected size."""

from __future__ import annotations

from ..config.settings import ArmSettings, Study
from ..surrogates.grid import Grid
from ..config.forecast import cycle_steps
from ..surrogates.inventory import coldstart_files, step_io
from ..surrogates.kinds import expected_bytes
from ..config.keys import DARSHAN_INPUTS, DARSHAN_PREFIX
from .dependencies import jobs_of_cycle
from .darshanjobs import replay_job_files


def arm_jobs(arm: ArmSettings, cycles: list[str]) -> list[tuple[str, str, list[str]]]:
    """(cycle, job name, steps) of every job of an arm, arrivals (cold start, replay inputs, dumps) first in each
    cycle; a replay job (darshan_<name>) has no GDAS steps."""
    replays = [DARSHAN_PREFIX + name for name in arm.darshan.get("jobs", {})]
    only = bool(arm.darshan.get("only"))
    jobs = [] if only else [(cycles[0], "coldstart", [])]
    jobs += [(cycles[0], DARSHAN_INPUTS, [])] if replays else []
    for cycle in cycles:
        if cycle != cycles[0] and not only:
            jobs.append((cycle, "dump", []))
        for job in [] if only else jobs_of_cycle(cycle, cycles[0], arm.granularity, tuple(arm.forecast.ensemble_jobs)):
            jobs.append((cycle, job, list(cycle_steps(cycle, arm.start, arm.forecast)) if job == "cycle" else [job]))
        jobs += [(cycle, job, []) for job in replays]
    return jobs


def replay_rows(arm: ArmSettings, cycle: str, job: str) -> list[tuple[str, str, int]]:
    """(file, kind, expected bytes) of what a replay job writes, or (job darshan_inputs) of every replay job's input
    files, laid out once (paths relative to the arm's folder on the persistent tier: darshan.jobfiles)."""
    from ..darshan.jobfiles import input_dir, output_dir

    if job != DARSHAN_INPUTS:
        name = job.removeprefix(DARSHAN_PREFIX)
        return [(f"{output_dir(name, cycle)}/{path}", "darshan_output", size)
                for path, size in replay_job_files(arm, job).outputs]
    return [(f"{input_dir(name)}/{path}", "darshan_input", size) for name in arm.darshan["jobs"]
            for path, size in replay_job_files(arm, DARSHAN_PREFIX + name).inputs]


def inventory_rows(arm: ArmSettings, cycles: list[str]) -> list[dict]:
    """One row per file an arm's jobs write: study, arm, cycle, job, step, file, kind, expected_bytes."""
    grid = Grid(arm.resolution, arm.levels)
    rows = []
    for cycle, job, steps in arm_jobs(arm, cycles):
        if job.startswith(DARSHAN_PREFIX):
            rows += [{"study": arm.study, "arm": arm.arm, "cycle": cycle, "job": job, "step": job, "file": path,
                      "kind": kind, "expected_bytes": size} for path, kind, size in replay_rows(arm, cycle, job)]
            continue
        if job == "coldstart":
            writes = [("coldstart", spec) for spec in coldstart_files(cycle)]
        elif job == "dump":
            writes = [("dump", spec) for spec in step_io("dump", cycle, arm.start, arm.forecast).writes]
        else:
            writes = [(step, spec) for step in steps for spec in step_io(step, cycle, arm.start, arm.forecast).writes]
        for step, spec in writes:
            rows.append({"study": arm.study, "arm": arm.arm, "cycle": cycle, "job": job, "step": step,
                         "file": spec.path, "kind": spec.kind,
                         "expected_bytes": expected_bytes(spec, grid, arm.compression)})
    return rows


def study_inventory(study: Study) -> list[dict]:
    return [row for arm in study.arms.values() for row in inventory_rows(arm, study.cycles)]
