"""Whether this machine hands the memory it frees back to its host: free page reporting.

A virtual machine whose balloon device reports free pages (virtio-balloon's ``VIRTIO_BALLOON_F_REPORTING``,
feature bit 5) gives every free 2 MiB block (``page_reporting_order`` 9) back to the host a moment after it
was freed; touching such a page again costs a fault on the host. The page cache takes its pages from the
same free pool, so a buffered write there runs at the speed of the guest's memory, not of its storage: on the
README's VM, writes into pages reported away went at about 350 MiB/s on every tier, into pages freed a moment
before at 1.3-1.8 GB/s, while the disk took the same files with O_DIRECT at 1.7-1.9 GB/s
(docs/performance.md). Which of the two a step or its replay meets depends on what was freed in the seconds
before it, so the study says in its provenance and its summary when this is so.

How much of the second kind is there right now can be measured (:func:`fresh_MiB`): the page cache of a disk
tier takes its pages in the same 2 MiB blocks (``FileHugePages``), and faulting in anonymous huge pages tells
the two kinds apart by about 40 times (docs/performance.md, "What a fresh page is"). A paired step probes
before each file it writes (:func:`fresh_before_write`: pages a neighbour job or the step itself freed a
moment before show there, where a probe at the step's start cannot see them), its replay before each write
repetition, so that a write row's reference can be taken at the share of fresh pages its step met
(report.pairedreference); a repetition that writes new files holds what lies beyond that share while it runs
(:func:`fresh_pages_held`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from .units import MiB

SYS = Path("/sys")
BALLOON_DEVICE_ID = 0x0005  # virtio device ID of a memory balloon
REPORTING_FEATURE_BIT = 5  # VIRTIO_BALLOON_F_REPORTING


def free_page_reporting(sys_root: Path = SYS) -> dict:
    """``{"free_page_reporting": bool, "page_reporting_order": int | None}``: whether a balloon device of this
    machine reports free pages to its host (``/sys/bus/virtio/devices/*/features``, a string of 0s and 1s by
    feature bit), and the smallest block it reports (a power of two in pages)."""
    reporting = False
    for device in sorted((sys_root / "bus/virtio/devices").glob("*")):
        try:
            if int((device / "device").read_text().strip(), 16) != BALLOON_DEVICE_ID:
                continue
            features = (device / "features").read_text().strip()
        except (OSError, ValueError):
            continue
        reporting |= len(features) > REPORTING_FEATURE_BIT and features[REPORTING_FEATURE_BIT] == "1"
    try:
        order = int((sys_root / "module/page_reporting/parameters/page_reporting_order").read_text())
    except (OSError, ValueError):
        order = None
    return {"free_page_reporting": reporting, "page_reporting_order": order if reporting else None}


HUGE_PAGE = 2 * MiB  # the block page reporting hands back (order 9 of 4 KiB pages) and a huge page's size
# a huge page faulted from a block freed a moment ago takes about 0.1 ms (clearing 2 MiB at 16-23 GB/s), one
# from a block the host took back 4-5 ms (430-480 MiB/s): the threshold sits between, far from both
SLOW_FAULT_S = 0.001
SLOW_IN_A_ROW = 4  # the probe stops at this many slow faults in a row: the fresh blocks are used up
PROBE_CAP = 4 << 30  # no step of the default study writes more; a fresh block costs the probe 0.1 ms


def huge_pages_on_request(sys_root: Path = SYS) -> bool:
    """Whether ``madvise(MADV_HUGEPAGE)`` gets anonymous huge pages (transparent huge pages ``always`` or
    ``madvise``), which the probe needs: with 4 KiB pages every fault is fast."""
    try:
        return "[never]" not in (sys_root / "kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


def memory_to_spare(proc_cgroup: str | None = None, cgroup_root: Path = SYS / "fs/cgroup") -> int:
    """Bytes the probe and the holds may take at once: a quarter of the machine's available memory (MemAvailable),
    and half of what this process's memory cgroup and its ancestors still allow (a Slurm job's ``--mem``: held
    memory counts there, and a job past it is killed). ``proc_cgroup``: ``/proc/self/cgroup``'s text."""
    spare = psutil.virtual_memory().available // 4
    if proc_cgroup is None:
        try:
            proc_cgroup = Path("/proc/self/cgroup").read_text()
        except OSError:
            return spare
    for limit, usage in _memory_limits(proc_cgroup, cgroup_root):
        try:
            spare = min(spare, max(0, limit - int(usage.read_text())) // 2)
        except (OSError, ValueError):
            pass
    return spare


@functools.lru_cache(maxsize=4)
def _memory_limits(proc_cgroup: str, cgroup_root: Path) -> tuple[tuple[int, Path], ...]:
    """The memory limits of a process's cgroups and their ancestors (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), each with the file of its usage: looked up once, as a job's limits stay put (a
    probe before each file a step writes reads only the usages)."""
    limits = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            folder, files = cgroup_root / path.lstrip("/"), ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):  # v1
            folder, files = cgroup_root / "memory" / path.lstrip("/"), ("memory.limit_in_bytes",
                                                                         "memory.usage_in_bytes")
        else:
            continue
        for level in (folder, *folder.parents):
            try:
                limits.append((int((level / files[0]).read_text()), level / files[1]))
            except (OSError, ValueError):  # no such file, or "max": no limit there
                pass
            if level == cgroup_root:
                break
    return tuple(limits)


@functools.lru_cache(maxsize=1)
def fresh_pages_measurable() -> bool:
    """Whether :func:`fresh_MiB` can tell fresh pages here: the machine reports free pages to its host and
    gives huge pages on request."""
    return free_page_reporting()["free_page_reporting"] and huge_pages_on_request()


def fresh_MiB(limit: int = PROBE_CAP, slow_in_a_row: int = SLOW_IN_A_ROW) -> float | None:
    """MiB of 2 MiB blocks freed a moment ago and not yet handed to the host, at most ``limit`` (and
    :func:`memory_to_spare`); None where this cannot be told (:func:`fresh_pages_measurable`).

    Maps anonymous memory, asks for huge pages and touches one byte per 2 MiB, timing each fault, until
    ``slow_in_a_row`` faults in a row are slow (blocks the host took back); then gives it all back at once,
    so the blocks are free again, as fresh as before. Up to the cap this costs about 0.1 ms per fresh block.
    """
    if not fresh_pages_measurable():
        return None
    limit = min(limit, memory_to_spare()) // HUGE_PAGE * HUGE_PAGE
    if limit <= 0:
        return 0.0
    fresh = _fresh_blocks(limit, slow_in_a_row)
    return None if fresh is None else fresh * HUGE_PAGE / MiB


@contextlib.contextmanager
def fresh_pages_held(nbytes: int, share: float, margin: float) -> Iterator[float | None]:
    """Around a write of ``nbytes`` that should meet fresh pages for no more than ``share`` (+ ``margin``) of its
    bytes: where the probe (:func:`fresh_MiB`) finds more (pages freed a moment before: reads just done with their
    pages dropped, a job beside), hold the excess in this process until the block ends, so that the write's page
    cache meets what is left; yields the fresh MiB the write meets, probed again while held (None where not
    measurable).

    Waiting for the host to take them back instead takes too long: of a 512 MiB file's pages dropped at once, 104
    MiB were still fresh 8 s later on this repository's VM, and every probe hands back the blocks it touched as
    newly freed."""
    fresh = fresh_MiB()
    excess = 0.0 if fresh is None else fresh - share * nbytes / MiB
    if fresh is None or excess * MiB <= margin * nbytes:
        yield fresh
        return
    with _huge_mapping(min(int(excess * MiB), memory_to_spare()) // HUGE_PAGE * HUGE_PAGE) as (address, length):
        if address is not None:
            for offset in range(0, length, HUGE_PAGE):  # fresh blocks: 0.1 ms each
                ctypes.memset(address + offset, 1, 1)
        yield fresh_MiB() if address is not None else fresh


# before a file, fewer slow faults end the probe (5-10 ms): a paired forecast probes about 40 files
FILE_SLOW_IN_A_ROW = 2


def fresh_before_write(nbytes: int) -> float | None:
    """MiB of fresh pages a write of ``nbytes`` about to begin can fill: :func:`fresh_MiB` up to the file's size
    rounded up to 2 MiB, ending at ``FILE_SLOW_IN_A_ROW`` slow faults in a row.

    The blocks the host had taken back that the probe touched are not counted, though it gives them back: a
    file that met no fresh block wrote at the slow rate all the same (360-470 MiB/s, docs/performance.md).
    """
    return fresh_MiB(max(1, -(-int(nbytes) // HUGE_PAGE)) * HUGE_PAGE, FILE_SLOW_IN_A_ROW)


class FilePageProbe:
    """The fresh pages one file's bytes meet (:func:`fresh_before_write`), probed once, when its writer is about to
    hand the first bytes to storage (``transfers.Overheads.before_storage``): after the writer built what it
    holds in memory (a small netCDF file's whole image, a block of generated data), which takes fresh pages
    before the page cache does. Armed per file; a file smaller than a 2 MiB block is not probed."""

    def __init__(self):
        self.nbytes: int | None = None  # armed: the size of the file about to be written
        self.found: float | None = None

    def arm(self, nbytes: int) -> None:
        self.found = None
        self.nbytes = int(nbytes) if nbytes >= HUGE_PAGE else None

    @property
    def armed(self) -> bool:
        return self.nbytes is not None

    def look(self) -> None:
        if self.nbytes is not None:
            self.found, self.nbytes = fresh_before_write(self.nbytes), None

    def take(self) -> float | None:
        """What the last armed file's probe found (None if it was not probed); disarms."""
        found, self.found, self.nbytes = self.found, None, None
        return found


@contextlib.contextmanager
def _huge_mapping(length: int) -> Iterator[tuple[int | None, int]]:
    """A private anonymous mapping of ``length`` bytes that asks for huge pages, unmapped at the end: (its address,
    its length), the address None where the kernel refuses it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    if length <= 0:
        yield None, 0
        return
    # Python's mmap maps MAP_SHARED (shmem), which takes 4 KiB pages: a private anonymous map takes huge ones
    address = libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        yield None, length
        return
    try:
        yield (address if libc.madvise(address, length, mmap.MADV_HUGEPAGE) == 0 else None), length
    finally:
        libc.munmap(address, length)


def _fresh_blocks(limit: int, slow_in_a_row: int) -> int | None:
    """Fault in huge pages up to ``limit`` bytes until ``slow_in_a_row`` slow faults in a row; give them back;
    return how many were fresh (None where the kernel refuses the mapping)."""
    with _huge_mapping(limit) as (address, _):
        if address is None:
            return None
        offset, slow, fresh = 0, 0, 0
        while offset < limit and slow < slow_in_a_row:
            t0 = time.perf_counter()
            ctypes.memset(address + offset, 1, 1)
            if time.perf_counter() - t0 > SLOW_FAULT_S:
                slow += 1
            else:
                slow, fresh = 0, fresh + 1
            offset += HUGE_PAGE
    return fresh
