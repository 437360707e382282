"""storage.stagingtypes: a staging error names the copy and the OS error; the corrupting fault flips one byte."""

from __future__ import annotations

import errno
from pathlib import Path

from cycleio.storage.stagingtypes import StagingError, corrupt, os_error


def test_an_os_error_becomes_a_staging_error_naming_both_files():
    err = os_error("copying", Path("/a/x.nc"), Path("/b/x.nc"), OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(err, StagingError)
    assert str(err) == "copying /a/x.nc -> /b/x.nc failed: [Errno 28] No space left on device"


def test_the_corrupting_fault_flips_the_middle_byte_and_an_empty_copy_gains_one(tmp_path, caplog):
    path = tmp_path / "copy"
    path.write_bytes(b"abcde")
    corrupt(path)
    assert path.read_bytes() == b"ab" + bytes([ord("c") ^ 0xFF]) + b"de"
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    corrupt(empty)
    assert empty.read_bytes() == b"\xff"
    assert "injected fault (config faults.corrupt_staged_file)" in caplog.text

