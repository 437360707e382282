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
  operation ``delay_ms`` late (storage.slowfs.slowed).

A job gets only the entries aimed at it (:func:`faults_for_job`, passed in its settings), so
changing a fault reruns that job alone. This module holds what the jobs and ranks call; the check of
every entry against the study, at start, is workflow.faultcheck.check_faults.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .units import size_or_none

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

    def fill_tier(self, step: str, node: str | None = None) -> int | None:
        """The bytes ``faults.fill_tier`` leaves free on the tier this step writes to, if it aims here: an entry
        without a node, or (``node``: the job runs on that one node) one naming it."""
        entries = [e for e in self._entries("fill_tier", step=step) if e.get("node") in (None, node)]
        return size_or_none(entries[0]["leave"]) if entries else None

    def fill_node(self, step: str) -> tuple[str, int] | None:
        """(node, bytes left free) of a ``faults.fill_tier`` entry naming a node, for a job over several nodes."""
        entries = [e for e in self._entries("fill_tier", step=step) if e.get("node")]
        return (entries[0]["node"], size_or_none(entries[0]["leave"])) if entries else None

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
    path = folder / f".cycleio-fill.{os.getpid()}"
    try:
        fill(path, leave)
        yield
    finally:
        path.unlink(missing_ok=True)


def fill(path: Path, leave: int) -> None:
    """Allocate ``path`` until its filesystem has only ``leave`` bytes free; the caller removes it."""
    stat = os.statvfs(path.parent)
    size = stat.f_bavail * stat.f_frsize - leave
    if size > 0:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        finally:
            os.close(fd)
    log.info("injected fault (config faults.fill_tier): %s filled, %d bytes left free", path.parent, leave)
