"""Writers of the surrogates' files, one per kind (:data:`WRITERS`), and :func:`write_file` that lands one.

Every writer makes its data per transfer, so memory stays near one transfer whatever the
resolution; :func:`write_file` lands the file through a temporary name (write, fsync, rename). What
each kind holds and its expected size are in kinds.py; the netCDF kinds' layouts in nclayout.py.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np

from ..config.calendar import parse_cycle
from ..fsutil import landing
from .context import WriteContext
from .fields import seed_for
from .h5chunks import write_netcdf
from .inventory import FileSpec
from .kinds import FILE_KINDS, GRIB_BITS_PER_VALUE, NETCDF_KINDS, grib_fields, grib_shape
from .nclayout import LAYOUTS, Field
from .transfers import Transfer, write_groups


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
            ctx.times.before_storage()
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
    """Byte offsets of the messages of a GRIB2 file, from each message's section 0 (16 bytes read per message, unbuffered:
    a buffered read after each seek would read 8 KiB, which no record counts)."""
    offsets, offset = [], 0
    with open(path, "rb", buffering=0) as handle:
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
