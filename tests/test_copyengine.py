"""storage.copyengine: write-back errors fail the batch naming the file; without sync_file_range the copies
are still made durable (one syncfs for the batch); every range write-behind starts is waited for before
the batch lands; verification while copying (large blocks) and right after (one-chunk files) catches a
copy that differs from what was read, and a failed copy leaves no verifier running."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from conftest import make_files
from cycleio.storage import copyengine, staging
from cycleio.storage.staging import copy_and_verify
from cycleio.storage.checksums import checksum_file
from cycleio.storage.stagingtypes import StagingError, StagingOptions


def fake_sync_file_range(code: int):
    """FAKE: sync_file_range failing with ``code``. A device error during write-back (EIO) cannot be
    caused on a real filesystem here; EINVAL stands for a filesystem without sync_file_range."""
    import ctypes

    def failing(fd, offset, length, flags):
        ctypes.set_errno(code)
        return -1

    return failing


def test_a_write_back_error_fails_the_batch_naming_the_file_and_leaves_nothing(tmp_path, monkeypatch, small_blocks):
    contents = make_files(tmp_path / "src")
    monkeypatch.setattr(copyengine, "_sync_file_range", fake_sync_file_range(errno.EIO))
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    with pytest.raises(StagingError, match=r"writing .*dst/big\.nc to storage failed: \[Errno 5\] Input/output error"):
        copy_and_verify(pairs, StagingOptions(streams=4))
    assert not list((tmp_path / "dst").iterdir())  # no final names, no temporaries


def test_without_sync_file_range_copies_are_still_made_durable_and_verified(tmp_path, monkeypatch, small_blocks):
    contents = make_files(tmp_path / "src")
    monkeypatch.setattr(copyengine, "_sync_file_range", fake_sync_file_range(errno.EINVAL))
    synced: list[list[Path]] = []
    real_make_durable = staging.make_durable
    monkeypatch.setattr(staging, "make_durable", lambda paths: (synced.append(paths), real_make_durable(paths))[1])
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    copy_and_verify(pairs, StagingOptions(streams=4))
    assert all((tmp_path / "dst" / n).read_bytes() == data for n, data in contents.items())
    assert len(synced) == 1 and len(synced[0]) == len(pairs)  # the batch's syncfs covers every copy


@pytest.fixture
def small_ranges(monkeypatch, small_blocks):
    """Ranges, trailing verification and write-behind's window in KiB, so 5 MiB files exercise them all."""
    monkeypatch.setattr(copyengine, "WRITE_BEHIND_BYTES", 64 * 1024)
    monkeypatch.setattr(copyengine, "IN_FLIGHT_BYTES", 256 * 1024)
    monkeypatch.setattr(copyengine, "TRAILING_VERIFY_BYTES", 128 * 1024)
    return StagingOptions(streams=3, chunk_bytes=16 * 1024)


def flipping_pwrite(monkeypatch, offset: int):
    """FAKE: os.pwrite that lands a flipped byte at ``offset`` of any file (a copy that differs from what was
    read: a fault of memory or of the write path, which cannot be caused here)."""
    real = os.pwrite

    def pwrite(fd, data, position):
        data = bytearray(data)
        if position <= offset < position + len(data):
            data[offset - position] ^= 0xFF
        return real(fd, data, position)

    monkeypatch.setattr(os, "pwrite", pwrite)


def test_every_range_write_behind_starts_is_waited_for_before_the_batch_lands(tmp_path, monkeypatch, small_ranges):
    contents = make_files(tmp_path / "src")
    calls: list[tuple[int, int, int]] = []
    monkeypatch.setattr(copyengine, "_sync_file_range", lambda fd, offset, length, flags: calls.append(
        (offset, length, flags)) or 0)
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    copy_and_verify(pairs, small_ranges)
    started = {(o, n) for o, n, flags in calls if flags == copyengine.SYNC_FILE_RANGE_WRITE}
    waited = {(o, n) for o, n, flags in calls if flags == copyengine._WRITE_AND_WAIT}
    assert sum(n for _, n in started) == len(contents["big.nc"])  # the large file, range by range
    assert started == waited
    assert all((tmp_path / "dst" / n).read_bytes() == data for n, data in contents.items())


@pytest.mark.parametrize("name, offset", [("big.nc", 3 * 2**20 + 5), ("big.nc", 0), ("obs7.bufr", 500)],
                         ids=["large file, verified while copied", "large file, first byte", "one-chunk file"])
def test_a_copy_that_differs_from_what_was_read_fails_naming_the_file_and_lands_nothing(tmp_path, monkeypatch,
                                                                                       small_ranges, name, offset):
    contents = make_files(tmp_path / "src")
    pairs = [(tmp_path / "src" / name, tmp_path / "dst" / name)]
    flipping_pwrite(monkeypatch, offset)
    with pytest.raises(StagingError, match=rf"dst/{name}: checksum .* does not match the source's .* \(corrupt copy\)"):
        copy_and_verify(pairs, small_ranges)
    assert not list((tmp_path / "dst").iterdir())
    monkeypatch.undo()
    assert contents[name]  # the source is untouched


def test_verification_while_copying_gives_the_checksums_and_times_of_a_read_after(tmp_path, small_ranges):
    contents = make_files(tmp_path / "src")
    pairs = [(tmp_path / "src" / n, tmp_path / "dst" / n) for n in contents]
    results, _ = copy_and_verify(pairs, small_ranges)
    for copied, verified in results:
        assert copied.checksum == checksum_file(copied.dest)
        assert verified.bytes == copied.bytes and verified.seconds >= 0
        assert copied.t_start <= verified.t_start <= copied.t_start + copied.seconds + verified.seconds + 1e-3


def test_a_copy_failing_midway_stops_its_verifier_and_removes_the_temporary(tmp_path, monkeypatch, small_ranges):
    source = tmp_path / "src" / "big.nc"
    source.parent.mkdir()
    source.write_bytes(os.urandom(5 * 2**20))
    real = os.preadv

    def shrinking(fd, buffers, offset):  # FAKE: the source ends early, as a file truncated while copied would
        if offset >= 2**20 + 3 * 2**19 and os.readlink(f"/proc/self/fd/{fd}") == str(source):
            return 0
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", shrinking)
    with pytest.raises(StagingError, match=r"big\.nc .*source shrank while copying"):
        copy_and_verify([(source, tmp_path / "dst" / "big.nc")], small_ranges)
    assert not list((tmp_path / "dst").iterdir())
    assert not [t for t in threading.enumerate() if t.name == "cycleio-verify"]


def test_small_files_from_memory_are_copied_on_one_stream_and_from_storage_on_all(monkeypatch):
    kinds = {Path("/dev/shm/job"): "tmpfs", Path("/ram/job"): "ramfs", Path("/tmp/job"): "ext4"}
    monkeypatch.setattr(copyengine, "filesystem_type", lambda folder: kinds[folder])  # FAKE: no mounts needed
    in_memory = [Path("/dev/shm/job/a.nc"), Path("/ram/job/b.nc")]
    assert copyengine.small_file_streams(in_memory, 4) == 1
    assert copyengine.small_file_streams([*in_memory, Path("/tmp/job/c.nc")], 4) == 4
    assert copyengine.small_file_streams([], 4) == 4
