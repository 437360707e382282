"""Writers and readers of the surrogates' files: CF-conformant netCDF4 and plain files.

Every writer fills one level (one 2-D plane) at a time, so memory stays near one plane whatever
the resolution, and lands its file through a temporary name (write, fsync, rename).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import netCDF4
import numpy as np

from .calendar import parse_cycle
from .fields import level_profile, seed_for, smooth_rows
from .fsutil import CHUNK_BYTES, landing
from .grid import Grid
from .inventory import FileSpec

# Each plane is written once and never revisited, so a small chunk cache suffices; netCDF's default
# (64 MiB per variable) made a C384 history file's writer hold 400 MiB instead of 140 MiB.
netCDF4.set_chunk_cache(4 * 2**20, 101)

# name, units, standard_name, mean, spread
ATM_3D = (
    ("ugrd", "m/s", "eastward_wind", 0.0, 30.0),
    ("vgrd", "m/s", "northward_wind", 0.0, 30.0),
    ("tmp", "K", "air_temperature", 250.0, 60.0),
    ("spfh", "kg/kg", "specific_humidity", 5e-3, 1e-2),
    ("dpres", "Pa", "", 800.0, 400.0),
    ("delz", "m", "", -300.0, 200.0),
    ("dzdt", "m/s", "upward_air_velocity", 0.0, 0.2),
    ("o3mr", "kg/kg", "mass_fraction_of_ozone_in_air", 5e-6, 1e-5),
    ("clwmr", "kg/kg", "mass_fraction_of_cloud_liquid_water_in_air", 1e-5, 2e-5),
    ("rwmr", "kg/kg", "mass_fraction_of_rain_in_air", 1e-6, 2e-6),
    ("icmr", "kg/kg", "mass_fraction_of_cloud_ice_in_air", 1e-6, 2e-6),
    ("snmr", "kg/kg", "mass_fraction_of_snow_in_air", 1e-6, 2e-6),
    ("grle", "kg/kg", "mass_fraction_of_graupel_in_air", 1e-7, 2e-7),
    ("cld_amt", "1", "cloud_area_fraction_in_atmosphere_layer", 0.3, 0.6),
)
ATM_2D = (
    ("hgtsfc", "m", "surface_altitude", 500.0, 1500.0),
    ("pressfc", "Pa", "surface_air_pressure", 98000.0, 8000.0),
)
_SFC_NAMED = tuple(
    (name, units, "", mean, spread)
    for name, units, mean, spread in (
        ("land", "1", 0.3, 0.6), ("tmpsfc", "K", 285.0, 40.0), ("tmp2m", "K", 284.0, 40.0),
        ("spfh2m", "kg/kg", 8e-3, 1e-2), ("ugrd10m", "m/s", 0.0, 15.0), ("vgrd10m", "m/s", 0.0, 15.0),
        ("pressfc", "Pa", 98000.0, 8000.0), ("prate_ave", "kg/m**2/s", 3e-5, 6e-5),
        ("dlwrf", "W/m**2", 330.0, 100.0), ("dswrf", "W/m**2", 200.0, 300.0),
        ("ulwrf", "W/m**2", 390.0, 100.0), ("uswrf", "W/m**2", 60.0, 100.0),
        ("shtfl", "W/m**2", 20.0, 100.0), ("lhtfl", "W/m**2", 80.0, 150.0),
        ("tprcp", "kg/m**2", 0.5, 1.0), ("snowc", "%", 10.0, 30.0), ("weasd", "kg/m**2", 10.0, 40.0),
        ("soilm", "kg/m**2", 300.0, 200.0), ("soilt1", "K", 285.0, 30.0), ("soilt2", "K", 285.0, 30.0),
        ("soill1", "1", 0.25, 0.2), ("soill2", "1", 0.25, 0.2), ("hpbl", "m", 800.0, 1000.0),
        ("albdo_ave", "%", 25.0, 30.0),
    )
)
# 68 surface fields, compressed losslessly, make a C768 sfcf file of about 1.04 GB, as the real one
# (which holds more fields that compress better than seeded noise does).
SFC_2D = _SFC_NAMED + tuple((f"sfc_field_{index:03d}", "1", "", 0.0, 1.0) for index in range(68 - len(_SFC_NAMED)))
INCREMENT_3D = ("u_inc", "v_inc", "delp_inc", "delz_inc", "T_inc", "sphum_inc", "liq_wat_inc", "o3mr_inc", "icmr_inc")
DTFANL_2D = ("dtf", "tref", "xz", "c_0")
SOIL_LEVELS = 4

# Restart files per tile: (variable, shape) with shapes 3d (level, N, N), 3d_u (level, N+1, N),
# 3d_v (level, N, N+1), 2d (N, N) and soil (4, N, N); all double precision, as the model writes them.
TILE_LAYOUTS = {
    "fv_core.res": tuple((name, "3d_u" if name == "u" else "3d_v" if name == "v" else "3d")
                         for name in ("u", "v", "W", "DZ", "T", "delp", "ua", "va")) + (("phis", "2d"),),
    "fv_tracer.res": tuple((name, "3d") for name in (
        "sphum", "liq_wat", "rainwat", "ice_wat", "snowwat", "graupel", "o3mr", "sgs_tke", "cld_amt")),
    "fv_srf_wnd.res": (("u_srf", "2d"), ("v_srf", "2d")),
    "phy_data": tuple((f"phy_f2d_{index:02d}", "2d") for index in range(80)),
    "sfc_data": tuple((f"sfc_{index:02d}", "2d") for index in range(49)) + (("stc", "soil"), ("smc", "soil"), ("slc", "soil")),
    "ca_data": (("ca1", "2d"), ("ca2", "2d"), ("ca3", "2d")),
}

# GRIB2 products: (name for the index, discipline, category, number) cycled over pressure levels.
GRIB_PARAMETERS = (("TMP", 0, 0, 0), ("UGRD", 0, 2, 2), ("VGRD", 0, 2, 3), ("HGT", 0, 3, 5), ("RH", 0, 1, 1),
                   ("VVEL", 0, 2, 8))
GRIB_SURFACE_PARAMETERS = (("PRMSL", 0, 3, 1), ("TMP", 0, 0, 0), ("SPFH", 0, 1, 0), ("PRATE", 0, 1, 7),
                           ("DSWRF", 0, 4, 7), ("DLWRF", 0, 5, 3), ("LHTFL", 0, 0, 10), ("SHTFL", 0, 0, 11))
PRESSURE_LEVELS_HPA = (1000, 975, 950, 925, 900, 850, 800, 750, 700, 650, 600, 550, 500, 450, 400, 350, 300, 250,
                       200, 150, 100, 70, 50, 40, 30, 20, 15, 10, 7, 5, 3, 2, 1)
PRODUCT_GRIDS = {"0p25": (1440, 721), "1p00": (360, 181)}
GRIB_BITS_PER_VALUE = 8  # byte-aligned simple packing: 12 bits encodes 15 times slower in ecCodes
GRIB_MESSAGE_OVERHEAD_BYTES = 179  # sections 0-5 and 7's header of a simple-packed regular_ll message
MASTER_SURFACE_FIELDS = 40


# Noise of the synthetic fields, as a fraction of their spread: 0.05 makes a C768 atmf file compress
# (zlib 1, BitRound to 5 bits) to 0.20 of its raw size, as the operational 6.7 of 33 GB.
FIELD_NOISE = 0.05


@dataclass(frozen=True)
class Compression:
    """The write component's history compression: zlib level (0 = off) and bit rounding."""

    zlib_level: int = 0
    quantize_nsd: int = 0  # significant bits kept by BitRound; 0 = off

    def variable_kwargs(self) -> dict:
        kwargs: dict = {}
        if self.zlib_level > 0:
            kwargs.update(compression="zlib", complevel=self.zlib_level, shuffle=True)
        if self.quantize_nsd > 0:
            kwargs.update(significant_digits=self.quantize_nsd, quantize_mode="BitRound")
        return kwargs


