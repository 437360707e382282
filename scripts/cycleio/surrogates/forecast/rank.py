"""The forecast's MPI program: what every rank runs, under the four write strategies.

Started by launcher.py as ``python -m cycleio.surrogates.forecast.rank --spec JOB.json`` (the
package's docstring tells the strategies and the records). A rank that fails writes its traceback
beside the spec and calls MPI_Abort, so the job fails with that rank's error, never hangs.

Test-only: ``CYCLEIO_TEST_FAIL_RANK=N`` makes rank N raise an error when it first writes a file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .. import ncfiles
from ...storage.fsutil import landing
from ..grid import Grid
from ..inventory import FileSpec
from ..kinds import Compression
from ..ncfiles import WriteContext
from .layout import ForecastError, Layout
from .plan import FilePlan, Piece, file_plan

log = logging.getLogger("cycleio")

FAIL_RANK_VARIABLE = "CYCLEIO_TEST_FAIL_RANK"
GO, GO_TAG = np.zeros(1, np.uint8), 2**20  # serial: rank 0's "make the next block" to the other ranks
# A quilt writer rank holds at most this much of an hour's data before the compute ranks must wait.
WRITER_BUFFER_BYTES = 1024 * 2**20


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
        sys.stderr.write(f"cycleio.surrogates.forecast.rank: rank {rank} failed:\n{text}")
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(1)
    return 0


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cycleio.surrogates.forecast.rank",
                                     description="one rank of the forecast's MPI program (started by the launcher)")
    parser.add_argument("--spec", required=True, help="the job's JSON spec written by run_forecast_mpi")
    args = parser.parse_args(argv)
    return rank_main(Path(args.spec))


if __name__ == "__main__":
    sys.exit(main())
