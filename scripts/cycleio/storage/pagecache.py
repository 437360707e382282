"""The page cache: how much of a file it holds, and letting go of it.

A read of a file the page cache holds measures memory, not the tier. Which one a step's read was
depends on the machine (memory, other jobs; some VMs page out file data untouched for half a
minute), so each read record says how much of its file was cached when the read began, and a
replay reads the same way (see benchmarks.pairedspecs.replay_specs).
"""

from __future__ import annotations

import ctypes
import mmap
import os

from .libc import libc

libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_PAGE = mmap.PAGESIZE
READ_OPERATIONS = ("read", "file_read", "checksum")  # the records' and the benchmark rows' reads of file data
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")
EVICTED_BELOW = 0.01  # a file with less of its pages cached than this when its read begins is read from storage
_RESIDENT_BIT = bytes(value & 1 for value in range(256))  # mincore sets bit 0; the others are reserved


def memory_backed(tier_kind: str | None, fs_type: str | None) -> bool:
    """A tier whose storage is memory: its reads are the tier's speed, cached or not."""
    return tier_kind == "memory" or fs_type in MEMORY_FILESYSTEMS


def cache_risk(operation: str, *, memory: bool, direct_io: bool = False, dropped: bool = False) -> bool:
    """Whether the page cache may have served a read instead of the tier: a read of file data on a tier
    that is not memory, unless it bypassed the cache (O_DIRECT) or the cache was dropped before it.
    Every record and benchmark row takes its ``cache_risk`` flag from here."""
    return operation in READ_OPERATIONS and not (memory or direct_io or dropped)


def cached_fraction(path: str | os.PathLike) -> float | None:
    """Fraction of the file's pages in the page cache (mincore of a mapping; maps no data in).

    None where it cannot be told (an empty file, a file system that cannot be mapped).
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return None
            mapped = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None
    try:
        pages = (size + _PAGE - 1) // _PAGE
        vector = (ctypes.c_ubyte * pages)()
        anchor = ctypes.c_char.from_buffer(mapped)  # the mapping's address; released before closing it
        try:
            failed = libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), vector)
        finally:
            del anchor
        return None if failed else bytes(vector).translate(_RESIDENT_BIT).count(1) / pages
    finally:
        mapped.close()


def evict(path: str | os.PathLike) -> None:
    """Ask the kernel to drop the file's clean pages (no root needed; dirty pages are written first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def drop_page_cache() -> bool:
    """Write back and drop the whole page cache so the next reads come from storage (root only)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False
