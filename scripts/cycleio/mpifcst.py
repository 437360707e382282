"""The forecast's output as an MPI program: history and restart writes under four write strategies.

The fcst job (jobs.py) calls :func:`run_forecast_mpi`, which starts this module under the study's
launcher (``mpiexec -n {ntasks}``, ``srun -n {ntasks}``) as ``python -m cycleio.mpifcst rank --spec
JOB.json``, waits for it with a timeout, and returns the records the ranks measured. Rank 0 writes
them as JSON lines; the parent adds them to the job's records.

Decomposition (what each compute rank holds, as the model's domain decomposition):
- the 4N x 2N Gaussian history grid is split by rows into one block per compute rank;
- each of the six N x N tiles is split by rows into k blocks (FMS layout 1 x k): with a multiple of
  six compute ranks each tile gets its own k = ranks/6 ranks, as in the model; with fewer (the model
  needs at least six) every tile is split over all compute ranks (k = ranks).
What a file holds comes from its ncfiles writer itself: the writer runs once against a recording
stand-in for ``netCDF4.Dataset`` with a context whose ``plane(...)`` returns a placeholder, which
gives the file's dimensions, variables, attributes, encodings and, for every plane, the
``ctx.plane`` call that makes it. Any rank can then replay the file whole or cut to its rows, so every
strategy writes the same data as the in-process writer and follows ncfiles when it changes. Each
compute rank makes the full seeded planes of its blocks and keeps its rows (making data is timed
apart, op ``generate``). Files the recording cannot split by rows (logs, coupler.res, fv_core.res.nc,
or any writer that does something else) are written whole by one rank with their ncfiles writer.

Strategies (``ArmSettings.strategy``), for every output file of the hour (history and restart):
- ``serial``: planes are gathered to rank 0 (MPI_Igatherv), which writes them; all compute ranks
  wait until the hour is on storage.
- ``per_rank``: each rank writes its own block of each file as a split file named like FMS's
  io_layout files (``gdas.t06z.atmf003.nc.0000``, ``fv_core.res.tile1.nc.0001``); a file held by one
  rank (one compute rank, or a tile on its own rank) is written whole under its name. The downstream
  steps read the inventory's names, so the pieces are always combined (mppnccombine-like) into
  them: after each hour while the compute ranks wait (``combine_per_rank: false``), or all at the end
  of the forecast (``combine_per_rank: true``).
- ``quilt``: ``write_groups`` x ``write_tasks_per_group`` dedicated writer ranks. Output hour i goes
  to group i mod write_groups; file j of the hour to task j mod write_tasks_per_group. Compute ranks
  hand their blocks over with synchronous sends (MPI_Issend) and go on as soon as the group has
  taken them; a group still writing an earlier hour has not posted its receives, so the hand-off
  blocks, as in the model.
- ``diskless``: as serial, but rank 0 builds each netCDF file in memory (``diskless=True,
  persist=True``) and writes it at close.

Records (one per event, ``rank`` = MPI rank, ``nranks`` = ranks of the program):
- ``write``: a writer's time in file I/O for one file or piece (bytes = its size on storage);
- ``combine``: making an inventory file from its pieces (reads the pieces, writes the file);
- ``write_effective``: per compute rank and output hour, the time the rank was kept from computing by
  the hour's output (gathers, writes, hand-off and waits, not the data generation); ``file`` is the
  hour (``f003``), ``bytes`` the data the rank handed over or wrote;
- ``write_final``: the un-overlapped end: from the start of the last hour's output until every file
  of the forecast is on storage (the last hand-off plus the writers' drain, deferred combines);
- ``compute`` (the stand-in, per compute rank) and ``generate``.

A rank that fails writes its traceback beside the spec and calls MPI_Abort, so the job fails with
that rank's error, never hangs; the parent also bounds the run with a timeout. Long waits poll
nonblocking requests with short sleeps, so oversubscribed runs (4 ranks on 2 cores) do not burn the
cores that the writing ranks need (MPICH's blocking calls busy-poll).

Test-only: ``CYCLEIO_TEST_FAIL_RANK=N`` makes rank N raise an error when it first writes a file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import netCDF4
import numpy as np

from .fsutil import landing
from .grid import Grid
from .inventory import FileSpec
from . import ncfiles
from .ncfiles import WRITERS, Compression, WriteContext, expected_bytes

log = logging.getLogger("cycleio")

STRATEGIES = ("serial", "per_rank", "quilt", "diskless")
WRITE_COMPONENT_DEFAULTS = {"ranks": 2, "write_groups": 1, "write_tasks_per_group": 1, "combine_per_rank": False}
FAIL_RANK_VARIABLE = "CYCLEIO_TEST_FAIL_RANK"
TIMEOUT_VARIABLE = "CYCLEIO_MPI_TIMEOUT_S"
SHM_DIR = Path("/dev/shm")


class ForecastError(RuntimeError):
    """The MPI forecast failed or timed out; the message names the rank and its error."""


# --------------------------------------------------------------------------- layout and plans


@dataclass(frozen=True)
class Layout:
    """Ranks of the forecast program: compute ranks first, then the quilt write groups."""

    strategy: str
    compute: int = 2
    write_groups: int = 1
    tasks_per_group: int = 1
    combine_at_end: bool = False

    @classmethod
    def from_settings(cls, strategy: str, write_component: dict) -> "Layout":
        if strategy not in STRATEGIES:
            raise ForecastError(f"write strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
        wc = {**WRITE_COMPONENT_DEFAULTS, **(write_component or {})}
        for key in ("ranks", "write_groups", "write_tasks_per_group"):
            if int(wc[key]) < 1:
                raise ForecastError(f"write_component.{key} must be at least 1, got {wc[key]}")
        return cls(strategy, int(wc["ranks"]), int(wc["write_groups"]), int(wc["write_tasks_per_group"]),
                   bool(wc["combine_per_rank"]))

    @property
    def writers(self) -> int:
        return self.write_groups * self.tasks_per_group if self.strategy == "quilt" else 0

    @property
    def ntasks(self) -> int:
        return self.compute + self.writers

    def writer_rank(self, group: int, task: int) -> int:
        return self.compute + group * self.tasks_per_group + task

    def describe(self) -> str:
        text = f"{self.strategy}, {self.compute} compute ranks"
        if self.writers:
            text += f" + {self.write_groups} write groups x {self.tasks_per_group} tasks"
        if self.strategy == "per_rank":
            text += ", pieces combined " + ("at the end" if self.combine_at_end else "after each hour")
        return text


def row_bounds(rows: int, parts: int, index: int) -> tuple[int, int]:
    """Rows [start, stop) of block ``index`` when ``rows`` rows are split into ``parts`` blocks."""
    return index * rows // parts, (index + 1) * rows // parts


def tile_blocks(compute: int) -> int:
    """Row blocks per tile: ranks/6 with a multiple of 6 ranks (the model), else every rank on every tile."""
    return compute // 6 if compute >= 6 and compute % 6 == 0 else compute


def tile_owner(tile: int, block: int, compute: int) -> int:
    k = tile_blocks(compute)
    return (tile - 1) * k + block if k != compute else block


@dataclass
class PlanePlan:
    """One ``ctx.plane(...)`` call of an ncfiles writer and where its plane went (``var[index] = plane``)."""

    args: tuple
    kwargs: dict
    index: tuple = ()


@dataclass
class VarPlan:
    """A decomposed variable: its planes, each (ny, nx), split by rows of ``row_dim``."""

    name: str
    dtype: np.dtype
    dims: tuple[str, ...]
    ny: int
    nx: int
    planes: list[PlanePlan] = field(default_factory=list)

    @property
    def row_dim(self) -> str:
        return self.dims[-2]


@dataclass
class Piece:
    """One rank's block of a file: rows [start, stop) of each row dimension."""

    rank: int
    index: int
    rows: dict[str, tuple[int, int]]


