"""The cycleio copy engine: one file into its temporary name, blocks on parallel streams, hashed as read,
handed to a write-behind thread that writes copied ranges to storage while the copy goes on, and read
back and verified while the copy goes on (a large block) or right after it (a small file)."""

from __future__ import annotations

import ctypes
import errno
import os
import queue
import threading
import time
from collections import deque
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


SYNC_FILE_RANGE_WRITE = 2  # start writing the range's dirty pages, do not wait
_WRITE_AND_WAIT = 1 | 2 | 4  # SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
# Filesystems that cannot do sync_file_range say so with these; the final syncfs then does all the work.
_UNSUPPORTED = {errno.EINVAL, errno.ESPIPE, errno.ENOSYS, errno.EOPNOTSUPP}


# Where one syncfs makes a whole batch durable. Elsewhere (FUSE, NFS, other network filesystems)
# syncfs may return success without flushing the client's caches (FUSE answers ENOSYS from the
# daemon with 0), so each copy is fsynced by its own stream, and those fsyncs run in parallel.
SYNCFS_FILESYSTEMS = {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "lustre", "tmpfs", "ramfs"}


def syncfs_makes_durable(folder: Path) -> bool:
    return filesystem_type(folder) in SYNCFS_FILESYSTEMS


MEMORY_FILESYSTEMS = {"tmpfs", "ramfs"}


def small_file_streams(sources: list[Path], streams: int) -> int:
    """Streams for copying small files with this engine: one when every source is in memory (tmpfs).

    Such a copy never waits on storage for its reads, only for the GIL: with more threads each of
    the few system calls per file hands the GIL over (tens of futex calls per file), and 1000 x
    128 KiB from /dev/shm went at 510 MiB/s on one stream, 440 on two and 409 on four here. From
    disk the streams overlap the cold reads (there 194, 221 and 291 MiB/s), so they stay.
    """
    folders = {source.parent for source in sources}
    if streams > 1 and folders and all(filesystem_type(folder) in MEMORY_FILESYSTEMS for folder in folders):
        return 1
    return streams


# Files under this size are not written out one by one (a wait per small file costs more than it
# overlaps, and starting each one alone measured slower than batching them); instead a syncfs every
# SYNCFS_EVERY_BYTES of them (measured best of 8-64 MiB here).
SMALL_FILE_BYTES = 2**20
SYNCFS_EVERY_BYTES = 16 * 2**20
# A large file goes to storage in ranges of WRITE_BEHIND_BYTES, each started as soon as it is copied;
# the oldest are waited for once IN_FLIGHT_BYTES are on their way (64 MiB measured faster here than
# 16 MiB or 256 MiB for 64 MiB and 512 MiB files; it bounds the dirty pages one copy holds).
WRITE_BEHIND_BYTES = 2 * 2**20
IN_FLIGHT_BYTES = 64 * 2**20
# Blocks of this size or more are verified while they are copied (a thread a range behind the copy).
TRAILING_VERIFY_BYTES = 4 * 2**20


class WriteBehind:
    """Writes copied data to storage while the copy goes on.

    Without it every dirty page of a batch waits for the final syncfs (the kernel starts writing
    only after 30 s or a tenth of memory), so copying and writing to storage happen one after the
    other (cp followed by sync). Here each copied range of a large file is handed to a thread that
    starts writing it at once (sync_file_range WRITE, no wait) and waits for the oldest ranges only
    once IN_FLIGHT_BYTES are on their way: the device always has work queued (waiting for each
    range before starting the next, as this did before, left it idle between ranges) and the dirty
    pages one copy holds stay bounded. Small files
    are written out together by a syncfs every SYNCFS_EVERY_BYTES. The final syncfs (still what
    makes the copies durable, with their metadata and the device cache) finds little left to do.
    """

    def __init__(self):
        self.enabled = _sync_file_range is not None
        self.error: StagingError | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._small_bytes = 0
        self._lock = threading.Lock()
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
        """Count a small copy; every SYNCFS_EVERY_BYTES of them the thread writes them out with a syncfs.
        (Counted here, by the copying streams: a handoff to the thread per file cost more than the copy.)"""
        if not self.enabled:
            return
        with self._lock:
            self._small_bytes += length
            due = self._small_bytes >= SYNCFS_EVERY_BYTES
            if due:
                self._small_bytes = 0
        if due:
            self._queue.put(("small", folder))

    def _run(self) -> None:
        pending: deque[tuple[int, int, int, Path]] = deque()
        in_flight = 0
        folders: dict[Path, int] = {}
        try:
            while (item := self._queue.get()) is not None:
                if item[0] == "close":
                    while pending:  # this file's ranges are the newest: wait for all, then let go of it
                        fd, offset, length, path = pending.popleft()
                        self._sync(fd, offset, length, _WRITE_AND_WAIT, path)
                    in_flight = 0
                    os.close(item[1])
                elif not self.enabled or self.error is not None:
                    continue
                elif item[0] == "range":
                    fd, offset, length, path = item[1:]
                    self._sync(fd, offset, length, SYNC_FILE_RANGE_WRITE, path)
                    pending.append((fd, offset, length, path))
                    in_flight += length
                    while in_flight > IN_FLIGHT_BYTES:
                        fd, offset, length, path = pending.popleft()
                        self._sync(fd, offset, length, _WRITE_AND_WAIT, path)
                        in_flight -= length
                else:
                    folder = item[1]
                    if folder not in folders:
                        folders[folder] = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
                    libc.syncfs(folders[folder])  # errors surface in the final make_durable
        finally:
            for fd in folders.values():
                os.close(fd)

    def _sync(self, fd: int, offset: int, length: int, flags: int, path: Path) -> None:
        if not self.enabled or self.error is not None:
            return
        if _sync_file_range(fd, offset, length, flags) != 0:
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