class Stopwatch:
    """Accumulates the seconds spent making synthetic data, so write records time only I/O."""

    def __init__(self):
        self.seconds = 0.0

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


@dataclass(frozen=True)
class WriteContext:
    grid: Grid
    seed: int
    cycle: str
    compression: Compression = Compression()
    generation: Stopwatch = field(default_factory=Stopwatch, compare=False)

    def plane(self, key: int, ny: int, nx: int, mean: float, spread: float, dtype, noise: float = FIELD_NOISE):
        return self.plane_rows(0, ny, key, ny, nx, mean, spread, dtype, noise)

    def plane_rows(self, start: int, stop: int, key: int, ny: int, nx: int, mean: float, spread: float, dtype,
                   noise: float = FIELD_NOISE):
        """Rows [start, stop) of ``plane(key, ny, ...)``, made without the others."""
        t0 = time.perf_counter()
        rows = smooth_rows(key, ny, nx, mean, spread, noise, dtype, start, stop)
        self.generation.seconds += time.perf_counter() - t0
        return rows


def _global_attributes(ds: netCDF4.Dataset, title: str, ctx: WriteContext) -> None:
    ds.setncatts(
        {
            "Conventions": "CF-1.8",
            "title": title,
            "institution": "cycleio synthetic surrogate (not a real forecast)",
            "source": f"cycleio GDAS-like surrogate, {ctx.grid.resolution} L{ctx.grid.levels}",
            "cycle": ctx.cycle,
            "seed": ctx.seed,
        }
    )


