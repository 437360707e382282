"""Transfers of file data and their accounting.

A transfer is one write or read call of a file's data. :class:`Overheads` holds the seconds of
writing or reading a file that are not storage I/O (kept apart in records), :class:`Transfer` one
file's bytes and storage seconds, and :func:`write_groups` sends buffers out in counted transfers.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field


# Data move in transfers of at most this many bytes per process: blocks of many levels, never one
# plane (per-call overhead would dominate) and never a whole 3-D field at C768 (memory would).
IO_BUFFER_BYTES = 64 * 2**20

# Reads move at most this many bytes per call. Reading cached files in 64 MiB calls ran at 0.65-0.8 of
# 1-16 MiB calls on the 2-core VM of bench/, with fio as with Python (the copy's destination outgrows
# the CPU's caches); at 8 MiB the per-call cost is still negligible and a parallel file system still
# sees whole stripes.
READ_TRANSFER_BYTES = 8 * 2**20


@dataclass
class Overheads:
    """Seconds of writing or reading a file that are not storage I/O, each kept apart in records, and
    how many storage transfers (write or read calls of file data) were made."""

    generate: float = 0.0  # making the synthetic data
    encode: float = 0.0  # codec work when writing: BitRound, shuffle, zlib, GRIB2 packing
    decode: float = 0.0  # codec work when reading: inflate, unshuffle
    define: float = 0.0  # building a netCDF file's structure: in memory, then opening its variables
    locate: float = 0.0  # reading a netCDF file's structure to find each variable's chunks
    rename: float = 0.0  # landing safely: the rename and the directory's sync (a replay does neither)
    probe: float = 0.0  # a paired step's probe of the fresh pages a file meets: the instrument's (hostmemory)
    transfers: int = 0
    # armed per file by a paired step (hostmemory.FilePageProbe); writers call before_storage
    pages: object = field(default=None, repr=False, compare=False)

    SECONDS = ("generate", "encode", "decode", "define", "locate", "rename", "probe")

    def before_storage(self) -> None:
        """A writer is about to hand a file's first bytes to storage: an armed page probe looks now, its seconds
        booked as ``probe``, out of the storage seconds."""
        if self.pages is not None and self.pages.armed:
            t0 = time.perf_counter()
            self.pages.look()
            self.probe += time.perf_counter() - t0

    def take(self) -> "Overheads":
        taken = self.copy()
        for name in (*self.SECONDS, "transfers"):
            setattr(self, name, type(getattr(self, name))())
        return taken

    def since(self, before: "Overheads") -> "Overheads":
        """What was added since ``before`` (a copy taken earlier)."""
        return Overheads(**{name: getattr(self, name) - getattr(before, name) for name in (*self.SECONDS, "transfers")})

    def copy(self) -> "Overheads":
        return Overheads(**{name: getattr(self, name) for name in (*self.SECONDS, "transfers")})

    def seconds(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.SECONDS}

    @property
    def total(self) -> float:
        return sum(self.seconds().values())


@dataclass(frozen=True)
class Transfer:
    """One file written or read: its bytes, the seconds of storage I/O, and what is kept apart from them.

    ``io_s`` is what a replay of the same bytes does too: the data's transfers, the file's creation,
    close and fsync. Apart (``cpu``): the surrogate's and the library's CPU work, and the safe
    landing's rename and directory sync (cycleio's own durability, which the model does not have).
    """

    bytes: int
    io_s: float
    cpu: Overheads
    cached_fraction: float | None = None  # reads: the file's share in the page cache before the read


def write_groups(fd: int, buffers: list, times: Overheads, buffer_bytes: int) -> None:
    """Buffers to a file in transfers of at most the buffer's size (writev: no copy to join them)."""
    times.before_storage()
    group: list = []
    size = 0
    for buffer in buffers:
        if group and (size + len(buffer) > buffer_bytes or len(group) == 1024):
            _writev_all(fd, group)
            times.transfers += 1
            group, size = [], 0
        group.append(buffer)
        size += len(buffer)
    if group:
        _writev_all(fd, group)
        times.transfers += 1


def _writev_all(fd: int, buffers: list) -> None:
    views = [memoryview(b).cast("B") for b in buffers]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
