"""Writers and readers of the surrogates' files: CF-conformant netCDF4 and plain files.

Every writer fills one level (one 2-D plane) at a time, so memory stays near one plane whatever
the resolution, and lands its file through a temporary name (write, fsync, rename). What each kind
holds and its expected size are in kinds.py.
"""

from __future__ import annotations

import io
import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import netCDF4
import numpy as np

from ..config.calendar import parse_cycle
from . import fields
from .fields import seed_for
from ..storage.fsutil import landing
from ..storage.pagecache import cached_fraction
from .grid import Grid
from .inventory import FileSpec
from .kinds import (ATM_2D, ATM_3D, DTFANL_2D, FILE_KINDS, GRIB_BITS_PER_VALUE, INCREMENT_3D, NETCDF_KINDS,
                    SFC_2D, SOIL_LEVELS, TILE_LAYOUTS, Compression, grib_fields, grib_shape)

# Data go to HDF5 as whole chunks (direct chunk I/O), so netCDF's chunk cache (64 MiB per variable
# by default) only ever holds the small coordinates.
netCDF4.set_chunk_cache(2**20, 101)



# Noise of the synthetic fields, as a fraction of their spread: 0.05 makes a C768 atmf file compress
# (zlib 1, BitRound to 5 bits) to 0.20 of its raw size, as the operational 6.7 of 33 GB.
FIELD_NOISE = 0.05


# Data move in transfers of at most this many bytes per process: blocks of many levels, never one
# plane (per-call overhead would dominate) and never a whole 3-D field at C768 (memory would).
IO_BUFFER_BYTES = 64 * 2**20

# Reads move at most this many bytes per call. Reading cached files in 64 MiB calls ran at 0.65-0.8 of
# 1-16 MiB calls on the 2-core VM of bench/, with fio as with Python (the copy's destination outgrows
# the CPU's caches); at 8 MiB the per-call cost is still negligible and a parallel file system still
# sees whole stripes.
READ_TRANSFER_BYTES = 8 * 2**20


@dataclass
class Overheads:
    """Seconds of writing or reading a file that are not storage I/O, each kept apart in records, and
    how many storage transfers (write or read calls of file data) were made."""

    generate: float = 0.0  # making the synthetic data
    encode: float = 0.0  # codec work when writing: BitRound, shuffle, zlib, GRIB2 packing
    decode: float = 0.0  # codec work when reading: inflate, unshuffle
    define: float = 0.0  # building a netCDF file's structure: in memory, then opening its variables
    locate: float = 0.0  # reading a netCDF file's structure to find each variable's chunks
    rename: float = 0.0  # landing safely: the rename and the directory's sync (a replay does neither)
    transfers: int = 0

    SECONDS = ("generate", "encode", "decode", "define", "locate", "rename")

    def take(self) -> "Overheads":
        taken = self.copy()
        for name in (*self.SECONDS, "transfers"):
            setattr(self, name, type(getattr(self, name))())
        return taken

    def since(self, before: "Overheads") -> "Overheads":
        """What was added since ``before`` (a copy taken earlier)."""
        return Overheads(**{name: getattr(self, name) - getattr(before, name) for name in (*self.SECONDS, "transfers")})

    def copy(self) -> "Overheads":
        return Overheads(**{name: getattr(self, name) for name in (*self.SECONDS, "transfers")})

    def seconds(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.SECONDS}

    @property
    def total(self) -> float:
        return sum(self.seconds().values())


@dataclass(frozen=True)
class WriteContext:
    grid: Grid
    seed: int
    cycle: str
    compression: Compression = Compression()
    times: Overheads = field(default_factory=Overheads, compare=False)
    buffer_bytes: int = IO_BUFFER_BYTES

    def plane(self, key: tuple, ny: int, nx: int, mean: float, spread: float, dtype, noise: float = FIELD_NOISE):
        t0 = time.perf_counter()
        data = fields.plane(key, ny, nx, mean, spread, noise, dtype)
        self.times.generate += time.perf_counter() - t0
        return data


# --------------------------------------------------------------------------- file layouts


@dataclass(frozen=True)
class Field:
    """A data variable of seeded synthetic data: (record dims..., [level dim], row dim, column dim)."""

    name: str
    dtype: str
    dims: tuple[str, ...]
    attrs: tuple[tuple[str, object], ...]
    key: tuple
    mean: float
    spread: float
    compression: Compression = Compression()
    noise: float = FIELD_NOISE