def _time_axis(ds: netCDF4.Dataset, ctx: WriteContext, fhour: int) -> None:
    ds.createDimension("time", None)
    time = ds.createVariable("time", "f8", ("time",))
    time.setncatts(
        {
            "standard_name": "time",
            "units": f"hours since {parse_cycle(ctx.cycle):%Y-%m-%d %H:00:00}",
            "calendar": "standard",
            "axis": "T",
        }
    )
    time[0] = float(fhour)


def _gaussian_axes(ds: netCDF4.Dataset, ny: int, nx: int, levels: int | None) -> None:
    ds.createDimension("grid_xt", nx)
    ds.createDimension("grid_yt", ny)
    lon = ds.createVariable("grid_xt", "f8", ("grid_xt",))
    lon.setncatts({"standard_name": "longitude", "units": "degrees_east", "axis": "X", "long_name": "T-cell longitude"})
    lon[:] = np.linspace(0.0, 360.0, nx, endpoint=False)
    lat = ds.createVariable("grid_yt", "f8", ("grid_yt",))
    lat.setncatts({"standard_name": "latitude", "units": "degrees_north", "axis": "Y", "long_name": "T-cell latitude"})
    lat[:] = np.linspace(90.0, -90.0, ny)
    if levels:
        ds.createDimension("pfull", levels)
        pfull = ds.createVariable("pfull", "f4", ("pfull",))
        pfull.setncatts(
            {"long_name": "ref full pressure level", "units": "hPa", "positive": "down", "axis": "Z",
             "standard_name": "air_pressure"}
        )
        pfull[:] = np.linspace(0.2, 1000.0, levels, dtype=np.float32)


def _fill_levels(var, ctx: WriteContext, key_parts, ny, nx, levels, mean, spread, dtype, leading=1) -> None:
    """Write a (time?, level, y, x) variable one plane at a time."""
    for level in range(levels):
        plane = ctx.plane(seed_for(*key_parts, level), ny, nx, mean * level_profile(level, levels), spread, dtype)
        if leading:
            var[0, level, :, :] = plane
        else:
            var[level, :, :] = plane


def write_atm_history(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    chunks = (1, 1, grid.ny, grid.nx)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "GDAS-like 3-D atmospheric history", ctx)
        _time_axis(ds, ctx, fhour)
        _gaussian_axes(ds, grid.ny, grid.nx, grid.levels)
        for name, units, standard_name, mean, spread in ATM_3D:
            var = ds.createVariable(
                name, "f4", ("time", "pfull", "grid_yt", "grid_xt"), chunksizes=chunks,
                **ctx.compression.variable_kwargs(),
            )
            var.setncatts({"units": units, "long_name": name, **({"standard_name": standard_name} if standard_name else {})})
            _fill_levels(var, ctx, (ctx.seed, ctx.cycle, fhour, name, *_member(spec)), grid.ny, grid.nx, grid.levels,
                         mean, spread, np.float32)
        _write_planes(ds, ATM_2D, ctx, fhour, grid.ny, grid.nx, key=_member(spec))