@dataclass
class FilePlan:
    """A file as the operations its ncfiles writer made, replayable whole or cut to a piece.

    ``ops`` are ("attrs", dict), ("dim", name, size), ("var", name, dtype, dims, kwargs),
    ("varattrs", name, dict) and ("set", name, index, value), where value is an array (coordinates)
    or a PlanePlan of a decomposed variable. A file without ops is written whole by one rank with its
    ncfiles writer (small files, and any writer the recording does not understand).
    """

    spec: FileSpec
    ops: list = field(default_factory=list)
    variables: list[VarPlan] = field(default_factory=list)
    pieces: list[Piece] = field(default_factory=list)

    @property
    def undecomposed(self) -> bool:
        return not self.variables

    @property
    def split(self) -> bool:
        return len(self.pieces) > 1

    def piece_of(self, rank: int) -> Piece | None:
        return next((piece for piece in self.pieces if piece.rank == rank), None)

    def piece_path(self, workdir: Path, piece: Piece) -> Path:
        return workdir / f"{self.spec.path}.{piece.index:04d}"


class _Unplannable(Exception):
    """The writer did something the recording cannot replay piecewise: write that file whole."""


class _PlanningContext(WriteContext):
    """A WriteContext whose planes are placeholders: records each call instead of making data."""

    def plane(self, *args, **kwargs):
        return PlanePlan(args, kwargs)


class _RecordedDimension:
    def __init__(self, size):
        self.size = size

    def __len__(self) -> int:
        return 1 if self.size is None else self.size  # an unlimited dimension holds the file's one record

    def isunlimited(self) -> bool:
        return self.size is None


class _RecordedVariable:
    def __init__(self, dataset, name, dtype, dims):
        self.dataset, self.name, self.dtype, self.dimensions = dataset, name, np.dtype(dtype), tuple(dims)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(self.dataset.dimensions[dim]) for dim in self.dimensions)

    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    def setncatts(self, attrs: dict) -> None:
        self.dataset.ops.append(("varattrs", self.name, dict(attrs)))

    def setncattr(self, name, value) -> None:
        self.setncatts({name: value})

    def __setitem__(self, index, value) -> None:
        index = index if isinstance(index, tuple) else (index,)
        if not isinstance(value, PlanePlan):
            value = np.array(value)
        self.dataset.ops.append(("set", self.name, index, value))


