"""The forecast's output as an MPI program: history and restart writes under four write strategies.

The fcst job (jobs.py) calls :func:`run_forecast_mpi`, which starts this module under the study's
launcher (``mpiexec -n {ntasks}``, ``srun -n {ntasks}``) as
``python -m cycleio.surrogates.forecast.mpifcst rank --spec JOB.json``, waits for it with a timeout,
and returns the records the ranks measured. Rank 0 writes them as JSON lines; the parent adds them
to the job's records.

Decomposition (what each compute rank holds, as the model's domain decomposition; the arithmetic is
in layout.py):
- the 4N x 2N Gaussian history grid is split by rows into one band per compute rank;
- each of the six N x N tiles is split by rows into k bands (FMS layout 1 x k): with a multiple of
  six compute ranks each tile gets its own k = ranks/6 ranks, as in the model; with fewer (the model
  needs at least six) every tile is split over all compute ranks (k = ranks).
What a file holds is its ncfiles layout (dimensions, coordinates, attributes, fields with their
seeds), so every strategy writes the same data as the in-process writer. Data move in blocks of
many levels bounded by the buffer (``buffer_bytes``, 64 MiB), never plane by plane: each compute
rank makes its band of a block (timed apart, op ``generate``), and gathers and hand-offs place the
bands straight into the writer's block with MPI derived datatypes. Files without synthetic fields
(logs, coupler.res, fv_core.res.nc) are written whole by one rank with their ncfiles writer.

Strategies (``ArmSettings.strategy``), for every output file of the hour (history and restart):
- ``serial``: blocks are gathered to rank 0, which writes them; all compute ranks wait until the
  hour is on storage.
- ``per_rank``: each rank writes its own block of each file as a split file named like FMS's
  io_layout files (``gdas.t06z.atmf003.nc.0000``, ``fv_core.res.tile1.nc.0001``); a file held by one
  rank (one compute rank, or a tile on its own rank) is written whole under its name. The downstream
  steps read the inventory's names, so the pieces are always combined (mppnccombine-like) into
  them: after each hour while the compute ranks wait (``combine_per_rank: false``), or all at the end
  of the forecast (``combine_per_rank: true``).
- ``quilt``: ``write_groups`` x ``write_tasks_per_group`` dedicated writer ranks. Output hour i goes
  to group i mod write_groups; file j of the hour to task j mod write_tasks_per_group. Compute ranks
  hand their blocks over with synchronous sends (MPI_Issend) and go on as soon as the group has
  taken them. A writer takes blocks while they fit its buffer (1 GiB), so a group still writing an
  earlier hour, or an hour larger than its buffer, makes the hand-off wait, as in the model.
- ``diskless``: as serial, but rank 0 builds each netCDF file in memory (``diskless=True,
  persist=True``) and writes it at close.

Records (one per event, ``rank`` = MPI rank, ``nranks`` = ranks of the program):
- ``write``: a writer's time in storage I/O for one file or piece (bytes = its size on storage);
  building the file's structure (``define``) and codec work (``encode``) are records of their own;
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
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import ncfiles
from ...storage.fsutil import landing
from ..grid import Grid
from ..inventory import FileSpec
from ..kinds import Compression, expected_bytes
from ..ncfiles import WriteContext
from .layout import ForecastError, Layout, check_layout, row_bounds, tile_blocks, tile_owner

log = logging.getLogger("cycleio")

FAIL_RANK_VARIABLE = "CYCLEIO_TEST_FAIL_RANK"
TIMEOUT_VARIABLE = "CYCLEIO_MPI_TIMEOUT_S"
SHM_DIR = Path("/dev/shm")
GO, GO_TAG = np.zeros(1, np.uint8), 2**20  # serial: rank 0's "make the next block" to the other ranks
# A quilt writer rank holds at most this much of an hour's data before the compute ranks must wait.
WRITER_BUFFER_BYTES = 1024 * 2**20


# --------------------------------------------------------------------------- plans


@dataclass
class Piece:
    """One rank's block of a file: global rows [start, stop) of each row dimension."""

    rank: int
    index: int
    rows: dict[str, tuple[int, int]]