def _member(spec: FileSpec) -> tuple:
    """Ensemble members get data of their own; the deterministic forecast keeps its keys."""
    member = spec.param("member")
    return () if member is None else (member,)


def _write_planes(ds, variables, ctx: WriteContext, fhour: int, ny: int, nx: int, lossless: bool = False,
                  key: tuple = ()) -> None:
    compression = Compression(ctx.compression.zlib_level) if lossless else ctx.compression
    for name, units, standard_name, mean, spread in variables:
        var = ds.createVariable(
            name, "f4", ("time", "grid_yt", "grid_xt"), chunksizes=(1, ny, nx), **compression.variable_kwargs()
        )
        var.setncatts({"units": units, "long_name": name, **({"standard_name": standard_name} if standard_name else {})})
        var[0, :, :] = ctx.plane(seed_for(ctx.seed, ctx.cycle, fhour, name, *key), ny, nx, mean, spread, np.float32)


def write_sfc_history(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "GDAS-like surface history", ctx)
        _time_axis(ds, ctx, fhour)
        _gaussian_axes(ds, grid.ny, grid.nx, None)
        # The model quantizes only 3-D fields: surface fields are compressed losslessly.
        _write_planes(ds, SFC_2D, ctx, fhour, grid.ny, grid.nx, lossless=True, key=_member(spec))


def _tile_axes(ds: netCDF4.Dataset, n: int, levels: int | None) -> None:
    for name, size in (("xaxis_1", n), ("xaxis_2", n + 1), ("yaxis_1", n + 1), ("yaxis_2", n)):
        ds.createDimension(name, size)
        axis = ds.createVariable(name, "f8", (name,))
        axis.setncatts({"long_name": name, "units": "none", "cartesian_axis": name[0].upper()})
        axis[:] = np.arange(1, size + 1, dtype=np.float64)
    if levels:
        ds.createDimension("zaxis_1", levels)
        zaxis = ds.createVariable("zaxis_1", "f8", ("zaxis_1",))
        zaxis.setncatts({"long_name": "zaxis_1", "units": "none", "cartesian_axis": "Z"})
        zaxis[:] = np.arange(1, levels + 1, dtype=np.float64)
    ds.createDimension("Time", None)
    time = ds.createVariable("Time", "f8", ("Time",))
    time.setncatts({"long_name": "Time", "units": "time level", "cartesian_axis": "T"})
    time[0] = 1.0


def _tile_dims(ds: netCDF4.Dataset, n: int, levels: int) -> dict[str, tuple]:
    _tile_axes(ds, n, levels)
    ds.createDimension("zaxis_2", SOIL_LEVELS)
    return {
        "3d": ("Time", "zaxis_1", "yaxis_2", "xaxis_1"),
        "3d_u": ("Time", "zaxis_1", "yaxis_1", "xaxis_1"),
        "3d_v": ("Time", "zaxis_1", "yaxis_2", "xaxis_2"),
        "2d": ("Time", "yaxis_2", "xaxis_1"),
        "soil": ("Time", "zaxis_2", "yaxis_2", "xaxis_1"),
    }