class _RecordingDataset:
    """Stands in for netCDF4.Dataset while an ncfiles writer runs: records what it creates and writes."""

    def __init__(self, path, mode="r", **kwargs):
        if mode != "w":
            raise _Unplannable(f"mode {mode!r}")
        self.ops: list = []
        self.dimensions: dict[str, _RecordedDimension] = {}
        self.variables: dict[str, _RecordedVariable] = {}
        _RecordingDataset.last = self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def close(self) -> None:
        pass

    def setncatts(self, attrs: dict) -> None:
        self.ops.append(("attrs", dict(attrs)))

    def setncattr(self, name, value) -> None:
        self.setncatts({name: value})

    def createDimension(self, name, size=None):
        self.dimensions[name] = _RecordedDimension(size)
        self.ops.append(("dim", name, size))
        return self.dimensions[name]

    def createVariable(self, name, datatype, dimensions=(), **kwargs):
        self.variables[name] = _RecordedVariable(self, name, datatype, dimensions)
        self.ops.append(("var", name, np.dtype(datatype), tuple(dimensions), dict(kwargs)))
        return self.variables[name]


_RECORDING = threading.Lock()


def _record_writer(spec: FileSpec, ctx: WriteContext) -> list | None:
    """Run the kind's ncfiles writer against the recording stand-in; None if it cannot be recorded."""
    planning = _PlanningContext(ctx.grid, ctx.seed, ctx.cycle, ctx.compression)
    with _RECORDING:
        real, ncfiles.netCDF4 = ncfiles.netCDF4, SimpleNamespace(Dataset=_RecordingDataset)
        _RecordingDataset.last = None
        try:
            ncfiles.WRITERS[spec.kind](Path(spec.path), spec, planning)
        except Exception:  # noqa: BLE001: anything the stand-in cannot do means "write it whole"
            return None
        finally:
            ncfiles.netCDF4 = real
    recorded = _RecordingDataset.last
    return recorded.ops if recorded is not None else None


def _decomposed_variables(ops: list) -> list[VarPlan] | None:
    """The variables written plane by plane from ctx.plane, or None if the file cannot be split by rows."""
    dims = {op[1]: op[2] for op in ops if op[0] == "dim"}
    sizes = {name: 1 if size is None else size for name, size in dims.items()}
    declared = {op[1]: op for op in ops if op[0] == "var"}
    variables: dict[str, VarPlan] = {}
    arrays: dict[str, list] = {}
    for op in ops:
        if op[0] != "set":
            continue
        _, name, index, value = op
        _, _, dtype, var_dims, _ = declared[name]
        if isinstance(value, PlanePlan):
            if len(var_dims) < 2 or name in arrays:
                return None
            ny, nx = sizes[var_dims[-2]], sizes[var_dims[-1]]
            if len(value.args) >= 3 and tuple(value.args[1:3]) != (ny, nx):
                return None  # a plane that does not fill the variable's last two dimensions
            trailing = index[len(var_dims) - 2:]
            if len(index) > len(var_dims) or any(part != slice(None) for part in trailing):
                return None
            value.index = index[:len(var_dims) - 2] or Ellipsis
            var = variables.setdefault(name, VarPlan(name, dtype, var_dims, ny, nx))
            var.planes.append(value)
        else:
            if name in variables:
                return None
            arrays.setdefault(name, []).append(index)
    if not variables:
        return None
    row_dims = {var.row_dim for var in variables.values()}
    for name, indices in arrays.items():  # coordinates along a row dimension must be written whole
        if set(declared[name][3]) & row_dims and any(index not in ((slice(None),), (Ellipsis,)) for index in indices):
            return None
    return list(variables.values())


def file_plan(spec: FileSpec, ctx: WriteContext, compute: int) -> FilePlan:
    """How ``spec`` is written: its recorded operations, decomposed variables and the ranks' pieces.

    Tile files (a ``tile`` parameter) take the tile layout; other gridded files split their rows over
    all compute ranks.
    """
    ops = _record_writer(spec, ctx) if spec.kind in ncfiles.NETCDF_KINDS else None
    variables = _decomposed_variables(ops) if ops else None
    if not variables:
        return FilePlan(spec, pieces=[Piece(0, 0, {})])
    sizes = {op[1]: op[2] for op in ops if op[0] == "dim"}
    row_dims = sorted({var.row_dim for var in variables})
    tile = spec.param("tile")
    if tile is not None:
        k = tile_blocks(compute)
        owners = [(tile_owner(tile, block, compute), block) for block in range(k)]
    else:
        k, owners = compute, [(rank, rank) for rank in range(compute)]
    pieces = [Piece(rank, block, {dim: row_bounds(sizes[dim], k, block) for dim in row_dims}) for rank, block in owners]
    for piece in pieces:
        empty = [dim for dim, (start, stop) in piece.rows.items() if stop <= start]
        if empty:
            raise ForecastError(
                f"write_component.ranks={compute} is too many for {spec.path} at {ctx.grid.resolution}: "
                f"block {piece.index} gets no rows of {empty[0]} ({sizes[empty[0]]} rows); use fewer ranks"
            )
    return FilePlan(spec, ops, variables, pieces)


def check_layout(layout: Layout, grid: Grid) -> None:
    """Refuse a decomposition with empty blocks before starting any rank."""
    if layout.compute > grid.ny:
        raise ForecastError(f"write_component.ranks={layout.compute} is more than the {grid.ny} rows of the "
                            f"{grid.resolution} history grid; use fewer ranks")
    if tile_blocks(layout.compute) > grid.n:
        raise ForecastError(f"write_component.ranks={layout.compute} splits each tile into "
                            f"{tile_blocks(layout.compute)} blocks, more than its {grid.n} rows at {grid.resolution}")


