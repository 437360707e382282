"""surrogates.readers: a read record holds the bytes the reader read from the file (what the kernel and Darshan
count), not the file's size: for a netCDF-4 file, the HDF5 index it read to find the chunks and the chunks."""

from __future__ import annotations

import os

import psutil
import pytest

from cycleio.surrogates.context import WriteContext
from cycleio.surrogates.grid import Grid
from cycleio.surrogates.inventory import FileSpec
from cycleio.surrogates.readers import FileReader
from cycleio.surrogates.writers import write_file


def read_chars() -> int:
    """The bytes this process's read calls returned so far (the kernel's rchar)."""
    return psutil.Process().io_counters().read_chars


@pytest.mark.parametrize("name, kind, params", [("gdas.t00z.atmf003.nc", "atm_history", (("fhour", 3),)),
                                                ("gdas.t00z.prepbufr", "bytes", (("bytes", 3_000_000),))])
def test_a_read_counts_the_bytes_its_calls_returned(tmp_path, name, kind, params):
    spec = FileSpec(name, kind, params)
    written = write_file(tmp_path / name, spec, WriteContext(Grid("C12", 4), 1, "2026010100"))
    reader = FileReader()
    reader.read(tmp_path / name, kind)  # h5py and the reader's paths imported and warmed: only the read is counted
    first = read_chars()
    before = read_chars()  # the count's own read of /proc, counted once more below
    read = reader.read(tmp_path / name, kind)
    counted = read_chars() - before - (before - first)
    assert read.bytes == counted, (read.bytes, counted)
    size = os.path.getsize(tmp_path / name)
    assert size == written.bytes and read.bytes <= size
    if kind == "atm_history":
        assert read.bytes < size  # the file's unused space, which no library reads
