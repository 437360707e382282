"""Verified copies between tiers.

A copy streams the source in chunks into a temporary name beside the destination while hashing
the bytes it read, fsyncs, and renames into place. Verification re-reads the landed copy and
compares its checksum with the one computed while reading the source, so a file corrupted on the
way (or on the destination) is caught before the step's manifest is written.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import xxhash

from .fsutil import CHUNK_BYTES, file_checksum, landing


class StagingError(RuntimeError):
    """A copy or a verification that failed; the message names the file."""


@dataclass
class CopyResult:
    source: Path
    dest: Path
    bytes: int
    checksum: str
    t_start: float
    seconds: float


# Test hook: called with the landed temporary file before it is renamed (to corrupt it on purpose).
BEFORE_RENAME_HOOK: Callable[[Path], None] | None = None


def copy_file(source: Path, dest: Path, chunk_bytes: int = CHUNK_BYTES) -> CopyResult:
    """Copy with checksum-on-read into a temporary name, fsync, rename."""
    t_start, t0 = time.time(), time.perf_counter()
    digest = xxhash.xxh3_64()
    copied = 0
    try:
        with landing(dest) as tmp:
            with open(source, "rb", buffering=0) as src, open(tmp, "wb", buffering=0) as dst:
                while chunk := src.read(chunk_bytes):
                    digest.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[dst.write(view) :]
                    copied += len(chunk)
            if BEFORE_RENAME_HOOK is not None:
                BEFORE_RENAME_HOOK(tmp)
    except OSError as err:
        raise StagingError(f"copy {source} -> {dest} failed: {err.strerror or err}") from err
    return CopyResult(source, dest, copied, digest.hexdigest(), t_start, time.perf_counter() - t0)


def verify_file(path: Path, expected_bytes: int, expected_checksum: str) -> None:
    size = path.stat().st_size
    if size != expected_bytes:
        raise StagingError(f"{path}: size {size} bytes, expected {expected_bytes}")
    actual = file_checksum(path)
    if actual != expected_checksum:
        raise StagingError(f"{path}: checksum {actual} does not match source checksum {expected_checksum}")


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
