"""A study from its config, every check made before any job: the keys (config.settings), the benchmark
plan (benchmarks.tierbench), the faults against the study's jobs (workflow.faultcheck), the replay jobs' Darshan
logs (workflow.darshanjobs) and the archive's limits against the tarballs' sizes (surrogates.archive_lists).

The command loads a study here (:func:`load_study`); the Snakefile loads it once per parse as a
:class:`WorkflowStudy`, which carries everything the rules read. config.settings alone validates the keys and
builds the arms, without the layers above it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..benchmarks.tierbench import BenchmarkPlan
from ..config.keys import ConfigError
from ..config.settings import ArmSettings, Study, build_study, validate_config
from ..storage.archive import ArchiveLimitError
from ..surrogates.archive_lists import check_archive_limits
from .dependencies import CycledJobs, Job
from .faultcheck import check_faults
from .rerun import Redone
from .darshanjobs import check_replay_jobs
from .slurm import layout_problems


def validate_study_config(config: dict, schema: dict | None = None) -> dict:
    """validate_config, then the benchmark plan's checks of its section (patterns, IOR's size rules, the
    tools found): the filled config, or ConfigError naming the first problem."""
    return _validated(config, schema)[0]


def _validated(config: dict, schema: dict | None = None) -> tuple[dict, BenchmarkPlan]:
    filled = validate_config(config, schema)
    return filled, BenchmarkPlan.from_config(filled)


def _checked_study(filled: dict) -> Study:
    study = build_study(filled)
    check_faults(filled, study)
    check_replay_jobs(study)  # the replay jobs' logs read and planned (none: nothing imported)
    problems = layout_problems(study)  # config job_layout against each job's tasks
    if problems:
        raise ConfigError("\n".join(problems))
    try:
        check_archive_limits(study)  # the archive's limits against the inventory's sizes, before any job
    except ArchiveLimitError as err:
        raise ConfigError(str(err)) from None
    return study


def load_study(config: dict, schema: dict | None = None) -> tuple[dict, Study]:
    """The filled config and its Study, every check passed (ConfigError naming the key otherwise); the schema is the
    package's (config.schema)."""
    filled, _ = _validated(config, schema)
    return filled, _checked_study(filled)


@dataclass
class WorkflowStudy:
    """What the Snakefile and rules read of a study, built once per parse (:meth:`load`): the filled config, the
    Study (cycles x arms), its benchmark plan, its jobs and what each waits for, the titles of its figures, and each
    job's settings as params."""

    config: dict
    study: Study
    bench: BenchmarkPlan
    _job_json: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def load(cls, config: dict, schema: dict | None = None) -> "WorkflowStudy":
        """As :func:`load_study`: ConfigError naming the key when a check fails."""
        filled, bench = _validated(config, schema)
        return cls(filled, _checked_study(filled), bench)

    @property
    def name(self) -> str:
        return self.study.name

    @property
    def cycles(self) -> list[str]:
        return self.study.cycles

    @property
    def arms(self) -> dict[str, ArmSettings]:
        return self.study.arms

    @cached_property
    def jobs(self) -> CycledJobs:
        """Every job of the study and what it waits for."""
        return CycledJobs.of_study(self.study)

    def settings_given(self, job: Job) -> dict:
        """The settings the study gives a job now (its params, :meth:`job_json`), as its manifest keeps them."""
        return json.loads(self.job_json(job.arm, job.name, job.cycle))

    def redone_after_cleanup(self, manifest_of) -> str | None:
        """The refusal of a run that would redo some readers of a cycle the cleanup removed (workflow.rerun), or
        None; ``manifest_of(job)``: where a job's manifest is (rules/common.smk's job_file)."""
        return Redone(self.jobs, lambda job: Path(manifest_of(job)), self.settings_given).problem()

    def title(self, what: str | None = None) -> str:
        """A figure's or summary's title: the study, ``what`` it shows (by default its resolution and levels, or its
        replay jobs with darshan.only), and its cycles."""
        if what is None:
            what = "replay jobs from Darshan logs" if self.config["darshan"]["only"] else self.grid
            return f"cycleio study '{self.name}': {what}, {len(self.cycles)} cycles"
        return f"cycleio study '{self.name}': {what}"

    @property
    def grid(self) -> str:
        """``C48 L127``: the study's resolution and levels."""
        return f"{self.config['resolution']} L{self.config['levels']}"

    def job_json(self, arm: str, job: str, cycle: str | None = None) -> str:
        """ArmSettings.job_json of an arm's job, made once per kind of job: a job's settings depend on its cycle
        only through its paired replay (the last cycles) and the faults aimed at it."""
        settings = self.study.arms[arm]
        key = (arm, job, cycle in settings.paired_cycles, cycle if settings.faults else None)
        if key not in self._job_json:
            self._job_json[key] = settings.job_json(job, cycle)
        return self._job_json[key]

    def inventory_json(self) -> str:
        """The study's cycles and what the inventory table reads of every arm's settings."""
        arms = [arm.job_json("inventory") for arm in self.arms.values()]
        return json.dumps({"cycles": self.cycles, "arms": arms})

    @cached_property
    def capacity_target_json(self) -> str:
        """The capacity plan's target: the study's first arm and first two cycles (a half and a full one) at config
        key plan.resolution (the inventory's settings only: the faults and the archive's limits were checked at the
        study's own resolution)."""
        study = build_study(validate_config({**self.config, "resolution": self.config["plan"]["resolution"]}))
        check_replay_jobs(study)  # their logs' paths and checksums are in the settings
        arm = next(iter(study.arms.values()))
        return json.dumps({"cycles": study.cycles[:2], "arms": [arm.job_json("inventory")]})
