"""Shared-file writes through MPI-IO: one netCDF-4 file written by a group of ranks at once.

netCDF4's ``parallel=True`` on parallel HDF5 (netCDF-C's nc_create_par): every rank of the group's
communicator defines the same file, then writes its band of rows of every block of every field.
Used by the ``parallel`` strategy (the compute ranks holding pieces of the file) and by
``quilt_parallel`` (the write group's ranks holding the hand-off of the file). Needs the parallel
stack (scripts/bootstrap-parallel.sh): imported only by those strategies' hooks.

- Modes (config ``write_component.mpiio``): ``collective`` (MPI-IO collective buffering: the ranks'
  writes of a block become one aggregated write) or ``independent`` (each rank's write its own).
  Compressed variables are always written collectively: HDF5's parallel filtered writes need it
  (independent mode fails with "Invalid argument"), and so is a variable's first block when it has a
  record dimension (the write that extends it; netCDF-C refuses to extend in independent mode).
- Chunks: the rows a rank holds by the full width, by one level when compressed (as the model's
  write component, kchunk=1) and by the levels of one transfer otherwise, so each rank writes whole
  chunks, and compressed chunks are never shared by two ranks when the rows divide evenly (the
  library's default chunks, written a level at a time, ran at 9-10 MiB/s: its chunk cache thrashed;
  one-level chunks of uncompressed C48 fields are 9-36 KiB, and thousands of them per collective
  write ran at 0.6-0.9 of a chunk per transfer, history and restarts alike, on /dev/shm).
- Codec work (BitRound, shuffle, zlib) happens inside HDF5's collective write: it cannot be timed
  apart as the in-process writer's ``encode`` is, so a compressed file's storage seconds include it.
- Landing: the file is written under a temporary name that rank 0 chose, closed (collective), then
  rank 0 fsyncs and renames it (the rename and the directory's sync booked as ``rename``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import netCDF4
import numpy as np

from ...fsutil import fsync_dir, fsync_file, temp_name
from .. import nclayout, transfers

MODES = ("collective", "independent")


@dataclass
class SharedWrite:
    """One rank's part of a shared file: the file's size, this rank's share of its bytes, its storage seconds."""

    size: int
    bytes: int
    seconds: float


def chunk_rows(bands: list[dict[str, tuple[int, int]]]) -> dict[str, int]:
    """Rows of a chunk per row dimension: the most any rank of the group holds."""
    dims = {dim for band in bands for dim in band}
    return {dim: max(band[dim][1] - band[dim][0] for band in bands if dim in band) for dim in dims}


def byte_shares(size: int, bands: list[dict[str, tuple[int, int]]]) -> list[int]:
    """The file's ``size`` split over the group's ranks in proportion to the rows they hold (summing to ``size``)."""
    weights = [sum(stop - start for start, stop in band.values()) for band in bands]
    total = sum(weights) or 1
    shares = [size * w // total for w in weights]
    shares[0] += size - sum(shares)
    return shares


def _chunks(layout: nclayout.NetcdfLayout, f: nclayout.Field, rows: dict[str, int], buffer_bytes: int) -> list[int]:
    """A chunk: the rows a rank holds by the full width, by one level when compressed (the write component's
    kchunk=1), else by the levels of one transfer, so that each rank's write of a block is one whole chunk."""
    levels = [] if layout.levels(f) is None else [1 if f.compression.enabled else layout.block_levels(f, buffer_bytes)]
    return [1] * layout.records(f) + levels + [rows[f.dims[-2]], layout.size(f.dims[-1])]


def write_shared(final: Path, layout: nclayout.NetcdfLayout, source, times: transfers.Overheads, comm, band: dict,
                 bands: list[dict], mode: str = "collective",
                 buffer_bytes: int = transfers.IO_BUFFER_BYTES) -> SharedWrite:
    """Write ``final`` with the ranks of ``comm``, this rank holding global rows ``band`` (per row dimension).

    ``bands``: every rank's rows, in ``comm``'s rank order (chunk shapes and byte shares are made from
    them, alike on every rank). ``source(field, levels, rows)`` gives this rank's rows of a block.
    Collective over ``comm``: every rank calls it for the same file, in the same order. Building the
    file's structure and writing its coordinates are booked as ``define``; the returned seconds are
    the data writes, the close and rank 0's fsync.
    """
    from mpi4py import MPI

    if mode not in MODES:
        raise ValueError(f"MPI-IO mode {mode!r} is not one of {', '.join(MODES)}")
    final = Path(final)
    if comm.rank == 0:
        final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(comm.bcast(str(temp_name(final)) if comm.rank == 0 else None, root=0))
    rows = chunk_rows(bands)
    t0 = time.perf_counter()
    # No cleanup on an error: closing is collective, and a rank that fails ends the program (MPI_Abort); the
    # temporary is swept by the rerun (staging.remove_stale_temporaries).
    ds = netCDF4.Dataset(tmp, "w", format="NETCDF4", parallel=True, comm=comm, info=MPI.INFO_NULL)
    ds.setncatts(layout.attrs)
    for name, size in layout.dims.items():
        ds.createDimension(name, size)
    coords = []
    for c in layout.coords:
        var = ds.createVariable(c.name, c.dtype, c.dims)
        var.setncatts(dict(c.attrs))
        coords.append((var, c))
    variables = {}
    for f in layout.fields:
        var = ds.createVariable(f.name, f.dtype, f.dims, chunksizes=_chunks(layout, f, rows, buffer_bytes), fill_value=False,
                                **f.compression.variable_kwargs())
        var.setncatts(dict(f.attrs))
        variables[f.name] = var
    for var, c in coords:  # every rank writes the same values (collective: a record coordinate extends)
        var.set_collective(True)
        var[...] = np.asarray(c.values, dtype=c.dtype).reshape([layout.size(d) for d in c.dims])
    times.define += time.perf_counter() - t0

    storage = 0.0
    started: set[str] = set()
    for f, levels in layout.blocks(buffer_bytes):
        var = variables[f.name]
        records = layout.records(f)
        first = f.name not in started
        started.add(f.name)
        var.set_collective(mode == "collective" or f.compression.enabled or (first and records > 0))
        start, stop = band[f.dims[-2]]
        data = source(f, levels, (start, stop))
        index = (0,) * records + ((slice(levels.start, levels.stop),) if levels is not None else ()) \
            + (slice(start, stop), slice(None))
        t1 = time.perf_counter()
        var[index] = data
        storage += time.perf_counter() - t1
        times.transfers += 1
    t1 = time.perf_counter()
    ds.close()
    size = 0
    if comm.rank == 0:
        fsync_file(tmp)
        storage += time.perf_counter() - t1
        t2 = time.perf_counter()
        os.replace(tmp, final)
        fsync_dir(final.parent)
        times.rename += time.perf_counter() - t2
        size = final.stat().st_size
    else:
        storage += time.perf_counter() - t1
    size = comm.bcast(size, root=0)
    return SharedWrite(size, byte_shares(size, bands)[comm.rank], storage)