def write_tile_restart(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """One tile of a restart kind (fv_core.res, fv_tracer.res, sfc_data, ...), plane by plane."""
    n, levels, tile = ctx.grid.n, ctx.grid.levels, spec.param("tile")
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, f"FV3 {spec.kind} restart, tile {tile}", ctx)
        dims = _tile_dims(ds, n, levels)
        for name, shape in TILE_LAYOUTS[spec.kind]:
            var_dims = dims[shape]
            sizes = [len(ds.dimensions[d]) for d in var_dims]
            var = ds.createVariable(name, "f8", var_dims, chunksizes=[1] * (len(sizes) - 2) + sizes[-2:])
            var.setncatts({"long_name": name, "units": "none"})
            key = (ctx.seed, ctx.cycle, spec.path, name)
            if len(sizes) == 4:
                _fill_levels(var, ctx, key, sizes[2], sizes[3], sizes[1], 1.0, 10.0, np.float64)
            else:
                var[0] = ctx.plane(seed_for(*key), sizes[1], sizes[2], 1.0, 10.0, np.float64)


def write_fv_core_axes(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """fv_core.res.nc: the hybrid vertical coordinate (ak, bk)."""
    levels = ctx.grid.levels
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "FV3 vertical coordinate", ctx)
        ds.createDimension("xaxis_1", levels + 1)
        ds.createDimension("Time", None)
        for name, values in (("ak", np.linspace(0.0, 5000.0, levels + 1)), ("bk", np.linspace(0.0, 1.0, levels + 1))):
            var = ds.createVariable(name, "f8", ("Time", "xaxis_1"))
            var.setncatts({"long_name": name, "units": "Pa" if name == "ak" else "none"})
            var[0] = values


def write_dtfanl(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """The NSST foundation-temperature analysis on the Gaussian grid."""
    grid = ctx.grid
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "NSST foundation temperature analysis", ctx)
        _time_axis(ds, ctx, 0)
        _gaussian_axes(ds, grid.ny, grid.nx, None)
        _write_planes(ds, [(name, "K", "", 0.0, 1.0) for name in DTFANL_2D], ctx, 0, grid.ny, grid.nx)


def write_increment(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    grid = ctx.grid
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "GSI analysis increment", ctx)
        ds.createDimension("lon", grid.nx)
        ds.createDimension("lat", grid.ny)
        ds.createDimension("lev", grid.levels)
        lon = ds.createVariable("lon", "f4", ("lon",))
        lon.setncatts({"standard_name": "longitude", "units": "degrees_east"})
        lon[:] = np.linspace(0.0, 360.0, grid.nx, endpoint=False)
        lat = ds.createVariable("lat", "f4", ("lat",))
        lat.setncatts({"standard_name": "latitude", "units": "degrees_north"})
        lat[:] = np.linspace(90.0, -90.0, grid.ny)
        for name in INCREMENT_3D:
            var = ds.createVariable(name, "f4", ("lev", "lat", "lon"), chunksizes=(1, grid.ny, grid.nx))
            var.setncatts({"long_name": f"{name} increment", "units": "none"})
            _fill_levels(var, ctx, (ctx.seed, ctx.cycle, name), grid.ny, grid.nx, grid.levels, 0.0, 1.0, np.float32, leading=0)


