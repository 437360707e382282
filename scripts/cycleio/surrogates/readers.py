"""Readers of the surrogates' files, as the consuming job reads them: netCDF-4 chunk by chunk as stored,
other files in transfers of the buffer's size."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..storage.pagecache import cached_fraction
from .chunkcodec import decode_chunk
from .kinds import NETCDF_KINDS
from .transfers import READ_TRANSFER_BYTES, Overheads, Transfer

DECODE_BATCH_BYTES = 128 * 2**20  # compressed chunks read before they are decoded: 16 readahead windows of 8 MiB


class _CountedFile:
    """A file HDF5 reads its metadata through (h5py's fileobj driver), counting the bytes it reads: a read record
    holds what the library read, as the kernel's and Darshan's counts do, not the file's size."""

    def __init__(self, handle):
        self.handle = handle
        self.bytes_read = 0

    def readinto(self, buffer) -> int:
        got = self.handle.readinto(buffer)
        self.bytes_read += got
        return got

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.bytes_read += len(data)
        return data

    def seek(self, *args) -> int:
        return self.handle.seek(*args)

    def tell(self) -> int:
        return self.handle.tell()

    def flush(self) -> None:
        pass


def _stored_pieces(path: Path) -> tuple[list[tuple[int, int, list | None, int]], int]:
    """Where a netCDF-4 file stores its variables' data: (address, bytes, filters, item size) per chunk,
    and per contiguous variable, in the order they lie in the file (HDF5 metadata: the file's index);
    and how many bytes of the file HDF5 read to tell.

    HDF5 lists a group's variables by name; read in that order, a file of cold pages is read back
    and forth and the kernel's readahead stops helping. In file order it is read front to back, as a
    model reads its variables in the order it defined (and wrote) them."""
    import h5py

    pieces = []
    with open(path, "rb", buffering=0) as handle:
        counted = _CountedFile(handle)
        fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
        fapl.set_fileobj_driver(h5py.h5fd.fileobj_driver, counted)
        fid = h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDONLY, fapl)
        try:
            root = h5py.h5g.open(fid, b"/")
            try:
                for index in range(root.get_num_objs()):
                    if root.get_objtype_by_idx(index) == h5py.h5g.DATASET:
                        dset = h5py.h5d.open(root, root.get_objname_by_idx(index))
                        try:
                            pieces += _dataset_pieces(dset)
                        finally:
                            dset.close()  # every object closed before the file: its driver is this handle
            finally:
                root.close()
        finally:
            fid.close()
    return sorted(pieces, key=lambda piece: piece[0]), counted.bytes_read


def _dataset_pieces(dset) -> list[tuple[int, int, list | None, int]]:
    import h5py

    if dset.get_storage_size() == 0:
        return []  # a netCDF dimension without a coordinate variable holds no data
    dcpl = dset.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.CHUNKED:
        return [(dset.get_offset(), dset.get_storage_size(), None, dset.dtype.itemsize)]
    pipeline = [dcpl.get_filter(i)[::2] for i in range(dcpl.get_nfilters())] or None
    itemsize = dset.dtype.itemsize
    if not hasattr(dset, "chunk_iter"):  # an HDF5 without H5Dchunk_iter: each lookup by number walks the index again
        return [(info.byte_offset, info.size, pipeline, itemsize)
                for info in map(dset.get_chunk_info, range(dset.get_num_chunks()))]
    pieces: list[tuple[int, int, list | None, int]] = []
    dset.chunk_iter(lambda info: pieces.append((info.byte_offset, info.size, pipeline, itemsize)))
    return pieces