def hour_groups(writes: list[FileSpec]) -> list[tuple[int, list[FileSpec]]]:
    """The forecast's writes grouped by output hour, in the inventory's order (restarts follow their hour)."""
    groups: list[tuple[int, list[FileSpec]]] = []
    for spec in writes:
        hour = spec.param("fhour")
        if hour is not None and (not groups or groups[-1][0] != hour):
            groups.append((hour, []))
        if not groups:
            raise ForecastError(f"the forecast's first output {spec.path} has no forecast hour")
        groups[-1][1].append(spec)
    return groups


# --------------------------------------------------------------------------- netCDF writing


def _replay(ds, plan: FilePlan, source, piece: Piece | None) -> float:
    """Make the file's dimensions, variables and attributes and write its data; return seconds in ``source``."""
    rows = piece.rows if piece is not None else {}
    declared = {op[1]: op[3] for op in plan.ops if op[0] == "var"}
    planes = {id(plane): var for var in plan.variables for plane in var.planes}
    outside = 0.0
    for op in plan.ops:
        kind = op[0]
        if kind == "attrs":
            ds.setncatts(op[1])
        elif kind == "dim":
            _, name, size = op
            if size is not None and name in rows:
                size = rows[name][1] - rows[name][0]
            ds.createDimension(name, size)
        elif kind == "var":
            _, name, dtype, dims, kwargs = op
            kwargs = dict(kwargs)
            if rows and kwargs.get("chunksizes") is not None:
                kwargs["chunksizes"] = [min(chunk, rows[dim][1] - rows[dim][0]) if dim in rows else chunk
                                        for chunk, dim in zip(kwargs["chunksizes"], dims)]
            ds.createVariable(name, dtype, dims, **kwargs)
        elif kind == "varattrs":
            ds.variables[op[1]].setncatts(op[2])
        else:
            _, name, index, value = op
            if isinstance(value, PlanePlan):
                t0 = time.perf_counter()
                data = source(planes[id(value)], value)
                outside += time.perf_counter() - t0
                ds.variables[name][value.index] = data
            elif rows and set(declared[name]) & set(rows):
                ds.variables[name][index] = value[tuple(slice(*rows[dim]) if dim in rows else slice(None)
                                                        for dim in declared[name])]
            else:
                ds.variables[name][index] = value
    if piece is not None:
        ds.setncatts({"cycleio_piece": f"{piece.index} of {len(plan.pieces)}",
                      "cycleio_piece_rows": " ".join(f"{dim}={start}:{stop}" for dim, (start, stop) in rows.items())})
    return outside


def write_dataset(path: Path, plan: FilePlan, source, piece: Piece | None = None, diskless: bool = False,
                  check=None) -> tuple[int, float]:
    """Write a file (or one piece of it) plane by plane; ``source(var, plane)`` gives each plane's data.

    Returns the size and the seconds of file I/O: time spent in ``source`` (making or receiving the
    data) is not counted. The file lands through a temporary name (write, fsync, rename).
    """
    if check:
        check(path)
    t0 = time.perf_counter()
    with landing(path) as tmp:
        ds = netCDF4.Dataset(tmp, "w", format="NETCDF4", diskless=diskless, persist=diskless)
        try:
            outside = _replay(ds, plan, source, piece)
        finally:
            ds.close()
    return path.stat().st_size, time.perf_counter() - t0 - outside


def write_plain(path: Path, spec: FileSpec, ctx: WriteContext, check=None) -> tuple[int, float]:
    """A file written whole by its ncfiles writer (time includes its data generation, which is small)."""
    if check:
        check(path)
    t0 = time.perf_counter()
    with landing(path) as tmp:
        WRITERS[spec.kind](tmp, spec, ctx)
    return path.stat().st_size, time.perf_counter() - t0


def combine_pieces(workdir: Path, plan: FilePlan, check=None) -> tuple[int, float]:
    """Make the inventory's file from its split pieces (read them, write the whole file), then remove them."""
    t0 = time.perf_counter()
    paths = [plan.piece_path(workdir, piece) for piece in plan.pieces]
    pieces = [netCDF4.Dataset(path, "r") for path in paths]
    try:
        for piece in pieces:
            piece.set_auto_mask(False)

        def source(var, plane):
            return np.concatenate([piece[var.name][plane.index] for piece in pieces], axis=0)

        size, _ = write_dataset(workdir / plan.spec.path, plan, source, check=check)
    finally:
        for piece in pieces:
            piece.close()
    for path in paths:
        path.unlink()
    return size, time.perf_counter() - t0


def own_rows(ctx: WriteContext, var: VarPlan, plane: PlanePlan, piece: Piece) -> np.ndarray:
    """This rank's rows of a plane (of the writer's own ctx.plane call), made without the other ranks' rows."""
    start, stop = piece.rows[var.row_dim]
    rows = ctx.plane_rows(start, stop, *plane.args, **plane.kwargs)
    return np.ascontiguousarray(rows, dtype=var.dtype)


# --------------------------------------------------------------------------- the MPI program


