"""Checks before any job runs: every tier can be written, and the study fits on it."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from ..config.settings import ConfigError, Study
from ..surrogates.grid import Grid
from .catalog import arm_jobs, inventory_rows
from .darshanjobs import check_replay_ranks, replay_job_files, replay_room_problem
from ..config.keys import is_replay_job
from ..surrogates.inventory import job_files
from ..surrogates.kinds import expected_bytes
from ..config.tierspec import JOB_TIME_VARIABLES, Tier, TierError, expand_tier_path
from ..storage.archive import tar_bytes
from ..surrogates.archive_lists import cycle_expected_members
from ..units import format_bytes
from ..storage.tiers import (claim_study_folder, filesystem_type, free_bytes, nearest_existing, owner_problem,
                             private_folders, study_folder_owner, unwritable_reason)

# Room asked beyond the inventory's estimate: records, manifests, a job's temporaries and the
# file system's own overhead are not in it (a tier sized at the estimate filled in the last job).
MARGIN_FRACTION = 0.10
MARGIN_MIN_BYTES = 32 * 2**20


def margin_bytes(wanted: int) -> int:
    return int(max(MARGIN_FRACTION * wanted, MARGIN_MIN_BYTES)) if wanted > 0 else 0


def held_bytes(bytes_per_cycle: list[int], keep: int | None) -> int:
    """Most bytes an arm holds on its persistent tier at once.

    With cleanup, cycle c goes once the ``keep`` cycles after it have read it, while the cycle after
    those may already be writing: at most ``keep + 2`` consecutive cycles are there together.
    """
    if keep is None:
        return sum(bytes_per_cycle)
    window = keep + 2
    return max(sum(bytes_per_cycle[i:i + window]) for i in range(max(1, len(bytes_per_cycle) - window + 1)))


def study_needs(study: Study) -> dict[str, dict]:
    """Estimated bytes per tier: the outputs held at once on the persistent tier, the largest job on scratch, every
    cycle's tarballs on the archive tier.

    Sized from the half cycle and the first full one: every later cycle writes the same files under its own date
    (surrogates.archive_lists.check_archive_limits counts on this too), so a long study sizes as fast as a short one.
    """
    persistent: dict[str, int] = defaultdict(int)
    scratch: dict[str, int] = defaultdict(int)
    sized = study.cycles[:2]
    for arm in study.arms.values():
        by_cycle = dict.fromkeys(sized, 0)
        for row in inventory_rows(arm, sized):
            by_cycle[row["cycle"]] += row["expected_bytes"]
        persistent[arm.persistent.name] += held_bytes(_every_cycle(list(by_cycle.values()), study.cycles), study.keep)
        if arm.staged:
            _largest_job_on_scratch(arm, study, scratch)
        if arm.archive:  # the archive keeps every cycle's tarballs (arch's and the earc jobs')
            tarred = [sum(tar_bytes(members) for members in cycle_expected_members(cycle, arm).values())
                      for cycle in sized]
            persistent[arm.archive["tier"]["name"]] += sum(_every_cycle(tarred, study.cycles))
    return {name: {"persistent_bytes": persistent.get(name, 0), "scratch_bytes": scratch.get(name, 0)}
            for name in set(persistent) | set(scratch)}


def _largest_job_on_scratch(arm, study: Study, scratch: dict[str, int]) -> None:
    """The largest job of a staged arm's first two cycles on its scratch tier: its inputs and outputs there at once."""
    grid = Grid(arm.resolution, arm.levels)
    for cycle, name, steps in arm_jobs(arm, study.cycles[:2]):
        if is_replay_job(name) and cycle == study.cycles[0]:
            # a replay job's files in its folder on scratch (the same every cycle)
            scratch[arm.scratch.name] = max(scratch[arm.scratch.name], replay_job_files(arm, name).room_bytes)
        if steps:
            inputs, outputs, _ = job_files(arm, cycle, steps)
            job = sum(expected_bytes(spec, grid, arm.compression) for spec in inputs + outputs)
            scratch[arm.scratch.name] = max(scratch[arm.scratch.name], job)


def _every_cycle(first_two: list[int], cycles: list[str]) -> list[int]:
    """Per cycle of the study, from the half cycle's and the first full cycle's numbers."""
    return first_two[:1] + first_two[1:] * (len(cycles) - 1)


def _existing_bytes(root: Path) -> int:
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def dry_run_requested(argv: list[str]) -> bool:
    """Whether Snakemake's command line asks for a dry run (``-n``, ``--dry-run``, ``--dryrun``, or ``n`` among
    grouped short flags such as ``-np``): Snakemake's own ``workflow.dryrun`` is not set yet while the Snakefile
    is parsed."""
    return any(arg in ("--dry-run", "--dryrun") or (arg.startswith("-") and not arg.startswith("--")
                                                    and arg[1:].isalpha() and "n" in arg[1:]) for arg in argv)


