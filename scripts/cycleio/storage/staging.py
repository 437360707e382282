"""Verified copies between tiers: the staging engine's batch (copy_and_verify), which the other modules serve.

A copy streams the source into a temporary name beside the destination while hashing what it
read, is made durable, and is renamed into place, so a partial file never carries a final name.
Verification re-reads the landed copy and compares its checksum with the one taken while reading
the source. Parallel streams (threads) copy many files at once, and the blocks of a large file at
once; a write-behind thread writes copied ranges to storage while the copy goes on.

Methods: ``cycleio`` (this engine), ``cp`` and ``rsync`` (the tools copy into the temporary name;
the source checksum is then a separate read), so a study can compare them.

Here: the batch, the removal of stale temporaries, making copies durable and giving them their
final names. One file's copy is copyengine.py (write-behind included) or copytools.py (cp, rsync);
checksums and verification are checksums.py; options and results stagingtypes.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

from ..faults import InjectedFault
from ..units import MiB
from .checksums import BLOCK_BYTES, verify_file
from .copyengine import WriteBehind, small_file_streams, stage_with_engine, syncfs_makes_durable
from .copytools import stage_with_tool
from ..fsutil import discard, fsync_dir, is_temporary
from .libc import libc
from .streams import in_parallel
from .stagingtypes import CopyResult, LandResult, StagingError, StagingOptions, VerifyResult, corrupt, os_error

log = logging.getLogger(__name__)


def make_durable(paths: list[Path]) -> None:
    """Flush files to storage: one syncfs per filesystem (one journal commit for many files)."""
    folders: dict[int, Path] = {}
    for path in paths:
        folders.setdefault(os.stat(path).st_dev, path.parent)
    for folder in folders.values():
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
                for path in paths:  # no syncfs: fsync file by file
                    file_fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(file_fd)
                    finally:
                        os.close(file_fd)
                return
        finally:
            os.close(fd)


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
    local, remote, folders = [], [], set()
    for copy in copies:  # each .parent is a new Path whose hash is computed anew: once per copy
        folder = copy.dest.parent
        folders.add(folder)
        (local if folder in local_folders else remote).append(copy)

    def rename(copy: CopyResult) -> None:
        try:
            os.replace(copy.temporary, copy.dest)
        except OSError as err:
            raise os_error("rename", copy.temporary, copy.dest, err) from err

    try:
        for copy in local:
            rename(copy)
        in_parallel(lambda n: rename(remote[n]), len(remote), streams)
    except BaseException:
        for copy in copies:
            discard(copy.temporary)
        raise
    if durable:
        for folder in folders:
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
    pairs = [(source if isinstance(source, Path) else Path(source), dest if isinstance(dest, Path) else Path(dest))
             for source, dest in pairs]
    in_folder = [dest.parent for _, dest in pairs]  # each .parent is a new Path, hashed anew: once per file
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
            raise os_error("copy", source, dest, err) from err
    folders = set(in_folder)
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StagingError(f"cannot create {folder}: [Errno {err.errno}] {err.strerror or err}") from err
    remove_stale_temporaries([dest for _, dest in pairs])
    syncfs_folders = {folder for folder in folders if syncfs_makes_durable(folder)}
    batch_synced = [folder in syncfs_folders for folder in in_folder]
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
            batch_sync = batch_synced[index]
            fsync = options.durable and not batch_sync
            if engine:
                copies[index], verified[index] = stage_with_engine(
                    source, dest, sizes[index], options, block_streams, writeback if batch_sync else None, fsync,
                    verify_inline)
            else:
                copies[index] = stage_with_tool(source, dest, options, block_streams, fsync)
        except OSError as err:
            raise os_error("copy", source, dest, err) from err
        if progress:
            with lock:
                counted["files"] += 1
                counted["bytes"] += sizes[index]
                progress(counted["files"], len(pairs), counted["bytes"])

    def verify_one(index: int, block_streams: int) -> None:
        copy = copies[index]
        if options.faults.corrupt == copy.dest:
            corrupt(copy.temporary)
        verified[index] = verify_file(copy.temporary, copy.bytes, copy.checksum, options, block_streams,
                                      name=copy.dest)

    large = [i for i, size in enumerate(sizes) if size > BLOCK_BYTES]
    small = [i for i, size in enumerate(sizes) if size <= BLOCK_BYTES]
    try:
        try:
            for index in large:
                stage_one(index, streams)
            small_streams = small_file_streams([pairs[i][0] for i in small], streams) if engine else streams
            in_parallel(lambda n: stage_one(small[n], 1), len(small), small_streams)
        except BaseException:
            if writeback is not None:
                writeback.close(raise_error=False)
            raise
        if writeback is not None:
            writeback.close()  # raises a write-behind I/O error, naming the file
        t_land, t0 = time.time(), time.perf_counter()
        if options.durable:
            make_durable([c.temporary for c, synced in zip(copies, batch_synced) if synced])
        land_seconds = time.perf_counter() - t0
        if not verify_inline:
            in_parallel(lambda n: verify_one(small[n], 1), len(small), streams)
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