@dataclass(frozen=True)
class Coordinate:
    name: str
    dtype: str
    dims: tuple[str, ...]
    attrs: tuple[tuple[str, object], ...]
    values: tuple


@dataclass
class Layout:
    """What a netCDF file holds: enough to write it whole, or cut to a band of rows (an MPI rank's piece).

    ``dims`` maps names to sizes (None: unlimited, holding one record). ``rows`` gives, for each
    row dimension of a piece, the global rows [start, stop) that it holds.
    """

    attrs: dict
    dims: dict[str, int | None]
    coords: list[Coordinate]
    fields: list[Field]
    rows: dict[str, tuple[int, int]] = field(default_factory=dict)

    def size(self, dim: str) -> int:
        return 1 if self.dims[dim] is None else self.dims[dim]

    def row_dims(self) -> set[str]:
        return {f.dims[-2] for f in self.fields}

    def __post_init__(self):
        self._global = {dim: self.size(dim) for dim in self.dims}

    def band(self, f: Field) -> tuple[int, int]:
        return self.rows.get(f.dims[-2], (0, self.size(f.dims[-2])))

    def levels(self, f: Field) -> int | None:
        """Levels of a 3-D field (its third-last dimension unless that is a record dimension)."""
        if len(f.dims) >= 3 and self.dims[f.dims[-3]] is not None:
            return self.size(f.dims[-3])
        return None

    def records(self, f: Field) -> int:
        return len(f.dims) - 2 - (self.levels(f) is not None)

    def data_bytes(self) -> int:
        """Bytes of the fields' data (uncompressed)."""
        return sum(int(np.prod([self.size(d) for d in f.dims])) * np.dtype(f.dtype).itemsize for f in self.fields)

    def block_levels(self, f: Field, buffer_bytes: int) -> int:
        """Levels moved per transfer: as many as fit the buffer."""
        start, stop = self.band(f)
        plane = (stop - start) * self.size(f.dims[-1]) * np.dtype(f.dtype).itemsize
        return max(1, min(self.levels(f) or 1, buffer_bytes // max(plane, 1)))

    def chunks(self, f: Field, buffer_bytes: int) -> list[int]:
        """One level by the band (compressed, as the write component's kchunk=1), else a transfer's worth."""
        start, stop = self.band(f)
        levels = [] if self.levels(f) is None else [1 if f.compression.enabled else self.block_levels(f, buffer_bytes)]
        return [1] * self.records(f) + levels + [stop - start, self.size(f.dims[-1])]

    def blocks(self, buffer_bytes: int):
        """(field, levels or None) in write order: every transfer of every field."""
        for f in self.fields:
            nlevels = self.levels(f)
            if nlevels is None:
                yield f, None
                continue
            step = self.block_levels(f, buffer_bytes)
            for first in range(0, nlevels, step):
                yield f, range(first, min(first + step, nlevels))

    def piece(self, rows: dict[str, tuple[int, int]], attrs: dict | None = None) -> "Layout":
        """The layout of a piece holding global rows ``rows`` of each row dimension."""
        dims = {name: (rows[name][1] - rows[name][0] if name in rows else size) for name, size in self.dims.items()}
        coords = []
        for c in self.coords:
            values = np.asarray(c.values)
            if any(dim in rows for dim in c.dims):
                values = values[tuple(slice(*rows[dim]) if dim in rows else slice(None) for dim in c.dims)]
            coords.append(Coordinate(c.name, c.dtype, c.dims, c.attrs, tuple(values.tolist())))
        cut = Layout({**self.attrs, **(attrs or {})}, dims, coords, self.fields, dict(rows))
        cut._global = self._global
        return cut

    def make(self, f: Field, levels: range | None, rows: tuple[int, int], out: np.ndarray | None = None) -> np.ndarray:
        """Global rows ``rows`` of field ``f`` at ``levels``: the seeded synthetic data."""
        ny, nx = self._global[f.dims[-2]], self._global[f.dims[-1]]
        shape = (rows[1] - rows[0], nx) if levels is None else (len(levels), rows[1] - rows[0], nx)
        if out is None:
            out = np.empty(shape, f.dtype)
        return fields.fill_block(out.reshape(shape), f.key, ny, nx, f.mean, f.spread, f.noise, levels,
                                 self.levels(f) or 1, rows)


def _attrs(**attrs) -> tuple:
    return tuple((k, v) for k, v in attrs.items() if v not in (None, ""))


def _global_attributes(title: str, ctx: WriteContext) -> dict:
    return {
        "Conventions": "CF-1.8",
        "title": title,
        "institution": "cycleio synthetic surrogate (not a real forecast)",
        "source": f"cycleio GDAS-like surrogate, {ctx.grid.resolution} L{ctx.grid.levels}",
        "cycle": ctx.cycle,
        "seed": ctx.seed,
    }


def _time_axis(ctx: WriteContext, fhour: int) -> Coordinate:
    return Coordinate("time", "f8", ("time",), _attrs(standard_name="time",
                      units=f"hours since {parse_cycle(ctx.cycle):%Y-%m-%d %H:00:00}", calendar="standard", axis="T"),
                      (float(fhour),))


def _gaussian_axes(ny: int, nx: int, levels: int | None) -> tuple[dict, list[Coordinate]]:
    dims = {"grid_xt": nx, "grid_yt": ny}
    coords = [
        Coordinate("grid_xt", "f8", ("grid_xt",), _attrs(standard_name="longitude", units="degrees_east", axis="X",
                   long_name="T-cell longitude"), tuple(np.linspace(0.0, 360.0, nx, endpoint=False).tolist())),
        Coordinate("grid_yt", "f8", ("grid_yt",), _attrs(standard_name="latitude", units="degrees_north", axis="Y",
                   long_name="T-cell latitude"), tuple(np.linspace(90.0, -90.0, ny).tolist())),
    ]
    if levels:
        dims["pfull"] = levels
        coords.append(Coordinate("pfull", "f4", ("pfull",), _attrs(long_name="ref full pressure level", units="hPa",
                                 positive="down", axis="Z", standard_name="air_pressure"),
                                 tuple(np.linspace(0.2, 1000.0, levels, dtype=np.float32).tolist())))
    return dims, coords


def _member(spec: FileSpec) -> tuple:
    """Ensemble members get data of their own; the deterministic forecast keeps its keys."""
    member = spec.param("member")
    return () if member is None else (member,)


def _cf_attrs(name: str, units: str, standard_name: str) -> tuple:
    return _attrs(units=units, long_name=name, standard_name=standard_name)


def _history_fields(variables, dims, key: tuple, compression: Compression) -> list[Field]:
    return [Field(name, "f4", dims, _cf_attrs(name, units, standard_name), (*key, name), mean, spread, compression)
            for name, units, standard_name, mean, spread in variables]


def layout_atm_history(spec: FileSpec, ctx: WriteContext) -> Layout:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    dims, coords = _gaussian_axes(grid.ny, grid.nx, grid.levels)
    key = (ctx.seed, ctx.cycle, fhour, *_member(spec))
    fields_ = (_history_fields(ATM_3D, ("time", "pfull", "grid_yt", "grid_xt"), key, ctx.compression)
               + _history_fields(ATM_2D, ("time", "grid_yt", "grid_xt"), key, ctx.compression.lossless()))
    return Layout(_global_attributes("GDAS-like 3-D atmospheric history", ctx), {"time": None, **dims},
                  [_time_axis(ctx, fhour), *coords], fields_)


def layout_sfc_history(spec: FileSpec, ctx: WriteContext) -> Layout:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    dims, coords = _gaussian_axes(grid.ny, grid.nx, None)
    # The model quantizes only 3-D fields: surface fields are compressed losslessly.
    fields_ = _history_fields(SFC_2D, ("time", "grid_yt", "grid_xt"), (ctx.seed, ctx.cycle, fhour, *_member(spec)),
                              ctx.compression.lossless())
    return Layout(_global_attributes("GDAS-like surface history", ctx), {"time": None, **dims},
                  [_time_axis(ctx, fhour), *coords], fields_)


def _tile_axes(n: int, levels: int) -> tuple[dict, list[Coordinate], dict[str, tuple]]:
    dims: dict = {}
    coords = []
    for name, size in (("xaxis_1", n), ("xaxis_2", n + 1), ("yaxis_1", n + 1), ("yaxis_2", n), ("zaxis_1", levels)):
        dims[name] = size
        coords.append(Coordinate(name, "f8", (name,), _attrs(long_name=name, units="none",
                                 cartesian_axis=name[0].upper()), tuple(float(i) for i in range(1, size + 1))))
    dims["zaxis_2"] = SOIL_LEVELS
    dims["Time"] = None
    coords.append(Coordinate("Time", "f8", ("Time",), _attrs(long_name="Time", units="time level",
                                                             cartesian_axis="T"), (1.0,)))
    shapes = {
        "3d": ("Time", "zaxis_1", "yaxis_2", "xaxis_1"),
        "3d_u": ("Time", "zaxis_1", "yaxis_1", "xaxis_1"),
        "3d_v": ("Time", "zaxis_1", "yaxis_2", "xaxis_2"),
        "2d": ("Time", "yaxis_2", "xaxis_1"),
        "soil": ("Time", "zaxis_2", "yaxis_2", "xaxis_1"),
    }
    return dims, coords, shapes


def layout_tile_restart(spec: FileSpec, ctx: WriteContext) -> Layout:
    """One tile of a restart kind (fv_core.res, fv_tracer.res, sfc_data, ...), double precision."""
    tile = spec.param("tile")
    dims, coords, shapes = _tile_axes(ctx.grid.n, ctx.grid.levels)
    fields_ = [Field(name, "f8", shapes[shape], _attrs(long_name=name, units="none"),
                     (ctx.seed, ctx.cycle, spec.path, name), 1.0, 10.0) for name, shape in TILE_LAYOUTS[spec.kind]]
    return Layout(_global_attributes(f"FV3 {spec.kind} restart, tile {tile}", ctx), dims, coords, fields_)


def layout_dtfanl(spec: FileSpec, ctx: WriteContext) -> Layout:
    """The NSST foundation-temperature analysis on the Gaussian grid."""
    grid = ctx.grid
    dims, coords = _gaussian_axes(grid.ny, grid.nx, None)
    fields_ = _history_fields([(name, "K", "", 0.0, 1.0) for name in DTFANL_2D], ("time", "grid_yt", "grid_xt"),
                              (ctx.seed, ctx.cycle, 0), ctx.compression)
    return Layout(_global_attributes("NSST foundation temperature analysis", ctx), {"time": None, **dims},
                  [_time_axis(ctx, 0), *coords], fields_)


def layout_increment(spec: FileSpec, ctx: WriteContext) -> Layout:
    grid = ctx.grid
    coords = [
        Coordinate("lon", "f4", ("lon",), _attrs(standard_name="longitude", units="degrees_east"),
                   tuple(np.linspace(0.0, 360.0, grid.nx, endpoint=False, dtype=np.float32).tolist())),
        Coordinate("lat", "f4", ("lat",), _attrs(standard_name="latitude", units="degrees_north"),
                   tuple(np.linspace(90.0, -90.0, grid.ny, dtype=np.float32).tolist())),
    ]
    fields_ = [Field(name, "f4", ("lev", "lat", "lon"), _attrs(long_name=f"{name} increment", units="none"),
                     (ctx.seed, ctx.cycle, name), 0.0, 1.0) for name in INCREMENT_3D]
    return Layout(_global_attributes("GSI analysis increment", ctx),
                  {"lon": grid.nx, "lat": grid.ny, "lev": grid.levels}, coords, fields_)


def layout_fv_core_axes(spec: FileSpec, ctx: WriteContext) -> Layout:
    """fv_core.res.nc: the hybrid vertical coordinate (ak, bk): coordinates only, no synthetic field."""
    levels = ctx.grid.levels
    coords = [Coordinate(name, "f8", ("Time", "xaxis_1"), _attrs(long_name=name, units="Pa" if name == "ak" else "none"),
                         tuple(values.tolist()))
              for name, values in (("ak", np.linspace(0.0, 5000.0, levels + 1)), ("bk", np.linspace(0.0, 1.0, levels + 1)))]
    return Layout(_global_attributes("FV3 vertical coordinate", ctx), {"xaxis_1": levels + 1, "Time": None}, coords, [])


LAYOUTS = {
    "atm_history": layout_atm_history,
    "sfc_history": layout_sfc_history,
    **{kind: layout_tile_restart for kind in TILE_LAYOUTS},
    "fv_core_axes": layout_fv_core_axes,
    "increment": layout_increment,
    "dtfanl": layout_dtfanl,
}


# --------------------------------------------------------------------------- the chunk engine


def bitround(data: np.ndarray, bits: int) -> np.ndarray:
    """netCDF-C's BitRound: keep ``bits`` significant mantissa bits, rounding half away (bit for bit)."""
    if data.dtype == np.float32:
        uint, width, mantissa = np.uint32, 32, 23
    else:
        uint, width, mantissa = np.uint64, 64, 52
    full = (1 << width) - 1
    keep = uint((full << (mantissa - bits)) & full)
    half = uint((~int(keep) & full) & (int(keep) >> 1))
    raw = data.view(uint) + half
    raw &= keep
    return raw.view(data.dtype)


SHUFFLE_FILTER, DEFLATE_FILTER = 2, 1


def encode_chunk(data: np.ndarray, pipeline: list[tuple[int, tuple]]) -> bytes | np.ndarray:
    """A chunk through the dataset's filters (shuffle, deflate), as HDF5 would, for a direct write."""
    out = data
    for code, values in pipeline:
        if code == SHUFFLE_FILTER:
            out = np.ascontiguousarray(np.frombuffer(out, np.uint8).reshape(-1, data.dtype.itemsize).T)
        elif code == DEFLATE_FILTER:
            out = zlib.compress(out, values[0] if values else 6)
        else:
            raise ValueError(f"HDF5 filter {code} is not one cycleio encodes")
    return out


def decode_chunk(raw, pipeline: list[tuple[int, tuple]], itemsize: int):
    out = raw
    for code, _ in reversed(pipeline):
        if code == DEFLATE_FILTER:
            out = zlib.decompress(out)
        elif code == SHUFFLE_FILTER:
            out = np.ascontiguousarray(np.frombuffer(out, np.uint8).reshape(itemsize, -1).T)
        else:
            raise ValueError(f"HDF5 filter {code} is not one cycleio decodes")
    return out


def netcdf_image(layout: Layout, buffer_bytes: int) -> memoryview:
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


def _open_hdf5(path: Path, writable: bool, image: bytes | None = None, grows_to: int = 0):
    """Open with HDF5: the file at ``path``, or (``image``) a file held only in memory, allocated once
    for ``grows_to`` bytes (growing it step by step would copy it at every step)."""
    import h5py

    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    if image is not None:
        fapl.set_fapl_core(max(grows_to, len(image), 2**20), False)
        fapl.set_file_image(image)
    return h5py.h5f.open(os.fsencode(path), h5py.h5f.ACC_RDWR if writable else h5py.h5f.ACC_RDONLY, fapl)


def write_netcdf(path: Path, layout: Layout, source, times: Overheads, buffer_bytes: int = IO_BUFFER_BYTES,
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
    t0 = time.perf_counter()
    image = netcdf_image(layout, buffer_bytes)
    times.define += time.perf_counter() - t0
    storage = 0.0
    if in_memory:
        t0 = time.perf_counter()
        fid = _open_hdf5(path, writable=True, image=bytes(image), grows_to=len(image) + layout.data_bytes() + 2**20)
        times.define += time.perf_counter() - t0
    else:
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as handle:
            handle.write(image)
        times.transfers += 1
        fid = _open_hdf5(path, writable=True)
        storage += time.perf_counter() - t0
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
        chunk_s = 0.0
        for f, levels in layout.blocks(buffer_bytes):
            dset, pipeline, records, chunk_shape = opened[f.name]
            data = source(f, levels, layout.band(f))
            lead = (0,) * records
            if not pipeline:
                chunk = np.ascontiguousarray(data)
                if levels is not None and len(levels) < chunk_shape[records]:  # the last, partial chunk
                    chunk = np.concatenate([chunk, np.zeros((chunk_shape[records] - len(levels), *chunk.shape[1:]),
                                                            chunk.dtype)])
                chunks = [(lead + ((levels.start,) if levels is not None else ()) + (0, 0), chunk)]
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
            chunk_s += time.perf_counter() - t0
            if not in_memory:
                times.transfers += len(chunks)
        opened.clear()
        if in_memory:
            times.define += chunk_s
            t0 = time.perf_counter()
            h5py.h5f.flush(fid)
            final = fid.get_file_image()
            times.define += time.perf_counter() - t0
        else:
            storage += chunk_s
    finally:
        t0 = time.perf_counter()
        fid.close()
        closing = time.perf_counter() - t0
    if in_memory:
        times.define += closing
        t0 = time.perf_counter()
        with open(path, "wb", buffering=0) as handle:
            write_groups(handle.fileno(), [memoryview(final)[i:i + buffer_bytes]
                                           for i in range(0, len(final), buffer_bytes)], times, buffer_bytes)
        storage += time.perf_counter() - t0
    else:
        storage += closing
    return path.stat().st_size, storage


def write_layout(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """A netCDF file of the inventory, made in this process: data generated per transfer.

    All of the writer's time that is not storage I/O, data generation or codec work (building the
    layout and the file's structure, HDF5's bookkeeping) is booked as ``define``.
    """
    t0 = time.perf_counter()
    before = ctx.times.copy()
    layout = LAYOUTS[spec.kind](spec, ctx)
    buffers: dict = {}

    def make(f: Field, levels, rows):
        t1 = time.perf_counter()
        shape = (rows[1] - rows[0], layout.size(f.dims[-1])) if levels is None else (len(levels), rows[1] - rows[0],
                                                                                      layout.size(f.dims[-1]))
        buffer = buffers.get((f.dtype, shape))
        if buffer is None:
            buffer = buffers[(f.dtype, shape)] = np.empty(shape, f.dtype)
        data = layout.make(f, levels, rows, buffer)
        ctx.times.generate += time.perf_counter() - t1
        return data

    _, storage = write_netcdf(path, layout, make, ctx.times, ctx.buffer_bytes)
    added = ctx.times.since(before)
    ctx.times.define += max(0.0, time.perf_counter() - t0 - storage - added.total)


def write_bytes(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """Binary observation files (BUFR stand-ins) of a given size, in transfers of the buffer's size."""
    remaining = spec.param("bytes")
    rng = np.random.default_rng(seed_for(ctx.seed, ctx.cycle, spec.path))
    with open(path, "wb", buffering=0) as handle:
        while remaining > 0:
            size = min(remaining, ctx.buffer_bytes)
            t0 = time.perf_counter()
            chunk = rng.bytes(size)
            ctx.times.generate += time.perf_counter() - t0
            handle.write(chunk)
            ctx.times.transfers += 1
            remaining -= size


def write_text_table(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """A table of numbers as text (gsistat): formatting is making the data, the bytes go out in one write."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed_for(ctx.seed, ctx.cycle, spec.path))
    text = io.StringIO()
    np.savetxt(text, rng.standard_normal((spec.param("rows", 100), 6)), fmt="%14.6e")
    data = text.getvalue().encode()
    ctx.times.generate += time.perf_counter() - t0
    with open(path, "wb", buffering=0) as handle:
        write_groups(handle.fileno(), [data], ctx.times, ctx.buffer_bytes)


def write_groups(fd: int, buffers: list, times: Overheads, buffer_bytes: int) -> None:
    """Buffers to a file in transfers of at most the buffer's size (writev: no copy to join them)."""
    group: list = []
    size = 0
    for buffer in buffers:
        if group and (size + len(buffer) > buffer_bytes or len(group) == 1024):
            _writev_all(fd, group)
            times.transfers += 1
            group, size = [], 0
        group.append(buffer)
        size += len(buffer)
    if group:
        _writev_all(fd, group)
        times.transfers += 1


def _writev_all(fd: int, buffers: list) -> None:
    views = [memoryview(b).cast("B") for b in buffers]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]


def write_log(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    path.write_text(f"completed fhour={spec.param('fhour', 0):.3f} cycle={ctx.cycle} resolution={ctx.grid.resolution}\n")


def write_coupler(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    when = parse_cycle(ctx.cycle)
    path.write_text(
        "     2        (Calendar: no_calendar=0, thirty_day_months=1, julian=2, gregorian=3, noleap=4)\n"
        f"  {when:%Y %-m %-d %-H} 0 0        Model start time:   year, month, day, hour, minute, second\n"
        f"  {when:%Y %-m %-d %-H} 0 0        Current model time: year, month, day, hour, minute, second\n"
    )


def write_grib(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """A GRIB2 product encoded by ecCodes, one field at a time, simple packing, written in large transfers.

    Simple packing's size does not depend on the values, so every field is one smooth base plane
    scaled and shifted (cheap), instead of a plane of its own. Packing is codec work (``encode``),
    as in the post job; the messages reach the file in transfers of up to the buffer's size.
    """
    t0 = time.perf_counter()
    import eccodes  # the library's start-up (about 0.15 s in a fresh process) is not storage time

    ni, nj = grib_shape(spec, ctx.grid)
    fhour = spec.param("fhour", 0)
    handle = eccodes.codes_grib_new_from_samples("GRIB2")
    try:
        for key, value in (("gridType", "regular_ll"), ("Ni", ni), ("Nj", nj),
                           ("latitudeOfFirstGridPointInDegrees", 90.0), ("longitudeOfFirstGridPointInDegrees", 0.0),
                           ("latitudeOfLastGridPointInDegrees", -90.0),
                           ("longitudeOfLastGridPointInDegrees", 360.0 - 360.0 / ni),
                           ("iDirectionIncrementInDegrees", 360.0 / ni), ("jDirectionIncrementInDegrees", 180.0 / (nj - 1)),
                           ("dataDate", int(ctx.cycle[:8])), ("dataTime", int(ctx.cycle[8:]) * 100),
                           ("forecastTime", fhour), ("bitsPerValue", GRIB_BITS_PER_VALUE)):
            eccodes.codes_set(handle, key, value)
        ctx.times.define += time.perf_counter() - t0
        base = ctx.plane((ctx.seed, ctx.cycle, spec.path), nj, ni, 0.0, 1.0, np.float64).ravel()
        messages: list[bytes] = []
        with open(path, "wb", buffering=0) as out:
            for index, (name, discipline, category, number, level_type, level) in enumerate(
                    grib_fields(spec.kind, spec.param("fields"))):
                t0 = time.perf_counter()
                values = base * (10.0 + index % 7) + 200.0 + index
                t1 = time.perf_counter()
                for key, value in (("discipline", discipline), ("parameterCategory", category),
                                   ("parameterNumber", number), ("typeOfFirstFixedSurface", level_type),
                                   ("level", level)):
                    eccodes.codes_set(handle, key, value)
                eccodes.codes_set_values(handle, values)
                messages.append(eccodes.codes_get_message(handle))
                t2 = time.perf_counter()
                ctx.times.generate += t1 - t0
                ctx.times.encode += t2 - t1
                if sum(map(len, messages)) >= ctx.buffer_bytes:
                    write_groups(out.fileno(), messages, ctx.times, ctx.buffer_bytes)
                    messages = []
            write_groups(out.fileno(), messages, ctx.times, ctx.buffer_bytes)
    finally:
        eccodes.codes_release(handle)


def _grib_message_offsets(path: Path) -> list[int]:
    """Byte offsets of the messages of a GRIB2 file, from each message's section 0."""
    offsets, offset = [], 0
    with open(path, "rb") as handle:
        while header := handle.read(16):
            if header[:4] != b"GRIB" or len(header) < 16:
                raise ValueError(f"{path}: no GRIB message at byte {offset}")
            offsets.append(offset)
            offset += int.from_bytes(header[8:16], "big")
            handle.seek(offset)
    return offsets


def write_grib_index(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """The wgrib2-style inventory of the product beside it (which this job wrote just before)."""
    grib = path.parent / Path(spec.path).name.removesuffix(".idx")
    fhour = spec.param("fhour", 0)
    when = "anl" if fhour == 0 else f"{fhour} hour fcst"
    fields = grib_fields("grib_pgrb2", spec.param("fields"))
    t0 = time.perf_counter()
    offsets = _grib_message_offsets(grib)  # reading the product, as wgrib2 -s does: not this file's writing
    ctx.times.locate += time.perf_counter() - t0
    lines = []
    for number, (offset, (name, *_, level_type, level)) in enumerate(zip(offsets, fields), 1):
        lines.append(f"{number}:{offset}:d={ctx.cycle}:{name}:{f'{level} mb' if level_type == 100 else 'surface'}:{when}:\n")
    path.write_text("".join(lines))


WRITERS = {
    **{kind: write_layout for kind in LAYOUTS},
    "grib_master": write_grib,
    "grib_sflux": write_grib,
    "grib_pgrb2": write_grib,
    "grib_index": write_grib_index,
    "bytes": write_bytes,
    "text_table": write_text_table,
    "log": write_log,
    "coupler": write_coupler,
}
assert set(LAYOUTS) == NETCDF_KINDS, "kinds.NETCDF_KINDS must name the netCDF layouts"
assert set(WRITERS) == FILE_KINDS, "kinds.FILE_KINDS must name the writers' kinds"


@dataclass(frozen=True)
class Transfer:
    """One file written or read: its bytes, the seconds of storage I/O, and what is kept apart from them.

    ``io_s`` is what a replay of the same bytes does too: the data's transfers, the file's creation,
    close and fsync. Apart (``cpu``): the surrogate's and the library's CPU work, and the safe
    landing's rename and directory sync (cycleio's own durability, which the model does not have).
    """

    bytes: int
    io_s: float
    cpu: Overheads
    cached_fraction: float | None = None  # reads: the file's share in the page cache before the read


def write_file(dest: Path, spec: FileSpec, ctx: WriteContext) -> Transfer:
    """Write one file of the inventory under ``dest``, landing it atomically (write, fsync, rename).

    Storage time is the whole write less the time spent making data and encoding it.
    """
    before, timing = ctx.times.copy(), {}
    t0 = time.perf_counter()
    with landing(dest, timing) as tmp:
        WRITERS[spec.kind](tmp, spec, ctx)
    elapsed = time.perf_counter() - t0
    ctx.times.rename += timing["rename_s"]
    cpu = ctx.times.since(before)
    cpu.transfers = max(cpu.transfers, 1)
    return Transfer(dest.stat().st_size, elapsed - cpu.total, cpu)


def _stored_pieces(path: Path) -> list[tuple[int, int, list | None, int]]:
    """Where a netCDF-4 file stores its variables' data: (address, bytes, filters, item size) per chunk,
    and per contiguous variable, in the order they lie in the file (HDF5 metadata: the file's index).

    HDF5 lists a group's variables by name; read in that order, a file of cold pages is read back
    and forth and the kernel's readahead stops helping. In file order it is read front to back, as a
    model reads its variables in the order it defined (and wrote) them."""
    import h5py

    pieces = []
    fid = _open_hdf5(path, writable=False)
    try:
        root = h5py.h5g.open(fid, b"/")
        for index in range(root.get_num_objs()):
            if root.get_objtype_by_idx(index) != h5py.h5g.DATASET:
                continue
            dset = h5py.h5d.open(root, root.get_objname_by_idx(index))
            if dset.get_storage_size() == 0:
                continue  # a netCDF dimension without a coordinate variable holds no data
            dcpl = dset.get_create_plist()
            if dcpl.get_layout() != h5py.h5d.CHUNKED:
                pieces.append((dset.get_offset(), dset.get_storage_size(), None, dset.dtype.itemsize))
                continue
            pipeline = [dcpl.get_filter(i)[::2] for i in range(dcpl.get_nfilters())] or None
            for chunk in range(dset.get_num_chunks()):
                info = dset.get_chunk_info(chunk)
                pieces.append((info.byte_offset, info.size, pipeline, dset.dtype.itemsize))
    finally:
        fid.close()
    return sorted(pieces, key=lambda piece: piece[0])


class FileReader:
    """Reads files as the consuming job would, into one buffer reused from file to file.

    A model reads into arrays it has already allocated, and fio into one buffer; a fresh buffer per
    file (or a first read into untouched memory) would add page faults, the kernel zeroing new memory,
    to what is meant to be storage time.
    """

    def __init__(self, buffer_bytes: int = READ_TRANSFER_BYTES):
        self.buffer_bytes = buffer_bytes
        # Allocated and touched here, before any read is timed, as a model allocates its arrays at start.
        self._buffer = bytearray(buffer_bytes)

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
        if kind in NETCDF_KINDS:
            self._read_hdf5(path, times)
        else:  # GRIB, BUFR and text: the bytes as they are
            view = self._view(min(self.buffer_bytes, max(path.stat().st_size, 1)))
            with open(path, "rb", buffering=0) as handle:
                while handle.readinto(view):
                    times.transfers += 1
        elapsed = time.perf_counter() - t0
        cpu = times.since(before)
        cpu.transfers = max(cpu.transfers, 1)
        return Transfer(path.stat().st_size, elapsed - cpu.total, cpu, cached)

    def _read_hdf5(self, path: Path, times: Overheads) -> None:
        """Every variable of a netCDF-4 file as stored: a compressed chunk in one call (it is inflated
        whole, booked as ``decode``), uncompressed data in calls of at most the buffer's size. The
        file's index (where each chunk lies) is read through HDF5 first, booked as ``locate``."""
        t0 = time.perf_counter()
        pieces = _stored_pieces(path)
        times.locate += time.perf_counter() - t0
        fd = os.open(path, os.O_RDONLY)
        try:
            for address, size, pipeline, itemsize in pieces:
                step = max(1, size if pipeline else min(size, self.buffer_bytes))
                for start in range(0, size, step):
                    view = self._view(min(step, size - start))
                    _pread_all(fd, view, address + start, path)
                    times.transfers += 1
                if pipeline:
                    t1 = time.perf_counter()
                    decode_chunk(view, pipeline, itemsize)
                    times.decode += time.perf_counter() - t1
        finally:
            os.close(fd)


def _pread_all(fd: int, view: memoryview, offset: int, path: Path) -> None:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise OSError(f"{path}: short read at byte {offset + done} (the file ends early)")
        done += got


def read_file(path: Path, kind: str, times: Overheads | None = None,
              buffer_bytes: int = READ_TRANSFER_BYTES) -> Transfer:
    """Read one file as the consuming job would (a reader of its own: see FileReader)."""
    return FileReader(buffer_bytes).read(path, kind, times)
