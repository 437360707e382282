"""Before any job: a run that would redo jobs reading a cycle whose files the cleanup already removed.

With ``cycles.keep`` a cycle's files leave the persistent tier once every job that reads them is done
(``cleanup_cycle``, whose inputs are those jobs' manifests). A later run that redoes some of those
jobs (a setting they read changed in a finished study, a manifest deleted) would start them without
their inputs and fail mid-study. Redoing all of them is fine: then the jobs that write the cycle's
files run again first (``--forcerun coldstart``, a new resolution).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MANIFEST_SUFFIX = ".manifest.json"


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


# Snakemake's reasons that only follow from another job's rerun (reason.get_names())
FOLLOWING = frozenset({"input files updated by another job", "updated input files"})
CAUSES_SHOWN = 4


def redone_after_cleanup_problem(cleaned: list[CleanedCycle], reasons: dict[str, list[str]]) -> str | None:
    """The refusal for a run that would redo readers of a cleaned cycle, or None. ``reasons``: for every output
    this run would make, why Snakemake makes it (its reason's names); the jobs with a reason of their own (a
    changed setting, a missing output) are named as what starts the rerun."""
    found = redone_readers(cleaned, set(reasons))
    if not found:
        return None
    lines = [f"arm {cycle.arm}, cycle {cycle.cycle}: this run would redo "
             + ", ".join(job_label(path) for path in redone) for cycle, redone in found]
    causes = {}
    for path, names in reasons.items():
        own = [name for name in names if name not in FOLLOWING]
        if own and path.endswith(MANIFEST_SUFFIX):
            causes[f"{job_label(path)} in arm {Path(path).parent.parent.name}"] = "; ".join(own)
    started = [f"{label} ({why})" for label, why in list(causes.items())[:CAUSES_SHOWN]]
    if len(causes) > CAUSES_SHOWN:
        started.append(f"{len(causes) - CAUSES_SHOWN} more")
    return ("the cleanup already removed the files these jobs read from the persistent tier (cycles.keep), "
            "so they would fail:\n  " + "\n  ".join(lines) + "\n"
            + (f"What starts the rerun: {', '.join(started)}.\n" if started else "")
            + "Run the study again from its cold start (make study ARGS=\"--forcerun coldstart\"), give the changed "
            "study a name of its own (--config study=NAME), or set cycles.keep: null to keep every cycle's files.")