def write_bytes(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """Binary observation files (BUFR stand-ins) of a given size, in chunks."""
    remaining = spec.param("bytes")
    rng = np.random.default_rng(seed_for(ctx.seed, ctx.cycle, spec.path))
    with open(path, "wb") as handle:
        while remaining > 0:
            size = min(remaining, CHUNK_BYTES)
            t0 = time.perf_counter()
            chunk = rng.bytes(size)
            ctx.generation.seconds += time.perf_counter() - t0
            handle.write(chunk)
            remaining -= size


def write_text_table(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    rng = np.random.default_rng(seed_for(ctx.seed, ctx.cycle, spec.path))
    rows = rng.standard_normal((spec.param("rows", 100), 6))
    np.savetxt(path, rows, fmt="%14.6e")


def write_log(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    path.write_text(f"completed fhour={spec.param('fhour', 0):.3f} cycle={ctx.cycle} resolution={ctx.grid.resolution}\n")


def write_coupler(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    when = parse_cycle(ctx.cycle)
    path.write_text(
        "     2        (Calendar: no_calendar=0, thirty_day_months=1, julian=2, gregorian=3, noleap=4)\n"
        f"  {when:%Y %-m %-d %-H} 0 0        Model start time:   year, month, day, hour, minute, second\n"
        f"  {when:%Y %-m %-d %-H} 0 0        Current model time: year, month, day, hour, minute, second\n"
    )


def _grib_fields(kind: str, count: int | None) -> list[tuple]:
    """(index name, discipline, category, number, level type, level) of every message of a product."""
    upper = [(*param, 100, level) for level in PRESSURE_LEVELS_HPA for param in GRIB_PARAMETERS]
    surface_count = MASTER_SURFACE_FIELDS if kind == "grib_master" else count
    if kind == "grib_pgrb2":
        upper, surface_count = upper[:count], max(0, count - len(upper))
    elif kind == "grib_sflux":
        upper = []
    surface = [(*GRIB_SURFACE_PARAMETERS[i % len(GRIB_SURFACE_PARAMETERS)], 1, 0) for i in range(surface_count)]
    return upper + surface


def _grib_shape(spec: FileSpec, grid: Grid) -> tuple[int, int]:
    """(Ni, Nj): the fixed product grids, or the model's 4N x 2N Gaussian grid for master and sflux."""
    if spec.kind in ("grib_pgrb2", "grib_index"):
        return PRODUCT_GRIDS[spec.param("grid")]
    return grid.nx, grid.ny


def write_grib(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """A GRIB2 product written by ecCodes, one field at a time, simple packing.

    Simple packing's size does not depend on the values, so every field is one smooth base plane
    scaled and shifted (cheap), instead of a plane of its own.
    """
    import eccodes

    ni, nj = _grib_shape(spec, ctx.grid)
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
        base = ctx.plane(seed_for(ctx.seed, ctx.cycle, spec.path), nj, ni, 0.0, 1.0, np.float64).ravel()
        with open(path, "wb") as out:
            for index, (name, discipline, category, number, level_type, level) in enumerate(
                    _grib_fields(spec.kind, spec.param("fields"))):
                for key, value in (("discipline", discipline), ("parameterCategory", category),
                                   ("parameterNumber", number), ("typeOfFirstFixedSurface", level_type),
                                   ("level", level)):
                    eccodes.codes_set(handle, key, value)
                t0 = time.perf_counter()
                values = base * (10.0 + index % 7) + 200.0 + index
                ctx.generation.seconds += time.perf_counter() - t0
                eccodes.codes_set_values(handle, values)
                out.write(eccodes.codes_get_message(handle))
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
    fields = _grib_fields("grib_pgrb2", spec.param("fields"))
    lines = []
    for number, (offset, (name, *_, level_type, level)) in enumerate(zip(_grib_message_offsets(grib), fields), 1):
        lines.append(f"{number}:{offset}:d={ctx.cycle}:{name}:{f'{level} mb' if level_type == 100 else 'surface'}:{when}:\n")
    path.write_text("".join(lines))


WRITERS = {
    "atm_history": write_atm_history,
    "sfc_history": write_sfc_history,
    **{kind: write_tile_restart for kind in TILE_LAYOUTS},
    "fv_core_axes": write_fv_core_axes,
    "increment": write_increment,
    "dtfanl": write_dtfanl,
    "grib_master": write_grib,
    "grib_sflux": write_grib,
    "grib_pgrb2": write_grib,
    "grib_index": write_grib_index,
    "bytes": write_bytes,
    "text_table": write_text_table,
    "log": write_log,
    "coupler": write_coupler,
}
NETCDF_KINDS = {"atm_history", "sfc_history", "fv_core_axes", "increment", "dtfanl", *TILE_LAYOUTS}


def write_file(dest: Path, spec: FileSpec, ctx: WriteContext) -> tuple[int, float]:
    """Write one file of the inventory under ``dest``, landing it atomically.

    Returns its size and the seconds spent generating its synthetic data (not I/O).
    """
    ctx.generation.take()
    with landing(dest) as tmp:
        WRITERS[spec.kind](tmp, spec, ctx)
    return dest.stat().st_size, ctx.generation.take()


def read_file(path: Path, kind: str) -> int:
    """Read a file as the consuming job would: netCDF variables plane by plane, others in chunks."""
    if kind in NETCDF_KINDS:
        with netCDF4.Dataset(path, "r") as ds:
            for var in ds.variables.values():
                if var.ndim >= 3:
                    for index in np.ndindex(*var.shape[:-2]):
                        var[index]
                else:
                    var[:]
    else:  # GRIB, BUFR and text: the bytes as they are
        with open(path, "rb", buffering=0) as handle:
            while handle.read(CHUNK_BYTES):
                pass
    return path.stat().st_size


NETCDF_FILE_OVERHEAD_BYTES = 16 * 1024  # HDF5 superblock and root group
NETCDF_VARIABLE_OVERHEAD_BYTES = 4 * 1024  # object header, attributes and chunk index of a data variable
NETCDF_COORDINATE_OVERHEAD_BYTES = 512  # a small contiguous coordinate variable


def compressed_history_fraction(n: int, kind: str = "atm_history") -> float:
    """Compressed over raw size of the synthetic history (zlib 1, BitRound to 5 bits), by grid.

    Measured on atmf files: 0.220 at C48 L127, 0.203 at C768 L8 (about 0.195 at L127; the
    operational C768 file is 6.7 of 33 GB, 0.20). sfcf files are compressed losslessly: 0.882 at
    C48, 0.806 at C768. Finer grids are smoother per point, so ratios fall with N.
    """
    import math

    doublings = math.log2(n / 48)
    return 0.220 - 0.006 * doublings if kind == "atm_history" else 0.882 - 0.019 * doublings


def _tile_variable_values(shape: str, n: int, levels: int) -> int:
    return {"3d": levels * n * n, "3d_u": levels * (n + 1) * n, "3d_v": levels * n * (n + 1), "2d": n * n,
            "soil": SOIL_LEVELS * n * n}[shape]


def expected_bytes(spec: FileSpec, grid: Grid, compression: Compression = Compression()) -> int:
    """The size a file of the inventory will have: near exact for raw data, an estimate when compressed."""
    n, nx, ny, levels = grid.n, grid.nx, grid.ny, grid.levels
    plane = nx * ny * 4
    history = compressed_history_fraction(n, spec.kind) if compression.zlib_level > 0 else 1.0
    if spec.kind in TILE_LAYOUTS:
        layout = TILE_LAYOUTS[spec.kind]
        data, variables, coordinates = 8 * sum(_tile_variable_values(shape, n, levels) for _, shape in layout), len(layout), 6
    elif spec.kind in ("grib_master", "grib_sflux", "grib_pgrb2"):
        ni, nj = _grib_shape(spec, grid)
        messages = len(_grib_fields(spec.kind, spec.param("fields")))
        return messages * (GRIB_MESSAGE_OVERHEAD_BYTES + -(-ni * nj * GRIB_BITS_PER_VALUE // 8))
    elif spec.kind == "grib_index":
        return len(_grib_fields("grib_pgrb2", spec.param("fields"))) * 48
    else:
        data, variables, coordinates = {  # kind: (data bytes, data variables, coordinate variables)
            "atm_history": ((len(ATM_3D) * levels + len(ATM_2D)) * plane * history, len(ATM_3D) + len(ATM_2D), 4),
            "sfc_history": (len(SFC_2D) * plane * history, len(SFC_2D), 3),
            "fv_core_axes": (2 * 8 * (levels + 1), 0, 0),
            "increment": (len(INCREMENT_3D) * levels * plane, len(INCREMENT_3D), 2),
            "dtfanl": (len(DTFANL_2D) * plane, len(DTFANL_2D), 3),
            "bytes": (spec.param("bytes", 0), 0, 0),
            "text_table": (spec.param("rows", 100) * 90, 0, 0),
            "log": (60, 0, 0),
            "coupler": (260, 0, 0),
        }[spec.kind]
    if spec.kind not in NETCDF_KINDS:
        return int(data)
    return int(data) + NETCDF_FILE_OVERHEAD_BYTES + variables * NETCDF_VARIABLE_OVERHEAD_BYTES + (
        coordinates * NETCDF_COORDINATE_OVERHEAD_BYTES)
