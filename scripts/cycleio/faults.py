"""Fault injection, for rehearsing failures: the config's ``faults`` section makes chosen jobs fail on
purpose, on a chosen attempt, so that retries, resumes and verification can be watched at work.

Off by default (every list empty). Each entry names a cycle, a step (or job) and the attempt
(Snakemake's, 1 for the first run, 2 for its retry) it fails; ``arm`` narrows it to one arm. Kinds:

- ``fail_step``: the step raises :class:`InjectedFault` as its run begins (after its stage-in);
- ``fail_rank``: one rank of the MPI forecast raises at its first output hour (a compute rank before
  it hands over or writes anything, a writer rank as it lands its first file), whatever the strategy;
- ``corrupt_staged_file``: the first file of a job's stage-in or stage-out is corrupted after its
  copy and before its verification, which must catch it;
- ``fail_stage_out``: a job's stage-out fails once ``after_files`` files are copied;
- ``fill_tier``: the step runs on a full tier: a file allocated on the tier it writes to leaves only
  ``leave`` bytes free (:func:`filled`), so its writes meet a real ENOSPC;
- ``slow_tier``: the step's run works in its folder through a FUSE filesystem that answers every
  operation ``delay_ms`` late (:func:`slowed`, storage/slowfs.py).

A job gets only the entries aimed at it (:func:`faults_for_job`, passed in its settings), so
changing a fault reruns that job alone. :func:`check_faults` checks every entry at start.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

KINDS = ("fail_step", "fail_rank", "corrupt_staged_file", "fail_stage_out", "fill_tier", "slow_tier")
STEP_KINDS = ("fail_step", "fill_tier", "slow_tier")  # aimed at a step, staged or not

log = logging.getLogger("cycleio")


class InjectedFault(RuntimeError):
    """A failure caused on purpose by the config's ``faults`` section (fault injection)."""


def arm_faults(faults: dict, arm: str) -> dict:
    """The entries of the config's ``faults`` aimed at one arm (``arm`` unset: every arm), without the key."""
    out = {}
    for kind in KINDS:
        entries = [{key: (str(value) if key == "cycle" else value) for key, value in entry.items() if key != "arm"}
                   for entry in faults.get(kind, ()) if entry.get("arm") in (None, arm)]
        if entries:
            out[kind] = entries
    return out


def faults_for_job(faults: dict, job: str, steps: tuple[str, ...] | list[str], cycle: str | None,
                   staged: bool) -> dict:
    """Of an arm's faults, those aimed at one job: ``job`` (a step or ``cycle``) of ``cycle``, running
    ``steps``; staging faults only where the arm stages (``staged``)."""
    out = {}
    for kind, entries in faults.items():
        if kind in STEP_KINDS:
            mine = [e for e in entries if e["cycle"] == cycle and e["step"] in steps]
        elif kind == "fail_rank":
            mine = [e for e in entries if e["cycle"] == cycle and "fcst" in steps]
        else:
            mine = [e for e in entries if e["cycle"] == cycle and e["step"] == job and staged]
        if mine:
            out[kind] = mine
    return out


@dataclass(frozen=True)
class JobFaults:
    """One attempt of one job: the faults its settings carry that fire on this attempt."""

    faults: dict
    attempt: int = 1

    def _entries(self, kind: str, **match) -> list[dict]:
        return [e for e in self.faults.get(kind, ()) if e["attempt"] == self.attempt
                and all(e.get(key) == value for key, value in match.items())]

    def fail_step(self, step: str, cycle: str) -> None:
        """Raise InjectedFault if ``faults.fail_step`` aims at this step on this attempt."""
        if self._entries("fail_step", step=step):
            raise InjectedFault(f"injected fault (config faults.fail_step): {step} of cycle {cycle} "
                                f"fails on attempt {self.attempt}")

    def fill_tier(self, step: str) -> int | None:
        """The bytes ``faults.fill_tier`` leaves free on the tier this step writes to, if it aims here."""
        from .config.sizes import size_or_none

        entries = self._entries("fill_tier", step=step)
        return size_or_none(entries[0]["leave"]) if entries else None

    def slow_tier(self, step: str) -> float | None:
        """The milliseconds ``faults.slow_tier`` delays each operation of this step's run, if it aims here."""
        entries = self._entries("slow_tier", step=step)
        return float(entries[0]["delay_ms"]) if entries else None

    def fail_rank(self) -> int | None:
        """The forecast rank that ``faults.fail_rank`` makes fail on this attempt, if any."""
        entries = self._entries("fail_rank")
        return entries[0]["rank"] if entries else None

    def corrupt_staged_file(self, phase: str) -> bool:
        return bool(self._entries("corrupt_staged_file", phase=phase))

    def fail_stage_out_after(self) -> int | None:
        entries = self._entries("fail_stage_out")
        return entries[0]["after_files"] if entries else None