def check_study(study: Study, local_exec: bool = True, jobs_here: bool = False, claim: bool = False,
                dry_run: bool = False) -> list[str]:
    """Raise ConfigError on a tier that cannot be written or cannot hold the study, or whose study folder
    another checkout has claimed; return notes. ``dry_run``: a tier short of room is a note (what a real run
    would be refused for), so a dry run still shows the jobs.

    ``local_exec``: the node-local tiers are this host's. ``jobs_here``: the jobs are known to run
    here (Snakemake tells once the workflow starts), so a batch system's variable unset here stays unset.
    ``claim``: claim the study's folder on every tier checked here for this checkout (once the workflow
    starts; a dry run only checks), so of two checkouts starting at once the second is refused before any job.
    """
    tiers = {arm.persistent.name: arm.persistent for arm in study.arms.values()}
    tiers.update({arm.scratch.name: arm.scratch for arm in study.arms.values()})
    tiers.update({arm.archive["tier"]["name"]: Tier(**arm.archive["tier"]) for arm in study.arms.values()
                  if arm.archive and not arm.archive.get("remote")})
    needs = study_needs(study)
    if jobs_here:
        check_replay_ranks(study)
    notes = [f"tier '{name}' is a remote archive (archive.remote): not checked here, its commands write it"
             for name in sorted({arm.archive["tier"]["name"] for arm in study.arms.values()
                                 if arm.archive and arm.archive.get("remote")})]
    by_filesystem: dict[int, list] = {}
    claims: list[tuple[str, Path]] = []
    for name, tier in tiers.items():
        try:
            path = expand_tier_path(name, tier.path, study.name, tolerate=JOB_TIME_VARIABLES)
            if jobs_here:
                expand_tier_path(name, tier.path, study.name)
        except TierError as err:
            hint = ("; this run executes its jobs here, not under a batch system: run it under one "
                    "(--profile profiles/slurm) or give the variable a default" if jobs_here else "")
            raise ConfigError(f"{err}{hint}") from None
        if "$" in str(path) or not (local_exec or tier.shared):
            notes.append(f"tier '{name}' is checked inside each job (its path or node is known only there)")
            continue
        if not tier.persistent:  # scratch in /tmp or /dev/shm: this user's alone, made so when claimed
            try:
                private_folders(name, path, create=claim)
            except TierError as err:
                raise ConfigError(str(err)) from None
            except OSError:
                pass  # the write probe below says what is wrong
        reason = unwritable_reason(path)  # first: a folder that cannot be written is not a question of room
        if reason:
            raise ConfigError(f"tier '{name}': path {str(path)!r} cannot be written: {reason}; "
                              f"set tiers.{name}.path to a folder this user can write")
        try:
            problem = owner_problem(name, path, study.name, study_folder_owner(path, study.name))
        except OSError as err:
            raise ConfigError(str(err)) from None
        if problem:
            raise ConfigError(problem)
        claims.append((name, path))
        problem = replay_room_problem(study, name, path)  # a replay job alone too large: name the scale that fits
        if problem:
            raise ConfigError(problem)
        need = needs.get(name, {})
        existing = _existing_bytes(path / study.name) if need.get("persistent_bytes") else 0
        wanted = max(0, need.get("persistent_bytes", 0) - existing) + need.get("scratch_bytes", 0)
        by_filesystem.setdefault(_device(path), []).append((name, path, need, existing, wanted))
    for demands in by_filesystem.values():
        try:
            _check_room(demands)
        except ConfigError as err:
            if not dry_run:
                raise
            notes.append(f"a real run would not start: {err}")
    # claimed once every check passed: a refused run leaves no claim (nor a study folder) behind
    for name, path in claims if claim else ():
        try:
            claim_study_folder(name, path, study.name)
        except (TierError, OSError) as err:
            raise ConfigError(str(err)) from None
    return notes


def _device(path: Path) -> int:
    return os.stat(nearest_existing(path)).st_dev


def _check_room(demands: list[tuple[str, Path, dict, int, int]]) -> None:
    """Tiers on one filesystem share its free space: refuse the study when their needs add up past it."""
    path = demands[0][1]
    estimate = sum(demand[4] for demand in demands)
    margin = margin_bytes(estimate)
    free, wanted = free_bytes(path), estimate + margin
    if wanted <= free:
        return
    stated = (f"and a margin of {format_bytes(margin)} ({MARGIN_FRACTION:.0%}, at least "
              f"{format_bytes(MARGIN_MIN_BYTES)}) for records, temporaries and file-system overhead")
    if len(demands) == 1:
        name, path, need, existing, _ = demands[0]
        raise ConfigError(
            f"tier '{name}' ({path}, {filesystem_type(path)}) has {format_bytes(free)} free, but the study needs "
            f"about {format_bytes(wanted)} more (estimated from the file inventory: "
            f"{format_bytes(need.get('persistent_bytes', 0))} of outputs, {format_bytes(existing)} already there, "
            f"{format_bytes(need.get('scratch_bytes', 0))} for the largest job on scratch, {stated}); free space, "
            "shorten the study (cycles.end) or point the tier elsewhere"
        )
    parts = ", ".join(f"'{name}' about {format_bytes(demand)}" for name, _, _, _, demand in demands)
    raise ConfigError(
        f"tiers {', '.join(repr(d[0]) for d in demands)} share one filesystem ({filesystem_type(path)}, "
        f"{format_bytes(free)} free), but together the study needs about {format_bytes(wanted)} more on it "
        f"({parts}, estimated from the file inventory, {stated}); free space, shorten the study (cycles.end) or point "
        "a tier elsewhere"
    )