def wait_all(requests) -> None:
    """Complete MPI requests; when ranks outnumber cores, without hogging one (spin, then short sleeps).

    With a core per rank, MPI's own blocking wait is used: the sleeps add up to a millisecond per
    message, and the serial strategy sends one message per plane (tens of thousands per forecast).
    """
    from mpi4py import MPI

    requests = [request for request in requests if request is not None]
    if MPI.COMM_WORLD.Get_size() <= (os.cpu_count() or 1):
        MPI.Request.Waitall(requests)
        return
    spins, delay = 0, 5e-5
    while not MPI.Request.Testall(requests):
        spins += 1
        if spins > 2000:
            time.sleep(delay)
            delay = min(delay * 2, 0.002)


class Forecast:
    """One rank of the forecast program."""

    def __init__(self, spec: dict):
        from mpi4py import MPI

        self.world = MPI.COMM_WORLD
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()
        self.layout = Layout.from_settings(spec["strategy"], spec["write_component"])
        if self.size != self.layout.ntasks:
            raise ForecastError(f"the launcher started {self.size} ranks, but {self.layout.describe()} needs "
                                f"{self.layout.ntasks}; does the launcher template pass {{ntasks}}?")
        self.workdir = Path(spec["workdir"])
        self.ctx = WriteContext(Grid(spec["resolution"], spec["levels"]), spec["seed"], spec["cycle"],
                                Compression(**spec["compression"]))
        self.compute_s_per_hour = float(spec["compute_seconds_per_hour"])
        self.compute = time.sleep  # the compute stand-in: sleep, or burn the CPU as a model does
        if spec.get("compute_kind", "sleep") == "burn":
            from .jobs import burn_cpu

            self.compute = burn_cpu
        self.hours = [(hour, [file_plan(FileSpec(path, kind, tuple(tuple(p) for p in params)), self.ctx,
                                        self.layout.compute) for path, kind, params in specs])
                      for hour, specs in spec["hours"]]
        self.is_compute = self.rank < self.layout.compute
        self.compute_comm = self.world.Split(0 if self.is_compute else 1, self.rank)
        fail = os.environ.get(FAIL_RANK_VARIABLE, "")
        self.fail_rank = int(fail) if fail.strip() else None
        self.records: list[dict] = []
        self.deferred: list[FilePlan] = []

    # ---- records and checks

    def record(self, op: str, t_start: float, seconds: float, file: str = "", nbytes: int = 0, n_files: int = 1):
        self.records.append({"op": op, "file": file, "bytes": int(nbytes), "t_start": t_start,
                             "seconds": max(seconds, 0.0), "rank": self.rank, "nranks": self.size,
                             "n_files": n_files})

    def check(self, path: Path) -> None:
        if self.fail_rank == self.rank:
            raise RuntimeError(f"injected failure on rank {self.rank} ({FAIL_RANK_VARIABLE}={self.rank}) "
                               f"while writing {path.name}")

    def write_record(self, op: str, path: Path, t_start: float, size: int, seconds: float):
        self.record(op, t_start, seconds, str(path.relative_to(self.workdir)), size)

    def barrier(self, comm) -> None:
        wait_all([comm.Ibarrier()])

    # ---- the program

    def run(self) -> list[dict]:
        if self.is_compute:
            self.compute_loop()
        else:
            self.writer_loop()
        return self.records

    def compute_loop(self) -> None:
        previous, last = 0, len(self.hours) - 1
        final_start = final_t0 = final_gen = 0.0
        for index, (hour, plans) in enumerate(self.hours):
            if hour > previous:
                seconds = self.compute_s_per_hour * (hour - previous)
                if seconds > 0:
                    t_start, t0 = time.time(), time.perf_counter()
                    self.compute(seconds)
                    self.record("compute", t_start, time.perf_counter() - t0, n_files=0)
                previous = hour
            t_start, t0 = time.time(), time.perf_counter()
            gen0 = self.ctx.generation.seconds
            if index == last:
                final_start, final_t0, final_gen = t_start, t0, gen0
            nbytes = self.output(index, plans)
            generate = self.ctx.generation.seconds - gen0
            self.record("write_effective", t_start, time.perf_counter() - t0 - generate, f"f{hour:03d}", nbytes,
                        n_files=len(plans))
            self.record("generate", t_start, generate, f"f{hour:03d}", n_files=0)
        if self.layout.strategy == "per_rank" and self.layout.combine_at_end:
            self.combine(self.deferred)
        self.barrier(self.world)  # every file of the forecast is on storage
        if self.rank == 0 and self.hours:
            generate = self.ctx.generation.seconds - final_gen
            self.record("write_final", final_start, time.perf_counter() - final_t0 - generate,
                        f"f{self.hours[-1][0]:03d}", n_files=len(self.hours[-1][1]))

    def output(self, index: int, plans: list[FilePlan]) -> int:
        strategy = self.layout.strategy
        if strategy in ("serial", "diskless"):
            nbytes = self.output_serial(plans, diskless=strategy == "diskless")
        elif strategy == "per_rank":
            nbytes = self.output_per_rank(plans)
        else:
            nbytes = self.output_quilt(index, plans)
        return nbytes

    # ---- serial and diskless: gather to rank 0, which writes; everyone waits

    def output_serial(self, plans: list[FilePlan], diskless: bool) -> int:
        comm, nbytes = self.compute_comm, 0
        for plan in plans:
            if plan.undecomposed:
                if self.rank == 0:
                    self.write_undecomposed(plan)
                continue
            piece = plan.piece_of(self.rank)
            counts_rows = {var.name: self._counts(plan, var) for var in plan.variables}

            def gather(var, plane, plan=plan, piece=piece):
                nonlocal nbytes
                rows = own_rows(self.ctx, var, plane, piece) if piece else np.empty((0, var.nx), var.dtype)
                nbytes += rows.nbytes
                counts = counts_rows[var.name]
                recv = None
                if self.rank == 0:
                    full = np.empty((var.ny, var.nx), var.dtype)
                    recv = [full, (counts, np.concatenate(([0], np.cumsum(counts)[:-1])).tolist())]
                wait_all([comm.Igatherv(rows, recv, root=0)])
                return recv[0] if recv else None

            if self.rank == 0:
                path = self.workdir / plan.spec.path
                t_start = time.time()
                size, seconds = write_dataset(path, plan, gather, diskless=diskless, check=self.check)
                self.write_record("write", path, t_start, size, seconds)
            else:
                for var in plan.variables:
                    for plane in var.planes:
                        gather(var, plane)
        self.barrier(comm)  # the hour is on storage: the compute ranks go on
        return nbytes

    def _counts(self, plan: FilePlan, var: VarPlan) -> list[int]:
        counts = [0] * self.layout.compute
        for piece in plan.pieces:
            start, stop = piece.rows[var.row_dim]
            counts[piece.rank] = (stop - start) * var.nx
        return counts

    # ---- per_rank: each rank writes its pieces; combine after the hour or at the end

    def output_per_rank(self, plans: list[FilePlan]) -> int:
        nbytes = 0
        for plan in plans:
            piece = plan.piece_of(self.rank)
            if piece is None:
                continue
            if plan.undecomposed:
                self.write_undecomposed(plan)
                continue
            path = self.workdir / plan.spec.path if not plan.split else plan.piece_path(self.workdir, piece)

            def source(var, plane, piece=piece):
                nonlocal nbytes
                rows = own_rows(self.ctx, var, plane, piece)
                nbytes += rows.nbytes
                return rows

            t_start = time.time()
            size, seconds = write_dataset(path, plan, source, piece=piece if plan.split else None,
                                          check=self.check)
            self.write_record("write", path, t_start, size, seconds)
        split = [plan for plan in plans if plan.split]
        if self.layout.combine_at_end:
            self.deferred += split
        else:
            self.combine(split)
        return nbytes

    def combine(self, plans: list[FilePlan]) -> None:
        """Combine split files, spread over the compute ranks; returns when all are done."""
        if not plans:
            return
        self.barrier(self.compute_comm)  # every piece is on storage
        for index, plan in enumerate(plans):
            if index % self.layout.compute == self.rank:
                path = self.workdir / plan.spec.path
                t_start = time.time()
                size, seconds = combine_pieces(self.workdir, plan, check=self.check)
                self.write_record("combine", path, t_start, size, seconds)
        self.barrier(self.compute_comm)

    # ---- quilt: hand the hour to a write group and go on

    def quilt_assignments(self, index: int, plans: list[FilePlan]) -> list[tuple[FilePlan, int]]:
        group = index % self.layout.write_groups
        return [(plan, self.layout.writer_rank(group, j % self.layout.tasks_per_group)) for j, plan in enumerate(plans)]

    def handoff_items(self, plans: list[FilePlan], source: int) -> list[tuple[FilePlan, VarPlan, int, tuple, int]]:
        """The blocks ``source`` hands to one writer for these files, in message order, with byte offsets.

        Each compute rank sends a writer one message per hour: its blocks packed one after the other
        (file, variable), so the hand-off costs one rendezvous, not one per variable.
        """
        items, offset = [], 0
        for plan in plans:
            for var in plan.variables:
                for number, piece in enumerate(plan.pieces):
                    if piece.rank != source:
                        continue
                    start, stop = piece.rows[var.row_dim]
                    shape = (len(var.planes), stop - start, var.nx)
                    items.append((plan, var, number, shape, offset))
                    offset += int(np.prod(shape)) * var.dtype.itemsize
        return items

    def output_quilt(self, index: int, plans: list[FilePlan]) -> int:
        by_writer: dict[int, list[FilePlan]] = {}
        for plan, writer in self.quilt_assignments(index, plans):
            by_writer.setdefault(writer, []).append(plan)
        requests, buffers, nbytes = [], [], 0
        for writer, mine in by_writer.items():
            items = self.handoff_items(mine, self.rank)
            if not items:
                continue
            _, last_var, _, last_shape, last_offset = items[-1]
            buffer = np.empty(last_offset + int(np.prod(last_shape)) * last_var.dtype.itemsize, np.uint8)
            for plan, var, number, shape, offset in items:
                size = int(np.prod(shape)) * var.dtype.itemsize
                block = buffer[offset:offset + size].view(var.dtype).reshape(shape)
                for i, plane in enumerate(var.planes):
                    block[i] = own_rows(self.ctx, var, plane, plan.pieces[number])
            buffers.append(buffer)
            nbytes += buffer.nbytes
            requests.append(self.world.Issend(buffer, dest=writer, tag=index))
        wait_all(requests)  # returns once the group has taken the data: blocks while it is busy
        return nbytes

    def writer_loop(self) -> None:
        for index, (hour, plans) in enumerate(self.hours):
            mine = [plan for plan, writer in self.quilt_assignments(index, plans) if writer == self.rank]
            if not mine:
                continue
            requests, blocks = [], {}
            for source in range(self.layout.compute):
                items = self.handoff_items(mine, source)
                if not items:
                    continue
                _, last_var, _, last_shape, last_offset = items[-1]
                buffer = np.empty(last_offset + int(np.prod(last_shape)) * last_var.dtype.itemsize, np.uint8)
                requests.append(self.world.Irecv(buffer, source=source, tag=index))
                for plan, var, number, shape, offset in items:
                    size = int(np.prod(shape)) * var.dtype.itemsize
                    blocks[(id(plan), var.name, number)] = buffer[offset:offset + size].view(var.dtype).reshape(shape)
            wait_all(requests)  # the hour's data are here: the compute ranks go on
            for plan in mine:
                if plan.undecomposed:
                    self.write_undecomposed(plan)
                    continue
                position = {id(plane): i for var in plan.variables for i, plane in enumerate(var.planes)}

                def source(var, plane, plan=plan, position=position):
                    i = position[id(plane)]
                    return np.concatenate([blocks[(id(plan), var.name, number)][i]
                                           for number in range(len(plan.pieces))], axis=0)

                path = self.workdir / plan.spec.path
                t_start = time.time()
                size, seconds = write_dataset(path, plan, source, check=self.check)
                self.write_record("write", path, t_start, size, seconds)
            del blocks
        self.barrier(self.world)

    def write_undecomposed(self, plan: FilePlan) -> None:
        path = self.workdir / plan.spec.path
        t_start = time.time()
        size, seconds = write_plain(path, plan.spec, self.ctx, check=self.check)
        self.write_record("write", path, t_start, size, seconds)


