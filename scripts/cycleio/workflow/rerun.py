"""Before any job: a run that would redo jobs reading a cycle whose files the cleanup already removed.

With ``cycles.keep`` a cycle's files leave the persistent tier once every job that reads them is done
(``cleanup_cycle``, whose inputs are those jobs' manifests). A later run that redoes some of those
jobs (a setting they read changed in a finished study, a manifest deleted) would start them without
their inputs and fail mid-study. Redoing all of them is fine: then the jobs that write the cycle's
files run again first (``--forcerun coldstart``, a new resolution).

Which jobs a run redoes is read from the jobs' own files, as Snakemake decides it: a job whose manifest is
missing, whose settings (its ``params``, kept in its manifest's provenance) differ from the study's now, or that
waits for a job redone or finished after it. A rerun Snakemake starts for other reasons (a changed rule,
``--forcerun`` of a step) is not foreseen; its jobs stop at their first missing input, naming it and cycles.keep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .dependencies import CycledJobs, Job

MANIFEST_SUFFIX = ".manifest.json"
MISSING = "its manifest is missing"
FOLLOWS = "it waits for a job redone or finished after it"


@dataclass(frozen=True)
class CleanedCycle:
    """A cycle whose cleanup finished before this run: its arm, its cycle, and the manifests of the jobs
    that read its files (the cleanup's inputs)."""

    arm: str
    cycle: str
    readers: tuple[str, ...]


def redone_readers(cleaned: list[CleanedCycle], to_run: set[str]) -> list[tuple[CleanedCycle, list[str]]]:
    """For each cleaned cycle of which this run redoes some readers but not all, those readers' manifests."""
    found = []
    for cycle in cleaned:
        redone = [path for path in cycle.readers if path in to_run]
        if redone and len(redone) < len(cycle.readers):
            found.append((cycle, redone))
    return found


def job_label(manifest: str) -> str:
    """``fcst of 2026010112`` for ``.../arms/<arm>/2026010112/fcst.manifest.json``."""
    path = Path(manifest)
    return f"{path.name.removesuffix(MANIFEST_SUFFIX)} of {path.parent.name}"


CAUSES_SHOWN = 4


def redone_after_cleanup_problem(cleaned: list[CleanedCycle], reasons: dict[str, str]) -> str | None:
    """The refusal for a run that would redo readers of a cleaned cycle, or None. ``reasons``: for every job manifest
    this run would make, why (:class:`Redone`); the jobs with a reason of their own (a changed setting, a missing
    manifest) are named as what starts the rerun."""
    found = redone_readers(cleaned, set(reasons))
    if not found:
        return None
    lines = [f"arm {cycle.arm}, cycle {cycle.cycle}: this run would redo "
             + ", ".join(job_label(path) for path in redone) for cycle, redone in found]
    causes = {f"{job_label(path)} in arm {Path(path).parent.parent.name}": why
              for path, why in reasons.items() if why != FOLLOWS}
    started = [f"{label} ({why})" for label, why in list(causes.items())[:CAUSES_SHOWN]]
    if len(causes) > CAUSES_SHOWN:
        started.append(f"{len(causes) - CAUSES_SHOWN} more")
    return ("the cleanup already removed the files these jobs read from the persistent tier (cycles.keep), "
            "so they would fail:\n  " + "\n  ".join(lines) + "\n"
            + (f"What starts the rerun: {', '.join(started)}.\n" if started else "")
            + "Run the study again from its cold start (make study ARGS=\"--forcerun coldstart\"), give the changed "
            "study a name of its own (--config study=NAME), or set cycles.keep: null to keep every cycle's files.")


@dataclass
class Redone:
    """Which of a study's jobs a run would redo, from their manifests: ``manifest_of(job)`` its manifest's path,
    ``settings_of(job)`` the settings the study gives it now (as its manifest's provenance keeps them)."""

    jobs: CycledJobs
    manifest_of: Callable[[Job], Path]
    settings_of: Callable[[Job], dict]
    _why: dict[Job, str | None] = field(default_factory=dict, init=False, repr=False)
    _finished: dict[Job, float] = field(default_factory=dict, init=False, repr=False)  # manifests' mtimes

    def why(self, job: Job) -> str | None:
        """Why this run redoes ``job`` (None: it does not). The jobs it waits for are judged first, so that a
        long study's chain of cycles is walked once, in order."""
        pending = [job]
        while pending:
            current = pending[-1]
            waits = [dep for dep in self._waits_for(current) if dep not in self._why]
            if waits:
                pending.extend(waits)
                continue
            pending.pop()
            if current not in self._why:
                self._why[current] = self._judge(current)
        return self._why[job]

    def _waits_for(self, job: Job) -> list[Job]:
        if job.cycle is None or job.name == "dump":
            return []
        if job.name in self.jobs.archive_jobs_of_cycle(job.arm, job.cycle):
            return self.jobs.archive_dependencies(job.arm, job.cycle, job.name)
        return self.jobs.dependencies(job.arm, job.cycle, job.name)

    def _judge(self, job: Job) -> str | None:
        path = self.manifest_of(job)
        try:
            finished = self._finished[job] = path.stat().st_mtime
            recorded = json.loads(path.read_text()).get("provenance", {}).get("settings")
        except FileNotFoundError:
            return MISSING
        if recorded is not None:  # a manifest from before provenance kept its settings: taken as unchanged
            now = self.settings_of(job)
            changed = sorted(key for key in recorded.keys() | now.keys() if recorded.get(key) != now.get(key))
            if changed:
                return f"changed: {', '.join(changed)}"
        for dep in self._waits_for(job):
            if self._why[dep] or self._finished[dep] > finished:  # judged first: a manifest found, its mtime kept
                return FOLLOWS
        return None

    def problem(self) -> str | None:
        """The refusal (:func:`redone_after_cleanup_problem`) for the cycles whose cleanup finished, or None."""
        cleaned = [cleanup for cleanup in self.jobs.cleanups() if self.manifest_of(cleanup).exists()]
        if not cleaned:
            return None
        cycles = []
        for cleanup in cleaned:
            readers = self.jobs.cleanup_dependencies(cleanup.arm, cleanup.cycle)
            cycles.append(CleanedCycle(cleanup.arm, cleanup.cycle, tuple(str(self.manifest_of(r)) for r in readers)))
            for reader in readers:
                self.why(reader)
        # every job found redone on the way, so that what starts the rerun is named where it starts
        reasons = {str(self.manifest_of(job)): why for job, why in self._why.items() if why}
        return redone_after_cleanup_problem(cycles, reasons)