class _Trailing:
    """Verifies a block while it is being copied: a thread reads back (from the page cache) and hashes
    each range the copy has written, a range behind it, so the verification of a large file ends
    shortly after its copy instead of taking a second pass after it (the copy waits on its reads
    from storage meanwhile, and xxhash and the reads let go of the GIL)."""

    def __init__(self, fd: int, start: int, length: int, chunk_bytes: int):
        self.fd, self.start, self.end, self.chunk = fd, start, start + length, chunk_bytes
        self.written = start
        self.stopped = False
        self.result: bytes | BaseException = b""
        self.started = 0.0  # perf_counter when its first read began
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="cycleio-verify", daemon=True)
        self._thread.start()

    def advance(self, written: int) -> None:
        with self._ready:
            self.written = written
            self._ready.notify()

    def _run(self) -> None:
        digest = xxhash.xxh3_64()
        buffer = memoryview(buffers.get(self.chunk))
        offset = self.start
        self.started = time.perf_counter()
        try:
            while offset < self.end:
                with self._ready:
                    while self.written <= offset and not self.stopped:
                        self._ready.wait()
                    if self.stopped:
                        return
                    upto = self.written
                while offset < upto:
                    got = os.preadv(self.fd, [buffer[: min(len(buffer), upto - offset)]], offset)
                    if not got:
                        raise OSError(errno.EIO, f"the copy shrank while it was verified (offset {offset})")
                    digest.update(buffer[:got])
                    offset += got
            self.result = digest.digest()
        except BaseException as err:  # noqa: BLE001 - handed to the copying thread, which raises it
            self.result = err

    def digest(self) -> bytes:
        self._thread.join()
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result

    def stop(self) -> None:
        with self._ready:
            self.stopped = True
            self._ready.notify()
        self._thread.join()


def _copy_range(src_fd: int, dst_fd: int, start: int, length: int, chunk_bytes: int,
                writeback: WriteBehind | None = None, writeback_fd: int = -1, path: Path | None = None,
                trailing: _Trailing | None = None) -> bytes:
    """Copy [start, start+length) with pread/pwrite; return the xxh3-64 digest of those bytes. Every
    WRITE_BEHIND_BYTES the written range goes to write-behind and to the trailing verifier."""
    digest = xxhash.xxh3_64()
    buffer = buffers.get(chunk_bytes)
    offset, end = start, start + length
    handed = start  # written but not yet handed on
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
        if offset - handed >= WRITE_BEHIND_BYTES or offset == end:
            if writeback is not None:
                writeback.submit(writeback_fd, handed, offset - handed, path)
            if trailing is not None:
                trailing.advance(offset)
            handed = offset
    return digest.digest()


def _copy_whole(src_fd: int, dst_fd: int, size: int, view: memoryview) -> bytes:
    """Copy a file that fits ``view`` (one read, one write); return its xxh3-64 digest."""
    done = 0
    while done < size:
        got = os.preadv(src_fd, [view[done:size]], done)
        if not got:
            raise OSError(errno.EIO, f"source shrank while copying (short read at offset {done})")
        done += got
    done = 0
    while done < size:
        done += os.pwrite(dst_fd, view[done:size], done)
    return xxhash.xxh3_64_digest(view[:size])


def _read_whole(fd: int, size: int, view: memoryview) -> bytes:
    """The xxh3-64 digest of a file's first ``size`` bytes (fewer if it is shorter), read into ``view``."""
    done = 0
    while done < size and (got := os.preadv(fd, [view[done:size]], done)):
        done += got
    return xxhash.xxh3_64_digest(view[:done])


# What copying a file's blocks gives back: the digests read from the source, those read back from the
# copy (b"" each when not verified), when the copy ended, when verification began and ended (perf_counter).
_Copied = tuple[list[bytes], list[bytes], float, float, float]


