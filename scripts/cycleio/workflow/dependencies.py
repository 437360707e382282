"""The cycled DAG as plain values: which jobs a study runs, and which jobs each one waits for.

A job is ``Job(arm, cycle, name)``. ``name`` is a step (``prep``, ``anal``, ``fcst``, ``post``,
``efcsNN``), ``cycle`` (an arm staged per cycle runs all of a cycle's steps in one job), ``arch`` (the
cycle's archive job: it reads the cycle's products off the persistent tier into tarballs), ``earcNN`` (with an
ensemble, the archive job of a group of members: their history into enkfgdas_grpNN.tar), ``dump``
(a cycle's observation dumps arriving on the persistent tier), ``cleanup`` (a finished cycle
leaving the persistent tier) or ``darshan_<name>`` (a replay job from a Darshan log, config ``darshan.jobs``);
the cold start is ``Job(arm, None, "coldstart")`` and the replay jobs' input files, laid out once per arm,
``Job(arm, None, "darshan_inputs")``.

A replay job runs after the step its config names (``after``) in the same cycle, or first: then the cycle's first
step waits for it, and it waits for the previous cycle (its post and replay jobs). Every cycle's first step waits
for the previous cycle's replay jobs, so cycles do not overlap. With ``darshan.only`` a cycle has replay jobs only,
each waiting for the previous cycle's. The rules turn jobs
into paths (rules/common.smk): no file name is known here. The Snakefile imports this at DAG time,
so it imports nothing but the calendar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import NamedTuple

from ..config.calendar import ensemble_archive_jobs, steps_of_cycle
from ..config.keys import DARSHAN_INPUTS, DARSHAN_PREFIX, is_replay_job


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
    return list(_jobs_of_cycle(cycle, first_cycle, granularity, tuple(ensemble_jobs)))


@lru_cache(maxsize=4096)  # the DAG asks for each cycle's jobs many times over
def _jobs_of_cycle(cycle: str, first_cycle: str, granularity: str, ensemble_jobs: tuple[str, ...]) -> tuple[str, ...]:
    if granularity == "cycle":
        return ("cycle",)
    return steps_of_cycle(cycle, first_cycle, ensemble_jobs)


@dataclass(frozen=True)
class ArmJobs:
    """What the DAG needs to know of an arm: how it stages, its ensemble forecast jobs, and (archive on) each
    ensemble archive job of a full cycle with the ensemble forecast jobs whose members it archives."""

    granularity: str = "step"
    ensemble_jobs: tuple[str, ...] = ()
    replays: tuple[tuple[str, str], ...] = ()  # (replay job darshan_<name>, the step it runs after or "first")
    only: bool = False  # config darshan.only: cycles of replay jobs only
    ensemble_archives: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (earcNN, the efcsNN jobs it reads)


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
        def replays(arm):
            return tuple((DARSHAN_PREFIX + name, job["after"]) for name, job in arm.darshan.get("jobs", {}).items())

        def earcs(arm) -> tuple:
            if not arm.archive or not arm.forecast.members:
                return ()
            return tuple(ensemble_archive_jobs(arm.forecast.members, arm.forecast.members_per_job,
                                               arm.archive["members_per_group"]).items())

        return cls(study.name, tuple(study.cycles),
                   {name: ArmJobs(arm.granularity, tuple(arm.forecast.ensemble_jobs), replays(arm),
                                  bool(arm.darshan.get("only")), earcs(arm))
                    for name, arm in study.arms.items()},
                   study.keep, any(arm.archive for arm in study.arms.values()))

    def gdas_jobs(self, arm: str, cycle: str) -> list[str]:
        """The GDAS steps of one cycle of an arm (none with darshan.only)."""
        plan = self.arms[arm]
        return [] if plan.only else jobs_of_cycle(cycle, self.cycles[0], plan.granularity, plan.ensemble_jobs)

    def jobs_of_cycle(self, arm: str, cycle: str) -> list[str]:
        """The GDAS steps of one cycle of an arm, then its replay jobs."""
        return self.gdas_jobs(arm, cycle) + [name for name, _ in self.arms[arm].replays]

    def _followed(self, arm: str, cycle: str, after: str) -> str | None:
        """The job of ``cycle`` a replay job with ``after`` runs after; None when it runs first in the cycle."""
        steps = self.gdas_jobs(arm, cycle)
        if after == "first" or not steps:
            return None
        if "cycle" in steps:
            return "cycle"
        return after if after in steps else None

    def _previous_cycle_done(self, arm: str, cycle: str) -> list[Job]:
        """What a cycle's first jobs wait for of the previous cycle beyond their GDAS order: its replay jobs (and
        with darshan.only, or for a replay job, its last GDAS step)."""
        if self._position[cycle] == 0:
            return []
        previous = self._previous(cycle)
        return [Job(arm, previous, name) for name in self.jobs_of_cycle(arm, previous)
                if is_replay_job(name) or name in ("post", "cycle")]

    def _replay_dependencies(self, arm: str, cycle: str, name: str) -> list[Job]:
        after = dict(self.arms[arm].replays)[name]
        followed = self._followed(arm, cycle, after)
        return [Job(arm, None, DARSHAN_INPUTS),
                *([Job(arm, cycle, followed)] if followed else self._previous_cycle_done(arm, cycle))]

    def _first_replays(self, arm: str, cycle: str) -> list[Job]:
        """The replay jobs that run first in ``cycle`` (its first GDAS step waits for them), and the previous cycle's
        replay jobs."""
        first = [Job(arm, cycle, name) for name, after in self.arms[arm].replays
                 if self._followed(arm, cycle, after) is None]
        previous = [job for job in self._previous_cycle_done(arm, cycle) if is_replay_job(job.name)]
        return first + previous

    def step_jobs(self) -> list[Job]:
        """Every arm's jobs in chronological order, so the DAG is built from the first cycle on."""
        return [Job(arm, cycle, name) for cycle in self.cycles for arm in self.arms
                for name in self.jobs_of_cycle(arm, cycle)]

    def measured_jobs(self) -> list[Job]:
        """The jobs whose records the study's tables hold: cold starts, observation dumps, steps, cleanups."""
        arrivals = [Job(arm, None, "coldstart") for arm, plan in self.arms.items() if not plan.only]
        arrivals += [Job(arm, None, DARSHAN_INPUTS) for arm, plan in self.arms.items() if plan.replays]
        arrivals += [Job(arm, cycle, "dump") for cycle in self.cycles[1:] for arm, plan in self.arms.items()
                     if not plan.only]
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
        if is_replay_job(name):
            return self._replay_dependencies(arm, cycle, name)
        steps = self.gdas_jobs(arm, cycle)
        extra = self._first_replays(arm, cycle) if name == steps[0] else []
        return self._gdas_dependencies(arm, cycle, name) + extra

    def _gdas_dependencies(self, arm: str, cycle: str, name: str) -> list[Job]:
        if cycle == self.cycles[0] and name in ("fcst", "cycle"):
            return [Job(arm, None, "coldstart")]
        if name == "cycle":
            return [Job(arm, self._previous(cycle), "cycle"), Job(arm, cycle, "dump")]
        if name.startswith("efcs"):  # the ensemble forecasts start from the cycle's analysis
            return [Job(arm, cycle, "anal")]
        needs = [Job(arm, cycle if which == "this" else self._previous(cycle), step) for which, step in NEEDS[name]]
        if name == "anal":  # the hybrid analysis takes its ensemble from the previous cycle's ensemble forecasts
            previous = self._previous(cycle)
            needs += [Job(arm, previous, job) for job in self.jobs_of_cycle(arm, previous) if job.startswith("efcs")]
        return needs

    def archive_jobs_of_cycle(self, arm: str, cycle: str) -> list[str]:
        """An arm's archive jobs of a cycle: ``arch`` and, in a full cycle, its ensemble archive jobs ``earcNN``."""
        if not self.archive:
            return []
        plan = self.arms[arm]
        earcs = [] if plan.only or cycle == self.cycles[0] else [name for name, _ in plan.ensemble_archives]
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
        return [Job(arm, cycle, job) for job in self.gdas_jobs(arm, cycle) if not job.startswith("efcs")]

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