@dataclass
class FilePlan:
    """A file of the hour: its layout (None: written whole by one rank with its ncfiles writer) and pieces."""

    spec: FileSpec
    layout: ncfiles.Layout | None = None
    pieces: list[Piece] = field(default_factory=list)

    @property
    def undecomposed(self) -> bool:
        return self.layout is None or not self.layout.fields

    @property
    def split(self) -> bool:
        return len(self.pieces) > 1

    def piece_of(self, rank: int) -> Piece | None:
        return next((piece for piece in self.pieces if piece.rank == rank), None)

    def piece_path(self, workdir: Path, piece: Piece) -> Path:
        return workdir / f"{self.spec.path}.{piece.index:04d}"

    def piece_layout(self, piece: Piece) -> ncfiles.Layout:
        rows = " ".join(f"{dim}={start}:{stop}" for dim, (start, stop) in piece.rows.items())
        return self.layout.piece(piece.rows, {"cycleio_piece": f"{piece.index} of {len(self.pieces)}",
                                              "cycleio_piece_rows": rows})


def file_plan(spec: FileSpec, ctx: WriteContext, compute: int) -> FilePlan:
    """How ``spec`` is written: its layout and the ranks' pieces (bands of rows).

    Tile files (a ``tile`` parameter) take the tile layout; other gridded files split their rows over
    all compute ranks. Files without synthetic fields are written whole by one rank.
    """
    build = ncfiles.LAYOUTS.get(spec.kind)
    layout = build(spec, ctx) if build else None
    if layout is None or not layout.fields:
        return FilePlan(spec, layout, [Piece(0, 0, {})])
    row_dims = sorted(layout.row_dims())
    tile = spec.param("tile")
    if tile is not None:
        k = tile_blocks(compute)
        owners = [(tile_owner(tile, block, compute), block) for block in range(k)]
    else:
        k, owners = compute, [(rank, rank) for rank in range(compute)]
    pieces = [Piece(rank, block, {dim: row_bounds(layout.size(dim), k, block) for dim in row_dims})
              for rank, block in owners]
    for piece in pieces:
        empty = [dim for dim, (start, stop) in piece.rows.items() if stop <= start]
        if empty:
            raise ForecastError(
                f"write_component.ranks={compute} is too many for {spec.path} at {ctx.grid.resolution}: "
                f"block {piece.index} gets no rows of {empty[0]} ({layout.size(empty[0])} rows); use fewer ranks"
            )
    return FilePlan(spec, layout, pieces)


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


# --------------------------------------------------------------------------- files and blocks


def block_shape(layout: ncfiles.Layout, f: ncfiles.Field, levels: range | None, rows: tuple[int, int]) -> tuple:
    nx = layout.size(f.dims[-1])
    return (rows[1] - rows[0], nx) if levels is None else (len(levels), rows[1] - rows[0], nx)


class Buffers:
    """Reused arrays by dtype and shape: blocks are made, gathered and written without new allocations."""

    def __init__(self):
        self.arrays: dict = {}

    def get(self, dtype, shape) -> np.ndarray:
        key = (np.dtype(dtype).str, tuple(shape))
        if key not in self.arrays:
            self.arrays[key] = np.empty(shape, dtype)
        return self.arrays[key]


def band_items(plan: FilePlan, piece: Piece, buffer_bytes: int) -> tuple[list[tuple], int]:
    """A piece's band of every transfer of a file, in write order: (field, levels, shape, byte offset, bytes)."""
    items, offset = [], 0
    for f, levels in plan.layout.blocks(buffer_bytes):
        shape = block_shape(plan.layout, f, levels, piece.rows[f.dims[-2]])
        size = int(np.prod(shape)) * np.dtype(f.dtype).itemsize
        items.append((f, levels, shape, offset, size))
        offset += size
    return items, offset


def land_netcdf(path: Path, layout: ncfiles.Layout, source, times: ncfiles.Overheads, buffer_bytes: int,
                diskless: bool = False, check=None) -> tuple[int, float]:
    """Write a netCDF file through a temporary name (write, fsync, rename); return size and storage seconds.

    The rename and the directory's sync are booked into ``times.rename``, as for in-process writes.
    """
    if check:
        check(path)
    timing: dict = {}
    with landing(path, timing) as tmp:
        _, io_s = ncfiles.write_netcdf(tmp, layout, source, times, buffer_bytes, diskless=diskless)
        t1 = time.perf_counter()
    times.rename += timing["rename_s"]
    return path.stat().st_size, io_s + time.perf_counter() - t1 - timing["rename_s"]


