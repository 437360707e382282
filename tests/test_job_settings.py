"""Each job gets as params only the settings it reads, so a changed setting marks only the jobs that read it."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields

import pytest
from conftest import with_changes

from cycleio.config.settings import JOB_SETTINGS, ArmSettings, build_study, validate_config
from cycleio.config.tierspec import Tier
from cycleio.config.forecast import ForecastSettings
from cycleio.runner.job import run_step
from cycleio.runner.persistentjobs import run_cleanup, run_coldstart, run_arrival

C0, C1 = "2026010100", "2026010106"
JOBS = ("coldstart", "dump", "prep", "anal", "fcst", "post", "efcs01", "cycle", "cleanup", "inventory")


def params(config: dict, arm: str = "shm") -> dict[str, str]:
    """What the rules pass each job of the arm (rules/common.smk: job_settings)."""
    settings = build_study(validate_config(config)).arms[arm]
    return {job: settings.job_json(job) for job in JOBS}


def changed(config: dict, **changes) -> set[str]:
    before, after = params(config), params(with_changes(config, **changes))
    return {job for job in JOBS if before[job] != after[job]}


def test_changing_the_launcher_changes_the_forecasts_params_and_not_posts(default_config):
    assert changed(default_config, launcher="srun -n {ntasks}") == {"fcst", "cycle"}
    assert changed(default_config, write_component__ranks=4) == {"fcst", "cycle"}
    assert changed(default_config, forecast__compute_seconds_per_hour=1.0) == {"fcst", "cycle"}


def test_a_steps_compute_stand_in_changes_only_that_steps_params(default_config):
    assert changed(default_config, step_compute_seconds__prep=2.0) == {"prep", "cycle"}


def test_staging_and_scratch_change_the_step_jobs_not_the_arrivals_or_the_cleanup(default_config):
    steps = {"prep", "anal", "fcst", "post", "efcs01", "cycle"}
    assert changed(default_config, staging__streams=2) == steps
    assert changed(default_config, tiers__shm__path="/dev/shm/elsewhere") == steps
    # every job gets the arm's identity: its grid, first cycle and data seed, which every file it writes follows
    assert changed(default_config, seed=8) == changed(default_config, levels=64) == set(JOBS)


def test_a_jobs_settings_round_trip_and_the_rest_take_their_defaults(default_config):
    arm = build_study(validate_config(default_config)).arms["shm"]
    for job in JOBS:
        given = json.loads(arm.job_json(job))
        again = ArmSettings.from_json(arm.job_json(job))
        for field in fields(ArmSettings):
            if field.name not in given:
                default = field.default if field.default_factory is MISSING else field.default_factory()
                assert getattr(again, field.name) == default, (job, field.name)
            elif field.name not in ("step_compute_seconds", "replay"):
                assert getattr(again, field.name) == getattr(arm, field.name), (job, field.name)
    assert ArmSettings.from_json(arm.job_json("prep")).step_compute_seconds == {"prep": 0.0}
    assert ArmSettings.from_json(arm.job_json("efcs01")).step_compute_seconds == {}
    assert ArmSettings.from_json(arm.job_json("cycle")).step_compute_seconds == arm.step_compute_seconds
    assert ArmSettings.from_json(arm.job_json("post")).staged and not ArmSettings.from_json(arm.job_json("dump")).staged
    # the paired replay reaches the step jobs of the paired cycles only (so only they rerun when it changes)
    paired = arm.paired_cycles[-1]
    assert paired == "2026010112" and "2026010100" not in arm.paired_cycles
    assert ArmSettings.from_json(arm.job_json("fcst", paired)).replay == arm.replay and arm.replay["repetitions"] >= 2
    assert ArmSettings.from_json(arm.job_json("fcst", "2026010100")).replay == {}
    assert "replay" not in json.loads(arm.job_json("cleanup", paired))


class Watched(ArmSettings):
    """ArmSettings that note which of their fields a job reads."""

    def __getattribute__(self, name):
        if name in FIELDS:
            object.__getattribute__(self, "__dict__").setdefault("_read", set()).add(name)
        return object.__getattribute__(self, name)


FIELDS = {f.name for f in fields(ArmSettings)}


def as_passed(settings: ArmSettings, job: str) -> Watched:
    """The settings a job gets from its rule, watched."""
    given = ArmSettings.from_json(settings.job_json(job))
    watched = Watched(**{f.name: getattr(given, f.name) for f in fields(ArmSettings)})
    watched.__dict__["_read"] = set()
    return watched


@pytest.mark.integration
def test_every_job_reads_only_the_settings_its_rule_passes(tmp_path):
    lustre = Tier("lustre", "lustre", str(tmp_path / "lustre"))
    shm = Tier("shm", "memory", str(tmp_path / "shm"), persistent=False, shared=False)
    tiny = ForecastSettings(obs_scale=(12 / 768) ** 2, pgrb2_fields=6, sflux_fields=3, product_grids=("1p00",),
                            restart_hours=(6,))
    arm = ArmSettings(study="t", arm="shm", start=C0, seed=7, resolution="C12", levels=4, persistent=lustre,
                      scratch=shm, forecast=tiny, step_compute_seconds={"prep": 0.01},
                      write_component={"ranks": 1})  # the forecast's MPI program on one rank: settings read alike
    runs = [
        ("coldstart", lambda s: run_coldstart(s, tmp_path / "r", tmp_path / "m")),
        ("fcst", lambda s: run_step(s, C0, "fcst", tmp_path / "r", tmp_path / "m")),
        ("post", lambda s: run_step(s, C0, "post", tmp_path / "r", tmp_path / "m")),
        ("dump", lambda s: run_arrival(s, C1, "dump", tmp_path / "r", tmp_path / "m")),
        ("prep", lambda s: run_step(s, C1, "prep", tmp_path / "r", tmp_path / "m")),
        ("anal", lambda s: run_step(s, C1, "anal", tmp_path / "r", tmp_path / "m")),
        ("fcst", lambda s: run_step(s, C1, "fcst", tmp_path / "r", tmp_path / "m")),
        ("cleanup", lambda s: run_cleanup(s, C0, tmp_path / "r", tmp_path / "m")),
    ]
    for job, run in runs:
        settings = as_passed(arm, job)
        run(settings)
        read = settings.__dict__["_read"]
        assert read, job
        assert read <= set(json.loads(arm.job_json(job))), (job, sorted(read - set(json.loads(arm.job_json(job)))))
    assert not (tmp_path / "lustre" / "t" / "shm" / "gdas.20260101" / "00").exists()  # the cleanup ran


@pytest.mark.parametrize("job", JOBS)
def test_the_rules_pass_what_the_table_names(default_config, job):
    arm = build_study(validate_config(default_config)).arms["node_local"]
    kind = job if job in JOB_SETTINGS else "step"
    # the Darshan library only when instruments.darshan is set: a study without it passes its jobs what it did before
    assert set(json.loads(arm.job_json(job))) == set(JOB_SETTINGS[kind]) - {"darshan_library"}


@pytest.mark.parametrize("job", ["fcst", "cleanup", "coldstart"])
def test_every_job_is_passed_the_darshan_library_when_one_is_set(default_config, tmp_path, job):
    library = tmp_path / "libdarshan.so"
    library.write_bytes(b"")
    config = validate_config({**default_config, "instruments": {"darshan": str(library)}})
    arm = build_study(config).arms["node_local"]
    assert json.loads(arm.job_json(job))["darshan_library"] == str(library)


@pytest.mark.parametrize("end, paired, reads", [("2026010112", 2, 1), ("2026010112", 1, 2), ("2026010106", 2, 2),
                                                 ("2026010118", 3, 1)])
def test_the_full_paired_cycles_share_a_reads_repetitions(default_config, end, paired, reads):
    """Writes repeat in every paired job (each places its step between two page states); a read's band needs
    `repetitions` reads in all, so each of the full paired cycles (not the cold start's half cycle) reads its share."""
    config = with_changes(default_config, cycles__end=end, benchmarks__replay__cycles=paired,
                          benchmarks__replay__repetitions=2)
    replay = build_study(validate_config(config)).arms["lustre"].replay
    assert (replay["repetitions"], replay["read_repetitions"]) == (2, reads)


def test_a_jobs_manifest_keeps_the_settings_it_was_given(default_config):
    """What workflow.rerun compares with the study's settings now: the params as given, not the defaults filled in."""
    from cycleio.runner.manifest import provenance

    text = build_study(validate_config(default_config)).arms["shm"].job_json("post", "2026010112")
    given = ArmSettings.from_json(text)
    assert given.given == json.loads(text) and provenance(given, {})["settings"] == json.loads(text)
    assert ArmSettings.from_json(given.to_json()).given != given.given  # to_json holds every field
    assert "settings" not in provenance(Watched(**{f.name: getattr(given, f.name) for f in fields(ArmSettings)}), {})
