"""The cycled DAG as plain values: which jobs a study runs and what each waits for (workflow.dependencies)."""

from __future__ import annotations

import pytest
from conftest import with_changes

from cycleio.config.settings import build_study, validate_config
from cycleio.workflow.catalog import arm_jobs
from cycleio.workflow.dependencies import ArmJobs, CycledJobs, Job, jobs_of_cycle

C0, C1, C2, C3 = "2026010100", "2026010106", "2026010112", "2026010118"


def plan(*arms: tuple[str, ArmJobs], cycles=(C0, C1, C2), keep=None) -> CycledJobs:
    return CycledJobs("s", tuple(cycles), dict(arms), keep)


def test_a_half_cycle_then_full_cycles_with_the_ensemble_jobs_after_the_analysis():
    assert jobs_of_cycle(C0, C0) == ["fcst", "post"]
    assert jobs_of_cycle(C1, C0) == ["prep", "anal", "fcst", "post"]
    assert jobs_of_cycle(C1, C0, ensemble_jobs=("efcs01", "efcs02")) == ["prep", "anal", "fcst", "post", "efcs01",
                                                                        "efcs02"]
    assert jobs_of_cycle(C0, C0, ensemble_jobs=("efcs01",)) == ["fcst", "post"]  # no analysis to start from
    assert jobs_of_cycle(C0, C0, "cycle") == jobs_of_cycle(C1, C0, "cycle") == ["cycle"]


def test_step_jobs_are_chronological_across_arms():
    jobs = plan(("a", ArmJobs()), ("b", ArmJobs("cycle"))).step_jobs()
    assert jobs[:4] == [Job("a", C0, "fcst"), Job("a", C0, "post"), Job("b", C0, "cycle"), Job("a", C1, "prep")]
    assert [job.cycle for job in jobs] == sorted(job.cycle for job in jobs)
    assert len(jobs) == 2 + 1 + 2 * (4 + 1)


def test_each_step_waits_for_the_gdas_order_and_the_previous_forecast():
    dag = plan(("a", ArmJobs(ensemble_jobs=("efcs01",))))
    needs = {(cycle, name): dag.dependencies("a", cycle, name) for _, cycle, name in dag.step_jobs()}
    assert needs[(C0, "fcst")] == [Job("a", None, "coldstart")]
    assert needs[(C0, "post")] == [Job("a", C0, "fcst")]
    assert needs[(C1, "prep")] == [Job("a", C0, "post"), Job("a", C1, "dump")]
    assert needs[(C1, "anal")] == [Job("a", C1, "prep"), Job("a", C0, "fcst")]
    assert needs[(C1, "fcst")] == [Job("a", C1, "anal"), Job("a", C0, "fcst")]
    assert needs[(C1, "post")] == [Job("a", C1, "fcst")]
    assert needs[(C1, "efcs01")] == [Job("a", C1, "anal")]
    # the hybrid analysis waits for the previous cycle's ensemble forecasts too (global-workflow: gdasanal after the
    # previous cycle's enkf), so an ensemble never falls a cycle behind
    assert needs[(C2, "anal")] == [Job("a", C2, "prep"), Job("a", C1, "fcst"), Job("a", C1, "efcs01")]


def test_a_whole_cycle_job_waits_for_the_previous_one_and_its_dumps():
    dag = plan(("a", ArmJobs("cycle")))
    assert dag.dependencies("a", C0, "cycle") == [Job("a", None, "coldstart")]
    assert dag.dependencies("a", C2, "cycle") == [Job("a", C1, "cycle"), Job("a", C2, "dump")]


def test_every_dependency_is_a_job_of_the_study():
    dag = plan(("a", ArmJobs(ensemble_jobs=("efcs01",))), ("b", ArmJobs("cycle")), cycles=(C0, C1, C2, C3), keep=1)
    measured = set(dag.measured_jobs())
    for job in dag.step_jobs():
        assert set(dag.dependencies(*job)) <= measured, job
    for arm, cycle, _ in dag.cleanups():
        assert set(dag.cleanup_dependencies(arm, cycle)) <= measured


