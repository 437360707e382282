"""A batch job's own scratch folder on each tier, gone when the job ends.

The default node-local and memory tiers give every Slurm job a folder of its own
(``${TMPDIR:-/tmp}/cycleio-{user}/${SLURM_JOB_ID:-local-{workdir}}``). A job's steps remove the files
they wrote, but the folder itself, with the study's claim (``.cycleio-owner``) and empty folders such
as ``bench/``, outlives the job: litter in a node's memory that no later job reuses, since job ids
do not repeat. :func:`job_scratch` wraps a job's command: at its end, success or failure, it removes
the folder the batch job's id names on every non-persistent tier the job used, and then the empty
parents the tier's path makes per user, study or checkout (``cycleio-{user}``), never a parent the
path names literally (``/dev/shm``, ``/tmp``) nor a folder a variable such as ``$BB_STAGE_DIR`` or
``$TMPDIR`` names (those belong to the site or the burst buffer, which tears its own down).

A job spread over several nodes (runner.nodes) makes and removes its folder on the other nodes with
:func:`make_job_folder` and :func:`remove_job_folder`.

Outside a batch job (no job id in the environment) nothing is removed: local runs share one folder
(``local-{workdir}``) across their jobs. Several commands of one batch job (the local executor inside
an allocation) share its folder: each holds a shared lock on it, and only the last one removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Iterable, Iterator

from ..config.tierspec import Tier, expand_tier_path
from .tiers import private_folders

log = logging.getLogger("cycleio")

# The variables that name one batch job, in Slurm, PBS and LSF.
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")
PLACEHOLDERS = ("{user}", "{study}", "{workdir}")
_NAMES = re.compile(r"\$\{?(\w+)")


def split_template(template: str) -> list[str]:
    """A tier path template split at its ``/`` outside ``${...}``, so a variable's default such as
    ``${TMPDIR:-/tmp}`` stays one part."""
    parts, current, depth = [], "", 0
    for char in template:
        if char == "/" and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += char == "{"
        depth -= char == "}" and depth > 0
        current += char
    parts.append(current)
    return parts


def job_folders(tier: Tier, study: str, env: dict[str, str] | None = None) -> tuple[Path, list[Path]] | None:
    """This batch job's folder on a tier and the per-user/study/checkout parents above it, nearest first;
    None when the tier is persistent or its path names no job id set here."""
    env = dict(os.environ if env is None else env)
    if tier.persistent:
        return None
    parts = split_template(tier.path)
    for index, part in enumerate(parts):
        if index and any(name in JOB_ID_VARIABLES and env.get(name) for name in _NAMES.findall(part)):
            break
    else:
        return None

    def expand(count: int) -> Path:
        return expand_tier_path(tier.name, "/".join(parts[:count]), study, env)

    parents = []
    for count in range(index, 1, -1):
        part = parts[count - 1]
        if _NAMES.search(part) or not any(p in part for p in PLACEHOLDERS):
            break
        parents.append(expand(count))
    return expand(index + 1), parents


def _make(tier: Tier, folder: Path, attempts: int = 3) -> None:
    """Create the job's folder before the job opens its tier: once it exists its parents are not empty,
    so another job's end cannot remove them under this one. A per-user folder in ``/tmp`` or ``/dev/shm``
    is made private, and one another user could reach refuses the job (TierError)."""
    for _ in range(attempts):
        try:
            private_folders(tier.name, folder, create=True)
            return
        except FileNotFoundError:  # a parent removed by another job's end between two mkdirs
            continue
        except OSError:
            return  # opening the tier says what is wrong, with the tier's name


def remove_job_folders(folders: Iterable[tuple[Path, list[Path]]]) -> None:
    """Remove each job folder and then its parents that are empty now."""
    for folder, parents in folders:
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
            if folder.exists():
                log.warning("could not remove this job's scratch folder %s", folder)
            else:
                log.info("removed this job's scratch folder %s", folder)
        for parent in parents:
            try:
                parent.rmdir()
            except OSError:  # not empty (another job's folder), or gone already
                break


def make_job_folder(tier: Tier, study: str) -> None:
    """This batch job's folder on a tier made private, on a node where no :func:`job_scratch` runs: the other
    nodes of a job spread over several (runner.nodes)."""
    folders = job_folders(tier, study)
    if folders is not None:
        _make(tier, folders[0])


def remove_job_folder(tier: Tier, study: str) -> None:
    """This batch job's folder on a tier and its empty per-user parents removed, on such a node."""
    folders = job_folders(tier, study)
    if folders is not None:
        remove_job_folders([folders])


def _hold(folder: Path) -> int | None:
    """A shared lock on the folder, held while this command uses it (None where it cannot be taken)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.close(fd)
        return None
    return fd


def _last_user(fd: int | None) -> bool:
    """Whether no other command of this batch job holds the folder (e.g. the local executor running
    several jobs inside one allocation): only the last one removes it."""
    if fd is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


@contextlib.contextmanager
def job_scratch(tiers: Iterable[Tier | None], study: str) -> Iterator[list[Path]]:
    """Around one batch job's command: its folders on ``tiers`` made first and removed at the end."""
    found, tier_of = {}, {}
    for tier in tiers:
        if tier is not None:
            folders = job_folders(tier, study)
            if folders is not None:
                found[folders[0]] = folders
                tier_of[folders[0]] = tier
    held = {}
    try:
        for folder in found:
            _make(tier_of[folder], folder)
            held[folder] = _hold(folder)
        yield list(found)
    finally:
        try:
            remove_job_folders(found[folder] for folder, fd in held.items() if _last_user(fd))
        finally:
            for fd in held.values():
                if fd is not None:
                    os.close(fd)
