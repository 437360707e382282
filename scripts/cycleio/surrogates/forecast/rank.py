"""The forecast's MPI program: what every rank runs, whatever the write strategy.

Started by launcher.py as ``python -m cycleio.surrogates.forecast.rank --spec JOB.json`` (the
package's docstring tells the records). Compute ranks run the compute stand-in and, per output
hour, their write strategy's output (strategies/); writer ranks run the strategy's writer loop.
Strategies work through a rank's services here: landing and recording files, the rank's bands of
blocks, reused buffers, MPI waits. A rank that fails writes its traceback beside the spec and calls
MPI_Abort, so the job fails with that rank's error, never hangs.

Fault injection (config ``faults.fail_rank``, the spec's ``fail_rank``): that rank raises at its
first output hour, a compute rank before it hands over or writes anything, a writer rank as it lands
its first file, so a failing rank can be rehearsed under every strategy.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .. import h5chunks, nclayout, transfers, writers
from ..kinds import expected_bytes
from ...darshan.runtime import preload_rank
from ...faults import InjectedFault
from ...hostmemory import FilePageProbe
from ...kernelio import read_proc_io, work_event
from ...process import say_ranks_started
from ...fsutil import landing
from ..compute import COMPUTE_KINDS
from ..grid import Grid
from ..inventory import FileSpec
from ...config.forecast import Compression
from ..context import WriteContext
from .layout import ForecastError, RankLayout
from .plan import FilePlan, Piece, file_plan

log = logging.getLogger("cycleio")

# A writer rank holds at most this much of an hour's data before the compute ranks must wait.
WRITER_BUFFER_BYTES = 1024 * 2**20


def block_shape(layout: nclayout.NetcdfLayout, f: nclayout.Field, levels: range | None, rows: tuple[int, int]) -> tuple:
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

    def block(self, layout: nclayout.NetcdfLayout, f: nclayout.Field, levels: range | None, rows: tuple[int, int]):
        """The array of a block: global rows ``rows`` of field ``f`` at ``levels``."""
        return self.get(f.dtype, block_shape(layout, f, levels, rows))

    def bytes(self, nbytes: int) -> np.ndarray:
        return self.get(np.uint8, (nbytes,))


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
    """One rank of the forecast program, and the services its write strategy works through."""

    def __init__(self, spec: dict):
        from mpi4py import MPI

        self.world = MPI.COMM_WORLD
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()
        self.layout = RankLayout.from_settings(spec["strategy"], spec["write_component"])
        if self.size != self.layout.ntasks:
            raise ForecastError(f"the launcher started a world of {self.size} ranks, but {self.layout.describe()} "
                                f"needs {self.layout.ntasks}; does the launcher template pass {{ntasks}}, and is it "
                                f"the launcher of the MPI this Python's mpi4py uses ({mpi_library()})? A launcher of "
                                "another MPI starts each rank as a world of its own")
        self.workdir = Path(spec["workdir"])
        self.buffer_bytes = int(spec.get("buffer_bytes", transfers.IO_BUFFER_BYTES))
        self.ctx = WriteContext(Grid(spec["resolution"], spec["levels"]), spec["seed"], spec["cycle"],
                                Compression(**spec["compression"]), buffer_bytes=self.buffer_bytes)
        self.writer_buffer_bytes = int(spec.get("writer_buffer_bytes", WRITER_BUFFER_BYTES))
        self.compute_s_per_hour = float(spec["compute_seconds_per_hour"])
        self.compute = COMPUTE_KINDS[spec["compute_kind"]]
        self.hours = [(hour, [file_plan(FileSpec(path, kind, tuple(tuple(p) for p in params)), self.ctx,
                                        self.layout.compute) for path, kind, params in specs])
                      for hour, specs in spec["hours"]]
        self.is_compute = self.rank < self.layout.compute
        self.compute_comm = self.world.Split(0 if self.is_compute else 1, self.rank)
        self.fail_rank = spec.get("fail_rank")  # fault injection
        self.records: list[dict] = []
        self.buffers = Buffers()
        self.band_types = BandTypes()
        self.transfer_mark = 0  # ctx.times.transfers when the last write record was made
        self.strategy = self.layout.write_strategy(self)
        # a paired job's step tells the free pages each file meets (hostmemory), where one rank writes at a time
        if spec.get("probe_pages") and self.layout.write_strategy.one_writer(self.layout):
            self.ctx.times.pages = FilePageProbe()

    # ---- records and checks

    def record(self, op: str, t_start: float, seconds: float, file: str = "", nbytes: int = 0, n_files: int = 1):
        self.records.append({"op": op, "file": file, "bytes": int(nbytes), "t_start": t_start,
                             "seconds": max(seconds, 0.0), "rank": self.rank, "nranks": self.size,
                             "n_files": n_files, "host": HOST})
        if self.layout.write_strategy.shared_file:
            self.records[-1]["mpiio"] = self.layout.mpiio

    def fail_if_injected(self, path: Path | None = None) -> None:
        """Fault injection: raise if the config's ``faults.fail_rank`` names this rank."""
        if self.fail_rank == self.rank:
            where = f"as it lands {path.name}" if path is not None else "at its first output hour"
            raise InjectedFault(f"injected fault (config faults.fail_rank): rank {self.rank} fails {where}")

    def write_record(self, op: str, path: Path, t_start: float, size: int, seconds: float,
                     fresh_MiB: float | None = None):
        self.record(op, t_start, seconds, str(path.relative_to(self.workdir)), size)
        self.records[-1]["transfers"] = max(1, self.ctx.times.transfers - self.transfer_mark)
        self.transfer_mark = self.ctx.times.transfers
        if fresh_MiB is not None:
            self.records[-1]["fresh_MiB"] = fresh_MiB

    def arm_probe(self, nbytes: int) -> None:
        """Where this rank probes the fresh pages its files meet: for the file of about ``nbytes`` it begins now."""
        if self.ctx.times.pages is not None:
            self.ctx.times.pages.arm(nbytes)

    def probed(self) -> float | None:
        return self.ctx.times.pages.take() if self.ctx.times.pages is not None else None

    def take_overheads(self) -> transfers.Overheads:
        """The CPU work booked apart since the last take; counting starts again (transfers too).

        Always take through here, never ``ctx.times.take()``: that zeroes the transfers but not the mark of
        the last write record, and the next write record (per_rank's first combine at the end) would count
        its transfers less those of the hour's last write.
        """
        cpu = self.ctx.times.take()
        self.transfer_mark = 0
        return cpu

    def record_overheads(self, cpu: transfers.Overheads, t_start: float, file: str, always: tuple = ()) -> None:
        """One record per kind of CPU work (``generate``, ``encode``, ...) that took time, or is in ``always``."""
        for op, seconds in cpu.seconds().items():
            if seconds > 0 or op in always:
                self.record(op, t_start, seconds, file, n_files=0)

    # ---- files

    def land(self, path: Path, layout: nclayout.NetcdfLayout, source, diskless: bool = False) -> tuple[int, float]:
        """Write a netCDF file through a temporary name (write, fsync, rename); return size and storage seconds.

        ``source(field, levels, rows)`` gives each block. The rename and the directory's sync are
        booked into ``times.rename``, as for in-process writes.
        """
        self.fail_if_injected(path)
        timing: dict = {}
        with landing(path, timing) as tmp:
            _, io_s = h5chunks.write_netcdf(tmp, layout, source, self.ctx.times, self.buffer_bytes, diskless=diskless)
            t1 = time.perf_counter()
        self.ctx.times.rename += timing["rename_s"]
        return path.stat().st_size, io_s + time.perf_counter() - t1 - timing["rename_s"]

    def write(self, path: Path, layout: nclayout.NetcdfLayout, source, diskless: bool = False) -> None:
        """Land a netCDF file (or a piece of one) and record its ``write``."""
        self.arm_probe(layout.data_bytes())
        t_start = time.time()
        size, seconds = self.land(path, layout, source, diskless)
        self.write_record("write", path, t_start, size, seconds, self.probed())

    def write_whole(self, plan: FilePlan) -> None:
        """A file written whole by its writer (writers.py), and its ``write`` record; CPU work is kept out of the seconds."""
        path = self.workdir / plan.spec.path
        self.arm_probe(expected_bytes(plan.spec, self.ctx.grid, self.ctx.compression))
        t_start = time.time()
        self.fail_if_injected(path)
        transfer = writers.write_file(path, plan.spec, self.ctx)
        self.write_record("write", path, t_start, transfer.bytes, transfer.io_s, self.probed())

    # ---- blocks, buffers and messages

    def band_items(self, plan: FilePlan, piece: Piece) -> tuple[list[tuple], int]:
        """A piece's band of every block of a file, in write order: (field, levels, shape, byte offset, bytes)."""
        items, offset = [], 0
        for f, levels in plan.layout.blocks(self.buffer_bytes):
            shape = block_shape(plan.layout, f, levels, piece.rows[f.dims[-2]])
            size = int(np.prod(shape)) * np.dtype(f.dtype).itemsize
            items.append((f, levels, shape, offset, size))
            offset += size
        return items, offset

    def make_rows(self, plan: FilePlan, f, levels, piece: Piece, out: np.ndarray | None = None) -> np.ndarray:
        """This rank's band of a block, made without the other ranks' rows (timed as ``generate``)."""
        t0 = time.perf_counter()
        rows = piece.rows[f.dims[-2]]
        if out is None:
            out = self.buffers.block(plan.layout, f, levels, rows)
        plan.layout.make(f, levels, rows, out)
        self.ctx.times.generate += time.perf_counter() - t0
        return out

    @staticmethod
    def message(nbytes: int) -> np.ndarray:
        """A new byte buffer for a message."""
        return np.empty(nbytes, np.uint8)

    @staticmethod
    def buffer_pool() -> Buffers:
        """Reused arrays of their own, freed with them (the rank's ``buffers`` keep what they hold)."""
        return Buffers()

    # ---- MPI

    def wait_all(self, requests) -> None:
        """Complete MPI requests without holding a core: spin a little, then short sleeps.

        MPI's own Waitall spins. A rank waiting for the writer would then take a core from the
        kernel's work for that writer (copying into the page cache, writeback): on a 2-core node the
        serial forecast's disk writes ran at 0.6 of a replay of the same bytes with its other rank
        spinning, and at 0.75-0.9 with it sleeping. Requests are waited for one at a time: testing a
        list of thousands of requests on every spin would cost more than the messages (an hour's
        blocks of a restart set are about a thousand).
        """
        for request in requests:
            if request is None:
                continue
            spins, delay = 0, 5e-5
            while not request.Test():
                spins += 1
                if spins > 2000:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.002)

    def barrier(self, comm) -> None:
        self.wait_all([comm.Ibarrier()])

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
                self.strategy.writer_loop()
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
            if index == 0:
                self.fail_if_injected()
            t_start, t0 = time.time(), time.perf_counter()
            self.take_overheads()
            if index == last:
                final_start, final_t0 = t_start, t0
            nbytes = self.strategy.output(index, plans)
            cpu = self.take_overheads()
            self.record("write_effective", t_start, time.perf_counter() - t0 - cpu.total, f"f{hour:03d}", nbytes,
                        n_files=len(plans))
            self.record_overheads(cpu, t_start, f"f{hour:03d}", always=("generate",))
            if index == last:
                final_cpu = cpu.total
        final_cpu += self.strategy.finish()
        self.barrier(self.world)  # every file of the forecast is on storage
        if self.rank == 0 and self.hours:
            self.record("write_final", final_start, time.perf_counter() - final_t0 - final_cpu,
                        f"f{self.hours[-1][0]:03d}", n_files=len(self.hours[-1][1]))


