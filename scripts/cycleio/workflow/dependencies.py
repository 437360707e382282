"""The cycled DAG as plain values: which jobs a study runs, and which jobs each one waits for.

A job is ``Job(arm, cycle, name)``. ``name`` is a step (``prep``, ``anal``, ``fcst``, ``post``,
``efcsNN``), ``cycle`` (an arm staged per cycle runs all of a cycle's steps in one job), ``arch`` (the
cycle's archive job: it reads the cycle's products off the persistent tier into tarballs), ``earcNN`` (with an
ensemble, the archive job of a group of members: their history into enkfgdas_grpNN.tar), ``dump``
(a cycle's observation dumps arriving on the persistent tier) or ``cleanup`` (a finished cycle
leaving the persistent tier); the cold start is ``Job(arm, None, "coldstart")``. The rules turn jobs
into paths (rules/common.smk): no file name is known here. The Snakefile imports this at DAG time,
so it imports nothing but the calendar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from ..config.calendar import ensemble_archive_jobs, is_half_cycle, steps_of_cycle


class Job(NamedTuple):
    arm: str
    cycle: str | None  # None: the arm's cold start, made once before its first cycle
    name: str


# What each step of a full cycle waits for, in the GDAS order: ("this" or "previous" cycle, job).
# prep waits for the previous post so that the cycles of one arm do not overlap.
NEEDS = {
    "prep": (("previous", "post"), ("this", "dump")),
    "anal": (("this", "prep"), ("previous", "fcst")),
    "fcst": (("this", "anal"), ("previous", "fcst")),
    "post": (("this", "fcst"),),
}
# The jobs that read the previous cycle's data (its forecast, restarts and bias files).
READS_PREVIOUS_CYCLE = ("anal", "fcst", "cycle")


def jobs_of_cycle(cycle: str, first_cycle: str, granularity: str = "step",
                  ensemble_jobs: tuple[str, ...] = ()) -> list[str]:
    """The jobs of one cycle of an arm: its steps, or one job (``cycle``) for the whole cycle."""
    if granularity == "cycle":
        return ["cycle"]
    return list(steps_of_cycle(cycle, first_cycle, ensemble_jobs))


@dataclass(frozen=True)
class ArmJobs:
    """What the DAG needs to know of an arm: how it stages, its ensemble forecast jobs, and (archive on) each
    ensemble archive job of a full cycle with the ensemble forecast jobs whose members it archives."""

    granularity: str = "step"
    ensemble_jobs: tuple[str, ...] = ()
    ensemble_archives: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class CycledJobs:
    """Every job of a study's arms over its cycles, and what each job waits for.

    ``keep``: ``cycles.keep``, how many cycles stay on the persistent tier behind the newest
    (None or 0: every cycle stays, no cleanup job). ``archive``: every cycle of every arm has an ``arch`` job,
    after the cycle's steps and before its cleanup.
    """

    study: str
    cycles: tuple[str, ...]
    arms: dict[str, ArmJobs] = field(default_factory=dict)
    keep: int | None = None
    archive: bool = False

    @classmethod
    def of_study(cls, study) -> "CycledJobs":
        """From a config.settings.Study (its name, cycles, arms and keep)."""
        def earcs(arm) -> tuple:
            if not arm.archive or not arm.forecast.members:
                return ()
            return tuple(ensemble_archive_jobs(arm.forecast.members, arm.forecast.members_per_job,
                                               arm.archive["members_per_group"]).items())

        return cls(study.name, tuple(study.cycles),
                   {name: ArmJobs(arm.granularity, tuple(arm.forecast.ensemble_jobs), earcs(arm))
                    for name, arm in study.arms.items()},
                   study.keep, any(arm.archive for arm in study.arms.values()))

    def jobs_of_cycle(self, arm: str, cycle: str) -> list[str]:
        plan = self.arms[arm]
        return jobs_of_cycle(cycle, self.cycles[0], plan.granularity, plan.ensemble_jobs)

    def step_jobs(self) -> list[Job]:
        """Every arm's jobs in chronological order, so the DAG is built from the first cycle on."""
        return [Job(arm, cycle, name) for cycle in self.cycles for arm in self.arms
                for name in self.jobs_of_cycle(arm, cycle)]

    def measured_jobs(self) -> list[Job]:
        """The jobs whose records the study's tables hold: cold starts, observation dumps, steps, cleanups."""
        arrivals = [Job(arm, None, "coldstart") for arm in self.arms]
        arrivals += [Job(arm, cycle, "dump") for cycle in self.cycles[1:] for arm in self.arms]
        return arrivals + self.step_jobs() + self.archives() + self.cleanups()

    @cached_property
    def _position(self) -> dict[str, int]:
        return {cycle: index for index, cycle in enumerate(self.cycles)}

    def _previous(self, cycle: str) -> str:
        return self.cycles[self._position[cycle] - 1]

    def dependencies(self, arm: str, cycle: str, name: str) -> list[Job]:
        """The jobs one job waits for (GDAS order, the previous cycle's forecast included)."""
        if cycle not in self._position:
            raise ValueError(f"cycle {cycle} is not a cycle of study {self.study}")
        if name not in self.jobs_of_cycle(arm, cycle):
            raise ValueError(f"arm {arm} has no job {name} in cycle {cycle}")
        if cycle == self.cycles[0] and name in ("fcst", "cycle"):
            return [Job(arm, None, "coldstart")]
        if name == "cycle":
            return [Job(arm, self._previous(cycle), "cycle"), Job(arm, cycle, "dump")]
        if name.startswith("efcs"):  # the ensemble forecasts start from the cycle's analysis
            return [Job(arm, cycle, "anal")]
        return [Job(arm, cycle if which == "this" else self._previous(cycle), step) for which, step in NEEDS[name]]

    def archive_jobs_of_cycle(self, arm: str, cycle: str) -> list[str]:
        """An arm's archive jobs of a cycle: ``arch`` and, in a full cycle, its ensemble archive jobs ``earcNN``."""
        if not self.archive:
            return []
        earcs = [] if is_half_cycle(cycle, self.cycles[0]) else [name for name, _ in self.arms[arm].ensemble_archives]
        return ["arch", *earcs]

    def archives(self) -> list[Job]:
        """Every cycle's archive jobs of every arm, in chronological order (none when the archive is off)."""
        return [Job(arm, cycle, name) for cycle in self.cycles for arm in self.arms
                for name in self.archive_jobs_of_cycle(arm, cycle)]

    def archive_dependencies(self, arm: str, cycle: str, name: str = "arch") -> list[Job]:
        """The jobs whose files a cycle's archive job reads: for ``arch`` the cycle's own steps (not its ensemble
        forecasts), for ``earcNN`` the ensemble forecast jobs that write its group's members (the ``cycle`` job
        of an arm staged per cycle)."""
        if arm not in self.arms or cycle not in self._position or name not in self.archive_jobs_of_cycle(arm, cycle):
            raise ValueError(f"arm {arm} has no archive job {name} in cycle {cycle} (archive.enabled: {self.archive})")
        if name != "arch":
            if self.arms[arm].granularity == "cycle":
                return [Job(arm, cycle, "cycle")]
            return [Job(arm, cycle, job) for job in dict(self.arms[arm].ensemble_archives)[name]]
        return [Job(arm, cycle, job) for job in self.jobs_of_cycle(arm, cycle) if not job.startswith("efcs")]

    def cleanups(self) -> list[Job]:
        """Every cycle but the last ``keep`` leaves each arm's persistent tier."""
        if not self.keep:
            return []
        return [Job(arm, cycle, "cleanup") for cycle in self.cycles[: -self.keep] for arm in self.arms]

    def cleanup_dependencies(self, arm: str, cycle: str) -> list[Job]:
        """A cycle's data go once its own jobs are done, and every later job that reads them."""
        index = self._position.get(cycle)
        if arm not in self.arms or index is None or not self.keep or index >= len(self.cycles) - self.keep:
            raise ValueError(f"arm {arm} has no cleanup of cycle {cycle} (cycles.keep: {self.keep})")
        later = self.cycles[index + 1:][: self.keep]
        done = [Job(arm, c, name) for c in [cycle, *later[:-1]] for name in self.jobs_of_cycle(arm, c)]
        readers = [Job(arm, later[-1], name) for name in self.jobs_of_cycle(arm, later[-1])
                   if name in READS_PREVIOUS_CYCLE]
        archived = [Job(arm, cycle, name) for name in self.archive_jobs_of_cycle(arm, cycle)]  # they read its files
        return done + readers + archived