class FileReader:
    """Reads files as the consuming job would, into one buffer reused from file to file.

    A model reads into arrays it has already allocated, and fio into one buffer; a fresh buffer per
    file (or a first read into untouched memory) would add page faults, the kernel zeroing new memory,
    to what is meant to be storage time.
    """

    def __init__(self, buffer_bytes: int = READ_TRANSFER_BYTES, batch_bytes: int = DECODE_BATCH_BYTES):
        self.buffer_bytes = buffer_bytes
        self.batch_bytes = max(batch_bytes, buffer_bytes)
        # Allocated and touched here, before any read is timed, as a model allocates its arrays at start.
        self._buffer = bytearray(buffer_bytes)
        self._batch = bytearray(0)  # the compressed chunks read before they are decoded (see _read_hdf5)

    def _view(self, size: int) -> memoryview:
        if size > len(self._buffer):
            self._buffer = bytearray(size)
        return memoryview(self._buffer)[:size]

    def read(self, path: Path, kind: str, times: Overheads | None = None) -> Transfer:
        """netCDF chunk by chunk as stored, other files in transfers of the buffer's size."""
        times = times if times is not None else Overheads()
        cached = cached_fraction(path)  # before the clock starts: it maps the file but reads no data
        before = times.copy()
        t0 = time.perf_counter()
        nbytes = 0
        if kind in NETCDF_KINDS:
            nbytes = self._read_hdf5(path, times)
        else:  # GRIB, BUFR and text: the bytes as they are
            view = self._view(min(self.buffer_bytes, max(path.stat().st_size, 1)))
            with open(path, "rb", buffering=0) as handle:
                while got := handle.readinto(view):
                    nbytes += got
                    times.transfers += 1
        elapsed = time.perf_counter() - t0
        cpu = times.since(before)
        cpu.transfers = max(cpu.transfers, 1)
        return Transfer(nbytes, elapsed - cpu.total, cpu, cached)

    def _read_hdf5(self, path: Path, times: Overheads) -> int:
        """Every variable of a netCDF-4 file as stored: a compressed chunk in one call (it is inflated
        whole, booked as ``decode``), uncompressed data in calls of at most the buffer's size. The
        file's index (where each chunk lies) is read through HDF5 first: the library's work is booked as
        ``locate`` (the CPU time of this thread), its waits for the index's bytes stay in the read's storage time, as
        a replay of the file's bytes by fio spends them too (booked whole as ``locate``, they had the disk arms'
        reads run at 1.2-1.5 of their fio replay). Returns the bytes read: the index's and the data's.

        Compressed chunks are read a batch at a time (``batch_bytes``) and decoded after: the kernel's readahead
        (up to read_ahead_kb, 8 MiB on a virtio disk) goes on while a chunk is decoded, so decoding each chunk as it
        comes would hide storage time in the decode time taken out of the read's."""
        t0 = time.thread_time()
        pieces, index_bytes = _stored_pieces(path)
        if not self._batch and any(pipeline for _, _, pipeline, _ in pieces):
            self._batch = bytearray(self.batch_bytes)  # the first compressed file's: zeroing it is CPU, not storage
        times.locate += time.thread_time() - t0
        batch = memoryview(self._batch)
        pending: list[tuple[memoryview, list, int]] = []
        used = 0
        fd = os.open(path, os.O_RDONLY)
        try:
            for address, size, pipeline, itemsize in pieces:
                if pipeline and size <= len(batch):
                    if used + size > len(batch):
                        self._decode(pending, times)
                        used = 0
                    view = batch[used:used + size]
                    _pread_all(fd, view, address, path)
                    times.transfers += 1
                    pending.append((view, pipeline, itemsize))
                    used += size
                    continue
                step = max(1, size if pipeline else min(size, self.buffer_bytes))
                for start in range(0, size, step):
                    view = self._view(min(step, size - start))
                    _pread_all(fd, view, address + start, path)
                    times.transfers += 1
                if pipeline:  # a chunk larger than the batch, decoded alone
                    self._decode([(view, pipeline, itemsize)], times)
            self._decode(pending, times)
        finally:
            os.close(fd)
        return index_bytes + sum(size for _, size, _, _ in pieces)

    @staticmethod
    def _decode(pending: list[tuple[memoryview, list, int]], times: Overheads) -> None:
        t1 = time.perf_counter()
        for view, pipeline, itemsize in pending:
            decode_chunk(view, pipeline, itemsize)
        times.decode += time.perf_counter() - t1
        pending.clear()


def _pread_all(fd: int, view: memoryview, offset: int, path: Path) -> None:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise OSError(f"{path}: short read at byte {offset + done} (the file ends early)")
        done += got

