"""``parallel``: every compute rank writes its rows of each file into the one shared file through MPI-IO.

netCDF-4 on parallel HDF5 (mpiio.py): the ranks holding pieces of a file (every compute rank for the
history files; a tile's ranks for its restart files when the compute ranks are a multiple of six)
open it together and write their bands of every block, collectively by default
(``write_component.mpiio: independent`` for independent writes; compressed variables are always
collective). The compute ranks wait until the hour is on storage, as with ``serial``, but no rank
gathers: the writes are spread over every rank's MPI-IO. Files without synthetic fields are written
whole by rank 0. Runs under the parallel stack's launcher and Python (config ``parallel_stack``).
"""

from __future__ import annotations

import time

from .base import WriteStrategy


class SharedFile:
    """What the shared-file strategies have in common: communicators of a file's writers, and the write itself."""

    shared_file = True  # runs on the parallel-netCDF stack (launcher.py)

    @classmethod
    def describe(cls, layout) -> str:
        return f"{super().describe(layout)}, MPI-IO {layout.mpiio}"

    def group_comm(self, parent, members: tuple[int, ...], me: int):
        """The communicator of ``members`` (ranks of ``parent``, in this order); None on a rank not among them.

        Made once per set of members, collectively over ``parent``: every rank of ``parent`` goes through
        the same files in the same order, so each new set is split off by all of them at the same point.
        """
        from mpi4py import MPI

        comms = self.__dict__.setdefault("comms", {})
        if members not in comms:
            inside = me in members
            comms[members] = parent.Split(0 if inside else MPI.UNDEFINED, members.index(me) if inside else 0)
        comm = comms[members]
        return None if comm == MPI.COMM_NULL else comm

    def write_shared(self, plan, comm, band: dict, bands: list[dict], source) -> int:
        """Land ``plan``'s file with the ranks of ``comm`` and record this rank's ``write``; returns its bytes."""
        from ..mpiio import write_shared

        fc = self.fc
        path = fc.workdir / plan.spec.path
        fc.fail_if_injected(path)
        t_start = time.time()
        done = write_shared(path, plan.layout, source, fc.ctx.times, comm, band, bands, fc.layout.mpiio,
                            fc.buffer_bytes)
        fc.write_record("write", path, t_start, done.bytes, done.seconds)
        return done.bytes


class Parallel(SharedFile, WriteStrategy):
    def output(self, index: int, plans: list) -> int:
        fc = self.fc
        nbytes = 0
        for plan in plans:
            if plan.undecomposed:
                if fc.rank == 0:
                    fc.write_whole(plan)
                continue
            members = tuple(piece.rank for piece in plan.pieces)
            comm = self.group_comm(fc.compute_comm, members, fc.rank)
            if comm is None:
                continue
            piece = plan.piece_of(fc.rank)

            def own(f, levels, rows, plan=plan, piece=piece):
                nonlocal nbytes
                data = fc.make_rows(plan, f, levels, piece)
                nbytes += data.nbytes
                return data

            self.write_shared(plan, comm, piece.rows, [p.rows for p in plan.pieces], own)
        fc.barrier(fc.compute_comm)  # the hour is on storage: the compute ranks go on
        return nbytes
