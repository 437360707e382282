"""``quilt``: dedicated writer ranks (write groups) take the hour's blocks and write while compute ranks go on.

``write_groups`` x ``write_tasks_per_group`` writer ranks follow the compute ranks. Output hour i
goes to group i mod write_groups; file j of the hour to task j mod write_tasks_per_group. Compute
ranks hand their blocks over with synchronous sends (MPI_Issend) and go on as soon as the group
has taken them. A writer takes blocks while they fit its buffer (``writer_buffer_bytes``, 1 GiB),
so a group still writing an earlier hour, or an hour larger than its buffer, makes the hand-off
wait, as in the model.
"""

from __future__ import annotations

import time

from ..errors import ForecastError
from .base import WriteStrategy


class Quilt(WriteStrategy):
    @classmethod
    def writer_ranks(cls, layout) -> int:
        return layout.write_groups * layout.tasks_per_group

    @classmethod
    def one_writer(cls, layout) -> bool:
        return cls.writer_ranks(layout) == 1

    def assignments(self, index: int, plans: list) -> list[tuple]:
        """(plan, writer rank) of each file of hour ``index``."""
        layout = self.fc.layout
        group = index % layout.write_groups
        return [(plan, layout.writer_rank(group, j % layout.tasks_per_group)) for j, plan in enumerate(plans)]

    def taker(self, index: int, number: int, source: int) -> int:
        """The writer rank that takes compute rank ``source``'s bands of file ``number`` of hour ``index``."""
        layout = self.fc.layout
        return layout.writer_rank(index % layout.write_groups, number % layout.tasks_per_group)

    @staticmethod
    def tag(index: int, number: int) -> int:
        """Messages of hour ``index``, file ``number`` of the hour: a tag of their own."""
        return index * 4096 + number

    def handoff_packs(self, index: int, plans: list, writer: int, source: int) -> list[list[tuple]]:
        """What ``source`` hands ``writer`` this hour, in write order, packed into messages of at most the buffer.

        Each item is (file number, plan, field, levels, band shape, byte offset in its pack, bytes).
        Small blocks share a message (a restart set at C48 is about a thousand blocks), large ones
        go alone.
        """
        fc = self.fc
        packs: list[list[tuple]] = [[]]
        used = 0
        for number, plan in enumerate(plans):
            piece = plan.piece_of(source)
            if plan.undecomposed or piece is None or self.taker(index, number, source) != writer:
                continue
            items, _ = fc.band_items(plan, piece)
            for f, levels, shape, _, size in items:
                if packs[-1] and used + size > fc.buffer_bytes:
                    packs.append([])
                    used = 0
                packs[-1].append((number, plan, f, levels, shape, used, size))
                used += size
        return [pack for pack in packs if pack]

    @staticmethod
    def pack_bytes(pack: list[tuple]) -> int:
        *_, offset, size = pack[-1]
        return offset + size

    def output(self, index: int, plans: list) -> int:
        """Hand this rank's bands of the hour's blocks to the writers; returns when the writers took them all.

        A synchronous send completes when the writer has posted its receive, which it does while the
        hour fits its buffer: a writer still busy with an earlier hour, or an hour larger than its
        buffer, keeps the compute ranks waiting, as in the model.
        """
        fc = self.fc
        requests, nbytes, in_flight = [], 0, 0
        writers = sorted({self.taker(index, number, fc.rank) for number in range(len(plans))})
        for writer in writers:
            for number, pack in enumerate(self.handoff_packs(index, plans, writer, fc.rank)):
                message = fc.message(self.pack_bytes(pack))
                for _, plan, f, levels, shape, offset, size in pack:
                    band = message[offset:offset + size].view(f.dtype).reshape(shape)
                    fc.make_rows(plan, f, levels, plan.piece_of(fc.rank), band)
                nbytes += message.nbytes
                requests.append((fc.world.Issend(message, dest=writer, tag=self.tag(index, number)), message.nbytes))
                in_flight += message.nbytes
                while in_flight > fc.writer_buffer_bytes and len(requests) > 1:  # bound what waits in flight
                    request, size = requests.pop(0)
                    fc.wait_all([request])
                    in_flight -= size
        fc.wait_all([request for request, _ in requests])
        return nbytes

    def writer_loop(self) -> None:
        fc = self.fc
        for index, (hour, plans) in enumerate(fc.hours):
            mine = [(number, plan) for number, (plan, writer) in enumerate(self.assignments(index, plans))
                    if writer == fc.rank]
            if not mine:
                continue
            window = QuiltWindow(self, index, plans)
            for number, plan in mine:
                if plan.undecomposed:
                    fc.write_whole(plan)
                else:
                    fc.write(fc.workdir / plan.spec.path, plan.layout, window.source(number, plan))
            fc.record_overheads(fc.take_overheads(), time.time(), f"f{hour:03d}")
        fc.barrier(fc.world)


class QuiltWindow:
    """A writer's receive window over the hour's messages from every compute rank, bounded by its buffer.

    Receives are posted ahead while the messages fit the writer's buffer, and the writer waits for
    all of them before it writes: it cannot answer the compute ranks while it is inside the netCDF
    library, so taking the whole window first is what lets them go on (as the model's write group
    takes the hour before writing it). A message's memory is freed once all its blocks are written,
    making room for the next receives.
    """

    def __init__(self, quilt: Quilt, index: int, plans: list):
        self.quilt, self.fc, self.index = quilt, quilt.fc, index
        # message k of every compute rank, in order; bands of a block come from every rank's messages
        self.pending: list[tuple[int, int, list[tuple]]] = []
        for source in range(self.fc.layout.compute):
            for number, pack in enumerate(quilt.handoff_packs(index, plans, self.fc.rank, source)):
                self.pending.append((number, source, pack))
        self.pending.sort(key=lambda item: (item[0], item[1]))
        self.bands: dict[tuple, tuple] = {}  # (file, field, level start, source) -> (band, message key)
        self.messages: dict[tuple[int, int], list] = {}  # (number, source) -> [buffer, request, blocks left]
        self.requests: list = []
        self.held = 0
        self.fill()

    def fill(self) -> None:
        fc = self.fc
        while self.pending:
            number, source, pack = self.pending[0]
            size = self.quilt.pack_bytes(pack)
            if self.messages and self.held + size > fc.writer_buffer_bytes:
                return
            self.pending.pop(0)
            message = fc.message(size)
            request = fc.world.Irecv(message, source=source, tag=self.quilt.tag(self.index, number))
            self.messages[(number, source)] = [message, request, len(pack)]
            self.requests.append(request)
            self.held += size
            for file_number, _, f, levels, shape, offset, nbytes in pack:
                band = message[offset:offset + nbytes].view(f.dtype).reshape(shape)
                key = (file_number, f.name, None if levels is None else levels.start, source)
                self.bands[key] = (band, (number, source))

    def source(self, number: int, plan, pieces: list | None = None):
        """The writer's source of file ``number``'s blocks: the bands of ``pieces`` (default: every piece)."""
        fc = self.fc
        pieces = plan.pieces if pieces is None else pieces

        def take(f, levels, rows):
            level = None if levels is None else levels.start
            first = (number, f.name, level, pieces[0].rank)
            if first not in self.bands:
                raise ForecastError(f"writer rank {fc.rank} has no hand-off for {plan.spec.path} {f.name}")
            fc.wait_all(self.requests)  # the whole window: the compute ranks are free once it is taken
            self.requests = []
            block = fc.buffers.block(plan.layout, f, levels, rows)
            for piece in pieces:
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
