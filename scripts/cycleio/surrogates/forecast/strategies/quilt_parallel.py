"""``quilt_parallel``: each write group writes its hour's files together through MPI-IO while compute ranks go on.

As ``quilt`` (output hour i goes to write group i mod write_groups, the compute ranks hand their
bands over and go on), but a group's ``write_tasks_per_group`` ranks write every file of the hour
together into the one shared file (mpiio.py), instead of a file per task: task t takes the bands of
a contiguous run of compute ranks (t*C/T up to (t+1)*C/T of C compute ranks and T tasks), so it
holds a contiguous band of rows of every file, which it writes in its share of the collective
writes. Needs at least as many compute ranks as tasks per group. Files without synthetic fields
are written whole by task j mod T of the group, as quilt does.
"""

from __future__ import annotations

import time

from .parallel import SharedFile
from .quilt import Quilt, QuiltWindow


def span(pieces: list) -> dict[str, tuple[int, int]]:
    """The rows that contiguous pieces cover together, per row dimension."""
    return {dim: (min(p.rows[dim][0] for p in pieces), max(p.rows[dim][1] for p in pieces)) for dim in pieces[0].rows}


class QuiltParallel(SharedFile, Quilt):
    def __init__(self, fc):
        super().__init__(fc)
        from mpi4py import MPI

        layout = fc.layout
        # Every rank of the program takes part in splitting off the write groups (compute ranks get none).
        group = MPI.UNDEFINED if fc.is_compute else (fc.rank - layout.compute) // layout.tasks_per_group
        self.group_world = fc.world.Split(group, fc.rank)

    def task_of(self, source: int) -> int:
        """The task of a write group that takes compute rank ``source``'s bands."""
        layout = self.fc.layout  # task t takes compute ranks t*C//T up to (t+1)*C//T (layout.row_bounds)
        return next(task for task in range(layout.tasks_per_group)
                    if source < (task + 1) * layout.compute // layout.tasks_per_group)

    def taker(self, index: int, number: int, source: int) -> int:
        return self.fc.layout.writer_rank(index % self.fc.layout.write_groups, self.task_of(source))

    def writer_loop(self) -> None:
        fc = self.fc
        layout = fc.layout
        tasks = layout.tasks_per_group
        group, task = divmod(fc.rank - layout.compute, tasks)
        for index, (hour, plans) in enumerate(fc.hours):
            if index % layout.write_groups != group:
                continue
            window = QuiltWindow(self, index, plans)
            for number, plan in enumerate(plans):
                if plan.undecomposed:
                    if number % tasks == task:
                        fc.write_whole(plan)
                    continue
                held = [[piece for piece in plan.pieces if self.task_of(piece.rank) == t] for t in range(tasks)]
                members = tuple(t for t in range(tasks) if held[t])
                comm = self.group_comm(self.group_world, members, task)
                if comm is None:
                    continue
                self.write_shared(plan, comm, span(held[task]), [span(held[t]) for t in members],
                                  window.source(number, plan, held[task]))
            fc.record_overheads(fc.take_overheads(), time.time(), f"f{hour:03d}")
        fc.barrier(fc.world)
