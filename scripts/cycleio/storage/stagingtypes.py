"""What a staging copy is asked and what it gives back: options, fault injection, results, its error."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path


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
    makes the batch raise InjectedFault once that many files are copied; ``fill_node`` (node, bytes left free):
    the scratch of that node of a job over several nodes is filled as its stage-in begins (runner.nodes)."""

    corrupt: Path | None = None
    fail_after_files: int | None = None
    fill_node: tuple[str, int] | None = None


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


@dataclass
class LandResult:
    """The batch step that makes copies durable and gives them their final names."""

    files: int
    bytes: int
    t_start: float
    seconds: float


def os_error(action: str, source: Path, dest: Path, err: OSError) -> StagingError:
    return StagingError(f"{action} {source} -> {dest} failed: [Errno {err.errno}] {err.strerror or err}")


def corrupt(path: Path) -> None:
    """Fault injection: flip the middle byte of a landed copy (an empty one gains a byte)."""
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(size // 2)
        byte = handle.read(1) or b"\0"
        handle.seek(size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    log.warning("injected fault (config faults.corrupt_staged_file): flipped a byte of %s", path)
