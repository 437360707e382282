"""runner.job: a step names a missing input; a staged step lands verified outputs and cleans its scratch."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from cycleio.config.forecast import ForecastSettings
from cycleio.config.settings import ArmSettings, StagingSettings
from cycleio.config.tierspec import Tier
from cycleio.runner.job import StepError, run_step
from cycleio.runner.persistentjobs import run_arrival


def arm(tmp_path, scratch="lustre", study="t") -> ArmSettings:
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    tiers = {"lustre": lustre, "shm": Tier("shm", "memory", str(tmp_path / "shm"), persistent=False, shared=False)}
    tiny = ForecastSettings(obs_scale=(12 / 768) ** 2, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",),
                            restart_hours=(6,))
    return ArmSettings(study=study, arm=scratch, start="2026010100", seed=7, resolution="C12", levels=4,
                       persistent=lustre, scratch=tiers[scratch], forecast=tiny,
                       write_component={"ranks": 1})  # one MPI rank: the decompositions are test_launcher's


@pytest.mark.integration
def test_anal_without_previous_forecast_names_the_missing_background_file(tmp_path, lay_cold_start):
    settings = arm(tmp_path)
    lay_cold_start(settings)
    run_arrival(settings, "2026010106", "dump", tmp_path / "d.jsonl", tmp_path / "d.json")
    run_step(settings, "2026010106", "prep", tmp_path / "p.jsonl", tmp_path / "p.json")
    with pytest.raises(StepError, match=r"anal\] missing input on the persistent tier: "
                       r".*/gdas\.20260101/00/model/atmos/history/gdas\.t00z\.atmf003\.nc \(and \d+ more\)"):
        run_step(settings, "2026010106", "anal", tmp_path / "r.jsonl", tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


@pytest.mark.integration
def test_staged_half_cycle_lands_verified_outputs_and_cleans_scratch(tmp_path, lay_cold_start):
    settings = arm(tmp_path, scratch="shm")
    lay_cold_start(settings)
    manifest = run_step(settings, "2026010100", "fcst", tmp_path / "r.jsonl", tmp_path / "m.json")
    root = tmp_path / "lustre" / "t" / "shm"
    assert manifest == json.loads((tmp_path / "m.json").read_text())
    for entry in manifest["outputs"]:
        assert (root / entry["path"]).stat().st_size == entry["bytes"]
    scratch_root = tmp_path / "shm" / "t" / "shm"
    assert list(scratch_root.iterdir()) == []  # the job folder was removed
    phases = {json.loads(line)["phase"] for line in (tmp_path / "r.jsonl").read_text().splitlines()}
    assert phases == {"stage_in", "run", "stage_out", "verify", "cleanup"}
    assert manifest["provenance"]["tiers"]["scratch"]["tier_kind"] == "memory"


@pytest.mark.integration
@pytest.mark.parametrize("from_storage", [True, False])
def test_a_steps_reads_come_from_storage_unless_told_otherwise(disk_dir, lay_cold_start, from_storage):
    """staging.reads_from_storage: the inputs the cold start just wrote (in the page cache) are dropped before the
    forecast reads them, so its read records say they met no cached page and ran no cache risk; an ``evict``
    record, the instrument's (phase replay), holds the seconds it took. Off: the reads meet the cached pages."""
    settings = replace(arm(disk_dir), staging=StagingSettings(reads_from_storage=from_storage))
    lay_cold_start(settings)
    run_step(settings, "2026010100", "fcst", disk_dir / "r.jsonl", disk_dir / "m.json")
    records = [json.loads(line) for line in (disk_dir / "r.jsonl").read_text().splitlines()]
    reads = [r for r in records if r["op"] == "read" and r["phase"] == "run"]
    assert reads and {r["tier_kind"] for r in reads} == {"lustre"}
    evicted = [r for r in records if r["op"] == "evict"]
    if from_storage:
        assert all(r["cached_fraction"] < 0.01 and not r["cache_risk"] for r in reads)
        assert [(r["phase"], r["n_files"]) for r in evicted] == [("replay", len(reads))]
    else:
        assert all(r["cached_fraction"] > 0.5 and r["cache_risk"] for r in reads)
        assert evicted == []


@pytest.mark.integration
def test_a_memory_tiers_reads_are_memory_reads(tmp_path, lay_cold_start):
    """tmpfs cannot drop its pages (they are its storage): nothing is evicted, the reads run no cache risk."""
    settings = arm(tmp_path, scratch="shm")
    lay_cold_start(settings)
    run_step(settings, "2026010100", "fcst", tmp_path / "r.jsonl", tmp_path / "m.json")
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    reads = [r for r in records if r["op"] == "read" and r["phase"] == "run"]
    assert reads and all(r["tier_kind"] == "memory" and not r["cache_risk"] for r in reads)
    assert not [r for r in records if r["op"] == "evict"]
