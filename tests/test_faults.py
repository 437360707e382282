"""faults: fault injection (config ``faults``) is passed only to the jobs it aims at, and each fault fails its job
on the attempt named, which keeps its records; the next attempt succeeds (the check at start is test_faultcheck's)."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import pytest
from conftest import IN_CI, tmpfs, with_changes

from cycleio.config.settings import ArmSettings, StagingSettings
from cycleio.faults import InjectedFault
from cycleio.report.aggregate import failed_attempt_files, load_events, retries_table
from cycleio.records import read_records
from cycleio.storage import slowfs
from cycleio.storage.checksums import checksum_file
from cycleio.fsutil import is_temporary
from cycleio.storage.stagingtypes import StagingError
from cycleio.config.tierspec import Tier
from cycleio.config.forecast import ForecastSettings
from cycleio.surrogates.inventory import step_io
from cycleio.runner.job import run_step
from cycleio.runner.persistentjobs import run_arrival
from cycleio.workflow.dependencies import CycledJobs
from cycleio.workflow.study import load_study

CYCLE = "2026010106"


def study_with(default_config, **faults):
    return load_study(with_changes(default_config, faults={**default_config["faults"], **faults}))[1]


def test_faults_are_off_by_default(default_config):
    study = load_study(default_config)[1]
    jobs = CycledJobs.of_study(study).step_jobs()
    assert all(not arm.faults for arm in study.arms.values())
    assert all(study.arms[job.arm].job_settings(job.name, job.cycle)["faults"] == {} for job in jobs)


def test_a_fault_reaches_only_the_job_it_aims_at(default_config):
    """So that adding, changing or removing it reruns that job alone (the settings are the job's params)."""
    plain = load_study(default_config)[1]
    faulted = study_with(default_config,
                         fail_step=[{"cycle": CYCLE, "step": "anal", "arm": "shm"}],
                         fail_rank=[{"cycle": 2026010112, "rank": 1, "arm": "node_local", "attempt": 2}],
                         corrupt_staged_file=[{"cycle": CYCLE, "step": "post", "phase": "stage_out"}],
                         fail_stage_out=[{"cycle": "2026010106", "step": "prep", "after_files": 1, "arm": "shm"}])
    jobs = CycledJobs.of_study(plain).step_jobs()
    changed = {(job.arm, job.cycle, job.name) for job in jobs
               if plain.arms[job.arm].job_json(job.name, job.cycle) != faulted.arms[job.arm].job_json(job.name, job.cycle)}
    assert changed == {("shm", CYCLE, "anal"), ("node_local", "2026010112", "fcst"), ("node_local", CYCLE, "post"),
                       ("shm", CYCLE, "post"), ("shm", "2026010106", "prep")}  # lustre does not stage
    settings = json.loads(faulted.arms["node_local"].job_json("fcst", "2026010112"))
    assert settings["faults"] == {"fail_rank": [{"cycle": "2026010112", "rank": 1, "attempt": 2}]}
    # the jobs that read no cycle's settings: unchanged
    for arm in plain.arms:
        for job in ("coldstart", "dump", "cleanup", "inventory"):
            assert plain.arms[arm].job_json(job) == faulted.arms[arm].job_json(job)


def test_a_per_cycle_job_gets_the_faults_of_its_steps(default_config):
    study = load_study(with_changes(
        default_config, scratch_tiers=["shm"], staging__granularity=["cycle"],
        faults={**default_config["faults"], "fail_step": [{"cycle": CYCLE, "step": "fcst"}],
                "fail_stage_out": [{"cycle": CYCLE, "step": "cycle", "after_files": 3}]}))[1]
    settings = study.arms["shm"].job_settings("cycle", CYCLE)
    assert settings["faults"] == {"fail_step": [{"cycle": CYCLE, "step": "fcst", "attempt": 1}],
                                  "fail_stage_out": [{"cycle": CYCLE, "step": "cycle", "after_files": 3, "attempt": 1}]}


# ------------------------------------------------------------------------------------------------ in the jobs

# Observations and products scaled down to the C12 grid, as the smoke study does.
TINY = ForecastSettings(obs_scale=(12 / 768) ** 2, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",))
PREP_OUTPUTS = [spec.path for spec in step_io("prep", CYCLE, "2026010100", TINY).writes]


def staged_arm(tmp_path: Path, **faults) -> ArmSettings:
    """An arm staging between a persistent folder and a scratch folder, with the faults given (as the config
    section's entries aimed at this arm), and the observations of CYCLE on its persistent tier."""
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    scratch = Tier("shm", "memory", str(tmp_path / "scratch"), persistent=False, shared=False)
    settings = ArmSettings(study="t", arm="shm", start="2026010100", seed=3, resolution="C12", levels=4,
                           persistent=lustre, scratch=scratch, staging=StagingSettings(), forecast=TINY,
                           faults={kind: [{"cycle": CYCLE, "attempt": 1, **entry} for entry in entries]
                                   for kind, entries in faults.items()})
    run_arrival(settings, CYCLE, "dump", tmp_path / "dump.jsonl", tmp_path / "dump.json")
    return settings


def run_prep(settings: ArmSettings, tmp_path: Path, attempt: int) -> dict:
    return run_step(settings, CYCLE, "prep", tmp_path / "prep.records.jsonl", tmp_path / "prep.manifest.json",
                    attempt=attempt, failed_attempts=tmp_path / "prep.failed-attempts")


def assert_failed_attempt_kept(tmp_path: Path, phase: str) -> list[dict]:
    """Attempt 1 failed: no manifest nor records, no temporaries; its records kept with the attempt number."""
    assert not (tmp_path / "prep.manifest.json").exists() and not (tmp_path / "prep.records.jsonl").exists()
    assert not [p for p in tmp_path.rglob("*") if is_temporary(p.name)]
    assert not list((tmp_path / "scratch").rglob(".job.*"))
    (kept,) = (tmp_path / "prep.failed-attempts").glob("attempt1.*.records.jsonl")
    records = read_records(kept)
    assert {r["attempt"] for r in records} == {1}
    assert [(r["phase"], r["op"]) for r in records if r["op"] == "failed"] == [(phase, "failed")]
    assert any(r["phase"] == "stage_in" and r["op"] == "copy" for r in records)
    return records


def landed_outputs(tmp_path: Path) -> list[Path]:
    """prep's outputs (under any name: final or temporary) on the persistent tier."""
    names = {Path(path).name for path in PREP_OUTPUTS}
    return [p for p in (tmp_path / "lustre").rglob("*") if any(name in p.name for name in names)]


def assert_second_attempt_lands_verified(settings: ArmSettings, tmp_path: Path) -> None:
    manifest = run_prep(settings, tmp_path, attempt=2)
    root = Path(manifest["root"])
    assert manifest["outputs"] and all(checksum_file(root / o["path"]) == o["xxh3_64"] for o in manifest["outputs"])
    assert {r["attempt"] for r in read_records(tmp_path / "prep.records.jsonl")} == {2}
    assert len(list((tmp_path / "prep.failed-attempts").iterdir())) == 1  # the failed attempt's, still kept


def test_fail_step_fails_its_attempt_with_an_injected_fault_and_the_retry_succeeds(tmp_path):
    settings = staged_arm(tmp_path, fail_step=[{"step": "prep"}])
    with pytest.raises(InjectedFault, match=r"injected fault \(config faults.fail_step\): prep of cycle 2026010106 "
                                            r"fails on attempt 1"):
        run_prep(settings, tmp_path, attempt=1)
    records = assert_failed_attempt_kept(tmp_path, "run")
    assert not any(r["phase"] == "run" and r["op"] == "read" for r in records)  # it failed as its run began
    assert_second_attempt_lands_verified(settings, tmp_path)


def test_a_corrupted_stage_out_copy_fails_verification_and_lands_nothing(tmp_path):
    settings = staged_arm(tmp_path, corrupt_staged_file=[{"step": "prep", "phase": "stage_out"}])
    with pytest.raises(StagingError, match=r"checksum .* does not match the source's .* \(corrupt copy\)"):
        run_prep(settings, tmp_path, attempt=1)
    records = assert_failed_attempt_kept(tmp_path, "stage_out")
    assert {r["file"] for r in records if r["phase"] == "run" and r["op"] == "write"} == set(PREP_OUTPUTS)
    assert not landed_outputs(tmp_path)
    assert_second_attempt_lands_verified(settings, tmp_path)


def test_a_corrupted_stage_in_copy_fails_before_the_run(tmp_path):
    settings = staged_arm(tmp_path, corrupt_staged_file=[{"step": "prep", "phase": "stage_in"}])
    with pytest.raises(StagingError, match=r"\(corrupt copy\)"):
        run_prep(settings, tmp_path, attempt=1)
    (kept,) = (tmp_path / "prep.failed-attempts").glob("attempt1.*.records.jsonl")
    assert [(r["phase"], r["op"]) for r in read_records(kept)] == [("stage_in", "failed")]
    assert_second_attempt_lands_verified(settings, tmp_path)


def test_a_stage_out_failing_after_k_files_lands_nothing_and_the_retry_succeeds(tmp_path):
    settings = staged_arm(tmp_path, fail_stage_out=[{"step": "prep", "after_files": 1}])
    with pytest.raises(InjectedFault, match=r"injected fault \(config faults.fail_stage_out\): the copy of .* "
                                            r"fails after 1 of 3 files"):
        run_prep(settings, tmp_path, attempt=1)
    assert_failed_attempt_kept(tmp_path, "stage_out")
    assert not landed_outputs(tmp_path)
    assert_second_attempt_lands_verified(settings, tmp_path)


def test_a_fault_on_another_attempt_does_not_fire(tmp_path):
    settings = staged_arm(tmp_path, fail_step=[{"step": "prep", "attempt": 2}])
    run_prep(settings, tmp_path, attempt=1)
    assert not (tmp_path / "prep.failed-attempts").exists()


def test_a_full_tier_fails_the_step_with_enospc_naming_the_file_and_the_retry_succeeds(tmp_path):
    """fill_tier fills the real filesystem the step writes to (a 64 MiB tmpfs as scratch here) until
    nothing is free: prep's first write meets ENOSPC, the attempt fails naming it, the filler goes."""
    with tmpfs(tmp_path / "scratch", "64m") as scratch:
        settings = staged_arm(tmp_path, fill_tier=[{"step": "prep", "leave": 0}])
        with pytest.raises(OSError, match=r"No space left on device") as failed:
            run_prep(settings, tmp_path, attempt=1)
        assert failed.value.errno == errno.ENOSPC and Path(failed.value.filename).name, failed.value
        assert_failed_attempt_kept(tmp_path, "run")
        assert not list(scratch.rglob(".cycleio-fill.*"))
        stat = os.statvfs(scratch)
        assert stat.f_bavail * stat.f_frsize > 60 * 2**20  # the filler is gone with the attempt
        assert_second_attempt_lands_verified(settings, tmp_path)


@pytest.mark.integration
def test_a_slow_tier_delays_every_operation_of_the_step_and_its_files_land_right(tmp_path, monkeypatch):
    """slow_tier runs the step's I/O through a real FUSE mount answering each operation 50 ms late:
    every file the step writes takes at least one such wait; the outputs land verified; no mount stays."""
    why = slowfs.unavailable()
    if why:
        (pytest.fail if IN_CI else pytest.skip)(f"a slow tier needs FUSE: {why}")
    mounts = tmp_path / "mounts"  # this test's mount points only: other tests may mount slow tiers meanwhile
    mounts.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(mounts))
    settings = staged_arm(tmp_path, slow_tier=[{"step": "prep", "delay_ms": 50}])
    manifest = run_prep(settings, tmp_path, attempt=1)
    writes = [r for r in read_records(tmp_path / "prep.records.jsonl")
              if r["phase"] == "run" and r["op"] == "write" and r["bytes"] > 0]
    assert writes and all(r["seconds"] >= 0.05 for r in writes), [(r["file"], r["seconds"]) for r in writes]
    root = Path(manifest["root"])
    assert manifest["outputs"] and all(checksum_file(root / o["path"]) == o["xxh3_64"] for o in manifest["outputs"])
    assert str(mounts) not in Path("/proc/mounts").read_text()
    assert not any(mounts.iterdir())  # the mount point went with its mount


def test_the_retries_table_lists_each_failed_attempt_and_the_attempt_that_succeeded(tmp_path):
    settings = staged_arm(tmp_path, fail_stage_out=[{"step": "prep", "after_files": 1}])
    with pytest.raises(InjectedFault):
        run_prep(settings, tmp_path, attempt=1)
    run_prep(settings, tmp_path, attempt=2)
    table = retries_table(failed_attempt_files(tmp_path), load_events([tmp_path / "prep.records.jsonl"]))
    assert table[["arm", "cycle", "step", "attempt", "failed_in_phase", "succeeded_on_attempt"]].values.tolist() == [
        ["shm", CYCLE, "prep", 1, "stage_out", 2]]
    assert table["bytes_moved"].iloc[0] > 0 and table["seconds"].iloc[0] > 0
    assert retries_table([], load_events([tmp_path / "prep.records.jsonl"])).empty  # no retries: the header only