def rank_main(spec_path: Path) -> int:
    """Entry point of every rank: run, gather the records to rank 0, which writes them."""
    from mpi4py import MPI

    spec = json.loads(Path(spec_path).read_text())
    rank = MPI.COMM_WORLD.Get_rank()
    try:
        forecast = Forecast(spec)
        records = forecast.run()
        gathered = MPI.COMM_WORLD.gather(records, root=0)
        if rank == 0:
            with landing(spec["records"]) as tmp:
                with open(tmp, "w") as handle:
                    for rank_records in gathered:
                        for record in rank_records:
                            handle.write(json.dumps(record, sort_keys=True) + "\n")
    except BaseException as err:  # noqa: BLE001: any error of any rank must end the whole program
        text = traceback.format_exc()
        error_file = Path(spec["errors"]) / f"rank{rank:05d}.txt"
        try:
            error_file.write_text(f"{type(err).__name__}: {err}\n{text}")
        except OSError:
            pass
        sys.stderr.write(f"cycleio.mpifcst: rank {rank} failed:\n{text}")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    return 0


# --------------------------------------------------------------------------- the parent side


def _launch_command(launcher: str, ntasks: int) -> list[str]:
    try:
        words = shlex.split(launcher.format(ntasks=ntasks))
    except (KeyError, IndexError, ValueError) as err:
        raise ForecastError(f"launcher {launcher!r} is not a valid template with {{ntasks}}: {err}") from None
    if not words:
        raise ForecastError("the launcher template is empty; expected e.g. 'mpiexec -n {ntasks}'")
    found = shutil.which(words[0]) or shutil.which(words[0], path=str(Path(sys.executable).parent))
    if not found:
        raise ForecastError(f"launcher program {words[0]!r} (from launcher {launcher!r}) is not on PATH nor beside "
                            f"{sys.executable}; install an MPI (the mpich wheel) or set `launcher` in the config")
    return [found, *words[1:]]


