"""The cycleio copy engine: one file into its temporary name, blocks on parallel streams, hashed as read,
handed to a write-behind thread that writes copied ranges to storage while the copy goes on."""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import threading
import time
from pathlib import Path

import xxhash

from .checksums import blocks, combine_block_digests, mismatch, read_range_digest
from ..fsutil import discard, temp_name
from .libc import libc
from .stagingtypes import CopyResult, StagingError, StagingOptions, VerifyResult, corrupt
from .streams import buffers, in_parallel
from .tiers import filesystem_type


_sync_file_range = getattr(libc, "sync_file_range", None)
if _sync_file_range is not None:
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]


# SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
_WRITE_AND_WAIT = 1 | 2 | 4
# Filesystems that cannot do sync_file_range say so with these; the final syncfs then does all the work.
_UNSUPPORTED = {errno.EINVAL, errno.ESPIPE, errno.ENOSYS, errno.EOPNOTSUPP}


# Where one syncfs makes a whole batch durable. Elsewhere (FUSE, NFS, other network filesystems)
# syncfs may return success without flushing the client's caches (FUSE answers ENOSYS from the
# daemon with 0), so each copy is fsynced by its own stream, and those fsyncs run in parallel.
SYNCFS_FILESYSTEMS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "lustre", "tmpfs", "ramfs"}


def syncfs_makes_durable(folder: Path) -> bool:
    return filesystem_type(folder) in SYNCFS_FILESYSTEMS


# Files under this size are not written out one by one (a wait per small file costs more than it
# overlaps); instead a syncfs every SYNCFS_EVERY_BYTES of them (measured best of 8-64 MiB here).
SMALL_FILE_BYTES = 2**20
SYNCFS_EVERY_BYTES = 16 * 2**20
WRITE_BEHIND_BYTES = 8 * 2**20  # ranges of a large file are written out in pieces of this size


class WriteBehind:
    """A thread that writes copied data to storage while the copy goes on.

    Without it every dirty page of a batch waits for the final syncfs, so copying and writing to
    storage happen one after the other (cp followed by sync). Here each copied range of a large
    file is handed to this thread, which writes it out with sync_file_range and waits for it (one
    range at a time, waited for, measured steadier than letting the kernel queue them all), and
    small files are written out together by a syncfs every SYNCFS_EVERY_BYTES. The device is then
    busy during the copy, and the final syncfs (still what makes the copies durable, with their
    metadata and the device cache) finds little left to do.
    """

    def __init__(self):
        self.enabled = _sync_file_range is not None
        self.error: StagingError | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="cycleio-write-behind", daemon=True)
        self._thread.start()

    def attach(self, fd: int, size: int) -> int:
        """For a large file, a descriptor of the thread's own (give it back with ``release``); else -1."""
        return os.dup(fd) if self.enabled and size >= SMALL_FILE_BYTES else -1

    def submit(self, fd: int, offset: int, length: int, path: Path) -> None:
        if fd >= 0:
            self._queue.put(("range", fd, offset, length, path))

    def release(self, fd: int) -> None:
        if fd >= 0:
            self._queue.put(("close", fd))

    def small_file(self, folder: Path, length: int) -> None:
        if self.enabled:
            self._queue.put(("small", folder, length))

    def _run(self) -> None:
        small_bytes = 0
        folders: dict[Path, int] = {}
        try:
            while (item := self._queue.get()) is not None:
                if item[0] == "close":
                    os.close(item[1])
                elif not self.enabled or self.error is not None:
                    continue
                elif item[0] == "range":
                    self._write_range(*item[1:])
                else:
                    small_bytes += item[2]
                    if small_bytes >= SYNCFS_EVERY_BYTES:
                        small_bytes = 0
                        folder = item[1]
                        if folder not in folders:
                            folders[folder] = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
                        libc.syncfs(folders[folder])  # errors surface in the final make_durable
        finally:
            for fd in folders.values():
                os.close(fd)

    def _write_range(self, fd: int, offset: int, length: int, path: Path) -> None:
        if _sync_file_range(fd, offset, length, _WRITE_AND_WAIT) != 0:
            code = ctypes.get_errno()
            if code in _UNSUPPORTED:
                self.enabled = False
            else:
                self.error = StagingError(f"writing {path} to storage failed: [Errno {code}] {os.strerror(code)}")

    def close(self, raise_error: bool = True) -> None:
        """Wait until every submitted range is written; raise the first write error, naming the file."""
        self._queue.put(None)
        self._thread.join()
        if raise_error and self.error is not None:
            raise self.error