def test_unknown_cycles_and_jobs_are_refused_with_their_names():
    dag = plan(("a", ArmJobs()), ("b", ArmJobs("cycle")))
    with pytest.raises(ValueError, match="cycle 2026010200 is not a cycle of study s"):
        dag.dependencies("a", "2026010200", "fcst")
    with pytest.raises(ValueError, match=f"arm a has no job prep in cycle {C0}"):
        dag.dependencies("a", C0, "prep")
    with pytest.raises(ValueError, match=f"arm b has no job fcst in cycle {C1}"):
        dag.dependencies("b", C1, "fcst")


def test_measured_jobs_are_the_cold_starts_the_dumps_the_steps_and_the_cleanups():
    dag = plan(("a", ArmJobs()), ("b", ArmJobs()))
    jobs = dag.measured_jobs()
    assert jobs[:2] == [Job("a", None, "coldstart"), Job("b", None, "coldstart")]
    assert jobs[2:6] == [Job("a", C1, "dump"), Job("b", C1, "dump"), Job("a", C2, "dump"), Job("b", C2, "dump")]
    assert jobs[6:] == dag.step_jobs()
    # with cycles.keep, the cleanup jobs' records (their cleanup phase) reach the tables too (rules/report.smk)
    kept = plan(("a", ArmJobs()), ("b", ArmJobs()), keep=1)
    assert kept.measured_jobs() == jobs + kept.cleanups()
    assert kept.cleanups() == [Job("a", C0, "cleanup"), Job("b", C0, "cleanup"), Job("a", C1, "cleanup"),
                               Job("b", C1, "cleanup")]


def test_no_cleanup_unless_cycles_keep_is_set():
    assert plan(("a", ArmJobs())).cleanups() == []
    assert plan(("a", ArmJobs()), keep=0).cleanups() == []


def test_a_cycle_leaves_once_its_jobs_and_its_readers_are_done():
    dag = plan(("a", ArmJobs()), ("b", ArmJobs("cycle")), cycles=(C0, C1, C2, C3), keep=1)
    assert dag.cleanups() == [Job(arm, cycle, "cleanup") for cycle in (C0, C1, C2) for arm in ("a", "b")]
    assert dag.cleanup_dependencies("a", C0) == [Job("a", C0, "fcst"), Job("a", C0, "post"),
                                                 Job("a", C1, "anal"), Job("a", C1, "fcst")]
    assert dag.cleanup_dependencies("b", C1) == [Job("b", C1, "cycle"), Job("b", C2, "cycle")]
    keep2 = plan(("a", ArmJobs()), cycles=(C0, C1, C2, C3), keep=2)
    assert keep2.cleanups() == [Job("a", C0, "cleanup"), Job("a", C1, "cleanup")]
    assert keep2.cleanup_dependencies("a", C0) == [
        Job("a", C0, "fcst"), Job("a", C0, "post"),
        *(Job("a", C1, name) for name in ("prep", "anal", "fcst", "post")),
        Job("a", C2, "anal"), Job("a", C2, "fcst"),
    ]
    with pytest.raises(ValueError, match=f"arm a has no cleanup of cycle {C2}"):
        keep2.cleanup_dependencies("a", C2)  # one of the last two cycles: it stays


def test_a_study_gives_the_same_jobs_as_the_inventory(default_config):
    config = with_changes(default_config, cycles={"start": C0, "end": C2, "keep": 1},
                          staging={"granularity": ["step", "cycle"]}, ensemble={"members": 3, "members_per_job": 2})
    study = build_study(validate_config(config))
    dag = CycledJobs.of_study(study)
    assert dag.keep == 1 and dag.cycles == tuple(study.cycles) and list(dag.arms) == list(study.arms)
    assert dag.arms["shm_per_cycle"] == ArmJobs("cycle", ("efcs01", "efcs02"))
    assert dag.arms["lustre"] == ArmJobs("step", ("efcs01", "efcs02"))  # the baseline stages nothing: per step
    for name, arm in study.arms.items():
        inventory = {(cycle if job != "coldstart" else None, job) for cycle, job, _ in arm_jobs(arm, study.cycles)}
        # the inventory lists the jobs that write files: every measured job but the cleanups
        measured = {(cycle, job) for a, cycle, job in dag.measured_jobs() if a == name}
        assert inventory == {(cycle, job) for cycle, job in measured if job != "cleanup"}, name
        assert {job for _, job in measured - inventory} == {"cleanup"}, name


