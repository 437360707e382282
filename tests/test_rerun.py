"""A run that would redo some readers of a cycle the cleanup removed is refused before any job (unit tests of
workflow.rerun; tests/test_archive_workflow.py refuses such a run of the smoke study through Snakemake)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cycleio.workflow.dependencies import ArmJobs, CycledJobs, Job
from cycleio.workflow.rerun import FOLLOWS, MISSING, CleanedCycle, Redone, redone_after_cleanup_problem, redone_readers

ARMS = "results/s/arms/lustre"
READERS = tuple(f"{ARMS}/{cycle}/{step}.manifest.json"
                for cycle, step in [("2026010100", "anal"), ("2026010100", "fcst"), ("2026010106", "anal"),
                                    ("2026010106", "fcst")])
CLEANED = [CleanedCycle("lustre", "2026010100", READERS)]


def test_redoing_some_readers_of_a_cleaned_cycle_is_named():
    assert redone_readers(CLEANED, {READERS[3]}) == [(CLEANED[0], [READERS[3]])]


def test_redoing_all_readers_or_none_is_fine():
    """--forcerun coldstart redoes every reader, and the jobs writing the cycle's files before them."""
    assert redone_readers(CLEANED, set(READERS)) == []
    assert redone_readers(CLEANED, {f"{ARMS}/2026010112/post.manifest.json"}) == []
    assert redone_after_cleanup_problem(CLEANED, {path: MISSING for path in READERS}) is None


def test_the_refusal_names_the_cycle_the_jobs_what_starts_it_and_the_ways_out():
    reasons = {READERS[2]: "changed: staging", READERS[3]: FOLLOWS}
    problem = redone_after_cleanup_problem(CLEANED, reasons)
    assert "arm lustre, cycle 2026010100: this run would redo anal of 2026010106, fcst of 2026010106\n" in problem
    assert "What starts the rerun: anal of 2026010106 in arm lustre (changed: staging).\n" in problem
    assert '--forcerun coldstart' in problem and "--config study=NAME" in problem and "cycles.keep: null" in problem


def test_many_causes_are_counted_past_the_first_few():
    readers = tuple(f"{ARMS}/2026010106/s{k}.manifest.json" for k in range(7))
    reasons = {path: MISSING for path in readers[:6]}
    problem = redone_after_cleanup_problem([CleanedCycle("lustre", "2026010100", readers)], reasons)
    assert f"s3 of 2026010106 in arm lustre ({MISSING}), 2 more." in problem


# ---------------------------------------------------------------- which jobs a run redoes, from their manifests

CYCLES = ("2026010100", "2026010106", "2026010112", "2026010118")


class Finished:
    """A finished study of one arm with cycles.keep 1 (every job's manifest, the first two cycles cleaned), its
    settings per job as the study gives them now."""

    def __init__(self, root: Path):
        self.root = root
        self.jobs = CycledJobs("s", CYCLES, {"lustre": ArmJobs()}, keep=1)
        self.settings = {}
        order = [Job("lustre", None, "coldstart")] + [Job("lustre", c, "dump") for c in CYCLES[1:]]
        order += self.jobs.step_jobs() + self.jobs.cleanups()
        for tick, job in enumerate(order):
            self.write(job, tick)
        for job in self.jobs.cleanups()[1:]:  # the last cleanup has not run yet
            self.manifest(job).unlink()

    def manifest(self, job: Job) -> Path:
        return self.root / job.arm / (job.cycle or ".") / f"{job.name}.manifest.json"

    def write(self, job: Job, tick: float, settings: dict | None = None) -> None:
        path = self.manifest(job)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"provenance": {"settings": settings or self.now(job)}}))
        os.utime(path, (1_800_000_000 + tick, 1_800_000_000 + tick))

    def now(self, job: Job) -> dict:
        return self.settings.get(job.name, {"staging": {"streams": 4}, "step": job.name})

    def redone(self) -> Redone:
        return Redone(self.jobs, self.manifest, self.now)


def test_a_finished_study_redoes_nothing(tmp_path):
    study = Finished(tmp_path)
    assert study.redone().problem() is None


def test_a_missing_manifest_of_one_reader_is_refused_and_named_as_the_cause(tmp_path):
    study = Finished(tmp_path)
    study.manifest(Job("lustre", CYCLES[1], "anal")).unlink()
    problem = study.redone().problem()
    assert "arm lustre, cycle 2026010100: this run would redo anal of 2026010106, fcst of 2026010106" in problem
    assert f"What starts the rerun: anal of 2026010106 in arm lustre ({MISSING})." in problem


def test_a_changed_setting_redoes_its_jobs_and_every_job_after_them(tmp_path):
    """anal's staging changed: every anal reruns, and each fcst waits for its anal; the first cycle's fcst and post
    are not redone, so its cleaned readers are split."""
    study = Finished(tmp_path)
    study.settings["anal"] = {"staging": {"streams": 8}, "step": "anal"}
    redone = study.redone()
    assert redone.why(Job("lustre", CYCLES[1], "anal")) == "changed: staging"
    assert redone.why(Job("lustre", CYCLES[1], "fcst")) == FOLLOWS
    assert redone.why(Job("lustre", CYCLES[0], "fcst")) is None and redone.why(Job("lustre", CYCLES[0], "post")) is None
    problem = redone.problem()
    assert "cycle 2026010100: this run would redo anal of 2026010106, fcst of 2026010106\n" in problem
    assert "What starts the rerun: anal of 2026010106 in arm lustre (changed: staging)." in problem


def test_a_job_finished_before_one_it_waits_for_is_redone(tmp_path):
    """A run killed after a job was redone but before the jobs after it: Snakemake redoes them (an input newer than
    the output), and so does the check."""
    study = Finished(tmp_path)
    study.write(Job("lustre", CYCLES[2], "anal"), tick=10_000)
    redone = study.redone()
    assert redone.why(Job("lustre", CYCLES[2], "anal")) is None
    assert redone.why(Job("lustre", CYCLES[2], "fcst")) == FOLLOWS and redone.why(Job("lustre", CYCLES[3], "fcst")) == FOLLOWS


def test_a_manifest_from_before_settings_were_kept_counts_as_unchanged(tmp_path):
    study = Finished(tmp_path)
    job = Job("lustre", CYCLES[1], "anal")
    path = study.manifest(job)
    stamp = path.stat().st_mtime
    path.write_text(json.dumps({"provenance": {}}))
    os.utime(path, (stamp, stamp))
    study.settings["anal"] = {"changed": True}
    assert study.redone().why(job) is None


def test_a_long_study_is_walked_without_deep_recursion(tmp_path):
    """2,000 cycles of one arm: the chain from the last job back to the cold start is judged in order."""
    import datetime

    start = datetime.datetime(2026, 1, 1)
    cycles = tuple((start + datetime.timedelta(hours=6 * k)).strftime("%Y%m%d%H") for k in range(2000))
    jobs = CycledJobs("s", cycles, {"lustre": ArmJobs()}, keep=1)
    missing = Redone(jobs, lambda job: tmp_path / "none.json", lambda job: {})
    assert missing.why(Job("lustre", cycles[-1], "post")) == MISSING
