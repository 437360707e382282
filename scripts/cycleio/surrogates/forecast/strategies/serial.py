"""``serial``: blocks are gathered to rank 0, which writes them; all compute ranks wait until the hour is on storage.

A file whose data fit the buffer comes in one message per rank; a larger one block by block, each
block gathered with the other ranks' bands placed straight into it (derived datatypes). Rank 0
tells the other ranks when to make their next band, so making data (the stand-in's work, not the
model's) never overlaps the writes it is compared with.
"""

from __future__ import annotations

from .base import WriteStrategy

GO_TAG = 2**20  # rank 0's "make the next block" to the other ranks


class Serial(WriteStrategy):
    diskless = False

    @classmethod
    def one_writer(cls, layout) -> bool:
        return True  # rank 0

    def __init__(self, fc):
        super().__init__(fc)
        self.go = fc.message(1)  # the "make the next block" signal; its content is not read

    def output(self, index: int, plans: list) -> int:
        fc = self.fc
        nbytes = 0
        for number, plan in enumerate(plans):
            if plan.undecomposed:
                if fc.rank == 0:
                    fc.write_whole(plan)
                continue
            piece = plan.piece_of(fc.rank)
            others = {p.rank for p in plan.pieces} - {0}
            whole = plan.layout.data_bytes() <= fc.buffer_bytes
            if fc.rank == 0:
                gather = self.gather_file(plan, number, others) if whole else self.gather_blocks(plan, number, others)
                fc.write(fc.workdir / plan.spec.path, plan.layout, gather, diskless=self.diskless)
                nbytes += plan.layout.data_bytes() // max(len(plan.pieces), 1) if piece is not None else 0
            elif piece is not None:
                items, total = fc.band_items(plan, piece)
                chunks = [items] if whole else [[item] for item in items]
                for group in chunks:
                    fc.wait_all([fc.world.Irecv(self.go, source=0, tag=GO_TAG)])
                    message = fc.buffers.bytes(total if whole else group[0][4])
                    first = group[0][3]
                    for f, levels, shape, offset, size in group:
                        band = message[offset - first:offset - first + size].view(f.dtype).reshape(shape)
                        fc.make_rows(plan, f, levels, piece, band)
                    nbytes += message.nbytes
                    fc.wait_all([fc.world.Isend(message, dest=0, tag=number)])
        fc.barrier(fc.compute_comm)  # the hour is on storage: the compute ranks go on
        return nbytes

    def gather_blocks(self, plan, number: int, others: set[int]):
        """Rank 0's source for a large file: each block gathered with the bands placed by derived datatypes."""
        fc = self.fc
        piece = plan.piece_of(0)

        def gather(f, levels, rows):
            fc.wait_all([fc.world.Isend(self.go, dest=rank, tag=GO_TAG) for rank in others])
            block = fc.buffers.block(plan.layout, f, levels, rows)
            requests = fc.receive_bands(plan, f, levels, block, others, number)
            if piece is not None:  # rank 0 makes its own band in place
                start, stop = piece.rows[f.dims[-2]]
                fc.make_rows(plan, f, levels, piece, block[..., start - rows[0]:stop - rows[0], :])
            fc.wait_all(requests)
            return block
        return gather

    def gather_file(self, plan, number: int, others: set[int]):
        """Rank 0's source for a small file: every rank's bands of every field in one message."""
        fc = self.fc
        piece = plan.piece_of(0)
        messages: dict = {}

        def gather(f, levels, rows):
            if not messages:
                fc.wait_all([fc.world.Isend(self.go, dest=rank, tag=GO_TAG) for rank in others])
                requests = []
                for other in plan.pieces:
                    if other.rank in others:
                        items, total = fc.band_items(plan, other)
                        messages[other.rank] = (fc.message(total), {(i[0].name, i[1] and i[1].start): i
                                                                    for i in items}, other)
                        requests.append(fc.world.Irecv(messages[other.rank][0], source=other.rank, tag=number))
                fc.wait_all(requests)
            block = fc.buffers.block(plan.layout, f, levels, rows)
            for message, items, other in messages.values():
                _, _, shape, offset, size = items[(f.name, levels and levels.start)]
                start, stop = other.rows[f.dims[-2]]
                block[..., start - rows[0]:stop - rows[0], :] = message[offset:offset + size].view(f.dtype).reshape(shape)
            if piece is not None:
                start, stop = piece.rows[f.dims[-2]]
                fc.make_rows(plan, f, levels, piece, block[..., start - rows[0]:stop - rows[0], :])
            return block
        return gather
