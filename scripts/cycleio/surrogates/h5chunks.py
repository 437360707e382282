"""The netCDF-4 writer: the file's structure by netCDF4, the data as whole chunks through HDF5 (direct chunk I/O)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import netCDF4
import numpy as np

from .chunkcodec import bitround, encode_chunk
from .nclayout import NetcdfLayout
from .transfers import IO_BUFFER_BYTES, Overheads, write_groups

# Data go to HDF5 as whole chunks (direct chunk I/O), so netCDF's chunk cache (64 MiB per variable
# by default) only ever holds the small coordinates.
netCDF4.set_chunk_cache(2**20, 101)

# A process keeps the images of small files it may write again with other data (at most this many bytes in all)
TEMPLATE_BUDGET_BYTES = 512 * 2**20


@dataclass(frozen=True)
class FileTemplate:
    """A small file as written once: its whole image, and where each transfer's chunk sits in it (offset, bytes).

    A forecast writes the six tiles of each restart kind, at every restart hour, with one structure. netCDF-4
    and HDF5 take about 40 ms to build a file's structure (dimensions, variables, attributes, B-trees) in
    memory, which the job would book as ``define`` at every hour; with no filter on any variable the chunks are
    raw bytes at fixed addresses, so the next file of the same structure is the image with its chunks replaced:
    the bytes HDF5 writes from the same data (tests/test_writers.py checks it), in one transfer, but for the root
    group's time stamps (and its header's checksum), which stay the first file's, seconds older.
    """

    image: bytes
    chunks: tuple[tuple[int, int], ...]


_templates: dict[tuple, FileTemplate] = {}


def structure_key(layout: NetcdfLayout, buffer_bytes: int) -> tuple:
    """What decides a file's bytes other than its fields' data."""
    return (repr(sorted(layout.attrs.items())), tuple(layout.dims.items()), tuple(layout.coords),
            tuple((f.name, f.dtype, f.dims, f.attrs, f.compression) for f in layout.fields),
            tuple(sorted(layout.rows.items())), buffer_bytes)


def _keep_template(key: tuple, template: FileTemplate) -> None:
    if sum(len(t.image) for t in _templates.values()) + len(template.image) <= TEMPLATE_BUDGET_BYTES:
        _templates[key] = template


def _whole_chunk(data, levels: range | None, chunk_shape: tuple, records: int) -> np.ndarray:
    """A transfer's data as the chunk HDF5 stores: the last, partial chunk of levels padded with zeros."""
    chunk = np.ascontiguousarray(data)
    if levels is not None and len(levels) < chunk_shape[records]:
        chunk = np.concatenate([chunk, np.zeros((chunk_shape[records] - len(levels), *chunk.shape[1:]), chunk.dtype)])
    return chunk


def netcdf_image(layout: NetcdfLayout, buffer_bytes: int) -> memoryview:
    """The file's structure, made in memory by netCDF4: dimensions, coordinates, attributes, empty fields.

    Building netCDF-4 metadata is the library's CPU work (tens of milliseconds for a file of 80
    variables), booked as ``define``; its bytes reach storage with the data.
    """
    ds = netCDF4.Dataset("image.nc", "w", format="NETCDF4", memory=2**16)
    try:
        ds.setncatts(layout.attrs)
        for name, size in layout.dims.items():
            ds.createDimension(name, size)
        for c in layout.coords:
            var = ds.createVariable(c.name, c.dtype, c.dims)
            var.setncatts(dict(c.attrs))
            var[...] = np.asarray(c.values, dtype=c.dtype).reshape([layout.size(d) for d in c.dims])
        for f in layout.fields:
            var = ds.createVariable(f.name, f.dtype, f.dims, chunksizes=layout.chunks(f, buffer_bytes), fill_value=False,
                                    **f.compression.variable_kwargs())
            var.setncatts(dict(f.attrs))
    except BaseException:
        ds.close()
        raise
    return ds.close()


def open_hdf5(path: Path, writable: bool, image: bytes | None = None, grows_to: int = 0):
    """Open with HDF5: the file at ``path``, or (``image``) a file held only in memory, allocated once
    for ``grows_to`` bytes (growing it step by step would copy it at every step)."""
    import h5py

    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    if image is not None:
        fapl.set_fapl_core(max(grows_to, len(image), 2**20), False)
        fapl.set_file_image(image)
    return h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDWR if writable else h5py.h5f.ACC_RDONLY, fapl)


