"""The file kinds of the surrogates: what each holds and how big it is, as plain arithmetic.

The variables of the history, increment and restart files, the GRIB2 products' parameters and
grids, the history's compression, and :func:`expected_bytes` (the size a file of the inventory will
have). No netCDF4, h5py or eccodes here: the workflow plans and checks a study with this module at
DAG time; writers.py and readers.py write and read the files.
"""

from __future__ import annotations

import math
from functools import lru_cache

from ..config.forecast import Compression
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


def grib_fields(kind: str, count: int | None) -> list[tuple]:
    """(index name, discipline, category, number, level type, level) of every message of a product."""
    upper = [(*param, 100, level) for level in PRESSURE_LEVELS_HPA for param in GRIB_PARAMETERS]
    surface_count = MASTER_SURFACE_FIELDS if kind == "grib_master" else count
    if kind == "grib_pgrb2":
        upper, surface_count = upper[:count], max(0, count - len(upper))
    elif kind == "grib_sflux":
        upper = []
    surface = [(*GRIB_SURFACE_PARAMETERS[i % len(GRIB_SURFACE_PARAMETERS)], 1, 0) for i in range(surface_count)]
    return upper + surface


def grib_shape(spec: FileSpec, grid: Grid) -> tuple[int, int]:
    """(Ni, Nj): the fixed product grids, or the model's 4N x 2N Gaussian grid for master and sflux."""
    if spec.kind in ("grib_pgrb2", "grib_index"):
        return PRODUCT_GRIDS[spec.param("grid")]
    return grid.nx, grid.ny


# Kinds written as netCDF-4 (nclayout.LAYOUTS has a layout for each).
NETCDF_KINDS = frozenset({"atm_history", "sfc_history", *TILE_LAYOUTS, "fv_core_axes", "increment", "dtfanl"})
GRIB_KINDS = frozenset({"grib_master", "grib_sflux", "grib_pgrb2", "grib_index"})
# Every kind of file the inventory names: writers.WRITERS writes each, expected_bytes sizes each.
FILE_KINDS = NETCDF_KINDS | GRIB_KINDS | {"bytes", "text_table", "log", "coupler"}
NETCDF_FILE_OVERHEAD_BYTES = 16 * 1024  # HDF5 superblock and root group
NETCDF_VARIABLE_OVERHEAD_BYTES = 4 * 1024  # object header, attributes and chunk index of a data variable
NETCDF_COORDINATE_OVERHEAD_BYTES = 512  # a small contiguous coordinate variable


def compressed_history_fraction(n: int, kind: str = "atm_history") -> float:
    """Compressed over raw size of the synthetic history (zlib 1, BitRound to 5 bits), by grid.

    Measured on atmf files: 0.220 at C48 L127, 0.203 at C768 L8 (about 0.195 at L127; the
    operational C768 file is 6.7 of 33 GB, 0.20). sfcf files are compressed losslessly: 0.882 at
    C48, 0.806 at C768. Finer grids are smoother per point, so ratios fall with N.
    """
    doublings = math.log2(n / 48)
    return 0.220 - 0.006 * doublings if kind == "atm_history" else 0.882 - 0.019 * doublings


def _tile_variable_values(shape: str, n: int, levels: int) -> int:
    return {"3d": levels * n * n, "3d_u": levels * (n + 1) * n, "3d_v": levels * n * (n + 1), "2d": n * n,
            "soil": SOIL_LEVELS * n * n}[shape]


# A study's preflight sizes every file of every cycle (a month: 130,000 files at DAG time): the sums over
# a kind's variables are made once per grid.
@lru_cache(maxsize=None)
def _tile_data_bytes(kind: str, n: int, levels: int) -> int:
    return 8 * sum(_tile_variable_values(shape, n, levels) for _, shape in TILE_LAYOUTS[kind])


@lru_cache(maxsize=None)
def _grib_messages(kind: str, count: int | None) -> int:
    return len(grib_fields(kind, count))


def expected_bytes(spec: FileSpec, grid: Grid, compression: Compression = Compression()) -> int:
    """The size a file of the inventory will have: near exact for raw data, an estimate when compressed."""
    n, nx, ny, levels = grid.n, grid.nx, grid.ny, grid.levels
    plane = nx * ny * 4
    history = compressed_history_fraction(n, spec.kind) if compression.zlib_level > 0 else 1.0
    if spec.kind in TILE_LAYOUTS:
        layout = TILE_LAYOUTS[spec.kind]
        data, variables, coordinates = _tile_data_bytes(spec.kind, n, levels), len(layout), 6
    elif spec.kind in ("grib_master", "grib_sflux", "grib_pgrb2"):
        ni, nj = grib_shape(spec, grid)
        messages = _grib_messages(spec.kind, spec.param("fields"))
        return messages * (GRIB_MESSAGE_OVERHEAD_BYTES + -(-ni * nj * GRIB_BITS_PER_VALUE // 8))
    elif spec.kind == "grib_index":
        return _grib_messages("grib_pgrb2", spec.param("fields")) * 48
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
