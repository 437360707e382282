"""storage.copyengine: write-back errors fail the batch naming the file; without sync_file_range the copies
are still made durable (one syncfs for the batch)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from conftest import make_files
from cycleio.storage import copyengine, staging
from cycleio.storage.staging import copy_and_verify
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