def mpi_library() -> str:
    """The MPI library this program's mpi4py runs on, in one line."""
    from mpi4py import MPI

    first = (MPI.Get_library_version().strip().splitlines() or [""])[0]  # MPICH: lines; Open MPI: one, by commas
    return " ".join(first.split(",")[0].split())


HOST = socket.gethostname()  # the node this rank runs on: its records say where each file was written


def stack_info() -> dict:
    """What rank 0 reports of the program's stack (for the job's manifest)."""
    import mpi4py
    import netCDF4

    return {"mpi_library": mpi_library(), "mpi4py": mpi4py.__version__, "python": sys.executable,
            "netCDF4": netCDF4.__version__, "netcdf_c": netCDF4.__netcdf4libversion__,
            "hdf5": netCDF4.__hdf5libversion__, "parallel4": bool(netCDF4.__has_parallel4_support__)}


def rank_main(spec_path: Path) -> int:
    """Entry point of every rank: run, gather the records to rank 0, which writes them."""
    from mpi4py import MPI

    spec = json.loads(Path(spec_path).read_text())
    rank = MPI.COMM_WORLD.Get_rank()
    say_ranks_started(MPI.COMM_WORLD)  # the launcher stops waiting for a hung start-up
    try:
        import h5py  # noqa: F401: imported by the first netCDF write otherwise, inside the counted work

        forecast = Forecast(spec)
        started = read_proc_io()
        records = forecast.run()
        finished = read_proc_io()
        if started is not None and finished is not None:
            records.append(work_event(started, finished, rank))
        gathered = MPI.COMM_WORLD.gather(records, root=0)
        if rank == 0:
            if spec.get("info"):
                with landing(spec["info"]) as tmp:
                    tmp.write_text(json.dumps(stack_info()))
            with landing(spec["records"]) as tmp:
                with open(tmp, "w") as handle:
                    for rank_records in gathered:
                        for record in rank_records:
                            handle.write(json.dumps(record, sort_keys=True) + "\n")
    except BaseException as err:  # noqa: BLE001: any error of any rank must end the whole program
        text = traceback.format_exc()
        error_file = Path(spec["errors"]) / f"rank{rank:05d}.txt"
        try:
            node = os.environ.get("SLURMD_NODENAME") or HOST  # as Slurm names it, as runner.nodes does
            error_file.write_text(f"{type(err).__name__}: {err} (on node {node})\n{text}")
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
    preload_rank("fcst")  # in a job under Darshan: this rank too, before MPI starts
    return rank_main(Path(args.spec))


if __name__ == "__main__":
    sys.exit(main())