def _copy_range(src_fd: int, dst_fd: int, start: int, length: int, chunk_bytes: int,
                writeback: WriteBehind | None = None, writeback_fd: int = -1, path: Path | None = None) -> bytes:
    """Copy [start, start+length) with pread/pwrite; return the xxh3-64 digest of those bytes."""
    digest = xxhash.xxh3_64()
    buffer = buffers.get(chunk_bytes)
    offset, end = start, start + length
    unsubmitted = start  # written but not yet handed to write-behind
    while offset < end:
        view = memoryview(buffer)[: min(len(buffer), end - offset)]
        got = os.preadv(src_fd, [view], offset)
        if not got:
            raise OSError(errno.EIO, f"source shrank while copying (short read at offset {offset})")
        data = view[:got]
        digest.update(data)
        position = offset
        while data:
            written = os.pwrite(dst_fd, data, position)
            data, position = data[written:], position + written
        offset += got
        if writeback is not None and (offset - unsubmitted >= WRITE_BEHIND_BYTES or offset == end):
            writeback.submit(writeback_fd, unsubmitted, offset - unsubmitted, path)
            unsubmitted = offset
    return digest.digest()


def stage_with_engine(source: Path, dest: Path, size: int, options: StagingOptions, streams: int,
                       writeback: WriteBehind | None, fsync: bool,
                       verify: bool) -> tuple[CopyResult, VerifyResult | None]:
    """Copy one file into its temporary name, blocks in parallel, handing each range to write-behind
    (or fsyncing it here); then (``verify``) read the landed copy back and compare block digests."""
    tmp = temp_name(dest)
    chunk = options.chunk_bytes
    t_start, t0 = time.time(), time.perf_counter()
    pieces = blocks(size)
    src_fd = os.open(source, os.O_RDONLY)
    try:
        dst_fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        writeback_fd = writeback.attach(dst_fd, size) if writeback is not None else -1
        try:
            if size > chunk:
                os.posix_fadvise(src_fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # cold reads on one stream 5x faster here
            digests: list[bytes] = [b""] * len(pieces)
            if len(pieces) > 1:
                os.ftruncate(dst_fd, size)

            def copy_block(index: int) -> None:
                digests[index] = _copy_range(src_fd, dst_fd, *pieces[index], chunk, writeback, writeback_fd, dest)

            in_parallel(copy_block, len(pieces), streams)
            if fsync:
                os.fsync(dst_fd)
            elif writeback is not None and writeback_fd < 0:
                writeback.small_file(dest.parent, size)
            checksum = combine_block_digests(digests)
            copied = CopyResult(source, dest, size, checksum, t_start, time.perf_counter() - t0, temporary=tmp)
            if not verify:
                return copied, None
            if options.faults.corrupt == dest:
                corrupt(tmp)
            v_start, v0 = time.time(), time.perf_counter()
            landed_size = os.fstat(dst_fd).st_size
            if landed_size != size:
                raise StagingError(f"{dest}: size {landed_size} bytes, expected {size}")
            landed: list[bytes] = [b""] * len(pieces)

            def read_block(index: int) -> None:
                landed[index] = read_range_digest(dst_fd, *pieces[index], chunk)

            in_parallel(read_block, len(pieces), streams)
            if landed != digests:
                raise mismatch(dest, combine_block_digests(landed), checksum)
            return copied, VerifyResult(dest, size, v_start, time.perf_counter() - v0, direct_io=False)
        finally:
            os.close(dst_fd)
            if writeback is not None:
                writeback.release(writeback_fd)
    except BaseException:
        discard(tmp)
        raise
    finally:
        os.close(src_fd)