def _copy_one_chunk(src_fd: int, dst_fd: int, size: int, chunk: int, verify: bool) -> _Copied:
    """A file of one chunk at most (most staged files): one read, one write, one read back, without the
    blocks' bookkeeping, which for such a file costs as much as the copy."""
    view = memoryview(buffers.get(chunk))
    digest = _copy_whole(src_fd, dst_fd, size, view)
    copied_at = time.perf_counter()
    landed = _read_whole(dst_fd, size, view) if verify else b""
    return [digest], [landed], copied_at, copied_at, time.perf_counter()


def _copy_blocks(src_fd: int, dst_fd: int, size: int, chunk: int, verify: bool, streams: int,
                 writeback: WriteBehind | None, writeback_fd: int, dest: Path) -> _Copied:
    """Blocks on parallel streams, each range handed to write-behind as it is written; with ``verify`` a
    block of TRAILING_VERIFY_BYTES or more is verified while it is copied (_Trailing), a smaller one
    right after."""
    pieces = blocks(size)
    os.posix_fadvise(src_fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # cold reads on one stream 5x faster here
    if len(pieces) > 1:
        os.ftruncate(dst_fd, size)
    digests: list[bytes] = [b""] * len(pieces)
    landed: list[bytes] = [b""] * len(pieces)
    copied_at = [0.0] * len(pieces)
    verify_from = [float("inf")] * len(pieces)

    def copy_block(index: int) -> None:
        start, length = pieces[index]
        trailing = _Trailing(dst_fd, start, length, chunk) if verify and length >= TRAILING_VERIFY_BYTES else None
        try:
            digests[index] = _copy_range(src_fd, dst_fd, start, length, chunk, writeback, writeback_fd, dest, trailing)
        except BaseException:
            if trailing is not None:
                trailing.stop()
            raise
        copied_at[index] = time.perf_counter()
        if trailing is not None:
            landed[index] = trailing.digest()
            verify_from[index] = trailing.started
        elif verify:
            verify_from[index] = copied_at[index]
            landed[index] = read_range_digest(dst_fd, start, length, chunk)

    in_parallel(copy_block, len(pieces), streams)
    return digests, landed, max(copied_at), min(verify_from), time.perf_counter()


def _read_back(dst_fd: int, size: int, chunk: int, streams: int) -> list[bytes]:
    pieces = blocks(size)
    landed: list[bytes] = [b""] * len(pieces)

    def read_block(index: int) -> None:
        landed[index] = read_range_digest(dst_fd, *pieces[index], chunk)

    in_parallel(read_block, len(pieces), streams)
    return landed


def stage_with_engine(source: Path, dest: Path, size: int, options: StagingOptions, streams: int,
                       writeback: WriteBehind | None, fsync: bool,
                       verify: bool) -> tuple[CopyResult, VerifyResult | None]:
    """Copy one file into its temporary name, blocks in parallel, handing each range to write-behind
    (or fsyncing it here); with ``verify`` read the landed copy back (from the page cache) and compare
    block digests, as each block is copied. An injected corruption (faults.corrupt) goes in after the
    whole copy, so that file is read back after it."""
    tmp = temp_name(dest)
    chunk = options.chunk_bytes
    t_start, t0 = time.time(), time.perf_counter()
    inject = verify and options.faults.corrupt == dest
    src_fd = os.open(source, os.O_RDONLY)
    try:
        dst_fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        writeback_fd = writeback.attach(dst_fd, size) if writeback is not None else -1
        try:
            if size <= chunk and not inject:
                digests, landed, copied_at, v0, v1 = _copy_one_chunk(src_fd, dst_fd, size, chunk, verify)
            else:
                digests, landed, copied_at, v0, v1 = _copy_blocks(src_fd, dst_fd, size, chunk, verify and not inject,
                                                                  streams, writeback, writeback_fd, dest)
            if fsync:
                os.fsync(dst_fd)
            elif writeback is not None and writeback_fd < 0:
                writeback.small_file(dest.parent, size)
            checksum = combine_block_digests(digests)
            copied = CopyResult(source, dest, size, checksum, t_start, copied_at - t0, temporary=tmp)
            if not verify:
                return copied, None
            if inject:
                corrupt(tmp)
                v0 = time.perf_counter()
                landed = _read_back(dst_fd, size, chunk, streams)
                v1 = time.perf_counter()
            landed_size = os.fstat(dst_fd).st_size
            if landed_size != size:
                raise StagingError(f"{dest}: size {landed_size} bytes, expected {size}")
            if landed != digests:
                raise mismatch(dest, combine_block_digests(landed), checksum)
            return copied, VerifyResult(dest, size, t_start + (v0 - t0), v1 - v0, direct_io=False)
        finally:
            os.close(dst_fd)
            if writeback is not None:
                writeback.release(writeback_fd)
    except BaseException:
        discard(tmp)
        raise
    finally:
        os.close(src_fd)
