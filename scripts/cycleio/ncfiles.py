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
from .fields import level_profile, seed_for, smooth_plane
from .fsutil import CHUNK_BYTES, landing
from .grid import Grid
from .inventory import FileSpec

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
SFC_2D = tuple(
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
CORE_3D = ("u", "v", "W", "DZ", "T", "delp", "ua", "va")
SFC_DATA_2D = tuple(f"sfc{index:02d}" for index in range(40))
INCREMENT_3D = ("u_inc", "v_inc", "delp_inc", "delz_inc", "T_inc", "sphum_inc", "liq_wat_inc", "o3mr_inc", "icmr_inc")
PRODUCT_VARIABLES = ATM_3D[:6]
PRODUCT_NX, PRODUCT_NY = 360, 181


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

    def plane(self, key: int, ny: int, nx: int, mean: float, spread: float, dtype, noise: float = 0.01):
        t0 = time.perf_counter()
        plane = smooth_plane(key, ny, nx, mean, spread, noise, dtype)
        self.generation.seconds += time.perf_counter() - t0
        return plane


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
            _fill_levels(var, ctx, (ctx.seed, ctx.cycle, fhour, name), grid.ny, grid.nx, grid.levels, mean, spread, np.float32)
        _write_planes(ds, ATM_2D, ctx, fhour, grid.ny, grid.nx)


def _write_planes(ds, variables, ctx: WriteContext, fhour: int, ny: int, nx: int) -> None:
    for name, units, standard_name, mean, spread in variables:
        var = ds.createVariable(
            name, "f4", ("time", "grid_yt", "grid_xt"), chunksizes=(1, ny, nx), **ctx.compression.variable_kwargs()
        )
        var.setncatts({"units": units, "long_name": name, **({"standard_name": standard_name} if standard_name else {})})
        var[0, :, :] = ctx.plane(seed_for(ctx.seed, ctx.cycle, fhour, name), ny, nx, mean, spread, np.float32)


def write_sfc_history(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "GDAS-like surface history", ctx)
        _time_axis(ds, ctx, fhour)
        _gaussian_axes(ds, grid.ny, grid.nx, None)
        _write_planes(ds, SFC_2D, ctx, fhour, grid.ny, grid.nx)


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


def write_fv_core(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    n, levels, tile = ctx.grid.n, ctx.grid.levels, spec.param("tile")
    shapes = {"u": ("yaxis_1", "xaxis_1"), "v": ("yaxis_2", "xaxis_2")}
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, f"FV3 dynamical core restart, tile {tile}", ctx)
        _tile_axes(ds, n, levels)
        for name in CORE_3D:
            ydim, xdim = shapes.get(name, ("yaxis_2", "xaxis_1"))
            ny, nx = len(ds.dimensions[ydim]), len(ds.dimensions[xdim])
            var = ds.createVariable(name, "f8", ("Time", "zaxis_1", ydim, xdim), chunksizes=(1, 1, ny, nx))
            var.setncatts({"long_name": name, "units": "none"})
            _fill_levels(var, ctx, (ctx.seed, ctx.cycle, spec.path, name), ny, nx, levels, 1.0, 10.0, np.float64)
        phis = ds.createVariable("phis", "f8", ("Time", "yaxis_2", "xaxis_1"))
        phis.setncatts({"long_name": "phis", "units": "none"})
        phis[0] = ctx.plane(seed_for(ctx.seed, spec.path, "phis"), n, n, 5000.0, 20000.0, np.float64)


def write_sfc_data(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    n, tile = ctx.grid.n, spec.param("tile")
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, f"FV3 surface restart, tile {tile}", ctx)
        _tile_axes(ds, n, None)
        for name in SFC_DATA_2D:
            var = ds.createVariable(name, "f8", ("Time", "yaxis_2", "xaxis_1"))
            var.setncatts({"long_name": name, "units": "none"})
            var[0] = ctx.plane(seed_for(ctx.seed, ctx.cycle, spec.path, name), n, n, 1.0, 2.0, np.float64)


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


def write_product(path: Path, spec: FileSpec, ctx: WriteContext) -> None:
    """A 1-degree product of the history hour (a netCDF stand-in for the GRIB2 products)."""
    fhour, levels = spec.param("fhour", 0), min(ctx.grid.levels, 41)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        _global_attributes(ds, "GDAS-like 1-degree product", ctx)
        _time_axis(ds, ctx, fhour)
        _gaussian_axes(ds, PRODUCT_NY, PRODUCT_NX, levels)
        for name, units, standard_name, mean, spread in PRODUCT_VARIABLES:
            var = ds.createVariable(
                name, "f4", ("time", "pfull", "grid_yt", "grid_xt"), chunksizes=(1, 1, PRODUCT_NY, PRODUCT_NX),
                compression="zlib", complevel=1,
            )
            var.setncatts({"units": units, "long_name": name, **({"standard_name": standard_name} if standard_name else {})})
            _fill_levels(var, ctx, (ctx.seed, ctx.cycle, fhour, "product", name), PRODUCT_NY, PRODUCT_NX, levels, mean, spread, np.float32)


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


WRITERS = {
    "atm_history": write_atm_history,
    "sfc_history": write_sfc_history,
    "fv_core.res": write_fv_core,
    "sfc_data": write_sfc_data,
    "increment": write_increment,
    "product": write_product,
    "bufr": write_bytes,
    "text_table": write_text_table,
    "log": write_log,
    "coupler": write_coupler,
}
NETCDF_KINDS = {"atm_history", "sfc_history", "fv_core.res", "sfc_data", "increment", "product"}


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
    else:
        with open(path, "rb", buffering=0) as handle:
            while handle.read(CHUNK_BYTES):
                pass
    return path.stat().st_size


NETCDF_FILE_OVERHEAD_BYTES = 16 * 1024  # HDF5 superblock and root group
NETCDF_VARIABLE_OVERHEAD_BYTES = 4 * 1024  # object header, attributes and chunk index per variable
# Compressed over raw size, measured on the synthetic fields at C48 L127 (tests/test_surrogates.py
# keeps it true): history with zlib 1 and BitRound to 5 bits (operational C768: 6.7 of 33 GB, 0.2);
# the 1-degree products, written with zlib 1 and no rounding.
COMPRESSED_HISTORY_FRACTION = 0.17
PRODUCT_FRACTION = 0.71


def expected_bytes(spec: FileSpec, grid: Grid, compression: Compression = Compression()) -> int:
    """The size a file of the inventory will have: near exact for raw data, an estimate when compressed."""
    n, nx, ny, levels = grid.n, grid.nx, grid.ny, grid.levels
    plane = nx * ny * 4
    history = COMPRESSED_HISTORY_FRACTION if compression.zlib_level > 0 else 1.0
    sizes = {  # kind: (data bytes, number of variables including coordinates)
        "atm_history": ((len(ATM_3D) * levels + len(ATM_2D)) * plane * history, len(ATM_3D) + len(ATM_2D) + 4),
        "sfc_history": (len(SFC_2D) * plane * history, len(SFC_2D) + 3),
        "fv_core.res": (8 * levels * (len(CORE_3D) * n * n + 2 * n) + 8 * n * n, len(CORE_3D) + 7),
        "sfc_data": (len(SFC_DATA_2D) * 8 * n * n, len(SFC_DATA_2D) + 5),
        "increment": (len(INCREMENT_3D) * levels * plane, len(INCREMENT_3D) + 2),
        "product": (len(PRODUCT_VARIABLES) * min(levels, 41) * PRODUCT_NX * PRODUCT_NY * 4 * PRODUCT_FRACTION,
                    len(PRODUCT_VARIABLES) + 4),
        "bufr": (spec.param("bytes"), 0),
        "text_table": (spec.param("rows", 100) * 90, 0),
        "log": (60, 0),
        "coupler": (260, 0),
    }
    data, variables = sizes[spec.kind]
    overhead = NETCDF_FILE_OVERHEAD_BYTES + variables * NETCDF_VARIABLE_OVERHEAD_BYTES if spec.kind in NETCDF_KINDS else 0
    return int(data) + overhead