def write_plain(path: Path, spec: FileSpec, ctx: WriteContext, check=None) -> tuple[int, float]:
    """A file written whole by its ncfiles writer; CPU work (data, codec) is kept out of the seconds."""
    if check:
        check(path)
    transfer = ncfiles.write_file(path, spec, ctx)
    return transfer.bytes, transfer.io_s


def combine_pieces(workdir: Path, plan: FilePlan, times: ncfiles.Overheads, buffer_bytes: int,
                   check=None) -> tuple[int, float]:
    """Make the inventory's file from its split pieces (read them, write the whole file), then remove them."""
    import h5py

    t0 = time.perf_counter()
    paths = [plan.piece_path(workdir, piece) for piece in plan.pieces]
    files = [h5py.File(path, "r") for path in paths]
    buffers = Buffers()
    try:
        def source(f, levels, rows):
            block = buffers.get(f.dtype, block_shape(plan.layout, f, levels, rows))
            records = (0,) * plan.layout.records(f)
            for piece, h5 in zip(plan.pieces, files):
                start, stop = piece.rows[f.dims[-2]]
                picked = records + ((slice(levels.start, levels.stop),) if levels is not None else ())
                dest = (slice(None),) * (levels is not None) + (slice(start - rows[0], stop - rows[0]),)
                h5[f.name].read_direct(block, np.s_[picked], np.s_[dest])
            return block

        size, _ = land_netcdf(workdir / plan.spec.path, plan.layout, source, times, buffer_bytes, check=check)
    finally:
        for h5 in files:
            h5.close()
    for path in paths:
        path.unlink()
    return size, time.perf_counter() - t0


# --------------------------------------------------------------------------- the MPI program


def wait_all(requests) -> None:
    """Complete MPI requests; when ranks outnumber cores, without hogging one (spin, then short sleeps).

    Requests are waited for one at a time: testing a list of thousands of requests on every spin
    would cost more than the messages (an hour's blocks of a restart set are about a thousand).
    """
    from mpi4py import MPI

    requests = [request for request in requests if request is not None]
    if MPI.COMM_WORLD.Get_size() <= (os.cpu_count() or 1):
        MPI.Request.Waitall(requests)
        return
    for request in requests:
        spins, delay = 0, 5e-5
        while not request.Test():
            spins += 1
            if spins > 2000:
                time.sleep(delay)
                delay = min(delay * 2, 0.002)