def write_netcdf(path: Path, layout: NetcdfLayout, source, times: Overheads, buffer_bytes: int = IO_BUFFER_BYTES,
                 diskless: bool = False, check=None) -> tuple[int, float]:
    """Write a netCDF-4 file (or a piece of one) at ``path``: the structure by netCDF4, the data in whole chunks.

    ``source(field, levels, rows)`` gives each transfer's data (made here, or gathered from the
    ranks). A file whose data fit the buffer (and every file of the ``diskless`` strategy) is built
    in memory and reaches storage in one transfer, as HDF5's caches deliver a small file at close;
    a larger one gets its chunks as stored (H5Dwrite_chunk), each one large write. Apart from the
    returned storage seconds: building the structure and anything done in memory (``define``),
    codec work (``encode``: BitRound, shuffle, zlib) and the time in ``source``. Callers land
    ``path`` (fsync, rename). Returns the file's size and its storage seconds.
    """
    import h5py

    if check:
        check(path)
    in_memory = diskless or layout.data_bytes() <= buffer_bytes
    key = structure_key(layout, buffer_bytes) if layout.data_bytes() <= buffer_bytes else None
    if key in _templates:
        return _from_template(path, layout, source, times, buffer_bytes, _templates[key])
    t0 = time.perf_counter()
    image = netcdf_image(layout, buffer_bytes)
    times.define += time.perf_counter() - t0
    storage = 0.0
    if in_memory:
        t0 = time.perf_counter()
        fid = open_hdf5(path, writable=True, image=bytes(image), grows_to=len(image) + layout.data_bytes() + 2**20)
        times.define += time.perf_counter() - t0
    else:
        times.before_storage()
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as handle:
            handle.write(image)
        times.transfers += 1
        fid = open_hdf5(path, writable=True)
        storage += time.perf_counter() - t0
    written = []  # (variable, chunk offset) of every transfer, in order
    try:
        t0 = time.perf_counter()
        opened = {}
        for f in layout.fields:  # the variables' metadata: the library's work, booked with define
            dset = h5py.h5d.open(fid, f.name.encode())
            dcpl = dset.get_create_plist()
            records = layout.records(f)
            if records:
                dset.set_extent((1, *dset.shape[1:]))
            opened[f.name] = (dset, [dcpl.get_filter(i)[::2] for i in range(dcpl.get_nfilters())], records,
                              dcpl.get_chunk())
        times.define += time.perf_counter() - t0
        unfiltered = not any(pipeline for _, pipeline, _, _ in opened.values())
        chunk_s = 0.0
        for f, levels in layout.blocks(buffer_bytes):
            dset, pipeline, records, chunk_shape = opened[f.name]
            data = source(f, levels, layout.band(f))
            lead = (0,) * records
            if not pipeline:
                chunks = [(lead + ((levels.start,) if levels is not None else ()) + (0, 0),
                           _whole_chunk(data, levels, chunk_shape, records))]
            else:
                t0 = time.perf_counter()
                planes = [(data, ())] if levels is None else [(data[i], (level,)) for i, level in enumerate(levels)]
                chunks = []
                for plane, level in planes:
                    if f.compression.quantize_nsd and levels is not None:
                        plane = bitround(np.array(plane), f.compression.quantize_nsd)
                    chunks.append((lead + level + (0, 0), encode_chunk(np.ascontiguousarray(plane), pipeline)))
                times.encode += time.perf_counter() - t0
            t0 = time.perf_counter()
            for offset, chunk in chunks:
                dset.write_direct_chunk(offset, chunk)
                written.append((f.name, offset))
            chunk_s += time.perf_counter() - t0
            if not in_memory:
                times.transfers += len(chunks)
        if in_memory:
            times.define += chunk_s
            t0 = time.perf_counter()
            h5py.h5f.flush(fid)
            final = fid.get_file_image()
            if key is not None and unfiltered:
                places = tuple((info.byte_offset, info.size) for info in
                               (opened[name][0].get_chunk_info_by_coord(offset) for name, offset in written))
                _keep_template(key, FileTemplate(bytes(final), places))
            times.define += time.perf_counter() - t0
        else:
            storage += chunk_s
        opened.clear()
    finally:
        t0 = time.perf_counter()
        fid.close()
        closing = time.perf_counter() - t0
    if in_memory:
        times.define += closing
        storage += _land_image(path, final, times, buffer_bytes)
    else:
        storage += closing
    return path.stat().st_size, storage


def _from_template(path: Path, layout: NetcdfLayout, source, times: Overheads, buffer_bytes: int,
                   template: FileTemplate) -> tuple[int, float]:
    """write_netcdf of a small file whose structure this process wrote before: its image with the new chunks."""
    t0 = time.perf_counter()
    image = bytearray(template.image)
    view = np.frombuffer(image, np.uint8)
    times.define += time.perf_counter() - t0
    chunk_shapes = {}
    for (f, levels), (offset, size) in zip(layout.blocks(buffer_bytes), template.chunks, strict=True):
        data = source(f, levels, layout.band(f))
        t0 = time.perf_counter()
        records = layout.records(f)
        shape = chunk_shapes.setdefault(f.name, layout.chunks(f, buffer_bytes))
        chunk = _whole_chunk(data, levels, shape, records).view(np.uint8).reshape(-1)
        if chunk.size != size:
            raise RuntimeError(f"{path.name}: a chunk of {f.name} has {chunk.size} bytes, its template's {size}")
        view[offset:offset + size] = chunk
        times.define += time.perf_counter() - t0
    storage = _land_image(path, image, times, buffer_bytes)
    return path.stat().st_size, storage


def _land_image(path: Path, image, times: Overheads, buffer_bytes: int) -> float:
    """Write a file built in memory to ``path`` in transfers of ``buffer_bytes``: its storage seconds."""
    times.before_storage()  # the image is built: what fresh pages are left go to the page cache
    t0 = time.perf_counter()
    with open(path, "wb", buffering=0) as handle:
        write_groups(handle.fileno(), [memoryview(image)[i:i + buffer_bytes]
                                       for i in range(0, len(image), buffer_bytes)], times, buffer_bytes)
    return time.perf_counter() - t0
