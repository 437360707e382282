"""Block-tree checksums of files, and the verification of copies and manifests against them.

Files are hashed in fixed blocks (xxh3-64) and the block digests hashed again, so a checksum does
not depend on how many parallel streams copied or read the file.
"""

from __future__ import annotations

import json
import mmap
import os
import time
from pathlib import Path

import xxhash

from .stagingtypes import StagingError, StagingOptions, VerifyResult
from .streams import buffers, in_parallel


# Files are hashed in fixed blocks and the block digests hashed again, so a checksum does not
# depend on how many parallel streams copied or read the file.
BLOCK_BYTES = 64 * 2**20
# Bytes per O_DIRECT read when verifying (O_DIRECT has no readahead: reads must be large).
DIRECT_CHUNK_BYTES = 8 * 2**20


def combine_block_digests(digests: list[bytes]) -> str:
    return xxhash.xxh3_64(b"".join(digests)).hexdigest()


def blocks(size: int) -> list[tuple[int, int]]:
    return [(start, min(BLOCK_BYTES, size - start)) for start in range(0, size, BLOCK_BYTES)] or [(0, 0)]


def read_range_digest(fd: int, start: int, length: int, chunk_bytes: int) -> bytes:
    """xxh3-64 of [start, start+length) of an open file, read through the page cache."""
    digest = xxhash.xxh3_64()
    buffer = buffers.get(chunk_bytes)
    offset, end = start, start + length
    while offset < end:
        got = os.preadv(fd, [memoryview(buffer)[: min(len(buffer), end - offset)]], offset)
        if not got:
            break
        digest.update(memoryview(buffer)[:got])
        offset += got
    return digest.digest()


def mismatch(name: Path, actual: str, expected: str, expected_from: str = "the source's") -> StagingError:
    return StagingError(f"{name}: checksum {actual} does not match {expected_from} {expected} (corrupt copy)")


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
        reader = _DirectReader(path, max(chunk_bytes, DIRECT_CHUNK_BYTES))  # large reads: O_DIRECT has no readahead
        try:
            return reader.digest(start, length)
        finally:
            reader.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_range_digest(fd, start, length, chunk_bytes)
    finally:
        os.close(fd)


def checksum_file(path: Path, options: StagingOptions = StagingOptions(), streams: int = 1,
                  direct: bool = False) -> str:
    """The file's block-tree xxh3-64, blocks read on ``streams`` threads (O_DIRECT with ``direct``)."""
    pieces = blocks(path.stat().st_size)  # an empty file: one empty block
    digests: list[bytes] = [b""] * len(pieces)

    def hash_block(index: int) -> None:
        digests[index] = _hash_range(path, *pieces[index], options.chunk_bytes, direct)

    in_parallel(hash_block, len(pieces), streams)
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
        raise mismatch(name, actual, expected_checksum, expected_from)
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