class BandTypes:
    """MPI datatypes that place a rank's band of rows straight into a full block (no copy after a gather)."""

    def __init__(self):
        self.types: dict = {}

    def get(self, dtype, planes: int, rows: int, ny: int, nx: int):
        from mpi4py import MPI

        key = (np.dtype(dtype).str, planes, rows, ny, nx)
        if key not in self.types:
            base = MPI._typedict[np.dtype(dtype).char]
            self.types[key] = base.Create_vector(planes, rows * nx, ny * nx).Commit()
        return self.types[key]

    def free(self) -> None:
        for mpitype in self.types.values():
            mpitype.Free()
        self.types.clear()


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
        self.buffer_bytes = int(spec.get("buffer_bytes", ncfiles.IO_BUFFER_BYTES))
        self.ctx = WriteContext(Grid(spec["resolution"], spec["levels"]), spec["seed"], spec["cycle"],
                                Compression(**spec["compression"]), buffer_bytes=self.buffer_bytes)
        self.writer_buffer_bytes = int(spec.get("writer_buffer_bytes", WRITER_BUFFER_BYTES))
        self.compute_s_per_hour = float(spec["compute_seconds_per_hour"])
        self.compute = time.sleep  # the compute stand-in: sleep, or burn the CPU as a model does
        if spec.get("compute_kind", "sleep") == "burn":
            from ..compute import burn_cpu

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
        self.buffers = Buffers()
        self.band_types = BandTypes()
        self.transfer_mark = 0  # ctx.times.transfers when the last write record was made

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
        self.records[-1]["transfers"] = max(1, self.ctx.times.transfers - self.transfer_mark)
        self.transfer_mark = self.ctx.times.transfers

    def barrier(self, comm) -> None:
        wait_all([comm.Ibarrier()])

    def make_rows(self, plan: FilePlan, f, levels, piece: Piece, out: np.ndarray | None = None) -> np.ndarray:
        """This rank's band of a block, made without the other ranks' rows (timed as ``generate``)."""
        t0 = time.perf_counter()
        rows = piece.rows[f.dims[-2]]
        if out is None:
            out = self.buffers.get(f.dtype, block_shape(plan.layout, f, levels, rows))
        plan.layout.make(f, levels, rows, out)
        self.ctx.times.generate += time.perf_counter() - t0
        return out

    def receive_bands(self, plan: FilePlan, f, levels, block: np.ndarray, sources, tag: int) -> list:
        """Post receives placing each source rank's band of ``block`` where it belongs (derived datatypes)."""
        ny, nx = block.shape[-2], block.shape[-1]
        planes = 1 if levels is None else len(levels)
        flat = memoryview(block.reshape(-1)).cast("B")
        requests = []
        for piece in plan.pieces:
            if piece.rank not in sources:
                continue
            start, stop = piece.rows[f.dims[-2]]
            mpitype = self.band_types.get(f.dtype, planes, stop - start, ny, nx)
            offset = start * nx * block.itemsize
            requests.append(self.world.Irecv([flat[offset:], 1, mpitype], source=piece.rank, tag=tag))
        return requests

    # ---- the program

    def run(self) -> list[dict]:
        try:
            if self.is_compute:
                self.compute_loop()
            else:
                self.writer_loop()
        finally:
            self.band_types.free()
        return self.records

    def compute_loop(self) -> None:
        previous, last = 0, len(self.hours) - 1
        final_start = final_t0 = final_cpu = 0.0
        for index, (hour, plans) in enumerate(self.hours):
            if hour > previous:
                seconds = self.compute_s_per_hour * (hour - previous)
                if seconds > 0:
                    t_start, t0 = time.time(), time.perf_counter()
                    self.compute(seconds)
                    self.record("compute", t_start, time.perf_counter() - t0, n_files=0)
                previous = hour
            t_start, t0 = time.time(), time.perf_counter()
            self.ctx.times.take()
            self.transfer_mark = 0
            if index == last:
                final_start, final_t0 = t_start, t0
            nbytes = self.output(index, plans)
            cpu = self.ctx.times.take()
            self.record("write_effective", t_start, time.perf_counter() - t0 - cpu.total, f"f{hour:03d}", nbytes,
                        n_files=len(plans))
            for op, seconds in cpu.seconds().items():
                if seconds > 0 or op == "generate":
                    self.record(op, t_start, seconds, f"f{hour:03d}", n_files=0)
            if index == last:
                final_cpu = cpu.total
        if self.layout.strategy == "per_rank" and self.layout.combine_at_end:
            t_start, t0 = time.time(), time.perf_counter()
            self.combine(self.deferred)
            cpu = self.ctx.times.take()
            final_cpu += cpu.total
            for op, seconds in cpu.seconds().items():
                if seconds > 0:
                    self.record(op, t_start, seconds, "combine", n_files=0)
        self.barrier(self.world)  # every file of the forecast is on storage
        if self.rank == 0 and self.hours:
            self.record("write_final", final_start, time.perf_counter() - final_t0 - final_cpu,
                        f"f{self.hours[-1][0]:03d}", n_files=len(self.hours[-1][1]))

    def output(self, index: int, plans: list[FilePlan]) -> int:
        strategy = self.layout.strategy
        if strategy in ("serial", "diskless"):
            return self.output_serial(plans, diskless=strategy == "diskless")
        if strategy == "per_rank":
            return self.output_per_rank(plans)
        return self.output_quilt(index, plans)

    # ---- serial and diskless: gather blocks to rank 0, which writes; everyone waits

    def output_serial(self, plans: list[FilePlan], diskless: bool) -> int:
        nbytes = 0
        for number, plan in enumerate(plans):
            if plan.undecomposed:
                if self.rank == 0:
                    self.write_undecomposed(plan)
                continue
            piece = plan.piece_of(self.rank)
            others = {p.rank for p in plan.pieces} - {0}
            # A file whose data fit the buffer comes in one message per rank; a larger one block by block.
            whole = plan.layout.data_bytes() <= self.buffer_bytes
            if self.rank == 0:
                gather = self.gather_file(plan, number, others) if whole else self.gather_blocks(plan, number, others)
                path = self.workdir / plan.spec.path
                t_start = time.time()
                size, seconds = land_netcdf(path, plan.layout, gather, self.ctx.times, self.buffer_bytes,
                                            diskless=diskless, check=self.check)
                self.write_record("write", path, t_start, size, seconds)
                nbytes += plan.layout.data_bytes() // max(len(plan.pieces), 1) if piece is not None else 0
            elif piece is not None:
                # Making data is our stand-in's work, not the model's: it waits until the previous
                # transfer is written, so it never overlaps the writes it is compared with.
                items, total = band_items(plan, piece, self.buffer_bytes)
                chunks = [items] if whole else [[item] for item in items]
                for group in chunks:
                    wait_all([self.world.Irecv(np.empty_like(GO), source=0, tag=GO_TAG)])
                    message = self.buffers.get(np.uint8, (total if whole else group[0][4],))
                    first = group[0][3]
                    for f, levels, shape, offset, size in group:
                        band = message[offset - first:offset - first + size].view(f.dtype).reshape(shape)
                        self.make_rows(plan, f, levels, piece, band)
                    nbytes += message.nbytes
                    wait_all([self.world.Isend(message, dest=0, tag=number)])
        self.barrier(self.compute_comm)  # the hour is on storage: the compute ranks go on
        return nbytes

    def gather_blocks(self, plan: FilePlan, number: int, others: set[int]):
        """Rank 0's source for a large file: each block gathered with the bands placed by derived datatypes."""
        piece = plan.piece_of(0)

        def gather(f, levels, rows):
            wait_all([self.world.Isend(GO, dest=rank, tag=GO_TAG) for rank in others])
            block = self.buffers.get(f.dtype, block_shape(plan.layout, f, levels, rows))
            requests = self.receive_bands(plan, f, levels, block, others, number)
            if piece is not None:  # rank 0 makes its own band in place
                start, stop = piece.rows[f.dims[-2]]
                self.make_rows(plan, f, levels, piece, block[..., start - rows[0]:stop - rows[0], :])
            wait_all(requests)
            return block
        return gather

    def gather_file(self, plan: FilePlan, number: int, others: set[int]):
        """Rank 0's source for a small file: every rank's bands of every field in one message."""
        piece = plan.piece_of(0)
        messages: dict = {}

        def gather(f, levels, rows):
            if not messages:
                wait_all([self.world.Isend(GO, dest=rank, tag=GO_TAG) for rank in others])
                requests = []
                for other in plan.pieces:
                    if other.rank in others:
                        items, total = band_items(plan, other, self.buffer_bytes)
                        messages[other.rank] = (np.empty(total, np.uint8), {(i[0].name, i[1] and i[1].start): i
                                                                            for i in items}, other)
                        requests.append(self.world.Irecv(messages[other.rank][0], source=other.rank, tag=number))
                wait_all(requests)
            block = self.buffers.get(f.dtype, block_shape(plan.layout, f, levels, rows))
            for message, items, other in messages.values():
                _, _, shape, offset, size = items[(f.name, levels and levels.start)]
                start, stop = other.rows[f.dims[-2]]
                block[..., start - rows[0]:stop - rows[0], :] = message[offset:offset + size].view(f.dtype).reshape(shape)
            if piece is not None:
                start, stop = piece.rows[f.dims[-2]]
                self.make_rows(plan, f, levels, piece, block[..., start - rows[0]:stop - rows[0], :])
            return block
        return gather

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
            layout = plan.piece_layout(piece) if plan.split else plan.layout
            path = plan.piece_path(self.workdir, piece) if plan.split else self.workdir / plan.spec.path

            def own(f, levels, rows, plan=plan, piece=piece):
                nonlocal nbytes
                data = self.make_rows(plan, f, levels, piece)
                nbytes += data.nbytes
                return data

            t_start = time.time()
            size, seconds = land_netcdf(path, layout, own, self.ctx.times, self.buffer_bytes, check=self.check)
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
                before = self.ctx.times.copy()
                size, seconds = combine_pieces(self.workdir, plan, self.ctx.times, self.buffer_bytes,
                                               check=self.check)
                self.write_record("combine", path, t_start, size, seconds - self.ctx.times.since(before).total)
        self.barrier(self.compute_comm)

    # ---- quilt: hand the hour's blocks to a write group and go on

    def quilt_assignments(self, index: int, plans: list[FilePlan]) -> list[tuple[FilePlan, int]]:
        group = index % self.layout.write_groups
        return [(plan, self.layout.writer_rank(group, j % self.layout.tasks_per_group)) for j, plan in enumerate(plans)]

    def quilt_tag(self, index: int, number: int) -> int:
        """Messages of hour ``index``, file ``number`` of the hour: a tag of their own."""
        return index * 4096 + number

    def handoff_packs(self, index: int, plans: list[FilePlan], writer: int, source: int) -> list[list[tuple]]:
        """What ``source`` hands ``writer`` this hour, in write order, packed into messages of at most the buffer.

        Each item is (file number, plan, field, levels, band shape, byte offset in its pack). Small
        blocks share a message (a restart set at C48 is about a thousand blocks), large ones go alone.
        """
        packs: list[list[tuple]] = [[]]
        used = 0
        for number, (plan, owner) in enumerate(self.quilt_assignments(index, plans)):
            piece = plan.piece_of(source)
            if owner != writer or plan.undecomposed or piece is None:
                continue
            for f, levels in plan.layout.blocks(self.buffer_bytes):
                shape = block_shape(plan.layout, f, levels, piece.rows[f.dims[-2]])
                size = int(np.prod(shape)) * np.dtype(f.dtype).itemsize
                if packs[-1] and used + size > self.buffer_bytes:
                    packs.append([])
                    used = 0
                packs[-1].append((number, plan, f, levels, shape, used))
                used += size
        return [pack for pack in packs if pack]

    @staticmethod
    def pack_bytes(pack: list[tuple]) -> int:
        _, _, f, _, shape, offset = pack[-1]
        return offset + int(np.prod(shape)) * np.dtype(f.dtype).itemsize

    def output_quilt(self, index: int, plans: list[FilePlan]) -> int:
        """Hand this rank's bands of the hour's blocks to the writers; returns when the writers took them all.

        A synchronous send completes when the writer has posted its receive, which it does while the
        hour fits its buffer: a writer still busy with an earlier hour, or an hour larger than its
        buffer, keeps the compute ranks waiting, as in the model.
        """
        requests, nbytes, in_flight = [], 0, 0
        writers = sorted({writer for _, writer in self.quilt_assignments(index, plans)})
        for writer in writers:
            for number, pack in enumerate(self.handoff_packs(index, plans, writer, self.rank)):
                message = np.empty(self.pack_bytes(pack), np.uint8)
                for _, plan, f, levels, shape, offset in pack:
                    size = int(np.prod(shape)) * np.dtype(f.dtype).itemsize
                    band = message[offset:offset + size].view(f.dtype).reshape(shape)
                    self.make_rows(plan, f, levels, plan.piece_of(self.rank), band)
                nbytes += message.nbytes
                requests.append((self.world.Issend(message, dest=writer, tag=self.quilt_tag(index, number)),
                                 message.nbytes))
                in_flight += message.nbytes
                while in_flight > self.writer_buffer_bytes and len(requests) > 1:  # bound what waits in flight
                    request, size = requests.pop(0)
                    wait_all([request])
                    in_flight -= size
        wait_all([request for request, _ in requests])
        return nbytes

    def writer_loop(self) -> None:
        for index, (hour, plans) in enumerate(self.hours):
            mine = [(number, plan) for number, (plan, writer) in enumerate(self.quilt_assignments(index, plans))
                    if writer == self.rank]
            if not mine:
                continue
            window = QuiltWindow(self, index, plans)
            for number, plan in mine:
                path = self.workdir / plan.spec.path
                t_start = time.time()
                if plan.undecomposed:
                    size, seconds = write_plain(path, plan.spec, self.ctx, check=self.check)
                else:
                    size, seconds = land_netcdf(path, plan.layout, window.source(number, plan), self.ctx.times,
                                                self.buffer_bytes, check=self.check)
                self.write_record("write", path, t_start, size, seconds)
            cpu = self.ctx.times.take()
            self.transfer_mark = 0
            for op, seconds in cpu.seconds().items():
                if seconds > 0:
                    self.record(op, time.time(), seconds, f"f{hour:03d}", n_files=0)
        self.barrier(self.world)

    def write_undecomposed(self, plan: FilePlan) -> None:
        path = self.workdir / plan.spec.path
        t_start = time.time()
        size, seconds = write_plain(path, plan.spec, self.ctx, check=self.check)
        self.write_record("write", path, t_start, size, seconds)


