"""Verified copies between tiers: the staging engine.

A copy streams the source into a temporary name beside the destination while hashing what it
read, fsyncs, and renames into place, so a partial file never carries a final name. Verification
re-reads the landed copy and compares its checksum with the one taken while reading the source.
Parallel streams (threads) copy many files at once, and the blocks of a large file at once.

Methods: ``cycleio`` (this engine), ``cp`` and ``rsync`` (the tools copy into the temporary name;
the source checksum is then a separate read), so a study can compare them.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import xxhash

from .fsutil import BLOCK_BYTES, CHUNK_BYTES, BlockHasher, combine_block_digests, fsync_dir, temp_name

METHODS = ("cycleio", "cp", "rsync")


class StagingError(RuntimeError):
    """A copy or a verification that failed; the message names the file and the OS error."""


@dataclass(frozen=True)
class StagingOptions:
    method: str = "cycleio"
    streams: int = 4
    direct_io_verify: bool = False  # verify with O_DIRECT reads where the filesystem allows them
    chunk_bytes: int = CHUNK_BYTES


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


# Test hook: called with the landed temporary file before it is renamed (to corrupt it on purpose).
BEFORE_RENAME_HOOK: Callable[[Path], None] | None = None


def _os_error(action: str, source: Path, dest: Path, err: OSError) -> StagingError:
    return StagingError(f"{action} {source} -> {dest} failed: [Errno {err.errno}] {err.strerror or err}")


def _copy_range(src_fd: int, dst_fd: int, start: int, length: int, chunk_bytes: int) -> bytes:
    """Copy [start, start+length) with pread/pwrite; return the xxh3-64 digest of those bytes."""
    digest = xxhash.xxh3_64()
    buffer = bytearray(min(chunk_bytes, max(length, 1)))
    offset, end = start, start + length
    while offset < end:
        view = memoryview(buffer)[: min(len(buffer), end - offset)]
        got = os.preadv(src_fd, [view], offset)
        if not got:
            raise OSError(5, f"source shrank while copying (short read at offset {offset})")
        data = view[:got]
        digest.update(data)
        while data:
            written = os.pwrite(dst_fd, data, offset)
            data, offset = data[written:], offset + written
    return digest.digest()


def _copy_with_engine(source: Path, tmp: Path, options: StagingOptions, pool: ThreadPoolExecutor | None) -> str:
    size = source.stat().st_size
    src_fd = os.open(source, os.O_RDONLY)
    try:
        dst_fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            blocks = [(start, min(BLOCK_BYTES, size - start)) for start in range(0, size, BLOCK_BYTES)] or [(0, 0)]
            if pool is not None and len(blocks) > 1:
                os.ftruncate(dst_fd, size)
                digests = list(pool.map(lambda b: _copy_range(src_fd, dst_fd, *b, options.chunk_bytes), blocks))
            else:
                digests = [_copy_range(src_fd, dst_fd, *b, options.chunk_bytes) for b in blocks]
        finally:
            os.close(dst_fd)
    finally:
        os.close(src_fd)
    return combine_block_digests(digests)


def _copy_with_tool(source: Path, tmp: Path, method: str) -> None:
    tool = shutil.which(method)
    if tool is None:
        raise StagingError(f"staging method {method!r}: the {method} command is not installed")
    command = [tool, "--", str(source), str(tmp)] if method == "cp" else [tool, "--whole-file", str(source), str(tmp)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise StagingError(f"{method} {source} -> {tmp} failed: {result.stderr.strip()}")


def copy_to_temporary(source: Path, dest: Path, options: StagingOptions = StagingOptions(),
                      pool: ThreadPoolExecutor | None = None) -> CopyResult:
    """Copy one file into a temporary name beside ``dest`` (not yet durable, not yet renamed)."""
    source, dest = Path(source), Path(dest)
    t_start, t0 = time.time(), time.perf_counter()
    tmp = temp_name(dest)
    checksum_seconds = 0.0
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if options.method == "cycleio":
            checksum = _copy_with_engine(source, tmp, options, pool)
        else:
            _copy_with_tool(source, tmp, options.method)
            c0 = time.perf_counter()
            checksum = checksum_file(source, options, pool)
            checksum_seconds = time.perf_counter() - c0
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(err, OSError):
            raise _os_error("copy", source, dest, err) from err
        raise
    elapsed = time.perf_counter() - t0
    return CopyResult(source, dest, tmp.stat().st_size, checksum, t_start, elapsed - checksum_seconds,
                      checksum_seconds, tmp)


_libc = ctypes.CDLL(None, use_errno=True)


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


def copy_file(source: Path, dest: Path, options: StagingOptions = StagingOptions(),
              pool: ThreadPoolExecutor | None = None) -> CopyResult:
    """Copy one file into a temporary name, fsync, rename; return its size and source checksum."""
    result = copy_to_temporary(source, dest, options, pool)
    try:
        _land(result.temporary, result.dest)
    except OSError as err:
        raise _os_error("copy", result.source, result.dest, err) from err
    finally:
        with contextlib.suppress(FileNotFoundError):
            result.temporary.unlink()
    fsync_dir(result.dest.parent)
    return result


class _DirectReader:
    """O_DIRECT reads into a page-aligned buffer; raises OSError where the filesystem refuses."""

    def __init__(self, path: Path, chunk_bytes: int):
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        self.buffer = mmap.mmap(-1, chunk_bytes)

    def pread(self, length: int, offset: int) -> bytes:
        got = os.preadv(self.fd, [self.buffer], offset)
        return self.buffer[: min(got, length)]

    def close(self) -> None:
        os.close(self.fd)
        self.buffer.close()


def _hash_range(path: Path, start: int, length: int, chunk_bytes: int, direct: bool) -> bytes:
    digest = xxhash.xxh3_64()
    offset, end = start, start + length
    if direct:
        reader = _DirectReader(path, chunk_bytes)
        read, close = reader.pread, reader.close
    else:
        fd = os.open(path, os.O_RDONLY)
        read, close = (lambda n, o: os.pread(fd, n, o)), (lambda: os.close(fd))
    try:
        while offset < end:
            data = read(min(chunk_bytes, end - offset), offset)
            if not data:
                break
            digest.update(data)
            offset += len(data)
    finally:
        close()
    return digest.digest()


def checksum_file(path: Path, options: StagingOptions = StagingOptions(), pool: ThreadPoolExecutor | None = None,
                  direct: bool = False) -> str:
    """Block-tree checksum (the same as fsutil.file_checksum), blocks read in parallel when a pool is given."""
    size = path.stat().st_size
    if size == 0:
        return BlockHasher().hexdigest()
    blocks = [(start, min(BLOCK_BYTES, size - start)) for start in range(0, size, BLOCK_BYTES)]
    chunk = options.chunk_bytes
    if pool is not None and len(blocks) > 1:
        digests = list(pool.map(lambda b: _hash_range(path, *b, chunk, direct), blocks))
    else:
        digests = [_hash_range(path, *b, chunk, direct) for b in blocks]
    return combine_block_digests(digests)


def verify_file(path: Path, expected_bytes: int, expected_checksum: str, options: StagingOptions = StagingOptions(),
                pool: ThreadPoolExecutor | None = None, name: Path | None = None) -> VerifyResult:
    """Re-read a copy; raise StagingError naming the file (``name``, else ``path``) when size or checksum differ."""
    t_start, t0 = time.time(), time.perf_counter()
    name = name or path
    size = path.stat().st_size
    if size != expected_bytes:
        raise StagingError(f"{name}: size {size} bytes, expected {expected_bytes}")
    direct = options.direct_io_verify
    try:
        actual = checksum_file(path, options, pool, direct=direct)
    except OSError:
        if not direct:
            raise
        direct = False  # the filesystem refuses O_DIRECT (tmpfs): read through the page cache
        actual = checksum_file(path, options, pool)
    if actual != expected_checksum:
        raise StagingError(f"{name}: checksum {actual} does not match the source's {expected_checksum} (corrupt copy)")
    return VerifyResult(name, size, t_start, time.perf_counter() - t0, direct)


@dataclass
class LandResult:
    """The batch step that makes copies durable and gives them their final names."""

    files: int
    bytes: int
    t_start: float
    seconds: float


def copy_and_verify(pairs: list[tuple[Path, Path]], options: StagingOptions = StagingOptions(),
                    progress: Callable[[int, int, int], None] | None = None,
                    ) -> tuple[list[tuple[CopyResult, VerifyResult]], LandResult]:
    """Copy many files with parallel streams, make them durable, verify them, then rename them.

    Files larger than one checksum block are copied one at a time with their blocks in parallel;
    smaller files several at a time. All copies go to temporary names; one syncfs per destination
    filesystem makes them durable (instead of a journal commit per file); each is verified against
    its source checksum; only then do they get their final names. On any error every temporary is
    removed and no file of the batch that failed verification carries a final name.
    """
    streams = max(1, options.streams)
    copies: list[CopyResult | None] = [None] * len(pairs)
    verified: list[VerifyResult | None] = [None] * len(pairs)
    done_bytes = 0
    try:
        with ThreadPoolExecutor(streams) as pool:
            def copy_one(index: int, block_pool) -> None:
                copies[index] = copy_to_temporary(*pairs[index], options, block_pool)

            sizes = [Path(source).stat().st_size for source, _ in pairs]
            for index in [i for i, size in enumerate(sizes) if size > BLOCK_BYTES]:
                copy_one(index, pool if streams > 1 else None)
                done_bytes += sizes[index]
                if progress:
                    progress(sum(c is not None for c in copies), len(pairs), done_bytes)
            for future in [pool.submit(copy_one, i, None) for i, size in enumerate(sizes) if size <= BLOCK_BYTES]:
                future.result()

            t_land, t0 = time.time(), time.perf_counter()
            make_durable([c.temporary for c in copies])
            land_seconds = time.perf_counter() - t0

            def verify_one(index: int, block_pool) -> None:
                copy = copies[index]
                if BEFORE_RENAME_HOOK is not None:
                    BEFORE_RENAME_HOOK(copy.temporary)
                verified[index] = verify_file(copy.temporary, copy.bytes, copy.checksum, options, block_pool,
                                              name=copy.dest)

            for future in [pool.submit(verify_one, i, None) for i, size in enumerate(sizes) if size <= BLOCK_BYTES]:
                future.result()
            for index in [i for i, size in enumerate(sizes) if size > BLOCK_BYTES]:
                verify_one(index, pool if streams > 1 else None)
    except BaseException:
        for copy in copies:
            if copy is not None:
                copy.temporary.unlink(missing_ok=True)
        raise
    t0 = time.perf_counter()
    for copy in copies:
        os.replace(copy.temporary, copy.dest)
    for folder in {copy.dest.parent for copy in copies}:
        fsync_dir(folder)
    land = LandResult(len(copies), sum(c.bytes for c in copies), t_land,
                      land_seconds + time.perf_counter() - t0)
    return list(zip(copies, verified)), land


def drop_page_cache() -> bool:
    """Write back and drop the page cache so the next reads come from storage (root only)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as handle:
            handle.write("3\n")
        return True
    except OSError:
        return False


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