def default_timeout(settings, writes: list[FileSpec], ctx: WriteContext) -> float:
    """Generous: the compute stand-in, plus the outputs written at 2 MiB/s, plus 10 minutes."""
    if os.environ.get(TIMEOUT_VARIABLE):
        return float(os.environ[TIMEOUT_VARIABLE])
    compute = settings.compute_seconds_per_hour * settings.forecast.forecast_hours
    nbytes = sum(expected_bytes(spec, ctx.grid, ctx.compression) for spec in writes)
    return 600.0 + 2.0 * compute + nbytes / 2**21


def _stop(process: subprocess.Popen) -> None:
    """End the launcher (it ends its ranks); kill it if it does not go."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _mpich_segments() -> set[Path]:
    return set(SHM_DIR.glob("mpich_shm_*")) if SHM_DIR.is_dir() else set()


def _remove_orphaned_segments(before: set[Path]) -> None:
    """MPICH leaves its shared-memory segments in /dev/shm when its ranks are aborted or killed.

    Remove the ones that appeared during this run, are ours, and that no live process maps any more.
    """
    new = _mpich_segments() - before
    if not new:
        return
    mapped: set[Path] = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:
            continue
        mapped.update(path for path in new if str(path) in text)
    for path in new - mapped:
        try:
            if path.stat().st_uid == os.getuid():
                path.unlink()
        except OSError:
            pass


def _failure_message(errors: Path, output: Path, returncode: int, ntasks: int) -> tuple[str, str]:
    """The failing rank's error (first to fail), and its full traceback for the log."""
    files = sorted(errors.glob("rank*.txt"), key=lambda p: p.stat().st_mtime)
    if files:
        text = files[0].read_text()
        rank = int(files[0].stem[4:])
        return f"rank {rank} of {ntasks} failed: {text.splitlines()[0]}", text
    tail = output.read_text(errors="replace")[-3000:] if output.exists() else ""
    return f"the launcher exited with code {returncode} and no rank reported an error: {tail.strip()[-500:]}", tail


