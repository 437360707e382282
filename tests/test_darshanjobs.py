"""A study's replay jobs (config darshan): their keys, their logs checked before any job with messages naming the config
key, their files, sizes and ranks (workflow.darshanjobs, config.settings' checks, preflight's room)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import darshan
import pytest
from conftest import REPO, with_changes

from cycleio.config.keys import ConfigError
from cycleio.config.settings import ArmSettings, validate_config
from cycleio.darshan import logs as darshan_logs
from cycleio.darshan.jobfiles import find_log
from cycleio.workflow import darshanjobs
from cycleio.workflow.catalog import arm_jobs, inventory_rows
from cycleio.workflow.preflight import check_study, study_needs
from cycleio.workflow.slurm import slurm_resources
from cycleio.workflow.study import load_study

LOGS = Path(darshan.__file__).parent / "examples" / "example_logs"


@pytest.fixture(autouse=True)
def fresh_cache():
    darshanjobs._planned.cache_clear()
    yield
    darshanjobs._planned.cache_clear()


def study_config(default_config, tmp_path, jobs=None, **changes):
    """The default study on tiers under tmp_path, without benchmarks, with replay jobs ``jobs``."""
    jobs = {"ior": {"log": "example:ior_hdf5_example.darshan", "ranks": 2, "scale": 0.1}} if jobs is None else jobs
    config = with_changes(default_config, scratch_tiers=["lustre", "shm"], benchmarks__enabled=False,
                          cycles__end="2026010106", **changes)
    config["tiers"]["lustre"]["path"] = str(tmp_path / "lustre")
    config["tiers"]["shm"]["path"] = str(tmp_path / "shm")
    config["darshan"] = {**config["darshan"], "jobs": jobs}
    return config


def test_a_study_with_replay_jobs_names_their_logs_and_files(default_config, tmp_path):
    _, study = load_study(study_config(default_config, tmp_path))
    arm = study.arms["shm"]
    spec = arm.darshan["jobs"]["ior"]
    assert spec["path"] == str(LOGS / "ior_hdf5_example.darshan") and len(spec["sha256"]) == 64
    files = study.darshan_files["ior"]
    assert files.inputs == (("00000-test123.h5", 419634),) and files.outputs == (("00000-test123.h5", 419635),)
    assert files.read_bytes == 420250 and files.write_bytes == 419580
    # a replay job's settings hold its own job only, with the launcher and staging it reads
    settings = json.loads(arm.job_json("darshan_ior", "2026010106"))
    assert set(settings["darshan"]["jobs"]) == {"ior"} and {"launcher", "staging", "scratch"} <= set(settings)
    assert "forecast" not in settings and "faults" not in settings
    assert ArmSettings.from_json(arm.job_json("darshan_ior")).darshan["jobs"]["ior"]["ranks"] == 2
    # Slurm: the replay's ranks as tasks; the input job writes the persistent tier only
    assert slurm_resources(arm, "darshan_ior", "2026010106")["tasks"] == 2
    assert slurm_resources(arm, "darshan_inputs")["slurm_extra"] == ""


def test_the_inventory_lists_the_inputs_once_and_each_cycles_outputs(default_config, tmp_path):
    _, study = load_study(study_config(default_config, tmp_path))
    arm = study.arms["shm"]
    jobs = arm_jobs(arm, study.cycles)
    assert ("2026010100", "darshan_inputs", []) in jobs and ("2026010106", "darshan_ior", []) in jobs
    rows = [row for row in inventory_rows(ArmSettings.from_json(arm.job_json("inventory")), study.cycles)
            if row["step"].startswith("darshan")]
    assert [(r["cycle"], r["step"], r["file"], r["expected_bytes"]) for r in rows] == [
        ("2026010100", "darshan_inputs", "darshan/ior/00000-test123.h5", 419634),
        ("2026010100", "darshan_ior", "gdas.20260101/00/darshan/ior/00000-test123.h5", 419635),
        ("2026010106", "darshan_ior", "gdas.20260101/06/darshan/ior/00000-test123.h5", 419635),
    ]
    # scratch holds the replay's one folder at most; the persistent tier the inputs and every cycle's outputs
    assert study_needs(study)["shm"]["scratch_bytes"] >= 421888


def test_only_replay_jobs_no_gdas_step_cold_start_or_dumps(default_config, tmp_path):
    config = study_config(default_config, tmp_path)
    config["darshan"]["only"] = True
    _, study = load_study(config)
    names = {name for _, name, _ in arm_jobs(study.arms["lustre"], study.cycles)}
    assert names == {"darshan_inputs", "darshan_ior"}
    # scratch holds one replay's folder at most (its files in whole blocks); the persistent tier the inputs once
    # and every cycle's outputs
    assert study_needs(study)["shm"]["scratch_bytes"] == 421888
    assert study_needs(study)["lustre"]["persistent_bytes"] == 2 * (419634 + 2 * 419635)


@pytest.mark.parametrize("darshan_cfg, message", [
    ({"jobs": {"a": {"log": "x.darshan", "after": "arch"}}},
     r"config key 'darshan.jobs.a.after': 'arch' is not allowed; expected first or a GDAS step: prep, anal, fcst, post"),
    ({"only": True, "jobs": {}}, r"config key 'darshan.only': true, but darshan.jobs is empty"),
    ({"only": True, "jobs": {"a": {"log": "x.darshan", "after": "fcst"}}},
     r"config key 'darshan.jobs.a.after': 'fcst', but darshan.only is true .* expected first"),
    ({"jobs": {"inputs": {"log": "x.darshan"}}}, r"config key 'darshan.jobs.inputs': the name 'inputs' is taken"),
    ({"jobs": {"A_b": {"log": "x.darshan"}}}, r"does not match the expected form"),
    ({"jobs": {"a": {"log": "x.darshan", "scale": 0}}}, r"darshan.jobs.a.scale"),
    ({"jobs": {"a": {"log": "x.darshan", "timing": "wall"}}}, r"config key 'darshan.jobs.a.timing': 'wall' is not allowed"),
])
def test_bad_replay_keys_are_refused_naming_the_key(default_config, darshan_cfg, message):
    config = copy.deepcopy(default_config)
    config["darshan"] = darshan_cfg
    with pytest.raises(ConfigError, match=message):
        validate_config(config)


def test_only_replay_jobs_cannot_sweep_gdas_settings_or_archive(default_config):
    config = with_changes(default_config, write_strategies=["serial", "per_rank"])
    config["darshan"] = {"only": True, "jobs": {"a": {"log": "x.darshan"}}}
    with pytest.raises(ConfigError, match=r"config key 'write_strategies': \['serial', 'per_rank'\] sweeps the GDAS"):
        validate_config(config)


# ------------------------------------------------------------------ bad logs, before any job

def test_not_a_darshan_log_is_refused_naming_the_key(default_config, tmp_path):
    text = tmp_path / "notes.darshan"
    text.write_text("hello\n")
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.ior.log': .*notes.darshan: not a Darshan log"):
        load_study(study_config(default_config, tmp_path, {"ior": {"log": str(text)}}))
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.ior.log': .*missing.darshan: no such file"):
        load_study(study_config(default_config, tmp_path, {"ior": {"log": str(tmp_path / "missing.darshan")}}))
    with pytest.raises(ConfigError, match=r"example:nope.darshan: pydarshan ships no log 'nope.darshan'; expected one of"):
        load_study(study_config(default_config, tmp_path, {"ior": {"log": "example:nope.darshan"}}))


def test_a_log_that_cannot_be_parsed_is_refused(default_config, tmp_path):
    cut = tmp_path / "cut.darshan"
    cut.write_bytes((LOGS / "ior_hdf5_example.darshan").read_bytes()[:3000])
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.ior.log': .*cut.darshan: cut short"):
        load_study(study_config(default_config, tmp_path, {"ior": {"log": str(cut)}}))


def test_a_log_without_file_records_is_refused(default_config, tmp_path, monkeypatch):
    real = darshan_logs.read_log

    def streams_only(path):  # what a heatmap- or APMPI-only log (or an empty one) gives
        job = copy.copy(real(path))
        job.counters = {"STDIO": job.counters["STDIO"][job.counters["STDIO"]["file"].str.startswith("<")]}
        darshan_logs.check_file_records(job)
        return job

    monkeypatch.setattr(darshan_logs, "read_log", streams_only)
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.ior.log': .*no POSIX, MPI-IO or STDIO records"):
        load_study(study_config(default_config, tmp_path, {"ior": {"log": "example:example.darshan"}}))


def test_more_ranks_than_the_log_had_are_refused(default_config, tmp_path):
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.ior.ranks': 8: the log's job ran 4 ranks"):
        load_study(study_config(default_config, tmp_path, {"ior": {"log": "example:ior_hdf5_example.darshan",
                                                                   "ranks": 8}}))


def test_more_ranks_than_can_start_here_are_refused_where_the_jobs_run(default_config, tmp_path, monkeypatch):
    _, study = load_study(study_config(default_config, tmp_path))
    monkeypatch.setenv("SLURM_NTASKS", "1")
    check_study(study)  # where the jobs run is not known yet (a cluster's nodes may have more)
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.ior.ranks': 2: only 1 ranks can start here "
                                          r"\(1 SLURM_NTASKS\); expected at most 1 \(or oversubscribe: true to start "
                                          r"more ranks than that on purpose\)$"):
        check_study(study, jobs_here=True)
    for arm in study.arms.values():  # on purpose
        arm.darshan["jobs"]["ior"]["oversubscribe"] = True
    check_study(study, jobs_here=True)


def test_files_too_large_for_the_tier_are_refused_naming_the_scale_that_fits(default_config, tmp_path, monkeypatch):
    _, study = load_study(study_config(default_config, tmp_path, {"vpic": {"log": "example:example.darshan",
                                                                           "ranks": 1, "scale": 0.01}}))
    monkeypatch.setattr("cycleio.storage.tiers.free_bytes", lambda path: 10 * 2**30)  # 10 GiB free
    with pytest.raises(ConfigError, match=r"config key 'darshan.jobs.vpic': the replay's files take 20.5 GiB at scale "
                                          r"0.01, and tier 'lustre' \(.*\) has 10.0 GiB free .*; scale 0.004 would fit"):
        check_study(study)
    assert darshanjobs.replay_room_problem(study, "lustre", tmp_path) is not None
    monkeypatch.setattr("cycleio.storage.tiers.free_bytes", lambda path: 10 * 2**40)
    assert darshanjobs.replay_room_problem(study, "lustre", tmp_path) is None


def test_find_log_reads_example_names_and_paths(tmp_path, monkeypatch):
    assert find_log("example:dxt.darshan") == LOGS / "dxt.darshan"
    monkeypatch.setenv("LOGDIR", str(LOGS))
    assert find_log("$LOGDIR/dxt.darshan") == (LOGS / "dxt.darshan").resolve()


def test_check_config_refuses_a_bad_log_in_one_line_before_any_job(tmp_path):
    """What `make study` runs first (cycleio check-config) reads the replay jobs' logs."""
    text = tmp_path / "notes.darshan"
    text.write_text("hello\n")
    (tmp_path / "study.yaml").write_text(json.dumps({"darshan": {"only": True, "jobs": {"mine": {"log": str(text)}}}}))
    result = subprocess.run([sys.executable, "-m", "cycleio", "check-config", str(REPO / "config" / "config.yaml"),
                             str(tmp_path / "study.yaml")], capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO / "scripts")})
    said = (result.stderr + result.stdout).strip().splitlines()
    assert result.returncode == 1 and len(said) == 1, said
    assert "config key 'darshan.jobs.mine.log'" in said[0] and "notes.darshan: not a Darshan log" in said[0]


def test_check_config_describes_each_replay_job(default_config, tmp_path):
    _, study = load_study(study_config(default_config, tmp_path))
    assert darshanjobs.describe_replay_jobs(study) == [
        "replay job darshan_ior (after first): ior_hdf5_example.darshan (4 ranks) on 2 ranks at scale 0.1 (timing io): "
        "reads 410.4 KiB, writes 409.7 KiB in 138 operations; 1 input files laid out once, 1 output files per cycle; "
        "set apart as not storage (not replayed, not in the job's I/O time): 1 stream (<STDOUT>); 0 bytes read, 2,421 "
        "written, 0 s of metadata"]