class QuiltWindow:
    """A writer's receive window over the hour's messages from every compute rank, bounded by its buffer.

    Receives are posted ahead while the messages fit the writer's buffer, and the writer waits for
    all of them before it writes: it cannot answer the compute ranks while it is inside the netCDF
    library, so taking the whole window first is what lets them go on (as the model's write group
    takes the hour before writing it). A message's memory is freed once all its blocks are written,
    making room for the next receives.
    """

    def __init__(self, forecast: Forecast, index: int, plans: list[FilePlan]):
        self.forecast, self.index = forecast, index
        fc = forecast
        # message k of every compute rank, in order; bands of a block come from every rank's messages
        self.pending: list[tuple[int, int, list[tuple]]] = []
        for source in range(fc.layout.compute):
            for number, pack in enumerate(fc.handoff_packs(index, plans, fc.rank, source)):
                self.pending.append((number, source, pack))
        self.pending.sort(key=lambda item: (item[0], item[1]))
        self.bands: dict[tuple, tuple[np.ndarray, list]] = {}  # (file, field, level start, source) -> band
        self.messages: dict[tuple[int, int], list] = {}  # (number, source) -> [buffer, request, blocks left]
        self.requests: list = []
        self.held = 0
        self.fill()

    def fill(self) -> None:
        fc = self.forecast
        while self.pending:
            number, source, pack = self.pending[0]
            size = fc.pack_bytes(pack)
            if self.messages and self.held + size > fc.writer_buffer_bytes:
                return
            self.pending.pop(0)
            message = np.empty(size, np.uint8)
            request = fc.world.Irecv(message, source=source, tag=fc.quilt_tag(self.index, number))
            self.messages[(number, source)] = [message, request, len(pack)]
            self.requests.append(request)
            self.held += size
            for file_number, _, f, levels, shape, offset in pack:
                nbytes = int(np.prod(shape)) * np.dtype(f.dtype).itemsize
                band = message[offset:offset + nbytes].view(f.dtype).reshape(shape)
                key = (file_number, f.name, None if levels is None else levels.start, source)
                self.bands[key] = (band, (number, source))

    def source(self, number: int, plan: FilePlan):
        fc = self.forecast

        def take(f, levels, rows):
            level = None if levels is None else levels.start
            first = (number, f.name, level, plan.pieces[0].rank)
            if first not in self.bands:
                raise ForecastError(f"writer rank {fc.rank} has no hand-off for {plan.spec.path} {f.name}")
            wait_all(self.requests)  # the whole window: the compute ranks are free once it is taken
            self.requests = []
            block = fc.buffers.get(f.dtype, block_shape(plan.layout, f, levels, rows))
            for piece in plan.pieces:
                band, message_key = self.bands.pop((number, f.name, level, piece.rank))
                start, stop = piece.rows[f.dims[-2]]
                block[..., start - rows[0]:stop - rows[0], :] = band
                entry = self.messages[message_key]
                entry[2] -= 1
                if entry[2] == 0:
                    self.held -= entry[0].nbytes
                    del self.messages[message_key]
            self.fill()
            return block
        return take


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
        sys.stderr.write(f"cycleio.surrogates.forecast.mpifcst: rank {rank} failed:\n{text}")
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
            "buffer_bytes": ctx.buffer_bytes,
            "records": str(tmp / "records.jsonl"), "errors": str(tmp / "errors"),
        }
        (tmp / "spec.json").write_text(json.dumps(spec))
        argv = [*command, sys.executable, "-m", "cycleio.surrogates.forecast.mpifcst", "rank",
                "--spec", str(tmp / "spec.json")]
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[3])
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


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cycleio.surrogates.forecast.mpifcst",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rank = sub.add_parser("rank", help="one rank of the forecast's MPI program (started by the launcher)")
    rank.add_argument("--spec", required=True, help="the job's JSON spec written by run_forecast_mpi")
    args = parser.parse_args(argv)
    return rank_main(Path(args.spec))


if __name__ == "__main__":
    sys.exit(main())