# ------------------------------------------------------------------ replay jobs from Darshan logs (config darshan)

INPUTS = Job("a", None, "darshan_inputs")


def test_a_replay_job_after_a_step_and_one_first_in_the_cycle():
    dag = plan(("a", ArmJobs(replays=(("darshan_wrf", "fcst"), ("darshan_io", "first")))), keep=1)
    assert dag.jobs_of_cycle("a", C1) == ["prep", "anal", "fcst", "post", "darshan_wrf", "darshan_io"]
    needs = {(cycle, name): dag.dependencies("a", cycle, name) for _, cycle, name in dag.step_jobs()}
    # after fcst: beside post; first: the cycle's first step waits for it, and it for the previous cycle
    assert needs[(C1, "darshan_wrf")] == [INPUTS, Job("a", C1, "fcst")]
    assert needs[(C1, "darshan_io")] == [INPUTS, Job("a", C0, "post"), Job("a", C0, "darshan_wrf"),
                                         Job("a", C0, "darshan_io")]
    assert needs[(C1, "prep")] == [Job("a", C0, "post"), Job("a", C1, "dump"), Job("a", C1, "darshan_io"),
                                   Job("a", C0, "darshan_wrf"), Job("a", C0, "darshan_io")]
    assert needs[(C1, "anal")] == [Job("a", C1, "prep"), Job("a", C0, "fcst")]  # the other steps as they were
    # the half cycle: its first step is fcst
    assert needs[(C0, "darshan_io")] == [INPUTS]
    assert needs[(C0, "fcst")] == [Job("a", None, "coldstart"), Job("a", C0, "darshan_io")]
    # a finished cycle leaves the persistent tier once its replay jobs are done too; the archive does not wait for them
    assert Job("a", C0, "darshan_wrf") in dag.cleanup_dependencies("a", C0)
    archived = CycledJobs("s", (C0, C1), dag.arms, 1, archive=True)
    assert archived.archive_dependencies("a", C1) == [Job("a", C1, step) for step in ("prep", "anal", "fcst", "post")]
    assert INPUTS in dag.measured_jobs() and Job("a", None, "coldstart") in dag.measured_jobs()


def test_a_replay_job_after_a_step_the_cycle_lacks_runs_first_and_with_cycle_granularity_after_the_cycle():
    dag = plan(("a", ArmJobs(replays=(("darshan_x", "prep"),))), ("b", ArmJobs("cycle", replays=(("darshan_x", "post"),))))
    assert dag.dependencies("a", C0, "darshan_x") == [Job("a", None, "darshan_inputs")]  # the half cycle has no prep
    assert Job("a", C0, "darshan_x") in dag.dependencies("a", C0, "fcst")
    assert dag.dependencies("a", C1, "darshan_x") == [INPUTS, Job("a", C1, "prep")]
    assert dag.dependencies("b", C1, "darshan_x") == [Job("b", None, "darshan_inputs"), Job("b", C1, "cycle")]
    assert Job("b", C0, "darshan_x") in dag.dependencies("b", C1, "cycle")


def test_cycles_of_replay_jobs_only():
    dag = plan(("a", ArmJobs(replays=(("darshan_x", "first"), ("darshan_y", "first")), only=True)), keep=1)
    assert dag.step_jobs()[:3] == [Job("a", C0, "darshan_x"), Job("a", C0, "darshan_y"), Job("a", C1, "darshan_x")]
    assert dag.dependencies("a", C0, "darshan_y") == [INPUTS]
    assert dag.dependencies("a", C1, "darshan_x") == [INPUTS, Job("a", C0, "darshan_x"), Job("a", C0, "darshan_y")]
    assert dag.measured_jobs()[0] == INPUTS and not [j for j in dag.measured_jobs() if j.name in ("coldstart", "dump")]
    assert dag.cleanup_dependencies("a", C0) == [Job("a", C0, "darshan_x"), Job("a", C0, "darshan_y")]
    with pytest.raises(ValueError, match="arm a has no job fcst"):
        dag.dependencies("a", C1, "fcst")
