"""What the kernel counted of a process's I/O: an instrument outside cycleio that checks its records.

Linux keeps, per process, the bytes and calls of its reads and writes (``rchar``, ``wchar``,
``syscr``, ``syscw``: every read and write call, whatever served it, page cache included) and the
bytes that reached the block layer (``read_bytes``, ``write_bytes``; 0 on tmpfs, which has none), in
``/proc/<pid>/io`` (read through psutil's ``Process.io_counters``). Those of every thread count, and so
do those of every child the process has reaped: a job's counts before and after a block of work are
what the block and the programs it ran and waited for moved. Memory-mapped I/O is not counted (the
records' checksums and reads use read calls). Under Slurm the job's cgroup v2 ``io.stat`` (bytes and
I/Os that reached each device, for every process of the job) is read too, where the io controller is
enabled.

``counted(records, **fields)`` snapshots around a block and adds the differences to a RecordLog as
records of their own (``KERNEL_OPS``, tool ``kernel``, ``n_files`` 0): report/accounting.py sets them
against the block's records; no other table reads them (records.cycle_records leaves them out).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterator

import psutil

log = logging.getLogger("cycleio")

KERNEL_TOOL = "kernel"
# record op -> (counter of bytes, counter of calls or "")
KERNEL_OPS = {
    "kernel_read": ("rchar", "syscr"),
    "kernel_write": ("wchar", "syscw"),
    "kernel_storage_read": ("read_bytes", ""),
    "kernel_storage_write": ("write_bytes", ""),
}
# what a window left out (Window.exclude): op -> (counter of bytes, counter of calls)
EXCLUDED_OPS = {"kernel_excluded_read": ("rchar", "syscr"), "kernel_excluded_write": ("wchar", "syscw")}
CGROUP_TOOL = "cgroup"
CGROUP_OPS = {"cgroup_read": ("rbytes", "rios"), "cgroup_write": ("wbytes", "wios")}
CGROUP_ROOT = Path("/sys/fs/cgroup")


class _Counters:
    """Field-wise arithmetic of a dataclass of counters: two snapshots' difference is what happened between them."""

    def __sub__(self, other):
        return type(self)(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))

    def __add__(self, other):
        return type(self)(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass(frozen=True)
class ProcIO(_Counters):
    """The counters of ``/proc/<pid>/io``; subtract two snapshots for what happened between them."""

    rchar: int = 0
    wchar: int = 0
    syscr: int = 0
    syscw: int = 0
    read_bytes: int = 0
    write_bytes: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: dict) -> ProcIO:
        return cls(**{f.name: int(values.get(f.name, 0)) for f in fields(cls)})


@functools.cache
def _process(pid: int) -> psutil.Process:
    # one per pid, so that a snapshot reads /proc/<pid>/io alone (a new Process reads /proc/<pid>/stat first);
    # keyed by the pid a forked child asks with, never its parent's
    return psutil.Process(pid)


def read_proc_io(pid: int | None = None) -> ProcIO | None:
    """A process's counters now (this process's by default), or None where the kernel does not keep them or does
    not let us read them (no CONFIG_TASK_IO_ACCOUNTING: psutil then has no io_counters; another user's process;
    a container's restricted /proc)."""
    try:
        counts = _process(os.getpid() if pid is None else pid).io_counters()
    except (AttributeError, psutil.Error, OSError, RuntimeError, ValueError):
        return None
    return ProcIO(rchar=counts.read_chars, wchar=counts.write_chars, syscr=counts.read_count,
                  syscw=counts.write_count, read_bytes=counts.read_bytes, write_bytes=counts.write_bytes)


@dataclass(frozen=True)
class CgroupIO(_Counters):
    """A cgroup v2 ``io.stat`` summed over its devices: bytes and I/Os that reached them."""

    rbytes: int = 0
    wbytes: int = 0
    rios: int = 0
    wios: int = 0


def parse_io_stat(text: str) -> CgroupIO:
    """``io.stat`` lines (``MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N``), summed over devices."""
    totals = {f.name: 0 for f in fields(CgroupIO)}
    for key, value in re.findall(r"\b(rbytes|wbytes|rios|wios)=(\d+)", text):
        totals[key] += int(value)
    return CgroupIO(**totals)


def job_cgroup(proc_cgroup: str) -> str | None:
    """The cgroup v2 path of the Slurm job holding this process, from ``/proc/self/cgroup``'s text: the
    ``job_<id>`` ancestor of the process's own cgroup (slurmstepd puts steps and tasks under it), or the
    process's own cgroup when no component names a job. None without a v2 line (``0::/path``)."""
    for line in proc_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            parts = [part for part in path.split("/") if part]
            for index, part in enumerate(parts):
                if re.fullmatch(r"job_\d+", part):
                    return "/" + "/".join(parts[: index + 1])
            return "/" + "/".join(parts)
    return None