@contextlib.contextmanager
def filled(folder: Path, leave: int | None) -> Iterator[None]:
    """With ``leave`` set: the filesystem of ``folder`` filled by one allocated file until ``leave``
    bytes are free (a real full tier, for fault injection), the file removed on the way out."""
    if leave is None:
        yield
        return
    stat = os.statvfs(folder)
    size = stat.f_bavail * stat.f_frsize - leave
    path = folder / f".cycleio-fill.{os.getpid()}"
    try:
        if size > 0:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        log.info("injected fault (config faults.fill_tier): %s filled, %d bytes left free", folder, leave)
        yield
    finally:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def slowed(folder: Path, delay_ms: float | None) -> Iterator[Path]:
    """``folder``, or with ``delay_ms`` set the same folder through a mount answering each operation that late."""
    if delay_ms is None:
        yield folder
        return
    from .storage.slowfs import slow_mount

    with slow_mount(folder, delay_ms) as mountpoint:
        yield mountpoint


def check_faults(config: dict, study) -> None:
    """Every entry of ``faults`` aims at a job the study runs; ConfigError naming the key otherwise.

    ``study`` is the config.settings.Study built from ``config`` (its arms already hold their faults).
    """
    from .config.keys import ConfigError
    from .config.sizes import size_or_none
    from .storage.slowfs import unavailable as slowfs_unavailable
    from .surrogates.forecast.layout import Layout
    from .surrogates.inventory import cycle_steps, job_files
    from .workflow.dependencies import CycledJobs

    jobs = CycledJobs.of_study(study)
    for kind in KINDS:
        for index, entry in enumerate(config["faults"][kind]):
            key = f"faults.{kind}[{index}]"
            arm_name, cycle = entry.get("arm"), str(entry["cycle"])
            if arm_name is not None and arm_name not in study.arms:
                raise ConfigError(f"config key '{key}.arm': {arm_name!r} is not an arm of the study; expected one "
                                  f"of: {', '.join(study.arms)}")
            if cycle not in study.cycles:
                raise ConfigError(f"config key '{key}.cycle': {cycle} is not a cycle of the study "
                                  f"({study.cycles[0]} to {study.cycles[-1]})")
            arms = [study.arms[arm_name]] if arm_name else list(study.arms.values())
            if kind in ("corrupt_staged_file", "fail_stage_out"):
                arms = [arm for arm in arms if arm.staged]
                if not arms:
                    who = f"arm {arm_name} does not stage" if arm_name else "no arm of the study stages"
                    raise ConfigError(f"config key '{key}': {who} its files (scratch tier = persistent tier); "
                                      "a staging fault needs an arm with staging")
            for arm in arms:
                steps = cycle_steps(cycle, arm.start, arm.forecast)
                if kind == "fill_tier" and size_or_none(entry["leave"]) is None:
                    raise ConfigError(f"config key '{key}.leave': {entry['leave']!r} is not a size; expected bytes "
                                      "or a number with k, m, g (e.g. 0, 64k, 1m)")
                if kind == "slow_tier" and (why := slowfs_unavailable()):
                    raise ConfigError(f"config key '{key}': a slow tier is mounted with FUSE, and here there is {why}")
                if kind in STEP_KINDS and entry["step"] not in steps:
                    raise ConfigError(f"config key '{key}.step': {entry['step']!r} does not run in cycle {cycle}; "
                                      f"expected one of: {', '.join(steps)}")
                if kind == "fail_rank":
                    ntasks = Layout.from_settings(arm.strategy, arm.write_component).ntasks
                    if entry["rank"] >= ntasks:
                        raise ConfigError(f"config key '{key}.rank': {entry['rank']} is not a rank of arm {arm.arm}'s "
                                          f"forecast, which has {ntasks} (ranks 0 to {ntasks - 1})")
                if kind in ("corrupt_staged_file", "fail_stage_out"):
                    names = jobs.jobs_of_cycle(arm.arm, cycle)
                    if entry["step"] not in names:
                        raise ConfigError(f"config key '{key}.step': arm {arm.arm} runs no job {entry['step']!r} in "
                                          f"cycle {cycle}; expected one of: {', '.join(names)}")
                if kind == "fail_stage_out":
                    job_steps = list(steps) if entry["step"] == "cycle" else [entry["step"]]
                    staged_out = len(job_files(arm, cycle, job_steps)[1])
                    if entry["after_files"] >= staged_out:
                        raise ConfigError(f"config key '{key}.after_files': {entry['after_files']} is not fewer than "
                                          f"the {staged_out} files {entry['step']} of cycle {cycle} stages out "
                                          f"(arm {arm.arm}), so the fault would never fire")