def run_forecast_mpi(settings, cycle: str, workdir: Path, writes: list[FileSpec], ctx: WriteContext, *,
                     timeout: float | None = None, label: str = "") -> list[dict]:
    """Run the forecast's writes as an MPI program under the arm's launcher; return its records.

    ``settings`` is the arm's ArmSettings (strategy, launcher, write_component, compute stand-in).
    Each record is a dict of Record fields (op, file, bytes, t_start, seconds, rank, nranks, n_files);
    the caller adds step, phase and tier. Raises ForecastError with the failing rank's error.
    """
    layout = Layout.from_settings(settings.strategy, settings.write_component)
    groups = hour_groups(writes)
    check_layout(layout, ctx.grid)  # here, not on every rank
    command = _launch_command(settings.launcher, layout.ntasks)
    timeout = default_timeout(settings, writes, ctx) if timeout is None else timeout
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".mpifcst.", dir=workdir))
    try:
        (tmp / "errors").mkdir()
        spec = {
            "workdir": str(workdir), "cycle": cycle, "seed": ctx.seed, "resolution": ctx.grid.resolution,
            "levels": ctx.grid.levels, "compression": {"zlib_level": ctx.compression.zlib_level,
                                                       "quantize_nsd": ctx.compression.quantize_nsd},
            "strategy": settings.strategy, "write_component": dict(settings.write_component or {}),
            "compute_seconds_per_hour": settings.compute_seconds_per_hour,
            "compute_kind": getattr(settings, "compute_kind", "sleep"),
            "hours": [[hour, [[s.path, s.kind, [list(p) for p in s.params]] for s in specs]] for hour, specs in groups],
            "records": str(tmp / "records.jsonl"), "errors": str(tmp / "errors"),
        }
        (tmp / "spec.json").write_text(json.dumps(spec))
        argv = [*command, sys.executable, "-m", "cycleio.mpifcst", "rank", "--spec", str(tmp / "spec.json")]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        log.info("%s fcst writes under MPI (%s): %s", label, layout.describe(), shlex.join(argv))
        output = tmp / "launcher.out"
        t0 = time.perf_counter()
        segments = _mpich_segments()
        with open(output, "w") as out:
            process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
            try:
                returncode = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _stop(process)
                _remove_orphaned_segments(segments)
                raise ForecastError(
                    f"{label} the MPI forecast ({layout.describe()}) did not finish within {timeout:.0f} s and was "
                    f"stopped (set {TIMEOUT_VARIABLE} to allow longer); launcher output: "
                    f"{output.read_text(errors='replace')[-1000:].strip()}"
                ) from None
            except BaseException:
                _stop(process)
                raise
        if returncode != 0 or not (tmp / "records.jsonl").exists():
            _remove_orphaned_segments(segments)
            message, details = _failure_message(tmp / "errors", output, returncode, layout.ntasks)
            log.error("%s MPI forecast failed: %s", label, details)
            raise ForecastError(f"{label} MPI forecast ({layout.describe()}) failed: {message}")
        with open(tmp / "records.jsonl") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        chatter = output.read_text(errors="replace").strip()
        if chatter:
            log.info("%s launcher output: %s", label, chatter[-2000:])
        _log_summary(records, label, time.perf_counter() - t0)
        return records
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _union_seconds(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _log_summary(records: list[dict], label: str, wall: float) -> None:
    effective: dict[str, float] = {}
    for record in records:
        if record["op"] == "write_effective":
            effective[record["file"]] = max(effective.get(record["file"], 0.0), record["seconds"])
    writes = [(r["t_start"], r["t_start"] + r["seconds"]) for r in records if r["op"] in ("write", "combine")]
    final = sum(r["seconds"] for r in records if r["op"] == "write_final")
    log.info("%s fcst MPI program %.2f s: effective write %.3f s over %d output hours (slowest compute rank), "
             "actual write %.3f s (writers busy), final un-overlapped write %.3f s",
             label, wall, sum(effective.values()), len(effective), _union_seconds(writes), final)


def forecast_ntasks(settings) -> int:
    """Ranks the forecast job starts (compute plus quilt writers): for a scheduler's task request."""
    return Layout.from_settings(settings.strategy, settings.write_component).ntasks


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cycleio.mpifcst", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", help="write the log to this file")
    sub = parser.add_subparsers(dest="command", required=True)
    rank = sub.add_parser("rank", help="one rank of the forecast's MPI program (started by the launcher)")
    rank.add_argument("--spec", required=True, help="the job's JSON spec written by run_forecast_mpi")
    figure = sub.add_parser("write-figure", help="effective against actual write time per strategy and arm")
    figure.add_argument("--events", required=True, help="tables/io_events.parquet")
    figure.add_argument("--summary", required=True, help="tables/step_summary.csv")
    figure.add_argument("--out", required=True, help="the figure (PNG)")
    figure.add_argument("--title", default="cycleio: forecast write strategies")
    args = parser.parse_args(argv)
    if args.command == "rank":
        return rank_main(Path(args.spec))
    from .cli import _setup_logging

    _setup_logging(args.log)
    from .writefigures import write_strategy_figure_from_tables

    write_strategy_figure_from_tables(Path(args.events), Path(args.summary), Path(args.out), args.title)
    log.info("wrote %s", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
