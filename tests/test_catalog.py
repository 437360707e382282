"""workflow.catalog: every job of an arm, arrivals first in each cycle, and every file they write with its size."""

from __future__ import annotations

from dataclasses import replace

from conftest import with_changes
from cycleio.config.settings import build_study, validate_config
from cycleio.surrogates.grid import Grid
from cycleio.surrogates.inventory import coldstart_files, step_io
from cycleio.surrogates.kinds import expected_bytes
from cycleio.workflow.catalog import arm_jobs, inventory_rows, study_inventory


def test_an_arms_jobs_start_with_the_cold_start_and_each_later_cycle_with_its_dumps(default_config):
    study = build_study(validate_config(default_config))
    jobs = arm_jobs(study.arms["shm"], study.cycles)
    first, second = study.cycles[:2]
    assert jobs[:3] == [(first, "coldstart", []), (first, "fcst", ["fcst"]), (first, "post", ["post"])]
    assert jobs[3:8] == [(second, "dump", []), *((second, step, [step]) for step in ("prep", "anal", "fcst", "post"))]
    assert [job for cycle, job, _ in jobs].count("coldstart") == 1
    assert [cycle for cycle, job, _ in jobs if job == "dump"] == study.cycles[1:]


def test_a_per_cycle_job_lists_the_steps_it_runs(default_config):
    study = build_study(validate_config(with_changes(default_config, staging__granularity=["cycle"])))
    arm = next(arm for arm in study.arms.values() if arm.granularity == "cycle")
    jobs = arm_jobs(arm, study.cycles)
    assert (study.cycles[0], "cycle", ["fcst", "post"]) in jobs
    assert (study.cycles[1], "cycle", ["prep", "anal", "fcst", "post"]) in jobs


def test_the_inventory_has_a_row_per_file_with_the_kinds_expected_bytes(default_config):
    study = build_study(validate_config(default_config))
    arm = study.arms["shm"]
    rows = inventory_rows(arm, study.cycles)
    first, second = study.cycles[:2]
    grid = Grid(arm.resolution, arm.levels)
    cold = [row for row in rows if row["job"] == "coldstart"]
    assert [row["file"] for row in cold] == [spec.path for spec in coldstart_files(first)]
    assert all(row["step"] == "coldstart" and row["cycle"] == first for row in cold)
    fcst = [row for row in rows if (row["cycle"], row["job"]) == (second, "fcst")]
    specs = step_io("fcst", second, arm.start, arm.forecast).writes
    assert [row["file"] for row in fcst] == [spec.path for spec in specs]
    assert [row["expected_bytes"] for row in fcst] == [expected_bytes(spec, grid, arm.compression) for spec in specs]
    assert set(rows[0]) == {"study", "arm", "cycle", "job", "step", "file", "kind", "expected_bytes"}
    assert len(study_inventory(study)) == sum(len(inventory_rows(a, study.cycles)) for a in study.arms.values())


def test_a_bigger_grid_expects_bigger_files(default_config):
    study = build_study(validate_config(default_config))
    arm = study.arms["shm"]
    small = {row["file"]: row["expected_bytes"] for row in inventory_rows(arm, study.cycles[:1])}
    large = {row["file"]: row["expected_bytes"] for row in inventory_rows(replace(arm, resolution="C96"),
                                                                            study.cycles[:1])}
    assert small.keys() == large.keys() and all(large[name] >= small[name] for name in small)
    assert sum(large.values()) > 3 * sum(small.values())  # C96 has four times the points of C48
