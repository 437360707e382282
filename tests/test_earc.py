"""The ensemble's archive jobs (earcNN, docs/archive.md): enkfgdas_grpNN.tar's members against global-workflow's
enkf_grp list for the files cycleio writes, the grouping of members (NMEM_EARCGRP), the DAG (after the ensemble
forecasts it reads, before the cycle's cleanup; in the package and in a Snakemake dry run), the job itself, its
limits, its Slurm resources, and its place in keep-up and the critical path."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import REPO, snakemake, with_changes

from cycleio.config.calendar import ensemble_archive_jobs, is_archive_job, member_groups
from cycleio.config.forecast import ForecastSettings
from cycleio.config.keys import ConfigError
from cycleio.config.settings import ArmSettings, earc_group_size
from cycleio.config.tierspec import Tier
from cycleio.storage import archive as arc
from cycleio.surrogates.archive_lists import archive_jobs, expected_members, job_tarballs, plan_cycle, tarballs_of
from cycleio.runner.persistentjobs import run_archive
from cycleio.workflow.dependencies import ArmJobs, CycledJobs, Job
from cycleio.workflow.study import load_study

START, FULL, NEXT = "2026010100", "2026010106", "2026010112"
ENSEMBLE = ForecastSettings(restart_hours=(6,), members=3, members_per_job=2)


def arm(tmp_path: Path = Path("x"), per_group: int = 2, forecast: ForecastSettings = ENSEMBLE, **archive) -> ArmSettings:
    tier = lambda name, kind: Tier(name=name, kind=kind, path=str(tmp_path / name))  # noqa: E731
    return ArmSettings(study="t", arm="lustre", start=START, seed=1, resolution="C12", levels=8,
                       persistent=tier("lustre", "lustre"), forecast=forecast,
                       archive={"tier": vars(tier("archive", "archive")), "tarballs": ["gdas", "gdas_restarta", "gdas_restartb"],
                                "command": "", "timeout_s": 60.0, "split": False, "max_member_bytes": 2**30,
                                "max_tarball_bytes": 2**40, "members_per_group": per_group, **archive})


# ------------------------------------------------------------------------------------------------ the lists


def test_a_group_s_tarball_holds_what_enkf_grp_names_of_the_members_history_cycleio_writes():
    settings = arm()
    first = job_tarballs("earc01", FULL, settings)
    assert list(first) == ["enkfgdas_grp01"]
    paths = [spec.path for spec in first["enkfgdas_grp01"]]
    # enkf_grp.yaml.j2: per member atmf003, atmf006, atmf009 (every 3 h from 3 to 9) and only the 6-hour sfcf
    assert paths == [f"enkfgdas.20260101/06/mem{m:03d}/model/atmos/history/enkfgdas.t06z.{name}.nc"
                     for m in (1, 2) for name in ("atmf003", "atmf006", "sfcf006", "atmf009")]
    last = job_tarballs("earc02", FULL, settings)["enkfgdas_grp02"]
    assert {Path(spec.path).parts[2] for spec in last} == {"mem003"} and len(last) == 4
    # the hourly history between them, and the other sfcf, go in no tarball; a member's file in no arch tarball
    assert all(tarballs_of(spec.path) == [] for spec in first["enkfgdas_grp01"])
    assert job_tarballs("arch", FULL, settings).keys() == {"gdas", "gdas_restarta", "gdas_restartb"}
    assert not any("enkfgdas" in spec.path for specs in job_tarballs("arch", FULL, settings).values() for spec in specs)
    with pytest.raises(ValueError, match="no archive job 'earc03'; its earc jobs: earc01, earc02"):
        job_tarballs("earc03", FULL, settings)


def test_the_half_cycle_and_a_study_without_an_ensemble_have_no_earc_job():
    assert archive_jobs(arm(), START) == ["arch"]  # the half cycle runs no ensemble forecast
    assert archive_jobs(arm(), FULL) == ["arch", "earc01", "earc02"]
    assert archive_jobs(arm(forecast=ForecastSettings(restart_hours=(6,))), FULL) == ["arch"]
    assert job_tarballs("earc01", START, arm()) == {}


def test_members_go_in_groups_of_nmem_earcgrp_read_from_the_efcs_jobs_that_write_them():
    assert member_groups(10, 4, "efcs") == {"efcs01": range(1, 5), "efcs02": range(5, 9), "efcs03": range(9, 11)}
    assert member_groups(0, 4, "earc") == {}
    assert ensemble_archive_jobs(10, 4, 3) == {"earc01": ("efcs01",), "earc02": ("efcs01", "efcs02"),
                                               "earc03": ("efcs02", "efcs03"), "earc04": ("efcs03",)}
    assert ensemble_archive_jobs(80, 8, 80) == {"earc01": tuple(f"efcs{g:02d}" for g in range(1, 11))}
    # parm/config/gfs/config.earc: 80 up to C96, 20 at C192, 10 at C384 and C768, 4 at C1152
    assert [earc_group_size(f"C{n}") for n in (12, 48, 96, 192, 384, 768, 1152, 3072)] == [80, 80, 80, 20, 10, 10, 4, 4]
    assert [name for name in ("arch", "earc01", "earc", "earc1", "efcs01", "post") if is_archive_job(name)] == [
        "arch", "earc01"]


def test_the_study_takes_the_group_size_from_the_config_or_the_resolution(default_config):
    config = with_changes(default_config, archive__enabled=True, scratch_tiers=["lustre"], benchmarks__enabled=False,
                          ensemble__members=3, ensemble__members_per_job=2, resolution="C12", levels=8)
    config["tiers"]["archive"] = {"kind": "archive", "path": "results/tiers/archive"}
    _, study = load_study(config)
    assert study.arms["lustre"].archive["members_per_group"] == 80
    _, study = load_study(with_changes(config, archive__members_per_group=2))
    assert study.arms["lustre"].archive["members_per_group"] == 2
    jobs = CycledJobs.of_study(study)
    assert [job.name for job in jobs.archives() if job.cycle == study.cycles[1]] == ["arch", "earc01", "earc02"]
    with pytest.raises(ConfigError, match="archive.members_per_group"):
        load_study(with_changes(config, archive__members_per_group=0))


# ------------------------------------------------------------------------------------------------ the DAG


def ensemble_dag(granularity: str = "step") -> CycledJobs:
    plan = ArmJobs(granularity, ("efcs01", "efcs02"),
                   ensemble_archives=(("earc01", ("efcs01",)), ("earc02", ("efcs01", "efcs02"))))
    return CycledJobs("s", (START, FULL, NEXT), {"a": plan}, keep=1, archive=True)


def test_an_earc_job_runs_after_the_ensemble_forecasts_it_reads_and_before_the_cycle_s_cleanup():
    dag = ensemble_dag()
    assert [job.name for job in dag.archives() if job.cycle == START] == ["arch"]
    assert [job.name for job in dag.archives() if job.cycle == FULL] == ["arch", "earc01", "earc02"]
    assert dag.archive_dependencies("a", FULL, "earc01") == [Job("a", FULL, "efcs01")]
    assert dag.archive_dependencies("a", FULL, "earc02") == [Job("a", FULL, "efcs01"), Job("a", FULL, "efcs02")]
    assert dag.archive_dependencies("a", FULL) == [Job("a", FULL, s) for s in ("prep", "anal", "fcst", "post")]
    assert {Job("a", FULL, "earc01"), Job("a", FULL, "earc02"), Job("a", FULL, "arch")} <= set(
        dag.cleanup_dependencies("a", FULL))
    assert Job("a", FULL, "earc02") in dag.measured_jobs()
    with pytest.raises(ValueError, match="no archive job earc01 in cycle 2026010100"):
        dag.archive_dependencies("a", START, "earc01")
    # an arm staged per cycle: the cycle job writes the members
    assert ensemble_dag("cycle").archive_dependencies("a", FULL, "earc02") == [Job("a", FULL, "cycle")]
    no_archive = ArmJobs("step", ("efcs01",), ensemble_archives=(("earc01", ("efcs01",)),))
    assert CycledJobs("s", (START, FULL), {"a": no_archive}).archives() == []


def manifest_key(path: str) -> str:
    """results/<study>/arms/<arm>/<cycle>/<job>.manifest.json -> <arm>/<cycle>/<job>"""
    return "/".join(path.strip().split("/")[-3:]).removesuffix(".manifest.json")


def dry_run_jobs(text: str) -> dict[str, set[str]]:
    """A fresh workdir's dry run: each job's manifest (arm/cycle/job) -> the manifests it waits for (every input is
    still to be made, so its Reason names them all)."""
    jobs = {}
    for line in text.splitlines():
        found = re.match(r"Reason: Missing output files: (.*?)(?:; Input files updated by another job: (.*))?$", line)
        if not found:
            continue
        outputs = [p for p in found.group(1).split(", ") if p.endswith(".manifest.json") and "/arms/" in p]
        for output in outputs:
            jobs[manifest_key(output)] = {manifest_key(p) for p in (found.group(2) or "").split(", ")
                                          if p.endswith(".manifest.json") and "/arms/" in p}
    return jobs


@pytest.mark.integration
def test_a_dry_run_puts_each_earc_job_after_the_efcs_jobs_and_before_the_cycle_s_cleanup(tmp_path):
    overrides = {"tiers": {"archive": {"kind": "archive", "path": str(tmp_path / "archive")}},
                 "cycles": {"keep": 1}, "archive": {"enabled": True, "members_per_group": 2},
                 "ensemble": {"members": 3, "members_per_job": 2}, "benchmarks": {"enabled": False}}
    (tmp_path / "tiers.yaml").write_text(yaml.safe_dump(overrides))
    run = snakemake(REPO, tmp_path, "-n")
    jobs = dry_run_jobs(run.stdout + run.stderr)
    steps = [key.split("/") for key in jobs if key.split("/")[1].isdigit()]  # not the cold starts
    arms, cycles = {arm for arm, _, _ in steps}, sorted({cycle for _, cycle, _ in steps})
    assert arms and len(cycles) == 3  # the smoke study's arms, three cycles
    full = cycles[1]
    for name in arms:
        assert f"{name}/{cycles[0]}/earc01" not in jobs  # the half cycle has no ensemble
        assert jobs[f"{name}/{full}/earc01"] == {f"{name}/{full}/efcs01"}
        assert jobs[f"{name}/{full}/earc02"] == {f"{name}/{full}/efcs02"}
        assert {f"{name}/{full}/earc01", f"{name}/{full}/earc02", f"{name}/{full}/arch"} <= jobs[f"{name}/{full}/cleanup"]


# ------------------------------------------------------------------------------------------------ the job


def lay_members(settings: ArmSettings, job: str, cycle: str) -> int:
    root = Path(settings.persistent.path) / settings.study / settings.arm
    count = 0
    for specs in job_tarballs(job, cycle, settings).values():
        for spec in specs:
            path = root / spec.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes([len(spec.path) % 251]) * 1000)
            count += 1
    return count


def test_an_earc_job_writes_its_group_s_tarball_indexed_verified_and_recorded_as_phase_archive(tmp_path):
    settings = arm(tmp_path)
    assert lay_members(settings, "earc01", FULL) == 8
    records = tmp_path / "earc01.records.jsonl"
    manifest = run_archive(settings, FULL, records, tmp_path / "earc01.manifest.json", job="earc01")
    folder = tmp_path / "archive" / "t" / "lustre" / FULL
    assert sorted(p.name for p in folder.iterdir()) == ["enkfgdas_grp01.tar", "enkfgdas_grp01.tar.index.json"]
    assert manifest["step"] == "earc01" and [t["members"] for t in manifest["tarballs"]] == [8]
    index = arc.TarballIndex.read(arc.index_path(folder / "enkfgdas_grp01.tar"))
    arc.verify_tarball(folder / "enkfgdas_grp01.tar", index)
    assert [m.name for m in index.members] == [s.path for s in job_tarballs("earc01", FULL, settings)["enkfgdas_grp01"]]
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert {r["step"] for r in lines} == {"earc01"} and {r["phase"] for r in lines} == {"archive"}
    assert {r["op"] for r in lines} == {"read", "write", "sync", "checksum"}
    assert len([r for r in lines if r["op"] == "read"]) == 8


def test_an_earc_job_plans_refuses_and_splits_under_the_limits_as_arch_does():
    """The preflight check (check_archive_limits) plans every archive job of the cycle (plan_cycle with no job)."""
    members = expected_members(FULL, arm(), "earc02")["enkfgdas_grp02"]
    largest = max(size for _, size in members)
    plans = plan_cycle(arm(split=True, max_tarball_bytes=largest + 10 * 1024), FULL, "earc02")
    assert list(plans) == ["enkfgdas_grp02"]
    parts = plans["enkfgdas_grp02"]
    assert len(parts) > 1 and [name for name, _ in parts][:2] == ["enkfgdas_grp02.part01.tar", "enkfgdas_grp02.part02.tar"]
    assert [m for _, chosen in parts for m in chosen] == members
    every = plan_cycle(arm(max_member_bytes=2**40), FULL)  # no job named: every archive job of the cycle
    assert set(every) == {"gdas", "gdas_restarta", "gdas_restartb", "enkfgdas_grp01", "enkfgdas_grp02"}
    with pytest.raises(arc.ArchiveLimitError, match=r"enkfgdas_grp01.tar of cycle 2026010106: member "
                                                    r"enkfgdas.20260101/06/mem001/.* is .* over archive.max_member_bytes"):
        plan_cycle(arm(max_member_bytes=1000), FULL, "earc01")


def test_an_earc_job_gets_arch_s_slurm_resources_with_its_own_bytes():
    from cycleio.workflow.slurm import archive_bytes, job_bytes, slurm_resources

    settings = arm(scratch=None)
    earc = slurm_resources(settings, "earc01", FULL)
    assert (earc["tasks"], earc["cpus_per_task"], earc["nodes"], earc["slurm_extra"]) == (1, 1, 1, "")
    assert job_bytes(settings, "earc01", FULL) == (archive_bytes(settings, FULL, "earc01"),) * 2
    assert archive_bytes(settings, FULL, "earc01") > archive_bytes(settings, FULL, "earc02") > 0
    assert archive_bytes(settings, START, "earc01") == 0
    staged = arm()
    staged.scratch = Tier(name="node_local", kind="node_local", path="y", shared=False)
    assert slurm_resources(staged, "earc01", FULL)["slurm_extra"] == ""  # no scratch, no burst buffer


def test_an_earc_job_s_settings_are_arch_s_without_the_paired_replay():
    settings = arm()
    settings.paired_cycles = (FULL,)
    settings.replay = {"repetitions": 2}
    earc = settings.job_settings("earc01", FULL)
    assert set(earc) == set(settings.job_settings("arch", FULL)) and earc["replay"] == {}
    assert settings.job_settings("arch", FULL)["replay"] == {"repetitions": 2}


# ------------------------------------------------------------------------------------------------ keep-up, critical path


def test_keep_up_and_the_critical_path_count_the_earc_jobs_with_the_cycle_s_archive():
    import pandas as pd

    from cycleio.report.archive import arm_keep_up, beside_archive, keep_up_table
    from cycleio.report.critical import critical_path

    def job(cycle, step, t, wall, archived=0):
        return {"study": "s", "arm": "a", "cycle": cycle, "step": step, "t_start": t, "wall_s": wall, "io_s": 0.1,
                "staging_s": 0.0, "archive_s": wall if archived else 0.0, "bytes_archived": archived}

    summary = pd.DataFrame([job(START, "fcst", 0, 5), job(START, "post", 5, 1), job(START, "arch", 6, 2, 100),
                            job(FULL, "prep", 8, 1), job(FULL, "anal", 9, 2), job(FULL, "efcs01", 11, 1),
                            job(FULL, "fcst", 12, 4), job(FULL, "earc01", 15.5, 2, 50), job(FULL, "post", 17, 1),
                            job(FULL, "arch", 18, 3, 200)])
    table = keep_up_table(summary)
    full = table[table["cycle"] == FULL].iloc[0]
    assert (full["archive_jobs"], full["archive_s"], full["bytes_archived"]) == (2, 5.0, 250)
    assert (full["t_start"], full["t_end"]) == (15.5, 21)
    assert table[table["cycle"] == START].iloc[0]["finished_before_next"]
    # each job against the same job of the next cycle: a cycle's earc01 that ended after the next one's began is late
    later = pd.concat([summary, pd.DataFrame([job(NEXT, "earc01", 30, 1, 50), job(FULL, "earc01", 31, 1, 50)])])
    later = later[~((later["cycle"] == FULL) & (later["step"] == "earc01") & (later["t_start"] == 15.5))]
    table = keep_up_table(later)
    assert table[table["cycle"] == FULL].iloc[0]["late_jobs"] == "earc01"
    assert arm_keep_up(table, "a")["archive_keeps_up"] == (
        "no: 2026010106 (earc01) had not finished when the next cycle's same archive job began (a backlog grows)")
    path = critical_path(summary)
    assert "earc01" not in set(path["step"]) and "arch" not in set(path["step"])
    assert path[path["cycle"] == FULL]["step"].tolist() == ["prep", "anal", "fcst", "post"]
    assert beside_archive(summary)["beside_steps"] == {"fcst": 1, "post": 1}  # the fcst and post beside earc01


def test_the_capacity_plan_s_archive_bytes_count_the_ensemble_s_tarballs_once(default_config):
    import pandas as pd

    from cycleio.report.scaling import archive_bytes
    from cycleio.surrogates.archive_lists import cycle_expected_members
    from cycleio.workflow.catalog import inventory_rows

    config = with_changes(default_config, archive__enabled=True, scratch_tiers=["lustre"], benchmarks__enabled=False,
                          ensemble__members=3, ensemble__members_per_job=2, archive__members_per_group=2)
    config["tiers"]["archive"] = {"kind": "archive", "path": "results/tiers/archive"}
    _, study = load_study(config)
    lustre = study.arms["lustre"]
    inventory = pd.DataFrame(inventory_rows(lustre, study.cycles[:2]))
    tarred = cycle_expected_members(study.cycles[1], lustre)
    assert {"enkfgdas_grp01", "enkfgdas_grp02"} < set(tarred)
    assert archive_bytes(inventory) == sum(size for members in tarred.values() for _, size in members)
