"""The netCDF files' layouts: what each netCDF kind holds (dimensions, coordinates, attributes, fields).

A layout is enough to write the file whole, or cut to a band of rows (an MPI rank's piece); the
data are seeded synthetic fields, made per transfer. :data:`LAYOUTS` has one builder per kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config.calendar import parse_cycle
from . import fields
from .context import FIELD_NOISE, WriteContext
from .inventory import FileSpec
from .kinds import ATM_2D, ATM_3D, DTFANL_2D, INCREMENT_3D, SFC_2D, SOIL_LEVELS, TILE_LAYOUTS, Compression


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
class NetcdfLayout:
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

    def piece(self, rows: dict[str, tuple[int, int]], attrs: dict | None = None) -> "NetcdfLayout":
        """The layout of a piece holding global rows ``rows`` of each row dimension."""
        dims = {name: (rows[name][1] - rows[name][0] if name in rows else size) for name, size in self.dims.items()}
        coords = []
        for c in self.coords:
            values = np.asarray(c.values)
            if any(dim in rows for dim in c.dims):
                values = values[tuple(slice(*rows[dim]) if dim in rows else slice(None) for dim in c.dims)]
            coords.append(Coordinate(c.name, c.dtype, c.dims, c.attrs, tuple(values.tolist())))
        cut = NetcdfLayout({**self.attrs, **(attrs or {})}, dims, coords, self.fields, dict(rows))
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


def layout_atm_history(spec: FileSpec, ctx: WriteContext) -> NetcdfLayout:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    dims, coords = _gaussian_axes(grid.ny, grid.nx, grid.levels)
    key = (ctx.seed, ctx.cycle, fhour, *_member(spec))
    fields_ = (_history_fields(ATM_3D, ("time", "pfull", "grid_yt", "grid_xt"), key, ctx.compression)
               + _history_fields(ATM_2D, ("time", "grid_yt", "grid_xt"), key, ctx.compression.lossless()))
    return NetcdfLayout(_global_attributes("GDAS-like 3-D atmospheric history", ctx), {"time": None, **dims},
                  [_time_axis(ctx, fhour), *coords], fields_)


def layout_sfc_history(spec: FileSpec, ctx: WriteContext) -> NetcdfLayout:
    grid, fhour = ctx.grid, spec.param("fhour", 0)
    dims, coords = _gaussian_axes(grid.ny, grid.nx, None)
    # The model quantizes only 3-D fields: surface fields are compressed losslessly.
    fields_ = _history_fields(SFC_2D, ("time", "grid_yt", "grid_xt"), (ctx.seed, ctx.cycle, fhour, *_member(spec)),
                              ctx.compression.lossless())
    return NetcdfLayout(_global_attributes("GDAS-like surface history", ctx), {"time": None, **dims},
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


def layout_tile_restart(spec: FileSpec, ctx: WriteContext) -> NetcdfLayout:
    """One tile of a restart kind (fv_core.res, fv_tracer.res, sfc_data, ...), double precision. The tile is in
    the file's name only, as FV3 names them: the six tiles of a kind have one structure (h5chunks.FileTemplate)."""
    dims, coords, shapes = _tile_axes(ctx.grid.n, ctx.grid.levels)
    fields_ = [Field(name, "f8", shapes[shape], _attrs(long_name=name, units="none"),
                     (ctx.seed, ctx.cycle, spec.path, name), 1.0, 10.0) for name, shape in TILE_LAYOUTS[spec.kind]]
    return NetcdfLayout(_global_attributes(f"FV3 {spec.kind} restart", ctx), dims, coords, fields_)


def layout_dtfanl(spec: FileSpec, ctx: WriteContext) -> NetcdfLayout:
    """The NSST foundation-temperature analysis on the Gaussian grid."""
    grid = ctx.grid
    dims, coords = _gaussian_axes(grid.ny, grid.nx, None)
    fields_ = _history_fields([(name, "K", "", 0.0, 1.0) for name in DTFANL_2D], ("time", "grid_yt", "grid_xt"),
                              (ctx.seed, ctx.cycle, 0), ctx.compression)
    return NetcdfLayout(_global_attributes("NSST foundation temperature analysis", ctx), {"time": None, **dims},
                  [_time_axis(ctx, 0), *coords], fields_)


def layout_increment(spec: FileSpec, ctx: WriteContext) -> NetcdfLayout:
    grid = ctx.grid
    coords = [
        Coordinate("lon", "f4", ("lon",), _attrs(standard_name="longitude", units="degrees_east"),
                   tuple(np.linspace(0.0, 360.0, grid.nx, endpoint=False, dtype=np.float32).tolist())),
        Coordinate("lat", "f4", ("lat",), _attrs(standard_name="latitude", units="degrees_north"),
                   tuple(np.linspace(90.0, -90.0, grid.ny, dtype=np.float32).tolist())),
    ]
    fields_ = [Field(name, "f4", ("lev", "lat", "lon"), _attrs(long_name=f"{name} increment", units="none"),
                     (ctx.seed, ctx.cycle, name), 0.0, 1.0) for name in INCREMENT_3D]
    return NetcdfLayout(_global_attributes("GSI analysis increment", ctx),
                  {"lon": grid.nx, "lat": grid.ny, "lev": grid.levels}, coords, fields_)


def layout_fv_core_axes(spec: FileSpec, ctx: WriteContext) -> NetcdfLayout:
    """fv_core.res.nc: the hybrid vertical coordinate (ak, bk): coordinates only, no synthetic field."""
    levels = ctx.grid.levels
    coords = [Coordinate(name, "f8", ("Time", "xaxis_1"), _attrs(long_name=name, units="Pa" if name == "ak" else "none"),
                         tuple(values.tolist()))
              for name, values in (("ak", np.linspace(0.0, 5000.0, levels + 1)), ("bk", np.linspace(0.0, 1.0, levels + 1)))]
    return NetcdfLayout(_global_attributes("FV3 vertical coordinate", ctx), {"xaxis_1": levels + 1, "Time": None},
                        coords, [])


LAYOUTS = {
    "atm_history": layout_atm_history,
    "sfc_history": layout_sfc_history,
    **{kind: layout_tile_restart for kind in TILE_LAYOUTS},
    "fv_core_axes": layout_fv_core_axes,
    "increment": layout_increment,
    "dtfanl": layout_dtfanl,
}
