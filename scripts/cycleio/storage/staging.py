"""Verified copies between tiers: the staging engine.

A copy streams the source into a temporary name beside the destination while hashing what it
read, is made durable, and is renamed into place, so a partial file never carries a final name.
Verification re-reads the landed copy and compares its checksum with the one taken while reading
the source. Parallel streams (threads) copy many files at once, and the blocks of a large file at
once; a write-behind thread writes copied ranges to storage while the copy goes on.

Methods: ``cycleio`` (this engine), ``cp`` and ``rsync`` (the tools copy into the temporary name;
the source checksum is then a separate read), so a study can compare them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import logging
import mmap
import os
import queue
import shutil
import subprocess
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import xxhash

from .tiers import filesystem_type
from ..faults import InjectedFault
from ..process import run_command
from ..units import MiB
from .fsutil import (BLOCK_BYTES, CHUNK_BYTES, BlockHasher, combine_block_digests, discard, fsync_dir, fsync_file,
                     is_temporary, temp_name)

# The staging methods (config key staging.method): this engine, or a command that copies a file
# into the temporary name, as argv from (the command's path, source, temporary).
TOOL_COMMANDS: dict[str, Callable[[str, Path, Path], list[str]]] = {
    "cp": lambda tool, source, tmp: [tool, "--", str(source), str(tmp)],
    "rsync": lambda tool, source, tmp: [tool, "--whole-file", "--", str(source), str(tmp)],
}
METHODS = ("cycleio", *TOOL_COMMANDS)
TOOL_TIMEOUT_S = 600
log = logging.getLogger(__name__)


class StagingError(RuntimeError):
    """A copy or a verification that failed; the message names the file and the OS error."""


# Bytes per read/hash/write of a copy. Small enough that a chunk is still in the CPU cache when it
# is hashed and written, and that the page cache fills with small folios: with 1-8 MiB writes a
# single stream here ran 2-3x slower (large-folio allocations, memcpy into cold memory), and
# 128 KiB was slower again on cold reads. Write-behind still works in WRITE_BEHIND_BYTES pieces.
COPY_CHUNK_BYTES = 256 * 2**10


@dataclass(frozen=True)
class StagingFaults:
    """Fault injection (the config's ``faults``), for rehearsing failures: ``corrupt`` flips a byte of
    this destination's copy after it is written and before it is verified; ``fail_after_files``
    makes the batch raise InjectedFault once that many files are copied."""

    corrupt: Path | None = None
    fail_after_files: int | None = None


@dataclass(frozen=True)
class StagingOptions:
    method: str = "cycleio"
    streams: int = 4
    direct_io_verify: bool = False  # verify with O_DIRECT reads where the filesystem allows them
    chunk_bytes: int = COPY_CHUNK_BYTES
    # Make the copies durable (sync) before they get final names. Off for copies onto a tier whose
    # data do not outlive the job (scratch): they are still verified and renamed, not synced.
    durable: bool = True
    faults: StagingFaults = StagingFaults()


@dataclass
class CopyResult:
    source: Path
    dest: Path
    bytes: int
    checksum: str
    t_start: float
    seconds: float
    source_checksum_seconds: float = 0.0  # cp/rsync: the separate read of the source
    temporary: Path | None = None


@dataclass
class VerifyResult:
    path: Path
    bytes: int
    t_start: float
    seconds: float
    direct_io: bool


def _os_error(action: str, source: Path, dest: Path, err: OSError) -> StagingError:
    return StagingError(f"{action} {source} -> {dest} failed: [Errno {err.errno}] {err.strerror or err}")


_libc = ctypes.CDLL(None, use_errno=True)
_sync_file_range = getattr(_libc, "sync_file_range", None)
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
                        _libc.syncfs(folders[folder])  # errors surface in the final make_durable
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


class _Buffers(threading.local):
    """One reusable buffer per thread (allocating per file costs more than copying a small file)."""

    def get(self, size: int) -> bytearray:
        buffer = getattr(self, "buffer", None)
        if buffer is None or len(buffer) != size:
            buffer = self.buffer = bytearray(size)
        return buffer


_buffers = _Buffers()


def _in_parallel(function: Callable[[int], None], count: int, streams: int) -> None:
    """Call ``function(0..count-1)`` on up to ``streams`` threads; after the first error start no new
    items, wait for the running ones and re-raise it (so nothing is still writing when we clean up)."""
    if streams <= 1 or count <= 1:
        for index in range(count):
            function(index)
        return
    with ThreadPoolExecutor(max_workers=min(streams, count), thread_name_prefix="cycleio-stream") as pool:
        futures = [pool.submit(function, index) for index in range(count)]
        wait(futures, return_when=FIRST_EXCEPTION)
        failed = next((f for f in futures if f.done() and not f.cancelled() and f.exception()), None)
        if failed is not None:
            for future in futures:
                future.cancel()
    if failed is not None:  # the pool has waited for the items that were running
        raise failed.exception()


def _blocks(size: int) -> list[tuple[int, int]]:
    return [(start, min(BLOCK_BYTES, size - start)) for start in range(0, size, BLOCK_BYTES)] or [(0, 0)]


def _copy_range(src_fd: int, dst_fd: int, start: int, length: int, chunk_bytes: int,
                writeback: WriteBehind | None = None, writeback_fd: int = -1, path: Path | None = None) -> bytes:
    """Copy [start, start+length) with pread/pwrite; return the xxh3-64 digest of those bytes."""
    digest = xxhash.xxh3_64()
    buffer = _buffers.get(chunk_bytes)
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


def _read_range_digest(fd: int, start: int, length: int, chunk_bytes: int) -> bytes:
    """xxh3-64 of [start, start+length) of an open file, read through the page cache."""
    digest = xxhash.xxh3_64()
    buffer = _buffers.get(chunk_bytes)
    offset, end = start, start + length
    while offset < end:
        got = os.preadv(fd, [memoryview(buffer)[: min(len(buffer), end - offset)]], offset)
        if not got:
            break
        digest.update(memoryview(buffer)[:got])
        offset += got
    return digest.digest()


def _corrupt(path: Path) -> None:
    """Fault injection: flip the middle byte of a landed copy (an empty one gains a byte)."""
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(size // 2)
        byte = handle.read(1) or b"\0"
        handle.seek(size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    log.warning("injected fault (config faults.corrupt_staged_file): flipped a byte of %s", path)


def _mismatch(name: Path, actual: str, expected: str, expected_from: str = "the source's") -> StagingError:
    return StagingError(f"{name}: checksum {actual} does not match {expected_from} {expected} (corrupt copy)")


def _stage_with_engine(source: Path, dest: Path, size: int, options: StagingOptions, streams: int,
                       writeback: WriteBehind | None, fsync: bool,
                       verify: bool) -> tuple[CopyResult, VerifyResult | None]:
    """Copy one file into its temporary name, blocks in parallel, handing each range to write-behind
    (or fsyncing it here); then (``verify``) read the landed copy back and compare block digests."""
    tmp = temp_name(dest)
    chunk = options.chunk_bytes
    t_start, t0 = time.time(), time.perf_counter()
    blocks = _blocks(size)
    src_fd = os.open(source, os.O_RDONLY)
    try:
        dst_fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        writeback_fd = writeback.attach(dst_fd, size) if writeback is not None else -1
        try:
            if size > chunk:
                os.posix_fadvise(src_fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  # cold reads on one stream 5x faster here
            digests: list[bytes] = [b""] * len(blocks)
            if len(blocks) > 1:
                os.ftruncate(dst_fd, size)

            def copy_block(index: int) -> None:
                digests[index] = _copy_range(src_fd, dst_fd, *blocks[index], chunk, writeback, writeback_fd, dest)

            _in_parallel(copy_block, len(blocks), streams)
            if fsync:
                os.fsync(dst_fd)
            elif writeback is not None and writeback_fd < 0:
                writeback.small_file(dest.parent, size)
            checksum = combine_block_digests(digests)
            copied = CopyResult(source, dest, size, checksum, t_start, time.perf_counter() - t0, temporary=tmp)
            if not verify:
                return copied, None
            if options.faults.corrupt == dest:
                _corrupt(tmp)
            v_start, v0 = time.time(), time.perf_counter()
            landed_size = os.fstat(dst_fd).st_size
            if landed_size != size:
                raise StagingError(f"{dest}: size {landed_size} bytes, expected {size}")
            landed: list[bytes] = [b""] * len(blocks)

            def read_block(index: int) -> None:
                landed[index] = _read_range_digest(dst_fd, *blocks[index], chunk)

            _in_parallel(read_block, len(blocks), streams)
            if landed != digests:
                raise _mismatch(dest, combine_block_digests(landed), checksum)
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


def _copy_with_tool(source: Path, tmp: Path, method: str) -> None:
    tool = shutil.which(method)
    if tool is None:
        raise StagingError(f"staging method {method!r}: the {method} command is not installed")
    timeout = TOOL_TIMEOUT_S + os.stat(source).st_size / MiB  # at least 1 MiB/s after a start-up allowance
    try:
        result = run_command(TOOL_COMMANDS[method](tool, source, tmp), timeout=timeout, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired:
        raise StagingError(f"{method} {source} -> {tmp} did not finish within {timeout:.0f} s; stopped") from None
    if result.returncode != 0:
        raise StagingError(f"{method} {source} -> {tmp} failed: {result.stderr.strip()}")


def _stage_with_tool(source: Path, dest: Path, options: StagingOptions, streams: int, fsync: bool) -> CopyResult:
    """cp or rsync into the temporary name (fsynced here if ``fsync``), then the source checksum as a separate read."""
    tmp = temp_name(dest)
    t_start, t0 = time.time(), time.perf_counter()
    try:
        _copy_with_tool(source, tmp, options.method)
        if fsync:
            fsync_file(tmp)
        c0 = time.perf_counter()
        checksum = checksum_file(source, options, streams)
    except BaseException:
        discard(tmp)
        raise
    checksum_seconds = time.perf_counter() - c0
    return CopyResult(source, dest, tmp.stat().st_size, checksum, t_start, c0 - t0, checksum_seconds, tmp)


def make_durable(paths: list[Path]) -> None:
    """Flush files to storage: one syncfs per filesystem (one journal commit for many files)."""
    folders: dict[int, Path] = {}
    for path in paths:
        folders.setdefault(os.stat(path).st_dev, path.parent)
    for folder in folders.values():
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if getattr(_libc, "syncfs", None) is None or _libc.syncfs(fd) != 0:
                for path in paths:  # no syncfs: fsync file by file
                    file_fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(file_fd)
                    finally:
                        os.close(file_fd)
                return
        finally:
            os.close(fd)


def copy_file(source: Path, dest: Path, options: StagingOptions = StagingOptions()) -> CopyResult:
    """Copy one file (temporary name, fsync, verify, rename); return its size and source checksum."""
    ((copied, _),), _ = copy_and_verify([(Path(source), Path(dest))], options)
    return copied


class _DirectReader:
    """O_DIRECT reads into a page-aligned buffer; raises OSError where the filesystem refuses."""

    def __init__(self, path: Path, chunk_bytes: int):
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        self.buffer = mmap.mmap(-1, chunk_bytes)

    def digest(self, start: int, length: int) -> bytes:
        digest = xxhash.xxh3_64()
        offset, end = start, start + length
        while offset < end:
            got = os.preadv(self.fd, [self.buffer], offset)
            if not got:
                break
            digest.update(memoryview(self.buffer)[: min(got, end - offset)])
            offset += got
        return digest.digest()

    def close(self) -> None:
        os.close(self.fd)
        self.buffer.close()


def _hash_range(path: Path, start: int, length: int, chunk_bytes: int, direct: bool) -> bytes:
    if direct:
        reader = _DirectReader(path, max(chunk_bytes, CHUNK_BYTES))  # large reads: O_DIRECT has no readahead
        try:
            return reader.digest(start, length)
        finally:
            reader.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        return _read_range_digest(fd, start, length, chunk_bytes)
    finally:
        os.close(fd)


def checksum_file(path: Path, options: StagingOptions = StagingOptions(), streams: int = 1,
                  direct: bool = False) -> str:
    """Block-tree checksum (the same as fsutil.file_checksum), blocks read on ``streams`` threads."""
    size = path.stat().st_size
    if size == 0:
        return BlockHasher().hexdigest()
    blocks = _blocks(size)
    digests: list[bytes] = [b""] * len(blocks)

    def hash_block(index: int) -> None:
        digests[index] = _hash_range(path, *blocks[index], options.chunk_bytes, direct)

    _in_parallel(hash_block, len(blocks), streams)
    return combine_block_digests(digests)


def verify_file(path: Path, expected_bytes: int, expected_checksum: str, options: StagingOptions = StagingOptions(),
                streams: int = 1, name: Path | None = None, expected_from: str = "the source's") -> VerifyResult:
    """Re-read a copy; raise StagingError naming the file (``name``, else ``path``) when size or checksum differ
    (``expected_from`` says whose the expected values are)."""
    t_start, t0 = time.time(), time.perf_counter()
    name = name or path
    size = path.stat().st_size
    if size != expected_bytes:
        raise StagingError(f"{name}: size {size} bytes, expected {expected_bytes}")
    direct = options.direct_io_verify
    try:
        actual = checksum_file(path, options, streams, direct=direct)
    except OSError:
        if not direct:
            raise
        direct = False  # the filesystem refuses O_DIRECT (tmpfs): read through the page cache
        actual = checksum_file(path, options, streams)
    if actual != expected_checksum:
        raise _mismatch(name, actual, expected_checksum, expected_from)
    return VerifyResult(name, size, t_start, time.perf_counter() - t0, direct)


def verify_manifest(manifest_path: Path, options: StagingOptions = StagingOptions()) -> tuple[int, list[str]]:
    """Re-read every file a job's manifest lists against its bytes and checksum, as the job verified them when it
    landed; return how many matched and one line per file that is missing or differs."""
    manifest = json.loads(Path(manifest_path).read_text())
    root = Path(manifest["root"])
    matched, problems = 0, []
    for output in manifest.get("outputs", []):
        path = root / output["path"]
        try:
            verify_file(path, output["bytes"], output["xxh3_64"], options, expected_from="the manifest's")
            matched += 1
        except FileNotFoundError:
            problems.append(f"{manifest_path}: {path} is missing")
        except (StagingError, OSError) as err:
            problems.append(f"{manifest_path}: {err}")
    return matched, problems


@dataclass
class LandResult:
    """The batch step that makes copies durable and gives them their final names."""

    files: int
    bytes: int
    t_start: float
    seconds: float


def remove_stale_temporaries(dests: list[Path]) -> int:
    """Remove temporaries of these destinations left by an earlier, killed process; return how many.

    A copy killed before its rename leaves ".NAME.tmp-PID" beside NAME. The rerun of that job
    writes the same NAMEs, so their temporaries from any other process are garbage (and can be as
    large as the file). One listing per folder.
    """
    wanted: dict[Path, set[str]] = {}
    for dest in dests:
        wanted.setdefault(dest.parent, set()).add(dest.name)
    ours = str(os.getpid())
    removed, removed_bytes, example = 0, 0, ""
    for folder, names in wanted.items():
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if not is_temporary(entry.name):
                continue
            final, pid = entry.name[1:].rsplit(".tmp-", 1)
            if final in names and pid != ours:
                with contextlib.suppress(FileNotFoundError):
                    removed_bytes += entry.stat().st_size
                    os.unlink(entry.path)
                    removed, example = removed + 1, entry.path
    if removed:
        log.info("removed %d temporaries (%.1f MiB) left by an interrupted run, e.g. %s", removed,
                 removed_bytes / MiB, example)
    return removed


def _give_final_names(copies: list[CopyResult], local_folders: set[Path], streams: int, durable: bool) -> None:
    """Rename verified copies into place and sync their folders. On a network filesystem a rename
    is a round trip to a server (about 2 ms on GlusterFS here), so those run on parallel streams;
    local renames in one folder only contend for its lock, so they run one after the other."""
    local = [copy for copy in copies if copy.dest.parent in local_folders]
    remote = [copy for copy in copies if copy.dest.parent not in local_folders]

    def rename(copy: CopyResult) -> None:
        try:
            os.replace(copy.temporary, copy.dest)
        except OSError as err:
            raise _os_error("rename", copy.temporary, copy.dest, err) from err

    try:
        for copy in local:
            rename(copy)
        _in_parallel(lambda n: rename(remote[n]), len(remote), streams)
    except BaseException:
        for copy in copies:
            discard(copy.temporary)
        raise
    if durable:
        for folder in {copy.dest.parent for copy in copies}:
            fsync_dir(folder)


def copy_and_verify(pairs: list[tuple[Path, Path]], options: StagingOptions = StagingOptions(),
                    progress: Callable[[int, int, int], None] | None = None,
                    ) -> tuple[list[tuple[CopyResult, VerifyResult]], LandResult]:
    """Copy many files with parallel streams, make them durable, verify them, then rename them.

    Files larger than one checksum block are copied one at a time with their blocks in parallel;
    smaller files several at a time. All copies go to temporary names. With the cycleio method a
    write-behind thread writes each copied range to storage during the copy, and every copy is
    read back and checked as soon as it is written (from the page cache: the same bytes a read
    after the sync would see); one syncfs per destination filesystem then makes the batch durable
    (on FUSE and network filesystems each stream fsyncs its own copies instead, in parallel).
    Without ``options.durable`` (copies onto scratch) nothing is synced; the rest is the same.
    With O_DIRECT verification, or cp/rsync, the batch is synced first and verified after. Only
    then do the copies get their final names: on any error every temporary is removed, and no file
    of a batch that failed verification carries a final name.
    """
    pairs = [(Path(source), Path(dest)) for source, dest in pairs]
    streams = max(1, options.streams)
    engine = options.method == "cycleio"
    verify_inline = engine and not options.direct_io_verify
    copies: list[CopyResult | None] = [None] * len(pairs)
    verified: list[VerifyResult | None] = [None] * len(pairs)
    sizes: list[int] = []
    for source, dest in pairs:
        try:
            sizes.append(os.stat(source).st_size)
        except OSError as err:
            raise _os_error("copy", source, dest, err) from err
    for folder in {dest.parent for _, dest in pairs}:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StagingError(f"cannot create {folder}: [Errno {err.errno}] {err.strerror or err}") from err
    remove_stale_temporaries([dest for _, dest in pairs])
    syncfs_folders = {folder for folder in {dest.parent for _, dest in pairs} if syncfs_makes_durable(folder)}
    writeback = WriteBehind() if engine and options.durable else None
    counted = {"files": 0, "bytes": 0, "started": 0}
    lock = threading.Lock()
    fail_after = options.faults.fail_after_files

    def stage_one(index: int, block_streams: int) -> None:
        source, dest = pairs[index]
        if fail_after is not None:
            with lock:
                counted["started"] += 1
                if counted["started"] > fail_after:
                    raise InjectedFault(f"injected fault (config faults.fail_stage_out): the copy of {dest} fails "
                                        f"after {fail_after} of {len(pairs)} files")
        try:
            batch_sync = dest.parent in syncfs_folders
            fsync = options.durable and not batch_sync
            if engine:
                copies[index], verified[index] = _stage_with_engine(
                    source, dest, sizes[index], options, block_streams, writeback if batch_sync else None, fsync,
                    verify_inline)
            else:
                copies[index] = _stage_with_tool(source, dest, options, block_streams, fsync)
        except OSError as err:
            raise _os_error("copy", source, dest, err) from err
        if progress:
            with lock:
                counted["files"] += 1
                counted["bytes"] += sizes[index]
                progress(counted["files"], len(pairs), counted["bytes"])

    def verify_one(index: int, block_streams: int) -> None:
        copy = copies[index]
        if options.faults.corrupt == copy.dest:
            _corrupt(copy.temporary)
        verified[index] = verify_file(copy.temporary, copy.bytes, copy.checksum, options, block_streams,
                                      name=copy.dest)

    large = [i for i, size in enumerate(sizes) if size > BLOCK_BYTES]
    small = [i for i, size in enumerate(sizes) if size <= BLOCK_BYTES]
    try:
        try:
            for index in large:
                stage_one(index, streams)
            _in_parallel(lambda n: stage_one(small[n], 1), len(small), streams)
        except BaseException:
            if writeback is not None:
                writeback.close(raise_error=False)
            raise
        if writeback is not None:
            writeback.close()  # raises a write-behind I/O error, naming the file
        t_land, t0 = time.time(), time.perf_counter()
        if options.durable:
            make_durable([c.temporary for c in copies if c.dest.parent in syncfs_folders])
        land_seconds = time.perf_counter() - t0
        if not verify_inline:
            _in_parallel(lambda n: verify_one(small[n], 1), len(small), streams)
            for index in large:
                verify_one(index, streams)
    except BaseException:
        for copy in copies:
            if copy is not None:
                discard(copy.temporary)
        raise
    t0 = time.perf_counter()
    _give_final_names(copies, syncfs_folders, streams, options.durable)
    land = LandResult(len(copies), sum(c.bytes for c in copies), t_land,
                      land_seconds + time.perf_counter() - t0)
    return list(zip(copies, verified)), land


def remove_tree(path: Path) -> int:
    """Remove a scratch folder; return the number of files removed."""
    removed = 0
    if not path.exists():
        return 0
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            os.unlink(os.path.join(root, name))
            removed += 1
        for name in dirs:
            os.rmdir(os.path.join(root, name))
    os.rmdir(path)
    return removed
