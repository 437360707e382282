"""The study's expected file inventory: every file each job writes, with its expected size."""

from __future__ import annotations

from ..config.settings import ArmSettings, Study
from ..surrogates.grid import Grid
from ..config.forecast import cycle_steps
from ..surrogates.inventory import coldstart_files, step_io
from ..surrogates.kinds import expected_bytes
from .dependencies import jobs_of_cycle


def arm_jobs(arm: ArmSettings, cycles: list[str]) -> list[tuple[str, str, list[str]]]:
    """(cycle, job name, steps) of every job of an arm, arrivals (cold start, dumps) first in each cycle."""
    jobs = [(cycles[0], "coldstart", [])]
    for cycle in cycles:
        if cycle != cycles[0]:
            jobs.append((cycle, "dump", []))
        for job in jobs_of_cycle(cycle, cycles[0], arm.granularity, tuple(arm.forecast.ensemble_jobs)):
            jobs.append((cycle, job, list(cycle_steps(cycle, arm.start, arm.forecast)) if job == "cycle" else [job]))
    return jobs


def inventory_rows(arm: ArmSettings, cycles: list[str]) -> list[dict]:
    """One row per file an arm's jobs write: study, arm, cycle, job, step, file, kind, expected_bytes."""
    grid = Grid(arm.resolution, arm.levels)
    rows = []
    for cycle, job, steps in arm_jobs(arm, cycles):
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
