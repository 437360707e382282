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


def test_compressed_chunks_are_read_a_batch_at_a_time_then_decoded(tmp_path, monkeypatch):
    """Every chunk of a compressed file is read once and inflated once, after its batch is read (the kernel's
    readahead would otherwise fill the next chunks while one inflates, and their storage time land in decode)."""
    from cycleio.surrogates import readers
    from cycleio.surrogates.kinds import Compression

    name = "gdas.t00z.atmf003.nc"
    spec = FileSpec(name, "atm_history", (("fhour", 3),))
    write_file(tmp_path / name, spec, WriteContext(Grid("C12", 4), 1, "2026010100", Compression(zlib_level=1)))
    pieces, _ = readers._stored_pieces(tmp_path / name)
    compressed = [size for _, size, pipeline, _ in pieces if pipeline]
    assert len(compressed) > 4
    order = []
    monkeypatch.setattr(readers, "_pread_all", lambda fd, view, offset, path: order.append(("read", len(view))))
    monkeypatch.setattr(readers, "decode_chunk", lambda view, pipeline, itemsize: order.append(("decode", len(view))))
    batch = sum(sorted(compressed)[-2:])  # room for the two largest chunks: several batches
    reader = FileReader(buffer_bytes=max(compressed), batch_bytes=batch)
    read = reader.read(tmp_path / name, "atm_history")
    decoded = [size for op, size in order if op == "decode"]
    assert sorted(decoded) == sorted(compressed)
    assert read.cpu.decode > 0 and read.cpu.locate > 0
    # within a batch, every read comes before any decode; and no batch held more than its room
    runs, last = [], None
    for op, size in order:
        if op != last:
            runs.append([op, 0])
            last = op
        runs[-1][1] += size
    assert len(runs) > 2 and all(total <= batch for op, total in runs if op == "decode")


def test_the_chunks_are_found_the_same_way_with_and_without_a_chunk_iterator(tmp_path):
    """_dataset_pieces walks a dataset's chunk index once (``chunk_iter``, HDF5 1.10.10 or 1.12.3 on); with an older
    HDF5 it looks each chunk up by its number: both find the same chunks."""
    import h5py

    from cycleio.surrogates.readers import _dataset_pieces

    class WithoutIterator:  # a dataset of an HDF5 without H5Dchunk_iter
        def __init__(self, dset):
            self.dset = dset

        def __getattr__(self, name):
            if name == "chunk_iter":
                raise AttributeError(name)
            return getattr(self.dset, name)

    name = "gdas.t00z.atmf003.nc"
    spec = FileSpec(name, "atm_history", (("fhour", 3),))
    write_file(tmp_path / name, spec, WriteContext(Grid("C12", 4), 1, "2026010100"))
    with h5py.File(tmp_path / name, "r") as handle:
        chunked = [handle[n].id for n in handle if handle[n].chunks]
        assert chunked
        for dset in chunked:
            pieces = _dataset_pieces(dset)
            assert len(pieces) == dset.get_num_chunks()
            assert sorted(pieces) == sorted(_dataset_pieces(WithoutIterator(dset)))
