"""``per_rank``: each rank writes its own block of each file, as FMS's io_layout does.

Pieces are split files named like the model's (``gdas.t06z.atmf003.nc.0000``,
``fv_core.res.tile1.nc.0001``); a file held by one rank (one compute rank, or a tile on its own
rank) is written whole under its name. The downstream steps read the inventory's names, so the
pieces are always combined (mppnccombine-like) into them, spread over the compute ranks: after
each hour while the compute ranks wait (``combine_per_rank: false``), or all at the end of the
forecast (``combine_per_rank: true``).
"""

from __future__ import annotations

import time

from .base import WriteStrategy


class PerRank(WriteStrategy):
    @classmethod
    def describe(cls, layout) -> str:
        when = "at the end" if layout.combine_at_end else "after each hour"
        return f"{super().describe(layout)}, pieces combined {when}"

    def __init__(self, fc):
        super().__init__(fc)
        self.deferred: list = []  # split files combined at the end

    def output(self, index: int, plans: list) -> int:
        fc = self.fc
        nbytes = 0
        for plan in plans:
            piece = plan.piece_of(fc.rank)
            if piece is None:
                continue
            if plan.undecomposed:
                fc.write_whole(plan)
                continue
            layout = plan.piece_layout(piece) if plan.split else plan.layout
            path = plan.piece_path(fc.workdir, piece) if plan.split else fc.workdir / plan.spec.path

            def own(f, levels, rows, plan=plan, piece=piece):
                nonlocal nbytes
                data = fc.make_rows(plan, f, levels, piece)
                nbytes += data.nbytes
                return data

            fc.write(path, layout, own)
        split = [plan for plan in plans if plan.split]
        if fc.layout.combine_at_end:
            self.deferred += split
        else:
            self.combine(split)
        return nbytes

    def finish(self) -> float:
        if not self.fc.layout.combine_at_end:
            return 0.0
        t_start = time.time()
        self.combine(self.deferred)
        cpu = self.fc.take_overheads()
        self.fc.record_overheads(cpu, t_start, "combine")
        return cpu.total

    def combine(self, plans: list) -> None:
        """Combine split files, spread over the compute ranks; returns when all are done."""
        fc = self.fc
        if not plans:
            return
        fc.barrier(fc.compute_comm)  # every piece is on storage
        for index, plan in enumerate(plans):
            if index % fc.layout.compute == fc.rank:
                t_start = time.time()
                before = fc.ctx.times.copy()
                size, seconds = self.combine_pieces(plan)
                fc.write_record("combine", fc.workdir / plan.spec.path, t_start, size,
                                seconds - fc.ctx.times.since(before).total)
        fc.barrier(fc.compute_comm)

    def combine_pieces(self, plan) -> tuple[int, float]:
        """Make the inventory's file from its split pieces (read them, write the whole file), then remove them."""
        import h5py

        fc = self.fc
        t0 = time.perf_counter()
        paths = [plan.piece_path(fc.workdir, piece) for piece in plan.pieces]
        files = [h5py.File(path, "r") for path in paths]
        buffers = fc.buffer_pool()
        try:
            def source(f, levels, rows):
                block = buffers.block(plan.layout, f, levels, rows)
                records = (0,) * plan.layout.records(f)
                for piece, h5 in zip(plan.pieces, files):
                    start, stop = piece.rows[f.dims[-2]]
                    picked = records + ((slice(levels.start, levels.stop),) if levels is not None else ())
                    dest = (slice(None),) * (levels is not None) + (slice(start - rows[0], stop - rows[0]),)
                    h5[f.name].read_direct(block, picked, dest)
                return block

            size, _ = fc.land(fc.workdir / plan.spec.path, plan.layout, source)
        finally:
            for h5 in files:
                h5.close()
        for path in paths:
            path.unlink()
        return size, time.perf_counter() - t0