def io_stat_path(root: Path = CGROUP_ROOT) -> Path | None:
    """Where the job's cgroup ``io.stat`` is (the v2 hierarchy at ``root``, or ``root``/unified on a
    hybrid host), or None where there is none: no cgroup v2, or the io controller is not enabled."""
    try:
        cgroup = job_cgroup(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None
    if cgroup is None:
        return None
    for base in (root, root / "unified"):
        path = base / cgroup.lstrip("/") / "io.stat"
        if path.is_file():
            return path
    return None


def read_cgroup_io(path: Path | None) -> CgroupIO | None:
    if path is None:
        return None
    try:
        return parse_io_stat(path.read_text())
    except OSError:
        return None


_said_unavailable: set[str] = set()


def _say_once(what: str, message: str) -> None:
    if what not in _said_unavailable:
        _said_unavailable.add(what)
        log.info(message)


class Window:
    """What ``counted`` yields: the block may name counts that are not the block's own, which the
    window's records then leave out (``exclude``): e.g. what the forecast's MPI program moved besides its
    ranks' I/O work (outside_work), counted in the parent once it has reaped the launcher."""

    def __init__(self):
        self.excluded = ProcIO()

    def exclude(self, counts: ProcIO) -> None:
        self.excluded = self.excluded + counts


RANK_WORK_OP = "kernel_work"  # an MPI rank's event: its counts over its I/O work (not a record)


def work_event(started: ProcIO, finished: ProcIO, rank: int) -> dict:
    """A forecast rank's counts over its I/O work alone: from ``started`` (after Python's start-up and imports, which
    read the libraries' .pyc files, about 6 MB, and MPI's, which writes about 4 MB into its shared-memory segment) to
    ``finished`` (before it gathers the records, rank 0 lands them, MPI_Finalize and exit)."""
    return {"op": RANK_WORK_OP, "rank": rank, "counts": (finished - started).as_dict()}


def outside_work(program: ProcIO, works: list[ProcIO]) -> ProcIO:
    """What an MPI program moved besides its ranks' I/O work, for the job's window to leave out: ``program``, the
    whole program's counts as its parent saw them once it reaped the launcher (every rank, the launcher and its
    proxies: their start-up, the PMI messages and the ranks' output they forward, the records gathered and landed),
    less each rank's work (``work_event``); never below zero."""
    left = program
    for work in works:
        left = left - work
    return ProcIO(*(max(0, value) for value in left.as_dict().values()))


def kernel_records(counts: ProcIO, excluded: ProcIO = ProcIO()) -> list[dict]:
    """The records' values (op, bytes, transfers) for one window's counts, and what it left out if anything."""
    out = [{"op": op, "bytes": getattr(counts, nbytes), "transfers": getattr(counts, calls) if calls else 0}
           for op, (nbytes, calls) in KERNEL_OPS.items()]
    if excluded != ProcIO():
        out += [{"op": op, "bytes": getattr(excluded, nbytes), "transfers": getattr(excluded, calls)}
                for op, (nbytes, calls) in EXCLUDED_OPS.items()]
    return out


@contextmanager
def counted(records, **fields) -> Iterator[Window]:
    """Count what the kernel saw this process (and the children it reaps) move during the block.

    ``records`` is a RecordLog (cycleio.records; passed in, as this module sits below it); ``fields`` are
    those of the block's records (phase, step, the tier's fields ...). After the block, one record per
    ``KERNEL_OPS`` (tool ``kernel``, ``n_files`` 0, ``t_start`` and ``seconds`` the window's), net of what the
    block excluded (``Window.exclude``, recorded as ``EXCLUDED_OPS`` when not nothing), and under
    Slurm per ``CGROUP_OPS`` where the job's cgroup has an ``io.stat``. Nothing is recorded where
    ``/proc/self/io`` cannot be read (said once in the log), nor when the block raises.
    """
    window = Window()
    before = read_proc_io()
    if before is None:
        _say_once("proc", "the kernel's I/O counters (/proc/self/io) cannot be read here: no kernel records")
    cgroup_path = io_stat_path() if os.environ.get("SLURM_JOB_ID") else None
    cgroup_before = read_cgroup_io(cgroup_path)
    t_start, t0 = time.time(), time.perf_counter()
    yield window
    seconds = time.perf_counter() - t0
    after = read_proc_io()
    if before is not None and after is not None:
        for values in kernel_records(after - before - window.excluded, window.excluded):
            records.add(**{**fields, **values, "tool": KERNEL_TOOL, "n_files": 0, "t_start": t_start,
                           "seconds": seconds})
    cgroup_after = read_cgroup_io(cgroup_path)
    if cgroup_before is not None and cgroup_after is not None:
        delta = cgroup_after - cgroup_before
        for op, (nbytes, calls) in CGROUP_OPS.items():
            records.add(**{**fields, "op": op, "bytes": getattr(delta, nbytes), "transfers": getattr(delta, calls),
                           "tool": CGROUP_TOOL, "n_files": 0, "t_start": t_start, "seconds": seconds})
