"""A study's replay jobs (config ``darshan``) at DAG time: their logs read and checked before any job, and the files
each job reads and writes (darshan.jobfiles), for the inventory, the tiers' room and the jobs' Slurm sizes.

The logs are read with pydarshan (numpy, pandas): imported here inside the functions, and only for a study that has
replay jobs, so a study without them keeps the DAG's imports light. A log is read and planned once per process
(cached by its path, size and time and the job's request).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from ..config.keys import DARSHAN_PREFIX, ConfigError


def _say(name: str):
    """darshan.plan.check_request's ``say`` for the study's config key of replay job ``name``."""
    return lambda key, value: f"config key 'darshan.jobs.{name}.{key}': {value}"


@functools.lru_cache(maxsize=64)
def _planned(name: str, path: str, stamp: tuple, ranks: int, scale: float, timing: str, layer: str):
    from ..darshan.jobfiles import replay_files
    from ..darshan.logs import read_log
    from ..darshan.plan import make_plan

    job = read_log(path)
    plan = make_plan(job, ranks, scale, timing, layer, say=_say(name))
    return job.sha256, replay_files(plan), tuple(plan.notes)


def plan_replay_job(name: str, spec: dict):
    """(log path, its sha256, darshan.jobfiles.ReplayFiles, the plan's notes) of replay job ``name``; ConfigError
    naming the job's config key when its log cannot be found, read or replayed as asked."""
    from ..darshan.jobfiles import find_log
    from ..darshan.logs import DarshanLogError

    try:
        path = find_log(spec["log"])
        stat = os.stat(path)
        sha, files, notes = _planned(name, str(path), (stat.st_size, stat.st_mtime_ns), spec["ranks"],
                                     float(spec["scale"]), spec["timing"], spec["layer"])
    except DarshanLogError as err:
        text = str(err)
        if text.startswith("config key"):
            raise ConfigError(text) from None
        raise ConfigError(f"config key 'darshan.jobs.{name}.log': {text}") from None
    return path, sha, files, notes


def check_replay_jobs(study) -> None:
    """Every replay job's log found, read and planned (before any job); each arm's job settings then name the log's
    path and checksum (so a changed log reruns the jobs that replay it), and ``study.darshan_files`` holds each
    job's files."""
    for arm in study.arms.values():
        for name, spec in arm.darshan.get("jobs", {}).items():
            path, sha, files, _ = plan_replay_job(name, spec)
            spec["path"], spec["sha256"] = str(path), sha
            study.darshan_files[name] = files


def describe_replay_jobs(study) -> list[str]:
    """A line per replay job of the study (what `cycleio check-config` prints): its log, request and volume, and
    what its plan notes (a truncated DXT trace replayed from the counters)."""
    from ..units import format_bytes

    lines = []
    arm = next(iter(study.arms.values()))
    for name, spec in arm.darshan.get("jobs", {}).items():
        path, _, files, notes = plan_replay_job(name, spec)
        lines.append(f"replay job {DARSHAN_PREFIX}{name} (after {spec['after']}): {Path(path).name} "
                     f"({files.log_ranks} rank{'s' if files.log_ranks != 1 else ''}) on {spec['ranks']} "
                     f"rank{'s' if spec['ranks'] != 1 else ''} at scale {float(spec['scale']):g} (timing "
                     f"{spec['timing']}): reads {format_bytes(files.read_bytes)}, writes {format_bytes(files.write_bytes)}"
                     f" in {files.n_ops:,} operations; {len(files.inputs)} input files laid out once, "
                     f"{len(files.outputs)} output files per cycle" + "".join(f"; {note}" for note in notes))
    return lines


def replay_job_files(arm, job: str):
    """The ReplayFiles of an arm's replay job ``job`` (darshan_<name>)."""
    name = job.removeprefix(DARSHAN_PREFIX)
    return plan_replay_job(name, arm.darshan["jobs"][name])[2]


def check_replay_ranks(study) -> None:
    """ConfigError when a replay job asks for more ranks than can start where the jobs run (checked where they
    run here: Slurm's tasks inside an allocation, else this process's CPUs), unless it says oversubscribe."""
    from ..darshan.logs import DarshanLogError
    from ..darshan.replay import check_slots

    for arm in study.arms.values():
        for name, spec in arm.darshan.get("jobs", {}).items():
            try:
                check_slots(spec["ranks"], spec.get("oversubscribe", False), say=_say(name))
            except DarshanLogError as err:
                raise ConfigError(str(err)) from None


def replay_room_problem(study, tier: str, path: Path) -> str | None:
    """Why a replay job's files do not fit the tier ``tier`` (at ``path``) where it runs: its scratch tier, or the
    persistent tier of an arm that does not stage (the scale that would fit is named); None when they fit."""
    from ..darshan.replay import room_problem
    from ..storage.tiers import free_bytes, nearest_existing

    for arm in study.arms.values():
        where = arm.scratch if arm.staged else arm.persistent
        if where.name != tier:
            continue
        for name, spec in arm.darshan.get("jobs", {}).items():
            files = replay_job_files(arm, DARSHAN_PREFIX + name)
            problem = room_problem(files.room_bytes, float(spec["scale"]), free_bytes(path),
                                   f"tier '{tier}' ({nearest_existing(path)})", say=lambda key, value: f"{key} {value}")
            if problem:
                return f"config key 'darshan.jobs.{name}': {problem}"
    return None
